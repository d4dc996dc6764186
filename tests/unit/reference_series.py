"""The per-event array definitions the fixed-size summaries replaced (reports.series' per-second latency and
percentile curve, reports.compare's latency windows as they stood before the checker summarised latency in
HdrHistogram buckets): the references the summaries are held to. Not used by the harness."""
from __future__ import annotations

import numpy as np
import pandas as pd

from reports.series import LEVELS


def per_second_latency(latency_ms: np.ndarray, intended_ms: np.ndarray, t0: float) -> dict[str, list]:
    """p50 / p99 / max latency of the events intended in each whole second since t0 (numpy's linear
    interpolation), and how many were visible (sink commit time = intended + latency) in each second."""
    if not len(latency_ms):
        return {"t": [], "latency_p50": [], "latency_p99": [], "latency_max": [], "visible_t": [], "visible": []}
    frame = pd.DataFrame({"s": np.floor(intended_ms / 1000.0 - t0).astype(int), "ms": latency_ms})
    groups = frame.groupby("s")["ms"]
    q = groups.quantile([0.5, 0.99]).unstack()
    visible = np.floor((intended_ms + latency_ms) / 1000.0 - t0).astype(int)
    vs, vn = np.unique(visible, return_counts=True)
    return {"t": [int(s) for s in q.index], "latency_p50": _round(q[0.5]), "latency_p99": _round(q[0.99]),
            "latency_max": _round(groups.max()), "visible_t": vs.tolist(), "visible": vn.tolist()}


def percentile_curve(latency_ms: np.ndarray) -> list[list[float]]:
    if not len(latency_ms):
        return []
    return [[level, round(float(v), 2)] for level, v in zip(LEVELS, np.percentile(latency_ms, LEVELS))]


def latency_windows(latency_ms: np.ndarray, intended_ms: np.ndarray, windows: int = 10) -> list[dict]:
    """The measured window cut into `windows` equal spans of intended send time, with each span's percentiles."""
    if len(latency_ms) < windows * 10:
        return []
    lo, hi = float(intended_ms.min()), float(intended_ms.max())
    edges = np.linspace(lo, hi, windows + 1)
    which = np.clip(np.searchsorted(edges, intended_ms, side="right") - 1, 0, windows - 1)
    out = []
    for i in range(windows):
        values = latency_ms[which == i]
        if len(values):
            out.append({"from_ms": float(edges[i]), "n": int(len(values)),
                        **{k: float(np.percentile(values, q)) for k, q in
                           (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))}})
    return out


def _round(values) -> list[float]:
    return [round(float(v), 2) for v in values]
