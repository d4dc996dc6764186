"""The checkers on literal views, as Jepsen tests its checkers on literal histories: a RunView built in memory
(no run directory: its path does not exist, so a checker that read a file would find nothing) and the checks
each checker returns, with the expected outcomes written out by hand. The judge over a literal measurement too:
it is a pure function of what the measuring step (harness.analysis.measure) returns."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.analysis.measure import Measured
from harness.analysis.runview import FaultFacts, RunView
from harness.checkers import events, faults, oracle, run as run_checks
from harness.checkers.state import state_matches
from harness.clocks import ClockPlan
from harness.config import load_scenario
from harness.effects import Effect
from harness.queries import resolve
from harness.reconcile import Reconciliation
from harness.records.result import RunResult
from harness.records.runstate import RunState
from harness.soak.checks import soak
from harness.verdict import judge

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = Path("/nonexistent/run")


def rec(**counts) -> Reconciliation:
    """A reconciliation of 100 events, all acked and delivered once, with `counts` changed."""
    base = dict(produced=100, acked=100, failed=0, delivered_unique=100, duplicates=0, lost=0, expected_lost=0,
                delivered_unacked=0, misplaced=0, order_violations=0, sink_rows=100)
    return Reconciliation(**{**base, **counts})


def no_faults() -> FaultFacts:
    return FaultFacts(records=[], effects=[], expected_failures=[], failed_as_expected=False)


def view(scenario: str = "steady", *, reconciliation: Reconciliation | None = None, state: RunState | None = None,
         fault_facts: FaultFacts | None = None, query: str | None = None, progress=(), **fields) -> RunView:
    s = load_scenario(scenario)[0]
    query_def = resolve(query or s.spark.query)
    v = RunView(scenario=s, run_dir=NOWHERE, state=state or RunState(drained=True, drain_detail="drained"),
                query_def=query_def, per_event=query_def.oracle == "events", faults=fault_facts or no_faults(),
                progress=list(progress), t0=1000.0, measured_from_ms=None, target_events=100.0, fleet=None,
                producers={}, process_rows=100, acked_measured=100, rec=reconciliation or rec(),
                clock_plan=ClockPlan(threshold_ms=100.0), own_sink=None)
    for name, value in fields.items():
        setattr(v, name, value)
    return v


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "write_json", "read_jsonl",
              "append_jsonl", "exists", "is_file", "glob", "rglob", "stat", "unlink", "mkdir"}


def test_no_checker_or_the_verdict_reads_or_writes_a_file():
    """The static half of "a checker is a function of the view": nothing under harness/checkers/ or in the
    verdict names the run directory or calls a file function; only the measuring step does."""
    paths = sorted((ROOT / "harness" / "checkers").glob("*.py")) + [ROOT / "harness" / "verdict.py"]
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name == "run_dir" or (name in FILE_CALLS and isinstance(getattr(node, "ctx", None), ast.Load)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert found == []


def test_the_events_oracle_counts_a_lost_a_duplicated_a_misplaced_and_an_unacked_event():
    checks = by_name(oracle.oracle(view(reconciliation=rec(lost=1, duplicates=2, misplaced=3, delivered_unacked=4,
                                                               lost_by_partition={0: 1}))))
    assert [checks[n].status for n in ("no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries")] == \
        ["fail"] * 4
    assert checks["no_loss"].detail.startswith("1 acked events never delivered (allowed 0")
    assert "by partition {0: 1}" in checks["no_loss"].detail
    assert checks["no_duplicates"].detail == "2 duplicate deliveries (allowed 0)"
    clean = by_name(oracle.oracle(view()))
    assert {c.status for c in clean.values()} == {"pass"}


def test_duplicates_a_fault_declared_are_allowed_and_the_rest_are_not():
    checks = by_name(oracle.oracle(view(reconciliation=rec(duplicates=5, expected_duplicates=5))))
    assert checks["no_duplicates"].status == "pass"
    checks = by_name(oracle.oracle(view(reconciliation=rec(duplicates=6, expected_duplicates=5))))
    assert checks["no_duplicates"].status == "fail" and checks["no_duplicates"].detail.startswith("1 unexpected")


def test_a_query_with_its_own_oracle_is_judged_by_what_it_returned():
    outcome = {"ok": False, "detail": "window 10:00:00 emitted 7, history says 8"}
    (check,) = oracle.oracle(view(query="windowed_count", oracle_outcome=outcome))
    assert (check.name, check.status, check.detail) == ("oracle_window_counts", "fail", outcome["detail"])
    (check,) = oracle.oracle(view(query="windowed_count", oracle_outcome={"ok": True, "detail": "12 windows"}))
    assert check.status == "pass"
    (check,) = oracle.oracle(view(query="windowed_count"))  # never measured: unknown, not a pass
    assert check.status == "unknown"


def test_the_state_check_maps_what_was_measured():
    compared = {"status": "compared", "meta": {"took_s": 2.5, "batch_id": 9},
                "outcome": {"ok": False, "summary": "3 windows in the store", "problems": ["window 20000: 1 != 2"]}}
    (check,) = state_matches(view(query="windowed_count", state_read=compared))
    assert check.status == "fail"
    assert check.detail == "3 windows in the store; window 20000: 1 != 2 (read in 2.5 s)"
    assert check.figures == {"ok": False, "batch_id": 9, "read_s": 2.5}
    (check,) = state_matches(view(query="windowed_count", state_read={"status": "unknown", "detail": "unknown: x"}))
    assert check.status == "unknown"
    assert state_matches(view()) == []  # the events oracle implies no state


def test_a_run_that_went_wrong_does_not_complete_unless_a_fault_declared_it():
    (check,) = run_checks.completed(view(state=RunState(error="RuntimeError: the query stopped")))
    assert check.status == "fail" and check.detail == "RuntimeError: the query stopped"
    declared = FaultFacts(records=[], effects=[], expected_failures=["KAFKA_DATA_LOSS"], failed_as_expected=True)
    assert run_checks.completed(view(state=RunState(error="boom"), fault_facts=declared)) == []


def test_a_declared_fault_that_never_came_fails_faults_applied():
    (check,) = faults.faults_applied(view("crash-recovery"))
    assert check.status == "fail" and "none was recorded" in check.detail


def test_the_declared_failure_must_happen():
    declared = FaultFacts(records=[], effects=[Effect(failure="KAFKA_DATA_LOSS")],
                          expected_failures=["KAFKA_DATA_LOSS"], failed_as_expected=False)
    running = RunState(query={"state": "stopped"})
    (check,) = faults.expected_failure(view(state=running, fault_facts=declared))
    assert check.status == "fail" and check.detail.endswith("it did not fail (final state 'stopped')")
    failed = RunState(query={"state": "failed", "error": "[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] gone"})
    (check,) = faults.expected_failure(view(state=failed, fault_facts=declared))
    assert check.status == "pass" and "failed with 'KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE'" in check.detail


def test_a_query_taken_down_must_come_back_within_its_start_timeout():
    kill = {"kind": "driver_kill", "n": 0, "fault": 0, "injected_at": 1010.0, "healed_at": 1011.0, "errors": [],
            "effect": {"query_down": True}}
    facts = FaultFacts(records=[kill], effects=[Effect(query_down=True)], expected_failures=[],
                       failed_as_expected=False)
    back = [{"timestamp": "1970-01-01T00:17:10.000Z"}]  # 1030 s: 20 s after the kill
    (check,) = faults.query_recovered(view("crash-recovery", fault_facts=facts, progress=back))
    assert check.value == pytest.approx(20.0) and check.status == "pass"  # spark.start_timeout_s: 180 s
    late = [{"timestamp": "1970-01-01T00:20:10.000Z"}]  # 1210 s: 200 s after the kill
    (check,) = faults.query_recovered(view("crash-recovery", fault_facts=facts, progress=late))
    assert check.status == "fail" and check.detail.endswith("too late: driver_kill #0 after 200.0 s")
    (check,) = faults.query_recovered(view("crash-recovery", fault_facts=facts))
    assert check.status == "fail" and "never" in check.detail


def test_sends_that_failed_outside_a_fault_or_were_skipped_fail():
    checks = by_name(events.sends(view(reconciliation=rec(failed=2), producers={"pacer_skipped": 1})))
    assert checks["acked"].status == "fail" and checks["acked"].detail == "100 of 100 events acked, 2 failed"
    assert checks["no_skipped_sends"].status == "fail"
    assert checks["produce_rate"].status == "pass"


def test_a_soak_holds_every_live_evaluation_against_the_run():
    rows = [{"t": 1.0, "checks": [{"name": "no_loss", "ok": True, "detail": "0"}]},
            {"t": 31.0, "checks": [{"name": "no_loss", "ok": False, "detail": "4 acked events overdue"}]}]
    checks = by_name(soak(view("soak", live_checks=rows, state=RunState(traffic_start=1.0))))
    assert checks["live_checks"].status == "pass" and checks["live_no_loss"].status == "fail"
    assert checks["live_no_loss"].detail == "failed in 1 of 2 evaluations; first at +30 s: 4 acked events overdue"
    assert soak(view()) == []  # not a soak: nothing


def measured(v: RunView, **kw) -> Measured:
    result = RunResult(scenario=v.scenario.name, backend=v.scenario.backend.kind, verdict="unjudged",
                       run_dir=str(NOWHERE))
    return Measured(v.scenario, NOWHERE, v.state, result, view=v, **kw)


def test_the_judge_fails_a_lost_event_and_says_why_a_run_it_could_not_read_is_unjudged():
    lost = judge(measured(view(reconciliation=rec(lost=1))))
    assert lost.verdict == "fail" and {c["name"]: c["status"] for c in lost.as_dict()["checks"]}["no_loss"] == "fail"
    unread = judge(measured(view(), problem="reading the sink failed: ValueError: bad row"))
    assert unread.verdict == "unjudged" and unread.unjudged_reason == "reading the sink failed: ValueError: bad row"
    stopped = judge(measured(view(state=RunState(interrupted=True, error="interrupted by SIGINT"))))
    assert stopped.verdict == "unjudged" and stopped.checks == [] and stopped.unjudged_reason == "interrupted by SIGINT"
