"""Whether a query kept up with what was offered: the figures (harness.checkers.sustained judges them, for a run's
verdict and for a `harness capacity` trial alike).

Over the judged window (the steady part of the measured window, harness.analysis.steady, minus each fault's span
from its injection to its recovery, harness.analysis.recovery: what a fault does is judged per fault):
- **lag trend**: consumer lag (events on the broker not yet committed by the query, harness.analysis.lag, sampled
  about once a second) fitted by least squares against time: the slope (events/s) with its standard error, and
  the fitted lag at the window's end; in seconds of lag too (divided by the offered rate). Each judged interval
  (the window split by the faults' spans) has its own intercept: what a fault left behind is a level, not a
  trend.
- **processed against offered**: the least-squares slope of the offsets the query committed against their commit
  times (what it processed per second), and of the broker's end offsets against the sample times (what was
  offered per second). Slopes, not end points: one batch more or less at either end of a short window moves an
  end-point rate by a whole batch.
- **batch duration**: the median `triggerExecution` of the batches with data that started in the window.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from harness.analysis.lag import committed_timeline, lag_on_grid, lag_series
from harness.analysis.progress import epoch_s

Interval = tuple[float, float]


def judged_intervals(start: float, end: float, excluded: Iterable[Interval]) -> list[Interval]:
    """[start, end] without the excluded spans."""
    out = [(start, end)]
    for lo, hi in sorted(excluded):
        nxt = []
        for a, b in out:
            if hi <= a or lo >= b:
                nxt.append((a, b))
                continue
            if lo > a:
                nxt.append((a, lo))
            if hi < b:
                nxt.append((hi, b))
        out = nxt
    return [(a, b) for a, b in out if b > a]


def inside(t: float, intervals: list[Interval]) -> bool:
    return any(a <= t <= b for a, b in intervals)


def fit(points: list[tuple[float, float]], groups: list[int] | None = None) -> dict[str, float] | None:
    """Least squares v = a_g + b t with an intercept per group (the judged intervals: a fault between two of them
    may leave the level changed, and the slope is the trend within them): the common slope b, its standard error
    (residuals' variance over n - groups - 1 degrees of freedom), and the means of the last group (the latest
    in t); None without a degree of freedom or spread in t. One group is ordinary least squares."""
    by: dict[int, list[tuple[float, float]]] = {}
    for (t, v), g in zip(points, groups or [0] * len(points)):
        by.setdefault(g, []).append((t, v))
    n, dof = len(points), len(points) - len(by) - 1
    if dof < 1:
        return None
    means = {g: (sum(t for t, _ in pts) / len(pts), sum(v for _, v in pts) / len(pts)) for g, pts in by.items()}
    sxx = sum((t - means[g][0]) ** 2 for g, pts in by.items() for t, _ in pts)
    if sxx <= 0:
        return None
    slope = sum((t - means[g][0]) * (v - means[g][1]) for g, pts in by.items() for t, v in pts) / sxx
    rss = sum((v - means[g][1] - slope * (t - means[g][0])) ** 2 for g, pts in by.items() for t, v in pts)
    last = max(by, key=lambda g: max(t for t, _ in by[g]))
    return {"slope": slope, "se": math.sqrt(rss / dof / sxx), "mean_t": means[last][0], "mean_v": means[last][1],
            "n": n}


def interval_of(t: float, intervals: list[Interval]) -> int:
    return next(i for i, (a, b) in enumerate(intervals) if a <= t <= b)


def sustain_figures(lag_samples: list[dict], progress: list[dict], start: float, end: float,
                    excluded: Iterable[Interval] = ()) -> dict[str, Any]:
    """The figures above over [start, end] (epoch s) without `excluded`."""
    excluded = [(float(a), float(b)) for a, b in excluded]
    intervals = judged_intervals(start, end, excluded)
    judged_s = sum(b - a for a, b in intervals)
    out: dict[str, Any] = {"window": [start, end], "excluded": [list(x) for x in excluded],
                           "judged_s": round(judged_s, 3), "samples": 0, "lag": None, "offered_eps": None,
                           "processed_eps": None, "batch_p50_ms": None, "batches": 0}
    lag = [(float(s["t"]), float(s["lag"])) for s in lag_series(lag_samples, progress) if inside(s["t"], intervals)]
    out["samples"] = len(lag)
    trend = fit(lag, [interval_of(t, intervals) for t, _ in lag])
    if trend is not None:
        last = max(b for _, b in intervals)
        out["lag"] = {"slope_eps": trend["slope"], "slope_se_eps": trend["se"],
                      "end_lag": max(0.0, trend["mean_v"] + trend["slope"] * (last - trend["mean_t"])),
                      "max_lag": max(v for _, v in lag)}
        grid = [v for t, v in lag_on_grid(lag_samples, progress, start, end) if inside(t, intervals)]
        out["lag"]["mean_lag"] = sum(grid) / len(grid) if grid else None  # over time, not over samples
    ends = [(float(s["t"]), float(sum(int(v) for v in s["end"].values())))
            for s in lag_samples if s.get("end") and inside(s["t"], intervals)]
    offered = fit(ends, [interval_of(t, intervals) for t, _ in ends])
    out["offered_eps"] = offered["slope"] if offered else None
    commits = [(t, float(sum(parts.values()))) for t, parts in committed_timeline(progress) if inside(t, intervals)]
    processed = fit(commits, [interval_of(t, intervals) for t, _ in commits])
    out["processed_eps"] = processed["slope"] if processed else None
    out["commits"] = len(commits)
    durations = sorted(p.get("durationMs", {}).get("triggerExecution", 0) for p in progress
                       if p.get("numInputRows", 0) > 0 and "timestamp" in p
                       and inside(epoch_s(p["timestamp"]), intervals))
    out["batches"] = len(durations)
    if durations:
        mid = len(durations) // 2
        out["batch_p50_ms"] = float(durations[mid] if len(durations) % 2 else
                                    (durations[mid - 1] + durations[mid]) / 2.0)
    if out["lag"] and out["offered_eps"]:
        rate = out["offered_eps"]
        out["lag"].update(slope_s_per_s=out["lag"]["slope_eps"] / rate, end_lag_s=out["lag"]["end_lag"] / rate)
    return out
