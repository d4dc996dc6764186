"""Source rows to the harness's event columns (see harness.queries for the contract), one function per backend."""
from __future__ import annotations

EVENT_SCHEMA = "p INT, s LONG, t DOUBLE"


def from_kafka(df):
    """Spark's Kafka source rows (key, value, topic, partition, offset, timestamp, ...) to events."""
    from pyspark.sql import functions as F

    parsed = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA)
    return df.select(
        parsed.alias("e"), F.col("partition"), F.col("offset"), F.col("timestamp"), F.length("value").alias("bytes"),
    ).select(
        F.col("e.p").alias("producer"), F.col("e.s").alias("seq"), F.col("e.t").alias("intended_ms"),
        F.timestamp_millis(F.col("e.t").cast("long")).alias("event_time"),
        "partition", "offset", (F.col("timestamp").cast("double") * 1000).alias("broker_ms"), "bytes",
    )


NORMALISE = {"kafka": from_kafka}


def to_events(df, backend: str):
    try:
        return NORMALISE[backend](df)
    except KeyError:
        raise ValueError(f"no event normalisation for backend {backend!r}") from None
