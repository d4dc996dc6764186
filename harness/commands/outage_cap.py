"""`harness outage-cap`: the per-trigger cap (`maxOffsetsPerTrigger` on Kafka, `maxEventsPerTrigger` on Event Hubs:
the connector's own option) a query should restart with after an outage: the largest one whose first batch does
not run out of memory (no failure after the restart, so no crash-loop) and that still drains the backlog within
the time allowed (the topic's retention, as the scenario's outage declares it with `drain_within_s`, or
`--drain-within-s`). The failures of production this answers: an uncapped first batch after an outage reads the
whole backlog and the job crash-loops out of memory (fink-broker#819, hudi#4713); a cap too small drains slower
than records expire.

**Search** (`search`, pure: it only calls `trial(cap) -> Trial`; bounded by `--max-trials`, default 4, like
`harness capacity`'s). Trial 1 is the scenario as written (its own cap, or none). When it holds, that is the
recommendation. When it drained too slowly without failing, a cap cannot help (a cap only spreads the backlog
over more batches): more resources are, and no cap is recommended. When it failed after the restart (out of
memory, the crash-loop), the good caps lie between the floor (what arrives per trigger, `rate x interval`, times
FLOOR_MARGIN: a cap under it never drains) and the backlog that first batch read (a cap above it is no cap); each
next trial is their geometric middle: one that holds raises the floor (the recommendation so far), one that fails
lowers the top, one that drains too slowly raises the floor without being a candidate. It stops when the top is
within STOP_RATIO of the floor.

**A trial** is an ordinary run (harness.runner.run_one) in `<dir>/<nn>-cap=<C>/` with `--set`s on top of the
user's: the cap, the outage's `crash_loop = false` (every failure after the restart counts against the cap) and its
`drain_within_s`. It holds when the run passes; it is `crash` when the query failed after the restart, `slow`
when it did not fail and the backlog did not drain in time, `unjudged` (the machine busy with other work) or
`broken` (another check failed) otherwise: both stop the search, said, with what was found so far.

Written: outage-cap.json (rewritten after every trial) and outage-cap.md, in the search's directory.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness import runner
from harness.config import load_scenario
from harness.console import Console
from harness.errors import InputError
from harness.files import atomic, outdir
from harness.runner import rate_shape
from harness.text.durations import spark_interval_ms

DEFAULT_MAX_TRIALS = 4
FLOOR_MARGIN = 1.5  # a cap must read more per trigger than arrives, by this much, to drain at all
STOP_RATIO = 1.25  # the search ends when the failing top is within this factor of the holding floor


@dataclass
class Trial:
    cap: int | None  # None: the scenario as written
    outcome: str  # held | crash | slow | unjudged | broken
    detail: str = ""
    backlog_events: int | None = None  # what the first batch after the restart had to read
    first_batch_rows: int | None = None
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    drain_s: float | None = None
    crashes: int = 0
    run_dir: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CapSearch:
    trials: list[Trial]
    recommended: int | None  # the cap to restart with; None with `uncapped` True: none needed
    uncapped: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"recommended": self.recommended, "uncapped": self.uncapped, "reason": self.reason,
                "trials": [t.as_dict() for t in self.trials]}


def judge_trial(cap: int | None, result: dict, run_dir: str = "") -> Trial:
    """A trial's outcome from its run's result.json (module docstring)."""
    outages = result.get("outages") or []
    checks = {c["name"]: c for c in result.get("checks") or []}
    o = outages[0] if outages else {}
    first = o.get("first_batch") or {}
    t = Trial(cap, "broken", backlog_events=o.get("backlog_events"), first_batch_rows=first.get("rows"),
              peak_rss_mb=dict(o.get("peak_rss_mb") or {}), drain_s=o.get("drain_s"),
              crashes=int(o.get("crashes") or 0), run_dir=run_dir)
    if not o:
        t.detail = f"no outage measured ({result.get('unjudged_reason') or 'see its result.json'})"
    elif o.get("crashes") or o.get("gave_up"):
        t.outcome = "crash"
        t.detail = f"{t.crashes} failures after the restart: " + "; ".join(o.get("crash_errors") or [])
    elif result.get("verdict") == "pass":
        t.outcome, t.detail = "held", f"drained {t.drain_s} s after the restart"
    elif checks.get("outage_drained", {}).get("status") == "fail":
        t.outcome, t.detail = "slow", checks["outage_drained"]["detail"]
    else:
        bad = [f"{n}: {c['detail'][:200]}" for n, c in checks.items() if c.get("status") in ("fail", "unjudged",
                                                                                            "unknown")]
        t.outcome = "unjudged" if result.get("verdict") == "unjudged" else "broken"
        t.detail = "; ".join(bad) or str(result.get("unjudged_reason") or result.get("verdict"))
    return t


def search(trial: Callable[[int | None], Trial], floor: int, max_trials: int = DEFAULT_MAX_TRIALS,
           after: Callable[[list[Trial]], None] = lambda trials: None) -> CapSearch:
    """The search (module docstring); `floor`: the smallest cap that can drain at all."""
    first = trial(None)
    trials = [first]
    after(trials)
    if first.outcome == "held":
        return CapSearch(trials, first.cap, first.cap is None, "the scenario as written drains without failing")
    if first.outcome == "slow":
        return CapSearch(trials, None, False, "it drains too slowly without failing: a cap only slows the drain "
                                              "(more executors, memory or partitions are needed)")
    if first.outcome != "crash" or not first.backlog_events:
        return CapSearch(trials, None, False, f"stopped: the first trial was {first.outcome} ({first.detail})")
    lo, hi, best = floor, int(first.backlog_events), None
    while len(trials) < max_trials and hi > lo * STOP_RATIO:
        cap = int(round(math.sqrt(lo * hi)))
        t = trial(cap)
        trials.append(t)
        after(trials)
        if t.outcome == "held":
            lo, best = cap, cap
        elif t.outcome == "crash":
            hi = cap
        elif t.outcome == "slow":
            lo = cap
        else:
            return CapSearch(trials, best, False, f"stopped: the trial at cap {cap:,} was {t.outcome} ({t.detail})")
    if best is None:
        return CapSearch(trials, None, False, f"no cap held within {len(trials)} trials (between {lo:,} and {hi:,})")
    return CapSearch(trials, best, False, f"the largest cap that held; {hi:,} failed after the restart"
                     if hi < int(first.backlog_events) else "the largest cap that held")


def plan(name_or_path: str, overrides: list[str], drain_within_s: float | None) -> dict[str, Any]:
    """The scenario checked for a search before anything runs: one outage, a cap option, a drain limit."""
    scenario, path, _ = load_scenario(name_or_path, overrides)
    where = [i for i, f in enumerate(scenario.faults) if f.kind == "outage"]
    if len(where) != 1:
        raise InputError(f"{path}: [[faults]] needs exactly one outage for a cap search (it has {len(where)})")
    option = getattr(scenario.backend, "batch_cap_option", None)
    if not option:
        raise InputError(f"{path}: backend {scenario.backend.kind!r} has no per-trigger cap option to search")
    limit = drain_within_s if drain_within_s is not None else scenario.faults[where[0]].drain_within_s
    if limit is None or limit <= 0:
        raise InputError(f"{path}: faults.{where[0]}.drain_within_s is not set: give --drain-within-s (seconds, "
                         "the topic's retention) or set it in the scenario")
    trigger = scenario.spark.trigger
    if trigger.kind != "processingTime":
        raise InputError(f"{path}: spark.trigger.kind = {trigger.kind!r}; a cap search needs processingTime")
    interval_s = max(float(spark_interval_ms(trigger.interval)) / 1000.0, 1.0)
    floor = int(math.ceil(rate_shape(scenario.producers.rate)[0] * interval_s * FLOOR_MARGIN))
    return {"scenario": scenario, "path": path, "fault": where[0], "option": option, "drain_within_s": limit,
            "floor": floor}


def trial_overrides(overrides: list[str], p: dict, cap: int | None) -> list[str]:
    fault = f"faults.{p['fault']}"
    out = [*overrides, f"{fault}.crash_loop=false", f"{fault}.drain_within_s={p['drain_within_s']}"]
    return out + ([f"spark.source_options.{p['option']}={cap}"] if cap is not None else [])


def run_outage_cap(name_or_path: str, overrides: list[str] | None = None, out: Path | None = None,
                   console: Console | None = None, *, max_trials: int = DEFAULT_MAX_TRIALS,
                   drain_within_s: float | None = None, replace: bool = False) -> tuple[Path, CapSearch, int]:
    overrides, console = list(overrides or []), console or Console()
    if not 1 <= max_trials <= 10:
        raise InputError(f"--max-trials {max_trials}: trials in all, 1 to 10")
    outdir.check(out, replace)
    p = plan(name_or_path, overrides, drain_within_s)
    for cap in (None, p["floor"]):  # every override a trial will take, validated before the first
        load_scenario(name_or_path, trial_overrides(overrides, p, cap))
    outdir.prepare(out, replace)
    top = runner.new_run_dir(f"{p['scenario'].name}-outage-cap", out)
    head = {"scenario": p["scenario"].name, "file": str(p["path"]), "option": p["option"],
            "drain_within_s": p["drain_within_s"], "floor": p["floor"], "max_trials": max_trials,
            "started_at": time.time()}

    def write(res: dict) -> None:
        atomic.write_json(top / "outage-cap.json", {**head, **res})
        atomic.write_text(top / "outage-cap.md", markdown({**head, **res}))

    def trial(cap: int | None) -> Trial:
        label = f"{len(list(top.glob('[0-9][0-9]-*'))):02d}-cap={cap if cap is not None else 'as-written'}"
        console.info(f"outage-cap trial: {p['option']} = {cap if cap is not None else 'as the scenario has it'}")
        outcome = runner.run_one(name_or_path, trial_overrides(overrides, p, cap), top / label, console)
        t = judge_trial(cap, outcome.result, label)
        console.info(f"outage-cap trial: {t.outcome}: {t.detail[:300]}")
        return t

    result = search(trial, p["floor"], max_trials,
                    after=lambda trials: write({"trials": [t.as_dict() for t in trials], "recommended": None}))
    write(result.as_dict())
    line = (f"{p['scenario'].name}: restart with {p['option']} = {result.recommended:,}" if result.recommended
            else f"{p['scenario'].name}: no cap needed" if result.uncapped else f"{p['scenario'].name}: no cap found")
    print(f"{line} ({result.reason}); {top}/outage-cap.md", flush=True)
    return top, result, 0 if result.recommended or result.uncapped else 1


def markdown(summary: dict) -> str:
    """outage-cap.md: the recommendation and every trial."""
    rec = summary.get("recommended")
    lines = [f"# Outage cap search: {summary['scenario']}", "",
             f"Recommended: **{summary['option']} = {rec:,}**" if rec else
             ("Recommended: no cap (the scenario as written holds)" if summary.get("uncapped") else
              "Recommended: none found"),
             "", f"{summary.get('reason', 'searching')}. Drain allowed {summary['drain_within_s']:g} s after the "
                 f"restart; floor {summary['floor']:,} (what arrives per trigger, x{FLOOR_MARGIN:g}).", "",
             "| cap | outcome | backlog | first batch rows | peak RSS MB | drain s | run | detail |",
             "|---|---|---|---|---|---|---|---|"]
    for t in summary.get("trials") or []:
        rss = ", ".join(f"{k} {v:,.0f}" for k, v in (t.get("peak_rss_mb") or {}).items())
        lines.append(f"| {t['cap'] if t['cap'] is not None else 'as written'} | {t['outcome']} | "
                     f"{t['backlog_events'] if t['backlog_events'] is not None else ''} | "
                     f"{t['first_batch_rows'] if t['first_batch_rows'] is not None else ''} | {rss} | "
                     f"{t['drain_s'] if t['drain_s'] is not None else ''} | {t['run_dir']} | "
                     f"{str(t['detail'])[:200].replace('|', '/')} |")
    return "\n".join(lines) + "\n"
