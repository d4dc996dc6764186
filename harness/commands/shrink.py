"""`harness shrink RUN_DIR`: the smallest part of a failed run's fault schedule that still fails it the same way,
written as a scenario file to run again and attach to a bug report.

A soak with a random schedule or a scenario with many faults fails; which injections does the failure need?
Delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", 2002: `ddmin`) answers
with re-runs: the failed run's scenario (its scenario.json, the same seed, so the same traffic) is run again with
subsets of the injections the run made (its faults.jsonl: each injection with its planned time and heal, one
`[[faults]]` table each, with what the fault drew pinned: harness.faults.base.Fault.pinned), keeping a subset
whenever the run still fails. "The same way" is the failure's signature: the verdict fail with at least one of the
original run's failing checks failing again (`--check NAME` narrows it).

Before the search the whole schedule is run once as separate injections: a failure that does not come back then
is not the schedule's to shrink (a flaky failure, or the machine), and shrink says so and stops (exit 1). The empty
schedule is tried next: a failure without any fault is the query's alone. The search is bounded (`--max-runs`,
`--max-minutes`): when the budget runs out, the smallest failing schedule found so far is written and said to be
not proven minimal. What a trial that came out unjudged (a busy machine) means is "did not fail", as ddmin's
unresolved outcome: it never makes a schedule smaller.

Writes into `<out>` (default `runs/<UTC>-<scenario>-shrink/`): `trial-NN/` (each an ordinary run directory, with
the scenario file it ran as `trial-NN.toml`), `shrink.json` (rewritten after every trial), `minimal.toml` (the
minimal schedule's scenario) and `shrink.md`. Exit 0 when a failing schedule was written, 1 when the failure did
not reproduce, 2 on bad input, 130 when interrupted (shrink.json keeps the trials done).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from harness import runner, secrets
from harness.check import status_of
from harness.config import ConfigError, load_scenario
from harness.console import Console
from harness.errors import InputError
from harness.faults import FAULTS
from harness.files import atomic, outdir
from harness.files.jsonl import read_jsonl
from harness.files.tomlfile import write_toml
from harness.queries import importable

SCHEDULE_KEYS = ("at_s", "every_s", "count", "until_s", "jitter_s", "duration_s", "window")


@dataclass(frozen=True)
class Injection:
    """One injection the failed run made, as a `[[faults]]` table of its own."""
    fault: int  # its entry in the run's [[faults]]
    n: int  # its number among that entry's injections
    kind: str
    at_s: float
    table: dict = field(hash=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.kind}@{self.at_s:g}s (faults.{self.fault} #{self.n})"


@dataclass
class Outcome:
    """What ddmin ended with: the smallest failing subset found, how many tests it took, and whether it is proven
    1-minimal (every subset with one unit fewer was tested and did not fail)."""
    minimal: list
    tests: int
    complete: bool


class Budget(Exception):
    """No test may run any more (runs or time)."""


def ddmin(units: Sequence, fails: Callable[[list], bool]) -> Outcome:
    """Zeller's ddmin over `units` (which fail as a whole): split into n chunks, keep a chunk that fails, else a
    complement that fails, else split finer, until no single unit can be taken away. `fails` may raise Budget; the
    smallest failing subset found so far is returned then, not proven minimal. Each subset is tested once."""
    seen: dict[tuple, bool] = {}

    def test(subset: list) -> bool:
        key = tuple(subset)
        if key not in seen:
            seen[key] = fails(subset)
        return seen[key]

    current, n = list(units), 2
    try:
        while len(current) >= 2:
            chunks = _split(current, n)
            smaller = next((c for c in chunks if test(c)), None)
            if smaller is not None:
                current, n = smaller, 2
                continue
            if n > 2:
                complements = ([u for u in current if u not in c] for c in chunks)
                smaller = next((c for c in complements if test(c)), None)
                if smaller is not None:
                    current, n = smaller, max(n - 1, 2)
                    continue
            if n >= len(current):
                break
            n = min(len(current), 2 * n)
    except Budget:
        return Outcome(current, len(seen), complete=False)
    return Outcome(current, len(seen), complete=True)


def _split(units: list, n: int) -> list[list]:
    size, extra = divmod(len(units), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(units[start:end])
        start = end
    return [c for c in chunks if c]


def read_failed_run(run_dir: Path) -> tuple[dict, dict, list[str], list[Injection]]:
    """(scenario.json, result.json, the failing checks, the injections made) of a failed run; InputError (exit 2)
    naming the file when it is not one."""
    files = {name: run_dir / name for name in ("scenario.json", "result.json", "faults.jsonl")}
    for name, path in files.items():
        if not path.is_file():
            raise InputError(f"{run_dir}: no {name} there: give the directory of a failed `harness run` (or soak) "
                             "that injected faults")
    try:
        record = json.loads(files["scenario.json"].read_text(encoding="utf-8"))
        result = json.loads(files["result.json"].read_text(encoding="utf-8"))
        resolved = record["resolved"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{run_dir}: scenario.json or result.json not readable: {exc}") from None
    failing = [c["name"] for c in result.get("checks") or [] if status_of(c) == "fail"]
    if result.get("verdict") != "fail" or not failing:
        raise InputError(f"{files['result.json']}: verdict is {result.get('verdict')!r}; shrink takes a run that "
                         "failed (verdict 'fail', a failing check)")
    hidden = secrets.hidden_paths(resolved)
    if hidden:
        raise InputError(f"{files['scenario.json']}: shows {', '.join(hidden[:5])} as {secrets.REDACTED!r} "
                         "(secrets are never written), so the run cannot be run again as it was; give secrets in "
                         "the scenario as \"${ENV_VAR}\" references, which a record keeps")
    injections = recorded_injections(files["faults.jsonl"], resolved.get("faults") or [])
    if not injections:
        raise InputError(f"{files['faults.jsonl']}: the run injected no fault: there is no schedule to shrink")
    return record, result, failing, injections


def recorded_injections(path: Path, tables: list[dict]) -> list[Injection]:
    """Every injection faults.jsonl records, in time order, each as its own `[[faults]]` table: the entry's own
    options, `at_s` its planned time, `duration_s` its planned heal (none: healed before the drain, as it was), and
    what it drew pinned."""
    injected, heals = {}, {}
    for row in read_jsonl(path):
        key = (row["fault"], row["n"])
        if row["action"] == "inject" and not row.get("error"):
            injected[key] = row
        elif row["action"] == "heal":
            heals[key] = row.get("scheduled_s")
    out = []
    for (index, n), row in injected.items():
        if not 0 <= index < len(tables):
            raise InputError(f"{path}: an injection of faults.{index}, which scenario.json does not have")
        table = {k: v for k, v in tables[index].items() if k not in SCHEDULE_KEYS and v is not None}
        at = float(row["scheduled_s"])
        table["at_s"] = at
        if heals.get((index, n)) is not None:
            table["duration_s"] = round(float(heals[(index, n)]) - at, 6)
        fault = FAULTS.get(row["kind"])
        if fault is not None:
            table.update(fault.pinned(row.get("detail") or {}))
        out.append(Injection(index, n, row["kind"], at, table))
    return sorted(out, key=lambda i: (i.at_s, i.fault, i.n))


def user_query_home(run_dir: Path, record: dict) -> str | None:
    """A user's query module (`package.module:function`) is imported from where the run found it (run_state.json's
    `scenario_dir`, else the scenario file's directory), not from next to the trial files: made importable here
    and for the query processes the trials start (they inherit PYTHONPATH), as an installed module would be."""
    if ":" not in str(record["resolved"].get("spark", {}).get("query", "")):
        return None
    try:
        home = json.loads((run_dir / "run_state.json").read_text(encoding="utf-8")).get("scenario_dir")
    except (OSError, ValueError):
        home = None
    home = home or str(Path(record.get("file") or ".").parent)
    if not Path(home).is_dir():
        raise InputError(f"{run_dir / 'run_state.json'}: the run's query {record['resolved']['spark']['query']!r} "
                         f"was imported from {home}, which is not there any more: shrink re-runs the query")
    importable(home)
    os.environ["PYTHONPATH"] = os.pathsep.join([home, *filter(None, [os.environ.get("PYTHONPATH")])])
    return home


def scenario_with(resolved: dict, chosen: Sequence[Injection], name: str, description: str) -> dict:
    """The run's scenario with `chosen` as its whole schedule (a soak's random draw already fixed in `resolved`)."""
    data = json.loads(json.dumps(resolved))
    data.update(name=name, description=description, faults=[dict(i.table) for i in chosen])
    data.pop("sweep", None)
    data.pop("sweep_repeat", None)
    if isinstance(data.get("soak"), dict):
        data["soak"].pop("random_faults", None)
    return data


class Interrupted(Exception):
    """A trial run was stopped (Ctrl-C, SIGTERM): no further trial runs."""


class Trials:
    """Runs a schedule as an ordinary run in `<out>/trial-NN/` and says whether it failed the same way; records
    every trial in shrink.json as it goes."""

    def __init__(self, out: Path, resolved: dict, signature: set[str], summary: dict, console: Console,
                 max_runs: int, deadline: float):
        self.out, self.resolved, self.signature, self.summary = out, resolved, signature, summary
        self.console, self.max_runs, self.deadline = console, max_runs, deadline
        self.base = str(resolved.get("name") or "scenario")

    def fails(self, chosen: Sequence[Injection]) -> bool:
        trials = self.summary["trials"]
        if len(trials) >= self.max_runs or time.monotonic() >= self.deadline:
            raise Budget
        name = f"trial-{len(trials):02d}"
        labels = [i.label for i in chosen]
        path = self.out / f"{name}.toml"
        write_toml(path, scenario_with(self.resolved, chosen, f"{self.base[:52]}-{name}",
                                       f"harness shrink trial {len(trials)}: {len(chosen)} injection(s)"),
                   f"harness shrink: {name} of {self.summary['run_dir']}")
        try:
            scenario, path, _ = load_scenario(str(path))
        except ConfigError as exc:  # a part of a schedule may not stand alone: ddmin's unresolved outcome
            trials.append({"trial": name, "injections": labels, "run_dir": None, "verdict": "invalid",
                           "failing_checks": [], "reproduced": False, "seconds": 0.0, "error": str(exc)})
            atomic.write_json(self.out / "shrink.json", self.summary)
            self.console.info(f"shrink {name}: not a scenario on its own ({exc}): counted as not failing")
            return False
        self.console.info(f"shrink {name}: {len(chosen)} of {len(self.summary['injections'])} injection(s): "
                          + (", ".join(labels) or "no fault"))
        started = time.monotonic()
        outcome = runner.run_loaded(scenario, path, [], self.out / name, self.console)
        failing = [c["name"] for c in outcome.result.get("checks") or [] if status_of(c) == "fail"]
        same = outcome.result.get("verdict") == "fail" and bool(self.signature & set(failing))
        trials.append({"trial": name, "injections": labels, "run_dir": name, "verdict": outcome.result.get("verdict"),
                       "failing_checks": failing, "reproduced": same, "seconds": round(time.monotonic() - started, 1)})
        atomic.write_json(self.out / "shrink.json", self.summary)
        self.console.info(f"shrink {name}: {(outcome.result.get('verdict') or 'unjudged').upper()}"
                          + (f" ({', '.join(failing)})" if failing else "")
                          + (": fails the same way" if same else ": does not fail the same way"))
        if outcome.exit_code == 130:
            raise Interrupted
        return same


def shrink(run_dir: Path, out: Path | None = None, checks: list[str] | None = None, max_runs: int = 16,
           max_minutes: float = 90.0, console: Console | None = None, replace: bool = False) -> tuple[Path, int]:
    """Shrink a failed run's schedule; (the shrink directory, the exit code)."""
    console = console or Console()
    run_dir = Path(run_dir).resolve()
    outdir.check(out, replace)
    record, result, failing, injections = read_failed_run(run_dir)
    unknown = sorted(set(checks or []) - set(failing))
    if unknown:
        raise InputError(f"--check {unknown[0]!r}: not a failing check of {run_dir / 'result.json'}; its failing "
                         f"checks: {', '.join(failing)}")
    if max_runs < 2:
        raise InputError(f"--max-runs {max_runs}: at least 2 (the whole schedule, then a smaller one)")
    resolved = record["resolved"]
    home = user_query_home(run_dir, record)
    outdir.prepare(out, replace)
    out = runner.new_run_dir(f"{str(resolved.get('name') or 'scenario')[:50]}-shrink", out)
    signature = set(checks or failing)
    summary: dict[str, Any] = {"run_dir": str(run_dir), "scenario": resolved.get("name"),
                               "signature": sorted(signature), "injections": [i.label for i in injections],
                               "max_runs": max_runs, "max_minutes": max_minutes, "trials": []}
    atomic.write_json(out / "shrink.json", summary)
    trials = Trials(out, resolved, signature, summary, console, max_runs, time.monotonic() + max_minutes * 60)
    outcome, code = _search(trials, injections, summary)
    if outcome is not None:
        summary.update(minimal=[i.label for i in outcome.minimal], complete=outcome.complete,
                       minimal_file="minimal.toml")
        write_toml(out / "minimal.toml", scenario_with(
            resolved, outcome.minimal, f"{str(resolved.get('name') or 'scenario')[:56]}-minimal",
            f"The smallest fault schedule found by harness shrink that still fails {', '.join(sorted(signature))} "
            f"({len(outcome.minimal)} of the {len(injections)} injections of {run_dir.name})."),
            _header(run_dir, summary, home))
    atomic.write_json(out / "shrink.json", summary)
    atomic.write_text(out / "shrink.md", shrink_markdown(summary))
    console.info(_closing(summary, out))
    return out, code


def _search(trials: Trials, injections: list[Injection], summary: dict) -> tuple[Outcome | None, int]:
    """The whole schedule (must fail again), the empty one, then ddmin; (what was found, the exit code)."""
    try:
        if not trials.fails(injections):
            summary["outcome"] = "not reproduced"
            return None, 1
        if trials.fails([]):
            summary["outcome"] = "fails without faults"
            return Outcome([], len(summary["trials"]), True), 0
        if len(injections) == 1:
            found = Outcome(list(injections), len(summary["trials"]), True)
        else:
            found = ddmin(injections, trials.fails)
    except Interrupted:
        summary["outcome"] = "interrupted"
        return _smallest_failing(summary, injections), 130
    except Budget:  # before ddmin started (out of time): the smallest schedule that failed so far
        found = _smallest_failing(summary, injections)
        if found is None:
            summary["outcome"] = "out of time before the failure came back"
            return None, 1
    summary["outcome"] = "minimal" if found.complete else "smaller, not proven minimal"
    return found, 0


def _smallest_failing(summary: dict, injections: list[Injection]) -> Outcome | None:
    by_label = {i.label: i for i in injections}
    failing = [t for t in summary["trials"] if t["reproduced"]]
    if not failing:
        return None
    best = min(failing, key=lambda t: len(t["injections"]))
    return Outcome([by_label[label] for label in best["injections"]], len(summary["trials"]), False)


def _header(run_dir: Path, summary: dict, home: str | None) -> str:
    return (f"Written by harness shrink from {run_dir}: {summary['outcome']}, after {len(summary['trials'])} "
            f"run(s).\nIt fails with {', '.join(summary['signature'])} on the machine that shrank it; run it with "
            "`harness run minimal.toml`" + (f", with {home} (where its query module is) on PYTHONPATH." if home
                                            else "."))


def _closing(summary: dict, out: Path) -> str:
    if summary.get("minimal") is None:
        return (f"shrink: the failure did not come back with the whole schedule ({summary['outcome']}); "
                f"nothing to shrink. {out / 'shrink.md'}")
    return (f"shrink: {len(summary['minimal'])} of {len(summary['injections'])} injection(s) still fail "
            f"({summary['outcome']}, {len(summary['trials'])} run(s)): {', '.join(summary['minimal']) or 'none'}; "
            f"{out / 'minimal.toml'}")


def shrink_markdown(summary: dict) -> str:
    lines = [f"# harness shrink: {summary['scenario']}", "",
             f"From `{summary['run_dir']}`, failing {', '.join(f'`{c}`' for c in summary['signature'])}: "
             f"{summary.get('outcome')}.", ""]
    if summary.get("minimal") is not None:
        lines += [f"**The smallest failing schedule** ({len(summary['minimal'])} of {len(summary['injections'])} "
                  f"injections, in `{summary['minimal_file']}`): " + (", ".join(summary["minimal"]) or "no fault"),
                  "" if summary.get("complete") else "\nThe budget ran out before every smaller schedule was "
                                                     "tried: it is smaller, not proven minimal.", ""]
    lines += ["| trial | injections | verdict | failing checks | same failure | seconds |", "|---|---|---|---|---|---|"]
    for t in summary["trials"]:
        lines.append(f"| {t['trial']} | {', '.join(t['injections']) or 'none'} | {t['verdict']} | "
                     f"{', '.join(t['failing_checks']) or '-'} | {'yes' if t['reproduced'] else 'no'} | "
                     f"{t['seconds']:g} |")
    return "\n".join(lines) + "\n"
