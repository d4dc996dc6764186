"""Where a run's steady state begins, and its start-up kept apart (as OpenMessaging Benchmark keeps its warm-up).

A run's first seconds measure the cold start (JVM JIT, Spark's codegen, the first batches reading what piled up
while the query started), not the setting under test: `steady` at 3,000 events/s reads p99 8.9 s, 5.1 s, 2.1 s,
then 1.4-1.6 s over its tenths. The headline latency and throughput come from the steady part only.

**Method: MSER-5** (White, "An effective truncation heuristic for bias reduction in simulation output",
Simulation 69(6), 1997; Spratt's batch-means form, 1998). The observations are the per-second p99 latency of the
events intended in each second of the measured window (the producers' warm-up, if any, is already out). They are
grouped in blocks of 5 s and averaged; for each truncation d (in blocks, 0 <= d <= m/2 of the m blocks) the
statistic is the squared standard error of the mean of what remains, sum((Y_i - mean)^2) / (m - d)^2; the
truncation with the smallest statistic is where the steady state begins. Bounded by half the window (MSER's own
rule: a larger truncation means no steady state was found in the window) and by the first fault's injection (a
fault's disturbance is the fault's, reported per fault in harness.analysis.recovery, never cut away as
start-up). With fewer than MIN_BLOCKS blocks (a window under 20 s) nothing is cut: the whole window is the
headline and `detected` says why. An output without per-event latency (a user's oracle judges windowed counts)
has no latency series: its lag samples stand in (the cold start shows as the backlog it leaves), in blocks of
as many samples as make about 5 s.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from harness.records.histsummary import Hist, grouped_percentile

BLOCK_S = 5
MIN_BLOCKS = 4
METHOD = ("MSER-5 (White 1997): the series in blocks of about 5 s; the truncation (at most half the window, never "
          "past the first fault) minimising the squared standard error of the remaining blocks' mean")


def mser_truncation(values: Sequence[float], block: int = BLOCK_S, max_index: int | None = None) -> int | None:
    """The index of the first steady observation (a multiple of `block`) by MSER over `block`-sized batch means,
    at most half the observations and at most `max_index`; None when there are fewer than MIN_BLOCKS blocks."""
    m = len(values) // block
    if m < MIN_BLOCKS:
        return None
    y = np.asarray(values[:m * block], dtype=float).reshape(m, block).mean(axis=1)
    last = m // 2 if max_index is None else min(m // 2, max(0, max_index // block))
    best, best_d = np.inf, 0
    for d in range(last + 1):
        rest = y[d:]
        stat = float(((rest - rest.mean()) ** 2).sum()) / len(rest) ** 2
        if stat < best * (1 - 1e-9):  # the first of equal minima: cut no more than needed
            best, best_d = stat, d
    return best_d * block


def per_second_p99(per_second: dict, start_s: int, end_s: int) -> tuple[list[int], list[float]]:
    """(second, p99 ms) of every second in [start_s, end_s) that had delivered events (the checker's per-second
    buckets: harness.records.histsummary)."""
    if not per_second or not len(per_second.get("n", [])):
        return [], []
    s, b, n = (np.asarray(per_second[k], dtype=np.int64) for k in ("s", "bucket_us", "n"))
    keep = (s >= start_s) & (s < end_s)
    if not keep.any():
        return [], []
    t, p99 = grouped_percentile(s[keep], b[keep], n[keep], 99.0)
    return t.tolist(), (p99 / 1000.0).tolist()


def hist_between(per_second: dict, start_s: float, end_s: float | None = None) -> Hist:
    """The latency distribution of the events intended in seconds [start_s, end_s) since t0."""
    if not per_second or not len(per_second.get("n", [])):
        return Hist()
    s, b, n = (np.asarray(per_second[k], dtype=np.int64) for k in ("s", "bucket_us", "n"))
    keep = (s >= start_s) & (s < (np.inf if end_s is None else end_s))
    values, inverse = np.unique(b[keep], return_inverse=True)
    return Hist(values.astype(np.int64), np.bincount(inverse, weights=n[keep], minlength=len(values)).astype(np.int64))


def steady_window(per_second: dict, measured_from_s: float, traffic_end_s: float,
                  first_fault_s: float | None = None, lag: list[tuple[float, float]] | None = None) -> dict[str, Any]:
    """Where the steady state begins (seconds since t0) by MSER-5 over the measured window's per-second p99; an
    output without per-event latency (a user's oracle judges it) uses the lag samples `lag` ((s since t0, lag))
    instead: its start-up is the backlog the cold start leaves."""
    start, end = int(np.ceil(measured_from_s)), int(np.floor(traffic_end_s))
    seconds, values = per_second_p99(per_second, start, end)
    series, block = "per-second p99 latency", BLOCK_S
    if not values and lag:
        seconds = [t for t, _ in lag if measured_from_s <= t < traffic_end_s]
        values = [v for t, v in lag if measured_from_s <= t < traffic_end_s]
        series = "consumer lag samples (the output has no per-event latency)"
        if len(seconds) > 1:  # blocks of about 5 s whatever the sampling period (Event Hubs: about 1.8 s)
            block = max(1, round(BLOCK_S / float(np.median(np.diff(seconds)))))
    out: dict[str, Any] = {"method": METHOD, "series": series, "measured_from_s": measured_from_s,
                           "to_s": traffic_end_s, "from_s": measured_from_s, "detected": False,
                           "blocks": len(values) // block, "block_observations": block}
    limit = None if first_fault_s is None else sum(1 for t in seconds if t < first_fault_s)
    cut = mser_truncation(values, block=block, max_index=limit)
    if cut is None:
        out["reason"] = (f"{len(values)} observations ({series}) in the measured window: MSER-5 needs at least "
                         f"{MIN_BLOCKS * block}; the whole window is the headline")
        return out
    out.update(detected=True, cut_observations=cut,
               reason=("no start-up transient found: the whole window is steady" if cut == 0 else
                       f"the first {cut} observations of the measured window are start-up"))
    if cut:
        out["from_s"] = float(seconds[cut])
    return out


def measured_is_steady(measured_from_s: float, traffic_end_s: float, warmup_end: dict[str, Any]) -> dict[str, Any]:
    """The steady window after a caught_up warm-up (harness.analysis.warmup): the whole measured window, which
    began once the query had caught up with its start; nothing is cut (the declared duration is what is judged)."""
    return {"method": "caught_up warm-up (harness.analysis.warmup): the measured window began once the query had "
                      "caught up with its start", "series": None, "measured_from_s": measured_from_s,
            "to_s": traffic_end_s, "from_s": measured_from_s, "detected": warmup_end.get("ended") == "caught_up",
            "reason": warmup_end.get("reason") or "the warm-up's end was not recorded"}


def startup_figures(per_second: dict, steady: dict, progress_times: list[tuple[float, int]], t0: float,
                    run_started: float | None) -> dict[str, Any]:
    """The start-up on its own: time to the first batch and to the first batch with data (its commit), from the
    traffic's start and from `harness run`'s; the cold part's latency (measured window before the steady state).
    `progress_times`: (commit time, input rows) per batch, epoch s."""
    first = min((t for t, _ in progress_times), default=None)
    first_data = min((t for t, rows in progress_times if rows > 0 and t >= t0), default=None)
    cold = hist_between(per_second, steady["measured_from_s"], steady["from_s"])

    def since(at: float | None, origin: float | None) -> float | None:
        return None if at is None or origin is None else round(at - origin, 3)

    return {"steady_from_s": steady["from_s"], "cold_s": round(steady["from_s"] - steady["measured_from_s"], 3),
            "first_batch_from_run_start_s": since(first, run_started),
            "first_data_batch_from_run_start_s": since(first_data, run_started),
            "first_data_batch_from_traffic_s": since(first_data, t0),
            "traffic_from_run_start_s": since(t0, run_started),
            "cold_events": cold.total, "cold_latency_ms": cold.percentiles()}
