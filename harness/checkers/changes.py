"""A change rolled out on the checkpoint (harness.faults.change), judged against what its scenario declares: the
query restarted (or Spark refused it, when `refused_with` says it must: `expected_failure` judges the error class),
and each changed setting Spark's records show is in force (or kept at the checkpoint's value, `in_force = false`).

Exactly-once across the change and the state carried over are the run's own checks (the events oracle or the
query's oracle, and the final state against the history's): phase A and phase B are judged as one run.
"""
from __future__ import annotations

from harness.analysis.runview import RunView
from harness.check import Check


def change_restarted(run: RunView) -> list[Check]:
    """Each change was followed by phase B's batches, or, declared refused, by none: the query failed instead."""
    if not run.changes:
        return []
    problems, said = [], []
    for c in run.changes:
        label = f"change #{c['n']} ({c['name']})"
        if c["refused_with"]:
            (said if c["refused"] else problems).append(
                f"{label} refused as declared" if c["refused"] else
                f"{label} was to be refused with {c['refused_with']}; "
                + (f"the query restarted and ran {c['batches_after']} batches" if c["restarted"] else
                   "the query did not fail at its restart"))
        elif c["restarted"]:
            said.append(f"{label}: first batch {c['first_batch_after_s']:,.1f} s after, {c['batches_after']} "
                        f"batches" + (f", Spark {c['spark'][0]} -> {c['spark'][1]}" if c["spark"][0] != c["spark"][1]
                                      else ""))
        else:
            problems.append(f"{label}: the query did not run a batch after it"
                            + (" (it failed)" if c["refused"] else ""))
    return [Check("change_restarted", not problems, "; ".join(problems + said))]


def change_in_force(run: RunView) -> list[Check]:
    """Each changed setting the run could read back is in force after the change, or kept at the checkpoint's
    value when the scenario says the checkpoint keeps it (`in_force = false`). Settings nothing records are
    listed as not measured; with none measured the check is unknown and not required."""
    rows = [(c, s) for c in run.changes if c["restarted"] for s in c["settings"]]
    if not rows:
        return []
    measured = [(c, s) for c, s in rows if s["taken"] is not None]
    wrong = [f"{s['setting']} = {s['requested']!r} " + ("in force" if s["taken"] else f"not taken ({s['in_force']!r} "
                                                        f"in force)") + f", declared {_declared(c)}"
             for c, s in measured if s["taken"] != c["in_force_expected"]]
    held = [f"{s['setting']} " + ("in force" if s["taken"] else f"kept at {s['in_force']!r}")
            for c, s in measured if s["taken"] == c["in_force_expected"]]
    unmeasured = [f"{s['setting']} not measured ({s['how']})" for c, s in rows if s["taken"] is None]
    if not measured:
        return [Check("change_in_force", None, "; ".join(unmeasured), required=False)]
    return [Check("change_in_force", not wrong, "; ".join(wrong + held + unmeasured))]


def _declared(change: dict) -> str:
    return "in force" if change["in_force_expected"] else "kept by the checkpoint"


def change_state(run: RunView) -> list[Check]:
    """The state phase A committed last, read at the change, equal key by key to what the history implies for
    the events that batch had read (the final state is `state_matches`'s): together, the state before the change
    and after it. Unknown when the read could not be compared."""
    reads = [c for c in run.changes if c.get("state")]
    if not reads:
        return []
    ok = [c["state"]["ok"] for c in reads]
    detail = "; ".join(f"change #{c['n']} at batch {c['state']['batch']}: {c['state']['summary']}"
                       + (": " + "; ".join(c["state"]["problems"]) if c["state"]["problems"] else "") for c in reads)
    return [Check("change_state", None if None in ok else all(ok), detail)]
