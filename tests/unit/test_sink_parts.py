"""The sink parts (harness.sinks): found by the `spark.sink` value, what each declares (duplicates after a re-run,
latency, output modes, real-time mode, a kill after the write), what each refuses at load, and what each does for
the run and the driver, from small stand-ins for the scenario, the backend and Spark's writer. Expected values are
written out here, not computed by the code under test."""
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.config import SparkSpec
from harness.effects import DupRange
from harness.sinks import KINDS, refusal, sink_part

ROOT = Path(__file__).resolve().parents[2]


def scenario(sink="kafka", options=None, partitions=None, backend="kafka", soak=None, trigger="processingTime",
             output_mode="append", query="passthrough"):
    spark = SimpleNamespace(sink=sink, sink_options=dict(options or {}), sink_partitions=partitions, query=query,
                            trigger=SimpleNamespace(kind=trigger), output_mode=output_mode)
    return SimpleNamespace(spark=spark, backend=SimpleNamespace(kind=backend), soak=soak,
                           stream=SimpleNamespace(name="events", partitions=4))


def query(name="passthrough", foreach_batch=None, oracle="events", **attributes):
    return SimpleNamespace(name=name, foreach_batch=foreach_batch, oracle=oracle,
                           function=SimpleNamespace(**attributes))


# -- the lookup ----------------------------------------------------------------------------------------------------
def test_the_sinks_are_the_packages_the_default_first():
    assert KINDS == ("parquet", "kafka")
    assert [sink_part(kind).kind for kind in KINDS] == ["parquet", "kafka"]


def test_an_unknown_sink_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError) as err:
        sink_part("delta")
    assert str(err.value) == "unknown sink 'delta' (spark.sink); known: parquet, kafka"


def test_the_scenario_model_takes_every_sink_and_describes_each_as_before():
    field = SparkSpec.model_json_schema()["properties"]["sink"]
    assert field["enum"] == ["parquet", "kafka"] and field["default"] == "parquet"
    assert field["description"] == (
        "parquet: the harness's file sink (exactly-once); kafka: Spark's Kafka sink into the output topic "
        "<stream.name>-out the backend creates (at-least-once; Kafka backends only: harness.sinks)")


def test_the_parts_import_without_pandas_or_arrow_as_the_spark_driver_needs():
    code = ("import sys; from harness.sinks import sink_part; [sink_part(k) for k in ('parquet', 'kafka')]; "
            "print([m for m in ('pandas', 'pyarrow', 'numpy', 'pyspark') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_module_outside_the_sinks_branches_on_the_sink_name():
    """A sink is asked what it does (its part), never tested by name: adding one is adding a package."""
    pattern = re.compile(r"""sink\s*[!=]=\s*["']|\[["']sink["']\]\s*[!=]=|\.sink\s+(not\s+)?in\s""")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "harness").rglob("*.py"))
             if (ROOT / "harness" / "sinks") not in path.parents
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


# -- what each part declares ---------------------------------------------------------------------------------------
def test_the_file_sink_is_exactly_once_append_only_and_ends_latency_at_its_batch_commit():
    part = sink_part("parquet")
    assert (part.output_modes, part.real_time, part.kill_after_write, part.reads_output_after_run) == \
        (("append",), False, False, False)
    assert part.latency_end == "the commit time of the batch that wrote the row (its _spark_metadata log file's)"
    assert part.rewritable(SimpleNamespace()) == []  # a re-run batch id is skipped: nothing to declare


def test_the_kafka_sink_is_at_least_once_and_ends_latency_at_each_records_append_time():
    part = sink_part("kafka")
    assert (part.output_modes, part.real_time, part.kill_after_write, part.reads_output_after_run) == \
        (("append", "update"), True, True, True)
    events = pd.DataFrame({"producer": [0], "seq": [1], "partition": [2], "offset": [3], "commit_ms": [4.0]})
    assert part.latency_source(events) == "measured: each record's broker append time in the output topic"
    assert part.latency_source(pd.DataFrame({"window": [1], "commit_ms": [4.0]})) == \
        "not measured: the Kafka sink's records carry no producer, seq, partition, offset each"


def _checkpoint(path: Path, committed_to: dict, logged_to: dict) -> Path:
    """Batch 0 committed, batch 1 logged and not committed, from offset 0 (Spark's layout, as in
    test_kafka_sink_rules)."""
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1795633791894,"conf":{}}'
    (path / "sources" / "0").mkdir(parents=True)
    (path / "sources" / "0" / "0").write_bytes(b"\x00v1\n" + json.dumps({"events": {"0": 0, "1": 0}}).encode())
    (path / "offsets").mkdir()
    (path / "commits").mkdir()
    for batch, ends in ((0, committed_to), (1, logged_to)):
        (path / "offsets" / str(batch)).write_text(
            "v1\n" + meta + "\n" + json.dumps({"events": {str(p): o for p, o in ends.items()}}))
    (path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    return path


@pytest.mark.parametrize("options, trigger, expected", [
    ({}, "processingTime", [DupRange(0, 10, 30), DupRange(1, 5, 6)]),  # the batch logged and not committed
    # asynchronously committed progress, or real-time mode: up to what the input held at the kill
    ({"asyncProgressTrackingEnabled": True}, "processingTime", [DupRange(0, 10, 50), DupRange(1, 5, 9)]),
    ({}, "realTime", [DupRange(0, 10, 50), DupRange(1, 5, 9)]),
])
def test_the_kafka_sink_declares_the_ranges_a_rerun_batch_writes_again(tmp_path, options, trigger, expected):
    checkpoint = _checkpoint(tmp_path, {0: 10, 1: 5}, {0: 30, 1: 6})
    ctx = SimpleNamespace(scenario=scenario(options=options, trigger=trigger), checkpoint=checkpoint,
                          backend=SimpleNamespace(end_offsets=lambda stream: {0: 50, 1: 9}))
    assert sink_part("kafka").rewritable(ctx) == expected


# -- what each part refuses at load --------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, q, expected", [
    ({"backend": "eventhubs"}, query(),
     "spark.sink = \"kafka\" writes to an output topic the backend creates; backend.kind = 'eventhubs' has none "
     "(allowed with: kafka); use sink = \"parquet\" or a query's own foreachBatch sink"),
    ({"soak": object()}, query(),
     "spark.sink = \"kafka\" with [soak]: the soak's live checks read the file sink as it grows, and the Kafka "
     "sink's output topic is read once, after the run; use sink = \"parquet\" for a soak"),
    ({}, query(foreach_batch=print),
     "spark.sink = \"kafka\" but passthrough writes its own sink (foreach_batch, harness.queries); leave spark.sink "
     "out (or \"parquet\") for a query that owns its sink"),
    ({"options": {"Topic": "x"}}, query(),
     "spark.sink_options.Topic: set by the harness (the output topic, its broker, the checkpoint); leave it out"),
    ({"options": {"kafka.value.serializer": "x"}}, query(),
     "spark.sink_options.kafka.value.serializer: Spark's Kafka sink refuses it (it always writes bytes)"),
    ({"options": {"asyncProgressTrackingEnabld": "true"}}, query(),
     "spark.sink_options.asyncProgressTrackingEnabld: unknown Kafka sink option; did you mean "
     "'asyncProgressTrackingEnabled' or 'asyncProgressTrackingCheckpointIntervalMs'? allowed: kafka.<Kafka producer "
     "setting>, asyncProgressTrackingEnabled, asyncProgressTrackingCheckpointIntervalMs"),
    ({"options": {"asyncProgressTrackingEnabled": "yes"}}, query(),
     "spark.sink_options.asyncProgressTrackingEnabled: true or false, got 'yes'"),
    ({"options": {"asyncProgressTrackingCheckpointIntervalMs": 100}}, query(),
     "spark.sink_options.asyncProgressTrackingCheckpointIntervalMs: only with asyncProgressTrackingEnabled = true "
     "(it is the interval of the asynchronous progress commits)"),
    ({"options": {"asyncProgressTrackingEnabled": True}, "trigger": "availableNow"}, query(),
     "spark.sink_options.asyncProgressTrackingEnabled: Spark refuses asynchronous progress tracking with trigger "
     "kind 'availableNow' (a query that runs to its end and stops has no progress to commit in the background); "
     "use processingTime"),
    ({"options": {"asyncProgressTrackingEnabled": True}, "query": "dedup"}, query("dedup"),
     "spark.sink_options.asyncProgressTrackingEnabled: Spark refuses asynchronous progress tracking for a stateful "
     "query (\"Stateful streaming queries does not support async progress tracking\"); dedup keeps state"),
])
def test_what_the_kafka_sink_refuses(kwargs, q, expected):
    assert refusal(scenario(**kwargs), q) == expected


def test_the_kafka_sink_takes_its_options_and_update_mode_for_an_aggregating_query():
    good = {"kafka.linger.ms": 5, "asyncProgressTrackingEnabled": True,
            "asyncProgressTrackingCheckpointIntervalMs": 5000}
    assert refusal(scenario(options=good), query()) is None
    assert refusal(scenario(output_mode="update", query="agg"), query("agg", aggregates=True)) is None


@pytest.mark.parametrize("kwargs, expected", [
    ({"options": {"kafka.linger.ms": 5}},
     "spark.sink_options is for the Kafka sink: set spark.sink = \"kafka\" (it is 'parquet')"),
    ({"partitions": 8}, "spark.sink_partitions is for the Kafka sink: set spark.sink = \"kafka\" (it is 'parquet')"),
    ({"output_mode": "update"},
     "spark.output_mode = \"update\": Spark's file sink (spark.sink = \"parquet\") writes append mode only; use "
     "spark.sink = \"kafka\" or a query's own foreachBatch sink"),
])
def test_what_the_file_sink_refuses(kwargs, expected):
    assert refusal(scenario(sink="parquet", **kwargs), query(aggregates=True)) == expected


def test_update_mode_on_any_sink_is_for_a_query_that_aggregates_and_whose_oracle_judges_it():
    own = query(foreach_batch=print, aggregates=True)
    assert refusal(scenario(sink="parquet", output_mode="update"), own) is None  # its own sink writes update
    assert refusal(scenario(output_mode="update"), query()) == (
        "spark.output_mode = \"update\": passthrough does not aggregate, so update mode would only be append under "
        "another name; it is for a query that aggregates (its function's `aggregates = True`, or the window_counts "
        "oracle)")
    assert refusal(scenario(output_mode="update", query="windowed_count"),
                   query("windowed_count", oracle="window_counts")).startswith(
        "spark.output_mode = \"update\": windowed_count's oracle, window_counts, judges append mode")


# -- what each part does for the run and the driver ---------------------------------------------------------------
class Writer:
    """Spark's DataStreamWriter as far as a part uses it: what it was told."""

    def __init__(self):
        self.told = []

    def format(self, name):
        self.told.append(("format", name))
        return self

    def option(self, key, value):
        self.told.append(("option", key, value))
        return self

    def options(self, **options):
        self.told.append(("options", options))
        return self


def test_the_file_sink_writes_parquet_into_the_run_directorys_sink():
    writer = sink_part("parquet").writer(Writer(), {"sink": "parquet", "sink_path": "/run/sink"}, {})
    assert writer.told == [("format", "parquet"), ("option", "path", "/run/sink")]
    assert sink_part("parquet").job_part(scenario(sink="parquet")) == {}


def test_the_kafka_sink_writes_to_its_topic_connected_as_the_source_beneath_the_users_options():
    job = sink_part("kafka").job_part(scenario(options={"kafka.linger.ms": 5, "asyncProgressTrackingEnabled": True}))
    assert job == {"sink_topic": "events-out",
                   "sink_options": {"kafka.linger.ms": "5", "asyncProgressTrackingEnabled": "true"}}
    source = {"kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.security.protocol": "SASL_PLAINTEXT",
              "subscribe": "events", "startingOffsets": "earliest"}
    writer = sink_part("kafka").writer(Writer(), job, source)
    assert writer.told == [("format", "kafka"), ("options", {
        "kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.security.protocol": "SASL_PLAINTEXT",
        "topic": "events-out", "kafka.linger.ms": "5", "asyncProgressTrackingEnabled": "true"})]


def test_the_kafka_sink_creates_its_topic_and_counts_what_is_visible_in_it():
    made, asked = [], []
    backend = SimpleNamespace(create_output_topic=lambda name, partitions: made.append((name, partitions)),
                              end_offsets=lambda topic: asked.append(topic) or {0: 5, 1: 7})
    part = sink_part("kafka")
    part.create_output(SimpleNamespace(scenario=scenario(), backend=backend))
    part.create_output(SimpleNamespace(scenario=scenario(partitions=8), backend=backend))
    assert made == [("events-out", 4), ("events-out", 8)]
    assert part.visible_output(SimpleNamespace(scenario=scenario(), backend=backend)) == 12
    assert asked == ["events-out"]
    sink_part("parquet").create_output(SimpleNamespace(scenario=scenario(sink="parquet"), backend=None))


def test_the_file_sink_writes_down_no_commit_times_for_a_sink_without_a_log(tmp_path):
    sink_part("parquet").record_after_stop(tmp_path)
    assert list(tmp_path.iterdir()) == []
