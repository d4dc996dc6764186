"""A user's stream-stream join with watermarks: orders joined with their payments, each side with its own
watermark, within an event-time bound, as a left outer join (an order whose payment does not come in time is
written once with an empty payment, when the watermark says it can no longer come).

The harness produces one stream of events; the job splits it in two as a user's two topics would arrive: an
event with an even `seq` is an order, the next event of the same producer (seq + 1) is its payment. The
relation: same producer, payment_seq = order_seq + 1, and payment time within [order time, order time +
`bound_ms`] (event times are the events' intended times to the millisecond). The traffic's pace decides which
pairs make the bound: at 250 events/s consecutive events are 4 ms apart.

Params: `bound_ms` (default 4, whole milliseconds), `watermark` (default "2 seconds", both sides).
Output (append): producer, order_seq, order_ms, payment_seq, payment_ms (both null for an order without a
payment in time), batch_ms. Judged by join_oracle:pairs_once.
"""
from __future__ import annotations

PARAMS = {"bound_ms": 4, "watermark": "2 seconds"}


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        return f"{unknown} not known to join_job; allowed: {', '.join(PARAMS)}"
    bound = params.get("bound_ms", PARAMS["bound_ms"])
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        return f"bound_ms = {bound!r}: a whole number of milliseconds, at least 0"
    return None


def _sides(events, params):
    from pyspark.sql import functions as F

    watermark = str(params.get("watermark", PARAMS["watermark"]))
    orders = (events.where(F.col("seq") % 2 == 0)
              .select(F.col("producer").alias("o_producer"), F.col("seq").alias("order_seq"),
                      F.col("intended_ms").alias("order_ms"), F.col("event_time").alias("order_time"))
              .withWatermark("order_time", watermark))
    payments = (events.where(F.col("seq") % 2 == 1)
                .select(F.col("producer").alias("p_producer"), F.col("seq").alias("payment_seq"),
                        F.col("intended_ms").alias("payment_ms"), F.col("event_time").alias("payment_time"))
                .withWatermark("payment_time", watermark))
    return orders, payments


def _output(joined):
    from pyspark.sql import functions as F

    return joined.select(F.col("o_producer").alias("producer"), "order_seq", "order_ms", "payment_seq",
                         "payment_ms", (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms"))


def query(events, params):
    from pyspark.sql import functions as F

    orders, payments = _sides(events, params)
    bound = int(params.get("bound_ms", PARAMS["bound_ms"]))
    on = F.expr(f"p_producer = o_producer AND payment_seq = order_seq + 1 AND payment_time >= order_time "
                f"AND payment_time <= order_time + INTERVAL {bound} MILLISECONDS")
    return _output(orders.join(payments, on, "leftOuter"))


query.oracle = "join_oracle:pairs_once"
query.check = check


def query_without_bound(events, params):
    """The same join with its time-range condition forgotten (an inner join on the ids alone: Spark accepts it,
    keeping every row in its state): payments later than the bound come out paired, which the oracle must catch."""
    from pyspark.sql import functions as F

    orders, payments = _sides(events, params)
    return _output(orders.join(payments, F.expr("p_producer = o_producer AND payment_seq = order_seq + 1"), "inner"))


query_without_bound.oracle = "join_oracle:pairs_once"
query_without_bound.check = check
