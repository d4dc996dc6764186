"""One executor JVM SIGKILLed under `local-cluster[N,C,M]` or on the run's standalone cluster (`spark.cluster =
"standalone"`: a worker's CoarseGrainedExecutorBackend child), preferably while a batch is in flight.

The driver lives on: the tasks the executor was running fail with ExecutorLostFailure and are retried elsewhere
(spark.task.maxFailures, 4 outside local mode), and the standalone master (inside local-cluster, or the run's
own) has the worker launch a replacement executor. The batch completes once, so nothing may be lost or
duplicated. Healing waits until the cluster has its N executors again (an error if no replacement comes) and
records what the driver logged.
"""
from __future__ import annotations

import os
import random
import re
import signal
import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.driver_kill import act_when, batch_in_flight, needs_running_query, rewritable, wait_running

LOCAL_CLUSTER = re.compile(r"^local-cluster\[(\d+),(\d+),(\d+)\]$")
EXECUTOR_MAIN = "CoarseGrainedExecutorBackend"
REPLACEMENT_TIMEOUT_S = 120.0


class ExecutorKillOptions(FaultOptions):
    kind: Literal["executor_kill"] = Field("executor_kill", description='executor_kill: one executor JVM SIGKILLed')
    mid_batch_timeout_s: float = Field(10.0, ge=0, le=300, description=(
        "wait this long for a batch in flight before killing (killed anyway after it; the detail says which)"))


def expected_executors(scenario) -> int:
    """Executors the cluster runs when whole: local-cluster's N; on the run's standalone cluster, each worker's
    cores over the executor's (spark.executor.cores, by default all of a worker's: one executor per worker)."""
    spark = scenario.spark
    if spark.standalone:
        per_executor = int(scenario.spark_conf().get("spark.executor.cores", spark.worker_cores))
        return spark.workers * max(1, spark.worker_cores // max(1, per_executor))
    return int(LOCAL_CLUSTER.match(spark.master).group(1))


def wait_for_executors(ctx, expected: int) -> None:
    """Every executor JVM the scenario starts is up (a replacement after an earlier fault included), or FaultError
    naming what was found: a fault that picks one picks among all of them."""
    try:
        ctx.wait_for(lambda: len(executors(ctx)) >= expected, REPLACEMENT_TIMEOUT_S, f"{expected} executor JVMs",
                     interval=0.5)
    except TimeoutError as exc:
        raise FaultError(f"{exc}; found {executors(ctx)}") from None


def seeded_pick(ctx, kind: str) -> random.Random:
    """The random source for this fault kind's next pick: the scenario's seed and how many picks the kind made so
    far in this run (ctx.fault_memory), so a run replays its choices and each injection draws anew."""
    n = ctx.fault_memory[f"{kind}_picks"] = ctx.fault_memory.get(f"{kind}_picks", 0) + 1
    return random.Random(f"{ctx.scenario.seed}:{kind}:{n}")


def executors(ctx) -> dict[int, str]:
    """{pid: Spark executor id} of the executor JVMs: under the run's standalone workers, else under the query's
    driver (local-cluster)."""
    import psutil

    from harness.spark.cluster import spark_cluster

    cluster = spark_cluster(ctx)
    if cluster is not None:
        return cluster.executors()
    query = ctx.query
    if query is None or query.child is None or not query.child.alive():
        return {}
    out = {}
    try:
        procs = psutil.Process(query.child.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    for proc in procs:
        try:
            argv = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if any(arg.endswith(EXECUTOR_MAIN) for arg in argv) and proc.status() != psutil.STATUS_ZOMBIE:
            out[proc.pid] = argv[argv.index("--executor-id") + 1] if "--executor-id" in argv else "?"
    return out


@register
class ExecutorKill(Fault):
    kind = "executor_kill"
    Options = ExecutorKillOptions
    requires = "spark.master = local-cluster[N,C,M] or spark.cluster = \"standalone\""

    def __init__(self, options):
        super().__init__(options)
        self.killed: tuple[int, str] | None = None
        self.expected = 0

    def check(self, scenario) -> str | None:
        if not (LOCAL_CLUSTER.match(scenario.spark.master) or scenario.spark.standalone):
            return (f"needs spark.master = \"local-cluster[N,1,1024]\" or spark.cluster = \"standalone\" "
                    f"(separate executor JVMs to kill); got {scenario.spark.master!r}, where executors live inside "
                    "the driver")
        return needs_running_query(scenario)

    def inject(self, ctx) -> dict:
        self.expected = expected_executors(ctx.scenario)
        wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        wait_for_executors(ctx, self.expected)
        rng = seeded_pick(ctx, "executor_kill")

        def kill(batch):
            found = executors(ctx)
            pid = rng.choice(sorted(found))
            # the retried tasks write their rows again (an at-least-once sink): the batches in flight, read before
            # the kill, since once the retries finish the batch commits and the range is gone from the logs
            self.effect.duplicates = rewritable(ctx)
            os.kill(pid, signal.SIGKILL)
            return pid, found[pid], found

        t0 = time.monotonic()
        hit = act_when(ctx, lambda: batch_in_flight(ctx), self.options.mid_batch_timeout_s, kill)
        batch = None
        if hit is None:  # no batch in flight in time: kill anyway, and say so
            pid, executor_id, found = kill(None)
        else:
            batch, (pid, executor_id, found) = hit
        self.killed = (pid, executor_id)
        return {"pid": pid, "executor_id": executor_id, "executors": {str(k): v for k, v in found.items()},
                "mid_batch": hit is not None, "batch": batch, "waited_s": round(time.monotonic() - t0, 3)}

    def heal(self, ctx) -> dict:
        if self.killed is None:
            return {}
        pid, executor_id = self.killed
        t0 = time.monotonic()

        def replaced():
            now = executors(ctx)
            return now if len(now) >= self.expected and pid not in now else None

        try:
            now = ctx.wait_for(replaced, REPLACEMENT_TIMEOUT_S, f"a replacement for executor {executor_id}",
                               interval=0.5)
        except TimeoutError as exc:
            raise FaultError(f"{exc}; executors now {executors(ctx)}") from None
        log = _driver_log_tail(ctx)
        return {"replaced_after_s": round(time.monotonic() - t0, 2),
                "executors": {str(k): v for k, v in now.items()},
                "driver_log_lost_executor": len(re.findall(rf"Lost executor {re.escape(executor_id)}\b", log)),
                "driver_log_lost_tasks": len(re.findall(r"Lost task .*ExecutorLostFailure", log))}


def _driver_log_tail(ctx, limit: int = 4_000_000) -> str:
    path = ctx.run_dir / "spark" / "driver.log"
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
