"""`harness soak`: a soak scenario (or a stored night, `--replay`) run through the one runner, with the CI
outputs a nightly job needs (junit.xml, summary.md, also appended to $GITHUB_STEP_SUMMARY) and, with
`--baseline`, harness compare's thresholds as a check."""
from __future__ import annotations

import os
from pathlib import Path

from harness.files import outdir
from harness.config import ConfigError, load_scenario
from harness.console import Console
from harness.runner import RunOutcome, run_scenario
from harness.text.durations import cli_duration_s
from harness.soak.checks import baseline_spec
from harness.soak.plan import replayed, resolve


def soak(name: str, *, duration: str | None = None, seed: int | None = None, fail_fast: bool = False,
         replay: Path | None = None, baseline: Path | None = None, fail_on: str | None = None,
         overrides: list[str] | None = None, out: Path | None = None, console: Console | None = None,
         replace: bool = False) -> RunOutcome:
    console = console or Console()
    outdir.check(out, replace)
    if replay is not None:
        if duration or seed is not None or overrides:
            raise ConfigError("--replay runs the stored night exactly: --duration, --seed and --set do not apply")
        scenario, path = replayed(replay)
        console.info(f"replaying {replay} (seed {scenario.seed}, {len(scenario.faults)} fault injections)")
    else:
        sets = list(overrides or [])
        if duration:
            try:
                sets.append(f"producers.duration_s={cli_duration_s(duration)}")
            except ValueError as exc:
                raise ConfigError(f"--duration: {exc}") from None
        if seed is not None:
            sets.append(f"seed={seed}")
        loaded, path, _ = load_scenario(name, sets)
        if loaded.sweep:
            raise ConfigError(f"{path}: a soak is one run; this scenario has a [sweep]")
        scenario = resolve(loaded)
        overrides = sets
    if fail_fast:
        scenario.soak.fail_fast = True  # type: ignore[union-attr]
    outdir.prepare(out, replace)  # an earlier output replaced only once the scenario is known good
    outcome = run_scenario(scenario, path, overrides, out, console,
                           baseline=baseline_spec(baseline, fail_on, scenario.soak))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write((outcome.run_dir / "summary.md").read_text(encoding="utf-8"))
    return outcome
