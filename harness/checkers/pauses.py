"""Faults that freeze a process rather than kill it, and a second driver on a running query's checkpoint, judged
against what they declared (harness.faults.pause, harness.faults.second_driver):

* `spark_logged`: what Spark logged about the executors (an executor removed for want of heartbeats, lost, its
  tasks lost and re-run elsewhere: harness.analysis.spark_log) within the bounds each fault declared. A paused
  executor that Spark never removed, or whose tasks never ran again, fails here although the output is right.
* `query_resumed`: after each pause the same driver carried on (not restarted: a frozen JVM is not a dead one) and
  ran a batch within spark.start_timeout_s of the heal.
* `second_driver`: what two drivers on one checkpoint came to, measured by the fault (which one Spark stopped,
  with which error), equal to the declared outcome; the detail says what a team must guard against.
"""
from __future__ import annotations

from harness.analysis.progress import epoch_s
from harness.analysis.runview import RunView
from harness.check import Check
from harness.effects import CONCURRENT_OUTCOMES

# what a team must guard against, per outcome (the report and result.json carry it in the check's detail)
GUARD = {
    "second_refused": "Spark does not lock a checkpoint: the second driver lost the race for the next batch id and "
                      "failed, but had it won, the running query would have failed instead. Guard with one "
                      "writer per checkpoint (job concurrency 1, a lease or lock held outside Spark), and make a "
                      "retry wait until the first attempt is dead",
    "second_failed": "both drivers committed batches before Spark noticed: the output is exactly-once only because "
                     "the sink skips a batch id it has; a non-idempotent sink (foreachBatch, Kafka) writes those "
                     "batches twice. Guard with one writer per checkpoint (a lease or lock held outside Spark)",
    "first_failed": "the retry killed the running query: Spark stops whichever driver loses the race, not the "
                    "newcomer. Guard with one writer per checkpoint (a lease or lock held outside Spark)",
    "both_ran": "two drivers ran the same query on one checkpoint unnoticed: only the sink's idempotence by batch "
                "id stands between them and duplicate output. Guard with one writer per checkpoint",
    "other": "the outcome was not Spark's concurrent-update refusal: read the drivers' errors",
}


def spark_logged(run: RunView) -> list[Check]:
    """Each declared log expectation met: its count (for its executor, or any) within [minimum, maximum]."""
    declared = [(f, x) for f, e in _injected(run) for x in e.expect_log]
    if not declared:
        return []
    if run.spark_log is None:
        return [Check("spark_logged", None, "Spark's logs were not measured")]
    wrong, said = [], []
    for f, x in declared:
        counts = run.spark_log.get(x.what, {})
        n = counts.get(x.executor, 0) if x.executor is not None else sum(counts.values())
        bound = f">= {x.minimum}" if x.maximum is None else f"in [{x.minimum}, {x.maximum}]"
        line = f"{f['kind']} #{f['n']}: {x.what} of executor {x.executor or 'any'} = {n} (declared {bound})"
        (said if x.minimum <= n and (x.maximum is None or n <= x.maximum) else wrong).append(line)
    lost = run.spark_log.get("tasks_lost", {})
    rerun = run.spark_log.get("tasks_rerun", {})
    stranded = {e: n - rerun.get(e, 0) for e, n in lost.items() if n > rerun.get(e, 0)}
    if stranded:  # a task lost with its executor and never run again: its rows are missing or the batch hung
        wrong.append(f"tasks lost with their executor and never re-run: {stranded}")
    reasons = "; ".join(f"executor {e} lost: {r[0]}" for e, r in sorted(run.spark_log.get("lost_reasons", {}).items()))
    tasks = ", ".join(f"executor {e}: {n} lost, {rerun.get(e, 0)} re-run elsewhere" for e, n in sorted(lost.items()))
    said += [f"tasks lost with their executor: {tasks}"] if tasks else []
    return [Check("spark_logged", not wrong, "; ".join(wrong + said) + (f" ({reasons})" if reasons else ""))]


def query_resumed(run: RunView) -> list[Check]:
    """A paused driver or executor leaves the query running: the driver is never restarted (a frozen JVM resumes;
    a restart would mean it died), and a batch starts within spark.start_timeout_s after each heal."""
    paused = [f for f, e in _injected(run) if e.query_paused]
    if not paused:
        return []
    allowed = run.scenario.spark.start_timeout_s
    starts = sorted(epoch_s(p["timestamp"]) for p in run.progress if "timestamp" in p)
    back = []
    for f in paused:
        healed = f["healed_at"]
        after = None if healed is None else next((t for t in starts if t >= healed), None)
        back.append(None if after is None else after - healed)
    # the runner restarts the query only after a fault took it down (a kill, a change, an outage's restart policy):
    # those restarts are the other faults' own; one beyond them means the paused driver did not carry on
    restarts = int(run.query.get("restarts") or 0)
    taken_down = int(run.query.get("kills") or 0) + sum(1 for f, _ in _injected(run) if f["kind"] == "change")
    unexplained = max(0, restarts - taken_down)
    late = [f"{f['kind']} #{f['n']}" + (" never" if s is None else f" after {s:,.1f} s") for f, s in zip(paused, back)
            if s is None or s > allowed]
    detail = (f"{len(paused)} pauses; the next batch started "
              + ", ".join("never" if s is None else f"{s:,.1f} s" for s in back)
              + f" after the heal (allowed {allowed:g} s); the driver restarted {restarts} times, "
              + f"{taken_down} of them after faults that took it down (other restarts allowed 0)"
              + (f"; too late: {', '.join(late)}" if late else ""))
    worst = max((s for s in back if s is not None), default=None)
    return [Check("query_resumed", not late and unexplained == 0, detail, worst, allowed)]


def second_driver(run: RunView) -> list[Check]:
    """Each second driver's measured outcome (the fault's heal reads both drivers' ends) equal to the declared one;
    unknown when the fault recorded none (it did not heal: faults_applied fails then)."""
    declared = [(f, e.concurrent) for f, e in _injected(run) if e.concurrent]
    if not declared:
        return []
    out = []
    for f, expected in declared:
        got = f["detail"].get("heal_outcome")
        label = f"second_driver #{f['n']}"
        if got is None:
            out.append(Check("second_driver", None, f"{label}: no outcome recorded (declared {expected})"))
            continue
        why = f["detail"].get("heal_why") or CONCURRENT_OUTCOMES.get(got, got)
        out.append(Check("second_driver", got == expected,
                         f"{label}: {got} ({why}); declared {expected}. Guard: {GUARD.get(got, GUARD['other'])}"))
    return out


def _injected(run: RunView) -> list[tuple[dict, object]]:
    """(record, effect) of each injection that happened."""
    return list(zip([f for f in run.faults.records if f["injected_at"] is not None], run.faults.effects))
