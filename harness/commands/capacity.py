"""`harness capacity`: the highest constant rate a scenario's query sustains, and what stopped it going higher.

**Search** (`search`, pure: it only calls `trial(rate) -> TrialOutcome`). Ramp from the start rate (`--start-eps`;
default the scenario's own constant rate, else 1,000 events/s), doubling (`GROWTH`) while trials are sustained.
At the first failure, bisect between the highest sustained rate `lo` and the lowest failed rate `hi` until
`hi - lo <= max(RESOLUTION * lo, MIN_STEP_EPS)` (10% of the sustained rate, at least 100 events/s); midpoints are
rounded to multiples of `MIN_STEP_EPS`. `--max-trials` bounds the whole search (ramp and bisection). The capacity
is `lo`; the limiting factor is the one the trial at `hi` failed on. It is a *lower bound* (said in capacity.json,
capacity.md and the final line) when nothing about the query bounded it: the trial at `hi` failed on the producer
limit (the harness could not offer the load), or every trial was sustained before `--max-trials` ran out.
When the start rate itself fails, the search steps down the same way (halving) until a rate is sustained, then
bisects; when nothing is sustained down to `MIN_STEP_EPS` there is no capacity (exit 1); Ctrl-C keeps what was measured, `unjudged` (130).
A trial that cannot be judged (`trial_verdict`: its run unjudged, or a criterion failing while the machine was busy
with other work, harness.checkers.busy) stops the search the same way, `unjudged` (exit 3): the rate was neither
sustained nor shown to fail.

**A trial** is an ordinary run (harness.runner.run_one) in `<capacity dir>/<nn>-eps=<R>/` with the overrides
`producers.rate={kind="constant", eps=R}`, `producers.duration_s=<trial_s>` and `producers.warmup_s=<the
scenario's, else DEFAULT_WARMUP_S>`, on top of the user's `--set`s (a `[sweep]` table is not expanded). Every override is validated
before the first trial. The warm-up runs at R too and keeps JIT, codegen and the first batch out of the figures;
it must also let the query catch up with the backlog that first batch leaves. Measured on this project's 2-core
machine (shared with other work): the first batch with data takes about 15 s, and at 3,000 events/s the batches
came back to their steady size about 40 s after the traffic started; hence 30 s by default, not a few seconds.

**Criteria** (`judge_trial`, from the run's result.json and its lag samples). R is sustained when all hold; a
failed trial's limiting factor is the first failing one in this order (all failing ones are recorded):

1. `producer limit`: the producers offered R, i.e. `throughput.produce_eps` (acked events of the measured
   window per second) within `PRODUCER_TOLERANCE` (2%) of R, and `counts.pacer_skipped` == 0. Failing it, the
   load was not what was asked: the trial says nothing about the query at R.
2.-3. **keeping up**: the run's own `sustained` figures (harness.analysis.sustain: the steady part of the
   measured window) judged by the same criteria as every run's `sustained` check (harness.checkers.sustained,
   one definition): `lag growth` (the lag's least-squares slope, beyond its uncertainty, above 5% of R *and*
   the lag at the window's end above 2 x R x the batch cadence; the sawtooth of a query that keeps up is not
   growth), `processing rate under the offered` (committed offsets' slope under 95% of the broker's). (That
   definition has a third criterion for real-time mode only; a search refuses any trigger but processingTime.)
   A batch longer than the trigger is not one of them: a query whose lag is flat and that processes the offered
   rate keeps up whatever its batches' length. Above what it sustains Spark's batches grow, each reading what
   arrived during the last, and the query falls further behind: the trial fails on its lag growth or processed
   rate (or, when one batch outlasts the window so that neither can be told, on the latency limit). A trial too
   short to judge one of them leaves it unknown, which does not fail the trial (a longer `--trial-s` judges it).
   The trial's own run declares `checks.sustained_not_required` so its verdict is about correctness only, and
   keeping up is counted once, here.
4. `no headroom`: the `headroom` check's figures (the batch p50 against the trigger, the fraction of the interval
   left idle at the median), recorded for every trial; a criterion only when the scenario sets
   `checks.min_headroom` (the capacity is then the highest rate whose median batch leaves that much of the
   interval idle). The trial's own run, required the same by that setting, is then not failed again for it under
   `checks failed`.
5. `latency limit`: end-to-end `latency_ms.p99` <= the limit (`--latency-p99-ms`, else the scenario's
   `checks.latency_p99_ms`, else the larger of `DEFAULT_LATENCY_P99_MS` (5,000 ms) and `LATENCY_INTERVALS` (3)
   trigger intervals: an event of a query that keeps up waits up to one interval for its batch, which takes up
   to another; the third is room for the commit and the sink).
6. `checks failed`: the run's own verdict is `pass` (nothing lost or duplicated beyond the scenario's limits,
   drained, in order, ...); an unjudged run leaves it unknown with its reason, and the trial unjudged.

Every threshold is written to capacity.json (`thresholds`), each trial with each criterion's figure, limit and
pass/fail. capacity.json is rewritten atomically after every trial; capacity.md is the same as a table.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from harness import runner, secrets
from harness.files import atomic, outdir
from harness.check import Check, counts_against, exit_code, status_of
from harness.commands.capacity_defaults import (DEFAULT_LATENCY_P99_MS, DEFAULT_MAX_TRIALS, DEFAULT_START_EPS,
                                                DEFAULT_TRIAL_S, DEFAULT_WARMUP_S, LATENCY_INTERVALS)
from harness.commands.shared_broker import reason_not_shared, shared_broker
from harness.config import ConfigError, load_scenario
from harness.console import Console
from harness.errors import InputError
from harness.checkers.busy import busy_cause
from harness.checkers.sustained import Thresholds, criteria as sustained_criteria, headroom_check
from harness.text.durations import spark_interval_ms
from harness.reports.capacity_html import capacity_html

GROWTH = 2.0
RESOLUTION = 0.10
MIN_STEP_EPS = 100
PRODUCER_TOLERANCE = 0.02
MAX_PACER_SKIPPED = 0
TRIAL_DECLARES = ('checks.sustained_not_required="a capacity trial: keeping up is judged as the trial\'s own '
                  'criteria (harness capacity)"')

# criterion -> the limiting factor it names when it fails; dict order is the order a failing trial's limiting
# factor is picked in
CRITERIA = {
    "producer_rate": "producer limit",
    "lag_growth": "lag growth",
    "processed_rate": "processing rate under the offered",
    "headroom": "no headroom",
    "latency_p99": "latency limit",
    "checks": "checks failed",
}
PRODUCER_LIMIT = CRITERIA["producer_rate"]
JUDGED_HERE_NOT_AS_CHECKS = {"headroom"}  # the trial run's own check, required by checks.min_headroom: counted once
TRIAL_LIMIT = "trial limit"

Verdict = Literal["sustained", "failed", "unjudged"]


# ------------------------------------------------------------------------------------------------ judging a trial
@dataclass
class Limits:
    """What a trial is judged against (all of it goes to capacity.json as `thresholds`)."""
    trigger_interval_ms: float
    latency_p99_ms: float = DEFAULT_LATENCY_P99_MS
    latency_from: str = "default"
    producer_tolerance: float = PRODUCER_TOLERANCE
    max_pacer_skipped: int = MAX_PACER_SKIPPED
    min_headroom: float | None = None  # the scenario's checks.min_headroom: None, the headroom is recorded only

    @property
    def sustained(self) -> Thresholds:
        return Thresholds(self.trigger_interval_ms)

    def as_dict(self) -> dict[str, Any]:
        return {
            "producer_rate": {"produce_eps_within_fraction_of_rate": self.producer_tolerance,
                              "pacer_skipped_max": self.max_pacer_skipped},
            "sustained": self.sustained.as_dict(),
            "headroom": {"required": self.min_headroom is not None, "min_idle_fraction": self.min_headroom,
                         "batch_p50_max_ms": round((1.0 - (self.min_headroom or 0.0)) * self.trigger_interval_ms, 6)},
            "latency_p99": {"max_ms": self.latency_p99_ms, "from": self.latency_from},
            "checks": {"run_verdict": "pass"},
        }


def criterion(name: str, ok: bool | None, value: float | None, limit: float | None, detail: str,
              figures: dict[str, Any] | None = None) -> Check:
    """A trial's criterion: a check with its figure and limit (ok None: not judged, no figure or it does not
    apply), and the other figures it was judged on."""
    return Check(name, ok, detail, value, limit, figures or {})


def failing(criteria: list[Check]) -> list[Check]:
    """The required criteria that failed (a headroom no scenario asked for is recorded, never failing a trial)."""
    return [c for c in criteria if c.ok is False and c.required]


def trial_verdict(criteria: list[Check], machine: dict[str, Any] | None) -> tuple[Verdict, str]:
    """A trial's verdict and, when unjudged, why. Failed when the run's own checks failed (correctness: judged
    however busy the machine was); when another criterion failed on a busy machine (harness.checkers.busy), it
    measured the machine's other work: unjudged; failed otherwise; unjudged when the run could not be judged
    (its `checks` criterion unknown); else sustained."""
    failed = failing(criteria)
    if any(c.name == "checks" for c in failed):
        return "failed", ""
    cause = busy_cause(machine)
    if failed and cause:
        return "unjudged", f"unjudged: {cause}; as measured it fails on {factor(failed[0])}: {failed[0].detail}"
    if failed:
        return "failed", ""
    run = next((c for c in criteria if c.name == "checks"), None)
    if run is not None and run.ok is None:
        return "unjudged", run.detail
    return "sustained", ""


def factor(check: Check) -> str:
    """What a failed criterion says bounded the capacity."""
    return CRITERIA[check.name]


@dataclass
class TrialOutcome:
    rate: float
    verdict: Verdict
    criteria: list[Check] = field(default_factory=list)
    run_dir: str | None = None
    exit_code: int | None = None
    note: str = ""  # e.g. why it is unjudged

    @property
    def sustained(self) -> bool:
        return self.verdict == "sustained"

    @property
    def failing(self) -> list[Check]:
        return failing(self.criteria)

    @property
    def limiting_factor(self) -> str | None:
        return factor(self.failing[0]) if self.verdict == "failed" and self.failing else None

    @property
    def detail(self) -> str:
        """The limiting factor's figures ('p50 1,350 ms > 1,000 ms'), then any other failing criterion."""
        failing = self.failing
        if self.verdict != "failed" or not failing:
            return self.note
        text = failing[0].detail
        if len(failing) > 1:
            text += "; also " + "; ".join(f"{factor(c)}: {c.detail}" for c in failing[1:])
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"rate_eps": self.rate, "verdict": self.verdict, "limiting_factor": self.limiting_factor,
                "detail": self.detail, "run_dir": self.run_dir, "exit_code": self.exit_code,
                "criteria": {c.name: {"ok": c.ok, "status": c.status, "value": c.value, "limit": c.limit,
                                      "detail": c.detail, **c.figures} for c in self.criteria}}


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _get(d: dict, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)  # type: ignore[assignment]
    return d


def judge_trial(rate: float, result: dict, limits: Limits) -> list[Check]:
    """Each criterion (module docstring) for a trial at `rate` from its result.json, in CRITERIA's order."""
    out = []
    produced = _get(result, "throughput", "produce_eps")
    skipped = _get(result, "counts", "pacer_skipped") or 0
    if produced is None:
        out.append(criterion("producer_rate", None, None, rate, "no produce rate in the result"))
    else:
        off = (produced - rate) / rate if rate else 0.0
        ok = abs(off) <= limits.producer_tolerance and skipped <= limits.max_pacer_skipped
        text = (f"offered {_n(produced)} events/s = {100 * produced / rate:.1f}% of {_n(rate)} "
                f"({'within' if abs(off) <= limits.producer_tolerance else 'not within'} "
                f"{100 * limits.producer_tolerance:g}%)" if rate else f"offered {_n(produced)} events/s")
        text += f", pacer skipped {skipped:,} events" if skipped else ""
        out.append(criterion("producer_rate", ok, float(produced), float(rate), text,
                             {"pacer_skipped": int(skipped), "pacer_skipped_max": limits.max_pacer_skipped}))

    figures = result.get("sustain") or {}
    out += sustained_criteria(figures, limits.sustained, rate)
    out.append(headroom_check(figures, limits.sustained, limits.min_headroom))

    p99 = _get(result, "latency_ms", "p99")
    delivered = _get(result, "counts", "delivered_unique")
    if p99 is None or not delivered:
        out.append(criterion("latency_p99", None, None, limits.latency_p99_ms, "no event delivered"))
    else:
        out.append(criterion("latency_p99", p99 <= limits.latency_p99_ms, float(p99), limits.latency_p99_ms,
                             f"p99 {_n(p99)} ms {'<=' if p99 <= limits.latency_p99_ms else '>'} "
                             f"{_n(limits.latency_p99_ms)} ms"))

    verdict = result.get("verdict")
    failed = [c.get("name", "?") for c in result.get("checks") or [] if counts_against(c)]
    if verdict == "pass":
        out.append(criterion("checks", True, None, None, f"all {len(result.get('checks') or [])} checks passed"))
    elif verdict == "fail" and failed and not set(failed) - JUDGED_HERE_NOT_AS_CHECKS:
        out.append(criterion("checks", True, None, None, f"every check passed but {', '.join(failed)}, a criterion "
                                                         f"of its own here"))
    elif verdict == "unjudged":
        out.append(criterion("checks", None, None, None,
                             f"the run could not be judged: {result.get('unjudged_reason') or 'no reason given'}"))
    else:
        details = {c.get("name"): c.get("detail", "") for c in result.get("checks") or []}
        out.append(criterion("checks", False, float(len(failed)), 0.0,
                             "failed " + "; ".join(f"{n} ({str(details.get(n, ''))[:160]})" for n in failed)
                             if failed else "the run failed"))
    return out


# ------------------------------------------------------------------------------------------------ the search
@dataclass
class SearchResult:
    trials: list[TrialOutcome]
    capacity_eps: float | None
    next_eps: float | None  # the lowest failed rate above the capacity
    limiting_factor: str | None
    bounded_by: str
    lower_bound: bool
    resolution_eps: float | None
    resolution_reached: bool
    interrupted: bool
    stop_reason: str

    @property
    def verdict(self) -> str:
        if self.interrupted or self.stop_reason == "unjudged":
            return "unjudged"
        return "pass" if self.capacity_eps is not None else "fail"

    def line(self) -> str:
        """The one line a user reads first."""
        nxt = next((t for t in self.trials if t.rate == self.next_eps and t.verdict == "failed"), None)
        why = (f"next step {_n(self.next_eps)} failed: {self.limiting_factor}, {nxt.detail.split('; also ')[0]}"
               if nxt else self.bounded_by)
        if self.interrupted:
            so_far = (f"{_n(self.capacity_eps)} events/s sustained so far" if self.capacity_eps is not None
                      else "nothing sustained yet")
            return f"capacity: unjudged, interrupted after {len(self.trials)} trials ({so_far})"
        if self.stop_reason == "unjudged":
            last = self.trials[-1]
            so_far = (f"{_n(self.capacity_eps)} events/s sustained so far" if self.capacity_eps is not None
                      else "nothing sustained yet")
            return (f"capacity: unjudged, trial {len(self.trials)} at {_n(last.rate)} events/s could not be judged "
                    f"({so_far}): {last.note}")
        if self.capacity_eps is None:
            low = min(self.trials, key=lambda t: t.rate) if self.trials else None
            return (f"capacity: none found, every rate down to {_n(low.rate if low else None)} events/s failed"
                    f" ({low.limiting_factor}, {low.detail.split('; also ')[0]})" if low else
                    "capacity: none found (no trial ran)")
        if self.lower_bound:
            return f"capacity: at least {_n(self.capacity_eps)} events/s (a lower bound: {why})"
        return f"capacity: {_n(self.capacity_eps)} events/s ({why})"

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "capacity_eps": self.capacity_eps, "limiting_factor": self.limiting_factor,
                "bounded_by": self.bounded_by, "lower_bound": self.lower_bound, "next_eps": self.next_eps,
                "resolution_eps": self.resolution_eps, "resolution_reached": self.resolution_reached,
                "stop_reason": self.stop_reason, "summary": self.line()}


def _round_step(x: float, step: float) -> float:
    return float(round(x / step) * step)


def search(trial: Callable[[float], TrialOutcome], start_eps: float, *, max_trials: int = DEFAULT_MAX_TRIALS,
           growth: float = GROWTH, resolution: float = RESOLUTION, min_step_eps: float = MIN_STEP_EPS,
           after_trial: Callable[[SearchResult], None] | None = None) -> SearchResult:
    """Ramp by `growth` from `start_eps` until a trial fails (down by `growth` while nothing is sustained), then bisect between the highest sustained and the
    lowest failed rate to max(resolution x sustained, min_step_eps); at most `max_trials` trials in all.
    `after_trial` sees the result so far after every trial (capacity.json is rewritten from it)."""
    trials: list[TrialOutcome] = []
    lo: float | None = None
    hi: float | None = None
    rate = float(round(start_eps))
    stop = ""
    while True:
        if len(trials) >= max_trials:
            stop = "max_trials"
            break
        outcome = trial(rate)
        trials.append(outcome)
        if outcome.verdict == "unjudged":  # Ctrl-C (130), or a trial that could not be judged
            stop = "interrupted" if outcome.exit_code == 130 else "unjudged"
            if after_trial:
                after_trial(conclude(trials, lo, hi, resolution, min_step_eps, stop))
            break
        if outcome.sustained:
            lo = rate
        else:
            hi = rate
        nxt: float | None
        if hi is None:
            nxt = float(round(rate * growth))
        elif lo is None:  # nothing sustained yet: step down the same way, to the floor
            nxt = float(round(hi / growth))
            if nxt < min_step_eps:
                nxt, stop = None, "start_failed"
        elif hi - lo <= max(resolution * lo, min_step_eps):
            nxt, stop = None, "resolution"
        else:
            nxt = _round_step((lo + hi) / 2.0, min_step_eps)
            if not lo < nxt < hi:
                nxt, stop = None, "resolution"
        if after_trial:
            after_trial(conclude(trials, lo, hi, resolution, min_step_eps, stop or "running"))
        if nxt is None:
            break
        rate = nxt
    return conclude(trials, lo, hi, resolution, min_step_eps, stop)


def conclude(trials: list[TrialOutcome], lo: float | None, hi: float | None, resolution: float,
             min_step_eps: float, stop: str) -> SearchResult:
    interrupted = stop == "interrupted"
    res = max(resolution * lo, min_step_eps) if lo is not None else None
    reached = lo is not None and hi is not None and hi - lo <= (res or 0) or stop == "resolution"
    hi_trial = next((t for t in trials if t.rate == hi and t.verdict == "failed"), None)
    if hi_trial is not None:
        factor = hi_trial.limiting_factor
        lower = factor == PRODUCER_LIMIT
        bounded = f"{_n(hi)} events/s failed: {factor}, {hi_trial.detail}"
        if lower:
            bounded += "; the query was not tested there, so the capacity is a lower bound"
        if lo is not None and not reached and stop == "max_trials":
            bounded += f"; --max-trials reached before the {_n(res)} events/s resolution"
    elif lo is not None and stop == "running":
        factor, lower, bounded = None, True, f"every trial so far sustained, up to {_n(lo)} events/s"
    elif lo is not None:
        factor, lower = (None if stop in ("interrupted", "unjudged") else TRIAL_LIMIT), True
        stopped = {"interrupted": "interrupted", "unjudged": "a trial could not be judged"}.get(stop, "max trials reached")
        bounded = (f"every trial up to {_n(lo)} events/s was sustained; the search stopped ({stopped}) before a rate "
                   f"failed")
    else:
        factor, lower, bounded = None, False, "no trial finished"
    return SearchResult(trials=list(trials), capacity_eps=lo, next_eps=hi, limiting_factor=factor,
                        bounded_by=bounded, lower_bound=lower and lo is not None, resolution_eps=res,
                        resolution_reached=bool(reached), interrupted=interrupted, stop_reason=stop)


# ------------------------------------------------------------------------------------------------ running it
@dataclass
class CapacityOutcome:
    out_dir: Path
    summary: dict
    exit_code: int


def rate_override(rate: float) -> str:
    eps = int(rate) if float(rate).is_integer() else rate
    return f'producers.rate={{kind="constant", eps={eps}}}'


def trial_overrides(overrides: list[str], rate: float, trial_s: float, warmup_s: float) -> list[str]:
    """A trial's warm-up is fixed (warmup_s at R, the search's own rule above), not until the query caught up:
    near capacity a query catches up slowly, and every trial would wait out producers.warmup_max_s."""
    return list(overrides) + [rate_override(rate), f"producers.duration_s={trial_s:g}",
                              f"producers.warmup_s={warmup_s:g}", 'producers.warmup_until="fixed"', TRIAL_DECLARES]


def trial_label(index: int, rate: float) -> str:
    return f"{index:02d}-eps={int(rate) if float(rate).is_integer() else rate}"


def _positive(name: str, value: float | None, integer: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value) or value <= 0 or (integer and int(value) != value):
        raise InputError(f"{name} {value!r}: must be a positive {'integer' if integer else 'number'}")


def plan(name_or_path: str, overrides: list[str], *, latency_p99_ms: float | None, trial_s: float,
         max_trials: int, start_eps: float | None) -> dict[str, Any]:
    """Everything checked before the first trial (InputError naming the option or field otherwise)."""
    _positive("--trial-s", trial_s)
    _positive("--max-trials", max_trials, integer=True)
    _positive("--start-eps", start_eps)
    _positive("--latency-p99-ms", latency_p99_ms)
    scenario, path, _ = load_scenario(name_or_path, overrides)
    trigger = scenario.spark.trigger
    if trigger.kind != "processingTime":
        raise ConfigError(f"{path}: spark.trigger.kind = {trigger.kind!r}: a capacity search needs a continuously "
                          f"running query, kind = \"processingTime\"")
    try:
        interval = spark_interval_ms(trigger.interval)
    except ValueError as exc:
        raise ConfigError(f"{path}: spark.trigger.interval: {exc}") from None
    rate = scenario.producers.rate
    start = float(start_eps or (getattr(rate, "eps", None) if rate.kind == "constant" else None)
                  or DEFAULT_START_EPS)
    warmup = scenario.producers.warmup_s or DEFAULT_WARMUP_S
    for r in (start, start * GROWTH ** (max_trials - 1)):  # every trial differs from these only in its rate
        load_scenario(name_or_path, trial_overrides(overrides, r, trial_s, warmup))
    if latency_p99_ms is not None:
        latency, source = float(latency_p99_ms), "--latency-p99-ms"
    elif scenario.checks.latency_p99_ms is not None:
        latency, source = float(scenario.checks.latency_p99_ms), "checks.latency_p99_ms"
    elif LATENCY_INTERVALS * interval > DEFAULT_LATENCY_P99_MS:
        latency, source = LATENCY_INTERVALS * interval, f"default: {LATENCY_INTERVALS:g} x the trigger interval"
    else:
        latency, source = DEFAULT_LATENCY_P99_MS, "default"
    return {"scenario": scenario, "path": path, "start_eps": start, "warmup_s": warmup,
            "limits": Limits(trigger_interval_ms=interval, latency_p99_ms=latency, latency_from=source,
                             min_headroom=scenario.checks.min_headroom)}


def run_capacity(name_or_path: str, overrides: list[str] | None = None, out: Path | None = None,
                 console: Console | None = None, *, latency_p99_ms: float | None = None,
                 trial_s: float = DEFAULT_TRIAL_S, max_trials: int = DEFAULT_MAX_TRIALS,
                 start_eps: float | None = None, replace: bool = False) -> CapacityOutcome:
    overrides = list(overrides or [])
    console = console or Console()
    outdir.check(out, replace)
    p = plan(name_or_path, overrides, latency_p99_ms=latency_p99_ms, trial_s=trial_s, max_trials=max_trials,
             start_eps=start_eps)
    outdir.prepare(out, replace)  # an earlier output replaced only once the scenario is known good
    scenario, limits = p["scenario"], p["limits"]
    cap_dir = runner.new_run_dir(f"{scenario.name}-capacity", out)
    t0 = time.time()
    head = {"scenario": scenario.name, "file": str(p["path"]),
            "overrides": [secrets.redacted_override(o) for o in overrides],  # a record: no secret (harness.secrets)
            "settings": {"start_eps": p["start_eps"], "trial_s": trial_s, "warmup_s": p["warmup_s"],
                         "max_trials": max_trials, "growth": GROWTH, "resolution_fraction": RESOLUTION,
                         "min_step_eps": MIN_STEP_EPS},
            "thresholds": limits.as_dict(), "started_at": t0}
    why = reason_not_shared([scenario])  # one broker for every trial when it allows (harness.commands.shared_broker)
    head["broker"] = {"shared": why is None, "why_not": why}
    shared: list = [None]  # gives a trial the search's broker once it runs

    def write(res: SearchResult) -> dict:
        summary = {**head, "elapsed_s": round(time.time() - t0, 1), **res.as_dict(),
                   "trials": [t.as_dict() for t in res.trials]}
        atomic.write_json(cap_dir / "capacity.json", summary)
        atomic.write_text(cap_dir / "capacity.md", capacity_markdown(summary))
        atomic.write_text(cap_dir / "capacity.html", capacity_html(summary))
        return summary

    def trial(rate: float) -> TrialOutcome:
        index = trial_count[0]
        trial_count[0] += 1
        sub = cap_dir / trial_label(index, rate)
        console.info(f"capacity trial {index + 1} (at most {max_trials}): {_n(rate)} events/s for {trial_s:g} s "
                     f"after a {p['warmup_s']:g} s warm-up")
        try:
            outcome = runner.run_one(name_or_path, trial_overrides(overrides, rate, trial_s, p["warmup_s"]), sub,
                                     console, shared[0]() if shared[0] is not None else None)
        except KeyboardInterrupt:
            return TrialOutcome(rate, "unjudged", run_dir=sub.name, exit_code=130,
                                note="interrupted (Ctrl-C / SIGTERM): not judged")
        criteria = judge_trial(rate, outcome.result, limits)
        if outcome.exit_code == 130:
            return TrialOutcome(rate, "unjudged", criteria, sub.name, 130,
                                note="interrupted (Ctrl-C / SIGTERM): figures kept, not judged")
        verdict, note = trial_verdict(criteria, outcome.result.get("machine"))
        t = TrialOutcome(rate, verdict, criteria, sub.name, outcome.exit_code, note=note)
        console.info(f"capacity trial {index + 1}: {_n(rate)} events/s "
                     + ("sustained" if t.sustained else f"failed: {t.limiting_factor}, {t.detail}"
                        if verdict == "failed" else note))
        return t

    trial_count = [0]
    last: list[SearchResult] = []

    def after(res: SearchResult) -> None:
        last[:] = [res]
        write(res)

    try:
        with shared_broker([scenario], cap_dir, console, "capacity search") as shared[0]:
            result = search(trial, p["start_eps"], max_trials=max_trials, after_trial=after)
    except KeyboardInterrupt:  # between trials (the trial itself turns Ctrl-C into an unjudged outcome)
        prev = last[0] if last else conclude([], None, None, RESOLUTION, MIN_STEP_EPS, "interrupted")
        result = conclude(prev.trials, prev.capacity_eps, prev.next_eps, RESOLUTION, MIN_STEP_EPS, "interrupted")
    summary = write(result)
    console.info(f"capacity search: {len(result.trials)} trials in {summary['elapsed_s']:,.0f} s; "
                 f"{cap_dir}/capacity.html, capacity.md")
    print(result.line(), flush=True)
    code = 130 if result.interrupted else exit_code(result.verdict)  # 0 a capacity, 1 none, 3 unjudged
    return CapacityOutcome(cap_dir, summary, code)


# ------------------------------------------------------------------------------------------------ capacity.md
def headroom_words(th: dict) -> str:
    """The headroom's place in a capacity.md: a criterion with checks.min_headroom, else a recorded figure."""
    room = th.get("headroom") or {}
    if not room.get("required"):
        return "the batch p50 against the trigger recorded as headroom, not a criterion (no checks.min_headroom)"
    return (f"batch p50 <= {_n(room['batch_p50_max_ms'])} ms, {100 * room['min_idle_fraction']:g}% of the trigger "
            f"left idle (checks.min_headroom)")


def capacity_markdown(summary: dict) -> str:
    s, th = summary["settings"], summary["thresholds"]
    lines = [f"# Capacity: {summary['scenario']} ({summary['verdict']})", "", f"**{summary['summary']}**", ""]
    if summary.get("capacity_eps") is not None:
        lines += [f"- capacity: {_n(summary['capacity_eps'])} events/s"
                  + (" (a lower bound)" if summary["lower_bound"] else ""),
                  f"- limiting factor: {summary['limiting_factor'] or '-'}",
                  f"- bounded by: {summary['bounded_by']}",
                  f"- resolution: {_n(summary['resolution_eps'])} events/s "
                  f"({'reached' if summary['resolution_reached'] else 'not reached'}); stopped: "
                  f"{summary['stop_reason']}"]
    lines += [f"- search: from {_n(s['start_eps'])} events/s, x{s['growth']:g} until a trial fails, then bisection "
              f"to {100 * s['resolution_fraction']:g}% (at least {s['min_step_eps']} events/s); trials of "
              f"{s['trial_s']:g} s after a {s['warmup_s']:g} s warm-up, at most {s['max_trials']}",
              f"- sustained when: producers offered the rate within "
              f"{100 * th['producer_rate']['produce_eps_within_fraction_of_rate']:g}% with "
              f"{th['producer_rate']['pacer_skipped_max']} pacer skips; the query kept up as every run's `sustained` "
              f"check judges it (lag slope, beyond {th['sustained']['z']:g} standard "
              f"errors, at most {100 * th['sustained']['lag_growth_fraction']:g}% of the rate, or lag at the end "
              f"within {th['sustained']['lag_end_intervals']:g} x rate x the batch cadence; processed at least "
              f"{100 * (1 - th['sustained']['rate_fraction']):g}% of offered); {headroom_words(th)}; latency p99 <= "
              f"{_n(th['latency_p99']['max_ms'])} ms "
              f"({th['latency_p99']['from']}); the run's checks pass", ""]
    head = ["#", "rate (events/s)", "verdict", "offered/s", "pacer skipped", "batch p50 ms", "lag slope/s",
            "lag at end", "processed/s", "p99 ms", "checks", "limiting factor", "run"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, t in enumerate(summary["trials"]):
        c = t["criteria"]

        def v(name: str) -> str:
            return _n((c.get(name) or {}).get("value"))
        def mark(name: str) -> str:
            return " ✗" if c.get(name) and status_of(c[name]) == "fail" else ""
        checks = c.get("checks") or {}
        cells = [str(i), _n(t["rate_eps"]), t["verdict"],
                 v("producer_rate") + mark("producer_rate"),
                 _n((c.get("producer_rate") or {}).get("pacer_skipped")), v("headroom") + mark("headroom"),
                 v("lag_growth") + mark("lag_growth"),
                 _n((c.get("lag_growth") or {}).get("end_lag")),
                 v("processed_rate") + mark("processed_rate"),
                 v("latency_p99") + mark("latency_p99"),
                 "pass" if checks.get("ok") else ("-" if checks.get("ok") is None else "FAIL"),
                 t["limiting_factor"] or "-", t["run_dir"] or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    failed = [t for t in summary["trials"] if t["verdict"] == "failed"]
    if failed:
        lines += [""] + [f"- {_n(t['rate_eps'])} events/s ({t['run_dir']}): {t['limiting_factor']}: {t['detail']}"
                         for t in failed]
    return "\n".join(lines) + "\n"

