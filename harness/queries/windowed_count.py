"""A stateful query: events counted per tumbling event-time window, finished windows appended once.

Params: `window` (default "10 seconds") and `watermark` (default "5 seconds"), in Spark's interval words. Both
are parsed by the oracle's own parser (harness.text.durations.spark_interval_ms) and handed to Spark as whole
milliseconds, so the query and its oracle cannot read a duration differently. `event_time` is the intended time
truncated to the millisecond; Spark puts an event at t into [floor(t / w) * w, +w), so one exactly on a boundary
opens the next window, as the oracle's floor does.

Output (append mode: a window is written once, when the watermark passes its end): `window_start_ms`,
`window_end_ms` (double, epoch ms) and `count` (long). Judged by the `window_counts` oracle.

`group_by_partition = true` groups by the window and the event's partition: the grouping-key change a change
rehearsal (harness.faults.change) makes on a running checkpoint, which Spark refuses (its state's key schema
differs). Its output, a count per window and partition, is not what the `window_counts` oracle judges: it exists
to be refused.
"""
from __future__ import annotations

from harness.text.durations import spark_interval_ms
from harness.queries import WINDOW_DEFAULT

DEFAULTS = {"window": WINDOW_DEFAULT, "watermark": "5 seconds", "group_by_partition": False}


def durations_ms(params: dict) -> tuple[int, int]:
    """(window, watermark) in whole milliseconds; ValueError naming the param otherwise."""
    out = []
    for name in ("window", "watermark"):
        text = params.get(name, DEFAULTS[name])
        try:
            ms = spark_interval_ms(text)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if ms != int(ms) or ms < (1 if name == "window" else 0):
            raise ValueError(f"{name} = {text!r}: must be a whole number of milliseconds"
                             + (", at least 1" if name == "window" else ", at least 0"))
        out.append(int(ms))
    return out[0], out[1]


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        return f"{unknown} not known to windowed_count; allowed: {', '.join(DEFAULTS)}"
    if not isinstance(params.get("group_by_partition", False), bool):
        return f"group_by_partition = {params['group_by_partition']!r}: true or false"
    try:
        durations_ms(params)
    except ValueError as exc:
        return str(exc)
    return None


def query(events, params):
    from pyspark.sql import functions as F

    window_ms, watermark_ms = durations_ms(params)
    keys = [F.window("event_time", f"{window_ms} milliseconds").alias("w")]
    if params.get("group_by_partition"):
        keys.append(F.col("partition"))
    return (events.withWatermark("event_time", f"{watermark_ms} milliseconds")
            .groupBy(*keys)
            .agg(F.count(F.lit(1)).alias("count"))
            .select(F.unix_millis(F.col("w.start")).cast("double").alias("window_start_ms"),
                    F.unix_millis(F.col("w.end")).cast("double").alias("window_end_ms"), "count"))


query.oracle = "window_counts"
query.check = check
