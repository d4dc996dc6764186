"""The Spark driver or one executor JVM frozen (SIGSTOP) for as long as the scenario says, then resumed (SIGCONT):
a long GC pause, a VM stalled by its host, a process stopped by a debugger. Pause, not kill: the same JVM carries
on afterwards, so the runner restarts nothing (a broker is paused by the `broker` fault, mode = "pause").

executor (on the run's standalone cluster, `spark.cluster = "standalone"`, or local-cluster): frozen mid-batch
where it can be. It sends no heartbeats; past `spark.network.timeout` (checked every
`spark.network.timeoutInterval`) the driver's HeartbeatReceiver removes it, its running tasks fail with
ExecutorLostFailure and run again on another executor, and the master has its worker kill it (a frozen JVM dies
of SIGKILL only) and launch a replacement. A pause shorter than the timeout leaves it in place. The fault
declares which (harness.effects.LogExpectation: judged by `spark_logged` on the driver's and the event log) and,
for an at-least-once sink, the batches in flight as rewritable. The file sink keeps the output exactly-once:
a re-run task's files are not in `_spark_metadata`, and a resumed zombie's late files neither (apache/spark#57976).

driver: its process group frozen, mid-batch where it can be (the executors on a cluster run on without it). It
plans and commits nothing while frozen and must carry on where it stood: `query_resumed` judges that it was not
restarted and ran a batch soon after the heal. What Spark logged about it is recorded in the heal's detail.
"""
from __future__ import annotations

import os
import re
import signal
import time
from typing import Literal

from pydantic import Field, model_validator

from harness.effects import LogExpectation
from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.driver_kill import _killpg, _wait_stopped, batch_in_flight, needs_running_query, rewritable, \
    wait_running
from harness.faults.executor_kill import (LOCAL_CLUSTER, REPLACEMENT_TIMEOUT_S, _driver_log_tail, executors,
                                         expected_executors, seeded_pick, wait_for_executors)
from harness.text.durations import spark_time_string_ms

EXIT_WATCH_S = 15.0  # after the heal, how long to watch whether the resumed executor JVM exits (or lingers)
# Spark's defaults (SparkConf, org.apache.spark.internal.config)
DEFAULT_NETWORK_TIMEOUT = "120s"
DEFAULT_TIMEOUT_INTERVAL = "60s"
DEFAULT_HEARTBEAT = "10s"


class PauseOptions(FaultOptions):
    kind: Literal["pause"] = Field("pause", description="pause: the driver or an executor JVM frozen (SIGSTOP) for "
                                                        "duration_s, then resumed (SIGCONT)")
    target: Literal["driver", "executor"] = Field("executor", description=(
        "executor: one executor JVM (standalone or local-cluster); driver: the query's driver process group"))
    mid_batch_timeout_s: float = Field(10.0, ge=0, le=300, description=(
        "wait this long for a batch in flight before pausing (paused anyway after it; the detail says which)"))

    @model_validator(mode="after")
    def _has_duration(self):
        if self.heal_after_s is None or self.heal_after_s <= 0:
            raise ValueError("a pause needs duration_s > 0 or window = [start_s, end_s]: how long it stays frozen")
        return self


def timeouts_ms(scenario) -> dict[str, int]:
    """spark.network.timeout (seconds without a suffix), spark.network.timeoutInterval and
    spark.executor.heartbeatInterval (milliseconds without one), as the scenario's [spark.conf] sets them."""
    conf = scenario.spark_conf()

    def ms(key: str, default: str, bare_unit: str) -> int:
        value = str(conf.get(key, default)).strip()
        return spark_time_string_ms(value + bare_unit if value.isdigit() else value)

    return {"network_timeout_ms": ms("spark.network.timeout", DEFAULT_NETWORK_TIMEOUT, "s"),
            "timeout_interval_ms": ms("spark.network.timeoutInterval", DEFAULT_TIMEOUT_INTERVAL, "ms"),
            "heartbeat_ms": ms("spark.executor.heartbeatInterval", DEFAULT_HEARTBEAT, "ms")}


def executor_expectations(executor_id: str, pause_s: float, t: dict[str, int]) -> list[LogExpectation]:
    """What Spark must log about an executor frozen for `pause_s`: removed for want of heartbeats and lost when
    the pause outlasts the timeout, the check's interval and a heartbeat's period (the last heartbeat may have
    come a period before the freeze); neither when it ends before the timeout less a period; nothing declared in
    between (either may happen)."""
    pause_ms = pause_s * 1000.0
    if pause_ms > t["network_timeout_ms"] + t["timeout_interval_ms"] + t["heartbeat_ms"]:
        return [LogExpectation("heartbeat_timeout", executor_id, 1, None),
                LogExpectation("executor_lost", executor_id, 1, None)]
    if pause_ms < t["network_timeout_ms"] - t["heartbeat_ms"]:
        return [LogExpectation("heartbeat_timeout", executor_id, 0, 0),
                LogExpectation("executor_lost", executor_id, 0, 0)]
    return []


@register
class Pause(Fault):
    kind = "pause"
    Options = PauseOptions
    requires = "a query running during the traffic; target = \"executor\" needs separate executor JVMs"
    checks = ("query_resumed", "spark_logged")

    def __init__(self, options):
        super().__init__(options)
        self.effect.query_paused = True
        self.paused: dict | None = None  # {"pid", "executor_id", "group", "at"}

    def check(self, scenario) -> str | None:
        if self.options.target == "executor" and not (LOCAL_CLUSTER.match(scenario.spark.master)
                                                      or scenario.spark.standalone):
            return (f"target = \"executor\" needs spark.cluster = \"standalone\" or spark.master = "
                    f"\"local-cluster[N,1,1024]\" (a separate executor JVM to freeze); got {scenario.spark.master!r}, "
                    "where executors live inside the driver")
        return needs_running_query(scenario)

    def inject(self, ctx) -> dict:
        wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        timeouts = timeouts_ms(ctx.scenario)
        pause_s = float(self.options.heal_after_s or 0.0)
        t0 = time.monotonic()
        if self.options.target == "driver":
            detail = self._freeze_driver(ctx)
        else:
            detail = self._freeze_executor(ctx)
            self.effect.expect_log = executor_expectations(detail["executor_id"], pause_s, timeouts)
        return {**detail, "target": self.options.target, "pause_s": pause_s, **timeouts,
                "declared": [x.__dict__ for x in self.effect.expect_log], "waited_s": round(time.monotonic() - t0, 3)}

    def _freeze_driver(self, ctx) -> dict:
        """SIGSTOP the driver's process group at a moment a batch is in flight (checked again once frozen), or
        wherever it is after mid_batch_timeout_s."""
        deadline = time.monotonic() + self.options.mid_batch_timeout_s
        while True:
            child = ctx.query.child if ctx.query else None
            if child is None or not child.alive():
                raise FaultError("the query process is not running")
            if batch_in_flight(ctx) is not None or time.monotonic() > deadline:
                _killpg(child.pid, signal.SIGSTOP)
                _wait_stopped(child.pid)
                batch = batch_in_flight(ctx)
                if batch is not None or time.monotonic() > deadline:
                    self.effect.duplicates = rewritable(ctx)
                    self.paused = {"pid": child.pid, "group": True, "at": time.monotonic()}
                    return {"pid": child.pid, "mid_batch": batch is not None, "batch": batch}
                _killpg(child.pid, signal.SIGCONT)  # the batch ended in between: try again
            time.sleep(0.02)

    def _freeze_executor(self, ctx) -> dict:
        wait_for_executors(ctx, expected_executors(ctx.scenario))
        rng = seeded_pick(ctx, "pause")
        deadline = time.monotonic() + self.options.mid_batch_timeout_s
        while batch_in_flight(ctx) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        found = _jvms(executors(ctx))
        pid = rng.choice(sorted(found))
        self.effect.duplicates = rewritable(ctx)  # read before the freeze: its tasks may be re-run elsewhere
        batch = batch_in_flight(ctx)
        os.kill(pid, signal.SIGSTOP)
        self.paused = {"pid": pid, "executor_id": found[pid], "group": False, "at": time.monotonic()}
        return {"pid": pid, "executor_id": found[pid], "executors": {str(k): v for k, v in found.items()},
                "mid_batch": batch is not None, "batch": batch}

    def heal(self, ctx) -> dict:
        if self.paused is None:
            return {}
        paused, self.paused = self.paused, None
        hold = float(self.options.heal_after_s or 0.0) - (time.monotonic() - paused["at"])
        if hold > 0:  # the schedule ran late: the pause gets its full duration
            time.sleep(hold)
        pid = paused["pid"]
        alive = _alive(pid)
        detail = {"paused_s": round(time.monotonic() - paused["at"], 2), "alive_at_resume": alive}
        if alive:
            (_killpg if paused["group"] else _kill)(pid, signal.SIGCONT)
        if paused["group"]:  # what Spark did about it shows a moment later: recorded, not declared
            time.sleep(min(EXIT_WATCH_S, float(self.options.heal_after_s or 0.0)))
            log = _driver_log_tail(ctx)
            return {**detail, "driver_log_heartbeat_timeouts": len(re.findall(r"with no recent heartbeats", log)),
                    "driver_log_lost_executor": len(re.findall(r"Lost executor \S+ on", log))}
        return {**detail, **self._after_executor_resumed(ctx, pid, paused["executor_id"])}

    def _after_executor_resumed(self, ctx, pid: int, executor_id: str) -> dict:
        """The cluster whole again (a replacement launched when Spark removed the frozen executor), and whether
        the resumed JVM exited or lingers on (a zombie: apache/spark#57976)."""
        expected, removed = expected_executors(ctx.scenario), bool(self.effect.expect_log) and \
            self.effect.expect_log[0].minimum > 0
        t0 = time.monotonic()
        try:
            now = ctx.wait_for(lambda: (e := executors(ctx)) and len(e) >= expected and (pid not in e or not removed)
                               and e, REPLACEMENT_TIMEOUT_S, f"{expected} executors after the pause", interval=0.5)
        except TimeoutError as exc:
            raise FaultError(f"{exc}; executors now {executors(ctx)}") from None
        whole_after = time.monotonic() - t0
        while _alive(pid) and pid not in executors(ctx) and time.monotonic() - t0 < EXIT_WATCH_S:
            time.sleep(0.5)
        return {"cluster_whole_after_s": round(whole_after, 2), "executors": {str(k): v for k, v in now.items()},
                "resumed_jvm_alive": _alive(pid), "resumed_jvm_listed": pid in executors(ctx)}


def _jvms(found: dict[int, str]) -> dict[int, str]:
    """The executor JVMs themselves: not a child a JVM forked a moment ago (before its exec it carries the same
    command line, so it looks like an executor too)."""
    import psutil

    out = {}
    for pid, executor_id in found.items():
        try:
            if psutil.Process(pid).ppid() not in found:
                out[pid] = executor_id
        except psutil.NoSuchProcess:
            continue
    return out


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
