"""Consumer lag over time: what the broker held minus what the query had committed, sampled once a second.

Spark's own progress cannot show it (without a rate limit every batch reads up to the latest offset it saw, so
`latestOffset - endOffset` is 0 even when the query is far behind): the runner samples the broker's end offsets
(harness.samplers.lag, lag.jsonl) and each batch's commit is known from its progress record (start timestamp +
triggerExecution).
"""
from __future__ import annotations

import numpy as np

from harness.analysis.progress import commit_s, parse_offsets


def committed_timeline(progress: list[dict]) -> list[tuple[float, dict[str, int]]]:
    """(commit time, per-partition end offset) of each batch, in commit order."""
    out = []
    for p in progress:
        sources = p.get("sources") or []
        if not sources or "timestamp" not in p:
            continue
        end = parse_offsets(sources[0].get("endOffset"))
        if not end:
            continue
        parts: dict[str, int] = {}
        for value in end.values():  # {stream: {partition: offset}}
            if isinstance(value, dict):
                parts.update({str(k): int(v) for k, v in value.items()})
        done = commit_s(p)
        out.append((done, parts))
    out.sort(key=lambda x: x[0])
    return out


def lag_by_partition(samples: list[dict], progress: list[dict]) -> list[tuple[float, dict[str, int]]]:
    """(t, {partition: lag}) per sample: events on the broker not yet committed by the query at that moment."""
    commits = committed_timeline(progress)
    out, i, committed = [], 0, {}
    for s in sorted(samples, key=lambda x: x["t"]):
        while i < len(commits) and commits[i][0] <= s["t"]:
            committed = commits[i][1]
            i += 1
        out.append((s["t"], {p: max(0, int(end) - committed.get(p, 0)) for p, end in s["end"].items()}))
    return out


def lag_series(samples: list[dict], progress: list[dict]) -> list[dict]:
    """[{t, lag}] per sample, summed over partitions."""
    return [{"t": t, "lag": sum(parts.values())} for t, parts in lag_by_partition(samples, progress)]


def lag_summary(series: list[dict]) -> dict:
    if not series:
        return {"max": 0, "mean": 0.0, "final": 0, "samples": 0}
    values = [x["lag"] for x in series]
    return {"max": max(values), "mean": sum(values) / len(values), "final": values[-1], "samples": len(values)}


def lag_on_grid(samples: list[dict], progress: list[dict], start: float, end: float,
                step: float = 0.1) -> list[tuple[float, float]]:
    """(t, lag) every `step` seconds in [start, end]: the broker's end offsets interpolated between samples (paced
    producers: between two samples a second apart they grow almost linearly) less what the query had committed
    by then (a step at each commit). Averaged, it is the lag over time whatever the phase of the samples against
    the trigger (1 s samples of a 1 s trigger's sawtooth always land at the same point of it)."""
    pts = sorted((float(s["t"]), float(sum(int(v) for v in s["end"].values()))) for s in samples if s.get("end"))
    if len(pts) < 2:
        return []
    ts = np.arange(max(start, pts[0][0]), min(end, pts[-1][0]), step)
    ends = np.interp(ts, [t for t, _ in pts], [v for _, v in pts])
    commits = committed_timeline(progress)
    ct = np.array([t for t, _ in commits], dtype=float)
    cv = np.array([float(sum(parts.values())) for _, parts in commits])
    idx = np.searchsorted(ct, ts, side="right") - 1
    committed = np.where(idx >= 0, cv[np.maximum(idx, 0)] if len(cv) else 0.0, 0.0)
    return list(zip(ts.tolist(), np.maximum(0.0, ends - committed).tolist()))
