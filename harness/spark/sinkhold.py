"""A failpoint between a query's own sink write and Spark's commit, for `driver_kill` with `after_sink_write`.

A sink that is idempotent by batch id (foreachBatch upserts recording the batch id) exists for one moment: the
writer has committed the batch to its table, and the driver dies before Spark records the batch in the commit
log. Its successor hands the same batch over again. Catching that moment by timing is luck (a kill lands before
the write on a busy machine), so the fault asks the driver to stop there instead, as FoundationDB's failpoints
or Jepsen's pauses do: it writes a hold request into the run's control directory; the driver, right after the
query's writer returns for a batch at or beyond `from_batch`, says which batch it holds and waits (bounded by
the request's timeout) until the request is gone or it is killed.

Both sides are here: the fault's (`request`, `held`, `release`) and the driver's (`hold_if_requested`).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.files.atomic import write_json

REQUEST, HELD = "hold-after-sink-write.json", "sink-write-held.json"


def request(control: Path, from_batch: int, timeout_s: float) -> None:
    write_json(control / REQUEST, {"from_batch": int(from_batch), "timeout_s": float(timeout_s)})


def held(control: Path) -> dict | None:
    """{batch, pid, at} of the batch a driver holds after its write, if one does."""
    try:
        return json.loads((control / HELD).read_text())
    except (OSError, ValueError):
        return None


def release(control: Path) -> None:
    for name in (REQUEST, HELD):
        (control / name).unlink(missing_ok=True)


def hold_if_requested(control: Path, batch_id: int) -> None:
    """The driver's side, called after the writer returned and before Spark may commit the batch."""
    try:
        ask = json.loads((control / REQUEST).read_text())
        if batch_id < int(ask["from_batch"]):
            return
        deadline = time.monotonic() + float(ask["timeout_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    write_json(control / HELD, {"batch": batch_id, "pid": os.getpid(), "at": time.time()})
    try:
        while (control / REQUEST).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        (control / HELD).unlink(missing_ok=True)
