"""The run's verdict: the composition of the checkers (harness.checkers) over the run as measured
(harness.analysis.measure: the producers' history reconciled with the sink, the faults' declared effects, the
query's own record and what the runner found, and the run's figures in the one typed result). A pure function of
that measurement: nothing here reads or writes a file.

The verdict follows from the checks (harness.check.verdict_of): `fail` when a required check failed, else
`unjudged` when one could not be judged (unknown) or was set aside because the machine was busy with other work
(harness.checkers.busy, one pass after the checkers), with `unjudged_reason` naming them and why, else `pass`.

A run the measuring step could not read (a malformed sink row, an unreadable file) is `unjudged`, with the reason
and every figure computed before the problem. A run stopped from outside (Ctrl-C, SIGTERM, SIGHUP) is `unjudged`
too, with its figures and no checks: what it measured is partial, so no check can pass or fail on it.
"""
from __future__ import annotations

import traceback

from harness.analysis.measure import Measured
from harness.check import Check, verdict_of
from harness.checkers import (Checker, batch_cap, changes, checkpoint, events, faults, oracle, outages, pauses,
                              run as run_checks, source, sustained)
from harness.checkers.busy import set_aside_when_busy, unjudged_reason
from harness.checkers.catalogue import check_names
from harness.checkers.state import state_matches
from harness.records.result import RunResult
from harness.soak.checks import soak

# the verdict, in the order result.json lists its checks
CHECKERS: tuple[Checker, ...] = (
    run_checks.completed, events.drained, oracle.oracle, state_matches, events.sends, events.latency,
    sustained.sustained, sustained.headroom, events.producers_reported,
    faults.faults_applied, faults.kill_phase, faults.expected_failure, faults.query_recovered, pauses.query_resumed,
    pauses.spark_logged, pauses.second_driver, changes.change_restarted, changes.change_in_force,
    changes.change_state, outages.outage_backlog, outages.outage_crash_loop, outages.outage_drained,
    outages.outage_expired, batch_cap.batch_cap, checkpoint.checkpoint_cost, checkpoint.checkpoint_storage,
    source.source,
    soak)


def judge(measured: Measured) -> RunResult:
    """The measured run's result with its checks and verdict."""
    result, state, view = measured.result, measured.state, measured.view
    result.expected_checks = check_names(measured.scenario)  # junit.xml lists them all, judged or not
    if measured.problem is not None or view is None:
        result.verdict = "unjudged"
        result.unjudged_reason = measured.problem or "the run was not measured"
        if state.interrupted:
            result.unjudged_reason = f"{state.error or 'interrupted'}; {result.unjudged_reason}"
        elif state.error:  # what went wrong with the run itself is still said
            result.checks = [Check("completed", False, state.error).as_dict()]  # type: ignore[list-item]
        return result
    if state.interrupted:  # stopped from outside (Ctrl-C, SIGTERM, SIGHUP): what was measured, no verdict
        result.unjudged_reason = state.error or "interrupted"
        return result
    try:
        judged = [c for checker in CHECKERS for c in checker(view)]
    except Exception as exc:  # noqa: BLE001 - a checker's defect: the run still gets its result, unjudged
        result.verdict, result.unjudged_reason = "unjudged", f"{type(exc).__name__}: {exc}"
        measured.trace = traceback.format_exc()  # judge-error.txt (harness.analysis.measure.write_measured)
        return result
    # one pass after the checkers: a busy machine sets failing performance checks aside (harness.checkers.busy)
    checks = set_aside_when_busy(judged, result.machine)
    result.oracle = view.oracle_outcome
    result.checks = [c.as_dict() for c in checks]  # type: ignore[misc]
    result.verdict = verdict_of(checks)
    if result.verdict == "unjudged":  # which checks decided nothing, and why
        result.unjudged_reason = unjudged_reason(c.as_dict() for c in checks)
    return result


def add_check(result: RunResult, check: Check) -> None:
    """One more check after the judge (`baseline`, harness.runner.record), judged by the same rule: set aside when
    the machine was busy, and the verdict decided again from all the checks, unless it did not follow from them
    (a run stopped from outside, or one the judge could not read: there is no verdict to revise)."""
    followed = verdict_of(result.as_dict()["checks"]) == result.verdict
    (check,) = set_aside_when_busy([check], result.machine)
    result.checks = [*result.checks, check.as_dict()]  # type: ignore[list-item]
    if followed:
        checks = result.as_dict()["checks"]
        result.verdict = verdict_of(checks)
        result.unjudged_reason = unjudged_reason(checks) if result.verdict == "unjudged" else None
