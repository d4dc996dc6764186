"""Drawing a long run without drawing every sample: a 2-hour soak has 7,200 batches, seconds and lag samples, and
an SVG path or bar per point would make its report.html pass 8 MB. Beyond MOST points a series is cut into bins
of consecutive samples and each bin is drawn by its extremes: the samples holding its lowest and its highest
value, at their own x, so a single slow batch, a lag spike or a latency dip still shows exactly where and as high
as it was. Only the drawing is thinned: every figure the report states in words (percentiles, counts, maxima,
verdicts) is computed from the full data before any of this (harness.analysis.series keeps the full series).

A figure that was binned says so in its caption (`note`) and in its `data-binned` attribute (reports.charts).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MOST = 1000  # points a line keeps unbinned; binned, at most this many (two extremes per bin)
COLUMNS = 600  # columns of a heatmap: its axes are 700 px wide in the SVG's embedded image, so none is dropped


def bin_size(n: int, most: int = MOST, per_bin: int = 2) -> int:
    """Samples per bin so that n samples draw as at most `most` points when each bin keeps `per_bin` of them; 1
    (unbinned) when n already fits."""
    if n <= most:
        return 1
    return math.ceil(n * per_bin / most)


def extreme_rows(values: Sequence[float], k: int) -> np.ndarray:
    """Row numbers to draw of a series binned k at a time: each bin's lowest and highest sample (the first of
    equals), in order; every row when k == 1. NaN (a missing value) is never an extreme unless a bin is all NaN."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    if k <= 1 or n <= 2:
        return np.arange(n)
    bins = -(-n // k)
    pad = np.full(bins * k, np.nan)
    pad[:n] = v
    grid = pad.reshape(bins, k)
    nan = np.isnan(grid)
    lo = np.where(nan, np.inf, grid).argmin(axis=1)
    hi = np.where(nan, -np.inf, grid).argmax(axis=1)
    base = np.arange(bins) * k
    rows = np.unique(np.concatenate([base + lo, base + hi]))
    return rows[rows < n]


def extremes(x: Sequence[float], y: Sequence[float], k: int) -> tuple[list, list]:
    """(x, y) of the samples extreme_rows keeps."""
    rows = extreme_rows(y, k)
    xs, ys = np.asarray(x), np.asarray(y)
    return xs[rows].tolist(), ys[rows].tolist()


def bin_columns(matrix: np.ndarray, k: int, reduce: np.ufunc = np.maximum) -> np.ndarray:
    """A heatmap's columns (samples) binned k at a time by the ufunc `reduce` (maximum: the furthest behind in the
    bin); the last bin may be shorter. The matrix itself when k == 1."""
    if k <= 1:
        return matrix
    return reduce.reduceat(matrix, np.arange(0, matrix.shape[1], k), axis=1)


def note(k: int, what: str, unit: str = "point", kept: str = "extremes kept") -> str:
    """The caption's words for a binned figure ('' when it is not)."""
    return f" {what.capitalize()} binned {k:,} to a {unit}, {kept}." if k > 1 else ""
