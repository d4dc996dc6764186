"""The run's accounting (result.json's `counts`) and environment as rows of (what, figure, meaning).

One row per figure, not one column: fifteen columns of counts overflowed the report's width, and a newcomer
needs to be told what "unread" or "misplaced" means next to the number, in report.md and report.html alike.
"""
from __future__ import annotations

MEANINGS: dict[str, str] = {
    "produced": "events the producers sent",
    "acked": "sends the broker acknowledged",
    "delivered_unique": "distinct acked events found in the sink",
    "duplicates": "extra copies of events in the sink",
    "expected_duplicates": "of the duplicates, those a fault declared: rows of batches it made re-run, written again "
                           "by an at-least-once sink (Kafka's)",
    "lost": "acked events never delivered that no fault explains",
    "expected_lost": "acked events a fault declared lost (e.g. aged out before Spark read them)",
    "unread": "acked events left unread after the query stopped as a fault declared",
    "failed": "sends that failed (never acked)",
    "failed_expected": "failed sends inside a fault's declared window",
    "delivered_unacked": "sink rows whose event no producer acked",
    "misplaced": "events delivered at another partition/offset than their ack said",
    "order_violations": "events out of order per producer and partition",
    "sink_rows": "rows in the sink in all",
    "pacer_skipped": "scheduled sends skipped: a producer fell behind its schedule",
    "unacked_at_exit": "sends neither acked nor failed when the producers exited",
}


def accounting_rows(counts: dict) -> list[tuple[str, str, str]]:
    """(figure, value with thousands separators, meaning) in result.json's order; an unknown figure (a newer
    judge's) is kept, with no meaning."""
    return [(name, f"{value:,}" if isinstance(value, (int, float)) else str(value), MEANINGS.get(name, ""))
            for name, value in counts.items()]


def environment_rows(result: dict) -> list[tuple[str, str]]:
    """What the run ran on: recorded at run time (result.json's `environment`: harness commit, Java, Kafka, cores);
    for a run recorded before that, the versions its judge saw, said as such."""
    env = result.get("environment") or {}
    if env:
        return [(str(k), str(v)) for k, v in env.items()]
    return [(f"{k} (of the judge; not recorded at run time)", str(v))
            for k, v in (result.get("versions") or {}).items()]
