"""The verdict from a run directory alone (harness.verdict.judge), on crafted run directories: the fault-level
checks (expected failure, faults applied), what a declared failure and a declared loss may excuse and what they
may not, and that whatever breaks while judging still gives a typed result saying why it is unjudged.

The run directories are written the way the real parts write them: the producers' ack CSV and summary, the
Parquet sink with its `_spark_metadata` log, the checkpoint's offset and commit logs, faults.jsonl.
"""
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.config import Scenario
from harness.records.result import SCHEMA_VERSION, RunResult
from harness.runner import measure_and_judge as judge
from harness.records.history import ACK_COLUMNS

STREAM = "events"
T0 = 1_700_000_000.0  # traffic start (epoch s)
DATA_LOSS = ("[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data may have been lost because they are not "
             "available in Kafka any more")
SINK_SCHEMA = pa.schema([("producer", pa.int32()), ("seq", pa.int64()), ("intended_ms", pa.float64()),
                         ("partition", pa.int32()), ("offset", pa.int64()), ("broker_ms", pa.float64()),
                         ("bytes", pa.int32()), ("batch_ms", pa.float64())])


def scenario(events: int, faults: list[dict] = (), nodes: int = 1, **checks) -> Scenario:
    """A crafted history of a few events has no traffic over time to keep up with: `sustained` is declared not
    required (tests/unit/test_sustained.py judges it). `faults` are its [[faults]]: a run directory records the
    injections they plan (RunDir.fault), no more and no fewer, or faults_applied fails."""
    checks = {"sustained_not_required": "a crafted history of a few events", **checks}
    return Scenario.model_validate({"name": "crafted", "stream": {"name": STREAM, "partitions": 2},
                                    "backend": {"kind": "kafka", "nodes": nodes},
                                    "producers": {"duration_s": 10, "rate": {"kind": "constant", "eps": events / 10}},
                                    "faults": list(faults), "checks": checks})


DELETE = {"kind": "delete_records", "at_s": 2}  # one injection at 2 s, as RunDir.fault records one by default
DRIVER_KILL = {"kind": "driver_kill", "at_s": 2}


class RunDir:
    """A run directory as the runner leaves it; events are (seq, partition, offset, ack_s, error)."""

    def __init__(self, root: Path):
        self.root = root
        (root / "producers").mkdir(parents=True)
        (root / "sink" / "_spark_metadata").mkdir(parents=True)
        self.batches = 0

    def acks(self, events, *, unacked_at_exit=0, pacer_skipped=0):
        lines = [",".join(ACK_COLUMNS)]
        for seq, part, off, ack_s, error in events:
            intended = (T0 + seq * 0.01) * 1000.0
            lines.append(f"0,{seq},{part},{off},{intended:.3f},{ack_s * 1000.0:.3f},2000,{error}")
        (self.root / "producers" / "acks-0.csv").write_text("\n".join(lines) + "\n")
        acked = [e for e in events if not e[4]]
        (self.root / "producers" / "job.json").write_text(json.dumps({"processes": 1, "start_at": T0}))
        (self.root / "producers" / "summary-0.json").write_text(json.dumps({
            "producer": 0, "sent": len(events), "acked": len(acked), "failed": len(events) - len(acked),
            "errors": {}, "unacked_at_exit": unacked_at_exit, "pacer_skipped": pacer_skipped,
            "partition_events": {str(p): sum(1 for e in acked if e[1] == p) for p in (0, 1)},
            "partition_bytes": {}, "delivery_hist": None}))
        return self

    def sink_batch(self, events, table: pa.Table | None = None, write_file=True):
        """One sink batch holding these (seq, partition, offset) rows, listed in the sink's own log."""
        if table is None:
            table = pa.table({"producer": [0] * len(events), "seq": [e[0] for e in events],
                              "intended_ms": [(T0 + e[0] * 0.01) * 1000.0 for e in events],
                              "partition": [e[1] for e in events], "offset": [e[2] for e in events],
                              "broker_ms": [T0 * 1000.0] * len(events), "bytes": [100] * len(events),
                              "batch_ms": [T0 * 1000.0] * len(events)}, schema=SINK_SCHEMA)
        path = self.root / "sink" / f"part-{self.batches:05d}.parquet"
        if write_file:
            pq.write_table(table, path)
        entry = {"path": path.as_uri(), "size": 1, "isDir": False, "modificationTime": 1, "blockReplication": 1,
                 "blockSize": 1, "action": "add"}
        (self.root / "sink" / "_spark_metadata" / str(self.batches)).write_text("v1\n" + json.dumps(entry) + "\n")
        self.batches += 1
        return self

    def committed(self, batch: int, ends: dict[int, int]):
        """The checkpoint's offset log entry for `batch` and its commit."""
        for d in ("offsets", "commits"):
            (self.root / "checkpoint" / d).mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoint" / "offsets" / str(batch)).write_text(
            'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n'
            + json.dumps({STREAM: {str(p): o for p, o in ends.items()}}) + "\n")
        (self.root / "checkpoint" / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        return self

    def fault(self, effect: dict, *, inject_s=2.0, heal_s: float | None = 5.0, inject_error=None, heal_error=None,
              n=0, kind="delete_records", index=0):
        """Injection number `n` of the scenario's faults.<index>, as the nemesis records it."""
        with open(self.root / "faults.jsonl", "a") as f:
            for action, at, error in (("inject", inject_s, inject_error), ("heal", heal_s, heal_error)):
                if at is None:
                    continue
                row = {"t": T0 + at, "action": action, "kind": kind, "fault": index, "n": n, "scheduled_s": at,
                       "detail": {}, "effect": effect}
                if error:
                    row["error"] = error
                f.write(json.dumps(row) + "\n")
        return self


def drained(**extra) -> dict:
    return {"drained": True, "drain_detail": "query reached the end offsets", "error": None, "elapsed_s": 20.0,
            "ended_at": T0 + 30, "query": {"state": "drained", "error": None, "exit_code": 0}, **extra}


def failed_with(error: str) -> dict:
    return {"drained": False, "drain_detail": "not drained", "error": None, "elapsed_s": 20.0, "ended_at": T0 + 30,
            "query": {"state": "failed", "error": error, "exit_code": 4}}


def checks_of(result: RunResult) -> dict[str, dict]:
    return {c.name: c.model_dump() for c in result.checks}


def clean(seqs=range(6)):
    """Events 0..5 alternating over two partitions, acked at T0+1 s; (seq, partition, offset, ack_s, error)."""
    return [(s, s % 2, s // 2, T0 + 1, "") for s in seqs]


# -- a clean run, the baseline every other test departs from -------------------------------------------------------
def test_clean_run_passes_and_the_result_is_typed(tmp_path):
    run = RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    result = judge(scenario(6), tmp_path, drained())
    assert result.verdict == "pass", checks_of(result)
    assert result.schema_version == SCHEMA_VERSION
    data = json.loads(json.dumps(result.as_dict()))  # what result.json holds
    assert RunResult.model_validate(data).as_dict() == data
    c = result.counts
    assert (c.produced, c.acked, c.delivered_unique, c.lost, c.duplicates) == (6, 6, 6, 0, 0)
    assert run.batches == 1


def test_pacer_skips_and_unresolved_sends_reach_the_verdict(tmp_path):
    RunDir(tmp_path).acks(clean(), unacked_at_exit=2, pacer_skipped=3).sink_batch([e[:3] for e in clean()])
    result = judge(scenario(6, max_pacer_skipped=2), tmp_path, drained())
    checks = checks_of(result)
    assert result.verdict == "fail"
    assert not checks["sends_resolved"]["ok"] and not checks["no_skipped_sends"]["ok"]
    assert (result.counts.pacer_skipped, result.counts.unacked_at_exit) == (3, 2)
    allowed = judge(scenario(6, max_pacer_skipped=3), tmp_path, drained())
    assert checks_of(allowed)["no_skipped_sends"]["ok"]


def test_missing_producer_summary_fails_producers_reported(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    (tmp_path / "producers" / "summary-0.json").unlink()
    result = judge(scenario(6), tmp_path, drained())
    assert not checks_of(result)["producers_reported"]["ok"] and result.verdict == "fail"


def test_run_error_fails_completed(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    result = judge(scenario(6), tmp_path, drained(error="RuntimeError: the Spark query stopped during the run"))
    assert result.checks[0].name == "completed" and not result.checks[0].ok and result.verdict == "fail"


# -- expected_failure ------------------------------------------------------------------------------------------------
def declared_failure_run(tmp_path) -> RunDir:
    """A fault declared KAFKA_DATA_LOSS; the query committed up to offsets {0: 2, 1: 1} and delivered those."""
    events = clean()
    return (RunDir(tmp_path).acks(events)
            .sink_batch([(0, 0, 0), (2, 0, 1), (1, 1, 0)])
            .committed(0, {0: 2, 1: 1})
            .fault({"loss": [], "failure": "KAFKA_DATA_LOSS"}))


def test_expected_failure_passes_only_when_the_query_failed_with_it(tmp_path):
    declared_failure_run(tmp_path)
    result = judge(scenario(6, [DELETE]), tmp_path, failed_with(DATA_LOSS))
    checks = checks_of(result)
    assert result.verdict == "pass", checks
    assert checks["expected_failure"]["ok"] and checks["drained"]["ok"]
    assert result.query.error_class == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
    # what lies beyond the last committed batch was never read: unread, not lost
    assert (result.counts.unread, result.counts.lost, result.counts.delivered_unique) == (3, 0, 3)


def test_expected_failure_fails_when_the_query_did_not_fail(tmp_path):
    declared_failure_run(tmp_path)
    result = judge(scenario(6, [DELETE]), tmp_path, drained())
    checks = checks_of(result)
    assert not checks["expected_failure"]["ok"] and "did not fail" in checks["expected_failure"]["detail"]
    # the query ran on: nothing is excused as unread, the undelivered events are lost
    assert result.counts.unread == 0 and result.counts.lost == 3
    assert not checks["no_loss"]["ok"] and result.verdict == "fail"


def test_expected_failure_fails_when_the_query_failed_with_another_error(tmp_path):
    declared_failure_run(tmp_path)
    other = "[STREAM_FAILED] Query terminated with exception: java.lang.OutOfMemoryError: Java heap space"
    result = judge(scenario(6, [DELETE]), tmp_path, failed_with(other))
    checks = checks_of(result)
    assert not checks["expected_failure"]["ok"] and "STREAM_FAILED" in checks["expected_failure"]["detail"]
    assert result.counts.unread == 0 and result.counts.lost == 3 and not checks["no_loss"]["ok"]
    assert not checks["drained"]["ok"] and result.verdict == "fail"


def test_unread_needs_a_declared_failure(tmp_path):
    """The same undelivered tail, the same failed query, but no fault declared the failure: all of it is lost."""
    RunDir(tmp_path).acks(clean()).sink_batch([(0, 0, 0), (2, 0, 1), (1, 1, 0)]).committed(0, {0: 2, 1: 1})
    result = judge(scenario(6), tmp_path, failed_with(DATA_LOSS))
    assert result.counts.unread == 0 and result.counts.lost == 3
    assert "expected_failure" not in checks_of(result) and result.verdict == "fail"


# -- faults_applied --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["inject_error", "heal_error", "never_healed", "schedule_error"])
def test_faults_applied_fails_on_a_fault_that_did_not_apply(tmp_path, how):
    run = RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    state = drained()
    if how == "inject_error":
        run.fault({}, inject_error="KafkaException: broker unreachable")
    elif how == "heal_error":
        run.fault({}, heal_error="FaultError: could not restart broker 2")
    elif how == "never_healed":
        run.fault({}, heal_s=None)
    else:
        run.fault({})
        state["fault_errors"] = ["fault schedule not done 120s after the traffic; the rest was skipped"]
    result = judge(scenario(6, [DELETE]), tmp_path, state)
    check = checks_of(result)["faults_applied"]
    assert not check["ok"] and result.verdict == "fail"
    assert {"inject_error": "broker unreachable", "heal_error": "could not restart broker 2",
            "never_healed": "never healed", "schedule_error": "schedule not done"}[how] in check["detail"]


def test_faults_applied_passes_when_every_fault_applied_and_healed(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()]).fault({}, n=0).fault({}, n=1)
    result = judge(scenario(6, [{**DELETE, "every_s": 3, "count": 2}]), tmp_path, drained())
    assert checks_of(result)["faults_applied"]["ok"] and result.verdict == "pass"


def test_faults_applied_fails_on_a_planned_injection_that_never_came(tmp_path):
    """delete_records at 2 s, every 3 s, 3 times: injections #0, #1 and #2 due at 2, 5 and 8 s; #2 never came."""
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()]).fault({}, n=0).fault({}, n=1)
    result = judge(scenario(6, [{**DELETE, "every_s": 3, "count": 3}]), tmp_path, drained())
    check = checks_of(result)["faults_applied"]
    assert check["ok"] is False and result.verdict == "fail"
    assert "1 of 3 planned injections never came: delete_records #2 (faults.0, due at 8 s)" in check["detail"]


def test_faults_applied_fails_when_declared_faults_recorded_no_injection(tmp_path):
    """No faults.jsonl at all (the nemesis never ran): a scenario that declares a fault cannot pass without it."""
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    result = judge(scenario(6, [DRIVER_KILL]), tmp_path, drained())
    check = checks_of(result)["faults_applied"]
    assert check["ok"] is False and check["status"] == "fail" and result.verdict == "fail"
    assert "none was recorded" in check["detail"] and "driver_kill #0 (faults.0, due at 2 s)" in check["detail"]
    # without faults declared and none recorded there is nothing to judge
    assert "faults_applied" not in checks_of(judge(scenario(6), tmp_path, drained()))


def test_faults_applied_says_a_run_stopped_early_missed_its_later_injections(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()]).fault({}, n=0)
    reason = "stopped early (soak.fail_fast): live check no_loss"
    result = judge(scenario(6, [{**DELETE, "every_s": 3, "count": 2}]), tmp_path, drained(stopped_early=reason))
    check = checks_of(result)["faults_applied"]
    assert check["ok"] is False and result.verdict == "fail"
    assert "delete_records #1 (faults.0, due at 5 s)" in check["detail"]
    assert f"the traffic was stopped before they were due: {reason}" in check["detail"]


def test_faults_applied_fails_on_an_injection_the_scenario_did_not_plan(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()]).fault({}, n=0).fault({}, n=1)
    check = checks_of(judge(scenario(6, [DELETE]), tmp_path, drained()))["faults_applied"]
    assert check["ok"] is False
    assert "delete_records #1 (faults.0) recorded but not in the scenario's plan" in check["detail"]


# -- query_recovered: a fault that takes the query down allows it a start's time ------------------------------------
def batches_started_at(run: RunDir, *seconds: float) -> None:
    """progress.jsonl: one batch starting at each of these times (seconds after T0)."""
    from datetime import datetime, timezone

    with open(run.root / "progress.jsonl", "w") as f:
        for i, t in enumerate(seconds):
            stamp = datetime.fromtimestamp(T0 + t, timezone.utc).isoformat(timespec="milliseconds")
            f.write(json.dumps({"batchId": i, "timestamp": stamp.replace("+00:00", "Z"), "numInputRows": 0}) + "\n")


def down_run(tmp_path, *batch_s: float) -> RunDir:
    run = RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    run.fault({"query_down": True}, inject_s=2.0, heal_s=2.5, kind="driver_kill")
    batches_started_at(run, 0.0, 1.0, *batch_s)
    return run


def with_start_timeout(s: Scenario, seconds: float) -> Scenario:
    s.spark.start_timeout_s = seconds
    return s


def test_a_query_back_within_a_start_passes_query_recovered(tmp_path):
    down_run(tmp_path, 21.5, 22.5)
    result = judge(with_start_timeout(scenario(6, [DRIVER_KILL]), 30.0), tmp_path, drained())
    check = checks_of(result)["query_recovered"]
    assert check["ok"] and check["status"] == "pass" and "19.5 s after (allowed 30 s)" in check["detail"]
    assert check["value"] == pytest.approx(19.5, abs=0.01) and check["limit"] == 30.0


def test_a_query_back_later_than_a_start_fails_query_recovered(tmp_path):
    down_run(tmp_path, 40.0)
    result = judge(with_start_timeout(scenario(6, [DRIVER_KILL]), 30.0), tmp_path, drained())
    check = checks_of(result)["query_recovered"]
    assert check["ok"] is False and "too late: driver_kill #0 after 38.0 s" in check["detail"]
    assert result.verdict == "fail"


def test_a_query_that_never_ran_a_batch_again_fails_query_recovered(tmp_path):
    down_run(tmp_path)
    check = checks_of(judge(scenario(6, [DRIVER_KILL]), tmp_path, drained()))["query_recovered"]
    assert check["ok"] is False and "driver_kill #0 never" in check["detail"]


def test_query_recovered_is_not_required_after_a_declared_failure_and_absent_without_such_a_fault(tmp_path):
    run = down_run(tmp_path / "a")
    run.fault({"failure": "KAFKA_DATA_LOSS"}, index=1)
    run.committed(0, {0: 3, 1: 3})
    result = judge(scenario(6, [DRIVER_KILL, DELETE]), tmp_path / "a", failed_with(DATA_LOSS))
    check = checks_of(result)["query_recovered"]
    # the scenario declared that the query stops for good: recovering is not asked of it (and cannot be)
    assert check["ok"] is None and check["status"] == "not required"
    RunDir(tmp_path / "b").acks(clean()).sink_batch([e[:3] for e in clean()]).fault({})
    assert "query_recovered" not in checks_of(judge(scenario(6, [DELETE]), tmp_path / "b", drained()))


# -- declared loss and failed sends ----------------------------------------------------------------------------------
def test_expected_loss_is_limited_to_its_generation(tmp_path):
    """A topic deleted at T0+5 s and recreated: its loss range covers offsets 0..2 of partition 0 acked before
    then. The new generation reuses those offsets; its undelivered events are lost, not expected."""
    gen1 = [(0, 0, 0, T0 + 1, ""), (1, 0, 1, T0 + 1, "")]
    gen2 = [(2, 0, 0, T0 + 7, ""), (3, 0, 1, T0 + 7, ""), (4, 0, 2, T0 + 7, "")]
    run = RunDir(tmp_path).acks(gen1 + gen2).sink_batch([(4, 0, 2)])
    run.fault({"loss": [{"partition": 0, "start": 0, "end": 3, "acked_before_ms": (T0 + 5) * 1000.0}],
               "new_generation_ms": (T0 + 5) * 1000.0}, kind="topic_delete")
    result = judge(scenario(5, [{"kind": "topic_delete", "at_s": 2, "recreate": True}]), tmp_path, drained())
    c = result.counts
    assert (c.expected_lost, c.lost, c.delivered_unique) == (2, 2, 1)
    assert result.expected_lost_by_partition == {"0": 2} and result.lost_by_partition == {"0": 2}
    assert not checks_of(result)["no_loss"]["ok"]


def test_failed_sends_pass_only_inside_a_declared_window(tmp_path):
    """A fault allowing failed sends between T0+2 s and T0+5 s (+ the grace for late reports); a send that failed
    before the fault is still a defect."""
    inside = [(6, 0, -1, T0 + 3, "_MSG_TIMED_OUT")]
    before = [(7, 1, -1, T0 + 1, "_MSG_TIMED_OUT")]
    run = RunDir(tmp_path).acks(clean() + inside).sink_batch([e[:3] for e in clean()])
    run.fault({"send_failures": True}, kind="broker")
    broker_down = [{"kind": "broker", "mode": "kill", "at_s": 2, "duration_s": 3}]
    result = judge(scenario(7, broker_down, nodes=3), tmp_path, drained())
    checks = checks_of(result)
    assert checks["acked"]["ok"] and result.counts.failed_expected == 1 and result.verdict == "pass", checks

    (tmp_path / "producers" / "acks-0.csv").unlink()
    run.acks(clean() + inside + before)
    result = judge(scenario(8, broker_down, nodes=3), tmp_path, drained())
    checks = checks_of(result)
    assert (result.counts.failed, result.counts.failed_expected) == (2, 1)
    assert not checks["acked"]["ok"] and result.verdict == "fail"


# -- the batch cap (maxOffsetsPerTrigger) ---------------------------------------------------------------------------
def progress(batches: list[list[int]]) -> str:
    """progress.jsonl for batches reading these rows per partition (Spark's source offsets, as JSON text)."""
    lines, ends = [], [0, 0]
    for i, rows in enumerate(batches):
        start = None if i == 0 else {STREAM: {str(p): o for p, o in enumerate(ends)}}
        ends = [o + n for o, n in zip(ends, rows)]
        source = {"description": "KafkaV2[Subscribe[events]]", "startOffset": start and json.dumps(start),
                  "endOffset": json.dumps({STREAM: {str(p): o for p, o in enumerate(ends)}}), "numInputRows": sum(rows)}
        lines.append(json.dumps({"batchId": i, "numInputRows": sum(rows), "timestamp": "2024-01-01T00:00:00.000Z",
                                 "durationMs": {"triggerExecution": 100}, "sources": [source]}))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("trigger, batches, ok", [
    ("availableNow", [[2, 1], [1, 2], [0, 0]], True),
    ("availableNow", [[2, 2]], True),  # Spark rounds a share below 1 up: up to (partitions read - 1) over
    ("availableNow", [[3, 0], [4, 0]], False),
    ("availableNow", [[3, 2]], False),
    ("processingTime", [[1, 1], [3, 2]], False),
    ("once", [[3, 3]], None),  # Trigger.Once ignores read limits: no such check
])
def test_batches_are_capped_by_max_offsets_per_trigger(tmp_path, trigger, batches, ok):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    (tmp_path / "progress.jsonl").write_text(progress(batches))
    s = Scenario.model_validate({**scenario(6).model_dump(mode="json"),
                                 "spark": {"trigger": {"kind": trigger}, "source_options": {"maxOffsetsPerTrigger": 3}}})
    checks = checks_of(judge(s, tmp_path, drained()))
    if ok is None:
        assert "batch_cap" not in checks
    else:
        assert checks["batch_cap"]["ok"] is ok, checks["batch_cap"]
        assert f"largest {max(map(sum, batches))} rows" in checks["batch_cap"]["detail"]


def test_no_cap_no_batch_cap_check(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    (tmp_path / "progress.jsonl").write_text(progress([[3, 3]]))
    assert "batch_cap" not in checks_of(judge(scenario(6), tmp_path, drained()))


# -- unjudged --------------------------------------------------------------------------------------------------------
def assert_unjudged(result: RunResult, run_dir: Path, *words: str):
    assert result.verdict == "unjudged"
    assert result.unjudged_reason and all(w in result.unjudged_reason for w in words), result.unjudged_reason
    assert (run_dir / "judge-error.txt").exists()
    RunResult.model_validate(json.loads(json.dumps(result.as_dict())))


def test_a_sink_file_listed_in_the_log_but_missing_fails_as_lost_and_is_named(tmp_path):
    """The run directory's own sink is what is judged (a copy missing a file is not read from elsewhere): the
    file's rows are missing, so its events are lost, and result.json names the file."""
    RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()], write_file=False)
    result = judge(scenario(6), tmp_path, drained())
    assert result.verdict == "fail" and result.counts.lost == 6
    assert [u["file"] for u in result.unreadable] == ["sink/part-00000.parquet"]


def test_a_sink_file_with_a_wrong_schema_is_unjudged(tmp_path):
    table = pa.table({"producer": [0], "sequence": [0], "partition": [0], "offset": [0]})
    RunDir(tmp_path).acks(clean()).sink_batch([], table=table)
    assert_unjudged(judge(scenario(6), tmp_path, drained()), tmp_path, "reading the sink", "seq")


def test_a_malformed_sink_row_is_unjudged(tmp_path):
    """A row without its event id (null seq) cannot be accounted for."""
    table = pa.table({"producer": [0, 0], "seq": [0, None], "intended_ms": [1.0, 2.0], "partition": [0, 1],
                      "offset": [0, 0], "broker_ms": [1.0, 1.0], "bytes": [1, 1], "batch_ms": [1.0, 1.0]},
                     schema=SINK_SCHEMA)
    RunDir(tmp_path).acks(clean()).sink_batch([], table=table)
    assert_unjudged(judge(scenario(6), tmp_path, drained()), tmp_path, "reconciling", "seq")


def test_a_malformed_row_of_an_older_runs_csv_history_is_unjudged(tmp_path):
    run = RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    with open(run.root / "producers" / "acks-0.csv", "a") as f:
        f.write("0,6,zero,0,1.0,2.0,3,\n")
    assert_unjudged(judge(scenario(6), tmp_path, drained()), tmp_path, "producers' history", "zero")


def test_a_torn_last_ack_row_is_not_a_problem(tmp_path):
    """A producer killed mid-write leaves a partial last line: dropped, the rest judged."""
    run = RunDir(tmp_path).acks(clean()).sink_batch([e[:3] for e in clean()])
    with open(run.root / "producers" / "acks-0.csv", "a") as f:
        f.write("0,6,0,3,1700000000")
    result = judge(scenario(6), tmp_path, drained())
    assert result.verdict == "pass" and result.counts.produced == 6


def test_an_unjudged_run_still_says_what_went_wrong_with_the_run(tmp_path):
    RunDir(tmp_path).acks(clean()).sink_batch([], table=pa.table({"producer": [0], "sequence": [0],
                                                                  "partition": [0], "offset": [0]}))
    result = judge(scenario(6), tmp_path, drained(error="BackendError: Kafka at 127.0.0.1:1 not ready after 30s"))
    assert_unjudged(result, tmp_path, "reading the sink")
    assert [(c.name, c.ok) for c in result.checks] == [("completed", False)]
    assert "not ready" in result.checks[0].detail


def test_receiver_cache_off_fails_when_a_task_reused_a_receiver():
    from harness.checkers.source import source_checks as _source_checks

    def check(totals, tasks=4):
        (c,) = _source_checks([], {"tasks": tasks, "totals": totals, "lost_ranges": []}, {}, receiver_cache=False)
        return c.name, c.ok

    assert check({"created": 4, "reused": 0}) == ("receivers_not_cached", True)
    assert check({"created": 3, "reused": 1}) == ("receivers_not_cached", False)
    assert _source_checks([], {"tasks": 4, "totals": {"created": 1, "reused": 3}, "lost_ranges": []}, {}) == []
