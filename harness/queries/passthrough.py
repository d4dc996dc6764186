"""The default query: every event through unchanged, stamped with the time its batch ran (stateless).

Two params exist so a change rehearsal (harness.faults.change) can change the query's code the way Spark allows
between restarts (a projection or a filter added to a stateless query), with the output still one row per event:
`extra_column` (a column name) adds a projected column holding the event's partition as text, and `min_bytes`
adds a filter keeping the events of at least that many encoded bytes (every event the harness sends is larger
than 1, so `min_bytes = 1` filters nothing out while changing the plan).
"""
from __future__ import annotations

import re

PARAMS = ("extra_column", "min_bytes")
COLUMNS = ("producer", "seq", "intended_ms", "partition", "offset", "broker_ms", "bytes", "batch_ms")


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        return f"{unknown} not known to passthrough; allowed: {', '.join(PARAMS)}"
    column = params.get("extra_column")
    if column is not None and not (isinstance(column, str) and re.fullmatch(r"[a-z_][a-z0-9_]{0,63}", column)):
        return f"extra_column = {column!r}: a column name (lower-case letters, digits, '_')"
    if column in COLUMNS:
        return f"extra_column = {column!r}: the output has that column already ({', '.join(COLUMNS)})"
    least = params.get("min_bytes", 0)
    if isinstance(least, bool) or not isinstance(least, int) or least < 0:
        return f"min_bytes = {least!r}: a whole number of bytes, 0 or more"
    return None


def query(events, params):
    from pyspark.sql import functions as F

    if params.get("min_bytes"):
        events = events.where(F.col("bytes") >= int(params["min_bytes"]))
    columns = [*COLUMNS[:-1], (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms")]
    if params.get("extra_column"):
        columns.append(F.col("partition").cast("string").alias(params["extra_column"]))
    return events.select(*columns)


query.oracle = "events"
query.check = check
