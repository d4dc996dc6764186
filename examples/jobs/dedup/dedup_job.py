"""A user's deduplicating job: events arrive at least once (an upstream that re-sends after a restart), and the
job keeps each event id once with `dropDuplicatesWithinWatermark`, as it would in production.

Written against the harness's query contract (harness.queries): `query(events, params)` gets the events already
normalised (producer, seq, intended_ms, event_time, partition, offset, ...) and returns what the Parquet sink
appends. The id is (producer, seq); a copy is dropped when it arrives before the watermark passes its first
copy's event time plus `watermark` (default "10 seconds"). Spark keeps that state in the checkpoint, so a driver
restarted from it still drops copies of what the killed driver already wrote.

Judged by this directory's own oracle (dedup_oracle:each_id_once), not the harness's built-in event rules.
"""
from __future__ import annotations

DEFAULT_WATERMARK = "10 seconds"


def check(params: dict) -> str | None:
    """Called when the scenario is loaded: a sentence is bad input (exit 2 before anything starts)."""
    unknown = sorted(set(params) - {"watermark"})
    if unknown:
        return f"{unknown} not known to dedup_job; allowed: watermark"
    return None


def query(events, params):
    from pyspark.sql import functions as F

    return (events.withWatermark("event_time", str(params.get("watermark", DEFAULT_WATERMARK)))
            .dropDuplicatesWithinWatermark(["producer", "seq"])
            .select("producer", "seq", "intended_ms", "partition", "offset",
                    (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms")))


query.oracle = "dedup_oracle:each_id_once"
query.check = check


def query_without_dedup(events, params):
    """The same job with the deduplication forgotten: what the oracle must catch under the same re-sends."""
    from pyspark.sql import functions as F

    return events.select("producer", "seq", "intended_ms", "partition", "offset",
                         (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms"))


query_without_dedup.oracle = "dedup_oracle:each_id_once"
query_without_dedup.check = check
