"""Source rows to the harness's event columns (see harness.queries for the contract), one function per source.

A backend names its function in its SparkSource (`normalise`); `offset` is the position the source checkpoints
(Kafka: the record offset; Event Hubs: the sequence number), `broker_ms` when the service stored the event,
`key` the record's key as text (Kafka's key, Event Hubs' partition key; null without one): what a query keyed
per record (harness.queries.sessions) groups on.
"""
from __future__ import annotations

import importlib

EVENT_SCHEMA = "p INT, s LONG, t DOUBLE"


def load(path: str):
    """`module:attribute` -> the attribute (a backend's normaliser, a Python data source class)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _events(df, value, partition, offset, stored, key):
    from pyspark.sql import functions as F

    parsed = F.from_json(value.cast("string"), EVENT_SCHEMA)
    return df.select(
        parsed.alias("e"), partition.alias("partition"), offset.alias("offset"), stored.alias("stored"),
        F.length(value).alias("bytes"), key.cast("string").alias("key"),
    ).select(
        F.col("e.p").alias("producer"), F.col("e.s").alias("seq"), F.col("e.t").alias("intended_ms"),
        F.timestamp_millis(F.col("e.t").cast("long")).alias("event_time"),
        "partition", "offset", (F.col("stored").cast("double") * 1000).alias("broker_ms"), "bytes", "key",
    )


def from_kafka(df):
    """Spark's Kafka source rows (key, value, topic, partition, offset, timestamp, ...) to events."""
    from pyspark.sql import functions as F

    return _events(df, F.col("value"), F.col("partition"), F.col("offset"), F.col("timestamp"), F.col("key"))


def from_eventhubs(df):
    """The Event Hubs source's rows (body, partition as a string, sequenceNumber, enqueuedTime, ...) to events:
    the position is the sequence number, which is what the source checkpoints."""
    from pyspark.sql import functions as F

    return _events(df, F.col("body"), F.col("partition").cast("int"), F.col("sequenceNumber"),
                   F.col("enqueuedTime"), F.col("partitionKey"))
