"""A soak's own checks, added to the verdict: every live evaluation held against the run, the leaks and the disk.

Live checks (live_checks.jsonl) fail the soak if any evaluation failed, even when the end looks fine (a loss
that healed, an hour of p99 over the limit). A soak whose live checker never ran, or broke, says so: its
`live_checks` check fails, it does not pass by silence.
"""
from __future__ import annotations

from pathlib import Path

from harness.check import Check, status_of
from harness.analysis.runview import RunView
from harness.config import ConfigError, SoakSpec
from harness.reports.compare import compare, parse_thresholds


def live_checks(rows: list[dict], started_at: float | None) -> list[Check]:
    """The soak's live evaluations (live_checks.jsonl's rows) held against the run."""
    errors = [r["error"] for r in rows if "error" in r]
    evaluations = [r for r in rows if "checks" in r]
    out = [Check("live_checks", bool(evaluations) and not errors,
                 f"{len(evaluations)} evaluations while the soak ran" + (
                     f"; the live checker failed {len(errors)} times, first: {errors[0]}" if errors else "")
                 if evaluations or errors else "the live checks never ran (the run ended before the first one)")]
    names = list(dict.fromkeys(c["name"] for r in evaluations for c in r["checks"]))
    t0 = started_at or (evaluations[0]["t"] if evaluations else 0.0)
    for name in names:
        seen = [(r["t"], c) for r in evaluations for c in r["checks"] if c["name"] == name]
        judged = [(t, c) for t, c in seen if status_of(c) != "unknown"]
        failed = [(t, c) for t, c in seen if status_of(c) == "fail"]
        if failed:
            t, c = failed[0]
            detail = (f"failed in {len(failed)} of {len(seen)} evaluations; first at +{t - t0:,.0f} s: "
                      f"{c['detail']}")
        elif judged:
            detail = f"held in all {len(judged)} judged evaluations (of {len(seen)}); last: {judged[-1][1]['detail']}"
        else:
            detail = f"never judged in {len(seen)} evaluations: {seen[-1][1]['detail']}"
        out.append(Check(f"live_{name}", not failed, detail))
    return out


def baseline_spec(baseline: Path | None, fail_on: str | None, soak: SoakSpec | None) -> tuple[Path, str] | None:
    """`--baseline RUN_DIR` with its thresholds (`--fail-on`, else the scenario's soak.baseline_fail_on, else the
    soak's default), checked before anything runs or is rewritten: a directory without result.json, or a threshold
    harness compare cannot read, is bad input (exit 2)."""
    if baseline is None:
        return None
    if not (Path(baseline) / "result.json").is_file():
        raise ConfigError(f"--baseline {baseline}: no result.json there; give a run directory")
    thresholds = fail_on if fail_on is not None else (soak or SoakSpec()).baseline_fail_on
    parse_thresholds(thresholds)
    return Path(baseline), thresholds


def baseline_check(run_dir: Path, baseline: Path, fail_on: str) -> tuple[Check, dict]:
    """harness compare's regression thresholds against a stored run (needs this run's result.json); the check
    and the comparison."""
    summary = compare([run_dir], baseline, fail_on)
    failures = summary["failures"]
    return Check("baseline", not failures,
                 f"against {baseline} ({fail_on}): " + ("; ".join(failures) if failures else "no figure moved past "
                                                         "its threshold")), summary


def resource_checks(soak: SoakSpec, resources: dict, traffic_s: float) -> list[Check]:
    """Leaks (RSS growth per hour after warm-up, reports.resources) and the run directory against its budget."""
    if not resources or "error" in resources:
        why = (resources or {}).get("error", "no resource samples (resources.jsonl)")
        return [Check("no_leak", None, f"not judged: {why}"), Check("disk_budget", None, f"not judged: {why}")]
    leaks = resources.get("leaks") or {}
    long_enough = traffic_s >= soak.leak_after_s + leaks.get("min_span_s", 0.0)
    judged_ok = leaks.get("judged", 0) > 0 or not long_enough
    detail = leaks.get("detail", "")
    if not leaks.get("judged") and not long_enough:
        detail += f" (a soak of {traffic_s:g} s is too short to judge leaks)"
    disk = resources.get("disk") or {}
    budget = soak.disk_budget_mb * 1e6
    peak = disk.get("peak_bytes")
    return [Check("no_leak", bool(leaks.get("ok")) and judged_ok, detail or "no leak verdicts"),
            Check("disk_budget", None if peak is None else peak <= budget,
                  f"the run directory peaked at {peak / 1e6:,.0f} MB (budget {soak.disk_budget_mb:,.0f} MB)"
                  if peak is not None else "not judged: the run's disk was never measured")]


def soak(run: RunView) -> list[Check]:
    """The checker: for a soak, it ran to the end, every live evaluation held, no leak, the disk in budget."""
    if run.scenario.soak is None:
        return []
    early = [Check("ran_to_the_end", False, run.state.stopped_early)] if run.state.stopped_early else []
    return (early + live_checks(run.live_checks, run.state.traffic_start)
            + resource_checks(run.scenario.soak, run.resources, run.scenario.producers.duration_s))
