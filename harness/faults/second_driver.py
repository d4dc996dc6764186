"""A second driver started on the running query's checkpoint: a retried job whose first attempt is still alive (a
scheduler that retried on a timeout, a redeploy that did not wait for the old driver, two clusters pointed at
one path).

Spark keeps no lock on a checkpoint. Inside one driver a second start of the same query id is refused
(CONCURRENT_QUERY) or stops the first run; across two driver JVMs nothing stops the start: both read the same
offset and commit logs, both plan the next batch id, and whichever writes a log entry second finds it there and
fails with CONCURRENT_STREAM_LOG_UPDATE ("Multiple streaming jobs detected"). Which driver that is depends on the
race, and what reached the sink before depends on the sink: the file sink skips a batch id its `_spark_metadata`
already has, an at-least-once sink writes it twice.

The fault starts the second driver (same [spark] table, same checkpoint, same sink; its own directory
`second-driver/` for its log, status and progress, owned by the run's Supervisor), lets it run for duration_s,
stops it if it still runs, and measures what each driver did: its end (state, error class), the batches it
completed, its query id and run id (a driver start always gets a fresh run id; the query id is the checkpoint's).
The outcome (harness.effects.CONCURRENT_OUTCOMES) is judged by `second_driver` against `expect`; with `expect =
"first_failed"` the running query's failure is declared (the run goes on without it).
"""
from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Literal

from pydantic import Field

from harness.effects import CONCURRENT_OUTCOMES
from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.driver_kill import needs_running_query, wait_running

CONCURRENT_ERROR = "CONCURRENT_STREAM_LOG_UPDATE"
# how Spark says another driver wrote a log entry first (the error class, the legacy message, the file system's)
CONCURRENT = re.compile(r"CONCURRENT_STREAM_LOG_UPDATE|CONCURRENT_QUERY|concurrently using|FileAlreadyExists")
QUERY_IDS = re.compile(r"\[id = ([0-9a-f-]+), runId = ([0-9a-f-]+)\]")  # StreamingQueryException's "Identifier:"
SUBDIR = "second-driver"
STOP_WAIT_S = 30.0
HEAL_WAIT_S = 100.0  # the nemesis gives a heal 120 s past its time before it gives up on the schedule


class SecondDriverOptions(FaultOptions):
    kind: Literal["second_driver"] = Field("second_driver", description=(
        "second_driver: a second driver started on the running query's checkpoint and sink for duration_s"))
    expect: Literal[tuple(CONCURRENT_OUTCOMES)] = Field("second_refused", description=(  # type: ignore[valid-type]
        "the declared outcome: " + "; ".join(f"{k}: {v}" for k, v in CONCURRENT_OUTCOMES.items())))
    run_s: float = Field(20.0, gt=0, le=600, description=(
        "once the second driver's query has completed a batch, the heal lets it run at least this long (or end); "
        "before that it waits for its start and its first batch or failure (a JVM, a session and a first batch "
        "may take longer than duration_s on a busy machine), 100 s at most"))


def classify(first: dict, second: dict) -> tuple[str, str]:
    """(outcome, why) from each driver's end ({"state", "error", "batches": completed batch ids in the window})."""
    def concurrent(d: dict) -> bool:
        return d.get("state") == "failed" and bool(CONCURRENT.search(d.get("error") or ""))

    def said(d: dict) -> str:
        """The concurrent-update error if that is what it says, else its first error class, else its start."""
        error = d.get("error") or ""
        if (m := CONCURRENT.search(error)) is not None:
            return m.group(0)
        m = re.search(r"\[([A-Z_]+(?:\.[A-Z_]+)?)\]", error)
        return (m.group(1) if m else error[:120]) or "no error"

    if concurrent(first):
        return "first_failed", f"the running query failed ({said(first)}) after the second driver's start"
    if concurrent(second):
        if second.get("batches"):
            return "second_failed", (f"the second driver completed batches {second['batches']} on the checkpoint, "
                                     f"then failed ({said(second)})")
        return "second_refused", f"the second driver failed ({said(second)}) before completing a batch"
    if first.get("state") == "failed" or second.get("state") == "failed":
        who = first if first.get("state") == "failed" else second
        return "other", f"a driver failed with another error: {said(who)}"
    if second.get("batches"):
        return "both_ran", (f"both drivers ran: the second completed batches {second['batches']}, the first "
                            f"{first.get('batches') or 'none'} in the same time")
    return "other", f"the second driver completed no batch and did not fail (state {second.get('state')!r})"


@register
class SecondDriver(Fault):
    kind = "second_driver"
    Options = SecondDriverOptions
    requires = "a query running during the traffic"
    checks = ("second_driver",)

    def __init__(self, options):
        super().__init__(options)
        self.effect.concurrent = options.expect
        if options.expect == "first_failed":  # the running query must fail with it: the run goes on without it
            self.effect.failure = CONCURRENT_ERROR
        self.second = None
        self.started_at = 0.0

    def check(self, scenario) -> str | None:
        if self.options.heal_after_s is None or self.options.heal_after_s <= 0:
            return "needs duration_s > 0 (or a window): how long the second driver runs beside the first"
        return needs_running_query(scenario)

    def inject(self, ctx) -> dict:
        wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        proc = ctx.query_for(ctx.scenario)
        sub = ctx.run_dir / SUBDIR
        proc.run_dir, proc.spark_dir, proc.control = sub, sub / "spark", sub / "control"
        for d in (proc.spark_dir / "events", proc.control):
            d.mkdir(parents=True, exist_ok=True)
        job = proc.job
        job["run_dir"], job["app_name"] = str(sub), f"{job['app_name']}-second"
        job.pop("cds_dump", None)  # the first driver keeps the class archive
        job["conf"]["spark.local.dir"] = str(proc.spark_dir / "tmp")
        if "spark.eventLog.dir" in job["conf"]:
            job["conf"]["spark.eventLog.dir"] = (proc.spark_dir / "events").resolve().as_uri()
        # the same checkpoint and sink as the running query (job["checkpoint"], job["sink_path"] left as they are)
        self.started_at = time.time()
        proc.start()
        self.second = proc
        return {"pid": proc.child.pid, "dir": SUBDIR, "checkpoint": job["checkpoint"], "sink": job["sink_path"],
                "expect": self.options.expect}

    def heal(self, ctx) -> dict:
        proc, self.second = self.second, None
        if proc is None:
            return {}
        ran_s = self._let_it_run(ctx, proc)
        second = {**_end_of(proc, self.started_at), "query_ran_s": ran_s}
        if proc.child is not None and proc.child.alive():
            (proc.control / "stop").touch()  # StreamingQuery.stop() between batches, as a redeploy would
            if proc.wait_exit(STOP_WAIT_S) is None:
                proc.stop(hard=True)
            second["stopped_by_fault"] = True
        first = _end_of(ctx.query, self.started_at) if ctx.query is not None else {}
        outcome, why = classify(first, second)
        both = sorted(set(first.get("batches", [])) & set(second.get("batches", [])))
        if outcome not in CONCURRENT_OUTCOMES:
            raise FaultError(f"unknown outcome {outcome!r}")
        return {"outcome": outcome, "why": why, "first": first, "second": second, "batches_run_by_both": both,
                "same_query_id": bool(first.get("ids")) and first.get("ids") == second.get("ids"),
                "run_ids_differ": not set(first.get("run_ids", [])) & set(second.get("run_ids", [])),
                "offset_log": ctx.offset_log()[-5:], "commit_log": ctx.commit_log()[-5:]}


    def _let_it_run(self, ctx, proc) -> float | None:
        """Wait (all in all at most HEAL_WAIT_S: the schedule gives a heal two minutes) until the second driver's
        query has started, then until it ended or completed a batch (a fresh driver's first batch is slow), then,
        if it completed one, until it has run `run_s` or ended; how long its query ran by then (None: it never
        started its query)."""
        deadline = time.monotonic() + HEAL_WAIT_S

        def started_at() -> float | None:
            marks = [m for m in proc.marks() if m.get("mark") == "query_started"]
            return float(marks[-1]["at"]) if marks else None

        def ended() -> bool:
            return proc.child is None or not proc.child.alive() or proc.status().get("state") == "failed"

        def wait(done) -> bool:
            while not done():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.25)
            return True

        if not wait(lambda: started_at() is not None or ended()) or (begun := started_at()) is None:
            return None
        if wait(lambda: ended() or _batches(proc.run_dir)) and not ended():
            wait(lambda: ended() or time.time() - begun >= self.options.run_s)
        return round(time.time() - begun, 2)


def _batches(run_dir) -> bool:
    """Whether a driver wrote a progress record (completed a batch)."""
    try:
        return (run_dir / "progress.jsonl").stat().st_size > 0
    except OSError:
        return False


def _end_of(proc, since: float) -> dict:
    """A driver's state and error now, the batches it completed since `since` (its progress records), and the
    query and run ids those records name."""
    status = proc.status()
    batches, ids, run_ids = [], set(), set()
    try:
        with open(proc.run_dir / "progress.jsonl", encoding="utf-8") as f:
            for line in f:
                try:
                    p = json.loads(line)
                except ValueError:
                    continue
                if _epoch(p.get("timestamp")) >= since:
                    batches.append(int(p.get("batchId", -1)))
                    ids.add(str(p.get("id")))
                    run_ids.add(str(p.get("runId")))
    except OSError:
        pass
    ids.update([str(status["id"])] if status.get("id") else [])
    run_ids.update([str(status["run_id"])] if status.get("run_id") else [])
    if (m := QUERY_IDS.search(status.get("error") or "")) is not None:  # a failed query names both in its error
        ids.add(m.group(1))
        run_ids.add(m.group(2))
    return {"state": status.get("state"), "error": (status.get("error") or "")[:2000] or None,
            "alive": proc.child is not None and proc.child.alive(), "batches": batches,
            "ids": sorted(ids), "run_ids": sorted(run_ids)}


def _epoch(stamp) -> float:
    """A progress record's ISO timestamp (UTC, "Z") in Unix seconds; 0 when it has none."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
