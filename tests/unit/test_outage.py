"""The outage fault (harness.faults.outage): its options, what it measures (harness.analysis.outages) on literal
records, and its checks (harness.checkers.outages) on literal views, each one failing when what the scenario
declared is not what happened. Expected figures are worked out by hand from the literal offsets."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.analysis.outages import backlog, drain_s, expired, first_batch, measure_outage, peak_rss_mb
from harness.analysis.performance import Performance
from harness.checkers.catalogue import PERFORMANCE_CHECKS, check_names
from harness.checkers.outages import outage_backlog, outage_crash_loop, outage_drained, outage_expired
from harness.config import load_scenario
from harness.faults.outage import OutageOptions
from harness.records.histsummary import Hist
from tests.unit.test_checkers_literal import view

T = 2_000_000_000.0  # an epoch second: the outage's restart


def record(**detail) -> dict:
    """faults.jsonl's outage entry as recorded_faults returns it: down at T - 20, restarted at T; two partitions,
    committed to 100 and 200 at the stop, the log start at the restart 150 and 180, the ends 1,100 and 1,200."""
    base = {"inject_stop": "graceful", "inject_down_s": 20.0, "inject_offset_log_last": 4, "inject_cap": None,
            "inject_crash_loop_expected": False, "inject_max_restarts": 2, "inject_drain_within_s": 30.0,
            "heal_committed_at_restart": {"0": 100, "1": 200}, "heal_log_start_at_restart": {"0": 150, "1": 180},
            "heal_ends_at_restart": {"0": 1100, "1": 1200}, "heal_restarted_at": T}
    return {"kind": "outage", "fault": 0, "n": 1, "injected_at": T - 20.0, "healed_at": T,
            "detail": {**base, **detail}}


def progress(batch: int, at: float, rows: int, ms: int = 900) -> dict:
    from datetime import datetime, timezone
    stamp = datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {"batchId": batch, "timestamp": stamp, "numInputRows": rows, "durationMs": {"triggerExecution": ms}}


def outage(**fields) -> dict:
    """A measured outage (as measure_outage returns it), with `fields` changed."""
    base = {"n": 1, "fault": 0, "stop": "graceful", "down_s": 20.0, "restarted": True, "down_for_s": 20.0,
            "cap": None, "crash_loop_expected": False, "max_restarts": 2, "drain_within_s": 30.0,
            "backlog_events": 1950, "backlog_partitions": 2, "expired_events": 50, "expired_by_partition": {"0": 50},
            "retention_ms": 3000, "expired_undelivered": 50,
            "first_batch": {"batch": 5, "rows": 2000, "duration_ms": 3000, "started_at": T + 5},
            "peak_rss_mb": {"driver-jvm": 700.0}, "drain_s": 12.0, "drain_eps": 900.0, "backlog_peak_events": 2000,
            "crashes": 0, "gave_up": False, "crash_errors": []}
    return {**base, **fields}


def perf() -> Performance:
    return Performance(steady={}, startup={}, latency=Hist(), sustain={})


def status(checks) -> list[str]:
    return [c.status for c in checks]


# -- the options ------------------------------------------------------------------------------------------------
def test_an_outage_needs_down_s_and_takes_no_window_or_duration():
    assert OutageOptions(at_s=5, down_s=20).heal_after_s == 20
    for bad in ({"at_s": 5}, {"at_s": 5, "down_s": 20, "duration_s": 3}, {"window": [5, 25], "down_s": 20},
                {"at_s": 5, "down_s": 0}, {"at_s": 5, "down_s": 20, "crash_loop": True, "drain_within_s": 10},
                {"at_s": 5, "down_s": 20, "stop": "pause"}, {"at_s": 5, "down_s": 20, "max_restart": 2}):
        with pytest.raises(ValidationError):
            OutageOptions(**bad)


def test_the_shipped_scenario_lists_the_outage_checks_and_the_drain_is_a_time():
    names = check_names(load_scenario("outage-expiry")[0])
    assert {"outage_backlog", "outage_crash_loop", "outage_drained", "outage_expired", "query_recovered"} <= set(names)
    assert "outage_drained" in PERFORMANCE_CHECKS and "outage_crash_loop" not in PERFORMANCE_CHECKS


# -- what is measured -------------------------------------------------------------------------------------------
def test_the_backlog_starts_at_the_later_of_the_commit_and_the_log_start():
    detail = record()["detail"]
    assert backlog(detail) == {"0": 1100 - 150, "1": 1200 - 200}
    assert expired(detail) == {"0": 50}


def test_the_first_batch_is_the_first_one_planned_after_the_stop():
    batches = [progress(4, T - 25, 300), progress(4, T + 3, 300), progress(5, T + 5, 2000, 4000),
               progress(6, T + 9, 100)]
    assert first_batch(batches, T, 4) == {"batch": 5, "rows": 2000, "duration_ms": 4000, "started_at": T + 5}
    assert first_batch(batches, T, None)["batch"] == 4  # a graceful stop re-runs nothing
    assert first_batch(batches[:2], T, 4) is None


def test_the_peak_memory_is_summed_per_role_within_the_window():
    samples = [{"t": T - 1, "procs": [{"role": "driver-jvm", "rss_bytes": 900 * 2**20}]},
               {"t": T + 1, "procs": [{"role": "driver-jvm", "rss_bytes": 300 * 2**20},
                                      {"role": "executor", "rss_bytes": 100 * 2**20},
                                      {"role": "executor", "rss_bytes": 150 * 2**20},
                                      {"role": "broker", "rss_bytes": 999 * 2**20}]},
               {"t": T + 2, "procs": [{"role": "driver-jvm", "rss_bytes": 400 * 2**20}]}]
    assert peak_rss_mb(samples, T, T + 5) == {"driver-jvm": 400.0, "executor": 250.0}


def test_a_crash_loop_is_measured_from_the_query_record():
    query = {"state": "failed", "error": "[QUERY_CRASH_LOOP] the query failed 3 times ...",
             "crash_list": [{"at": T - 30, "error": "before"}, {"at": T + 5, "error": "java.lang.OutOfMemoryError\nx"},
                            {"at": T + 15, "error": "java.lang.OutOfMemoryError"}, {"at": T + 25, "error": ""}]}
    out = measure_outage(record(), [], query, [], None, T + 60)
    assert (out["crashes"], out["gave_up"]) == (3, True)
    assert out["crash_errors"] == ["(no error recorded)", "java.lang.OutOfMemoryError"]
    assert (out["backlog_events"], out["backlog_partitions"], out["expired_events"]) == (1950, 2, 50)
    assert out["first_batch"] is None and out["drain_s"] is None


# -- the checks -------------------------------------------------------------------------------------------------
def test_the_backlog_check_passes_when_the_first_batch_read_it_and_fails_when_it_did_not():
    assert status(outage_backlog(view(outages=[outage()]))) == ["pass"]
    short = outage(first_batch={"batch": 5, "rows": 1000, "duration_ms": 900, "started_at": T + 5})
    assert status(outage_backlog(view(outages=[short]))) == ["fail"]
    assert status(outage_backlog(view(outages=[outage(backlog_events=0)]))) == ["fail"]  # no outage really
    assert status(outage_backlog(view(outages=[outage(restarted=False)]))) == ["fail"]
    assert outage_backlog(view(outages=[])) == []


def test_a_capped_first_batch_needs_only_the_cap_less_a_record_per_partition():
    capped = {"option": "maxOffsetsPerTrigger", "value": 800}
    ok = outage(cap=capped, first_batch={"batch": 5, "rows": 798, "duration_ms": 500, "started_at": T + 5})
    low = outage(cap=capped, first_batch={"batch": 5, "rows": 797, "duration_ms": 500, "started_at": T + 5})
    assert status(outage_backlog(view(outages=[ok]))) == ["pass"]
    assert status(outage_backlog(view(outages=[low]))) == ["fail"]


def test_the_crash_loop_check_holds_only_to_what_was_declared():
    looped = dict(first_batch=None, crashes=3, gave_up=True, crash_errors=["java.lang.OutOfMemoryError"])
    assert status(outage_crash_loop(view(outages=[outage()]))) == ["pass"]
    assert status(outage_crash_loop(view(outages=[outage(**looped)]))) == ["fail"]  # undeclared crash-loop
    assert status(outage_crash_loop(view(outages=[outage(crashes=1)]))) == ["fail"]  # one crash, then ran
    declared = dict(crash_loop_expected=True, drain_within_s=None)
    assert status(outage_crash_loop(view(outages=[outage(**declared, **looped)]))) == ["pass"]
    assert status(outage_crash_loop(view(outages=[outage(**declared)]))) == ["fail"]  # declared, did not happen
    assert status(outage_crash_loop(view(outages=[outage(**declared, crashes=2, gave_up=False)]))) == ["fail"]
    assert status(outage_backlog(view(outages=[outage(**declared, **looped)]))) == ["not required"]


def test_the_drain_check_fails_when_the_backlog_drained_late_or_never():
    assert status(outage_drained(view(outages=[outage()], performance=perf()))) == ["pass"]
    assert status(outage_drained(view(outages=[outage(drain_s=31.0)], performance=perf()))) == ["fail"]
    assert status(outage_drained(view(outages=[outage(drain_s=None)], performance=perf()))) == ["fail"]
    assert status(outage_drained(view(outages=[outage()]))) == ["unknown"]  # no producers' figures
    assert outage_drained(view(outages=[outage(drain_within_s=None)], performance=perf())) == []


def test_the_drain_is_timed_from_the_restart_not_the_injection():
    assert drain_s(record(), {"time_to_recover_s": 50.0}, T) == 30.0  # injected at T - 20, back at T + 30
    assert drain_s(record(), {"time_to_recover_s": None}, T) is None
    assert drain_s(record(), None, T) is None


def test_the_expired_check_holds_the_loss_to_what_the_broker_removed_unread():
    assert status(outage_expired(view(outages=[outage()]))) == ["pass"]
    # the retention shorter than the outage, yet nothing aged out: the declared expiry did not happen
    assert status(outage_expired(view(outages=[outage(expired_events=0, expired_undelivered=0)]))) == ["fail"]
    # the retention longer than the outage, yet records aged out
    assert status(outage_expired(view(outages=[outage(retention_ms=30_000)]))) == ["fail"]
    assert status(outage_expired(view(outages=[outage(retention_ms=30_000, expired_events=0,
                                                      expired_undelivered=0)]))) == ["pass"]
    # more went undelivered in the declared ranges than aged out unread: the query lost some it could have read
    assert status(outage_expired(view(outages=[outage(expired_undelivered=51)]))) == ["fail"]
    assert status(outage_expired(view(outages=[outage(expired_undelivered=None)]))) == ["unknown"]
    assert outage_expired(view(outages=[outage(retention_ms=None)])) == []


# -- the cap search (harness.commands.outage_cap) --------------------------------------------------------------
def fake_trials(oom_above: int, slow_below: int, backlog: int = 100_000):
    """A query that runs out of memory on a first batch above `oom_above` rows and drains too slowly with a cap
    under `slow_below`; uncapped (cap None) its first batch is the whole backlog."""
    from harness.commands.outage_cap import Trial

    seen = []

    def trial(cap):
        seen.append(cap)
        rows = backlog if cap is None else min(cap, backlog)
        outcome = "crash" if rows > oom_above else "slow" if cap is not None and cap < slow_below else "held"
        return Trial(cap, outcome, backlog_events=backlog)
    return trial, seen


def test_the_cap_search_recommends_the_largest_cap_that_held_within_its_trials():
    from harness.commands.outage_cap import search

    trial, seen = fake_trials(oom_above=30_000, slow_below=5_000)
    result = search(trial, floor=4_000, max_trials=4)
    assert seen == [None, 20_000, 44_721, 29_907]  # sqrt(4,000 x 100,000), then sqrt(20,000 x 100,000), ...
    assert (result.recommended, result.uncapped) == (29_907, False)


def test_the_cap_search_stops_at_once_when_the_scenario_holds_or_only_drains_too_slowly():
    from harness.commands.outage_cap import search

    trial, seen = fake_trials(oom_above=10**9, slow_below=0)
    held = search(trial, floor=4_000)
    assert (seen, held.recommended, held.uncapped) == ([None], None, True)
    slow = search(lambda cap: __import__("harness.commands.outage_cap", fromlist=["Trial"]).Trial(cap, "slow"),
                  floor=4_000)
    assert (len(slow.trials), slow.recommended, slow.uncapped) == (1, None, False)


def test_a_trial_is_judged_from_its_result():
    from harness.commands.outage_cap import judge_trial

    crashed = {"verdict": "fail", "outages": [outage(crashes=3, gave_up=True, first_batch=None)], "checks": []}
    assert judge_trial(None, crashed).outcome == "crash"
    held = {"verdict": "pass", "outages": [outage()], "checks": []}
    assert judge_trial(5000, held).outcome == "held"
    slow = {"verdict": "fail", "outages": [outage(drain_s=99.0)],
            "checks": [{"name": "outage_drained", "status": "fail", "detail": "drained 99 s"}]}
    assert judge_trial(5000, slow).outcome == "slow"
    lost = {"verdict": "fail", "outages": [outage()], "checks": [{"name": "no_loss", "status": "fail", "detail": "1"}]}
    assert judge_trial(5000, lost).outcome == "broken"
    assert judge_trial(5000, {"verdict": "unjudged", "outages": []}).outcome == "broken"


# -- the restart policy (harness.spark.process) ----------------------------------------------------------------
class DeadChild:
    """A driver process that has exited with `code`."""

    def __init__(self, code: int = 4):
        self.proc = type("P", (), {"returncode": code})()

    def alive(self) -> bool:
        return False


def supervised(tmp_path, monkeypatch):
    """A SparkQueryProcess without a driver: its `start` only counts, each start's driver failing at once."""
    import json
    import threading

    from harness.spark.process import SparkQueryProcess

    q = object.__new__(SparkQueryProcess)
    q.spark_dir = tmp_path
    q._lock, q.child, q.kills, q.restarts = threading.Lock(), DeadChild(), 0, 0
    q._killed, q._held, q._restarting_failures, q.failure_restarts, q._through_batch = False, False, False, 0, -1
    q.crashes, q.gave_up = [], None
    starts = []

    def start():
        starts.append(1)
        q.child = DeadChild()
        (tmp_path / "status.json").write_text(json.dumps({"state": "failed", "error": "java.lang.OutOfMemoryError"}))
    monkeypatch.setattr(q, "start", start)
    (tmp_path / "status.json").write_text(json.dumps({"state": "failed", "error": "java.lang.OutOfMemoryError"}))
    return q, starts


def test_a_held_query_stays_down_and_a_crash_loop_is_given_up_on_after_its_restarts(tmp_path, monkeypatch):
    q, starts = supervised(tmp_path, monkeypatch)
    q._killed = q._held = True  # taken down by an outage
    assert q.watch() == "restarting" and starts == []
    q.bring_back(2)
    q._killed = False  # (watch restarts a killed query first: here the first start has failed already)
    assert [q.watch(), q.watch()] == ["restarting", "restarting"] and len(starts) == 2
    assert q.watch() == "gave_up" and len(starts) == 2 and len(q.crashes) == 3
    assert q.gave_up.startswith("[QUERY_CRASH_LOOP] the query failed 3 times")
    assert q.watch() == "gave_up"  # and it stays given up on


def test_without_a_restart_policy_a_failure_ends_the_query_as_before(tmp_path, monkeypatch):
    q, starts = supervised(tmp_path, monkeypatch)
    assert q.watch() == "failed" and starts == [] and q.crashes == []
    q.bring_back(None)  # a declared data-loss error: no restarts into it
    assert q.watch() == "failed" and starts == []


def test_the_restart_policy_ends_once_a_batch_planned_after_the_restart_has_completed(tmp_path, monkeypatch):
    import json

    q, starts = supervised(tmp_path, monkeypatch)
    q.run_dir, q.started_at = tmp_path, T
    q.child = type("Alive", (), {"alive": lambda self: True, "proc": None})()
    (tmp_path / "status.json").write_text(json.dumps({"state": "started"}))
    q.bring_back(2, through_batch=7)
    rerun = progress(7, T + 5, 300)  # the batch a killed query re-runs: planned before the restart
    (tmp_path / "progress.jsonl").write_text(json.dumps(rerun) + "\n")
    assert q.watch() == "running" and q.under_restart_policy
    (tmp_path / "progress.jsonl").write_text(json.dumps(rerun) + "\n" + json.dumps(progress(8, T + 9, 9000)) + "\n")
    assert q.watch() == "running" and not q.under_restart_policy and starts == []


# -- an out-of-memory crash-loop (scenario outage-oom) ------------------------------------------------------------
PROXY_OOM = ("[STREAM_FAILED] An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
             "call last):\n  File \"clientserver.py\", line 644, in _call_proxy\n"
             "py4j.protocol.Py4JJavaError: An error occurred while calling o49.collectToPython.\n"
             ": java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)")


def test_the_cause_of_a_foreach_batch_failure_is_the_out_of_memory_line_not_the_proxys_first_line():
    from harness.analysis.outages import cause

    assert cause(PROXY_OOM) == ": java.lang.OutOfMemoryError: Java heap space"
    assert cause(PROXY_OOM, "collectToPython") == (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o49.collectToPython.")
    lost = "[KAFKA_DATA_LOSS] Some data may have been lost"
    assert cause(lost + "\nmore") == lost
    assert cause("") == "(no error recorded)"


def test_a_declared_crash_error_is_counted_per_failure_after_the_restart():
    query = {"state": "failed", "error": "[QUERY_CRASH_LOOP] the query failed 3 times ...",
             "crash_list": [{"at": T - 30, "error": PROXY_OOM}, {"at": T + 5, "error": PROXY_OOM},
                            {"at": T + 15, "error": "[KAFKA_DATA_LOSS] lost"}, {"at": T + 25, "error": PROXY_OOM}]}
    out = measure_outage(record(inject_crash_error="java.lang.OutOfMemoryError"), [], query, [], None, T + 60)
    assert (out["crashes"], out["crashes_as_declared"], out["crash_error"]) == (3, 2, "java.lang.OutOfMemoryError")
    assert out["crash_errors"] == [": java.lang.OutOfMemoryError: Java heap space", "[KAFKA_DATA_LOSS] lost"]


def test_a_declared_out_of_memory_loop_fails_when_a_failure_had_another_cause():
    loop = dict(first_batch=None, crashes=3, gave_up=True, crash_loop_expected=True, drain_within_s=None,
                crash_error="java.lang.OutOfMemoryError", crash_errors=[": java.lang.OutOfMemoryError: Java heap"])
    assert status(outage_crash_loop(view(outages=[outage(**loop, crashes_as_declared=3)]))) == ["pass"]
    assert status(outage_crash_loop(view(outages=[outage(**loop, crashes_as_declared=2)]))) == ["fail"]
    assert status(outage_crash_loop(view(outages=[outage(**loop, crashes_as_declared=0)]))) == ["fail"]
    # not declared: any failure makes the loop
    assert status(outage_crash_loop(view(outages=[outage(**{**loop, "crash_error": None})]))) == ["pass"]


def test_a_crash_error_is_an_option_of_text():
    assert OutageOptions(at_s=5, down_s=20, crash_loop=True, crash_error="java.lang.OutOfMemoryError").crash_error
    with pytest.raises(ValidationError):
        OutageOptions(at_s=5, down_s=20, crash_loop=True, crash_error="")


# -- the query that runs out of memory (harness.queries.collect_to_driver) ---------------------------------------
class FakeBatch:
    """A micro-batch as foreachBatch hands it over: collect() returns its rows."""

    def __init__(self, rows):
        self.rows = rows

    def collect(self):
        return self.rows


def test_collect_to_driver_writes_each_batch_id_once_and_reads_every_row_back(tmp_path):
    from harness.queries import resolve
    from harness.queries.collect_to_driver import query

    q = resolve("collect_to_driver")
    assert (q.oracle, q.foreach_batch, q.read_sink) == ("events", query.foreach_batch, query.read_sink)
    rows = [{"producer": 0, "seq": s, "intended_ms": 1.5 * s, "partition": s % 2, "offset": s // 2,
             "payload": "x" * 8} for s in range(5)]
    q.foreach_batch(FakeBatch(rows), 0, str(tmp_path), {})
    q.foreach_batch(FakeBatch(rows[:2]), 0, str(tmp_path), {})  # batch 0 re-run after a restart: skipped
    q.foreach_batch(FakeBatch(rows[4:]), 1, str(tmp_path), {})
    out = q.read_sink(str(tmp_path), {})
    assert list(zip(out["seq"], out["batch_id"])) == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (4, 1)]
    assert "payload" not in out.columns and out["commit_ms"].notna().all()
    assert len(q.read_sink(str(tmp_path / "none"), {})) == 0


def test_collect_to_driver_refuses_unknown_params():
    from harness.queries import resolve

    q = resolve("collect_to_driver")
    assert q.check_params({}) is None and q.check_params({"payload": False}) is None
    assert "not known" in q.check_params({"size": 1})
    assert "true or false" in q.check_params({"payload": 1})


def test_outage_oom_declares_the_out_of_memory_crash_loop_on_a_small_driver():
    scenario, _, _ = load_scenario("scenarios/outage-oom.toml", [])
    fault = scenario.faults[0]
    assert (fault.kind, fault.crash_loop, fault.crash_error) == ("outage", True, "java.lang.OutOfMemoryError")
    assert (scenario.spark.query, scenario.spark.driver_memory) == ("collect_to_driver", "512m")


def test_a_driver_jvm_that_exited_on_out_of_memory_is_read_from_its_own_log_since_this_start(tmp_path):
    from harness.spark.process import SparkQueryProcess

    proc = object.__new__(SparkQueryProcess)  # only its log is read: no driver started
    proc.spark_dir = tmp_path
    earlier = "Exception in thread \"x\" java.lang.OutOfMemoryError: Java heap space\n"
    (tmp_path / "driver.log").write_text(earlier)
    proc._log_from = len(earlier)  # a restart: the earlier start's lines are not this one's
    assert proc._fatal_jvm_line() is None
    with open(tmp_path / "driver.log", "a") as f:
        f.write("Exception in thread \"y\" java.lang.OutOfMemoryError: Java heap space\n"
                "Terminating due to java.lang.OutOfMemoryError: Java heap space\nlater line\n")
    assert proc._fatal_jvm_line() == "driver JVM: Terminating due to java.lang.OutOfMemoryError: Java heap space"


def test_the_cap_search_replays_the_measured_outage_oom_search():
    """The trial outcomes `harness outage-cap outage-oom --drain-within-s 120` measured (docs/commands.md): as
    written out of memory with a backlog of 112,450, 15,906 and 42,292 held, 68,962 out of memory."""
    from harness.commands.outage_cap import Trial, search

    measured = {None: "crash", 15_906: "held", 42_292: "held", 68_962: "crash"}
    seen = []

    def trial(cap):
        seen.append(cap)
        return Trial(cap, measured[cap], backlog_events=112_450)

    result = search(trial, floor=2_250, max_trials=4)  # 1,500 events/s x 1 s x 1.5
    assert seen == [None, 15_906, 42_292, 68_962]  # sqrt(2,250 x 112,450), sqrt(15,906 x 112,450), ...
    assert (result.recommended, result.uncapped) == (42_292, False)
    assert "68,962 failed" in result.reason
