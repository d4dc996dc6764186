"""reports.compare's latency windows as they stood before the checker summarised latency in HdrHistogram buckets
(per-event arrays): the reference the summary's windows are held to. Not used by the harness."""
from __future__ import annotations

import numpy as np


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
