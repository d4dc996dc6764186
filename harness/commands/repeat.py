"""`harness run --repeat N` (and each combination of a sweep with `[sweep] repeat = N`): the same scenario run N
times, one after another, each an ordinary independent run (harness.runner.run_one: its own broker, topic,
checkpoint and query) in `<dir>/r1 .. rN`.

`repeat.json` (rewritten atomically after every run) names the runs and, per figure, the mean, the standard
deviation and the coefficient of variation across them: the run-to-run noise of this machine and this setting.
`harness compare` takes a repeat directory as one configuration, its figure the mean of its repeats', its noise
the spread across them (reports.compare). The set passes when every run passes, fails when one failed, and is
unjudged (exit 3) when none failed but one could not be judged (harness.check.verdict_of's rule over the runs);
`agreement` counts the runs per verdict, unjudged apart from pass and fail.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness import runner, secrets
from harness.files import atomic
from harness.check import counts_against, exit_code, status_of
from harness.config import Scenario
from harness.console import Console
from harness.reports.compare import FIGURES, figure


def noise(results: list[dict]) -> dict[str, dict[str, Any]]:
    """Per figure over the runs' result.json: n, mean, sd (ddof 1) and sd / mean."""
    out = {}
    for name in FIGURES:
        values = [v for r in results if (v := figure(r, name)) is not None]
        if not values:
            continue
        mean = float(np.mean(values))
        sd = float(np.std(values, ddof=1)) if len(values) > 1 else None
        out[name] = {"n": len(values), "mean": mean, "sd": sd,
                     "cv": (sd / abs(mean)) if sd is not None and mean else None, "values": values}
    return out


def run_repeats(scenario: Scenario, path: Path, overrides: list[str], repeats: int, out_dir: Path,
                console: Console, label: str = "", backend=None) -> runner.RunOutcome:
    """`repeats` runs of a scenario loaded once (from `path` with `overrides`) into `out_dir` (created), with
    repeat.json and repeat.md beside them. `backend`: gives each run the broker a sweep shares
    (harness.commands.shared_broker), None: each run starts its own."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"scenario": path.stem,
                               "overrides": [secrets.redacted_override(o) for o in overrides], "repeats": repeats,
                               "runs": [], "verdict": "unjudged"}
    results, interrupted = [], False
    for i in range(1, repeats + 1):
        console.info(f"{label}repeat {i}/{repeats}")
        outcome = runner.run_loaded(scenario, path, overrides, out_dir / f"r{i}", console,
                                    backend() if backend is not None else None)
        results.append(outcome.result)
        summary["runs"].append({"run_dir": f"r{i}", "exit_code": outcome.exit_code,
                                "verdict": outcome.result.get("verdict"),
                                "failed_checks": [c["name"] for c in outcome.result.get("checks") or []
                                                  if status_of(c) == "fail"],
                                "unjudged_checks": [c["name"] for c in outcome.result.get("checks") or []
                                                    if counts_against(c) and status_of(c) != "fail"]})
        summary["agreement"] = agreement(summary["runs"])
        summary["noise"] = noise(results)
        atomic.write_json(out_dir / "repeat.json", summary)
        if outcome.exit_code == 130:
            interrupted = True
            break
    if not interrupted:
        summary["verdict"] = verdict_of_runs(summary["runs"])
    atomic.write_json(out_dir / "repeat.json", summary)
    atomic.write_text(out_dir / "repeat.md", repeat_markdown(summary))
    code = 130 if interrupted else exit_code(summary["verdict"])
    return runner.RunOutcome(out_dir, summary, code)


def agreement(runs: list[dict]) -> dict[str, int]:
    """How many runs ended pass, fail and unjudged (a run with no result counts as unjudged)."""
    verdicts = [r.get("verdict") if r.get("verdict") in ("pass", "fail") else "unjudged" for r in runs]
    return {v: verdicts.count(v) for v in ("pass", "fail", "unjudged")}


def verdict_of_runs(runs: list[dict]) -> str:
    """The set's verdict: fail when a run failed, else unjudged when one was, else pass."""
    counts = agreement(runs)
    return "fail" if counts["fail"] else "unjudged" if counts["unjudged"] or not runs else "pass"


def repeat_markdown(summary: dict) -> str:
    lines = [f"# {summary['scenario']} x {summary['repeats']} ({summary['verdict']})", "",
             "The same scenario run again and again: the spread across the runs is this machine's run-to-run noise "
             "for this setting (harness compare uses it as the noise when it compares this directory).", "",
             "| figure | mean | sd | sd / mean | runs |", "|---|---|---|---|---|"]
    for name, n in (summary.get("noise") or {}).items():
        lines.append(f"| {name} ({FIGURES[name][0]}) | {n['mean']:,.1f} | "
                     f"{'-' if n['sd'] is None else format(n['sd'], ',.1f')} | "
                     f"{'-' if n['cv'] is None else format(100 * n['cv'], '.1f') + '%'} | "
                     + ", ".join(f"{v:,.0f}" for v in n["values"]) + " |")
    counts = summary.get("agreement") or agreement(summary["runs"])
    lines += ["", "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items())]
    lines += [""] + [f"- {r['run_dir']}: {r['verdict']}"
                     + (f" (failed {', '.join(r['failed_checks'])})" if r["failed_checks"] else "")
                     + (f" (unjudged {', '.join(r['unjudged_checks'])})" if r.get("unjudged_checks") else "")
                     for r in summary["runs"]]
    return "\n".join(lines) + "\n"
