"""`harness run SCENARIO`: one run through the pipeline, or, for a scenario with a `[sweep]` table, one run per
combination side by side (harness.commands.sweep); `--repeat N` runs it (each combination) N times
(harness.commands.repeat)."""
from __future__ import annotations

from pathlib import Path

from harness.files import outdir
from harness.commands.repeat import run_repeats
from harness.commands.sweep import run_sweep
from harness.config import load_scenario
from harness.console import Console
from harness.runner import RunOutcome, new_run_dir, run_loaded


def run(name_or_path: str, overrides: list[str] | None = None, out: Path | None = None,
        console: Console | None = None, repeat: int | None = None, replace: bool = False) -> RunOutcome:
    """`replace`: an earlier run's `out` is emptied first (harness.files.outdir), once the scenario is known good."""
    outdir.check(out, replace)
    scenario, path, _ = load_scenario(name_or_path, overrides)  # ConfigError before anything starts
    outdir.prepare(out, replace)
    console = console or Console()
    if scenario.sweep:
        return run_sweep(scenario, name_or_path, list(overrides or []), out, console, repeat)
    if repeat and repeat > 1:
        return run_repeats(scenario, path, list(overrides or []), repeat, new_run_dir(scenario.name, out), console)
    return run_loaded(scenario, path, overrides, out, console)
