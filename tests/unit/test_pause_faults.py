"""Pause, not kill, and two drivers on one checkpoint (harness.faults.pause, harness.faults.second_driver): what
Spark's logs are counted as (literal log lines and task ends), what a pause declares for its length, and the
checks judged on literal views, each shown failing when what happened is not what the fault declared."""
from __future__ import annotations

import pytest

from harness.analysis.runview import FaultFacts
from harness.analysis.spark_log import count_driver_log, count_task_ends
from harness.checkers import pauses
from harness.checkers.catalogue import check_names
from harness.config import ConfigError, load_scenario
from harness.effects import Effect, LogExpectation
from harness.faults.pause import executor_expectations, timeouts_ms
from harness.faults.second_driver import classify
from harness.records.runstate import RunState
from tests.unit.test_checkers_literal import view

# lines as Spark 4.3's driver writes them (WARN and above: the harness's log level)
DRIVER_LOG = """\
26/11/29 00:40:01 WARN HeartbeatReceiver: Removing executor 1 with no recent heartbeats: 12345 ms exceeds timeout \
10000 ms
26/11/29 00:40:01 ERROR TaskSchedulerImpl: Lost executor 1 on 127.0.0.1: Executor heartbeat timed out after 12345 ms
26/11/29 00:40:01 WARN TaskSetManager: Lost task 3.0 in stage 7.0 (TID 50) (127.0.0.1 executor 1): ExecutorLostFailure
26/11/29 00:40:12 ERROR TaskSchedulerImpl: Lost an executor 1 (already removed): Command exited with code 137
26/11/29 00:41:00 ERROR TaskSchedulerImpl: Lost executor 0 on 127.0.0.1: Command exited with code 137
""".splitlines(keepends=True)


def test_the_driver_log_is_counted_per_executor():
    counted = count_driver_log(DRIVER_LOG)
    assert counted["heartbeat_timeout"] == {"1": 1}
    assert counted["executor_lost"] == {"1": 1, "0": 1}  # "Lost an executor ... (already removed)" is not a loss
    assert counted["lost_reasons"] == {"1": ["Executor heartbeat timed out after 12345 ms"],
                                       "0": ["Command exited with code 137"]}


def end(stage, index, attempt, executor, reason, app=0):
    return {"app": app, "stage": stage, "index": index, "attempt": attempt, "executor": executor, "reason": reason}


def test_a_lost_task_is_rerun_only_when_a_later_attempt_succeeded_elsewhere():
    ends = [end(7, 3, 0, "1", "ExecutorLostFailure"), end(7, 3, 1, "0", "Success"),  # re-run on 0
            end(7, 4, 0, "1", "ExecutorLostFailure"),  # never re-run
            end(7, 5, 0, "1", "ExecutorLostFailure"), end(7, 5, 0, "1", "Success", app=1),  # another application
            end(7, 6, 0, "0", "Success")]
    assert count_task_ends(ends) == {"tasks_lost": {"1": 3}, "tasks_rerun": {"1": 1}}


def test_spark_time_settings_are_read_with_their_own_bare_units():
    s = load_scenario("standalone-pause")[0]
    assert timeouts_ms(s) == {"network_timeout_ms": 10_000, "timeout_interval_ms": 2_000, "heartbeat_ms": 1_000}
    assert timeouts_ms(load_scenario("steady")[0]) == {"network_timeout_ms": 120_000, "timeout_interval_ms": 60_000,
                                                       "heartbeat_ms": 10_000}


def test_a_pause_declares_removal_past_the_timeout_none_below_it_and_nothing_between():
    t = {"network_timeout_ms": 10_000, "timeout_interval_ms": 2_000, "heartbeat_ms": 1_000}
    assert executor_expectations("1", 30, t) == [LogExpectation("heartbeat_timeout", "1", 1, None),
                                                 LogExpectation("executor_lost", "1", 1, None)]
    assert executor_expectations("1", 5, t) == [LogExpectation("heartbeat_timeout", "1", 0, 0),
                                                LogExpectation("executor_lost", "1", 0, 0)]
    assert executor_expectations("1", 11, t) == []  # removed or not, depending on when the check runs


def test_the_new_effect_fields_travel_through_faults_jsonl_and_stay_out_when_unused():
    e = Effect(expect_log=[LogExpectation("executor_lost", "1", 1, None)], query_paused=True, concurrent="both_ran")
    assert Effect.from_dict(e.as_dict()) == e
    assert not {"expect_log", "query_paused", "concurrent"} & set(Effect().as_dict())


def pause_facts(expect_log, healed_at=1040.0) -> FaultFacts:
    record = {"kind": "pause", "n": 0, "fault": 0, "injected_at": 1010.0, "healed_at": healed_at, "errors": [],
              "detail": {}}
    return FaultFacts(records=[record], effects=[Effect(expect_log=expect_log, query_paused=True)],
                      expected_failures=[], failed_as_expected=False)


REMOVED = [LogExpectation("heartbeat_timeout", "1", 1, None), LogExpectation("executor_lost", "1", 1, None)]


def test_spark_logged_fails_when_the_paused_executor_was_not_removed():
    nothing = {"heartbeat_timeout": {}, "executor_lost": {"0": 1}, "tasks_lost": {}, "tasks_rerun": {}}
    (check,) = pauses.spark_logged(view("standalone-pause", fault_facts=pause_facts(REMOVED), spark_log=nothing))
    assert check.status == "fail"
    assert "heartbeat_timeout of executor 1 = 0 (declared >= 1)" in check.detail
    logged = {"heartbeat_timeout": {"1": 1}, "executor_lost": {"1": 1}, "tasks_lost": {"1": 2},
              "tasks_rerun": {"1": 2}, "lost_reasons": {"1": ["Executor heartbeat timed out after 12345 ms"]}}
    (check,) = pauses.spark_logged(view("standalone-pause", fault_facts=pause_facts(REMOVED), spark_log=logged))
    assert check.status == "pass" and "executor 1 lost: Executor heartbeat timed out" in check.detail


def test_spark_logged_fails_when_a_short_pause_got_the_executor_removed_or_a_lost_task_never_ran_again():
    short = [LogExpectation("heartbeat_timeout", "1", 0, 0), LogExpectation("executor_lost", "1", 0, 0)]
    removed = {"heartbeat_timeout": {"1": 1}, "executor_lost": {"1": 1}, "tasks_lost": {}, "tasks_rerun": {}}
    (check,) = pauses.spark_logged(view("standalone-pause", fault_facts=pause_facts(short), spark_log=removed))
    assert check.status == "fail" and "declared in [0, 0]" in check.detail
    stranded = {"heartbeat_timeout": {"1": 1}, "executor_lost": {"1": 1}, "tasks_lost": {"1": 2},
                "tasks_rerun": {"1": 1}}
    (check,) = pauses.spark_logged(view("standalone-pause", fault_facts=pause_facts(REMOVED), spark_log=stranded))
    assert check.status == "fail" and "never re-run: {'1': 1}" in check.detail
    (check,) = pauses.spark_logged(view("standalone-pause", fault_facts=pause_facts(REMOVED)))
    assert check.status == "unknown"  # declared and never measured: not a pass
    assert pauses.spark_logged(view()) == []


def test_query_resumed_fails_when_the_driver_was_restarted_or_no_batch_followed_the_heal():
    after = [{"timestamp": "1970-01-01T00:17:25.000Z"}]  # 1045 s: 5 s after the heal at 1040 s
    ok = RunState(drained=True, query={"restarts": 0})
    (check,) = pauses.query_resumed(view("standalone-pause", fault_facts=pause_facts([]), progress=after, state=ok))
    assert check.status == "pass" and check.value == pytest.approx(5.0)
    restarted = RunState(drained=True, query={"restarts": 1})
    (check,) = pauses.query_resumed(view("standalone-pause", fault_facts=pause_facts([]), progress=after,
                                         state=restarted))
    assert check.status == "fail" and "restarted 1 times, 0 of them after faults that took it down" in check.detail
    killed_later = RunState(drained=True, query={"restarts": 1, "kills": 1})  # a driver_kill's own restart
    (check,) = pauses.query_resumed(view("standalone-pause", fault_facts=pause_facts([]), progress=after,
                                         state=killed_later))
    assert check.status == "pass", check.detail
    before = [{"timestamp": "1970-01-01T00:17:00.000Z"}]  # 1020 s: only during the pause
    (check,) = pauses.query_resumed(view("standalone-pause", fault_facts=pause_facts([]), progress=before, state=ok))
    assert check.status == "fail" and "too late: pause #0 never" in check.detail


def driver_facts(expect: str, outcome: str | None) -> FaultFacts:
    detail = {} if outcome is None else {"heal_outcome": outcome, "heal_why": "measured"}
    record = {"kind": "second_driver", "n": 0, "fault": 0, "injected_at": 1010.0, "healed_at": 1040.0,
              "errors": [], "detail": detail}
    return FaultFacts(records=[record], effects=[Effect(concurrent=expect)], expected_failures=[],
                      failed_as_expected=False)


def test_second_driver_fails_when_what_spark_did_is_not_what_was_declared():
    (check,) = pauses.second_driver(view("second-driver", fault_facts=driver_facts("second_refused", "both_ran")))
    assert check.status == "fail" and check.detail.startswith("second_driver #0: both_ran (measured); declared "
                                                              "second_refused")
    assert "Guard: two drivers ran the same query" in check.detail
    (check,) = pauses.second_driver(view("second-driver", fault_facts=driver_facts("second_refused",
                                                                                    "second_refused")))
    assert check.status == "pass" and "Guard: Spark does not lock a checkpoint" in check.detail
    (check,) = pauses.second_driver(view("second-driver", fault_facts=driver_facts("second_refused", None)))
    assert check.status == "unknown"


CONCURRENT = "[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple streaming jobs detected for 12."


@pytest.mark.parametrize("first, second, outcome", [
    ({"state": "started", "batches": [5, 6]}, {"state": "failed", "error": CONCURRENT, "batches": []},
     "second_refused"),
    ({"state": "started", "batches": [5, 6]}, {"state": "failed", "error": CONCURRENT, "batches": [5]},
     "second_failed"),
    ({"state": "failed", "error": CONCURRENT, "batches": [5]}, {"state": "started", "batches": [6, 7]},
     "first_failed"),
    ({"state": "started", "batches": [5, 6]}, {"state": "started", "batches": [6, 7]}, "both_ran"),
    ({"state": "started", "batches": [5]}, {"state": "failed", "error": "[KAFKA_DATA_LOSS] x", "batches": []},
     "other"),
    ({"state": "started", "batches": [5]}, {"state": "starting", "batches": []}, "other"),
])
def test_two_drivers_ends_are_classified(first, second, outcome):
    assert classify(first, second)[0] == outcome


def test_the_catalogue_lists_the_faults_own_checks():
    assert {"query_resumed", "spark_logged"} <= set(check_names(load_scenario("standalone-pause")[0]))
    assert "second_driver" in check_names(load_scenario("second-driver")[0])


def test_a_pause_without_a_duration_or_of_an_executor_inside_the_driver_is_refused(tmp_path):
    head = 'name = "s"\n[producers]\nrate = { kind = "constant", eps = 10 }\n'
    path = tmp_path / "s.toml"
    path.write_text(head + '[[faults]]\nkind = "pause"\nat_s = 1\n')
    with pytest.raises(ConfigError, match="a pause needs duration_s > 0"):
        load_scenario(str(path))
    path.write_text(head + '[spark]\nmaster = "local[2]"\n[[faults]]\nkind = "pause"\nat_s = 1\nduration_s = 5\n')
    with pytest.raises(ConfigError, match=r"target = \"executor\" needs spark.cluster"):
        load_scenario(str(path))


def test_expecting_the_running_query_to_fail_declares_its_failure_and_only_then(tmp_path):
    from harness.faults.second_driver import SecondDriver, SecondDriverOptions

    first = SecondDriver(SecondDriverOptions(at_s=1, duration_s=5, expect="first_failed"))
    assert first.effect.failure == "CONCURRENT_STREAM_LOG_UPDATE" and first.effect.concurrent == "first_failed"
    refused = SecondDriver(SecondDriverOptions(at_s=1, duration_s=5))
    assert refused.effect.failure is None and refused.effect.concurrent == "second_refused"
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[producers]\nrate = { kind = "constant", eps = 10 }\n'
                    '[[faults]]\nkind = "second_driver"\nat_s = 1\n')
    with pytest.raises(ConfigError, match="needs duration_s > 0"):
        load_scenario(str(path))


def test_a_drivers_end_names_its_query_and_run_id_also_when_it_failed_before_any_progress(tmp_path):
    from types import SimpleNamespace

    from harness.faults.second_driver import _end_of

    error = ("[STREAM_FAILED] " + CONCURRENT + "\n=== Streaming Query ===\nIdentifier: query_under_test "
             "[id = b8efbd47-1b85-4ebd-93c3-7479668a5e72, runId = 5940eea1-f58b-44bb-8e42-60bc52f272ae]\n")
    failed = SimpleNamespace(status=lambda: {"state": "failed", "error": error}, run_dir=tmp_path, child=None)
    end = _end_of(failed, since=0.0)
    assert end["ids"] == ["b8efbd47-1b85-4ebd-93c3-7479668a5e72"]
    assert end["run_ids"] == ["5940eea1-f58b-44bb-8e42-60bc52f272ae"] and end["batches"] == []
    (tmp_path / "progress.jsonl").write_text(
        '{"id": "q1", "runId": "r0", "timestamp": "1970-01-01T00:16:30.000Z", "batchId": 3}\n'
        '{"id": "q1", "runId": "r1", "timestamp": "1970-01-01T00:16:50.000Z", "batchId": 4}\n')
    running = SimpleNamespace(status=lambda: {"state": "started", "id": "q1", "run_id": "r1"}, run_dir=tmp_path,
                              child=None)
    end = _end_of(running, since=1000.0)  # 00:16:40: the first record is from before
    assert (end["batches"], end["ids"], end["run_ids"]) == ([4], ["q1"], ["r1"])
