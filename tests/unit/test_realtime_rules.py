"""Real-time mode (spark.trigger kind realTime): what Spark refuses or starves is refused when the scenario loads,
each time naming the file and the field; the sustained check judges a real-time batch by its time beyond the
interval. The facts these refusals encode were seen with PySpark 4.3 and the 4.2.0 Kafka connector (the error
conditions quoted in harness.spark.realtime); here each one is one scenario that must fail, and one that must not.
"""
import json

import pytest
from test_config import write
from test_sustained import figures, synthetic_run

from harness.checkers.sustained import Thresholds, criteria, headroom_check
from harness.config import ConfigError, load_scenario
from harness.queries import resolve
from harness.spark.realtime import peak_partitions, task_slots, warnings

RTM = """
name = "t"
[stream]
partitions = 2
[producers]
duration_s = 30
rate = { kind = "constant", eps = 100 }
[spark]
master = "local[2]"
sink = "kafka"
output_mode = "update"
trigger = { kind = "realTime", interval = "5 seconds" }
"""


def load(tmp_path, text=RTM, overrides=()):
    return load_scenario(write(tmp_path, text), list(overrides))[0]


def refused(tmp_path, overrides=(), text=RTM):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_scenario(path, list(overrides))
    msg = str(err.value)
    assert path in msg, msg
    return msg


def test_the_shipped_rtm_scenario_shape_loads(tmp_path):
    s = load(tmp_path)
    assert s.spark.trigger.kind == "realTime" and s.spark.trigger.interval == "5 seconds"


@pytest.mark.parametrize("overrides,field,why", [
    (["spark.output_mode=append"], "spark.output_mode", "OUTPUT_MODE_NOT_SUPPORTED"),
    (["spark.master=local[1]"], "spark.master", "needs 2 task slots"),
    (["spark.master=local"], "spark.master", "gives 1"),
    (["stream.partitions=3"], "spark.master", "needs 3 task slots"),
    (["spark.master=local-cluster[1,1,1024]"], "spark.master", "1 workers x 1 cores"),
    (["spark.master=local[4]", "spark.conf.spark.task.cpus=2", "stream.partitions=3"], "spark.master",
     "spark.task.cpus = 2"),
    (['spark.trigger.interval="1 second"'], "spark.trigger.interval", "minimum batch duration of 5,000 ms"),
    (['spark.trigger.interval="10 seconds"',
      'spark.conf.spark.sql.streaming.realTimeMode.minBatchDuration=20000'], "spark.trigger.interval",
     "20,000 ms (spark.conf.spark.sql.streaming.realTimeMode.minBatchDuration)"),
    (['spark.trigger.interval="0 seconds"'], "spark.trigger", "needs an interval"),
    (["spark.query=dedup"], "spark.query", "dropDuplicatesWithinWatermark"),
    (["spark.query=windowed_count"], "spark.query", "update mode"),
    (["spark.source_options.maxOffsetsPerTrigger=100"], "spark.source_options.maxOffsetsPerTrigger",
     "not compatible with real time mode"),
    (["spark.source_options.minPartitions=4"], "spark.source_options.minPartitions", "a task per Kafka partition"),
    (["spark.sink_options.asyncProgressTrackingEnabled=true",
      "spark.sink_options.asyncProgressTrackingCheckpointIntervalMs=1000"],
     "spark.sink_options.asyncProgressTrackingCheckpointIntervalMs", "wants 0"),
])
def test_each_refusal_names_its_field_and_why(tmp_path, overrides, field, why):
    msg = refused(tmp_path, overrides)
    assert f"{field}" in msg and why in msg, msg


def test_the_file_sink_is_refused_naming_spark_sink(tmp_path):
    # output mode append would be refused first by the sink's own rule: real-time's is about the sink itself
    msg = refused(tmp_path, text=RTM.replace('sink = "kafka"\noutput_mode = "update"\n', ""))
    assert "spark.sink = 'parquet'" in msg and "Kafka or foreach" in msg, msg


def test_a_query_owning_its_sink_is_refused(tmp_path):
    (tmp_path / "own_sink_job.py").write_text(
        "def write(df, batch_id, sink_dir, params):\n    pass\n"
        "def read(sink_dir, params):\n    import pandas\n    return pandas.DataFrame()\n"
        "def query(events, params):\n    return events\n"
        "query.foreach_batch = write\nquery.read_sink = read\n")
    text = RTM.replace('sink = "kafka"\n', "").replace('master = "local[2]"',
                                                      'master = "local[2]"\nquery = "own_sink_job:query"')
    msg = refused(tmp_path, text=text)
    assert "foreachBatch" in msg and "spark.query" in msg, msg


def test_the_eventhubs_backend_is_refused_naming_backend_kind(tmp_path):
    text = RTM + '[backend]\nkind = "eventhubs"\n'
    msg = refused(tmp_path, text=text)
    assert "backend.kind" in msg and "INPUT_STREAM_NOT_SUPPORTED" in msg, msg


def test_a_stateful_query_needs_slots_for_its_shuffle_partitions_too(tmp_path):
    (tmp_path / "agg_job.py").write_text(
        "def query(events, params):\n    return events.groupBy('producer').count()\n"
        "query.aggregates = True\n")
    text = RTM.replace('master = "local[2]"', 'master = "local[4]"\nquery = "agg_job:query"')
    msg = refused(tmp_path, text=text)  # 2 partitions + 200 shuffle partitions (Spark's default)
    assert "needs 202 task slots" in msg and "spark.sql.shuffle.partitions, default" in msg, msg
    s = load(tmp_path, text, ['spark.conf.spark.sql.shuffle.partitions=2'])  # 2 + 2 = 4 slots: local[4]
    assert s.spark.query == "agg_job:query"
    msg = refused(tmp_path, ['spark.conf.spark.sql.shuffle.partitions=2',
                             'spark.conf.spark.sql.streaming.stateStore.providerClass='
                             '"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"'], text)
    assert "spark.conf.spark.sql.streaming.stateStore.providerClass" in msg and "RocksDB" in msg, msg


def test_added_partitions_count_toward_the_slots(tmp_path):
    text = RTM.replace('master = "local[2]"', 'master = "local[3]"') + (
        '[[faults]]\nkind = "add_partitions"\nadd = 1\nat_s = 5\nevery_s = 10\n')
    msg = refused(tmp_path, text=text)  # at 5, 15 and 25 s of 30: 2 + 3 partitions
    assert "needs 5 task slots" in msg and "faults.0 (add_partitions)" in msg, msg
    s = load(tmp_path, text.replace('local[3]', 'local[5]'))
    assert peak_partitions(s)[0] == 5


def test_slots_are_counted_from_each_kind_of_master(tmp_path):
    s = load(tmp_path)
    assert task_slots(s.spark)[0] == 2
    assert task_slots(s.spark.model_copy(update={"master": "local[*]"}), cpus=8)[0] == 8
    assert task_slots(s.spark.model_copy(update={"master": "local[3,2]"}))[0] == 3
    assert task_slots(s.spark.model_copy(update={"master": "local-cluster[2,3,1024]"}))[0] == 6
    standalone = s.spark.model_copy(update={"cluster": "standalone", "workers": 3, "worker_cores": 2})
    assert task_slots(standalone)[0] == 6
    assert task_slots(s.spark.model_copy(update={"master": "spark://10.0.0.1:7077"}))[0] is None


def test_a_cluster_master_it_cannot_count_is_a_warning_not_a_refusal(tmp_path):
    s = load(tmp_path, overrides=["spark.master=spark://10.0.0.1:7077"])
    said = warnings(s, resolve(s.spark.query))
    assert any("cannot count the task slots" in w and "2 source partitions" in w for w in said), said
    assert warnings(load(tmp_path), resolve("passthrough")) == []


def test_other_triggers_are_left_alone(tmp_path):
    text = RTM.replace('trigger = { kind = "realTime", interval = "5 seconds" }',
                       'trigger = { kind = "processingTime", interval = "1 second" }').replace(
        'output_mode = "update"\n', "").replace('master = "local[2]"', 'master = "local[1]"')
    assert load(tmp_path, text).spark.trigger.kind == "processingTime"


# ---------------------------------------------------------------------------------------------- sustained
def test_a_real_time_batch_is_judged_by_its_time_beyond_the_interval():
    # batches of 5,200 ms against a 5,000 ms interval: read as micro-batches, they would leave no headroom
    f = figures(*synthetic_run(rate=1000.0, seconds=60, trigger_s=5.0, batch_s=5.2), start=10.0, end=60.0)
    assert headroom_check(f, Thresholds(5000.0), None).detail.startswith("no headroom: batch p50 5,200 ms")
    assert "batch_duration" not in {c.name for c in criteria(f, Thresholds(5000.0))}  # a micro-batch's is headroom
    rtm = {c.name: c for c in criteria(f, Thresholds(5000.0, real_time=True))}
    assert all(c.ok for c in rtm.values()), rtm
    assert rtm["batch_duration"].value == pytest.approx(200.0) and rtm["batch_duration"].limit == 1000.0
    assert "5,000 ms interval + 200 ms between reads" in rtm["batch_duration"].detail


def test_a_real_time_query_that_stops_reading_between_batches_fails():
    slow = {c.name: c for c in criteria({"batch_p50_ms": 6_500.0, "batches": 8}, Thresholds(5000.0, real_time=True))}
    assert slow["batch_duration"].ok is False and slow["batch_duration"].value == 1500.0
    few = {c.name: c for c in criteria({"batch_p50_ms": 5_100.0, "batches": 2}, Thresholds(5000.0, real_time=True))}
    assert few["batch_duration"].ok is None  # two batches cannot pass


# ---------------------------------------------------------------------------------------------- the sweep
def test_a_sweep_can_set_a_trigger_kind_and_interval_together():
    from harness.commands.sweep import combinations, label, override_text
    from harness.config import parse_override

    s, _, _ = load_scenario("rtm-vs-microbatch")
    combos = combinations(s.sweep)
    assert [c["spark.trigger"]["kind"] for c in combos] == ["realTime", "processingTime"]
    texts = [override_text(k, v) for c in combos for k, v in c.items()]
    assert parse_override(texts[1]) == (["spark", "trigger"], {"kind": "processingTime", "interval": "1 second"})
    loaded = [load_scenario("rtm-vs-microbatch", [t])[0].spark for t in texts]
    # real-time mode's default output mode is update; the micro-batch run keeps append (its query does not aggregate)
    assert [(x.trigger.kind, x.output_mode) for x in loaded] == [("realTime", "update"), ("processingTime", "append")]
    assert label(1, combos[1]) == "01-trigger=processingTime_1_second"


def test_a_table_valued_sweep_runs_and_reports_each_table_as_its_text(tmp_path, monkeypatch):
    """The pipeline stood in for (test_sweep's fake runs); what is checked is what each run was asked and that
    the sweep's files (json, md, html) render a table value."""
    from test_sweep import _answers, _checked

    from harness.commands import sweep
    from harness.console import Console

    text = RTM.replace('output_mode = "update"\n', "") + (
        '[sweep]\n"spark.trigger" = [{ kind = "realTime", interval = "5 seconds" }, '
        '{ kind = "processingTime", interval = "1 second" }]\n')
    path = write(tmp_path, text)
    asked = _answers(monkeypatch, [_checked("pass", p99=300.0), _checked("pass", p99=1300.0)])
    scenario, _, _ = load_scenario(path)
    outcome = sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    assert asked == [['spark.trigger={ kind = "realTime", interval = "5 seconds" }'],
                     ['spark.trigger={ kind = "processingTime", interval = "1 second" }']]
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert outcome.exit_code == 0 and saved["recommended"]["values"] == {
        "spark.trigger": '{ kind = "realTime", interval = "5 seconds" }'}
    assert (tmp_path / "out" / "sweep.html").is_file() and "realTime" in (tmp_path / "out" / "sweep.md").read_text()
