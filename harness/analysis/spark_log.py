"""What Spark said about its executors, counted per executor id: the driver's log (spark/driver.log, what an
operator reads: an executor removed for want of heartbeats, an executor lost and why) and Spark's event log
(spark/events/: each task that ended with ExecutorLostFailure, and whether a later attempt of it succeeded). A pure
function of the run directory, read once by the measuring step; `spark_logged` (harness.checkers.faults) judges
the counts against what the faults declared (harness.effects.LogExpectation).

Why both: the driver's log is what a team sees, and it says an executor was removed; only the event log says the
lost tasks ran again elsewhere (the driver logs task starts at INFO, below the level the harness keeps).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

from harness.analysis.spark_tasks import event_log_files

HEARTBEAT = re.compile(r"HeartbeatReceiver: Removing executor (\S+) with no recent heartbeats")
LOST = re.compile(r"TaskSchedulerImpl: Lost executor (\S+) on [^:]+: (.*)$")
REASON_CHARS = 200  # a lost executor's reason, as kept per executor


def count_driver_log(lines: Iterable[str]) -> dict[str, dict]:
    """{"heartbeat_timeout": {executor: n}, "executor_lost": {executor: n}, "lost_reasons": {executor: [reason]}}
    from the driver's log lines."""
    out: dict[str, dict] = {"heartbeat_timeout": {}, "executor_lost": {}, "lost_reasons": {}}
    for line in lines:
        if (m := HEARTBEAT.search(line)) is not None:
            out["heartbeat_timeout"][m.group(1)] = out["heartbeat_timeout"].get(m.group(1), 0) + 1
        elif (m := LOST.search(line.rstrip("\n"))) is not None:
            out["executor_lost"][m.group(1)] = out["executor_lost"].get(m.group(1), 0) + 1
            out["lost_reasons"].setdefault(m.group(1), []).append(m.group(2)[:REASON_CHARS])
    return out


def count_task_ends(ends: Iterable[dict]) -> dict[str, dict[str, int]]:
    """{"tasks_lost": {executor: n}, "tasks_rerun": {executor: n}} from task ends ({"app", "stage", "index",
    "attempt", "executor", "reason"}): a task lost with its executor (ExecutorLostFailure) is re-run when a later
    attempt of the same task (application, stage, partition index) succeeded on another executor."""
    ends = list(ends)
    done = {}
    for e in ends:
        if e["reason"] == "Success":
            key = (e["app"], e["stage"], e["index"])
            done.setdefault(key, []).append((e["attempt"], e["executor"]))
    lost: dict[str, int] = {}
    rerun: dict[str, int] = {}
    for e in ends:
        if e["reason"] != "ExecutorLostFailure":
            continue
        lost[e["executor"]] = lost.get(e["executor"], 0) + 1
        later = done.get((e["app"], e["stage"], e["index"]), [])
        if any(attempt > e["attempt"] and executor != e["executor"] for attempt, executor in later):
            rerun[e["executor"]] = rerun.get(e["executor"], 0) + 1
    return {"tasks_lost": lost, "tasks_rerun": rerun}


def task_ends(run_dir: Path) -> list[dict]:
    """Every SparkListenerTaskEnd of the run's event logs (one application per driver start), reduced."""
    out = []
    for app, files in enumerate(event_log_files(run_dir)):
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if '"SparkListenerTaskEnd"' not in line:
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:  # the last line of a log whose driver was killed mid-write
                        continue
                    info, reason = event.get("Task Info") or {}, event.get("Task End Reason") or {}
                    out.append({"app": app, "stage": int(event.get("Stage ID", -1)),
                                "index": int(info.get("Index", -1)), "attempt": int(info.get("Attempt", 0)),
                                "executor": str(info.get("Executor ID")), "reason": str(reason.get("Reason"))})
    return out


def read_spark_log(run_dir: Path) -> dict[str, dict]:
    """The counts `spark_logged` judges: the driver's log's and the event log's, per executor id."""
    path = run_dir / "spark" / "driver.log"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            counted = count_driver_log(f)
    except OSError:
        counted = count_driver_log([])
    return {**counted, **count_task_ends(task_ends(run_dir))}
