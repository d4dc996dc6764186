"""The Spark driver SIGKILLed mid-batch, restarted from the same checkpoint as a production supervisor would.

Mid-batch means Spark has written the batch's offsets to the offset log (its write-ahead log) and not yet its
commit: on restart it must re-run that batch with exactly the same offsets, and the file sink, which skips a
batch id its own `_spark_metadata` log already has, keeps the output exactly-once. So nothing may be lost or
duplicated. The fault waits (bounded) for such a moment, freezes the driver's process group (SIGSTOP) to confirm
it, and kills it frozen, so the batch it records is the batch really cut. The helpers here (waiting for a running
query, acting on a frozen driver) serve the other query-process faults too.

Spark's Kafka sink is at-least-once: the re-run batch is written again. So with `spark.sink = "kafka"` the fault
declares, once the driver is dead and before its successor can start, the input ranges whose events may appear
twice (harness.spark.reruns: the batches in the offset log beyond the commit log; with asynchronous progress
tracking everything after the last commit up to the input's end). `after_sink_write` with the Kafka sink has no
writer of the harness's to hold in (Spark's sink writes), so the fault watches the output topic instead: it kills
the driver frozen once the output topic has grown since the last commit this driver wrote, i.e. with records of a
batch not committed visible downstream. Its successor writes them again: the run has duplicates, all in the
declared ranges.

`phase` names the moment of the batch the kill cuts at (harness.spark.phases): `mid_batch` (the default, above),
`after_offsets` (offsets/N written, the sink not yet: the file sink's `_spark_metadata/N` absent),
`after_sink_write` (above; with the file sink: `_spark_metadata/N` written, commits/N not), `state_snapshot` (a
RocksDB snapshot's temporary file being written) and `first_commit` (batch 0's commit being written:
`commits/.0.<uuid>.tmp` there, `commits/0` not; real-time mode then refuses the restart with
STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY, declared as the query's expected failure). The moments of a
millisecond (a commit's temporary file) are caught by the kernel's notification of the file's creation
(harness.files.inotify), the driver frozen at once, the checkpoint observed frozen, and the kill made only when
the phase holds; the observation is recorded (`observed`) and judged (`kill_phase`, harness.checkers.faults).
"""
from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from typing import Any, Callable, Literal, TypeVar

from pydantic import Field, model_validator

from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.files.inotify import Watch
from harness.queries import resolve
from harness.sinks import sink_part
from harness.spark import CATCH_UP_TRIGGERS, sinkhold
from harness.spark.phases import FIRST_COMMIT_FAILURE, PHASES, hit as phase_hit, observe, state_partitions

T = TypeVar("T")
MIN_UPTIME_S = 5.0  # a fault on the query waits until the (restarted) query has run this long


def needs_running_query(scenario) -> str | None:
    """These faults act on the query while traffic flows; once/availableNow start it only after the traffic."""
    if scenario.spark.trigger.kind in CATCH_UP_TRIGGERS:
        return (f"needs a query running during the traffic (spark.trigger kind = \"processingTime\"); with "
                f"{scenario.spark.trigger.kind!r} the query only starts after the traffic")
    return None


def rewritable(ctx) -> list:
    """The input ranges whose rows the sink may write again if the batches in flight now are re-run (a driver's
    successor re-runs them; a lost executor's tasks are retried), as the sink part declares them (harness.sinks):
    with an at-least-once sink (Kafka's) from the checkpoint as it is now; none with the file sink (it skips a
    re-run batch) or a query's own sink (the writer's to make exactly-once)."""
    return sink_part(ctx.scenario.spark.sink).rewritable(ctx)


def wait_running(ctx, timeout: float, min_uptime_s: float = MIN_UPTIME_S) -> dict:
    """Until the current query process has been running its query for `min_uptime_s` (a restarted one is past
    its start-up and into its recovery batch, or beyond); returns its status."""
    def ready():
        query = ctx.query
        if query is None or query.child is None or not query.child.alive():
            return None
        status = query.status()
        if status.get("state") != "started" or time.time() - float(status.get("at", 0)) < min_uptime_s:
            return None
        return status

    try:
        return ctx.wait_for(ready, timeout, "the query to run", interval=0.1)
    except TimeoutError as exc:
        raise FaultError(f"{exc}; the query is {ctx.query.status().get('state') if ctx.query else 'absent'!r}"
                         ) from None


def batch_in_flight(ctx) -> int | None:
    """The batch id the offset log holds beyond the commit log, if any."""
    offsets, commits = ctx.offset_log(), ctx.commit_log()
    if offsets and (not commits or offsets[-1] > commits[-1]):
        return offsets[-1]
    return None


def last_progress_batch(ctx) -> int:
    """batchId of the last StreamingQueryProgress on disk (-1 if none)."""
    path = ctx.run_dir / "progress.jsonl"
    try:
        with open(path, "rb") as f:
            start = f.seek(max(0, f.seek(0, os.SEEK_END) - 262_144))
            lines = f.read().split(b"\n")
    except OSError:
        return -1
    for line in reversed(lines[1:] if start else lines):  # a tail read may begin mid-line
        try:
            return int(json.loads(line)["batchId"])
        except (ValueError, KeyError, TypeError):
            continue
    return -1


@contextmanager
def frozen(child):
    """SIGSTOP the query's process group (driver JVM, executors, Python workers) until the block ends; a group
    killed inside the block is left alone."""
    _killpg(child.pid, signal.SIGSTOP)
    try:
        _wait_stopped(child.pid)
        yield
    finally:
        if child.alive():
            _killpg(child.pid, signal.SIGCONT)


def act_when(ctx, state: Callable[[], T | None], timeout: float, action: Callable[[T], Any],
             poll_s: float = 0.02) -> tuple[T, Any] | None:
    """Run `action(value)` with the query frozen at a moment where `state()` returns a value (checked again while
    frozen, so nothing moves in between); None if no such moment came within `timeout` seconds. `state` is polled
    every `poll_s`: short moments (between two back-to-back batches) need a short poll."""
    deadline = time.monotonic() + timeout
    while True:
        hit = _act_frozen(ctx, state, state, action)
        if hit is not None:
            return hit
        if time.monotonic() > deadline:
            return None
        time.sleep(poll_s)


def act_on_create(ctx, dirs: list, state: Callable[[], T | None], timeout: float, action: Callable[[T], Any],
                  poll_s: float = 0.5, ready: Callable[[], Any] | None = None) -> tuple[T, Any] | None:
    """As `act_when`, woken by a file created or renamed into one of `dirs` (inotify) rather than a poll, for
    moments too short to poll for (a commit's temporary file lives about a millisecond): the query is frozen as
    soon as `state()` holds after such an event (or every `poll_s`), `state()` checked again frozen. `ready`, when
    given, is the cheap test before the freeze (`state` then only runs frozen: a broker round trip)."""
    deadline = time.monotonic() + timeout
    try:  # a log's directory is made when the query first writes to it
        ctx.wait_for(lambda: all(d.is_dir() for d in dirs) or None, timeout, f"the directories {dirs}")
    except TimeoutError:
        return None
    with Watch(dirs) as watch:
        while True:
            hit = _act_frozen(ctx, ready or state, state, action)
            if hit is not None:
                return hit
            if time.monotonic() > deadline:
                return None
            watch.names(min(poll_s, max(0.0, deadline - time.monotonic())))


def _act_frozen(ctx, ready: Callable[[], Any], state: Callable[[], T | None],
                action: Callable[[T], Any]) -> tuple[T, Any] | None:
    """When `ready()` holds: freeze the query, and with `state()` still holding, act there (value, what it did)."""
    child = ctx.query.child if ctx.query else None
    if child is None or not child.alive():
        raise FaultError("the query process is not running")
    if ready() is None:
        return None
    with frozen(child):
        value = state()
        return None if value is None else (value, action(value))


def _planned_at(ctx, batch: int) -> float:
    try:
        return (ctx.checkpoint / "offsets" / str(batch)).stat().st_mtime
    except OSError:
        return 0.0


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_stopped(pgid: int, timeout: float = 2.0) -> None:
    """SIGSTOP lands asynchronously: wait until every process of the group shows state T."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            leader = psutil.Process(pgid)
            procs = [leader] + leader.children(recursive=True)
            if all(p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE) for p in procs
                   if _pgid(p.pid) == pgid):
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.005)


def _ids(directory) -> list[int]:
    from harness.spark.checkpoint import batch_ids

    return batch_ids(directory) if directory is not None else []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


class DriverKillOptions(FaultOptions):
    kind: Literal["driver_kill"] = Field("driver_kill", description="driver_kill: the Spark driver SIGKILLed "
                                                                    "mid-batch and restarted from its checkpoint")
    mid_batch_timeout_s: float = Field(10.0, ge=0, le=300, description=(
        "wait this long for a batch the running process planned to be in flight and kill then, then as long again "
        "for any batch in flight (the one a restarted query re-runs); 0 kills at once wherever the query is. With no "
        "batch in flight in time the fault fails rather than pretend"))
    after_sink_write: bool = Field(False, description=(
        "for a query that owns its sink (foreachBatch): kill the driver right after the query's writer returned for "
        "a batch planned after the fault began and before Spark commits it, the moment a sink idempotent by batch "
        "id exists for. The driver holds itself there (harness.spark.sinkhold); the fault waits for that "
        "(the query's start-up, then mid_batch_timeout_s) and fails rather than kill anywhere else. With "
        "spark.sink = \"kafka\": kill it frozen once some of an uncommitted batch's records are in the output "
        "topic (its successor writes them again)"))

    phase: Literal[PHASES] | None = Field(None, description=(  # type: ignore[valid-type]
        "the moment of a batch the kill cuts at, observed frozen before the kill and judged (kill_phase): "
        "mid_batch (offsets/N written, commits/N not), after_offsets (offsets/N written, the sink's write not: "
        "the file sink's _spark_metadata/N absent), after_sink_write (the sink wrote batch N, commits/N not; "
        "= after_sink_write = true), state_snapshot (a RocksDB state snapshot's temporary .zip being written), "
        "first_commit (real-time mode: batch 0's commit being written, commits/.0.<uuid>.tmp there; the restart "
        "must fail with STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). Unset: mid_batch, not judged"))

    @model_validator(mode="after")
    def _after_write_waits(self):
        if self.after_sink_write:
            if self.phase not in (None, "after_sink_write"):
                raise ValueError(f"after_sink_write = true is phase = \"after_sink_write\"; phase is {self.phase!r}: "
                                 "give one")
            self.phase = "after_sink_write"
        if self.phase not in (None, "mid_batch") and self.mid_batch_timeout_s == 0:
            raise ValueError(f"phase = {self.phase!r} waits for its moment: mid_batch_timeout_s must be above 0")
        return self


@register
class DriverKill(Fault):
    kind = "driver_kill"
    Options = DriverKillOptions
    requires = "a query running during the traffic"
    takes_query_down = True

    def check(self, scenario) -> str | None:
        phase, spark = self.options.phase, scenario.spark
        if phase == "first_commit" and spark.trigger.kind != "realTime":
            return ("phase = \"first_commit\" declares real-time mode's refusal to restart after it "
                    f"({FIRST_COMMIT_FAILURE}): it needs spark.trigger kind = \"realTime\" (it is "
                    f"{spark.trigger.kind!r})")
        if phase == "state_snapshot" and (spark.state_store != "rocksdb" or spark.query == "passthrough"):
            return ("phase = \"state_snapshot\" cuts a RocksDB state snapshot's upload: it needs a stateful query "
                    f"(spark.query is {spark.query!r}) with spark.state_store = \"rocksdb\" (it is "
                    f"{spark.state_store!r})")
        if phase == "first_commit":
            return None  # the query starts with the traffic; the kill is in its first batch
        return needs_running_query(scenario)

    def declare_duplicates(self, ctx) -> None:
        """The input ranges the dead driver's successor writes again, read from the checkpoint as it left it
        (called once it is dead, before the restart can happen)."""
        self.effect.duplicates = rewritable(ctx)

    def _kill(self, ctx, then=None):
        """SIGKILL the driver; then (dead, not yet restarted) the duplicates it allows, and `then`."""
        def after():
            try:
                self.declare_duplicates(ctx)
            finally:
                if then is not None:
                    then()

        return ctx.query.kill(then=after)

    def inject(self, ctx) -> dict:
        phase, sink = self.options.phase, sink_part(ctx.scenario.spark.sink)
        own_sink = resolve(ctx.scenario.spark.query).foreach_batch is not None
        if phase == "after_sink_write" and sink.kill_after_write and not own_sink:
            return self._kill_after_visible_write(ctx)
        if phase == "after_sink_write" and (own_sink or sink.batch_log(ctx) is None):
            return self._kill_after_sink_write(ctx)
        if phase == "after_offsets" and own_sink:
            return self._kill_after_sink_write(ctx, point="before")
        if phase == "after_offsets" and sink.kill_after_write:
            return self._kill_before_visible_write(ctx)
        if phase not in (None, "mid_batch"):
            return self._kill_at_phase(ctx, phase)
        return {"phase": phase, **self._kill_mid_batch(ctx)} if phase else self._kill_mid_batch(ctx)

    def _kill_mid_batch(self, ctx) -> dict:
        status = wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        before = {"offset_log_last": (ctx.offset_log() or [None])[-1],
                  "commit_log_last": (ctx.commit_log() or [None])[-1]}
        timeout = self.options.mid_batch_timeout_s
        if timeout == 0:
            code = self._kill(ctx)
            batch = batch_in_flight(ctx)  # the checkpoint as the dead driver left it
            return {"mid_batch": batch is not None, "batch": batch, "exit_code": code,
                    "query_started_at": status.get("at"), **before}
        t0, started = time.monotonic(), float(status.get("at", 0))

        def new_batch_in_flight():
            """A batch this process planned itself (not the one it re-runs from the previous kill)."""
            batch = batch_in_flight(ctx)
            return batch if batch is not None and _planned_at(ctx, batch) >= started else None

        seen: dict = {}

        def kill(batch):
            seen.update(observe(ctx.checkpoint, batch, None))  # frozen: the checkpoint as the kill cuts it
            return self._kill(ctx)

        # rather a batch of its own; failing that, the recovery batch it is still re-running
        hit = (act_when(ctx, new_batch_in_flight, timeout, kill)
               or act_when(ctx, lambda: batch_in_flight(ctx), timeout, kill))
        if hit is None:
            raise FaultError(f"no batch in flight within {2 * timeout:g}s (offset log and commit log stayed level): "
                             "the driver was not killed")
        batch, code = hit
        # the commit log after the kill proves the batch was cut before Spark could commit it
        committed = (ctx.checkpoint / "commits" / str(batch)).exists()
        return {"mid_batch": not committed, "batch": batch, "offset_log_last": batch,
                "recovery_batch": _planned_at(ctx, batch) < started,  # planned by the process killed before
                "commit_log_last": (ctx.commit_log() or [None])[-1], "waited_s": round(time.monotonic() - t0, 3),
                "exit_code": code, "query_started_at": status.get("at"), "kills_so_far": ctx.query.kills,
                "observed": seen}

    def _kill_at_phase(self, ctx, phase: str) -> dict:
        """Kill the driver frozen at `phase` (harness.spark.phases), woken by the file that marks its start: the
        offset log's entry (after_offsets), the file sink's log entry (after_sink_write), a state snapshot's
        temporary file (state_snapshot), batch 0's commit's temporary file (first_commit)."""
        ck, sink, t0 = ctx.checkpoint, sink_part(ctx.scenario.spark.sink), time.monotonic()
        timeout = ctx.scenario.spark.start_timeout_s + self.options.mid_batch_timeout_s
        if phase == "first_commit":
            self.effect.failure = FIRST_COMMIT_FAILURE  # declared before the restart can fail with it
            ctx.wait_for(lambda: (ck / "commits").is_dir() or None, timeout, "the query's commit log")
            if (ck / "commits" / "0").exists():
                raise FaultError("batch 0 was committed before the fault began (at_s too late): not killed")
        else:
            wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        from_batch = (ctx.offset_log() or [-1])[-1] + 1  # a batch this driver plans itself
        log = None if resolve(ctx.scenario.spark.query).foreach_batch else sink.batch_log(ctx)

        def batch() -> int | None:
            if phase == "first_commit":
                return 0
            if phase == "after_sink_write":
                written = [n for n in _ids(log) if n >= from_batch]
                return written[-1] if written else None
            n = batch_in_flight(ctx)  # state_snapshot too: a version after one this driver committed to load
            return n if n is not None and n >= from_batch else None

        def state() -> dict | None:
            n = batch()
            seen = observe(ck, n, None if log is None or n is None else (log / str(n)).exists())
            return seen if n is not None and phase_hit(phase, seen)[0] else None

        dirs = {"after_offsets": [ck / "offsets"], "after_sink_write": [log], "first_commit": [ck / "commits"]}
        watched = dirs.get(phase) or ctx.wait_for(lambda: state_partitions(ck) or None, timeout,
                                                   "the query's state store directories")
        found = act_on_create(ctx, [d for d in watched if d is not None], state, timeout,
                              lambda seen: self._kill(ctx))
        if found is None:
            raise FaultError(f"phase {phase!r} did not come within {timeout:g}s (the query's start-up and "
                             "mid_batch_timeout_s): the driver was not killed")
        seen, code = found
        return {"phase": phase, "observed": seen, "batch": seen["batch"], "mid_batch": not seen["commit"],
                "offset_log_last": (ctx.offset_log() or [None])[-1],
                "commit_log_last": (ctx.commit_log() or [None])[-1],
                "waited_s": round(time.monotonic() - t0, 3), "exit_code": code, "kills_so_far": ctx.query.kills,
                **({"expected_failure": self.effect.failure} if self.effect.failure else {})}

    def _kill_before_visible_write(self, ctx) -> dict:
        """after_offsets on a sink seen only downstream (the Kafka sink's output topic): the output's size read once
        commits/N-1 is written and while offsets/N is not yet (so none of N is in it), then the driver frozen the
        moment offsets/N appears (inotify) and the output read again: the same size is batch N planned and none
        of it written. A batch planned before that reading came back is passed over."""
        wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        ck, sink, t0 = ctx.checkpoint, sink_part(ctx.scenario.spark.sink), time.monotonic()
        from_batch, base = (ctx.offset_log() or [-1])[-1] + 1, {"commit": None, "for": None, "size": 0}

        def ready() -> int | None:
            commit = (ctx.commit_log() or [-1])[-1]
            if base["commit"] != commit:
                size = sink.visible_output(ctx)
                planned = (ck / "offsets" / str(commit + 1)).exists()  # read after the size: none of it before
                base.update(commit=commit, size=size, **{"for": None if planned else commit + 1})
            n = batch_in_flight(ctx)
            return n if n is not None and n >= from_batch and n == base["for"] else None

        def state() -> dict | None:
            n = ready()
            if n is None:
                return None
            seen = observe(ck, n, sink.visible_output(ctx) > base["size"])
            seen["output_at_commit"] = base["size"]
            return seen if phase_hit("after_offsets", seen)[0] else None

        timeout = ctx.scenario.spark.start_timeout_s + self.options.mid_batch_timeout_s
        found = act_on_create(ctx, [ck / "offsets", ck / "commits"], state, timeout, lambda seen: self._kill(ctx),
                              ready=ready)
        if found is None:
            raise FaultError(f"no batch was planned with the output read before it within {timeout:g}s (the query's "
                             "start-up and mid_batch_timeout_s; batches back to back leave no moment to read it): "
                             "the driver was not killed")
        seen, code = found
        return {"phase": "after_offsets", "observed": seen, "batch": seen["batch"], "mid_batch": not seen["commit"],
                "offset_log_last": (ctx.offset_log() or [None])[-1],
                "commit_log_last": (ctx.commit_log() or [None])[-1],
                "waited_s": round(time.monotonic() - t0, 3), "exit_code": code, "kills_so_far": ctx.query.kills,
                "duplicates_declared": sum(r.end - r.start for r in self.effect.duplicates)}

    def _kill_after_sink_write(self, ctx, point: str = "after") -> dict:
        """Ask the driver to hold after its next batch's write (harness.spark.sinkhold), kill it held there; with
        point "before", before the writer is called (after_offsets for a query that owns its sink)."""
        control, t0 = ctx.query.control, time.monotonic()
        # a batch planned from now on: not the one a restarting driver re-runs from an earlier kill
        from_batch = (ctx.offset_log() or [-1])[-1] + 1
        wait_s = ctx.scenario.spark.start_timeout_s + self.options.mid_batch_timeout_s
        sinkhold.request(control, from_batch, timeout_s=wait_s + 30, point=point)
        try:
            def holding():
                child, hold = ctx.query.child, sinkhold.held(control)
                if hold and child is not None and child.alive() and hold["pid"] == child.pid \
                        and hold["batch"] == batch_in_flight(ctx):
                    return hold
                return None

            try:
                hold = ctx.wait_for(holding, wait_s, "the driver to hold after a batch's write", interval=0.05)
            except TimeoutError:
                raise FaultError(f"no batch from {from_batch} on reached the writer's {point} failpoint within "
                                 f"{wait_s:g}s (the query's start-up and mid_batch_timeout_s): the driver was not "
                                 "killed") from None
            # held: the writer returned and Spark cannot commit the batch until foreachBatch returns
            seen = observe(ctx.checkpoint, int(hold["batch"]), point == "after")
            # released before the restart can happen: the successor re-runs this batch and must not hold again
            code = self._kill(ctx, then=lambda: sinkhold.release(control))
        finally:
            sinkhold.release(control)
        batch = int(hold["batch"])
        return {"phase": "after_sink_write" if point == "after" else "after_offsets", "observed": seen,
                "mid_batch": not (ctx.checkpoint / "commits" / str(batch)).exists(),
                "after_sink_write": point == "after",
                "batch": batch, "written_at": hold["at"], "offset_log_last": batch,
                "commit_log_last": (ctx.commit_log() or [None])[-1], "waited_s": round(time.monotonic() - t0, 3),
                "exit_code": code, "kills_so_far": ctx.query.kills}

    def _kill_after_visible_write(self, ctx) -> dict:
        """Kill the driver frozen while the sink's output visible downstream (the Kafka sink's output topic) holds
        rows of a batch not committed: grown since the last commit this driver wrote (its rows were all visible
        before the commit was written, so what came after it is a later batch's). Works alike when progress is
        committed in the background (asynchronous progress tracking logs only some batches' offsets, so no batch
        need ever show as in flight)."""
        status = wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        started, t0 = float(status.get("at", 0)), time.monotonic()
        sink = sink_part(ctx.scenario.spark.sink)
        before: dict = {}  # the output's size once the last commit was written, and that commit

        def written_not_committed():
            commit = (ctx.commit_log() or [-1])[-1]
            size = sink.visible_output(ctx)
            if (ctx.commit_log() or [-1])[-1] != commit:
                return None  # a commit landed while the size was read: no baseline from this reading
            if before.get("commit") != commit:
                before.update(size=size, commit=commit, at=time.time())
                return None
            if before["at"] < started or size <= before["size"]:
                return None
            return {"after_commit": commit, "visible": size - before["size"], "in_flight": batch_in_flight(ctx)}

        timeout = ctx.scenario.spark.start_timeout_s + self.options.mid_batch_timeout_s
        seen: dict = {}

        def kill(found):
            seen.update(observe(ctx.checkpoint, found["in_flight"], found["visible"] > 0))  # frozen
            return self._kill(ctx)

        hit = act_when(ctx, written_not_committed, timeout, kill)
        if hit is None:
            raise FaultError(f"no batch had rows visible in {sink.title}'s output before its commit within "
                             f"{timeout:g}s (the query's start-up and mid_batch_timeout_s): the driver was not killed")
        found, code = hit
        batch = found["in_flight"]
        return {"phase": "after_sink_write", "observed": seen,
                "mid_batch": batch is not None and not (ctx.checkpoint / "commits" / str(batch)).exists(),
                "after_sink_write": True, "batch": batch, "after_commit": found["after_commit"],
                "output_records_visible": found["visible"], "offset_log_last": (ctx.offset_log() or [None])[-1],
                "commit_log_last": (ctx.commit_log() or [None])[-1], "waited_s": round(time.monotonic() - t0, 3),
                "exit_code": code, "kills_so_far": ctx.query.kills,
                "duplicates_declared": sum(r.end - r.start for r in self.effect.duplicates)}

    def heal(self, ctx) -> dict:
        return {}  # the runner's supervision restarts the query from its checkpoint
