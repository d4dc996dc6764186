"""`state_matches`: the query's final state, read where it lives (the checkpoint, through Spark's state data source,
harness.spark.state_dump, into state/), equals the state its oracle implies from the producers' history
(harness.analysis.state, measured into the view's `state_read`): the windows not yet emitted with their counts,
the sessions still open with their value, list and map state and their timers.

Why judged apart from the output: a state store restored from the wrong version after a kill, a changelog
replayed twice, a timer lost, can leave the output right so far and the state wrong, which the next batches
would write out. Unknown (never a pass) when the state could not be read; not required when the query stopped
with a failure a fault declared, or for a run recorded before the state reader existed (its timeline says so);
absent for a query whose oracle implies no state.
"""
from __future__ import annotations

from harness.analysis.runview import RunView
from harness.check import Check
from harness.spark.state_reader import STATE_ORACLES

NAME = "state_matches"


def state_matches(run: RunView) -> list[Check]:
    """Nothing for a query whose oracle implies no state (a checker that does not apply adds nothing, and the
    catalogue lists the check for the stateful oracles only)."""
    if run.query_def.oracle not in STATE_ORACLES:
        return []
    if run.faults.failed_as_expected:
        return [Check(NAME, None, "not required: the query stopped with the failure a fault declared",
                      required=False)]
    read = run.state_read or {"status": "unknown", "detail": "unknown: the state was not measured"}
    if read["status"] == "not_required":
        return [Check(NAME, None, read["detail"], required=False)]
    if read["status"] != "compared":
        return [Check(NAME, None, read["detail"])]
    outcome, meta = read["outcome"], read["meta"]
    detail = outcome["summary"] + (f"; {'; '.join(outcome['problems'])}" if outcome["problems"] else
                                   ", equal to the history's") + f" (read in {meta.get('took_s', 0):.1f} s)"
    figures = {k: v for k, v in outcome.items() if k not in ("problems", "summary")}
    figures["batch_id"] = meta.get("batch_id")
    figures["read_s"] = meta.get("took_s")
    return [Check(NAME, outcome["ok"], detail, None, None, figures)]
