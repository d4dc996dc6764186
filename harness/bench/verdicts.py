"""`harness bench verdicts SCENARIO`: prove with a command that a scenario's verdict holds, whatever the machine
is doing (issue 29). A verdict that flips when a colleague's build runs beside it is noise, not a judgement.

The scenario runs `--runs N` times in each mode, each an ordinary `harness run` in a process of its own:
  quiet     the machine as it is;
  busy K    K cores kept busy by another process (harness.bench.busy) from before the run starts until after it
            ends: a child of the bench's Supervisor, outside the run's own processes, so the run sees other work
            on the machine, as it would a colleague's;
  cold      (`--cold`) the JVMs' class archives deleted first (harness.jvm.cds.remove_archives: `*.jsa` under
            <cache>/cds/, nothing else), as a new virtualenv finds none; the run makes them again.
The modes alternate round by round (cold, quiet, busy K: cold first, so the archives its run makes again are
there for the warm runs after it), so a drift of the machine weighs on every mode alike.

Per run it prints the verdict's class, the checks that decided it and the figures it rests on (harness.bench.
verdict_row: read from the run's result.json, never judged again), then one line per mode and the goal
(harness.bench.agreement, which defines when a verdict holds and `--expect`). It writes bench.json (rewritten
after every run, so an interrupted bench keeps what it ran) and bench.md into its directory (`--out`, default
runs/<UTC time>-<scenario>-verdicts/), which holds the runs too. Exit code: 0 the goal met, 1 not, 2 bad input,
130 interrupted.

`bench_scenario` benches one scenario and returns its rows: a catalogue run is a loop over it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable

from harness import secrets
from harness.files import atomic, outdir
from harness.bench import wide_console
from harness.bench.agreement import EXPECTED, Mode, goal, mode_agreement
from harness.bench.busy import BusyCores
from harness.bench.verdict_row import COLUMNS, cells, make_row, read_result
from harness.config import MAX_SWEEP_RUNS, load_scenario
from harness.console import Console
from harness.errors import InputError
from harness.jvm import cds
from harness.runner import new_run_dir
from harness.supervisor import Supervisor

DEFAULT_RUNS, DEFAULT_BUSY_CORES = 5, 1
# what a run may take beyond its traffic (start-up, faults, drain, judging) before the bench stops it
BEYOND_TRAFFIC_S = 900.0
STOP_TIMEOUT_S = 60.0  # a run stopped (Ctrl-C, over its time) gets this long to write what it has
COLD_MEANS = ("the JVMs' class archives (*.jsa under <cache>/cds/) deleted before the run, as a new virtualenv "
              "has none; nothing else deleted")


def modes(busy_cores: int, cold: bool) -> list[Mode]:
    """The modes of one round, in the order they run."""
    return ([Mode("cold")] if cold else []) + [Mode("quiet"), Mode("busy", busy_cores)]


def check_input(runs: int, busy_cores: int, cold: bool, expect: str | None) -> None:
    """Bad input, said before anything runs (InputError: exit 2)."""
    if not 1 <= runs <= MAX_SWEEP_RUNS:
        raise InputError(f"--runs {runs}: runs per mode, 1 to {MAX_SWEEP_RUNS}")
    cores = os.cpu_count() or 1
    if not 1 <= busy_cores <= cores:
        raise InputError(f"--busy-cores {busy_cores}: cores to keep busy, 1 to {cores} (this machine's cores)")
    if cold and not cds.enabled():
        raise InputError(f"--cold: the class archives are off ({cds.CDS_ENV}=0), so every run is cold already and "
                         f"--cold compares nothing; unset {cds.CDS_ENV}")
    if expect not in (None, *EXPECTED):
        raise InputError(f"--expect {expect}: one of {', '.join(EXPECTED)}")


def run_argv(scenario: str, overrides: list[str], run_dir: Path) -> list[str]:
    argv = [sys.executable, "-m", "harness", "run", scenario, "--out", str(run_dir), "--quiet"]
    for override in overrides:
        argv += ["--set", override]
    return argv


def run_once(sup: Supervisor, name: str, argv: list[str], log_path: Path, timeout: float,
             console: Console) -> int | None:
    """One `harness run` to its end; its exit code, None when it outran `timeout` and was stopped. Stopped with
    SIGTERM whatever ends the wait (Ctrl-C included): the runner then writes what it has."""
    child = sup.spawn(f"harness-run-{name}", argv, log_path=log_path)
    try:
        return child.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        console.warn(f"{name}: still running {timeout:.0f} s after it started: stopped (see {log_path})")
        return None
    finally:
        sup.stop(child, timeout=STOP_TIMEOUT_S)


def one_run(sup: Supervisor, scenario: str, overrides: list[str], bench_dir: Path, name: str, mode: Mode,
            timeout: float, console: Console) -> dict:
    """One run in `mode` into bench_dir/name; its row (harness.bench.verdict_row) with what the mode did."""
    run_dir, extra = bench_dir / name, {}
    if mode.kind == "cold":
        removed = cds.remove_archives()
        console.info(f"{name}: cold: deleted {len(removed)} class archives under {cds.archives_dir()} (as a new "
                     f"virtualenv has none; nothing else deleted)")
        extra["archives_deleted"] = [p.name for p in removed]
    elif cds.enabled() and not any(cds.archives_dir().glob("*.jsa")):
        console.warn(f"{name}: no class archives at its start: this {mode.label} run starts its JVMs cold (a run "
                     f"that ends normally makes them for the next)")
        extra["archives_at_start"] = 0
    argv = run_argv(scenario, overrides, run_dir)
    with console.step(f"{name}: harness run {scenario} ({mode.label})"):
        if mode.kind == "busy":
            with BusyCores(sup, mode.busy_cores, bench_dir / f"{name}.busy.log") as busy:
                code = run_once(sup, name, argv, bench_dir / f"{name}.log", timeout, console)
            extra["busy"] = busy.report
        else:
            code = run_once(sup, name, argv, bench_dir / f"{name}.log", timeout, console)
    row = make_row(name, mode.label, run_dir, code, read_result(run_dir)) | extra
    console.info(run_line(row))
    return row


def run_line(row: dict) -> str:
    """A run in one line, as it ends: the table's cells with their column names."""
    c = cells(row)
    figures = ", ".join(f"{name} {value}" for name, value in zip(COLUMNS[4:], c[4:]) if value != "-")
    busy = row.get("busy") or {}
    load = (f"; busy: {busy['cores']} spinner(s) used {busy['cpu_s']:.1f} CPU s in {busy['wall_s']:.1f} s"
            if busy.get("cpu_s") is not None else "")
    return f"{c[0]} ({c[1]}): {c[2]}" + (f", decided by {c[3]}" if c[3] else "") + (f"; {figures}" if figures
                                                                                     else "") + load


def bench_scenario(sup: Supervisor, scenario: str, overrides: list[str], bench_dir: Path, *, runs: int,
                   round_modes: list[Mode], timeout: float, console: Console,
                   on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """`runs` rounds of `round_modes`, each run into bench_dir/<round>-<mode>; the rows in the order run.
    `on_row` sees each row as its run ends (bench.json rewritten)."""
    rows = []
    for i in range(1, runs + 1):
        for mode in round_modes:
            rows.append(one_run(sup, scenario, overrides, bench_dir, f"{i:02d}-{mode.kind}", mode, timeout,
                                console))
            if on_row is not None:
                on_row(rows[-1])
    return rows


def summarise(summary: dict, round_modes: list[Mode]) -> dict:
    """bench.json's agreement per mode and goal, from its runs."""
    agreements = [mode_agreement(m, summary["runs"]) for m in round_modes]
    return summary | {"agreement": agreements, "goal": goal(agreements, summary["runs"], summary["expect"])}


def table(rows: list[dict], title: str):
    from rich.table import Table

    t = Table(title=title, show_header=True, header_style="bold")
    for col in COLUMNS:
        t.add_column(col, overflow="fold")
    for r in rows:
        c = cells(r)
        colour = {"pass": "green", "fail": "red"}.get(r["class"], "yellow")
        t.add_row(*c[:2], f"[{colour}]{c[2]}[/{colour}]", *c[3:])
    return t


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _md(cell: str) -> str:
    return cell.replace("|", "\\|") or " "


def markdown(summary: dict) -> str:
    """bench.md: the command, the table, a line per mode, the goal."""
    g = summary["goal"]
    lines = [f"# {summary['scenario']}: do its verdicts hold? (goal {'met' if g['met'] else 'not met'})", "",
             f"`{summary['command']}`", "",
             f"{_count(summary['runs_per_mode'], 'run')} per mode: quiet (the machine as it is), busy "
             f"{summary['busy_cores']} ({_count(summary['busy_cores'], 'core')} kept busy by another process for the "
             "whole run)"
             + (f", cold ({COLD_MEANS})" if summary["cold"] else "") + ". Figures from each run's result.json "
             "(`-`: it has none).", "",
             "| " + " | ".join((*COLUMNS, "run directory")) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
    for r in summary["runs"]:
        lines.append("| " + " | ".join(_md(c) for c in (*cells(r), Path(r["run_dir"]).name)) + " |")
    lines += [""] + [f"- {a['line']}" for a in summary["agreement"]]
    lines += ["", f"Goal ({'--expect ' + g['expect'] if g['expect'] else 'the same verdict in every mode'}): "
                  f"{'met' if g['met'] else 'not met'}: {g['why']}."]
    if summary.get("interrupted"):
        lines += ["", "Interrupted: the runs above are the ones that ended."]
    return "\n".join(lines) + "\n"


def write(bench_dir: Path, summary: dict) -> None:
    atomic.write_json(bench_dir / "bench.json", summary)
    atomic.write_text(bench_dir / "bench.md", markdown(summary))


def command_line(scenario: str, overrides: list[str], runs: int, busy_cores: int, cold: bool,
                 expect: str | None) -> str:
    parts = ["harness bench verdicts", scenario, f"--runs {runs}", f"--busy-cores {busy_cores}"]
    parts += ["--cold"] * cold + ([f"--expect {expect}"] if expect else [])
    parts += [f"--set {secrets.redacted_override(o)}" for o in overrides]
    return " ".join(parts)


def main(scenario_arg: str, overrides: list[str] | None = None, *, runs: int = DEFAULT_RUNS,
         busy_cores: int = DEFAULT_BUSY_CORES, cold: bool = False, expect: str | None = None,
         out: Path | None = None, replace: bool = False, console: Console | None = None) -> int:
    """The command: 0 the goal met, 1 not, 130 interrupted (InputError before anything runs: exit 2)."""
    overrides = list(overrides or [])
    check_input(runs, busy_cores, cold, expect)
    outdir.check(out, replace)
    scenario, _, _ = load_scenario(scenario_arg, overrides)  # ConfigError before anything starts
    if scenario.sweep:
        raise InputError(f"{scenario_arg}: has a [sweep] table; bench one combination at a time, its values "
                         f"given with --set")
    outdir.prepare(out, replace)
    console = console or Console()
    bench_dir = new_run_dir(f"{scenario.name}-verdicts", out)
    round_modes = modes(busy_cores, cold)
    timeout = scenario.producers.warmup_s + scenario.producers.duration_s + BEYOND_TRAFFIC_S
    summary = {"bench": "verdicts", "scenario": scenario.name,
               "command": command_line(scenario_arg, overrides, runs, busy_cores, cold, expect),
               "overrides": [secrets.redacted_override(o) for o in overrides], "runs_per_mode": runs,
               "busy_cores": busy_cores, "cold": cold, "cold_means": COLD_MEANS if cold else None, "expect": expect,
               "modes": [m.label for m in round_modes], "interrupted": False, "runs": []}
    console.info(f"bench verdicts: {scenario.name}, {_count(runs, 'run')} in each of {', '.join(summary['modes'])}, into "
                 f"{bench_dir}" + (f"; cold: {COLD_MEANS}" if cold else ""))

    def keep(row: dict) -> None:
        summary["runs"].append(row)
        write(bench_dir, summarise(summary, round_modes))

    write(bench_dir, summarise(summary, round_modes))  # marks the directory as the harness's (outdir) from the start
    try:
        with Supervisor(uuid.uuid4().hex) as sup:
            bench_scenario(sup, scenario_arg, overrides, bench_dir, runs=runs, round_modes=round_modes,
                           timeout=timeout, console=console, on_row=keep)
    except KeyboardInterrupt:
        summary["interrupted"] = True
    summary = summarise(summary, round_modes)
    write(bench_dir, summary)
    wide_console(console).print(table(summary["runs"], f"{scenario.name}: verdicts, {runs} per mode"))
    for a in summary["agreement"]:
        console.info(a["line"])
    g = summary["goal"]
    (console.info if g["met"] else console.warn)(
        f"goal ({'--expect ' + expect if expect else 'the same verdict in every mode'}): "
        f"{'met' if g['met'] else 'not met'}: {g['why']}")
    console.info(f"bench: {bench_dir}/bench.md, bench.json")
    if summary["interrupted"]:
        return 130
    return 0 if g["met"] else 1
