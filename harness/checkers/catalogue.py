"""The checks a scenario's runs are judged by, named from the scenario alone, before anything runs.

Why: a checker that does not apply returns nothing, and a run that stops early (a setup error, an interrupt, a
judge that cannot read the run) reaches none of them, so the checks in result.json differ from run to run of the
same scenario. A CI system tracks a test case by its name across builds: junit.xml (reports.junit) lists these
names in every run, the ones a run did not judge as skipped with the reason, so a case never vanishes from the
history. result.json keeps them as `expected_checks`.

Only what the scenario decides is listed here (its oracle, `checks.require_order`, its trigger: `headroom` for a
processingTime one with an interval; a per-trigger cap, its fault kinds, `[soak]`). Checks a run adds from what
happened (the source's counters, a soak's individual live checks, `expected_failure` when a removal outran the
query, `baseline` with --baseline) still appear in the runs that judge them; listing them here would only guess.
The order is the verdict's (harness.verdict.CHECKERS).
"""
from __future__ import annotations

from harness.config import Scenario
from harness.faults import FAULTS
from harness.queries import resolve
from harness.spark.state_reader import wants_state

EVENT_CHECKS = ("no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries")
SEND_CHECKS = ("acked", "sends_resolved", "no_skipped_sends", "produce_rate")
# Checks of speed and time: what a machine busy with other work changes without anything being wrong with the
# system under test (harness.checkers.busy sets them aside then; every other check is about correctness and is
# judged as always). Keeping up and its room (`sustained`, `headroom`), the latency limit (and a soak's live one,
# its live throughput), the producers keeping their schedule (`produce_rate`, `no_skipped_sends`: the pacer fell
# behind), a restart's time (`query_recovered`), an outage's drain (`outage_drained`), and figures against a
# baseline run (`baseline`). Not `batch_cap` (rows per batch against the source's cap: a count, not a time) nor
# `drained` (an undrained query leaves events undelivered, which the correctness checks judge).
PERFORMANCE_CHECKS = frozenset({"sustained", "headroom", "latency_p99", "live_latency_p99", "live_throughput",
                                "produce_rate", "no_skipped_sends", "query_recovered", "outage_drained", "baseline",
                                "checkpoint_cost"})


def oracle_checks(scenario: Scenario) -> list[str]:
    """The oracle's checks: the events oracle's per-event rules, or one `oracle_<name>` for another oracle; none
    when the query cannot be resolved here (the judge then says why the run is unjudged)."""
    try:
        oracle = resolve(scenario.spark.query).oracle
    except Exception:  # noqa: BLE001 - a user's module may raise anything on import; the judge reports it
        return []
    if oracle != "events":
        return [f"oracle_{oracle.split(':')[-1]}"]
    return list(EVENT_CHECKS) + (["order"] if scenario.checks.require_order else [])


def state_checks(scenario: Scenario) -> list[str]:
    """`state_matches` for a query whose oracle implies its final state (harness.spark.state_reader.STATE_ORACLES)."""
    return ["state_matches"] if wants_state(scenario.spark.query) else []


def check_names(scenario: Scenario) -> list[str]:
    """Every check a run of `scenario` is judged by when it runs to the end, in the verdict's order."""
    names = ["completed", "drained", *oracle_checks(scenario), *state_checks(scenario), *SEND_CHECKS, "latency_p99", "sustained",
             *(["headroom"] if scenario.spark.trigger.paced else []), "producers_reported"]
    kinds = {f.kind for f in scenario.faults}
    if kinds:
        names.append("faults_applied")
    if any(getattr(f, "phase", None) for f in scenario.faults):  # harness.checkers.faults.kill_phase
        names.append("kill_phase")
    if any(FAULTS[kind].takes_query_down for kind in kinds):
        names.append("query_recovered")
    names += [name for kind in sorted(kinds) for name in FAULTS[kind].checks]  # harness.checkers.pauses
    if "change" in kinds:  # harness.checkers.changes
        names += ["change_restarted", "change_in_force"] + (["change_state"] if state_checks(scenario) else [])
    outages = [f for f in scenario.faults if f.kind == "outage"]  # harness.checkers.outages
    if outages:
        names += ["outage_backlog", "outage_crash_loop"] + (
            ["outage_drained"] if any(f.drain_within_s is not None for f in outages) else []) + (
            ["outage_expired"] if any(f.retention_ms is not None for f in outages) else [])
    cap = (getattr(scenario.backend, "batch_cap_option", None) or "").lower()  # a backend may have no cap option
    if cap and scenario.spark.trigger.kind != "once" and any(k.lower() == cap for k in scenario.spark.source_options):
        names.append("batch_cap")
    if scenario.spark.checkpoint_store != "local" or scenario.checks.max_checkpoint_ms is not None:
        names.append("checkpoint_cost")  # harness.checkers.checkpoint
    if "checkpoint_storage" in kinds:
        names.append("checkpoint_storage")
    if scenario.soak is not None:
        names += ["ran_to_the_end", "live_checks", "no_leak", "disk_budget"]
    return names
