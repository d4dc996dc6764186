"""`harness bench verdicts --all`: every shipped scenario, run after run, at its expected verdict (issue 30).

The scenarios are what users run first and copy from; one that flips with the machine's mood teaches them to
ignore the harness. The catalogue runs every shipped scenario (scenarios/*.toml; `--backend`, `--kind` and
`--only` pick a part) `--runs N` times on the machine as it is, one run at a time, each an ordinary
`harness run` in a process of its own (a sweep's run is the whole sweep), and puts side by side, per scenario:

- each run's verdict class and the checks that decided a non-pass (harness.bench.verdict_row; a sweep's: the
  sweep verdict, and each combination that did not pass with what it failed);
- the figures the verdict rests on (lag slope and its band, processed/offered, batch p50 against the trigger),
  the harness's footprint and the other processes' share of the machine;
- the margin of every threshold-decided check (harness.bench.margins): how much of what the check allows was
  left unused; a sweep's is that of its combination nearest a threshold, either side of it (one that could flip
  to unknown makes the sweep unjudged);
- whether it held: every run at the expected verdict. Every shipped scenario is expected to PASS: a scenario
  whose point is a failure (a deleted topic, an aged-out range) declares it in its checks and passes only when
  that failure happens, and a sweep passes when one of its settings meets the goal (harness.commands.sweep).

Flagged: a scenario not at its expected verdict in every run, or whose margin nearest its threshold is within
NARROW (10%) of it without `checks.narrow_margin` saying why. Exit code: 0 nothing flagged, 1 something, 130
interrupted.

A whole catalogue takes more than an hour here, so it runs in parts and resumes: catalogue.json is rewritten
after every run, and `--out DIR --resume` runs into an existing catalogue only what it lacks for the
scenarios picked (a part for each backend into one directory makes one catalogue); a run that was cut off is
run again. Each scenario's runs are in DIR/<scenario>/<nn>/ with their logs beside them.
"""
from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.files import atomic, outdir
from harness.bench import wide_console
from harness.bench.margins import NARROW, margin_text, margins, smallest
from harness.bench.verdict_row import FAIL, PASS, figures, first_clause, make_row, read_result
from harness.bench.verdicts import BEYOND_TRAFFIC_S, run_once
from harness.commands.sweep import combinations
from harness.config import MAX_SWEEP_RUNS, ConfigError, Scenario, load_scenario
from harness.console import Console
from harness.errors import InputError
from harness.files.paths import SCENARIOS_DIR
from harness.runner import new_run_dir
from harness.supervisor import Supervisor

KINDS = ("load", "faults", "sweep")
BACKENDS = ("kafka", "eventhubs")
EXPECTED = PASS
COLUMNS = ("scenario", "backend", "kind", "runs", "verdicts", "decided by (non-pass)", "smallest margin",
           "lag slope /s", "processed / offered", "batch p50 / trigger", "footprint", "machine", "minutes a run")


@dataclass(frozen=True)
class Entry:
    """One shipped scenario as the catalogue picks and times it."""
    name: str
    backend: str
    kind: str
    runs_inside: int  # the `harness run`s one catalogue run is (a sweep's combinations x its repeats)
    traffic_s: float  # one run's warm-up bound and traffic
    narrow_margin: str | None

    @property
    def timeout_s(self) -> float:
        return self.runs_inside * (self.traffic_s + BEYOND_TRAFFIC_S)


def kind_of(scenario: Scenario) -> str:
    return "sweep" if scenario.sweep else "faults" if scenario.faults else "load"


def backend_of(scenario: Scenario) -> str:
    return scenario.backend.label()


def entry(path: Path) -> Entry:
    scenario, _, _ = load_scenario(str(path))
    p = scenario.producers
    inside = len(combinations(scenario.sweep)) * scenario.sweep_repeat if scenario.sweep else 1
    return Entry(scenario.name, backend_of(scenario), kind_of(scenario), inside,
                 float(p.warmup_max_s) + float(p.duration_s), scenario.checks.narrow_margin)


def pick(backend: str | None = None, kind: str | None = None, only: list[str] | None = None,
         directory: Path = SCENARIOS_DIR) -> list[Entry]:
    """The shipped scenarios the options pick, by name; InputError (exit 2) for an unknown choice, before
    anything runs; a shipped scenario that does not load is a ConfigError naming it."""
    if backend is not None and backend not in BACKENDS:
        raise InputError(f"--backend {backend}: one of {', '.join(BACKENDS)}")
    if kind is not None and kind not in KINDS:
        raise InputError(f"--kind {kind}: one of {', '.join(KINDS)} (load: neither faults nor a sweep)")
    paths = {p.stem: p for p in sorted(directory.glob("*.toml"))}
    unknown = [n for n in only or [] if n not in paths]
    if unknown:
        raise InputError(f"--only {','.join(unknown)}: not shipped scenarios (in {directory}: "
                         f"{', '.join(paths)})")
    picked = []
    for name, path in paths.items():
        if only and name not in only:
            continue
        try:
            e = entry(path)
        except ConfigError as exc:
            raise ConfigError(f"{path}: the shipped scenario does not load: {exc}") from exc
        if (backend is None or e.backend.split(" ")[0] == backend) and (kind is None or e.kind == kind):
            picked.append(e)
    if not picked:
        raise InputError("no shipped scenario matches " + " ".join(
            f"{flag} {value}" for flag, value in (("--backend", backend), ("--kind", kind),
                                                 ("--only", ",".join(only or []))) if value))
    return picked


def sweep_row(name: str, run_dir: Path, exit_code: int | None) -> dict:
    """A sweep's run as a row: its verdict (sweep.json), each combination that did not pass with the checks it
    failed, the figures and margins of the combination it recommends (else its first), and as the sweep's margin
    the one nearest its threshold over every combination, either side of it: a combination that fails its goal
    decisively is the sweep's finding, one that could flip either way makes the sweep's verdict flip."""
    try:
        summary = json.loads((run_dir / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = None
    if not isinstance(summary, dict):
        row = make_row(name, "quiet", run_dir, exit_code, None)
        return row | {"margins": [], "smallest": None}
    points = [p for p in summary.get("runs") or [] if isinstance(p, dict)]
    results = {p.get("run_dir"): read_result(run_dir / str(p.get("run_dir"))) for p in points}
    deciding = [{"name": str(p.get("run_dir")), "status": str(p.get("verdict")),
                 "detail": ", ".join(p.get("failed_checks") or []) or str(p.get("verdict"))}
                for p in points if p.get("verdict") != PASS]
    closest = None  # the combination nearest a threshold either way: one that flips to unknown makes the sweep
    for p in points:  # unjudged, as surely as a passing one that fails would change its answer
        low = smallest(margins(results[p.get("run_dir")]))
        if low is not None and (closest is None or abs(low["margin"]) < abs(closest["margin"])):
            closest = low | {"check": f"{p.get('run_dir')}: {low['check']}"}
    shown = (summary.get("recommended") or {}).get("run_dir") or (points[0].get("run_dir") if points else None)
    verdict = summary.get("verdict")
    cls = verdict if verdict in (PASS, FAIL) else "unjudged"
    return {"run": name, "mode": "quiet", "run_dir": str(run_dir), "exit_code": exit_code, "verdict": verdict,
            "class": cls, "unjudged_reason": None, "deciding": deciding,
            "figures": figures(results.get(shown)), "figures_of": shown,
            "margins": margins(results.get(shown)), "smallest": closest}


def run_row(e: Entry, name: str, run_dir: Path, exit_code: int | None) -> dict:
    if e.kind == "sweep":
        return sweep_row(name, run_dir, exit_code)
    result = read_result(run_dir)
    found = margins(result)
    return make_row(name, "quiet", run_dir, exit_code, result) | {"margins": found, "smallest": smallest(found)}


def scenario_summary(e: Entry, rows: list[dict]) -> dict:
    """Whether the scenario held (every run at EXPECTED) and its smallest margin over its runs; flagged why."""
    classes = [r["class"] for r in rows]
    held = bool(rows) and all(c == EXPECTED for c in classes)
    low = min((r["smallest"] for r in rows if r.get("smallest")), key=lambda m: abs(m["margin"]), default=None)
    flags = []
    if rows and not held:
        flags.append(f"not {EXPECTED} in every run: " + ", ".join(classes))
    narrow = low is not None and abs(low["margin"]) < NARROW
    if narrow and held:
        flags.append(f"margin {margin_text(low)} within {NARROW:.0%} of its threshold" + (
            f" (declared: {e.narrow_margin})" if e.narrow_margin else ""))
    flagged = bool(rows) and (not held or (narrow and not e.narrow_margin))
    return {"scenario": e.name, "backend": e.backend, "kind": e.kind, "runs": len(rows), "classes": classes,
            "held": held if rows else None, "smallest": low, "narrow_margin": e.narrow_margin, "flags": flags,
            "flagged": flagged, "wall_s": [r.get("wall_s") for r in rows]}


def _range(values: list[float], fmt) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)} to {fmt(hi)}"


def cells(s: dict, rows: list[dict]) -> list[str]:
    """One scenario's line of the table: its runs' figures as ranges."""
    f = [r["figures"] for r in rows]
    counts = {c: s["classes"].count(c) for c in dict.fromkeys(s["classes"])}
    verdicts = ", ".join(f"{n}/{len(rows)} {c}" for c, n in counts.items()) or "not run"
    decided = "; ".join(dict.fromkeys(f"{d['name']} ({d['status']}): {first_clause(d['detail'], 80)}"
                                      for r in rows for d in r["deciding"]))
    lag = _range([x["lag_slope_eps"] for x in f], lambda v: f"{v:+,.0f}")
    limits = [x["lag_slope_limit_eps"] for x in f if x["lag_slope_limit_eps"] is not None]
    if lag != "-" and limits:
        lag += f" (limit {min(limits):,.0f})"
    rate = _range([100 * x["processed_eps"] / x["offered_eps"] for x in f
                   if x["processed_eps"] is not None and x["offered_eps"]], lambda v: f"{v:.0f}%")
    offered = _range([x["offered_eps"] for x in f], lambda v: f"{v:,.0f}/s")
    batch = _range([x["batch_p50_ms"] for x in f], lambda v: f"{v:,.0f}")
    trigger = next((x["trigger_ms"] for x in f if x["trigger_ms"] is not None), None)
    low = margin_text(s["smallest"]) + (" (declared)" if s["smallest"] and s["narrow_margin"]
                                        and abs(s["smallest"]["margin"]) < NARROW else "")
    return [s["scenario"], s["backend"], s["kind"], str(s["runs"]), verdicts, decided or "-", low, lag,
            "-" if rate == "-" else f"{rate} of {offered}",
            "-" if batch == "-" else f"{batch} / {'-' if trigger is None else f'{trigger:,.0f}'} ms",
            _range([x["footprint_ratio"] for x in f], lambda v: f"{100 * v:.1f}%"),
            _range([x["machine_other_share"] for x in f], lambda v: f"{100 * v:.0f}%"),
            _range([r.get("wall_s") for r in rows], lambda v: f"{v / 60:.1f}")]


def _md(cell: str) -> str:
    return cell.replace("|", "\\|") or " "


def markdown(cat: dict) -> str:
    """catalogue.md: the command, one line per scenario, what is flagged, how long it took."""
    by = _rows_by_scenario(cat)
    flagged = [s for s in cat["scenarios"] if s["flagged"]]
    lines = [f"# The scenario catalogue: {len(cat['scenarios'])} scenarios, "
             f"{'nothing flagged' if not flagged else f'{len(flagged)} flagged'}", "",
             f"`{cat['command']}`", "",
             f"Each scenario run {cat['runs_per_scenario']} time(s), one run at a time, on the machine as it is; "
             f"expected verdict: {EXPECTED} (a scenario whose point is a failure passes only when it happens). "
             f"Margin: the share of what a threshold-decided check allows left unused (harness.bench.margins); "
             f"flagged under {NARROW:.0%} unless the scenario declares why. Runs took "
             f"{sum(r.get('wall_s') or 0 for r in cat['runs']) / 60:,.0f} minutes in all.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for s in cat["scenarios"]:
        lines.append("| " + " | ".join(_md(c) for c in cells(s, by.get(s["scenario"], []))) + " |")
    lines += ["", "## Flagged", ""] + ([f"- {s['scenario']}: {'; '.join(s['flags'])}" for s in flagged]
                                       or ["None."])
    declared = [s for s in cat["scenarios"] if s["narrow_margin"] and not s["flagged"]]
    if declared:
        lines += ["", "## Narrow by declaration", ""] + [f"- {s['scenario']}: {s['narrow_margin']}" for s in declared]
    if cat.get("interrupted"):
        lines += ["", "Interrupted: the runs above are the ones that ended; `--resume` runs the rest."]
    return "\n".join(lines) + "\n"


def _rows_by_scenario(cat: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in cat["runs"]:
        out.setdefault(r["scenario"], []).append(r)
    return out


def summarise(cat: dict, picked: list[Entry]) -> dict:
    """The per-scenario lines of every scenario the catalogue holds runs of or picked now, in name order."""
    known = {e.name: e for e in picked}
    by = _rows_by_scenario(cat)
    for name in by:
        if name not in known:
            try:
                known[name] = entry(SCENARIOS_DIR / f"{name}.toml")
            except (ConfigError, OSError):
                continue
    cat["scenarios"] = [scenario_summary(known[n], by.get(n, [])) for n in sorted(known)]
    return cat


def write(cat_dir: Path, cat: dict) -> None:
    atomic.write_json(cat_dir / "catalogue.json", cat)
    atomic.write_text(cat_dir / "catalogue.md", markdown(cat))


def table(cat: dict):
    from rich.table import Table

    t = Table(title="the scenario catalogue", show_header=True, header_style="bold")
    for col in COLUMNS:
        t.add_column(col, overflow="fold")
    by = _rows_by_scenario(cat)
    for s in cat["scenarios"]:
        c = cells(s, by.get(s["scenario"], []))
        colour = "red" if s["flagged"] else "green" if s["held"] else "yellow"
        t.add_row(f"[{colour}]{c[0]}[/{colour}]", *c[1:])
    return t


def load_existing(cat_dir: Path) -> dict:
    """An earlier catalogue's catalogue.json to resume; InputError when the directory holds none."""
    try:
        cat = json.loads((cat_dir / "catalogue.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"--resume: {cat_dir} holds no readable catalogue.json ({exc}); give the directory of an "
                         f"earlier `harness bench verdicts --all`") from exc
    if not isinstance(cat, dict) or cat.get("bench") != "catalogue" or not isinstance(cat.get("runs"), list):
        raise InputError(f"--resume: {cat_dir / 'catalogue.json'} is not a catalogue's")
    return cat


def command_line(runs: int, backend: str | None, kind: str | None, only: list[str] | None) -> str:
    parts = ["harness bench verdicts --all", f"--runs {runs}"]
    parts += [f"--backend {backend}"] * bool(backend) + [f"--kind {kind}"] * bool(kind)
    return " ".join(parts + ([f"--only {','.join(only)}"] if only else []))


def main(*, runs: int = 1, backend: str | None = None, kind: str | None = None, only: list[str] | None = None,
         out: Path | None = None, resume: bool = False, replace: bool = False,
         console: Console | None = None) -> int:
    """The command (module docstring): 0 nothing flagged, 1 something, 130 interrupted; InputError: exit 2."""
    if not 1 <= runs <= MAX_SWEEP_RUNS:
        raise InputError(f"--runs {runs}: runs per scenario, 1 to {MAX_SWEEP_RUNS}")
    if resume and out is None:
        raise InputError("--resume: give the catalogue's directory with --out")
    picked = pick(backend, kind, only)
    console = console or Console()
    if resume:
        cat_dir, cat = out.resolve(), load_existing(out)
        cat["runs_per_scenario"] = max(runs, int(cat.get("runs_per_scenario") or 1))
        cat["commands"] = list(cat.get("commands") or [cat.get("command")]) + [command_line(runs, backend, kind,
                                                                                          only) + " --resume"]
    else:
        outdir.prepare(out, replace)
        cat_dir = new_run_dir("catalogue", out)
        cat = {"bench": "catalogue", "command": command_line(runs, backend, kind, only), "runs_per_scenario": runs,
               "expected": EXPECTED, "narrow": NARROW, "interrupted": False, "runs": [], "scenarios": []}
        cat["commands"] = [cat["command"]]
    cat["interrupted"] = False
    done = {(r["scenario"], r["round"]) for r in cat["runs"]}
    todo = [(e, i) for e in picked for i in range(1, runs + 1) if (e.name, i) not in done]
    console.info(f"catalogue: {len(picked)} scenarios x {runs} run(s): {len(todo)} to run into {cat_dir}"
                 + (f" ({len(done)} runs already there)" if done else ""))
    write(cat_dir, summarise(cat, picked))
    try:
        with Supervisor(uuid.uuid4().hex) as sup:
            for n, (e, i) in enumerate(todo, 1):
                cat["runs"].append(one_run(sup, e, i, cat_dir, f"[{n}/{len(todo)}]", console))
                write(cat_dir, summarise(cat, picked))
    except KeyboardInterrupt:
        cat["interrupted"] = True
    write(cat_dir, summarise(cat, picked))
    wide_console(console).print(table(cat))
    flagged = [s for s in cat["scenarios"] if s["flagged"]]
    for s in flagged:
        console.warn(f"{s['scenario']}: {'; '.join(s['flags'])}")
    console.info(f"catalogue: {cat_dir}/catalogue.md, catalogue.json; "
                 + (f"{len(flagged)} flagged" if flagged else "nothing flagged"))
    if cat["interrupted"]:
        return 130
    return 1 if flagged else 0


def run_argv(scenario: str, run_dir: Path, replace: bool) -> list[str]:
    """`harness run` as shipped, into run_dir (emptied first when a run cut off left it)."""
    return [sys.executable, "-m", "harness", "run", scenario, "--out", str(run_dir), "--quiet"] + (
        ["--replace"] if replace else [])


def one_run(sup: Supervisor, e: Entry, i: int, cat_dir: Path, progress: str, console: Console) -> dict:
    """Scenario `e`'s round `i` into cat_dir/<scenario>/<nn>/ (a directory left by a run cut off is replaced)."""
    run_dir = cat_dir / e.name / f"{i:02d}"
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    argv = run_argv(e.name, run_dir, replace=run_dir.exists())
    started = time.monotonic()
    with console.step(f"{progress} harness run {e.name} ({e.backend}, {e.kind}) round {i}"):
        code = run_once(sup, f"{e.name}-{i:02d}", argv, cat_dir / e.name / f"{i:02d}.log", e.timeout_s, console)
    row = run_row(e, f"{e.name}#{i}", run_dir, code) | {"scenario": e.name, "round": i,
                                                         "wall_s": round(time.monotonic() - started, 1)}
    low = row["smallest"]
    console.info(f"{e.name} #{i}: {row['class']}"
                 + (f", decided by {'; '.join(first_clause(d['detail'], 80) for d in row['deciding'])}"
                    if row["deciding"] else "")
                 + f"; smallest margin {margin_text(low)}; {row['wall_s'] / 60:.1f} min")
    return row
