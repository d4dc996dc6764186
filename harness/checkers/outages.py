"""An outage's restart (harness.faults.outage), judged against what its scenario declares, on the figures
harness.analysis.outages measured: the restarted query read the backlog the outage left (an outage that left none
did not happen as declared), it crash-looped exactly when the scenario says it must (`crash_loop`), and it drained
the backlog within the declared time (`drain_within_s`). What aged out unread is the declared loss, judged exactly
by the events checks (`no_loss`), or the data-loss error under failOnDataLoss=true (`expected_failure`).
"""
from __future__ import annotations

from harness.analysis.runview import RunView
from harness.check import Check


def _label(o: dict) -> str:
    return f"outage #{o['n']}"


def _first_batch_words(o: dict) -> str:
    first, rss = o["first_batch"], o["peak_rss_mb"]
    memory = ", ".join(f"{role} peak {mb:,.0f} MB" for role, mb in rss.items()) or "memory not sampled"
    return (f"first batch {first['batch']}: {first['rows']:,} rows in {first['duration_ms']:,} ms ({memory})"
            if first else f"no batch after the restart ({memory})")


def outage_backlog(run: RunView) -> list[Check]:
    """Each outage left a backlog and the restarted query's first batch read it: all of it uncapped (the backlog
    at the restart, at least: the traffic goes on), or as much as the cap allows (`maxOffsetsPerTrigger`, less
    Spark's rounding, a record per partition). Not required when the query crash-looped (declared or not:
    `outage_crash_loop` judges that) and so ran no batch."""
    if not run.outages:
        return []
    problems, said, crashed = [], [], False
    for o in run.outages:
        first, need = o["first_batch"], o["backlog_events"]
        if o["cap"]:
            # Spark prorates the cap over the partitions, flooring each share: a record short per partition
            need = min(need, int(o["cap"]["value"])) - int(o["backlog_partitions"])
        words = f"{_label(o)}: backlog {o['backlog_events']:,} events at the restart; {_first_batch_words(o)}"
        if not o["restarted"]:
            problems.append(f"{_label(o)}: the query was never brought back")
        elif o["backlog_events"] <= 0:
            problems.append(f"{words}: the outage left no backlog (was the query down while the traffic went on?)")
        elif first is None and (o["crashes"] or o["gave_up"]):
            crashed = True
            said.append(words)
        elif first is None or first["rows"] < need:
            problems.append(f"{words}: it read fewer than the {max(need, 0):,} the backlog "
                            + ("and cap give" if o["cap"] else "holds"))
        else:
            said.append(words)
    if crashed and not problems:
        return [Check("outage_backlog", None, "not required: the restarted query crash-looped; " + "; ".join(said),
                      required=False)]
    return [Check("outage_backlog", not problems, "; ".join(problems + said),
                  sum(o["backlog_events"] for o in run.outages))]


def outage_crash_loop(run: RunView) -> list[Check]:
    """The crash-loop as declared: with `crash_loop = true` the restarted query must fail after each of its
    `max_restarts` restarts and be given up on (QUERY_CRASH_LOOP), every time with `crash_error` when declared
    (an out-of-memory loop is not any loop); with false it must not fail at all (a failure the policy restarted
    from is a crash, declared or not)."""
    if not run.outages:
        return []
    problems, said = [], []
    for o in run.outages:
        happened = f"{o['crashes']} failures after the restart" + (", given up on" if o["gave_up"] else "") + (
            f" ({'; '.join(o['crash_errors'])})" if o["crash_errors"] else "")
        if o["crash_loop_expected"]:
            why = o.get("crash_error")
            ok = o["gave_up"] and o["crashes"] >= int(o["max_restarts"] or 0) + 1
            if why:  # every failure for the declared reason (an out-of-memory loop, not any loop)
                ok = ok and o.get("crashes_as_declared", 0) == o["crashes"]
                happened += f"; {o.get('crashes_as_declared', 0)} of them with {why}"
            (said if ok else problems).append(
                f"{_label(o)}: crash-loop declared (fail {int(o['max_restarts'] or 0) + 1} times"
                + (f" with {why}" if why else "") + ", then given up); " + happened)
        elif o["crashes"] or o["gave_up"]:
            problems.append(f"{_label(o)}: no crash-loop declared; {happened}")
        else:
            said.append(f"{_label(o)}: no failure after the restart, as declared")
    return [Check("outage_crash_loop", not problems, "; ".join(problems + said),
                  sum(o["crashes"] for o in run.outages), 0)]


def outage_drained(run: RunView) -> list[Check]:
    """Each outage with `drain_within_s`: the backlog drained (the lag back within its band before the outage)
    that soon after the restart. Unknown when the drain could not be measured (no lag samples, no producers)."""
    judged = [o for o in run.outages if o["drain_within_s"] is not None]
    if not judged:
        return []
    if run.performance is None:
        return [Check("outage_drained", None, "the drain was not measured (no producers' figures)")]
    problems, said = [], []
    for o in judged:
        limit, took = float(o["drain_within_s"]), o["drain_s"]
        rate = f" at {o['drain_eps']:,.0f} events/s" if o["drain_eps"] else ""
        if took is None:
            problems.append(f"{_label(o)}: the backlog ({o['backlog_events']:,} events) never drained "
                            f"(allowed {limit:g} s)")
        elif took > limit:
            problems.append(f"{_label(o)}: drained {took:,.1f} s after the restart{rate}, allowed {limit:g} s")
        else:
            said.append(f"{_label(o)}: drained {took:,.1f} s after the restart{rate} (allowed {limit:g} s)")
    worst = max((o["drain_s"] for o in judged if o["drain_s"] is not None), default=None)
    return [Check("outage_drained", not problems, "; ".join(problems + said), worst,
                  min(float(o["drain_within_s"]) for o in judged))]


def outage_expired(run: RunView) -> list[Check]:
    """Each outage that cut the topic's retention (`retention_ms`): records aged out unread exactly when the
    retention was shorter than the outage, and the events the run lost in the declared ranges are exactly those
    (the log start at the restart past the last commit, read from the broker). Under failOnDataLoss=true the
    restarted query's data-loss error is the declared effect instead (`expected_failure`)."""
    judged = [o for o in run.outages if o["retention_ms"] is not None and o["restarted"]]
    if not judged:
        return []
    problems, said, unknown = [], [], []
    for o in judged:
        expect = float(o["retention_ms"]) < float(o["down_s"]) * 1000.0
        words = (f"{_label(o)}: retention {int(o['retention_ms']):,} ms for a {o['down_s']:g} s outage; "
                 f"{o['expired_events']:,} records aged out unread")
        if expect != (o["expired_events"] > 0):
            problems.append(words + (" (expected some)" if expect else " (expected none)"))
        elif run.faults.failed_as_expected:
            said.append(words + "; the query failed as declared")
        elif o["expired_undelivered"] is None:
            unknown.append(words + "; the events lost in its ranges were not counted (no producers' figures)")
        elif o["expired_undelivered"] != o["expired_events"]:
            problems.append(words + f", yet {o['expired_undelivered']:,} events in the declared ranges went "
                                    "undelivered")
        else:
            said.append(words + ", all of them the declared loss, none delivered")
    ok = False if problems else None if unknown else True
    return [Check("outage_expired", ok, "; ".join(problems + unknown + said),
                  sum(o["expired_events"] for o in judged))]
