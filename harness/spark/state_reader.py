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


def read_state(ctx) -> None:
    """Phase: the state reader process, supervised like every child; its log is spark/state-reader.log."""
    if not wants_state(ctx.scenario.spark.query) or not ctx.state.drained:
        return
    env = dict(os.environ)
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"})
    env.pop("SPARK_HOME", None)
    out = ctx.run_dir / "state"
    started = time.time()
    ctx.timeline.add("state_read_started")  # the judge tells a reader that failed from a run without one
    with ctx.console.step("reading the final state from the checkpoint"):
        child = ctx.supervisor.spawn("state-reader", [sys.executable, "-m", "harness.spark.state_dump",
                                                      str(ctx.run_dir / "checkpoint"), str(out)],
                                     log_path=ctx.run_dir / "spark" / "state-reader.log", env=env)
        try:
            child.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:  # stopped below; no state/meta.json: the state check says unknown
            ctx.console.warn(f"the state reader did not finish within {TIMEOUT_S:g} s; stopped")
        finally:
            ctx.supervisor.stop(child, timeout=5.0)  # no-op when it exited; its group swept either way
    ctx.timeline.add("state_read", exit=child.proc.returncode, took_s=round(time.time() - started, 3))
