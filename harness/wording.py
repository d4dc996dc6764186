"""Words for figures that mislead when named loosely, kept in one place so the console, report.md, report.html,
the CI summary and comparisons all say the same thing.

Spark's `process_rps` is rows per second of *batch* time (numInputRows / triggerExecution): Spark idles between
triggers, so a query that keeps up reads well above the produce rate. Printed as "Spark rows/s" beside
"produced/s" it read as more output than input; it is the processing rate while busy, i.e. the headroom.
"""
from __future__ import annotations

PROCESSING_RATE = "processing rate while busy"
PROCESSING_RATE_UNIT = "rows/s while busy"
PROCESSING_RATE_NOTE = ("Spark's processing rate while busy: rows per second of batch time (numInputRows / "
                        "triggerExecution), not of wall-clock time. Spark idles between triggers, so a query that "
                        "keeps up reads above the produce rate; the ratio of the two is its headroom, not extra "
                        "output.")


def footprint_line(foot: dict) -> str:
    """A run's footprint (harness.analysis.resources.footprint) in one line of words: the console's summary,
    report.md and report.html say it the same way."""
    return "footprint: " + str(foot.get("detail") or foot.get("error") or "unknown")
