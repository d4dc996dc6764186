"""A stateful query: events deduplicated on their id (producer, seq) within the watermark
(`dropDuplicatesWithinWatermark`), then written through like passthrough.

Param: `watermark` (default "10 seconds", Spark's interval words). A copy of an event is guaranteed dropped when
it arrives before the watermark passes the first copy's event time plus the watermark delay; Spark keeps the
first copy it sees (an earlier offset of the same partition, when the copy was re-sent with the same key).
Events later than the watermark are dropped by Spark too, and the checker then counts them lost: that is the
query's real behaviour, not the harness's.

Output: the passthrough event columns; judged by the `events` oracle (every acked event exactly once, where its
ack said). Duplicates in the input come from the `resend` fault (harness.faults.resend): an upstream producer
re-sending what it already sent, as an at-least-once source does after a restart.
"""
from __future__ import annotations

from harness.text.durations import spark_interval_ms

DEFAULTS = {"watermark": "10 seconds"}


def watermark_ms(params: dict) -> int:
    text = params.get("watermark", DEFAULTS["watermark"])
    try:
        ms = spark_interval_ms(text)
    except ValueError as exc:
        raise ValueError(f"watermark: {exc}") from None
    if ms != int(ms) or ms < 0:
        raise ValueError(f"watermark = {text!r}: must be a whole number of milliseconds, at least 0")
    return int(ms)


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        return f"{unknown} not known to dedup; allowed: {', '.join(DEFAULTS)}"
    try:
        watermark_ms(params)
    except ValueError as exc:
        return str(exc)
    return None


def query(events, params):
    from pyspark.sql import functions as F

    return (events.withWatermark("event_time", f"{watermark_ms(params)} milliseconds")
            .dropDuplicatesWithinWatermark(["producer", "seq"])
            .select("producer", "seq", "intended_ms", "partition", "offset", "broker_ms", "bytes",
                    (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms")))


query.oracle = "events"
query.check = check
