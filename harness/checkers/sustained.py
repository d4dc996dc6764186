"""Did the query sustain the offered load? One definition for a run's verdict (the `sustained` check) and for a
`harness capacity` trial (its criteria), over the figures of harness.analysis.sustain; and how much room its batches
leave (the `headroom` check), which is not part of keeping up.

Keeping up means the lag is not growing and the query processes what is offered. Criteria (each pass, fail or
unknown; `sustained` passes only when all pass):
1. `lag_growth`: the lag's least-squares slope against the offered rate R. Growing when the slope is above
   LAG_GROWTH_FRACTION (5%) of R even at the low end of its uncertainty (slope - Z standard errors, Z = 2) *and*
   the fitted lag at the window's end is above LAG_END_INTERVALS (2) x R x the batch cadence (the larger of the
   trigger interval, the batch p50 and 1 s). The second condition keeps the sawtooth of a query that keeps up
   (lag rises by R each batch's time and falls at its commit; 1 s samples alias with a 1 s trigger) from
   reading as growth. Not growing when the slope's high end (slope + Z SE) is within the limit, or the end lag
   is. Otherwise the uncertainty straddles the limit: unknown ("cannot tell"), never a pass.
2. `processed_rate`: the query's processed rate (slope of its committed offsets) at least 1 - RATE_FRACTION (95%)
   of the offered rate (slope of the broker's end offsets).
3. Real-time mode only (trigger kind realTime), `batch_duration`: every batch lasts its interval by design (its
   tasks read for the whole of it), so what is judged is the rest: the median batch's time beyond the interval
   (planning, the offset and commit logs, the tasks' start and end, when no record is read and the arriving ones
   wait) within RTM_GAP_FRACTION (20%) of the interval, over at least LAG_MIN_CADENCES batches to pass (an
   overrun fails on any number). Beyond it the query spends a sixth of its time not reading, and those waits,
   not the processing, make its tail latency: there, that is keeping up. Its lag sawtooths over a whole interval
   (offsets are committed at each batch's end while records leave within milliseconds): the cadence above is
   the interval, so that sawtooth is not read as growth.
Too little to judge is unknown: fewer than LAG_MIN_SAMPLES lag samples, a judged window shorter than
LAG_MIN_CADENCES batch cadences (over one or two batches a fit follows the sawtooth, not a trend), or a measured
window too short to find where the steady state begins (harness.analysis.steady: a run that is all start-up
would fail on its cold batches, not on the query).

A processing-time batch longer than its trigger is not, by itself, falling behind: Spark starts the next batch
at once and it reads more, so a query can keep up (flat lag, processed = offered) with every batch over the
trigger. What it lacks is room: a burst will fall behind. That is the `headroom` check, listed in every run with a
processingTime trigger of a non-zero interval (a 0 s trigger runs batches back to back by design: nothing is left
idle to measure): the median batch (batch p50) against the interval, and the fraction of the interval left idle
at the median, 1 - p50 / interval (negative when the batches overrun it). It is "not required" unless the
scenario sets `checks.min_headroom` (the fraction that must be left idle; 0: p50 within the trigger), and, as
the batch rule before it, needs LAG_MIN_CADENCES batches to pass while an overrun fails on any number.

A scenario whose point is a backlog (a catch-up, an age-out that relies on lag) says so with
`checks.sustained_not_required = "<why>"`: the check is listed with its figures as "not required". A trigger
that is not a processing-time one (availableNow, once) runs to the end of what is there and stops: it has no
rate to sustain, and the check says so as "not required" too; so does a run whose query failed as a fault
declared it must (the failure is the run's point).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.analysis.performance import LAG_END_INTERVALS, cadence_s
from harness.check import Check
from harness.analysis.runview import RunView

LAG_GROWTH_FRACTION = 0.05
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


def real_time_batch_criterion(f: dict[str, Any], th: Thresholds) -> Check:
    """Real-time mode's batches against their interval: the time beyond it, when no record is read."""
    p50, interval = f.get("batch_p50_ms"), th.trigger_interval_ms
    if p50 is None:
        return Check("batch_duration", None, "unknown: no real-time batch with data in the judged window", None,
                     th.rtm_gap_fraction * interval)
    gap, limit = max(0.0, p50 - interval), th.rtm_gap_fraction * interval
    if gap <= limit and f.get("batches", 0) < th.lag_min_cadences:
        return Check("batch_duration", None, f"unknown: {f.get('batches', 0)} real-time batches with data in the "
                                             f"judged window (need {th.lag_min_cadences:g} to pass)", gap, limit)
    return Check("batch_duration", gap <= limit,
                 f"real-time batch p50 {_n(p50)} ms = the {_n(interval)} ms interval + {_n(gap)} ms between reads "
                 f"(planning, offset and commit logs; limit {100 * th.rtm_gap_fraction:g}% = {_n(limit)} ms; "
                 f"{f.get('batches', 0)} batches)", gap, limit, {"batch_p50_ms": p50, "interval_ms": interval})


def criteria(figures: dict[str, Any], th: Thresholds, rate: float | None = None) -> list[Check]:
    """Keeping up: the lag not growing and the offered rate processed (and in real-time mode, batches that read
    for their whole interval). `rate`: what the lag's slope is set against (default: the offered rate measured).
    A processing-time batch's length is not among them: it is the headroom (`headroom_check`)."""
    parts = [lag_criterion(figures, th, rate), rate_criterion(figures, th)]
    if th.real_time:
        parts.append(real_time_batch_criterion(figures, th))
    return parts


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


def headroom_check(figures: dict[str, Any], th: Thresholds, min_headroom: float | None) -> Check:
    """The median batch against the processing-time trigger (module docstring): value the batch p50, limit the
    longest p50 that leaves `min_headroom` of the interval idle (the interval itself when none is required)."""
    required = min_headroom is not None
    need, interval = min_headroom or 0.0, th.trigger_interval_ms
    p50, batches = figures.get("batch_p50_ms"), figures.get("batches", 0)
    if interval <= 0:
        return Check("headroom", None, "0 s trigger: batches run back to back by design, nothing is left idle to "
                                       "measure", p50, None, required=False)
    longest = round((1.0 - need) * interval, 6)  # 0.9 of 1,000 ms is 100 ms, not 99.99999999999997
    figs = {"trigger_interval_ms": interval, "batch_p50_ms": p50, "min_headroom": min_headroom, "batches": batches}
    counted = f"{batches} batch{'' if batches == 1 else 'es'}"
    note = counted + ("" if required else "; not required without checks.min_headroom")
    if p50 is None:
        return Check("headroom", None, f"unknown: no batch with data in the judged window ({note})", None, longest,
                     figs, required=required)
    idle = 1.0 - p50 / interval
    figs["idle_fraction"] = idle
    want = f", need {100 * need:g}% idle (p50 <= {_n(longest)} ms)" if need > 0 else ""
    if p50 > interval:
        text = f"no headroom: batch p50 {_n(p50)} ms > the {_n(interval)} ms trigger: a burst will fall behind"
    elif p50 > longest:
        text = (f"too little headroom: batch p50 {_n(p50)} ms leaves {100 * idle:.3g}% of the {_n(interval)} ms "
                f"trigger idle")
    else:
        text = f"batch p50 {_n(p50)} ms <= the {_n(interval)} ms trigger: {100 * idle:.3g}% of it idle at the median"
    text += f"{want} ({note})"
    ok = p50 <= longest
    if ok and batches < th.lag_min_cadences:  # an overrun is one even in a short window
        return Check("headroom", None, f"unknown: {counted} with data in the judged window (need "
                                       f"{th.lag_min_cadences:g} to pass): {text}", p50, longest, figs,
                     required=required)
    return Check("headroom", ok, text, p50, longest, figs, required=required)


def headroom(run: RunView) -> list[Check]:
    """Listed for a processingTime trigger with an interval (config.TriggerSpec.paced); judged over the same window
    as `sustained`, and like it unknown when that window cannot be told from start-up (cold batches are long)."""
    trigger, perf = run.scenario.spark.trigger, run.performance
    if not trigger.paced:
        return []
    min_headroom = run.scenario.checks.min_headroom
    required = min_headroom is not None
    if perf is None or not run.acked_measured:
        return [Check("headroom", None, "unknown: no traffic was measured", required=required)]
    check = headroom_check(perf.sustain, Thresholds(perf.trigger_interval_ms or 0.0), min_headroom)
    if not perf.steady.get("detected"):
        return [replace(check, ok=None, detail=f"unknown: {perf.steady.get('reason')} (start-up cannot be told "
                                               f"apart from the query's own batches): {check.detail}")]
    return [check]


def sustained(run: RunView) -> list[Check]:
    perf = run.performance
    if perf is None or not run.acked_measured:
        return [Check("sustained", None, "unknown: no traffic was measured")]
    trigger = run.scenario.spark.trigger
    declared = run.scenario.checks.sustained_not_required
    if run.faults.failed_as_expected:
        declared = declared or (f"the query failed as a fault declared ({', '.join(run.faults.expected_failures)}): "
                                f"what it kept up with before is in the figures")
    if perf.trigger_interval_ms is None:
        why = f"the {trigger.kind} trigger reads what is there and stops: there is no rate to sustain"
        return [sustained_check(perf.sustain, None, declared or why)]
    judged = sustained_check(perf.sustain, Thresholds(perf.trigger_interval_ms, real_time=trigger.kind == "realTime"),
                             declared)
    if declared:
        return [judged]
    if run.warmup_end is not None and run.warmup_end.get("ended") != "caught_up":
        # a query that never caught up with its own start did not keep up, whatever the window after shows
        ended = run.warmup_end.get("ended")
        return [replace(judged, ok=False if ended else None,
                        detail=f"{'did not catch up' if ended else 'unknown'}: warm-up: {run.warmup_end.get('reason')}"
                               f"; measured window: {judged.detail}")]
    if not perf.steady.get("detected"):
        return [Check("sustained", None, f"unknown: {perf.steady.get('reason')} (start-up cannot be told apart "
                                         f"from a query that does not keep up)")]
    return [judged]
