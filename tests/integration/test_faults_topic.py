"""Kafka topic faults: records aged out (DeleteRecords, retention), the topic deleted and recreated, partitions added.

The faults themselves run against the session's real broker (cheap, no Spark): what they change on the broker and
what they declare is checked with clients of their own. The scenarios run as a user runs them; besides the
verdict, the expected loss is recomputed here from the run's raw records (the broker's log start offsets in
faults.jsonl, the producers' ack CSVs, the Parquet files the sink's own log lists), never from the checker.
Two scenario runs are in the default suite (ageout, ageout-lenient, shortened); the others are slow.
"""
import json
import subprocess
import sys
import threading
import time
import uuid

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.config import Scenario
from harness.console import Console
from harness.context import RunContext
from harness.faults import fault_for
from harness.records.timeline import Timeline

pytestmark = pytest.mark.integration


# -- the run's raw records, read without the checker ----------------------------------------------------------------
def run_scenario(name, out, harness_env, *overrides, timeout=1200):
    argv = [sys.executable, "-m", "harness", "run", name, "--out", str(out)]
    for o in overrides:
        argv += ["--set", o]
    proc = subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=timeout)
    assert (out / "result.json").exists(), proc.stdout[-5000:] + proc.stderr[-5000:]
    result = json.loads((out / "result.json").read_text())
    return result, proc


def assert_passed(result, proc):
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + proc.stdout[-3000:])


def checks(result):
    return {c["name"]: c for c in result["checks"]}


def acked(out) -> pd.DataFrame:
    acks = pd.concat([read_history(f) for f in sorted((out / "producers").glob("acks-*.arrows"))],
                     ignore_index=True)
    return acks[acks["error"] == ""]


def read_history(path) -> pd.DataFrame:
    """One process's ack log (an Arrow IPC stream), read with pyarrow alone."""
    with pa.ipc.open_stream(str(path)) as reader:
        return reader.read_all().to_pandas()


def delivered(out) -> pd.DataFrame:
    """Every row of the files the sink's _spark_metadata log lists (files of failed batches are not there)."""
    paths = []
    meta = out / "sink" / "_spark_metadata"
    logs = [f for f in (meta.iterdir() if meta.is_dir() else []) if f.name.removesuffix(".compact").isdigit()]
    for f in sorted(logs, key=lambda f: int(f.name.removesuffix(".compact"))):
        for line in f.read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry.get("action") == "add":
                paths.append(entry["path"].removeprefix("file://"))
    cols = ["producer", "seq", "partition", "offset"]
    if not paths:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    return pd.concat([pq.read_table(p, columns=cols).to_pandas() for p in paths], ignore_index=True)


def fault_rows(out) -> list[dict]:
    return [json.loads(line) for line in (out / "faults.jsonl").read_text().splitlines() if line.strip()]


def removed_and_undelivered(out, ranges) -> int:
    """Acked events inside the broker's removed ranges [(partition, start, end, acked_before_ms)] that the sink
    never held: the expected loss as the raw records tell it."""
    acks, sink = acked(out), delivered(out)
    mask = pd.Series(False, index=acks.index)
    for p, start, end, before_ms in ranges:
        m = (acks["partition"] == p) & (acks["offset"] >= start) & (acks["offset"] < end)
        if before_ms is not None:
            m &= acks["ack_ms"] < before_ms
        mask |= m
    removed = acks[mask][["producer", "seq"]]
    got = removed.merge(sink[["producer", "seq"]].drop_duplicates(), how="left", indicator=True)
    return int((got["_merge"] == "left_only").sum())


def log_start_ranges(before: dict, after: dict):
    return [(int(p), before.get(p, 0), after[p], None) for p in after if after[p] > before.get(p, 0)]


def no_duplicates_in_sink(out) -> bool:
    sink = delivered(out)
    return not sink.duplicated(["producer", "seq"]).any()


# -- ageout: DeleteRecords ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # `make test-slow`: the broker side is test_retention_fault_ages_records_out_and_restores_the_topic
def test_ageout_fails_with_data_loss_and_the_loss_is_what_the_broker_removed(harness_env, tmp_path):
    out = tmp_path / "ageout"
    result, proc = run_scenario("ageout", out, harness_env, "producers.duration_s=15")
    assert_passed(result, proc)
    c, ch = result["counts"], checks(result)
    assert ch["expected_failure"]["ok"] and result["query"]["final_state"] == "failed"
    assert (result["query"]["error_class"] or "").startswith("KAFKA_DATA_LOSS."), result["query"]["error"][:500]
    assert c["lost"] == 0 and c["duplicates"] == 0 and no_duplicates_in_sink(out)
    inject = next(r for r in fault_rows(out) if r["action"] == "inject")
    ranges = log_start_ranges(inject["detail"]["log_start_before"], inject["detail"]["log_start_after"])
    assert ranges and c["expected_lost"] > 0
    assert c["expected_lost"] == removed_and_undelivered(out, ranges)
    # the query stopped: what it never reached is unread, and all of it is accounted for
    assert c["delivered_unique"] + c["expected_lost"] + c["unread"] == c["acked"] == len(acked(out))


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget
def test_ageout_lenient_keeps_running_and_loses_exactly_what_was_removed(harness_env, tmp_path):
    out = tmp_path / "ageout-lenient"
    result, proc = run_scenario("ageout-lenient", out, harness_env, "producers.duration_s=15")
    assert_passed(result, proc)
    c, ch = result["counts"], checks(result)
    assert "expected_failure" not in ch and result["query"]["final_state"] == "drained" and ch["drained"]["ok"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["unread"] == 0 and no_duplicates_in_sink(out)
    inject = next(r for r in fault_rows(out) if r["action"] == "inject")
    ranges = log_start_ranges(inject["detail"]["log_start_before"], inject["detail"]["log_start_after"])
    assert c["expected_lost"] > 0 and c["expected_lost"] == removed_and_undelivered(out, ranges)
    assert c["delivered_unique"] + c["expected_lost"] == c["acked"] == len(acked(out))
    assert len(delivered(out)) == c["delivered_unique"]


# -- the other scenarios (slow) ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ageout_retention_loses_exactly_what_retention_removed(harness_env, tmp_path):
    out = tmp_path / "ageout-retention"
    result, proc = run_scenario("ageout-retention", out, harness_env)
    assert_passed(result, proc)
    c = result["counts"]
    assert result["query"]["final_state"] == "drained" and c["lost"] == 0 and c["duplicates"] == 0
    rows = fault_rows(out)
    inject = next(r for r in rows if r["action"] == "inject")
    heal = next(r for r in rows if r["action"] == "heal")
    assert inject["detail"]["set"] == {"retention.ms": "1000", "segment.ms": "500"}
    ranges = log_start_ranges(inject["detail"]["log_start_before"], heal["detail"]["log_start_after"])
    assert ranges, "retention removed nothing"
    assert c["expected_lost"] > 0 and c["expected_lost"] == removed_and_undelivered(out, ranges)
    assert c["delivered_unique"] + c["expected_lost"] == c["acked"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["topic-delete", "topic-delete-lenient"])
def test_topic_delete_fails_the_query_and_loses_exactly_the_unread_topic(harness_env, tmp_path, name):
    out = tmp_path / name
    result, proc = run_scenario(name, out, harness_env)
    assert_passed(result, proc)
    c = result["counts"]
    assert checks(result)["expected_failure"]["ok"] and result["query"]["final_state"] == "failed"
    assert "org.apache.kafka.common.errors." in result["query"]["error"]
    assert "KAFKA_DATA_LOSS" not in result["query"]["error"]  # what Spark 4.2 really does for a deleted topic
    assert c["lost"] == 0 and c["duplicates"] == 0 and no_duplicates_in_sink(out)
    inject = next(r for r in fault_rows(out) if r["action"] == "inject")
    d = inject["detail"]
    # the whole topic went, with any send acked without an offset (-1)
    ranges = [(int(p), -1, 2**63 - 1, d["deleted_at"] * 1000.0) for p in d["log_start"]]
    assert c["expected_lost"] > 0 and c["expected_lost"] == removed_and_undelivered(out, ranges)
    assert c["delivered_unique"] + c["expected_lost"] == c["acked"] and c["unread"] == 0
    assert sum(d["end_offsets"].values()) == c["acked"]  # deleted after the traffic: it held everything


@pytest.mark.slow
def test_topic_recreate_keeps_running_into_the_new_topic(harness_env, tmp_path):
    out = tmp_path / "topic-recreate"
    result, proc = run_scenario("topic-recreate", out, harness_env)
    assert_passed(result, proc)
    c = result["counts"]
    assert result["query"]["final_state"] == "drained" and c["lost"] == 0 and c["duplicates"] == 0
    assert c["failed"] == 0 and c["order_violations"] == 0
    d = next(r for r in fault_rows(out) if r["action"] == "inject")["detail"]
    new_gen_ms = d["recreated_at"] * 1000.0
    acks, sink = acked(out), delivered(out)
    new = acks[acks["ack_ms"] >= new_gen_ms]
    assert len(new) > 0 and len(new.merge(sink[["producer", "seq"]], on=["producer", "seq"])) > 0
    # old topic: exact; new topic: only below where the old one ended may be missing (an executor serves batches
    # from what it had fetched of the old topic before reading the new one at the same offsets)
    old_ranges = [(int(p), -1, 2**63 - 1, new_gen_ms) for p in d["log_start"]]
    old_missing = removed_and_undelivered(out, old_ranges)
    assert old_missing > 0
    missing_new = new.merge(sink[["producer", "seq"]], how="left", indicator=True)
    missing_new = missing_new[missing_new["_merge"] == "left_only"]
    bound = {int(p): o for p, o in d["new_generation_may_skip_up_to"].items()}
    assert all(d["end_offsets"][p] <= bound[int(p)] < d["end_offsets"][p] + 1000 for p in d["end_offsets"])
    assert all(o < bound[int(p)] for p, o in zip(missing_new["partition"], missing_new["offset"]))
    assert c["expected_lost"] == old_missing + len(missing_new)
    assert c["delivered_unique"] + c["expected_lost"] == c["acked"]


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "failOnDataLoss"])
def test_add_partitions(harness_env, tmp_path, strict):
    out = tmp_path / "add-partitions"
    extra = ["spark.source_options.failOnDataLoss=true"] if strict else []
    result, proc = run_scenario("add-partitions", out, harness_env, *extra)
    assert_passed(result, proc)
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and no_duplicates_in_sink(out)
    d = next(r for r in fault_rows(out) if r["action"] == "inject")["detail"]
    assert (d["partitions_before"], d["partitions_after"]) == (4, 8)
    fault_acks = read_history(out / "producers" / "acks-fault-0.arrows")
    assert len(fault_acks) == 4 * 5 and set(fault_acks["partition"]) == {4, 5, 6, 7}
    assert (fault_acks["producer"] == 10_000).all() and (fault_acks["error"] == "").all()
    ranges = log_start_ranges({int(p): o for p, o in d["log_start_before"].items()},
                              {int(p): o for p, o in d["log_start_after"].items()})
    ranges += [(int(p), -1, 0, d["deleted_at"] * 1000.0) for p in d["log_start_after"]]  # acked, offset unknown
    assert c["expected_lost"] >= 20 and c["expected_lost"] == removed_and_undelivered(out, ranges)
    assert checks(result)["producers_reported"]["ok"]
    if strict:
        assert checks(result)["expected_failure"]["ok"]
        assert result["query"]["error_class"] == "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO"
    else:
        assert result["query"]["final_state"] == "drained" and c["unread"] == 0
        sink = delivered(out)
        assert set(sink["partition"]) >= {4, 5, 6, 7}  # the producers' own traffic into the new partitions
        assert c["delivered_unique"] + c["expected_lost"] == c["acked"]


# -- the faults alone, against the session's broker ------------------------------------------------------------------
def context(kafka, supervisor, tmp_path, partitions=4, **faults_extra) -> RunContext:
    stream = f"t-{uuid.uuid4().hex[:8]}"
    scenario = Scenario.model_validate({"name": "unit", "stream": {"name": stream, "partitions": partitions},
                                        "producers": {"duration_s": 10, "rate": {"kind": "constant", "eps": 100}},
                                        "spark": {"source_options": {"failOnDataLoss": False}}, **faults_extra})
    kafka.create_stream(stream, partitions, {})
    ctx = RunContext(scenario, tmp_path, supervisor, Timeline(tmp_path / "timeline.jsonl"), kafka, Console(quiet=True))
    ctx.traffic_start = time.time() - 100.0  # traffic over: nothing will write to the topic unless the test does
    return ctx


def produce(kafka, stream, n, partitions=None) -> None:
    p = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for i in range(n):
        p.produce(stream, f"v{i}".encode(), partition=(i % partitions) if partitions else -1)
    assert p.flush(30) == 0


def watermarks(kafka, stream, partitions):
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": uuid.uuid4().hex})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(stream, p), timeout=10) for p in range(partitions)}
    finally:
        c.close()


def options(kind, at_s=100.0, **kw):
    """A fault's options as a scenario file gives them (validated, checked against the scenario)."""
    return Scenario.model_validate({"name": "x", "producers": {"duration_s": 60, "rate": {"kind": "constant",
                                                                                        "eps": 1}},
                                    "spark": {"source_options": {"failOnDataLoss": False}},
                                    "faults": [dict(kind=kind, at_s=at_s, **kw)]}).faults[0]


def test_retention_fault_ages_records_out_and_restores_the_topic(kafka, supervisor, tmp_path):
    ctx = context(kafka, supervisor, tmp_path, partitions=2)
    stream = ctx.stream
    kafka.alter_topic_configs(stream, {"retention.ms": "3600000"})  # a topic-level value heal must put back
    fault = fault_for(options("retention"))
    produce(kafka, stream, 200, 2)
    detail = fault.inject(ctx)
    assert detail["log_start_before"] == {0: 0, 1: 0}
    stop = threading.Event()

    def keep_producing():  # segments roll on append after segment.ms; retention then deletes the closed ones
        while not stop.is_set():
            produce(kafka, stream, 20, 2)
            time.sleep(0.2)

    t = threading.Thread(target=keep_producing)
    t.start()
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not any(lo > 0 for lo, _ in watermarks(kafka, stream, 2).values()):
            time.sleep(0.5)
    finally:
        stop.set()
        t.join()
    healed = fault.heal(ctx)
    lows = {p: lo for p, (lo, _) in watermarks(kafka, stream, 2).items()}
    assert healed["log_start_after"] == lows and any(lo > 0 for lo in lows.values())
    assert [(r.partition, r.start, r.end, r.exact) for r in fault.effect.loss] == [
        (p, 0, lo, True) for p, lo in lows.items() if lo > 0]
    configs = kafka.topic_configs(stream)
    assert configs["retention.ms"] == ("3600000", True)  # the topic's own value is back
    assert configs["segment.ms"][1] is False  # the broker's default again
    time.sleep(3)  # and retention no longer deletes
    assert {p: lo for p, (lo, _) in watermarks(kafka, stream, 2).items()} == lows


def test_topic_delete_and_recreate_on_the_broker(kafka, supervisor, tmp_path):
    ctx = context(kafka, supervisor, tmp_path, partitions=3)
    stream = ctx.stream
    kafka.alter_topic_configs(stream, {"retention.ms": "7200000"})
    produce(kafka, stream, 30, 3)
    fault = fault_for(options("topic_delete", recreate=True))
    detail = fault.inject(ctx)
    assert detail["end_offsets"] == {0: 10, 1: 10, 2: 10}
    assert watermarks(kafka, stream, 3) == {p: (0, 0) for p in range(3)}  # offsets restart at 0
    assert kafka.topic_configs(stream)["retention.ms"] == ("7200000", True)
    e = fault.effect
    assert e.new_generation_ms == pytest.approx(detail["recreated_at"] * 1000.0)
    old_gen = [r for r in e.loss if r.exact]
    assert [(r.partition, r.start, r.acked_before_ms) for r in old_gen] == [(p, 0, e.new_generation_ms)
                                                                            for p in range(3)]
    # the new generation may be skipped up to where the old one ended (no traffic: nothing more), as a bound
    assert [(r.partition, r.start, r.end, r.acked_before_ms) for r in e.loss if not r.exact and r.start == 0] == [
        (p, 0, 11, None) for p in range(3)]
    # sends acked without an offset (-1) are placed by partition and time only, as a bound
    assert [(r.partition, r.start, r.end, r.exact) for r in e.loss if r.start < 0] == [(p, -1, 0, False)
                                                                                      for p in range(3)]
    assert e.failure is None and e.send_failures is False  # failOnDataLoss=false; traffic over


def test_topic_delete_for_good_and_the_drain_sees_no_partitions(kafka, supervisor, tmp_path):
    ctx = context(kafka, supervisor, tmp_path, partitions=2)
    produce(kafka, ctx.stream, 10, 2)
    fault = fault_for(options("topic_delete"))
    fault.inject(ctx)
    assert not kafka.stream_exists(ctx.stream)
    assert kafka.end_offsets(ctx.stream, timeout=5) == {}  # the drain's target: nothing left to read
    assert fault.effect.failure == "org.apache.kafka.common.errors"  # declared whatever failOnDataLoss says
    assert fault.effect.send_failures is False  # deleted after the traffic


def test_add_partitions_writes_acked_events_and_deletes_them(kafka, supervisor, tmp_path):
    ctx = context(kafka, supervisor, tmp_path, partitions=2)
    fault = fault_for(options("add_partitions", add=2, records=3))
    detail = fault.inject(ctx)
    assert len(kafka.end_offsets(ctx.stream)) == 4
    assert watermarks(kafka, ctx.stream, 4)[2] == (3, 3) and watermarks(kafka, ctx.stream, 4)[3] == (3, 3)
    acks = read_history(tmp_path / "producers" / "acks-fault-0.arrows")
    assert list(acks.columns) == ["producer", "seq", "partition", "offset", "intended_ms", "ack_ms",
                                  "latency_us", "error"]
    assert sorted(zip(acks["partition"], acks["offset"])) == [(p, o) for p in (2, 3) for o in range(3)]
    assert (acks["producer"] == 10_000).all() and sorted(acks["seq"]) == list(range(6))
    assert [(r.partition, r.start, r.end, r.exact) for r in fault.effect.loss] == [
        (2, 0, 3, True), (3, 0, 3, True), (2, -1, 0, False), (3, -1, 0, False)]
    assert detail["log_start_after"] == {2: 3, 3: 3}
    from harness.records.history import load_acks  # the checker sees the fault's events as acked history

    assert len(load_acks(tmp_path / "producers")) == 6
    fault_for(options("add_partitions", add=1, records=1)).inject(ctx)  # a second injection: its own log
    assert (tmp_path / "producers" / "acks-fault-1.arrows").exists()
