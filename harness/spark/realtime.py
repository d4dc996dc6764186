"""Real-time mode (`spark.trigger = { kind = "realTime", interval = "5 seconds" }`, Spark 4.1+): what it requires,
checked when the scenario loads, so a query Spark would refuse (or, worse, would start and starve) is bad input
named with its field (exit 2) before a broker or a JVM starts. Pure logic over the scenario: no Spark here.

How real-time mode runs (Spark's docs/streaming/real-time-mode.md, and what PySpark 4.3 with the 4.2.0 Kafka
connector did here): each source partition's task runs for the whole batch duration and processes records as they
arrive, so the interval is how often progress is checkpointed, not a latency. Hence what it needs:

- **The Kafka source** (a source implementing SupportsRealTimeMode; in open source only Kafka's): the Event Hubs
  backend's Python data source would fail with STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED. Its options
  maxOffsetsPerTrigger, minOffsetsPerTrigger, minPartitions, maxTriggerDelay and endingTimestamp are refused by
  the connector ("... is not compatible with real time mode": there is no per-batch amount to cap, and a task
  per Kafka partition is fixed).
- **A Kafka or foreach sink** (Spark's sink allowlist: Kafka, foreach, console, memory). The harness has the
  Kafka sink (`spark.sink = "kafka"`); the Parquet file sink and a query's own foreachBatch are refused by Spark
  (update mode unsupported; ForeachBatchSink not in the allowlist).
- **Update output mode** (STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED otherwise).
- **A batch duration of at least spark.sql.streaming.realTimeMode.minBatchDuration** (5,000 ms by default:
  INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL).
- **A task slot for every source partition at once**, plus one per shuffle partition for a stateful query (its
  pipelined shuffle runs both stages at once). Spark does not refuse too few slots: with local[1] and two
  partitions it ran the partitions' tasks one after the other, a batch duration each, so half the records waited
  a whole batch and the other half had not come out when the query stopped. Slots are counted from the master
  (local[N], local[N,F], local[*], local-cluster[n,c,m], the harness's standalone workers x cores) divided by
  spark.task.cpus; a cluster master (spark://, yarn, k8s) cannot be counted from here: a warning says so.
- **A supported query shape**: stateless projections and filters (the harness's `passthrough`); since Spark 4.3
  dropDuplicates, streaming aggregations (also windowed) and the JVM transformWithState. Not dedup
  (dropDuplicatesWithinWatermark: StreamingDeduplicateWithinWatermarkExec is not in the operator allowlist),
  not Python UDFs (ArrowEvalPythonExec / BatchEvalPythonExec), not transformWithStateInPandas. A user's query is
  checked by Spark when it starts (the allowlist error then fails the run, its message kept in status.json).
- **For a stateful query, no state-store confs real-time mode cannot run with**: a provider other than RocksDB,
  stateStore.checkpointFormatVersion below 2, spark.sql.execution.sortBeforeRepartition = true
  (STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED).
- **asyncProgressTrackingCheckpointIntervalMs = 0** when given: real-time mode commits every batch
  (STREAMING_REAL_TIME_MODE.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO).
"""
from __future__ import annotations

import math
import os
import re

from harness.text.durations import spark_trigger_ms
from harness.sinks import sink_part

MIN_BATCH_CONF = "spark.sql.streaming.realTimeMode.minBatchDuration"
MIN_BATCH_MS = 5000
ALLOWLIST_CONF = "spark.sql.streaming.realTimeMode.allowlistCheck"
SHUFFLE_CONF = "spark.sql.shuffle.partitions"
SHUFFLE_DEFAULT = 200
TASK_CPUS_CONF = "spark.task.cpus"
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
FORMAT_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"
ALLOW_V1_CONF = "spark.sql.streaming.realTimeMode.dangerouslyAllowCheckpointV1.enabled"
SORT_CONF = "spark.sql.execution.sortBeforeRepartition"
ASYNC_INTERVAL = "asyncProgressTrackingCheckpointIntervalMs"
KAFKA_BACKENDS = ("kafka",)
# the Kafka connector's own refusals (KafkaMicroBatchStream, 4.2.0), lower-case as it compares them
SOURCE_OPTIONS_REFUSED = ("maxoffsetspertrigger", "minoffsetspertrigger", "minpartitions", "maxtriggerdelay",
                          "endingtimestamp")
STATELESS = ("passthrough",)  # the built-in queries real-time mode runs as they are
REFUSED_QUERIES = {
    "dedup": ("dedup uses dropDuplicatesWithinWatermark, which real-time mode does not run (Spark's operator "
              "allowlist has no StreamingDeduplicateWithinWatermarkExec; plain dropDuplicates it has)"),
    "windowed_count": ("windowed_count's oracle (window_counts) judges append mode's one row per closed window; "
                       "real-time mode runs update mode, which emits each window's running count as it changes"),
    "sessions": ("sessions is a transformWithStateInPandas query; real-time mode runs only the JVM "
                 "transformWithState (Spark 4.3's allowlist has no Python stateful operator)"),
}
LOCAL = re.compile(r"^local(\[(\d+|\*)(,\d+)?\])?$")
LOCAL_CLUSTER = re.compile(r"^local-cluster\[(\d+),(\d+),(\d+)\]$")


def usable_cpus() -> int:
    """What local[*] gets: the JVM's availableProcessors, i.e. the CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def task_slots(spark, cpus: int | None = None) -> tuple[int | None, str]:
    """(how many tasks the query's executors run at once, how that was counted); None when the master is a
    cluster whose size is not known here."""
    text = _conf(spark).get(TASK_CPUS_CONF, "1").strip()
    task_cpus = int(text) if text.isdigit() and int(text) > 0 else 1
    per = f" / {TASK_CPUS_CONF} = {task_cpus}" if task_cpus > 1 else ""
    if spark.cluster == "standalone":
        cores = spark.workers * spark.worker_cores
        return cores // task_cpus, f"spark.workers x spark.worker_cores = {spark.workers} x {spark.worker_cores}{per}"
    master = spark.master.strip()
    m = LOCAL.match(master)
    if m:
        if m.group(2) == "*":
            n, how = cpus or usable_cpus(), f"{master}: this machine's {cpus or usable_cpus()} usable CPUs"
        else:
            n, how = int(m.group(2) or 1), f"spark.master = {master!r}"
        return n // task_cpus, how + per
    m = LOCAL_CLUSTER.match(master)
    if m:
        workers, cores = int(m.group(1)), int(m.group(2))
        return workers * cores // task_cpus, f"spark.master = {master!r}: {workers} workers x {cores} cores{per}"
    return None, f"spark.master = {master!r} is a cluster the harness cannot count the task slots of"


def peak_partitions(scenario) -> tuple[int, str]:
    """The most source partitions the query will read at once: the stream's, raised by add_partitions faults."""
    n, why = scenario.stream.partitions, f"stream.partitions = {scenario.stream.partitions}"
    for i, fault in enumerate(scenario.faults):
        if getattr(fault, "kind", None) != "add_partitions":
            continue
        if fault.to is not None:
            if fault.to > n:
                n, why = fault.to, f"faults.{i} (add_partitions) raises the partitions to {fault.to}"
            continue
        times = fault.count
        if times is None:
            if fault.every_s is None:
                times = 1
            else:
                end = fault.until_s if fault.until_s is not None else scenario.producers.duration_s
                times = max(1, math.floor((end - (fault.at_s or 0.0)) / fault.every_s) + 1)
        n += fault.add * times
        why = f"faults.{i} (add_partitions) adds {fault.add} x {times}: up to {n} partitions"
    return n, why


def _conf(spark) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in spark.conf.items()}


def stateful(scenario, query_def) -> bool:
    """Whether the query keeps state (a pipelined shuffle, so slots for its shuffle partitions too): not one of the
    known stateless ones, and declared so by its function (`aggregates = True`, or `stateful = True`)."""
    if scenario.spark.query in STATELESS:
        return False
    function = query_def.function
    return bool(getattr(function, "stateful", False) or getattr(function, "aggregates", False))


def refusal(scenario, query_def, cpus: int | None = None) -> str | None:
    """Why the scenario cannot run in real-time mode (a sentence leading with the field), or None; None also when
    its trigger is not realTime."""
    spark = scenario.spark
    if spark.trigger.kind != "realTime":
        return None
    conf = _conf(spark)
    lead = "spark.trigger.kind = \"realTime\""
    if scenario.backend.kind not in KAFKA_BACKENDS:
        return (f"backend.kind = {scenario.backend.kind!r}: {lead} reads only from a source that supports real-time "
                "mode, in open-source Spark the Kafka source (allowed: backend.kind = \"kafka\"); the Event Hubs "
                "backend's Python data source would fail with STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED")
    for key in spark.source_options:
        if key.lower() in SOURCE_OPTIONS_REFUSED:
            return (f"spark.source_options.{key}: Spark's Kafka source refuses it in real-time mode (\"not "
                    "compatible with real time mode\": each partition's task reads what arrives for the whole batch, "
                    "there is no per-batch amount, and a task per Kafka partition is fixed); leave it out")
    if query_def.foreach_batch is not None:
        return (f"spark.query = {spark.query!r} writes its own sink with foreachBatch, which real-time mode does not "
                "run (Spark's sink allowlist: Kafka, foreach, console, memory); use a query without foreach_batch "
                "and spark.sink = \"kafka\"")
    if not sink_part(spark.sink).real_time:
        return (f"spark.sink = {spark.sink!r}: {lead} writes each record as it is processed, to a Kafka or foreach "
                "sink only (the harness has the Kafka one); set spark.sink = \"kafka\"")
    if spark.output_mode != "update":
        return (f"spark.output_mode = {spark.output_mode!r}: {lead} runs in update mode only (Spark refuses others "
                "with STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED); set spark.output_mode = \"update\"")
    problem = _interval_refusal(spark, conf)
    if problem:
        return problem
    why_not = REFUSED_QUERIES.get(spark.query)
    if why_not:
        return f"spark.query = {spark.query!r}: {why_not}; real-time mode runs passthrough or a query of your own"
    is_stateful = stateful(scenario, query_def)
    problem = _slots_refusal(scenario, conf, is_stateful, cpus)
    if problem:
        return problem
    if is_stateful or spark.query not in STATELESS:
        problem = _state_conf_refusal(spark, conf)
        if problem:
            return problem
    for key, value in spark.sink_options.items():
        if key.lower() == ASYNC_INTERVAL.lower() and str(value).strip() != "0":
            return (f"spark.sink_options.{key} = {value!r}: real-time mode checkpoints every batch, so Spark wants "
                    "0 here (STREAMING_REAL_TIME_MODE.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO); "
                    "leave it out or set 0")
    return None


def _interval_refusal(spark, conf: dict[str, str]) -> str | None:
    interval_ms = spark_trigger_ms(spark.trigger.interval)
    text = conf.get(MIN_BATCH_CONF, str(MIN_BATCH_MS)).strip()
    try:
        minimum = int(text)
    except ValueError:
        return f"spark.conf.{MIN_BATCH_CONF} = {text!r}: milliseconds, a whole number"
    if interval_ms < minimum:
        where = f"spark.conf.{MIN_BATCH_CONF}" if MIN_BATCH_CONF in conf else f"{MIN_BATCH_CONF}, default"
        return (f"spark.trigger.interval = {spark.trigger.interval!r} is {interval_ms:,} ms, under real-time mode's "
                f"minimum batch duration of {minimum:,} ms ({where}); the interval is how often progress is "
                "checkpointed, not a latency: records flow through within it. Use at least "
                f"\"{math.ceil(minimum / 1000)} seconds\"")
    return None


def _slots_refusal(scenario, conf: dict[str, str], is_stateful: bool, cpus: int | None) -> str | None:
    slots, how = task_slots(scenario.spark, cpus)
    if slots is None:
        return None  # said as a warning (warnings())
    partitions, why = peak_partitions(scenario)
    need, what = partitions, f"{partitions} source partitions ({why})"
    if is_stateful:
        text = conf.get(SHUFFLE_CONF, str(SHUFFLE_DEFAULT))
        shuffle = int(text) if text.strip().isdigit() else SHUFFLE_DEFAULT
        need += shuffle
        what += f" + {shuffle} shuffle partitions of the stateful stage ({SHUFFLE_CONF}" + (
            ", default)" if SHUFFLE_CONF not in conf else ")")
    if slots >= need:
        return None
    field = "spark.workers" if scenario.spark.cluster == "standalone" else "spark.master"
    return (f"{field}: real-time mode runs every task of the query at once for the whole batch, so it needs {need} "
            f"task slots ({what}); {how} gives {slots}. Too few and Spark does not refuse: it runs the partitions' "
            "tasks one after the other, a batch duration each, and the records of the waiting ones wait that long. "
            f"Give the master at least {need} slots (e.g. local[{need}]) or use fewer partitions")


def _state_conf_refusal(spark, conf: dict[str, str]) -> str | None:
    provider = conf.get(PROVIDER_CONF)
    if provider is not None and provider != ROCKSDB:
        return (f"spark.conf.{PROVIDER_CONF} = {provider!r}: a stateful real-time query runs on RocksDB only "
                "(checkpoint format 2 needs it; Spark refuses others with "
                "STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED); leave it out (real-time mode picks "
                "RocksDB) or set spark.state_store = \"rocksdb\"")
    version = conf.get(FORMAT_CONF)
    if version is not None and version.strip().isdigit() and int(version) < 2 \
            and conf.get(ALLOW_V1_CONF, "false").lower() != "true":
        return (f"spark.conf.{FORMAT_CONF} = {version}: a stateful real-time query needs checkpoint format 2 (a "
                "re-run batch must not reuse a failed one's state files); leave it out")
    if conf.get(SORT_CONF, "").lower() == "true":
        return (f"spark.conf.{SORT_CONF} = true: the sort before a round-robin repartition never ends on an "
                "unbounded real-time batch; Spark refuses it (SQL_CONFIGURATION_NOT_SUPPORTED): leave it out")
    return None


def warnings(scenario, query_def) -> list[str]:
    """What cannot be checked here but matters, as sentences (printed when the run starts)."""
    spark = scenario.spark
    if spark.trigger.kind != "realTime":
        return []
    out = []
    slots, how = task_slots(spark)
    if slots is None:
        partitions, _ = peak_partitions(scenario)
        out.append(f"real-time mode needs a task slot for each of the {partitions} source partitions at once "
                   f"({'plus the shuffle partitions, ' if stateful(scenario, query_def) else ''}for the whole batch); "
                   f"{how}: make sure its executors offer that many cores, or records wait a batch duration")
    if spark.query not in STATELESS:
        out.append(f"spark.query = {spark.query!r} is checked by Spark when it starts: real-time mode runs "
                   "projections, filters, dropDuplicates, aggregations and the JVM transformWithState, not Python "
                   "UDFs or dropDuplicatesWithinWatermark (the query then fails with "
                   "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST)")
    if _conf(spark).get(ALLOWLIST_CONF, "true").lower() == "false":
        out.append(f"spark.conf.{ALLOWLIST_CONF} = false: Spark runs operators and sinks it has not vetted for "
                   "real-time mode, at your own risk")
    return out
