"""The query's oracle: what its output must hold, judged from the producers' history (harness.oracles).

The events oracle (the default: every acked event delivered once, where its ack said) is one oracle like the
others; a query declaring another (`window_counts`, or a user's `module:function`) is judged by that one, and the
per-event delivery rules do not apply to its output. What that oracle returned was measured into the view
(harness.analysis.measure); it is kept whole in result.json `oracle`.
"""
from __future__ import annotations

from harness.analysis.runview import RunView
from harness.check import Check
from harness.checkers.events import delivery_checks


def oracle(run: RunView) -> list[Check]:
    name = run.query_def.oracle
    if name == "events":  # every acked event delivered once, where its ack said: the output is one row per event
        return delivery_checks(run.rec, run.scenario.checks)
    outcome = run.oracle_outcome
    if outcome is None:
        return [Check(f"oracle_{name.split(':')[-1]}", None, "unknown: the oracle's outcome was not measured")]
    ok = outcome.get("ok")  # None: the oracle could not judge (a declared failure before anything was read)
    return [Check(f"oracle_{name.split(':')[-1]}", None if ok is None else bool(ok), str(outcome.get("detail")))]
