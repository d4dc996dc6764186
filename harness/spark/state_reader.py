"""The run pipeline's state phase: once the query drained and stopped, its final state is read from the
checkpoint by a small PySpark process (harness.spark.state_dump) into the run directory's `state/`, which the
state check (harness.checkers.state) judges without Spark.

Only for a query whose oracle implies its state (STATE_ORACLES: the windows not yet emitted, the sessions still
open); only when the query drained (a query that stopped with a declared failure, or never drained, left a
state nothing can be said of). One JVM start: a few seconds, recorded in state/meta.json (`took_s`) and on the
timeline.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from harness.queries import resolve

STATE_ORACLES = ("window_counts", "sessions")  # the oracles that say what the final state must hold
TIMEOUT_S = 180.0


def wants_state(query: str) -> bool:
    try:
        return resolve(query).oracle in STATE_ORACLES
    except Exception:  # noqa: BLE001 - a user's module may raise anything on import; the judge reports it
        return False


def start_reading(ctx, out_dir: str = "state", batch: int | None = None):
    """The state reader process on the run's checkpoint (the state `batch` committed, default its last commit)
    into `out_dir` of the run directory, supervised like every child, its log spark/<out_dir>-reader.log; its
    Child, running."""
    env = dict(os.environ)
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"})
    env.pop("SPARK_HOME", None)
    log = "state-reader.log" if out_dir == "state" else f"{out_dir}-reader.log"
    return ctx.supervisor.spawn("state-reader", [sys.executable, "-m", "harness.spark.state_dump",
                                                 str(ctx.run_dir / "checkpoint"), str(ctx.run_dir / out_dir),
                                                 *([] if batch is None else [str(batch)])],
                                log_path=ctx.run_dir / "spark" / log, env=env)


def finish_reading(ctx, child, timeout_s: float = TIMEOUT_S) -> int | None:
    """Wait for a state reader (bounded), then stop what is left of it; its exit code (None: stopped)."""
    try:
        child.proc.wait(timeout_s)
    except subprocess.TimeoutExpired:  # stopped below; no meta.json: the state check says unknown
        ctx.console.warn(f"the state reader did not finish within {timeout_s:g} s; stopped")
    finally:
        ctx.supervisor.stop(child, timeout=5.0)  # no-op when it exited; its group swept either way
    return child.proc.returncode


def read_state(ctx) -> None:
    """Phase: the final state read by the state reader process; its log is spark/state-reader.log."""
    if not wants_state(ctx.scenario.spark.query) or not ctx.state.drained:
        return
    started = time.time()
    ctx.timeline.add("state_read_started")  # the judge tells a reader that failed from a run without one
    with ctx.console.step("reading the final state from the checkpoint"):
        code = finish_reading(ctx, start_reading(ctx))
    ctx.timeline.add("state_read", exit=code, took_s=round(time.time() - started, 3))
