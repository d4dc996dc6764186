"""One worker of the run's standalone cluster (`spark.cluster = "standalone"`) SIGKILLed, preferably while a
batch is in flight; healed by starting it again on the same ports.

A worker's JVM dies without a word: its executors see their worker go and exit, the master drops the worker and
its executors, and the driver loses their tasks (ExecutorLostFailure), which it retries on what is left (the
other workers' executors) or, with no executor left, once the worker is back. The batch completes once, so
nothing may be lost or duplicated: the declared effect is none. Healing starts the worker where it was, waits
until the master lists every worker ALIVE and the cluster runs its executors again, and records what the driver
logged about the loss.
"""
from __future__ import annotations

import re
import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.driver_kill import act_when, batch_in_flight, needs_running_query, rewritable, wait_running
from harness.faults.executor_kill import REPLACEMENT_TIMEOUT_S, _driver_log_tail, executors, expected_executors, \
    seeded_pick, wait_for_executors


class WorkerKillOptions(FaultOptions):
    kind: Literal["worker_kill"] = Field("worker_kill", description="worker_kill: one worker of the standalone "
                                                                    "cluster SIGKILLed")
    worker: int | None = Field(None, ge=0, description="the worker's index (default: drawn from the seed)")
    mid_batch_timeout_s: float = Field(10.0, ge=0, le=300, description=(
        "wait this long for a batch in flight before killing (killed anyway after it; the detail says which)"))


@register
class WorkerKill(Fault):
    kind = "worker_kill"
    Options = WorkerKillOptions
    requires = 'spark.cluster = "standalone"'

    @classmethod
    def pinned(cls, detail: dict) -> dict:
        return {"worker": detail["worker"]} if isinstance(detail.get("worker"), int) else {}

    def __init__(self, options):
        super().__init__(options)
        self.killed: tuple[int, int, dict[int, str]] | None = None  # (worker index, pid, its executors)

    def check(self, scenario) -> str | None:
        spark = scenario.spark
        if not spark.standalone:
            return ("needs spark.cluster = \"standalone\" (the run's own workers to kill); got spark.master = "
                    f"{spark.master!r}")
        if self.options.worker is not None and self.options.worker >= spark.workers:
            return f"worker = {self.options.worker} but the cluster has {spark.workers} workers (0-based)"
        return needs_running_query(scenario)

    def inject(self, ctx) -> dict:
        from harness.spark.cluster import spark_cluster

        cluster = spark_cluster(ctx)
        wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        wait_for_executors(ctx, expected_executors(ctx.scenario))
        rng = seeded_pick(ctx, "worker_kill")  # drawn even when pinned: later picks stay where they were
        index = self.options.worker if self.options.worker is not None else rng.randrange(len(cluster.workers))

        def kill(batch):
            hosted = cluster.executors(index)
            # read before the kill: once the retried tasks finish, the batch commits and the range is gone
            self.effect.duplicates = rewritable(ctx)
            return cluster.kill_worker(index), hosted

        t0 = time.monotonic()
        hit = act_when(ctx, lambda: batch_in_flight(ctx), self.options.mid_batch_timeout_s, kill)
        batch = None
        if hit is None:  # no batch in flight in time: kill anyway, and say so
            pid, hosted = kill(None)
        else:
            batch, (pid, hosted) = hit
        self.killed = (index, pid, hosted)
        return {"worker": index, "pid": pid, "executors": {str(k): v for k, v in hosted.items()},
                "mid_batch": hit is not None, "batch": batch, "waited_s": round(time.monotonic() - t0, 3)}

    def heal(self, ctx) -> dict:
        from harness.spark.cluster import alive_workers, spark_cluster

        if self.killed is None:
            return {}
        index, pid, hosted = self.killed
        self.killed = None
        cluster = spark_cluster(ctx)
        expected = expected_executors(ctx.scenario)
        t0 = time.monotonic()
        try:
            state = cluster.restart_worker(index, REPLACEMENT_TIMEOUT_S)
            back_after = time.monotonic() - t0
            now = ctx.wait_for(lambda: (e := executors(ctx)) and len(e) >= expected and not set(e) & set(hosted)
                               and e, REPLACEMENT_TIMEOUT_S, f"{expected} executors again", interval=0.5)
        except (TimeoutError, RuntimeError) as exc:
            raise FaultError(f"{exc}; executors now {executors(ctx)}") from None
        log = _driver_log_tail(ctx)
        lost = sum(len(re.findall(rf"Lost executor {re.escape(e)}\b", log)) for e in hosted.values())
        return {"worker_alive_after_s": round(back_after, 2),
                "executors_after_s": round(time.monotonic() - t0, 2),
                "alive_workers": len(alive_workers(state)), "executors": {str(k): v for k, v in now.items()},
                "driver_log_lost_executor": lost,
                "driver_log_lost_tasks": len(re.findall(r"Lost task .*ExecutorLostFailure", log))}
