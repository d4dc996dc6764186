"""The team's job: every event tagged with the region that serves its partition (a stream-static join against a
small lookup table, as jobs join a reference table), under the harness's query contract (harness.queries):
`query(events, params)` gets the events already normalised (producer, seq, intended_ms, event_time, partition,
offset, broker_ms, bytes) and returns the streaming DataFrame the Parquet sink writes in append mode.

Param `regions` (default "eu,us,apac"): partition p is served by regions[p % len(regions)]. Judged by
team_query.oracle:enriched_exactly_once rather than the harness's per-event rules, because the output has a
column of the team's own.
"""
from __future__ import annotations

DEFAULT_REGIONS = "eu,us,apac"


def regions(params: dict) -> list[str]:
    return [r.strip() for r in str(params.get("regions", DEFAULT_REGIONS)).split(",")]


def check(params: dict) -> str | None:
    """Called when the scenario is loaded: a sentence is bad input (the run exits 2 before starting anything)."""
    unknown = sorted(set(params) - {"regions"})
    if unknown:
        return f"{unknown} not known to enrich; allowed: regions"
    if not all(regions(params)):
        return f"regions = {params.get('regions')!r}: a comma-separated list of non-empty names"
    return None


def query(events, params):
    from pyspark.sql import functions as F

    names = regions(params)
    lookup = events.sparkSession.createDataFrame(list(enumerate(names)), "slot INT, region STRING")
    return (events.withColumn("slot", (F.col("partition") % len(names)).cast("int"))
            .join(F.broadcast(lookup), "slot")
            .select("producer", "seq", "intended_ms", "partition", "offset", "region",
                    (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms")))


query.oracle = "team_query.oracle:enriched_exactly_once"
query.check = check
