"""The producers' own figures set against the rate they were asked for: per-second accuracy, and the key skew they
produced (producers.skew)."""
from __future__ import annotations

from harness.producers.skew import skew_figures


def skew_section(producers: dict) -> dict:
    events = producers.get("partition_events") or {}
    if not events:
        return {}
    counts = [events.get(p, 0) for p in range(max(events) + 1)]
    return {"skew": skew_figures(counts)}


def rate_accuracy(per_second: list[dict], rate, start_at: float, duration_s: float, produced: int) -> dict:
    """Achieved vs scheduled: overall, and for each second the events sent against the rate function's integral
    over that second (each row gets its `expected`); the worst whole second is the one furthest from 1."""
    scheduled = rate.cumulative(duration_s)
    ratios = []
    for row in per_second:
        lo = min(max(row["t"] - start_at, 0.0), duration_s)
        hi = min(max(row["t"] + 1 - start_at, 0.0), duration_s)
        row["expected"] = rate.cumulative(hi) - rate.cumulative(lo)
        if hi - lo == 1.0 and row["expected"] > 0:
            ratios.append(row["sent"] / row["expected"])
    return {"rate": {
        "achieved_over_target": produced / scheduled if scheduled else 0.0,
        "worst_second_ratio": max(ratios, key=lambda r: abs(r - 1.0)) if ratios else None,
        "whole_seconds": len(ratios), "buffer_full": sum(r["buffer_full"] for r in per_second),
    }}
