"""The harness's instrumentation of the query process, item by item (harness.bench.kafka_query measures each one's
cost): what the job file and the driver's conf hold with each item off, the bench's run order, and the progress
recorder's per-batch work on a hand-written progress record (no JVM)."""
from __future__ import annotations

import json

import pytest

from harness.bench.kafka_query import items_off, schedule
from harness.spark.process import SparkQueryProcess
from harness.spark.query import instrumentation_off, progress_recorder
from harness.supervisor import Supervisor


def job_of(tmp_path, **kw) -> dict:
    q = SparkQueryProcess(tmp_path / "run", Supervisor("t"), source=None, master="local[1]", conf={},
                          trigger={"kind": "availableNow"}, **kw)
    return q.job


def test_each_item_can_be_turned_off_alone(tmp_path):
    on = job_of(tmp_path)
    assert on["instrumentation_off"] == [] and on["conf"]["spark.eventLog.enabled"] == "true"
    # the event log is kept to what harness/analysis/spark_tasks.py reads, uncompressed (read as text)
    assert on["conf"]["spark.eventLog.includeTaskMetricsAccumulators"] == "false"
    assert on["conf"]["spark.eventLog.compress"] == "false"
    no_log = job_of(tmp_path, instrumentation_off=("event_log",))
    assert no_log["instrumentation_off"] == ["event_log"]
    assert not any(k.startswith("spark.eventLog.") for k in no_log["conf"])
    no_listener = job_of(tmp_path, instrumentation_off=("listener",))
    assert no_listener["conf"]["spark.eventLog.enabled"] == "true"
    assert instrumentation_off(no_listener) == {"listener"}
    assert job_of(tmp_path, instrumentation=False)["instrumentation_off"] == ["event_log", "listener", "polling"]


def test_an_unknown_item_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown instrumentation.*'ui'"):
        job_of(tmp_path, instrumentation_off=("ui",))


def test_an_older_job_file_with_instrumentation_false_turns_everything_off():
    assert instrumentation_off({"instrumentation": False}) == {"listener", "event_log", "polling"}
    assert instrumentation_off({}) == set()


def test_the_bench_runs_every_mode_each_round_every_other_round_reversed():
    assert schedule(2) == ["on", "off", "no-listener", "no-event_log", "no-polling",
                           "no-polling", "no-event_log", "no-listener", "off", "on"]
    assert items_off("on") == () and items_off("no-polling") == ("polling",)
    assert items_off("off") == ("listener", "event_log", "polling")


def test_the_recorder_writes_each_progress_once_and_keeps_the_partitions_ends(tmp_path):
    path = tmp_path / "progress.jsonl"
    rec = progress_recorder(path, {"t": {"0": 5}})
    # the JSON text Spark's StreamingQueryProgress.json() gives: Kafka's offsets as objects
    first = {"batchId": 3, "numInputRows": 10,
             "sources": [{"startOffset": {"t": {"0": 5, "1": 0}}, "endOffset": {"t": {"0": 9, "1": 6}}}]}
    rec.progress(json.dumps(first, indent=1))  # a pretty one: one line per record all the same
    rec.progress(json.dumps({"batchId": 4, "numInputRows": 0, "sources": [{"endOffset": '{"t":{"1":7}}'}]}))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["batchId"] for line in lines] == [3, 4]
    assert rec.ends == {"t": {"0": 9, "1": 7}} and rec.last_batch == 4
    assert rec.caught_up({"batchId": 4}) and not rec.caught_up({"batchId": 5, "numInputRows": 3})
