"""What Spark's Kafka sink (`spark.sink = "kafka"`) allows, judged at load, and the names the harness gives it.

- The backend must have an output topic to create (a Kafka backend), the run no soak (its live checks read the
  file sink as it grows) and the query no sink of its own.
- What the harness sets itself (the output topic `<stream.name>-out`, the broker, the checkpoint) is refused in
  `[spark.sink_options]`, as is what Spark's Kafka sink refuses.
  Its options (`[spark.sink_options]`) go to Spark verbatim: `kafka.<producer setting>` (names checked by
  harness.settings) and asynchronous progress tracking (`asyncProgressTrackingEnabled`: progress committed in
  the background, lower latency, more replayed after a failure; Spark allows it with the Kafka sink only and not
  with once/availableNow, and not for a stateful query).

Refusals are sentences naming the field (harness.config turns them into exit 2 before anything starts).
"""
from __future__ import annotations

from typing import Any

from harness.sinks import aggregates
from harness.spark import CATCH_UP_TRIGGERS
from harness.text.suggest import did_you_mean

OUTPUT_SUFFIX = "-out"
ASYNC_PROGRESS = "asyncProgressTrackingEnabled"
ASYNC_INTERVAL = "asyncProgressTrackingCheckpointIntervalMs"
OWN_OPTIONS = (ASYNC_PROGRESS, ASYNC_INTERVAL)  # sink options that are not kafka.* producer settings
# what the harness sets itself (the output topic, the broker, the checkpoint), and what Spark's Kafka sink refuses
SET_BY_HARNESS = ("topic", "kafka.bootstrap.servers", "path", "checkpointLocation")
SPARK_REFUSES = ("kafka.key.serializer", "kafka.value.serializer")  # Spark always writes bytes
KAFKA_BACKENDS = ("kafka",)


def output_topic(stream: str) -> str:
    """The Kafka sink's topic: derived from the stream's name, so a run's two topics sit side by side."""
    return f"{stream}{OUTPUT_SUFFIX}"


def _option(options: dict[str, Any], name: str) -> tuple[str, Any] | None:
    for key, value in options.items():
        if key.lower() == name.lower():  # Spark reads writer options case-insensitively
            return key, value
    return None


def async_progress(options: dict[str, Any], trigger: str = "processingTime") -> bool:
    """Whether progress is committed in the background: asked for, or real-time mode's default (Spark turns it on
    for a realTime trigger unless the option says false)."""
    found = _option(options, ASYNC_PROGRESS)
    if found is None:
        return trigger == "realTime"
    return str(found[1]).lower() == "true"


def refusal(scenario, query_def) -> str | None:
    """Why the scenario's Kafka sink cannot run (a sentence naming the field), or None."""
    spark = scenario.spark
    trigger = spark.trigger.kind
    if scenario.backend.kind not in KAFKA_BACKENDS:
        return (f"spark.sink = \"kafka\" writes to an output topic the backend creates; backend.kind = "
                f"{scenario.backend.kind!r} has none (allowed with: {', '.join(KAFKA_BACKENDS)}); use sink = "
                "\"parquet\" or a query's own foreachBatch sink")
    if getattr(scenario, "soak", None) is not None:
        return ("spark.sink = \"kafka\" with [soak]: the soak's live checks read the file sink as it grows, and "
                "the Kafka sink's output topic is read once, after the run; use sink = \"parquet\" for a soak")
    if query_def.foreach_batch is not None:
        return (f"spark.sink = \"kafka\" but {spark.query} writes its own sink (foreach_batch, harness.queries); "
                "leave spark.sink out (or \"parquet\") for a query that owns its sink")
    problem = _options_refusal(spark.sink_options, trigger)
    if problem is None and _option(spark.sink_options, ASYNC_PROGRESS) and async_progress(spark.sink_options) \
            and stateful(query_def):
        problem = (f"spark.sink_options.{ASYNC_PROGRESS}: Spark refuses asynchronous progress tracking for a "
                   f"stateful query (\"Stateful streaming queries does not support async progress tracking\"); "
                   f"{spark.query} keeps state")
    return problem


def stateful(query_def) -> bool:
    """Whether the query keeps state (a function's `stateful` attribute; the built-in aggregation and dedup)."""
    return bool(getattr(query_def.function, "stateful", aggregates(query_def) or query_def.name == "dedup"))


def _options_refusal(options: dict[str, Any], trigger: str) -> str | None:
    for key, value in options.items():
        if key in SET_BY_HARNESS or key.lower() in (k.lower() for k in SET_BY_HARNESS):
            return (f"spark.sink_options.{key}: set by the harness (the output topic, its broker, the checkpoint); "
                    "leave it out")
        if key.lower() in SPARK_REFUSES:
            return f"spark.sink_options.{key}: Spark's Kafka sink refuses it (it always writes bytes)"
        if not key.lower().startswith("kafka.") and key not in OWN_OPTIONS:
            return (f"spark.sink_options.{key}: unknown Kafka sink option{did_you_mean(key, OWN_OPTIONS) or ';'}"
                    f" allowed: kafka.<Kafka producer setting>, {', '.join(OWN_OPTIONS)}")
    found = _option(options, ASYNC_PROGRESS)
    if found is not None and str(found[1]).lower() not in ("true", "false"):
        return f"spark.sink_options.{found[0]}: true or false, got {found[1]!r}"
    interval = _option(options, ASYNC_INTERVAL)
    if interval is not None:
        if isinstance(interval[1], bool) or not str(interval[1]).isdigit():
            return f"spark.sink_options.{interval[0]}: milliseconds, an integer of 0 or more, got {interval[1]!r}"
        if not async_progress(options, trigger):
            return (f"spark.sink_options.{interval[0]}: only with {ASYNC_PROGRESS} = true (it is the interval of "
                    "the asynchronous progress commits)")
    if async_progress(options, trigger) and trigger in CATCH_UP_TRIGGERS:
        return (f"spark.sink_options.{ASYNC_PROGRESS}: Spark refuses asynchronous progress tracking with trigger "
                f"kind {trigger!r} (a query that runs to its end and stops has no progress to commit in the "
                "background); use processingTime")
    return None
