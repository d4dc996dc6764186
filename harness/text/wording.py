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


def machine_line(machine: dict) -> str:
    """What processes outside the run took of the machine meanwhile (harness.analysis.resources.machine), in one
    line beside the footprint: the console, report.md and report.html say it the same way."""
    text = str(machine.get("detail") or machine.get("error") or "unknown")
    if machine.get("busy"):
        text += "; performance checks that failed are unjudged, not failed (checks.max_busy_share)"
    return "machine: " + text


def warmup_line(warm: dict) -> str:
    """A run's warm-up (result.json `warmup`) in words: how long, and, when it lasted until the query caught up with
    its start (harness.analysis.warmup), how it ended; the console, report.md and report.html say it the same way."""
    if warm.get("until") != "caught_up":
        return (f"warm-up: {warm.get('s', 0):g} s (producers.warmup_s), its {warm.get('events_delivered', 0):,} events "
                f"checked but kept out of latency and throughput")
    return (f"warm-up: {warm.get('s', 0):.1f} s, until the query caught up with its start "
            f"({warm.get('ended') or 'not ended'}: {warm.get('reason') or 'not recorded'}); its "
            f"{warm.get('events_delivered', 0):,} events checked but kept out of latency and throughput")
