"""Did the query sustain the offered load? One definition for a run's verdict (the `sustained` check) and for a
`harness capacity` trial (its criteria), over the figures of harness.analysis.sustain.

Criteria (each pass, fail or unknown; `sustained` passes only when all three pass):
1. `lag_growth`: the lag's least-squares slope against the offered rate R. Growing when the slope is above
   LAG_GROWTH_FRACTION (5%) of R even at the low end of its uncertainty (slope - Z standard errors, Z = 2) *and*
   the fitted lag at the window's end is above LAG_END_INTERVALS (2) x R x the batch cadence (the larger of the
   trigger interval, the batch p50 and 1 s). The second condition keeps the sawtooth of a query that keeps up
   (lag rises by R each batch's time and falls at its commit; 1 s samples alias with a 1 s trigger) from
   reading as growth. Not growing when the slope's high end (slope + Z SE) is within the limit, or the end lag
   is. Otherwise the uncertainty straddles the limit: unknown ("cannot tell"), never a pass.
2. `processed_rate`: the query's processed rate (slope of its committed offsets) at least 1 - RATE_FRACTION (95%)
   of the offered rate (slope of the broker's end offsets).
3. `batch_duration`: the median batch duration (triggerExecution) within the trigger interval, over at least
   LAG_MIN_CADENCES batches to pass (a median over the trigger fails on any number); not judged with a 0 s
   trigger, where batches run back to back by design. In real-time mode (trigger kind realTime) every batch
   lasts its interval by design (its tasks read for the whole of it), so what is judged is the rest: the median
   batch's time beyond the interval (planning, the offset and commit logs, the tasks' start and end, when no
   record is read and the arriving ones wait) within RTM_GAP_FRACTION (20%) of the interval. Beyond it the
   query spends a sixth of its time not reading, and those waits, not the processing, make its tail latency.
   Its lag sawtooths over a whole interval (offsets are committed at each batch's end while records leave
   within milliseconds): the cadence above is the interval, so that sawtooth is not read as growth.
Too little to judge is unknown: fewer than LAG_MIN_SAMPLES lag samples, a judged window shorter than
LAG_MIN_CADENCES batch cadences (over one or two batches a fit follows the sawtooth, not a trend), or a measured
window too short to find where the steady state begins (harness.analysis.steady: a run that is all start-up
would fail on its cold batches, not on the query).

A scenario whose point is a backlog (a catch-up, an age-out that relies on lag) says so with
`checks.sustained_not_required = "<why>"`: the check is listed with its figures as "not required". A trigger
that is not a processing-time one (availableNow, once) runs to the end of what is there and stops: it has no
rate to sustain, and the check says so as "not required" too; so does a run whose query failed as a fault
declared it must (the failure is the run's point).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.analysis.performance import cadence_s
from harness.check import Check
from harness.checkers.view import RunView

LAG_GROWTH_FRACTION = 0.05
LAG_END_INTERVALS = 2.0
LAG_MIN_SAMPLES = 4
LAG_MIN_CADENCES = 3.0
RATE_FRACTION = 0.05
RTM_GAP_FRACTION = 0.2
Z = 2.0


@dataclass(frozen=True)
class Thresholds:
    """What keeping up is judged against (capacity.json's and result.json's `thresholds`)."""
    trigger_interval_ms: float
    lag_growth_fraction: float = LAG_GROWTH_FRACTION
    lag_end_intervals: float = LAG_END_INTERVALS
    lag_min_samples: int = LAG_MIN_SAMPLES
    lag_min_cadences: float = LAG_MIN_CADENCES
    rate_fraction: float = RATE_FRACTION
    z: float = Z
    real_time: bool = False  # real-time mode: batches last their interval; their time beyond it is judged
    rtm_gap_fraction: float = RTM_GAP_FRACTION

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cadence_s": "max(trigger interval, batch p50, 1 s)",
                "lag_growth": "slope - z*se > fraction x offered rate and end lag > end_intervals x rate x cadence"}


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def lag_criterion(f: dict[str, Any], th: Thresholds, rate: float | None = None) -> Check:
    """`rate`: what the slope is set against (the offered rate measured, or a capacity trial's target)."""
    lag, rate = f.get("lag"), rate if rate is not None else f.get("offered_eps")
    cadence = cadence_s(th.trigger_interval_ms, f.get("batch_p50_ms"))
    if not lag or f.get("samples", 0) < th.lag_min_samples or not rate:
        return Check("lag_growth", None, f"unknown: {f.get('samples', 0)} lag samples in the judged window "
                                         f"(need {th.lag_min_samples}) or no offered rate")
    slope, se, end = lag["slope_eps"], lag["slope_se_eps"], lag["end_lag"]
    slope_max, end_max = th.lag_growth_fraction * rate, th.lag_end_intervals * rate * cadence
    figures = {"slope_se_eps": se, "end_lag": end, "end_lag_max": end_max, "cadence_s": cadence,
               "samples": f.get("samples"), "max_lag": lag.get("max_lag"), "rate_eps": rate,
               "slope_s_per_s": slope / rate, "end_lag_s": end / rate}
    if f.get("judged_s", 0.0) < th.lag_min_cadences * cadence:
        return Check("lag_growth", None, f"unknown: the judged window spans {f.get('judged_s', 0.0):.0f} s, under "
                                         f"{th.lag_min_cadences:g} batch cadences of {cadence:.1f} s",
                     slope, slope_max, figures)
    lo, hi = slope - th.z * se, slope + th.z * se
    text = (f"lag {'grew' if slope >= 0 else 'fell'} {_n(abs(slope))} ± {_n(th.z * se)} events/s "
            f"({100 * slope / rate:+.1f}% of the offered {_n(rate)}/s, limit {100 * th.lag_growth_fraction:g}%), "
            f"{_n(end)} events ({end / rate:.1f} s) behind at the end (limit {_n(end_max)})")
    if lo > slope_max and end > end_max:
        return Check("lag_growth", False, text, slope, slope_max, figures)
    if hi <= slope_max or end <= end_max:
        return Check("lag_growth", True, text, slope, slope_max, figures)
    return Check("lag_growth", None, "cannot tell: " + text, slope, slope_max, figures)


def rate_criterion(f: dict[str, Any], th: Thresholds) -> Check:
    processed, offered = f.get("processed_eps"), f.get("offered_eps")
    if processed is None or not offered:
        return Check("processed_rate", None, f"unknown: {f.get('commits', 0)} commits and "
                                             f"{f.get('samples', 0)} lag samples in the judged window")
    need = (1.0 - th.rate_fraction) * offered
    return Check("processed_rate", processed >= need,
                 f"processed {_n(processed)} events/s = {100 * processed / offered:.1f}% of the offered "
                 f"{_n(offered)}/s (need {100 * (1 - th.rate_fraction):g}%)", processed, need,
                 {"offered_eps": offered})


def batch_criterion(f: dict[str, Any], th: Thresholds) -> Check:
    p50, interval = f.get("batch_p50_ms"), th.trigger_interval_ms
    if interval <= 0:
        return Check("batch_duration", True, "0 s trigger: batches run back to back by design", p50, None)
    if p50 is None:
        return Check("batch_duration", None, "unknown: no batch with data in the judged window", None, interval)
    if th.real_time:
        return _real_time_batches(f, th, p50, interval)
    if p50 <= interval and f.get("batches", 0) < th.lag_min_cadences:  # an overrun is one even in a short window
        return Check("batch_duration", None, f"unknown: {f.get('batches', 0)} batches with data in the judged window "
                                             f"(need {th.lag_min_cadences:g} to pass)", p50, interval)
    return Check("batch_duration", p50 <= interval,
                 f"batch p50 {_n(p50)} ms {'<=' if p50 <= interval else '>'} the {_n(interval)} ms trigger "
                 f"({f.get('batches', 0)} batches)", p50, interval)


def _real_time_batches(f: dict[str, Any], th: Thresholds, p50: float, interval: float) -> Check:
    gap, limit = max(0.0, p50 - interval), th.rtm_gap_fraction * interval
    if gap <= limit and f.get("batches", 0) < th.lag_min_cadences:
        return Check("batch_duration", None, f"unknown: {f.get('batches', 0)} real-time batches with data in the "
                                             f"judged window (need {th.lag_min_cadences:g} to pass)", gap, limit)
    return Check("batch_duration", gap <= limit,
                 f"real-time batch p50 {_n(p50)} ms = the {_n(interval)} ms interval + {_n(gap)} ms between reads "
                 f"(planning, offset and commit logs; limit {100 * th.rtm_gap_fraction:g}% = {_n(limit)} ms; "
                 f"{f.get('batches', 0)} batches)", gap, limit, {"batch_p50_ms": p50, "interval_ms": interval})


def criteria(figures: dict[str, Any], th: Thresholds, rate: float | None = None) -> list[Check]:
    """`rate`: what the lag's slope is set against (default: the offered rate measured)."""
    return [lag_criterion(figures, th, rate), rate_criterion(figures, th), batch_criterion(figures, th)]


def sustained_check(figures: dict[str, Any] | None, th: Thresholds | None, not_required: str | None) -> Check:
    """The verdict's check: the criteria together, each one's figures kept."""
    if th is None or figures is None:
        return Check("sustained", None, not_required or "unknown: no sustained figures", required=False)
    parts = criteria(figures, th)
    failed = [c for c in parts if c.ok is False]
    unknown = [c for c in parts if c.ok is None]
    ok = False if failed else None if unknown else True
    lead = failed or unknown or parts
    detail = "; ".join(f"{c.name}: {c.detail}" for c in lead)
    if ok:
        detail = "kept up: " + detail
    figs = {"criteria": [c.as_dict() for c in parts], "judged_s": figures.get("judged_s"),
            "window": figures.get("window"), "excluded": figures.get("excluded"), "thresholds": th.as_dict()}
    if not_required:
        return Check("sustained", ok, f"not required ({not_required}); {detail}", None, None, figs, required=False)
    return Check("sustained", ok, detail, None, None, figs)


def sustained(run: RunView) -> list[Check]:
    perf = run.performance
    if perf is None or not run.acked_measured:
        return [Check("sustained", None, "unknown: no traffic was measured")]
    trigger = run.scenario.spark.trigger
    declared = run.scenario.checks.sustained_not_required
    if run.faults.failed_as_expected:
        declared = declared or (f"the query failed as a fault declared ({', '.join(run.faults.expected_failures)}): "
                                f"what it kept up with before is in the figures")
    if perf.trigger_interval_ms is not None and not perf.steady.get("detected") and not declared:
        return [Check("sustained", None, f"unknown: {perf.steady.get('reason')} (start-up cannot be told apart "
                                         f"from a query that does not keep up)")]
    if perf.trigger_interval_ms is None:
        why = f"the {trigger.kind} trigger reads what is there and stops: there is no rate to sustain"
        return [sustained_check(perf.sustain, None, declared or why)]
    return [sustained_check(perf.sustain, Thresholds(perf.trigger_interval_ms, real_time=trigger.kind == "realTime"),
                            declared)]
