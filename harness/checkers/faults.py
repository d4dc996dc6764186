"""The faults' own checks: every planned injection applied and healed, and the failure a fault declared happened (a
scenario that expects a failure passes only when that failure happens)."""
from __future__ import annotations

from harness.analysis.measure import error_class
from harness.analysis.progress import epoch_s
from harness.analysis.runview import RunView
from harness.check import Check
from harness.faults.schedule import scenario_plan
from harness.spark.phases import hit


def faults_applied(run: RunView) -> list[Check]:
    """Every planned injection applied and healed. The plan is the scenario's own (harness.faults.schedule: pure
    and seeded, the one the nemesis ran), so an injection that never came fails here as one that failed does: a
    scenario that declares faults never passes without them, whatever else held."""
    scenario, records, errors = run.scenario, run.faults.records, run.state.fault_errors
    if not scenario.faults and not records and not errors:
        return []
    steps = scenario_plan(scenario)
    problems = [f"{f['kind']} #{f['n']}: {e}" for f in records for e in f["errors"]] + list(errors)
    problems += [f"{f['kind']} #{f['n']} never healed" for f in records if f["injected_at"] and not f["healed_at"]]
    recorded, planned = {(f["fault"], f["n"]) for f in records}, {(s.fault_index, s.n) for s in steps}
    missing = [s for s in steps if (s.fault_index, s.n) not in recorded]
    if missing:
        problems.append(_never_came(run, missing, len(steps), none_recorded=not records))
    elif scenario.faults and not records:  # declared, yet nothing planned (a run recorded before load refused it)
        problems.append(f"{len(scenario.faults)} [[faults]] declared and none injected: their schedule planned no "
                        "injection within the traffic")
    problems += [f"{f['kind']} #{f['n']} (faults.{f['fault']}) recorded but not in the scenario's plan"
                 for f in records if (f["fault"], f["n"]) not in planned]
    if problems:
        return [Check("faults_applied", False, "; ".join(problems))]
    return [Check("faults_applied", True, f"{len(records)} injections, all applied and healed")]


def _never_came(run: RunView, missing: list, planned: int, none_recorded: bool) -> str:
    kinds = [run.scenario.faults[s.fault_index].kind for s in missing]
    listed = ", ".join(f"{kind} #{s.n} (faults.{s.fault_index}, due at {s.inject_s:g} s)"
                       for kind, s in list(zip(kinds, missing))[:10]) + (", ..." if len(missing) > 10 else "")
    lead = (f"faults were declared and none was recorded: all {planned} planned injections never came" if none_recorded
            else f"{len(missing)} of {planned} planned injections never came")
    why = (f" (the traffic was stopped before they were due: {run.state.stopped_early})"
           if run.state.stopped_early else "")
    return f"{lead}: {listed}{why}"


def expected_failure(run: RunView) -> list[Check]:
    expected = run.faults.expected_failures
    if not expected:
        return []
    state, error = run.query.get("state"), run.query.get("error")
    ok = state == "failed" and any(cls in (error or "") for cls in expected)
    got = f"failed with {error_class(error) or (error or '')[:300]!r}" if state == "failed" else \
        f"did not fail (final state {state!r})"
    return [Check("expected_failure", ok, f"expected the query to fail with {' or '.join(expected)}; it {got}")]


def kill_phase(run: RunView) -> list[Check]:
    """Each driver kill that declares a `phase` cut the batch there: the checkpoint the fault observed with the
    driver frozen, just before the kill (recorded as `observed`), judged by the phase's rule
    (harness.spark.phases.hit). A kill that observed another moment fails; one with nothing observed, or a sink
    that cannot say whether it wrote the batch, is unknown; a declared kill that never came is faults_applied's."""
    declared = {i: f.phase for i, f in enumerate(run.scenario.faults) if getattr(f, "phase", None)}
    if not declared:
        return []
    kills = [f for f in run.faults.records if f["fault"] in declared and f["injected_at"] is not None]
    if not kills:
        return [Check("kill_phase", None, "no kill declaring a phase was made (faults_applied says why)")]
    judged = [(f, *hit(declared[f["fault"]], f["detail"].get("inject_observed"))) for f in kills]
    missed = [f"faults.{f['fault']} #{f['n']} ({declared[f['fault']]}): {why}" for f, ok, why in judged if ok is False]
    unknown = [f"faults.{f['fault']} #{f['n']} ({declared[f['fault']]}): {why}" for f, ok, why in judged if ok is None]
    if missed:
        return [Check("kill_phase", False, "not at the declared phase: " + "; ".join(missed))]
    if unknown:
        return [Check("kill_phase", None, "cannot tell: " + "; ".join(unknown))]
    said = [f"faults.{f['fault']} #{f['n']} ({declared[f['fault']]}): {why}" for f, _, why in judged]
    return [Check("kill_phase", True, f"{len(kills)} kills at their declared phase: " + "; ".join(said))]


def query_recovered(run: RunView) -> list[Check]:
    """A fault that takes the query down (Effect.query_down: a killed driver, a tampered checkpoint) allows it to
    be down as long as a query start may take (spark.start_timeout_s, what the runner gives a restart): each such
    injection must be followed by a batch of the restarted query within that, timed from the injection (from the
    restart, for a fault that kept the query down on purpose and says when it brought it back: an outage) to the
    first batch that started after it. Not judged when the query stopped for good with a failure a fault
    declared."""
    downs = [f for f, e in zip([f for f in run.faults.records if f["injected_at"] is not None], run.faults.effects)
             if e.query_down]
    if not downs:
        return []
    if run.faults.failed_as_expected:
        return [Check("query_recovered", None, "not required: the query stopped with the failure a fault declared",
                      required=False)]
    allowed = run.scenario.spark.start_timeout_s
    starts = sorted(epoch_s(p["timestamp"]) for p in run.progress if "timestamp" in p)
    back = []
    for f in downs:
        # a fault that holds the query down on purpose (an outage) is timed from when it brought it back
        ref = float((f.get("detail") or {}).get("heal_restarted_at") or f["injected_at"])
        after = next((t for t in starts if t >= ref), None)
        back.append(None if after is None else after - ref)
    late = [f"{f['kind']} #{f['n']}" + (" never" if s is None else f" after {s:,.1f} s") for f, s in zip(downs, back)
            if s is None or s > allowed]
    worst = max((s for s in back if s is not None), default=None)
    detail = (f"{len(downs)} injections took the query down; its next batch started "
              + ", ".join("never" if s is None else f"{s:,.1f} s" for s in back) + f" after (allowed {allowed:g} s)"
              + (f"; too late: {', '.join(late)}" if late else ""))
    return [Check("query_recovered", not late, detail, worst, allowed)]
