"""Per-task read records (Python sources cannot report custom source metrics to Spark).

With `harness.metricsPath` set, each read task appends one JSON line to `<metricsPath>/tasks-<pid>.jsonl`: one
file per Python worker process, each record one write(2) on an O_APPEND descriptor, so concurrent tasks never
interleave. Fields are listed in the package README section.
"""
from __future__ import annotations

import json
import os
import socket
import threading

_executor_id: str | None = None


def executor_id() -> str:
    """Spark's id of the executor running this Python worker: the `--executor-id N` argument of the nearest
    ancestor executor JVM (CoarseGrainedExecutorBackend, also in local-cluster); 'driver' when the nearest JVM
    ancestor is the driver (local mode); 'unknown' when neither can be seen."""
    global _executor_id
    if _executor_id is None:
        _executor_id = _find_executor_id()
    return _executor_id


def _find_executor_id() -> str:
    try:
        import psutil

        process = psutil.Process(os.getpid())
        for ancestor in process.parents():
            try:
                cmdline = ancestor.cmdline()
            except (psutil.Error, OSError):
                continue
            if "--executor-id" in cmdline:
                i = cmdline.index("--executor-id")
                if i + 1 < len(cmdline):
                    return cmdline[i + 1]
            if cmdline and os.path.basename(cmdline[0]).startswith("java"):
                return "driver"
    except Exception:  # noqa: BLE001 - the id is a label, never a reason to fail a read
        pass
    return "unknown"


def task_info() -> dict:
    """Stage, partition and attempt of the running Spark task (empty outside a task)."""
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
    except Exception:  # noqa: BLE001
        ctx = None
    if ctx is None:
        return {"stage": None, "task_partition": None, "task_attempt": None, "task_id": None}
    return {"stage": ctx.stageId(), "task_partition": ctx.partitionId(), "task_attempt": ctx.attemptNumber(),
            "task_id": ctx.taskAttemptId()}


def process_info() -> dict:
    return {"pid": os.getpid(), "executor": executor_id(), "host": socket.gethostname(),
            "threads": threading.active_count()}


def append_record(directory: str, record: dict) -> None:
    os.makedirs(directory, exist_ok=True)
    line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")
    fd = os.open(os.path.join(directory, f"tasks-{os.getpid()}.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
