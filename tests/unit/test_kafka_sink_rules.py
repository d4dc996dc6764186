"""The Kafka sink's pure parts: the duplicate ranges a driver kill declares (from a checkpoint laid out byte for
byte as Spark writes it, as in tests/fixtures/runs/crash-recovery/checkpoint), the checker's split of expected and
unexpected duplicates (bulk pass and incremental path), the output topic's records as sink rows, and the sink
choices refused at load."""
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.sinks import sink_part
from harness.sinks.kafka import output as kafka_output, rules as kafka_rules
from harness.reconcile import Expectations, Reconciler, reconcile
from harness.checkers.events import delivery_checks
from harness.config import ChecksSpec, ConfigError, load_scenario
from harness.files.paths import SCENARIOS_DIR as SCENARIOS
from harness.effects import DupRange, Effect
from harness.records.result import Counts
from harness.spark.reruns import dup_ranges

META = ('{"batchWatermarkMs":0,"batchTimestampMs":1795633791894,"conf":{"spark.sql.shuffle.partitions":"4"}}')


def offsets(checkpoint, batch, ends):
    path = checkpoint / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("v1\n" + META + "\n" + json.dumps({"events": {str(p): o for p, o in ends.items()}},
                                                        separators=(",", ":")))


def commit(checkpoint, batch):
    path = checkpoint / "commits" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('v1\n{"nextBatchWatermarkMs":0}')


def started(checkpoint, starts):
    path = checkpoint / "sources" / "0" / "0"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00v1\n" + json.dumps({"events": {str(p): o for p, o in starts.items()}}).encode())


# -- the duplicate ranges, from the offset and commit logs --------------------------------------------------------
def test_a_batch_logged_and_not_committed_is_the_range_between_its_offsets_and_the_last_commits(tmp_path):
    started(tmp_path, {0: 0, 1: 0})
    offsets(tmp_path, 0, {0: 100, 1: 80})
    commit(tmp_path, 0)
    offsets(tmp_path, 1, {0: 250, 1: 80})
    commit(tmp_path, 1)
    offsets(tmp_path, 2, {0: 400, 1: 130})  # written, then the driver died before commits/2
    assert dup_ranges(tmp_path, "events") == [DupRange(0, 250, 400), DupRange(1, 80, 130)]


def test_no_range_when_every_logged_batch_committed(tmp_path):
    started(tmp_path, {0: 0})
    offsets(tmp_path, 0, {0: 100})
    commit(tmp_path, 0)
    assert dup_ranges(tmp_path, "events") == []
    assert dup_ranges(tmp_path / "absent", "events") == []


def test_the_first_batch_starts_where_the_source_started(tmp_path):
    started(tmp_path, {0: 40, 1: 7})
    offsets(tmp_path, 0, {0: 90, 1: 7})
    assert dup_ranges(tmp_path, "events") == [DupRange(0, 40, 90)]


def test_asynchronous_progress_bounds_the_range_by_the_input_at_the_kill(tmp_path):
    """A batch may run and write before its offsets are logged: everything after the last commit up to what the
    input held at the kill may come again."""
    started(tmp_path, {0: 0, 1: 0})
    offsets(tmp_path, 3, {0: 300, 1: 300})
    commit(tmp_path, 3)
    assert dup_ranges(tmp_path, "events", read_up_to={0: 520, 1: 300}) == [DupRange(0, 300, 520)]


def _kill_context(checkpoint, overrides, end_offsets=None, name="kafka-sink"):
    """What a kill fault reads to declare its ranges: the scenario, the checkpoint, the input's end offsets."""
    from types import SimpleNamespace

    scenario = load_scenario(str(SCENARIOS / f"{name}.toml"), overrides)[0]
    backend = SimpleNamespace(end_offsets=lambda stream: dict(end_offsets or {}))
    return SimpleNamespace(scenario=scenario, checkpoint=checkpoint, backend=backend)


def test_every_kill_declares_the_batch_in_flight_with_the_kafka_sink_and_nothing_with_the_file_sink(tmp_path):
    """driver_kill, executor_kill and worker_kill all declare through rewritable(): with the Kafka sink the
    logged, uncommitted batch (a dead driver's successor re-runs it, a lost executor's tasks are retried); with
    the file sink nothing, since it skips a re-run batch id; in real-time mode up to the input's end."""
    from harness.faults.driver_kill import rewritable

    started(tmp_path, {0: 0, 1: 0})
    offsets(tmp_path, 0, {0: 100, 1: 80})
    commit(tmp_path, 0)
    offsets(tmp_path, 1, {0: 250, 1: 90})
    assert rewritable(_kill_context(tmp_path, [])) == [DupRange(0, 100, 250), DupRange(1, 80, 90)]
    assert rewritable(_kill_context(tmp_path, [], name="crash-recovery")) == []  # the file sink
    real_time = ['spark.trigger={kind="realTime", interval="5 seconds"}', 'spark.master="local[8]"',
                 "stream.partitions=2"]
    assert rewritable(_kill_context(tmp_path, real_time, {0: 400, 1: 90})) == [DupRange(0, 100, 400),
                                                                              DupRange(1, 80, 90)]


def test_the_effect_records_its_ranges_and_leaves_them_out_when_there_are_none():
    effect = Effect(duplicates=[DupRange(2, 5, 9)])
    assert Effect.from_dict(json.loads(json.dumps(effect.as_dict()))) == effect
    assert "duplicates" not in Effect().as_dict()  # recorded runs' faults.jsonl read as they were
    assert Effect.from_dict({"loss": []}).duplicates == []


# -- the checker: expected duplicates apart from unexpected ones --------------------------------------------------
def acks(n, partition=0):
    return pd.DataFrame({"producer": 0, "seq": range(n), "partition": partition, "offset": range(n),
                         "intended_ms": 1000.0, "produce_ms": 1001.0, "ack_ms": 1002.0, "error": ""}).astype(
        {"error": "string"})


def rows(seqs, commit_ms, partition=0):
    return pd.DataFrame({"producer": 0, "seq": list(seqs), "partition": partition, "offset": list(seqs),
                         "intended_ms": 1000.0, "commit_ms": commit_ms})


def history():
    """Events 0..19 delivered once; 5..9 written again by a re-run batch (inside the declared range [5, 10)),
    and 15 once more outside any range."""
    return acks(20), pd.concat([rows(range(20), 1500.0), rows(range(5, 10), 1700.0), rows([15], 1800.0)],
                               ignore_index=True)


def test_duplicates_inside_the_declared_ranges_are_expected_and_one_outside_fails():
    a, s = history()
    rec = reconcile(a, s, Expectations(duplicates=[DupRange(0, 5, 10)]))
    assert (rec.duplicates, rec.expected_duplicates, rec.lost, rec.delivered_unique) == (6, 5, 0, 20)
    check = next(c for c in delivery_checks(rec, ChecksSpec()) if c.name == "no_duplicates")
    assert check.ok is False and "1 unexpected" in check.detail and "5 expected" in check.detail
    allowed_one = next(c for c in delivery_checks(rec, ChecksSpec(max_duplicates=1)) if c.name == "no_duplicates")
    assert allowed_one.ok is True


def test_a_range_of_another_partition_or_none_declares_nothing():
    a, s = history()
    assert reconcile(a, s, Expectations(duplicates=[DupRange(1, 0, 100)])).expected_duplicates == 0
    rec = reconcile(a, s)
    check = next(c for c in delivery_checks(rec, ChecksSpec()) if c.name == "no_duplicates")
    assert rec.expected_duplicates == 0 and check.ok is False and check.detail == \
        "6 duplicate deliveries (allowed 0)"  # judged and said exactly as before without declared duplicates


def test_every_copy_inside_a_range_is_expected_and_only_the_first_counts_as_delivered():
    a = acks(4)
    s = pd.concat([rows(range(4), 1500.0), rows([1, 2], 1600.0), rows([1, 2], 1700.0)], ignore_index=True)
    rec = reconcile(a, s, Expectations(duplicates=[DupRange(0, 0, 4)]))
    assert (rec.duplicates, rec.expected_duplicates, rec.delivered_unique) == (4, 4, 4)


def test_the_incremental_path_splits_them_the_same_way():
    """A checker reconciling as its history grows (a soak's) counts the same split as the one bulk pass."""
    a, s = history()
    expected = Expectations(duplicates=[DupRange(0, 5, 10)])
    with Reconciler(threads=1) as checker:
        checker.store.add_acks_frame(a)
        checker.store.add_sink_frame(s.iloc[:20])
        first = checker.reconcile(expected)
        assert (first.duplicates, first.expected_duplicates) == (0, 0)
        checker.store.add_sink_frame(s.iloc[20:23])
        checker.store.add_sink_frame(s.iloc[23:])
        rec = checker.reconcile(expected)
    assert (rec.duplicates, rec.expected_duplicates) == (6, 5)


def test_result_counts_name_expected_duplicates_only_when_declared():
    assert "expected_duplicates" not in Counts().model_dump(mode="json")
    assert Counts(expected_duplicates=0).model_dump(mode="json")["expected_duplicates"] == 0


# -- the output topic's records as sink rows ---------------------------------------------------------------------
def test_records_become_rows_with_their_input_position_output_position_and_append_time(tmp_path):
    values = [json.dumps({"producer": 1, "seq": s, "intended_ms": 1.7956e12 + s, "partition": 3, "offset": 40 + s,
                          "event_time": "2026-11-26T10:00:00.000Z"}).encode() for s in range(3)]
    table = kafka_output._parse({"value": values, "out_partition": [0, 1, 0], "out_offset": [7, 2, 8],
                             "commit_ms": [1.7956e12 + 900, 1.7956e12 + 850, 1.7956e12 + 905]}, None)
    later = kafka_output._parse({"value": [values[0]], "out_partition": [2], "out_offset": [0], "commit_ms": [1.0]},
                            table.schema)
    assert later.schema == table.schema  # every chunk written with the first one's types
    pq.write_table(table, tmp_path / kafka_output.OUTPUT_FILE)
    frame = kafka_output.read_output(tmp_path)
    assert frame["seq"].tolist() == [1, 0, 2]  # in append-time order
    assert frame[["partition", "offset", "out_partition", "out_offset"]].values.tolist() == \
        [[3, 41, 1, 2], [3, 40, 0, 7], [3, 42, 0, 8]]
    assert frame["commit_ms"].tolist() == [1.7956e12 + 850, 1.7956e12 + 900, 1.7956e12 + 905]


def test_a_missing_output_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="kafka-output.parquet is missing"):
        kafka_output.read_output(tmp_path)


# -- the sink chosen at load -------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario, overrides, words", [
    ("eh-steady", ["spark.sink=kafka"], "backend.kind = 'eventhubs' has none"),
    ("steady", ["spark.output_mode=update"], "file sink (spark.sink = \"parquet\") writes append mode only"),
    ("kafka-sink", ["spark.output_mode=update"], "passthrough does not aggregate"),
    ("steady", ["spark.sink_options.asyncProgressTrackingEnabled=true"], "is for the Kafka sink"),
    ("kafka-sink", ["spark.sink_options.topic=x"], "spark.sink_options.topic: set by the harness"),
    ("kafka-sink", ["spark.sink_options.asyncProgressTrackingEnabld=true"],
     "did you mean 'asyncProgressTrackingEnabled'"),
    ("async-progress", ['spark.trigger={kind="availableNow"}', "faults=[]"],
     "refuses asynchronous progress tracking with trigger kind 'availableNow'"),
    ("kafka-sink", ["spark.sink_options.asyncProgressTrackingCheckpointIntervalMs=100"],
     "only with asyncProgressTrackingEnabled = true"),
    ("async-progress", ["spark.query=dedup", "faults=[]"], "refuses asynchronous progress tracking for a stateful"),
    ("soak", ["spark.sink=kafka"], "the soak's live checks read the file sink as it grows"),
])
def test_sink_choices_that_cannot_run_are_refused_at_load_naming_the_field(scenario, overrides, words):
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario, overrides)
    assert words in str(err.value) and f"{scenario}.toml" in str(err.value)


AGGREGATING = """
def oracle(acks, sink, params):
    return {"ok": True, "detail": "judged by the user"}


def query(events, params):
    return events.groupBy("partition").count()


query.aggregates = True
query.oracle = "agg_job:oracle"
"""


def test_update_mode_is_for_an_aggregating_query_with_an_oracle_that_judges_it(tmp_path):
    (tmp_path / "agg_job.py").write_text(AGGREGATING)
    text = (SCENARIOS / "kafka-sink.toml").read_text().replace('sink = "kafka"', 'sink = "kafka"\n'
                                                                 'output_mode = "update"\nquery = "agg_job:query"')
    (tmp_path / "s.toml").write_text(text)
    scenario, _, _ = load_scenario(str(tmp_path / "s.toml"))
    assert scenario.spark.output_mode == "update"
    with pytest.raises(ConfigError, match="window_counts, judges append mode"):
        load_scenario("kafka-sink", ["spark.output_mode=update", "spark.query=windowed_count"])


def test_the_sink_job_names_the_output_topic_and_passes_options_as_strings():
    scenario, _, _ = load_scenario("async-progress")
    part = sink_part("kafka").job_part(scenario)
    assert part["sink_topic"] == "events-out"
    assert part["sink_options"] == {"asyncProgressTrackingEnabled": "true",
                                    "asyncProgressTrackingCheckpointIntervalMs": "5000"}
    assert sink_part("parquet").job_part(load_scenario("steady")[0]) == {}


def test_real_time_mode_tracks_progress_asynchronously_unless_told_not_to():
    assert kafka_rules.async_progress({}, "realTime") and not kafka_rules.async_progress({}, "processingTime")
    assert not kafka_rules.async_progress({"asyncProgressTrackingEnabled": "false"}, "realTime")
    assert kafka_rules.async_progress({"asyncprogresstrackingenabled": True})
