"""A run's performance figures, in one place: where its steady state begins and its start-up
(harness.analysis.steady), what each fault cost (harness.analysis.recovery), and whether the query kept up
(harness.analysis.sustain, judged by harness.checkers.sustained).

The order matters: the steady window first (the sustained figures are taken over it), then each fault's
recovery (its span, injection to recovery, is judged per fault and left out of the sustained figures), then the
sustained figures over what remains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.analysis.lag import lag_series
from harness.analysis.progress import commit_s
from harness.analysis.recovery import recoveries
from harness.analysis.steady import hist_between, measured_is_steady, startup_figures, steady_window
from harness.analysis.sustain import sustain_figures
from harness.records.histsummary import Hist


@dataclass
class Performance:
    steady: dict[str, Any]
    startup: dict[str, Any]
    latency: Hist  # the steady part's: the headline
    sustain: dict[str, Any]
    recovery: list[dict[str, Any]] = field(default_factory=list)
    trigger_interval_ms: float | None = None  # None: not a processing-time trigger


LAG_END_INTERVALS = 2.0  # the lag band: a query that keeps up is at most this many cadences of traffic behind


def cadence_s(trigger_interval_ms: float | None, batch_p50_ms: float | None) -> float:
    """How often the query commits: the trigger interval, or the batches' own time when they overrun it, at
    least 1 s (the lag samples' own period)."""
    return max((trigger_interval_ms or 0.0) / 1000.0, (batch_p50_ms or 0.0) / 1000.0, 1.0)


def performance(*, per_second: dict, measured_latency: Hist, t0: float, warmup_s: float, duration_s: float,
                progress: list[dict], lag_samples: list[dict], faults: list[dict], trigger_interval_ms: float | None,
                run_started: float | None, run_end: float, expected_lost_by_fault: dict[int, int] | None = None,
                lost_by_ack_second: dict[int, int] | None = None,
                duplicate_commits_ms: dict[float, int] | None = None,
                warmup_end: dict[str, Any] | None = None) -> Performance:
    """`warmup_end`: how a caught_up warm-up ended (harness.analysis.warmup); the measured window after it is
    the steady state by construction, so nothing of it is cut as start-up."""
    injected = sorted(float(f.get("inject_started_at") or f["injected_at"]) for f in faults
                      if f.get("injected_at") is not None)
    series = lag_series(lag_samples, progress)
    if warmup_end is not None:
        steady = measured_is_steady(warmup_s, warmup_s + duration_s, warmup_end)
    else:
        steady = steady_window(per_second, warmup_s, warmup_s + duration_s, (injected[0] - t0) if injected else None,
                               [(float(s["t"]) - t0, float(s["lag"])) for s in series])
    steady["t0"] = t0  # epoch s: the series' origin (harness compare finds the steady windows with it)
    headline = (measured_latency if steady["from_s"] <= steady["measured_from_s"]
                else hist_between(per_second, steady["from_s"]))
    commits = [(commit_s(p), p.get("numInputRows", 0)) for p in progress if "timestamp" in p]
    startup = startup_figures(per_second, steady, commits, t0, run_started)
    start, end = t0 + steady["from_s"], t0 + warmup_s + duration_s
    before = sustain_figures(lag_samples, progress, start, end)  # the offered rate and cadence, faults included
    rec = recoveries(faults, series, progress, t0=t0, traffic_end=end, run_end=run_end, steady_from=start,
                     offered_eps=before["offered_eps"],
                     cadence_s=cadence_s(trigger_interval_ms, before["batch_p50_ms"]),
                     duplicate_commits_s={ms / 1000.0: n for ms, n in (duplicate_commits_ms or {}).items()},
                     lost_acked_s={float(s): n for s, n in (lost_by_ack_second or {}).items()},
                     expected_lost_by_fault=expected_lost_by_fault)
    # a fault's span, left out of the sustained figures: from when its inject began to its recovery
    began = {(f.get("fault"), f.get("n")): float(f.get("inject_started_at") or f["injected_at"]) for f in faults
             if f.get("injected_at") is not None}
    spans = [(began.get((r["fault"], r["n"]), t0 + r["injected_s"]),
              t0 + r["recovered_s"] if r["recovered"] else run_end) for r in rec]
    sustain = sustain_figures(lag_samples, progress, start, end, spans) if spans else before
    return Performance(steady, startup, headline, sustain, rec, trigger_interval_ms)
