"""The topic faults' options and checks (bad input named before anything starts), and the verdict on crafted run
directories holding exactly what these faults declare: a scenario that expects a failure fails when the query
did not fail, a fault's own events do not upset the producers' bookkeeping, and a recreated topic's two
generations are judged apart."""
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from harness.config import ConfigError, Scenario, load_scenario
from harness.effects import FAULT_PRODUCER_BASE
from harness.runner import measure_and_judge as judge
from harness.records.history import ACK_COLUMNS

T0 = 1_700_000_000.0


def scenario(faults=(), fail_on_data_loss=False, client=None, events=6, partitions=2) -> Scenario:
    return Scenario.model_validate({
        "name": "crafted", "stream": {"name": "events", "partitions": partitions},
        "producers": {"duration_s": 10, "rate": {"kind": "constant", "eps": events / 10}, "client": client or {}},
        "spark": {"source_options": {"failOnDataLoss": fail_on_data_loss}}, "faults": list(faults),
        "checks": {"sustained_not_required": CRAFTED}})


CRAFTED = "a crafted history of a few events: no traffic over time to keep up with"


def refused(**kw) -> str:
    with pytest.raises(ValidationError) as err:
        scenario(**kw)
    return str(err.value)


# -- options and checks ------------------------------------------------------------------------------------------
def test_add_partitions_needs_exactly_one_target():
    assert "exactly one of `to`" in refused(faults=[{"kind": "add_partitions", "at_s": 1}])
    assert "exactly one of `to`" in refused(faults=[{"kind": "add_partitions", "at_s": 1, "to": 4, "add": 1}])
    assert "repeat with `add`" in refused(faults=[{"kind": "add_partitions", "at_s": 1, "to": 4, "every_s": 2,
                                                   "count": 2}])
    assert "must exceed the stream's 2 partitions" in refused(faults=[{"kind": "add_partitions", "at_s": 1, "to": 2}])
    assert scenario(faults=[{"kind": "add_partitions", "at_s": 1, "add": 1, "every_s": 2, "count": 2}]).faults


def test_retention_is_refused_under_fail_on_data_loss_true():
    assert "failOnDataLoss = false" in refused(faults=[{"kind": "retention", "at_s": 1}], fail_on_data_loss=True)
    assert "greater than or equal to 1048576" in refused(faults=[{"kind": "retention", "at_s": 1,
                                                                  "segment_bytes": 1000}])
    f = scenario(faults=[{"kind": "retention", "window": [1, 3]}]).faults[0]
    assert (f.retention_ms, f.segment_ms, f.segment_bytes) == (1000, 500, None)


def test_topic_delete_during_traffic_needs_a_short_send_timeout():
    words = refused(faults=[{"kind": "topic_delete", "at_s": 5}])
    assert "message.timeout.ms" in words and "at_s >= 10" in words
    assert scenario(faults=[{"kind": "topic_delete", "at_s": 5}], client={"message.timeout.ms": 5000}).faults
    assert scenario(faults=[{"kind": "topic_delete", "at_s": 12}]).faults  # after the traffic
    assert scenario(faults=[{"kind": "topic_delete", "at_s": 5, "recreate": True}]).faults


def test_shipped_topic_scenarios_load_and_refuse_a_bad_override():
    for name in ("ageout", "ageout-lenient", "ageout-retention", "topic-delete", "topic-delete-lenient",
                 "topic-recreate", "add-partitions"):
        s, _, _ = load_scenario(name)
        assert s.faults and s.description
    with pytest.raises(ConfigError) as err:
        load_scenario("ageout-retention", ["spark.source_options.failOnDataLoss=true"])
    assert "faults.0 (retention)" in str(err.value)


# -- the verdict on what these faults declare -----------------------------------------------------------------------
SINK_SCHEMA = pa.schema([("producer", pa.int32()), ("seq", pa.int64()), ("intended_ms", pa.float64()),
                         ("partition", pa.int32()), ("offset", pa.int64()), ("broker_ms", pa.float64()),
                         ("bytes", pa.int32()), ("batch_ms", pa.float64())])


def write_run(root: Path, acks: dict[str, list], sink: list, effect: dict, query: dict, sent: int | None = None,
              committed: dict | None = None) -> dict:
    """acks: file name -> [(producer, seq, partition, offset, ack_s)]; sink: [(producer, seq, partition, offset)]."""
    (root / "producers").mkdir(parents=True)
    for name, rows in acks.items():
        lines = [",".join(ACK_COLUMNS)] + [f"{p},{s},{part},{off},{(T0 + s * 0.01) * 1000:.3f},{ack * 1000:.3f},2000,"
                                           for p, s, part, off, ack in rows]
        (root / "producers" / name).write_text("\n".join(lines) + "\n")
    process_rows = [r for r in acks.get("acks-0.csv", [])]
    (root / "producers" / "job.json").write_text(json.dumps({"processes": 1, "start_at": T0}))
    (root / "producers" / "summary-0.json").write_text(json.dumps({
        "producer": 0, "sent": len(process_rows) if sent is None else sent, "acked": len(process_rows), "failed": 0,
        "errors": {}, "unacked_at_exit": 0, "pacer_skipped": 0, "partition_events": {}, "partition_bytes": {},
        "delivery_hist": None}))
    meta = root / "sink" / "_spark_metadata"
    meta.mkdir(parents=True)
    table = pa.table({"producer": [r[0] for r in sink], "seq": [r[1] for r in sink],
                      "intended_ms": [(T0 + r[1] * 0.01) * 1000 for r in sink], "partition": [r[2] for r in sink],
                      "offset": [r[3] for r in sink], "broker_ms": [T0 * 1000] * len(sink), "bytes": [1] * len(sink),
                      "batch_ms": [T0 * 1000] * len(sink)}, schema=SINK_SCHEMA)
    pq.write_table(table, root / "sink" / "part-0.parquet")
    entry = {"path": (root / "sink" / "part-0.parquet").as_uri(), "size": 1, "isDir": False, "modificationTime": 1,
             "blockReplication": 1, "blockSize": 1, "action": "add"}
    (meta / "0").write_text("v1\n" + json.dumps(entry) + "\n")
    if committed is not None:
        for d in ("offsets", "commits"):
            (root / "checkpoint" / d).mkdir(parents=True)
        (root / "checkpoint" / "offsets" / "0").write_text(
            'v1\n{}\n' + json.dumps({"events": {str(p): o for p, o in committed.items()}}) + "\n")
        (root / "checkpoint" / "commits" / "0").write_text("v1\n{}\n")
    with open(root / "faults.jsonl", "w") as f:
        for action, at in (("inject", 2.0), ("heal", 5.0)):
            f.write(json.dumps({"t": T0 + at, "action": action, "kind": "topic_delete", "fault": 0, "n": 0,
                                "scheduled_s": at, "detail": {}, "effect": effect}) + "\n")
    state = {"drained": query["state"] == "drained", "drain_detail": "", "error": None, "elapsed_s": 20.0,
             "ended_at": T0 + 30, "query": query}
    return state


DELETED = {"loss": [{"partition": p, "start": 0, "end": 2**63 - 1, "acked_before_ms": (T0 + 2) * 1000}
                    for p in (0, 1)], "failure": "org.apache.kafka.common.errors"}
UNKNOWN_TOPIC = ("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host "
                 "this topic-partition.")
RECORDED = [{"kind": "topic_delete", "at_s": 2, "recreate": True}]  # [[faults]]: the one injection write_run records
SIX = [(0, s, s % 2, s // 2, T0 + 1) for s in range(6)]
FIRST_FOUR = [(0, s, s % 2, s // 2) for s in range(4)]


def checks_of(result) -> dict:
    return {c.name: c for c in result.checks}


def test_topic_delete_passes_when_the_query_failed_with_a_kafka_client_error(tmp_path):
    state = write_run(tmp_path, {"acks-0.csv": SIX}, FIRST_FOUR, DELETED,
                      {"state": "failed", "error": UNKNOWN_TOPIC, "exit_code": 4}, committed={0: 2, 1: 2})
    result = judge(scenario(RECORDED, fail_on_data_loss=True), tmp_path, state)
    assert result.verdict == "pass", [c for c in result.checks if not c.ok]
    assert (result.counts.expected_lost, result.counts.lost, result.counts.unread) == (2, 0, 0)


def test_a_scenario_expecting_a_failure_fails_when_the_query_did_not_fail(tmp_path):
    """The same run, but the query drained instead of failing: the declared failure did not happen."""
    state = write_run(tmp_path, {"acks-0.csv": SIX}, FIRST_FOUR, DELETED, {"state": "drained", "exit_code": 0})
    result = judge(scenario(RECORDED, fail_on_data_loss=True), tmp_path, state)
    check = checks_of(result)["expected_failure"]
    assert not check.ok and "did not fail" in check.detail and result.verdict == "fail"


def test_a_scenario_expecting_data_loss_fails_on_another_error(tmp_path):
    effect = dict(DELETED, failure="KAFKA_DATA_LOSS")
    state = write_run(tmp_path, {"acks-0.csv": SIX}, FIRST_FOUR, effect,
                      {"state": "failed", "error": UNKNOWN_TOPIC, "exit_code": 4}, committed={0: 2, 1: 2})
    result = judge(scenario(RECORDED, fail_on_data_loss=True), tmp_path, state)
    assert not checks_of(result)["expected_failure"].ok and result.verdict == "fail"


def test_a_faults_own_events_are_history_but_not_the_producers_sends(tmp_path):
    """add_partitions writes events under FAULT_PRODUCER_BASE + k and deletes them: they count as acked and as
    expected loss, and producers_reported still compares the processes' sends with their own rows only."""
    own = [(FAULT_PRODUCER_BASE, s, 2, s, T0 + 2) for s in range(3)]
    effect = {"loss": [{"partition": 2, "start": 0, "end": 3}]}
    state = write_run(tmp_path, {"acks-0.csv": SIX, "acks-fault-0.csv": own}, [r[:4] for r in SIX], effect,
                      {"state": "drained", "exit_code": 0})
    result = judge(scenario(RECORDED, partitions=3), tmp_path, state)
    assert result.verdict == "pass", [c for c in result.checks if not c.ok]
    assert (result.counts.acked, result.counts.expected_lost, result.counts.lost) == (9, 3, 0)
    assert "+3 written by faults" in checks_of(result)["producers_reported"].detail


def test_producers_reported_still_fails_when_a_process_row_is_missing(tmp_path):
    own = [(FAULT_PRODUCER_BASE, s, 2, s, T0 + 2) for s in range(3)]
    state = write_run(tmp_path, {"acks-0.csv": SIX, "acks-fault-0.csv": own}, [r[:4] for r in SIX],
                      {"loss": [{"partition": 2, "start": 0, "end": 3}]}, {"state": "drained", "exit_code": 0},
                      sent=9)  # the process claims the fault's 3 events as its own sends: it did not log them
    result = judge(scenario(RECORDED, partitions=3), tmp_path, state)
    assert not checks_of(result)["producers_reported"].ok and result.verdict == "fail"


def test_a_recreated_topic_is_judged_per_generation(tmp_path):
    """Old generation (acked before the recreation) offsets 0..2 per partition; new generation offsets restart at 0.
    The query had planned up to offset 2: new-generation events below it may be skipped (a declared bound), one
    above it may not."""
    recreated = T0 + 5
    old = [(0, s, s % 2, s // 2, T0 + 1) for s in range(6)]  # offsets 0, 1, 2 on partitions 0 and 1
    new = [(0, 6 + s, s % 2, s // 2, recreated + 1) for s in range(6)]  # offsets 0, 1, 2 again
    effect = {"loss": [{"partition": p, "start": 0, "end": 2**63 - 1, "acked_before_ms": recreated * 1000}
                       for p in (0, 1)] + [{"partition": p, "start": 0, "end": 2, "exact": False} for p in (0, 1)],
              "new_generation_ms": recreated * 1000}
    sink = [r[:4] for r in old[:2]] + [r[:4] for r in new[4:]]  # old: 2 read; new: skipped offsets 0 and 1
    state = write_run(tmp_path, {"acks-0.csv": old + new}, sink, effect, {"state": "drained", "exit_code": 0})
    result = judge(scenario(RECORDED, events=12), tmp_path, state)
    assert result.verdict == "pass", [c for c in result.checks if not c.ok]
    assert (result.counts.expected_lost, result.counts.lost, result.counts.order_violations) == (8, 0, 0)
    # a new-generation event at or above the planned offset that never arrives is lost
    other = tmp_path / "other"
    state = write_run(other, {"acks-0.csv": old + new}, sink[:-1], effect, {"state": "drained", "exit_code": 0})
    result = judge(scenario(RECORDED, events=12), other, state)
    assert result.counts.lost == 1 and result.verdict == "fail"


def test_an_event_acked_without_its_offset_is_placed_by_partition_and_time_only(tmp_path):
    """librdkafka may ack a retried send with no offset (-1 in the ack log). A `[-1, 0)` range excuses such an
    event on its partition if it was acked in time; later, or on another partition, it is lost."""
    events = [(0, 0, 0, 0, T0 + 1), (0, 1, 0, -1, T0 + 2), (0, 2, 1, -1, T0 + 2), (0, 3, 0, -1, T0 + 9)]
    effect = {"loss": [{"partition": 0, "start": -1, "end": 0, "acked_before_ms": (T0 + 5) * 1000, "exact": False}]}
    state = write_run(tmp_path, {"acks-0.csv": events}, [(0, 0, 0, 0)], effect, {"state": "drained", "exit_code": 0})
    result = judge(scenario(RECORDED, events=4), tmp_path, state)
    assert (result.counts.expected_lost, result.counts.lost) == (1, 2)
    assert result.lost_by_partition == {"0": 1, "1": 1}
