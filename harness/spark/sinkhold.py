"""Failpoints around a query's own sink write, for `driver_kill`'s `after_sink_write` and `after_offsets` phases.

A sink that is idempotent by batch id (foreachBatch upserts recording the batch id) exists for one moment: the
writer has committed the batch to its table, and the driver dies before Spark records the batch in the commit
log. Its successor hands the same batch over again. Catching that moment by timing is luck (a kill lands before
the write on a busy machine), so the fault asks the driver to stop there instead, as FoundationDB's failpoints
or Jepsen's pauses do: it writes a hold request into the run's control directory; the driver, right after the
query's writer returns for a batch at or beyond `from_batch`, says which batch it holds and waits (bounded by
the request's timeout) until the request is gone or it is killed.

Both sides are here: the fault's (`request`, `held`, `release`) and the driver's (`hold_if_requested`). A request
names its point: "after" the writer returned (after_sink_write), or "before" it is called (after_offsets: the
batch planned, in the offset log, nothing of it written: the one moment a foreachBatch writer logs nothing to
tell).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.files.atomic import write_json

REQUEST, HELD = "hold-after-sink-write.json", "sink-write-held.json"


POINTS = ("after", "before")


def request(control: Path, from_batch: int, timeout_s: float, point: str = "after") -> None:
    if point not in POINTS:
        raise ValueError(f"point {point!r}: allowed {', '.join(POINTS)}")
    write_json(control / REQUEST, {"from_batch": int(from_batch), "timeout_s": float(timeout_s), "point": point})


def held(control: Path) -> dict | None:
    """{batch, pid, at, point} of the batch a driver holds at a failpoint, if one does."""
    try:
        return json.loads((control / HELD).read_text())
    except (OSError, ValueError):
        return None


def release(control: Path) -> None:
    for name in (REQUEST, HELD):
        (control / name).unlink(missing_ok=True)


def hold_if_requested(control: Path, batch_id: int, point: str = "after") -> None:
    """The driver's side, called at `point`: before the writer is called, and after it returned (before Spark may
    commit the batch)."""
    try:
        ask = json.loads((control / REQUEST).read_text())
        if batch_id < int(ask["from_batch"]) or ask.get("point", "after") != point:
            return
        deadline = time.monotonic() + float(ask["timeout_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    write_json(control / HELD, {"batch": batch_id, "pid": os.getpid(), "at": time.time(), "point": point})
    try:
        while (control / REQUEST).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        (control / HELD).unlink(missing_ok=True)
