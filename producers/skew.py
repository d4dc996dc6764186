"""Partition skew figures from per-partition event counts."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["skew_figures", "share_deviation"]


def skew_figures(counts: Sequence[int]) -> dict:
    """Skew of a per-partition count vector.

    Returns a dict with ``partitions``, ``total``, ``shares`` (count / total),
    ``mean``, ``min``, ``max``, ``max_mean_share`` (max / mean: 1.0 = perfectly
    even, P = everything on one partition), ``min_mean_share`` (min / mean),
    ``gini`` (0 = even, (P-1)/P = all on one partition), ``cv`` (population
    standard deviation / mean) and ``hottest`` (index of the max).  With a zero
    total the ratio figures are None and shares are all 0.
    """
    xs = [int(c) for c in counts]
    if not xs:
        raise ValueError("counts must not be empty")
    if any(c < 0 for c in xs):
        raise ValueError("counts must be >= 0")
    n = len(xs)
    total = sum(xs)
    mean = total / n
    mx, mn = max(xs), min(xs)
    out: dict = {
        "partitions": n,
        "total": total,
        "mean": mean,
        "min": mn,
        "max": mx,
        "hottest": xs.index(mx),
        "shares": [c / total if total else 0.0 for c in xs],
    }
    if total == 0:
        out.update(max_mean_share=None, min_mean_share=None, gini=None, cv=None)
        return out
    var = sum((c - mean) ** 2 for c in xs) / n
    srt = sorted(xs)
    # Gini = sum_i sum_j |x_i - x_j| / (2 n^2 mean) via the sorted-rank formula.
    gini = (2.0 * sum((i + 1) * c for i, c in enumerate(srt))) / (n * total) - (n + 1) / n
    out.update(
        max_mean_share=mx / mean,
        min_mean_share=mn / mean,
        gini=max(0.0, gini),
        cv=math.sqrt(var) / mean,
    )
    return out


def share_deviation(counts: Sequence[int], expected_shares: Sequence[float]) -> dict:
    """Observed vs expected per-partition shares.

    ``max_abs`` = largest |observed - expected| share; ``tvd`` = total variation
    distance (half the L1 distance); ``chi2`` = Pearson statistic against the
    expected counts (partitions with expected share 0 are counted in ``unexpected``).
    """
    if len(counts) != len(expected_shares):
        raise ValueError("counts and expected_shares differ in length")
    total = sum(counts)
    es = [float(e) for e in expected_shares]
    s = sum(es)
    es = [e / s for e in es] if s > 0 else es
    obs = [c / total if total else 0.0 for c in counts]
    diffs = [o - e for o, e in zip(obs, es)]
    chi2 = 0.0
    unexpected = 0
    for c, e in zip(counts, es):
        if e > 0:
            exp = e * total
            chi2 += (c - exp) ** 2 / exp
        elif c:
            unexpected += c
    return {
        "max_abs": max((abs(d) for d in diffs), default=0.0),
        "tvd": 0.5 * sum(abs(d) for d in diffs),
        "chi2": chi2,
        "dof": sum(1 for e in es if e > 0) - 1,
        "unexpected": unexpected,
    }
