"""`state_matches`: the query's final state, read where it lives (the checkpoint, through Spark's state data source,
harness.spark.state_dump, into state/), equals the state its oracle implies from the producers' history
(harness.analysis.state): the windows not yet emitted with their counts, the sessions still open with their
value, list and map state and their timers.

Why judged apart from the output: a state store restored from the wrong version after a kill, a changelog
replayed twice, a timer lost, can leave the output right so far and the state wrong, which the next batches
would write out. Unknown (never a pass) when the state could not be read; not required when the query stopped
with a failure a fault declared, or for a run recorded before the state reader existed (its timeline says so);
absent for a query whose oracle implies no state.
"""
from __future__ import annotations

from harness import clocks
from harness.analysis.state import read_meta, session_state, window_state
from harness.check import Check
from harness.checkers.view import RunView
from harness.jsonl import read_jsonl
from harness.oracles import producer_job, session_gap_ms, window_ms, with_keys
from harness.placements import apply_placements, load_placements
from harness.spark.state_reader import STATE_ORACLES

NAME = "state_matches"


def state_matches(run: RunView) -> list[Check]:
    """Nothing for a query whose oracle implies no state (a checker that does not apply adds nothing, and the
    catalogue lists the check for the stateful oracles only)."""
    oracle = run.query_def.oracle
    if oracle not in STATE_ORACLES:
        return []
    if run.faults.failed_as_expected:
        return [Check(NAME, None, "not required: the query stopped with the failure a fault declared",
                      required=False)]
    if not (run.run_dir / "state").exists() and not any(
            e.get("event", "").startswith("state_read") for e in read_jsonl(run.run_dir / "timeline.jsonl")):
        return [Check(NAME, None, "not required: the run was recorded by a harness without the state reader "
                      "(no state_read on its timeline, no state/): its state was never read", required=False)]
    try:
        meta = read_meta(run.run_dir)
    except (OSError, ValueError) as exc:
        return [Check(NAME, None, f"unknown: {exc}")]
    params = dict(run.scenario.spark.query_params)
    try:
        acks = apply_placements(clocks.acks_frame(run.run_dir / "producers", run.clock_plan),
                                load_placements(run.run_dir / "placements"))
        acks = acks[acks["error"] == ""]
        if oracle == "window_counts":
            outcome = window_state(run.run_dir, meta, acks, window_ms(params))
        else:
            outcome = session_state(run.run_dir, meta, with_keys(acks, producer_job(run.run_dir)),
                                    session_gap_ms(params))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [Check(NAME, None, f"unknown: the state read could not be compared: {type(exc).__name__}: {exc}")]
    detail = outcome["summary"] + (f"; {'; '.join(outcome['problems'])}" if outcome["problems"] else
                                   ", equal to the history's") + f" (read in {meta.get('took_s', 0):.1f} s)"
    figures = {k: v for k, v in outcome.items() if k not in ("problems", "summary")}
    figures["batch_id"] = meta.get("batch_id")
    figures["read_s"] = meta.get("took_s")
    return [Check(NAME, outcome["ok"], detail, None, None, figures)]
