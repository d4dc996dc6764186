"""When a run's warm-up ends: once the query has caught up with its own start (OpenMessaging Benchmark's warm-up
phase, made to end on what it is for rather than on a fixed time).

Why: a query's first minute is its start-up (JVM, JIT, the first batches reading what piled up while it started).
A cold start on a busy machine put the first data batch 50 s after the run began; a fixed window then judged the
query *catching up* with that backlog (lag falling, batches longer than the trigger because they drained it) and
said it did not keep up. Traffic flows at the scenario's rate from the go; the measured window (duration_s, where
faults are timed from) starts only when the query is keeping up with it.

The decision, taken live by the runner about once a second over what the run has recorded (the broker's end
offsets, lag.jsonl, and the query's progress.jsonl):
- **caught_up**: a batch with data has committed, and either every lag sample of the last HOLD_CADENCES batch
  cadences (at least HOLD_SAMPLES of them, all after that commit) is within the band `sustained` judges the end
  lag by (band_intervals x the offered rate x the cadence: LAG_END_INTERVALS), or the lag has stopped falling:
  over the last FLAT_CADENCES cadences (at least FLAT_MIN_S, after that commit, with GROWTH_MIN_COMMITS commits)
  its least-squares slope is within TREND_FRACTION of the rate either way, its uncertainty (Z standard errors)
  included (a noisy fit that merely cannot show a fall is not a level). The second is a query that keeps up a few seconds behind (Event Hubs' Kafka endpoint at 1,000
  events/s sat 2-4 s behind, above a 2 s band, for two minutes): its start-up backlog is gone, what remains is its
  latency, which `sustained` does not judge either;
- **not_catching_up**: GROWTH_CADENCES cadences (at least GROWTH_MIN_S) after the first batch with data, with
  GROWTH_MIN_COMMITS commits in them, the lag is above the band and its least-squares slope over them is above
  TREND_FRACTION of the rate even at the low end of its uncertainty (slope - Z standard errors: `sustained`'s own
  rule for growth): the query falls further behind, waiting on is pointless (an overloaded query would otherwise hold every run to warmup_max_s);
- **max**: warmup_max_s passed without either.
The first is the only one after which keeping up can pass (harness.checkers.sustained says so for the others).
The cadence is the trigger interval, or the recent batches' median duration when they overrun it, at least 1 s
(harness.analysis.performance.cadence_s, as `sustained` uses it). A periodic rate (bursts, a sine) is taken at its
mean, and both trends are fitted over whole periods, at least PERIODS of them (whole_periods): over part of one, a
burst's backlog near the window's end read as a query falling behind.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from harness.analysis.lag import lag_series
from harness.analysis.performance import cadence_s
from harness.analysis.progress import commit_s
from harness.analysis.sustain import fit

HOLD_CADENCES = 2.0
HOLD_SAMPLES = 3
GROWTH_CADENCES = 6.0
GROWTH_MIN_S = 15.0
GROWTH_MIN_COMMITS = 3
FLAT_CADENCES = 10.0
FLAT_MIN_S = 20.0  # a 1 s sawtooth's fit is within 5% of the rate over about 20 samples, not 10
TREND_FRACTION = 0.05  # sustained's LAG_GROWTH_FRACTION: a slope within it either way is a level, not a trend
RECENT_BATCHES = 5  # the cadence from the median of the last few batches with data
Z = 2.0
PERIODS = 3  # a periodic rate's trends over at least this many whole periods
ENDINGS = ("caught_up", "not_catching_up", "max")


@dataclass(frozen=True)
class WarmupEnd:
    """How the warm-up ended: `ended` one of ENDINGS, `at` when that was decided (epoch s), with the figures."""
    ended: str
    at: float
    reason: str
    lag: float | None = None
    band: float | None = None
    cadence_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _data_commits(progress: list[dict], since: float) -> list[tuple[float, float]]:
    """(commit time, triggerExecution ms) of the batches with data that committed after `since`."""
    return sorted((commit_s(p), float(p.get("durationMs", {}).get("triggerExecution", 0))) for p in progress
                  if p.get("numInputRows", 0) > 0 and "timestamp" in p and commit_s(p) >= since)


def whole_periods(seconds: float, period_s: float | None) -> float:
    """`seconds`, for a periodic rate at least PERIODS periods and rounded up to whole ones: a lag fit over part of
    a period reads a burst near its end as growth (over N whole periods the shape's pull on the slope falls as
    1/N^2)."""
    if not period_s:
        return seconds
    return math.ceil(max(seconds, PERIODS * period_s) / period_s - 1e-9) * period_s


def decide(lag_samples: list[dict], progress: list[dict], *, start: float, now: float, rate_eps: float,
           trigger_interval_ms: float, band_intervals: float, min_s: float = 0.0,
           max_s: float = 120.0, period_s: float | None = None) -> WarmupEnd | None:
    """The warm-up's end at `now` (epoch s) for traffic that started at `start` at `rate_eps` (a periodic rate's
    mean, its period `period_s`: the trends are then fitted over whole periods); None: not yet."""
    elapsed = now - start
    if elapsed < min_s:
        return None
    commits = _data_commits(progress, start)
    durations = sorted(ms for _, ms in commits[-RECENT_BATCHES:])
    cadence = cadence_s(trigger_interval_ms, durations[len(durations) // 2] if durations else None)
    band = band_intervals * rate_eps * cadence
    series = [(float(s["t"]), float(s["lag"])) for s in lag_series(lag_samples, progress) if s["t"] <= now]
    last = series[-1][1] if series else None
    figures = {"lag": last, "band": band, "cadence_s": cadence}
    if commits:
        first_data = commits[0][0]
        hold = [v for t, v in series if t >= now - HOLD_CADENCES * cadence]
        if (len(hold) >= HOLD_SAMPLES and all(v <= band for v in hold)
                and all(t > first_data for t, _ in series if t >= now - HOLD_CADENCES * cadence)):
            return WarmupEnd("caught_up", now, f"the query caught up with its start {elapsed:.1f} s after the "
                             f"traffic began: its lag within {band:,.0f} events ({band_intervals:g} x "
                             f"{rate_eps:,.0f} events/s x a {cadence:.1f} s cadence) for {HOLD_CADENCES:g} cadences",
                             **figures)
        flat = whole_periods(max(FLAT_MIN_S, FLAT_CADENCES * cadence), period_s)
        recent = [(t, v) for t, v in series if t >= now - flat]
        trend = fit(recent) if now - first_data >= flat else None
        if (trend and sum(1 for t, _ in commits if t >= now - flat) >= GROWTH_MIN_COMMITS
                and abs(trend["slope"]) + Z * trend["se"] <= TREND_FRACTION * rate_eps):
            return WarmupEnd("caught_up", now, f"the query caught up with its start {elapsed:.1f} s after the "
                             f"traffic began: its lag stopped falling, {trend['slope']:+,.0f} ± "
                             f"{Z * trend['se']:,.0f} events/s over the last {flat:.0f} s (within "
                             f"{100 * TREND_FRACTION:g}% of {rate_eps:,.0f} events/s), {last:,.0f} events behind",
                             **figures)
        window = whole_periods(max(GROWTH_MIN_S, GROWTH_CADENCES * cadence), period_s)
        if now - first_data >= window:
            recent = [(t, v) for t, v in series if t >= now - window]
            trend = fit(recent)
            if (trend and sum(1 for t, _ in commits if t >= now - window) >= GROWTH_MIN_COMMITS
                    and trend["slope"] - Z * trend["se"] > TREND_FRACTION * rate_eps
                    and last is not None and last > band):
                return WarmupEnd("not_catching_up", now, f"the query was not catching up with its start: over the "
                                 f"{window:.0f} s to {elapsed:.1f} s after the traffic began its lag grew "
                                 f"{trend['slope']:,.0f} ± {Z * trend['se']:,.0f} events/s, to {last:,.0f} events "
                                 f"(band {band:,.0f})", **figures)
    if elapsed >= max_s:
        first = (f"its first batch with data committed {commits[0][0] - start:.1f} s after the traffic began"
                 if commits else "no batch with data had committed")
        return WarmupEnd("max", now, f"the query had not caught up with its start after the warm-up's "
                         f"{max_s:g} s (producers.warmup_max_s): {first}; lag "
                         f"{'-' if last is None else f'{last:,.0f}'} events against a band of {band:,.0f}", **figures)
    return None
