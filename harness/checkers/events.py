"""The events' checks: every figure the reconciliation counts that can reveal a defect fails one of them.

Pure functions of the reconciliation and the scenario's `[checks]` (each rule tested on its own), and the
checkers that feed them from the run's view.
"""
from __future__ import annotations

from harness.check import Check
from harness.reconcile import Reconciliation
from harness.analysis.runview import RunView


# When a fault declared the query's failure there is nothing to drain: the check is listed as not required, in
# words that agree with that status (it read "yes | not drained: ..." before, a pass that said it had failed).
STOPPED_AS_DECLARED = "nothing to drain: the query stopped with the failure a fault declared, as expected"


def drained_check(drained: bool, detail: str, required: bool = True) -> Check:
    return Check("drained", drained, detail, required=required)


def duplicates_check(rec: Reconciliation, checks) -> Check:
    """Duplicates beyond those the faults declared (an at-least-once sink writing a re-run batch again: rows
    whose input position is in a declared range, harness.effects.DupRange) fail beyond `max_duplicates`."""
    unexpected = rec.duplicates - rec.expected_duplicates
    if not rec.expected_duplicates:
        return Check("no_duplicates", unexpected <= checks.max_duplicates,
                     f"{rec.duplicates} duplicate deliveries (allowed {checks.max_duplicates})")
    return Check("no_duplicates", unexpected <= checks.max_duplicates,
                 f"{unexpected} unexpected duplicate deliveries (allowed {checks.max_duplicates}); "
                 f"{rec.expected_duplicates} expected: rows of batches a fault made re-run, written again by the "
                 f"at-least-once sink (in the input ranges it declared); {rec.duplicates} duplicates in all")


def delivery_checks(rec: Reconciliation, checks) -> list[Check]:
    """The events oracle: every acked event delivered once, where its ack said, in send order (when required)."""
    out = [
        Check("no_loss", rec.lost <= checks.max_lost,
              f"{rec.lost} acked events never delivered (allowed {checks.max_lost}; expected losses "
              f"{rec.expected_lost}, unread after the query stopped as expected {rec.unread})"
              + (f"; by partition {rec.lost_by_partition}" if rec.lost else "")),
        duplicates_check(rec, checks),
        Check("offsets_match", rec.misplaced == 0,
              f"{rec.misplaced} delivered events at another partition/offset than their ack said"),
        Check("no_unacked_deliveries", rec.delivered_unacked == 0,
              f"{rec.delivered_unacked} sink rows whose event no producer acked"),
    ]
    if checks.require_order:
        out.append(Check("order", rec.order_violations == 0,
                         f"{rec.order_violations} out-of-order events per producer and partition"))
    return out


def send_checks(rec: Reconciliation, checks, *, target_events: float, pacer_skipped: int = 0,
                unacked_at_exit: int = 0) -> list[Check]:
    """The producers' side: sends acked (failures only inside a fault's declared window), none left unresolved,
    none skipped by the pacer, the scheduled count offered."""
    unexpected_failed = rec.failed - rec.failed_expected
    return [
        Check("acked", rec.acked > 0 and unexpected_failed == 0,
              f"{rec.acked} of {rec.produced} events acked, {rec.failed} failed"
              + (f" ({rec.failed_expected} while a fault allowed failed sends)" if rec.failed_expected else "")),
        Check("sends_resolved", unacked_at_exit == 0,
              f"{unacked_at_exit} events neither acked nor failed when the producers exited"),
        Check("no_skipped_sends", pacer_skipped <= checks.max_pacer_skipped,
              f"{pacer_skipped} scheduled events skipped by the pacer (producer fell behind by more than "
              f"max_backlog_s; allowed {checks.max_pacer_skipped})"),
        Check("produce_rate", rec.produced >= checks.min_produce_ratio * target_events,
              f"{rec.produced} produced of {target_events:.0f} scheduled "
              f"({(rec.produced / target_events if target_events else 0):.4f}, need >= {checks.min_produce_ratio})"),
    ]


def latency_checks(latency: dict[str, float], checks, not_judged: str | None = None) -> list[Check]:
    """The steady p99 against `checks.latency_p99_ms`; listed as not required when no limit is set (every run
    shows the same checks); `not_judged`: why it cannot be (clocks not aligned)."""
    if checks.latency_p99_ms is None:
        return [Check("latency_p99", None, f"not set (no checks.latency_p99_ms): p99 {latency['p99']:.1f} ms",
                      latency["p99"], None, required=False)]
    if not_judged:
        return [Check("latency_p99", None, f"not judged: {not_judged}")]
    return [Check("latency_p99", latency["p99"] <= checks.latency_p99_ms,
                  f"p99 {latency['p99']:.1f} ms (limit {checks.latency_p99_ms:.1f} ms)")]


def event_checks(rec: Reconciliation, checks, *, target_events: float, latency: dict[str, float], drained: bool,
                 drain_detail: str, pacer_skipped: int = 0, unacked_at_exit: int = 0) -> list[Check]:
    """Every rule above for a run judged by the events oracle, in the verdict's order."""
    return ([drained_check(drained, drain_detail)] + delivery_checks(rec, checks)
            + send_checks(rec, checks, target_events=target_events, pacer_skipped=pacer_skipped,
                          unacked_at_exit=unacked_at_exit)
            + latency_checks(latency, checks))


# -- the checkers: the rules above fed from the run's view --------------------------------------------------------
def drained(run: RunView) -> list[Check]:
    if run.faults.failed_as_expected:
        return [drained_check(True, STOPPED_AS_DECLARED, required=False)]
    return [drained_check(run.state.drained, run.state.drain_detail)]


def sends(run: RunView) -> list[Check]:
    return send_checks(run.rec, run.scenario.checks, target_events=run.target_events,
                       pacer_skipped=run.producers.get("pacer_skipped", 0),
                       unacked_at_exit=run.producers.get("unacked_at_exit", 0))


def latency(run: RunView) -> list[Check]:
    """Latency is not judged when producers on other machines left negative latencies no measured clock offset
    explains (harness.clocks)."""
    clocks = run.clocks or {}
    headline = run.performance.latency if run.performance else run.rec.latency.latency
    return latency_checks(headline.percentiles(), run.scenario.checks,
                          None if clocks.get("latency_judged", True) else clocks["latency_not_judged_reason"])


def producers_reported(run: RunView) -> list[Check]:
    """Every producer process wrote its summary, and its sends are the rows in the history (a skipped write of
    the history is a defect of the harness, and would hide loss)."""
    if not run.fleet:
        return []
    p, rows, produced = run.producers, run.process_rows, run.rec.produced
    return [Check("producers_reported", p["reported"] == p["processes"] and p["sent"] == rows,
                  f"{p['reported']}/{p['processes']} producer summaries; {p['sent']} sent vs {rows} rows in the "
                  f"producers' ack logs" + (f" (+{produced - rows} written by faults)" if produced > rows else ""))]
