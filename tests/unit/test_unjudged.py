"""`unjudged`: a verdict of its own (exit 3) when no check failed but one decided nothing, and a busy machine
setting failing performance checks aside, never correctness ones (harness.check.verdict_of,
harness.checkers.busy); through `harness check` on a recorded run, JUnit, the pytest plugin, repeats, sweeps,
comparisons and capacity trials."""
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.check import EXIT_CODES, Check, exit_code, verdict_of
from harness.checkers.busy import busy_cause, set_aside_when_busy, unjudged_reason
from harness.checkers.catalogue import PERFORMANCE_CHECKS
from harness.cli import main
from harness.commands import capacity as cap
from harness.commands.capacity import TrialOutcome, criterion, search
from harness.commands.repeat import agreement, verdict_of_runs
from harness.commands.sweep import sweep_verdict
from harness.pytest_plugin import RunUnjudged, assert_passed
from harness.records.result import RunResult
from harness.verdict import add_check
from harness.reports.compare import _worst

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
# other processes took 1.02 of 2 cores, with steal 51.2% of the machine, over 55 s: over the 10% bound
BUSY = {"busy": True, "other_cores": 1.02, "busy_share": 0.512, "cores": 2, "window_s": 55.0,
        "max_busy_share": 0.10}
QUIET = {**BUSY, "busy": False, "other_cores": 0.02, "busy_share": 0.01}
CORRECTNESS = ("completed", "drained", "no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries",
               "order", "acked", "sends_resolved", "state_matches", "oracle_windows", "expected_failure",
               "faults_applied", "producers_reported", "batch_cap", "source_reported_gaps")


# -- the rule ---------------------------------------------------------------------------------------------------
def test_fail_beats_unjudged_beats_pass():
    ok, bad, unknown = Check("a", True, ""), Check("b", False, ""), Check("c", None, "")
    aside = Check("d", None, "", unjudged="the machine was busy")
    assert verdict_of([ok, bad, unknown, aside]) == "fail"
    assert verdict_of([ok, unknown]) == "unjudged" and verdict_of([ok, aside]) == "unjudged"
    assert verdict_of([ok, Check("e", False, "", required=False), Check("f", None, "", required=False)]) == "pass"
    assert verdict_of([ok.as_dict(), aside.as_dict()]) == "unjudged"  # as recorded in result.json
    assert verdict_of([{"name": "old", "ok": None, "detail": ""}]) == "unjudged"  # recorded before `status`
    assert aside.status == "unjudged" and aside.as_dict()["unjudged"] == "the machine was busy"
    assert {v: exit_code(v) for v in ("pass", "fail", "unjudged")} == {"pass": 0, "fail": 1, "unjudged": 3}
    assert exit_code(None) == 1 and EXIT_CODES["unjudged"] == 3


def test_a_busy_machine_sets_failing_and_unknown_performance_checks_aside_and_keeps_passes():
    checks = [Check("sustained", False, "lag grew 300/s", figures={"judged_s": 40.0}),
              Check("latency_p99", None, "not judged: clocks"), Check("produce_rate", True, "1.0000"),
              Check("headroom", False, "no headroom", required=False)]
    got = {c.name: c for c in set_aside_when_busy(checks, BUSY)}
    s = got["sustained"]
    assert s.status == "unjudged" and s.ok is None and s.figures == {"judged_s": 40.0, "judged_as": "fail"}
    assert s.detail == ("unjudged: the machine was busy (other processes 1.02 cores and steal: 51.2% of its 2 "
                        "cores over 55 s of traffic, over the 10% bound, checks.max_busy_share); as measured it "
                        "fails: lag grew 300/s")
    assert got["latency_p99"].status == "unjudged" and got["latency_p99"].figures["judged_as"] == "unknown"
    assert "and it could not be judged: not judged: clocks" in got["latency_p99"].detail
    assert got["produce_rate"].status == "pass"  # it kept up even so
    assert got["headroom"].status == "not required"  # asked for by nobody: never deciding anything
    assert verdict_of(got.values()) == "unjudged"


def sustained_failing(processed: float, need: float) -> Check:
    return Check("sustained", False, f"processed_rate: processed {processed:,.0f} events/s",
                 figures={"criteria": [{"name": "lag_growth", "value": 3000.0, "limit": 300.0},
                                       {"name": "processed_rate", "value": processed, "limit": need}]})


# the system under test used 46.5 CPU s, other processes 55.0 and steal 2.2 over the window: given all of theirs
# it had (46.5 + 57.2) / 46.5 = 2.23 times the CPU
STARVED = {**BUSY, "sut_cpu_s": 46.5, "other_cpu_s": 55.0, "steal_cpu_s": 2.2}


def test_a_query_that_would_not_keep_up_even_with_its_neighbours_cpu_fails_on_a_busy_machine():
    # held to 1,360 events/s by its own rate limit against 5,700 needed (95% of 6,000): x 103.7 / 46.5 is 3,033
    [s] = set_aside_when_busy([sustained_failing(1360.0, 5700.0)], STARVED)
    assert s.status == "fail"
    assert s.detail.endswith("; the machine was busy, but even with all the CPU other processes took it would "
                             "have processed at most 3,033 events/s (need 5,700): the failure is the query's")
    assert s.figures["best_processed_eps"] == pytest.approx(1360.0 * 103.7 / 46.5)


def test_a_query_that_might_have_kept_up_with_its_neighbours_cpu_is_unjudged():
    # 2,700 events/s of the 2,850 needed: x 2.23 is 6,022 >= 2,850: the machine may be to blame
    [s] = set_aside_when_busy([sustained_failing(2700.0, 2850.0)], STARVED)
    assert s.status == "unjudged" and s.figures["judged_as"] == "fail"
    # without the run's own CPU figure nothing can be bounded: set aside as before
    [s] = set_aside_when_busy([sustained_failing(1360.0, 5700.0)], BUSY)
    assert s.status == "unjudged"


@pytest.mark.parametrize("name", CORRECTNESS)
def test_a_busy_machine_never_excuses_a_correctness_check(name):
    assert name not in PERFORMANCE_CHECKS
    got = set_aside_when_busy([Check(name, False, "wrong"), Check("sustained", False, "behind")], BUSY)
    assert [c.status for c in got] == ["fail", "unjudged"] and verdict_of(got) == "fail"


@pytest.mark.parametrize("machine", [QUIET, {"busy": None, "detail": "unknown"}, {}, None])
def test_a_quiet_or_unmeasured_machine_sets_nothing_aside(machine):
    checks = [Check("sustained", False, "behind"), Check("latency_p99", None, "unknown")]
    assert set_aside_when_busy(checks, machine) == checks and busy_cause(machine) is None


def test_the_reason_names_the_checks_and_the_cause():
    checks = set_aside_when_busy([Check("sustained", False, "behind"), Check("latency_p99", False, "p99 high"),
                                  Check("order", None, "unreadable offsets"), Check("no_loss", True, "0")], BUSY)
    reason = unjudged_reason([c.as_dict() for c in checks])
    assert reason == (f"{busy_cause(BUSY)}: sustained, latency_p99 unjudged; could not be judged: order "
                      "(unreadable offsets)")
    assert unjudged_reason([Check("no_loss", True, "0").as_dict()]) is None


def test_a_baseline_added_after_the_judge_is_judged_by_the_same_rule():
    passed = dict(scenario="s", backend="kafka", verdict="pass", checks=[Check("no_loss", True, "0").as_dict()])
    slower = Check("baseline", False, "p99 moved +80%")
    busy = RunResult(**passed, machine=BUSY)
    add_check(busy, slower)
    assert busy.verdict == "unjudged" and busy.checks[-1].model_dump()["judged_as"] == "fail"
    assert busy.unjudged_reason == f"{busy_cause(BUSY)}: baseline unjudged"
    quiet = RunResult(**passed, machine=QUIET)
    add_check(quiet, slower)
    assert quiet.verdict == "fail" and quiet.unjudged_reason is None
    stopped = RunResult(scenario="s", backend="kafka", verdict="unjudged", unjudged_reason="interrupted")
    add_check(stopped, slower)  # no verdict followed from its checks: none to revise
    assert stopped.verdict == "unjudged" and stopped.unjudged_reason == "interrupted"


# -- harness check on a recorded run ------------------------------------------------------------------------------
def recorded_steady(tmp_path: Path, busy: bool, latency_p99_ms: float = 1.0) -> Path:
    """The steady recording with a latency limit its p99 misses, `sustained` asked for (its 6 s cannot be judged:
    unknown) and, when `busy`, /proc/stat counters in its samples that say 8 cores were busy throughout (the run's
    own processes used at most 2 of them)."""
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    scenario = json.loads((run_dir / "scenario.json").read_text())
    checks = scenario["resolved"]["checks"]
    del checks["sustained_not_required"]
    checks["latency_p99_ms"] = latency_p99_ms
    (run_dir / "scenario.json").write_text(json.dumps(scenario))
    if busy:
        rows = [json.loads(line) for line in (run_dir / "resources.jsonl").read_text().splitlines()]
        t0 = rows[0]["t"]
        for row in rows:
            row["stat"] = {"user": 8 * (row["t"] - t0), "nice": 0.0, "system": 0.0, "idle": 0.0, "iowait": 0.0,
                           "irq": 0.0, "softirq": 0.0, "steal": 0.0, "cores": 8}
        (run_dir / "resources.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def test_harness_check_exits_3_when_the_machine_was_busy(tmp_path, capsys):
    run_dir = recorded_steady(tmp_path, busy=True)
    assert main(["check", str(run_dir)]) == 3
    result = json.loads((run_dir / "result.json").read_text())
    checks = {c["name"]: c for c in result["checks"]}
    assert result["verdict"] == "unjudged" and result["machine"]["busy"] is True
    assert result["machine"]["cores"] == 8 and result["machine"]["other_share"] > 0.7
    assert checks["latency_p99"]["status"] == "unjudged" and checks["latency_p99"]["judged_as"] == "fail"
    assert checks["latency_p99"]["detail"].startswith("unjudged: the machine was busy (other processes ")
    assert checks["sustained"]["status"] == "unjudged" and checks["sustained"]["judged_as"] == "unknown"
    assert checks["no_loss"]["status"] == "pass"
    assert result["unjudged_reason"].startswith("the machine was busy (") and \
        result["unjudged_reason"].endswith(": latency_p99, sustained unjudged")
    out = capsys.readouterr().out
    assert "verdict UNJUDGED (the machine was busy" in out and "unjudged latency_p99: unjudged: the machine" in out
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("0", "2")
    errors = {c.get("name"): c.find("error") for c in suite.findall("testcase") if c.find("error") is not None}
    assert set(errors) == {"latency_p99", "sustained"} and {e.get("type") for e in errors.values()} == {"unjudged"}
    assert errors["latency_p99"].get("message").startswith("unjudged: the machine was busy")
    assert "The machine was busy." in (run_dir / "report.md").read_text()
    assert "**Unjudged:** the machine was busy" in (run_dir / "summary.md").read_text()


def test_on_a_quiet_machine_the_same_run_fails(tmp_path):
    run_dir = recorded_steady(tmp_path, busy=False)  # no counters: the machine unknown, nothing set aside
    assert main(["check", str(run_dir)]) == 1
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "fail" and result["machine"]["busy"] is None
    assert {c["name"]: c["status"] for c in result["checks"]}["latency_p99"] == "fail"


def test_a_busy_machine_does_not_excuse_a_lost_event(tmp_path):
    run_dir = recorded_steady(tmp_path, busy=True)
    next((run_dir / "sink").glob("part-*.parquet")).unlink()  # its rows never delivered: lost
    assert main(["check", str(run_dir)]) == 1
    statuses = {c["name"]: c["status"] for c in json.loads((run_dir / "result.json").read_text())["checks"]}
    assert statuses["no_loss"] == "fail" and statuses["latency_p99"] == "unjudged"


def test_the_bound_is_a_validated_scenario_field(capsys):
    assert main(["validate", "steady", "--set", "checks.max_busy_share=0.25"]) == 0
    capsys.readouterr()
    assert main(["validate", "steady", "--set", "checks.max_busy_share=1.5"]) == 2
    err = capsys.readouterr().err
    assert "checks.max_busy_share" in err and "1" in err


# -- the pytest plugin --------------------------------------------------------------------------------------------
def test_the_plugin_fails_an_unjudged_run_with_a_type_of_its_own():
    result = RunResult(scenario="steady", backend="kafka", verdict="unjudged", run_dir="/tmp/r",
                       unjudged_reason=f"{busy_cause(BUSY)}: sustained unjudged",
                       checks=[set_aside_when_busy([Check("sustained", False, "behind")], BUSY)[0].as_dict()])
    with pytest.raises(RunUnjudged) as caught:
        assert_passed(result)
    assert isinstance(caught.value, pytest.fail.Exception)  # a test failure, not an error or a skip
    message = str(caught.value)
    assert message.startswith("unjudged: the machine was busy (other processes 1.02 cores")
    assert "unjudged checks (1 of 1):\n  - sustained: unjudged: the machine was busy" in message
    failed = RunResult(scenario="steady", backend="kafka", verdict="fail", checks=[Check("no_loss", False, "3 lost")
                                                                                   .as_dict()])
    with pytest.raises(pytest.fail.Exception) as caught:
        assert_passed(failed)
    assert not isinstance(caught.value, RunUnjudged) and "failed checks (1 of 1)" in str(caught.value)


# -- several runs ----------------------------------------------------------------------------------------------
def test_a_repeat_counts_unjudged_apart_and_fails_only_on_a_failure():
    runs = [{"verdict": "pass"}, {"verdict": "unjudged"}, {"verdict": "pass"}]
    assert agreement(runs) == {"pass": 2, "fail": 0, "unjudged": 1} and verdict_of_runs(runs) == "unjudged"
    assert verdict_of_runs(runs + [{"verdict": "fail"}]) == "fail"
    assert verdict_of_runs([{"verdict": "pass"}] * 2) == "pass"
    assert _worst(["pass", "unjudged"]) == "unjudged" and _worst(["unjudged", "fail"]) == "fail"
    assert _worst(["pass", "pass"]) == "pass"


def test_a_sweep_with_an_unjudged_combination_is_unjudged_unless_one_failed_beyond_the_goal():
    met = {"verdict": "pass", "failed_checks": [], "unjudged_checks": []}
    aside = {"verdict": "unjudged", "failed_checks": [], "unjudged_checks": ["sustained"]}
    goal = {"verdict": "fail", "failed_checks": ["sustained"], "unjudged_checks": []}
    lost = {"verdict": "fail", "failed_checks": ["no_loss"], "unjudged_checks": []}
    assert sweep_verdict([met, goal], {"run_dir": "00"}) == "pass"
    assert sweep_verdict([met, aside], {"run_dir": "00"}) == "unjudged"
    assert sweep_verdict([met, aside, lost], {"run_dir": "00"}) == "fail"
    assert sweep_verdict([aside], None) == "unjudged"


# -- capacity trials ----------------------------------------------------------------------------------------------
def test_a_capacity_trial_failing_on_a_busy_machine_is_unjudged_and_stops_the_search():
    behind = [criterion("producer_rate", True, 1000.0, 1000.0, "offered"),
              criterion("lag_growth", False, 300.0, 50.0, "lag grew 300/s"),
              criterion("checks", True, None, None, "all passed")]
    verdict, note = cap.trial_verdict(behind, BUSY)
    assert verdict == "unjudged" and note.startswith("unjudged: the machine was busy")
    assert note.endswith("as measured it fails on lag growth: lag grew 300/s")
    assert cap.trial_verdict(behind, QUIET) == ("failed", "")
    lost = behind[:2] + [criterion("checks", False, 1.0, 0.0, "failed no_loss")]
    assert cap.trial_verdict(lost, BUSY) == ("failed", "")  # a correctness failure, however busy
    kept_up = [behind[0], criterion("lag_growth", True, 0.0, 50.0, "flat"), behind[2]]
    assert cap.trial_verdict(kept_up, BUSY) == ("sustained", "")

    def trial(rate):
        if rate == 4000:
            return TrialOutcome(rate, verdict, behind, "02-eps=4000", 3, note=note)
        return TrialOutcome(rate, "sustained", kept_up, exit_code=0)

    res = search(trial, 1000)
    assert [t.rate for t in res.trials] == [1000, 2000, 4000] and res.stop_reason == "unjudged"
    assert res.verdict == "unjudged" and not res.interrupted and res.capacity_eps == 2000
    assert exit_code(res.verdict) == 3
    assert res.line().startswith("capacity: unjudged, trial 3 at 4,000 events/s could not be judged (2,000 "
                                 "events/s sustained so far): unjudged: the machine was busy")
