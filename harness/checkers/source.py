"""What the source's own task records must show (the Event Hubs source counts them, harness.analysis.source_tasks):
the gaps it skipped under failOnDataLoss=false against the faults' declared loss, the receivers a fault makes it
recreate, and no receiver reused when the receiver cache is off."""
from __future__ import annotations

from harness.check import Check
from harness.analysis.runview import RunView
from harness.effects import Effect


def source_checks(effects: list[Effect], source: dict, expected_lost: dict[int, int],
                  receiver_cache: bool = True) -> list[Check]:
    """`expected_lost`: the declared loss not delivered, per partition (empty under failOnDataLoss=true: then the
    query fails instead of skipping). Where the stream stayed around the gap (aged out) the source must report it
    exactly; where it went away (a deleted hub) the source cannot know how far it reached beyond its last look:
    then it may report less, never more."""
    out = []
    lossy = [e for e in effects if e.loss]
    if source and "lost_ranges" in source and (source["lost_ranges"] or expected_lost) and lossy:
        skipped: dict[int, int] = {}
        for part, lo, hi in source["lost_ranges"]:
            skipped[int(part)] = skipped.get(int(part), 0) + int(hi) - int(lo)
        declared = {p: n for p, n in expected_lost.items() if n}
        if all(e.gap_visible for e in lossy):
            ok, rule = skipped == declared, "equal"
        else:
            ok, rule = all(n <= declared.get(p, 0) for p, n in skipped.items()), "at most"
        out.append(Check("source_reported_gaps", ok,
                         f"the source reported skipping {skipped or 'nothing'}; must be {rule} the faults' declared "
                         f"loss not delivered: {declared or 'nothing'}"))
    wanted: dict[str, int] = {}
    for effect in effects:
        for name, n in effect.expect_source.items():
            wanted[name] = wanted.get(name, 0) + n
    totals = (source or {}).get("totals", {})
    if source and not receiver_cache:
        out.append(Check("receivers_not_cached", totals.get("reused", 0) == 0
                         and totals.get("created", 0) >= source.get("tasks", 0),
                         f"harness.receiverCache=false: {totals.get('created', 0)} receivers created for "
                         f"{source.get('tasks', 0)} tasks, {totals.get('reused', 0)} reused (must be 0)"))
    return out + [Check(f"source_saw_{name}", totals.get(name, 0) >= n,
                        f"the source's tasks counted {totals.get(name, 0)} {name} (the faults make at least {n} "
                        f"expected)") for name, n in sorted(wanted.items())]


def source(run: RunView) -> list[Check]:
    s = run.scenario
    return source_checks(run.faults.effects, run.source,
                         {} if s.fail_on_data_loss else run.rec.expected_lost_by_partition,
                         receiver_cache=s.source_option("harness.receiverCache", "true").lower() != "false")
