"""The query's output written with Spark's own Kafka sink (`spark.sink = "kafka"`), driver side.

Each output row becomes one Kafka record: its value the row's columns as JSON (Spark's `to_json`, native, no
Python worker on the path; any consumer reads it, and the checker parses it back in bulk with Arrow's JSON
reader), its key the event's key when the query kept one (a `key` column, harness.spark.events). The events'
own input `partition` and `offset` travel in the value, so the checker's per-event rules (where each acked event
must appear) still work on the output topic; the output position and the broker's append time come from the
topic itself when the run reads it back (harness.sinks.kafka.output).

The sink connects as the source does: the same bootstrap address and security settings (the source's
`kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*`, secrets as ${VAR} references the driver expands),
beneath the user's `[spark.sink_options]`, which win.
"""
from __future__ import annotations

SECURITY_PREFIXES = ("kafka.bootstrap.servers", "kafka.security.protocol", "kafka.sasl.", "kafka.ssl.")


def sink_options(source_options: dict[str, str], topic: str, user: dict[str, str]) -> dict[str, str]:
    """Spark's Kafka sink options: the source's connection settings, the topic, then the user's options."""
    derived = {k: v for k, v in source_options.items() if k.lower().startswith(SECURITY_PREFIXES)}
    return {**derived, "topic": topic, **user}


def kafka_rows(out):
    """The query's output as Kafka records: value = every column but `key` as JSON, key = `key` if present."""
    from pyspark.sql import functions as F

    columns = [c for c in out.columns if c != "key"]
    value = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns])).alias("value")
    if "key" in out.columns:
        return out.select(F.col("key").cast("string").alias("key"), value)
    return out.select(value)
