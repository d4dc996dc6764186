"""The checkpoint's storage is slow or failing: the object store the checkpoint (and the file sink) is written to
(`spark.checkpoint_store = "s3"`, harness.objstore) is reached through a TCP proxy of its own, and this fault acts
there: latency (latency_ms added to every chunk, each direction), bandwidth (bytes_per_s cap per direction),
reset (every open connection reset; with keep_resetting every new one too), or throttle (a `share` of S3 requests
answered 503 SlowDown, S3's throttling answer, given by the store itself: an HTTP answer, not a TCP one).
Only the query's S3A client goes through it; the brokers and the producers are never touched.

What it exercises: the offset log and commit log writes each batch makes (Spark's durationMs walCommit and
commitOffsets, apache/spark#31495 and #37474 on their cost on object stores), S3A's retries (of a reset request,
of a 503: fs.s3a.retry.*, fs.s3a.retry.throttle.*), and what asynchronous progress tracking
(asyncProgressTrackingEnabled) takes off the batch's path.

The effect on the data is none: exactly-once must hold (a slow or retried checkpoint write must not lose or
duplicate anything) and the query must not fail. What it declares about the checkpoint is judged by
harness.checkers.checkpoint: the store really saw checkpoint requests while the fault was on (a throttle really
answered some 503, a reset really cut connections), and for latency the batches that ran inside it paid the
latency in their checkpoint time, or, with asynchronous progress tracking, did not. Every inject and heal records
the store's request counts and the proxy's bytes, the heal what changed since the inject.
"""
from __future__ import annotations

import uuid
from typing import Literal

from pydantic import Field, model_validator

from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.network import check_mode_fields

MODE_FIELDS = {"latency": "latency_ms", "bandwidth": "bytes_per_s", "throttle": "share"}


class CheckpointStorageOptions(FaultOptions):
    kind: Literal["checkpoint_storage"] = Field("checkpoint_storage", description=(
        "checkpoint_storage: the object store the checkpoint is on is slow or failing (spark.checkpoint_store = "
        "\"s3\")"))
    mode: Literal["latency", "bandwidth", "reset", "throttle"] = Field(description=(
        "latency (latency_ms added), bandwidth (bytes_per_s cap), reset (connections reset) or throttle (a share of "
        "requests answered 503 SlowDown)"))
    latency_ms: float | None = Field(None, gt=0, le=600_000, description="mode latency: added to every chunk, "
                                                                         "each direction")
    bytes_per_s: int | None = Field(None, ge=1024, description="mode bandwidth: cap per direction")
    share: float | None = Field(None, gt=0, le=1, description="mode throttle: the share of S3 requests answered "
                                                              "503 SlowDown, above 0 up to 1")
    keep_resetting: bool = Field(False, description="mode reset: also reset every new connection until healed")

    @model_validator(mode="after")
    def _mode_fields(self):
        return check_mode_fields(self, MODE_FIELDS)


@register
class CheckpointStorage(Fault):
    kind = "checkpoint_storage"
    Options = CheckpointStorageOptions
    requires = "the checkpoint on the object store (spark.checkpoint_store = \"s3\")"

    def __init__(self, options: FaultOptions):
        super().__init__(options)
        self.entry = uuid.uuid4().hex[:12]  # this injection's knobs in the proxy, cleared by its heal
        self.before: dict | None = None  # the store's and the proxy's counts at the inject

    def check(self, scenario) -> str | None:
        if scenario.spark.checkpoint_store != "s3":
            return ("checkpoint_storage acts on the object store the checkpoint is written to: set "
                    f"spark.checkpoint_store = \"s3\" (it is {scenario.spark.checkpoint_store!r})")
        if self.options.heal_after_s is None:
            return "checkpoint_storage needs duration_s or window: what it did is judged over its window"
        return None

    def _store(self, ctx) -> dict:
        info = ctx.objstore
        if not info:
            raise FaultError("no S3 store in this run (spark.checkpoint_store is not \"s3\")")
        return info

    def _counts(self, ctx) -> dict:
        from harness.netproxy import control
        from harness.objstore import call

        info = self._store(ctx)
        store = call(info["direct"], "stats", {})
        proxy = control(info["control"], {"op": "stats"})["stats"]
        return {"requests": store["requests"], "throttled": store["throttled"], "server_errors": store["errors"],
                "connections": proxy["accepted"], "refused": proxy["refused"], "reset": proxy["reset"],
                "bytes": proxy["bytes"]}

    def inject(self, ctx) -> dict:
        from harness.netproxy import control
        from harness.objstore import call

        o, info = self.options, self._store(ctx)
        detail: dict = {"mode": o.mode}
        self.before = self._counts(ctx)  # before acting: a reset's cut connections count as the fault's
        if o.mode == "throttle":
            call(info["direct"], "throttle", {"share": o.share})
            detail["share"] = o.share
        elif o.mode == "reset":
            if o.keep_resetting:
                control(info["control"], {"op": "set", "id": self.entry, "reset_new": True})
            reply = control(info["control"], {"op": "reset"})
            detail.update(reset_connections=reply["reset"], keep_resetting=o.keep_resetting)
        else:
            knob = {"latency_ms": o.latency_ms} if o.mode == "latency" else {"bytes_per_s": o.bytes_per_s}
            control(info["control"], {"op": "set", "id": self.entry, **knob})
            detail.update(knob)
        detail["store"] = self.before
        return detail

    def heal(self, ctx) -> dict:
        from harness.netproxy import control
        from harness.objstore import call

        info = self._store(ctx)
        if self.options.mode == "throttle":
            call(info["direct"], "throttle", {"share": 0.0})
        control(info["control"], {"op": "clear", "id": self.entry})
        after = self._counts(ctx)
        detail: dict = {"store": after}
        if self.before is not None:
            detail["since_inject"] = _since(self.before, after)
        return detail


def _since(before: dict, after: dict) -> dict:
    """What the store and its proxy saw while the fault was on: requests, 503s given, connections, bytes."""
    out = {k: after[k] - before[k] for k in after if k != "bytes"}
    out["bytes"] = {d: after["bytes"][d] - before["bytes"].get(d, 0) for d in after["bytes"]}
    return out
