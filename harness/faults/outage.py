"""The restart after an outage: the query down for `down_s` while the traffic goes on, then started again from the
same checkpoint with the scenario's memory, as a job restarted after a maintenance window, a cluster outage or a
long redeploy (fink-broker#819, hudi#4713: the first batch after an outage reads the whole backlog, runs out of
memory, and the job crash-loops).

Inject stops the query (`stop = "graceful"`: `StreamingQuery.stop()` between batches; `"kill"`: SIGKILL wherever
it is) and keeps it down (harness.spark.process: `take_down`). With `retention_ms`, the topic's retention is cut
for the outage (as `retention` does), so Kafka ages out records the stopped query has not read: the outage longer
than the topic's retention. Heal, `down_s` after the injection, first restores the topic's configs and waits
until the log start offsets stop moving, then declares the loss exactly, [log start at the injection, log start at
the restart) per partition, and, under failOnDataLoss=true with removed records beyond what the query had planned,
the data-loss error the restarted query must fail with (`declare_cut`); then brings the query back with a
supervisor's restart policy: each failure restarted, up to `max_restarts` times, after which the supervisor gives
up and the query ends failed with QUERY_CRASH_LOOP (a crash-loop detected and bounded, never a hang).

What it declares: the query down (judged by `query_recovered` from the restart), the exact loss, the failure
(KAFKA_DATA_LOSS; or QUERY_CRASH_LOOP when the scenario says the restart must crash-loop: `crash_loop = true`, the
run then passes only if it does; with failOnDataLoss=true and records aged out, the data-loss error at every
restart is such a crash-loop, as a supervisor that restarts into it produces). What it records for the judge
(harness.analysis.outages): the committed and end offsets at the stop and at the restart, so the backlog the first
batch must read is known exactly, the log start at the restart, and the batch cap in force (`maxOffsetsPerTrigger`
/ `maxEventsPerTrigger`).
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field, model_validator

from harness.backends.capabilities import TopicAdmin
from harness.faults import register
from harness.faults.base import Fault, FaultOptions
from harness.faults.driver_kill import needs_running_query, wait_running
from harness.faults.retention import settled_start_offsets
from harness.spark.process import CRASH_LOOP

DATA_LOSS = "KAFKA_DATA_LOSS"


class OutageOptions(FaultOptions):
    kind: Literal["outage"] = Field("outage", description=(
        "outage: the query down for down_s while the traffic goes on, then restarted from its checkpoint"))
    down_s: float = Field(..., gt=0, le=3600, description="how long the query stays down (seconds)")
    stop: Literal["graceful", "kill"] = Field("graceful", description=(
        "how the query goes down: graceful (StreamingQuery.stop() between batches) or kill (SIGKILL)"))
    retention_ms: int | None = Field(None, ge=1, description=(
        "Kafka: the topic's retention.ms while the query is down (restored before the restart): records older "
        "age out unread, the outage longer than the retention; unset: the topic keeps its own"))
    segment_ms: int = Field(500, ge=1, description="the topic's segment.ms while retention_ms is in force")
    max_restarts: int = Field(3, ge=0, le=20, description=(
        "the supervisor's restart policy after the restart: each failure of the query is restarted, this many "
        "times; one more failure and it gives up (QUERY_CRASH_LOOP)"))
    crash_loop: bool = Field(False, description=(
        "whether the restarted query must crash-loop (fail max_restarts + 1 times, then given up on): the run "
        "passes only if it does; false: it must not fail at all"))
    crash_error: str | None = Field(None, min_length=1, max_length=200, description=(
        "with crash_loop = true: text every failure after the restart must show in its error (e.g. "
        "\"java.lang.OutOfMemoryError\": the out-of-memory crash-loop); unset: any failure counts; with "
        "crash_loop = false not judged (harness outage-cap's trials set it so)"))
    drain_within_s: float | None = Field(None, gt=0, description=(
        "the backlog must be drained (the lag back within its band before the outage) this many seconds after "
        "the restart; unset: measured, not judged"))
    settle_timeout_s: float = Field(30.0, gt=0, le=600, description=(
        "with retention_ms: wait at most this long for the log start offsets to stop moving before the restart"))

    @model_validator(mode="after")
    def _down_is_the_schedule(self):
        if self.window is not None or self.duration_s is not None:
            raise ValueError("an outage lasts down_s: give at_s and down_s, not window or duration_s")
        if self.crash_loop and self.drain_within_s is not None:
            raise ValueError("crash_loop = true: the restarted query never drains, drain_within_s cannot hold")
        return self

    @property
    def heal_after_s(self) -> float | None:
        return self.down_s


@register
class Outage(Fault):
    kind = "outage"
    Options = OutageOptions
    requires = "a query running during the traffic (retention_ms: a Kafka backend)"
    takes_query_down = True

    def __init__(self, options):
        super().__init__(options)
        self.original: dict[str, tuple[str | None, bool]] | None = None
        self.start_before: dict[int, int] = {}
        self.down = False

    def needs(self) -> dict[str, str]:
        if self.options.retention_ms is None:
            return {}
        return {"DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "IncrementalAlterConfigs"}

    def check(self, scenario) -> str | None:
        problem = needs_running_query(scenario)
        if problem:
            return problem
        if self.options.retention_ms is not None and TopicAdmin not in scenario.backend.capabilities():
            return TopicAdmin.refusal(scenario.backend, self)
        return None

    def inject(self, ctx) -> dict:
        status = wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        backend = ctx.backend
        if self.options.crash_loop:
            self.effect.failure = CRASH_LOOP
        if self.options.retention_ms is not None:
            configs = backend.topic_configs(ctx.stream)
            changes = {"retention.ms": str(self.options.retention_ms), "segment.ms": str(self.options.segment_ms)}
            self.original = {k: configs.get(k, (None, False)) for k in changes}
            self.start_before = backend.start_offsets(ctx.stream)
            backend.alter_topic_configs(ctx.stream, changes)
        code = ctx.query.take_down(self.options.stop == "graceful")
        self.down = True
        committed = ctx.committed_offsets()
        return {"offset_log_last": (ctx.offset_log() or [None])[-1], "stop": self.options.stop,
                "down_s": self.options.down_s, "exit_code": code,
                "query_started_at": status.get("at"), "stopped_at": time.time(),
                "committed_at_stop": _keyed(committed), "planned_at_stop": _keyed(ctx.planned_offsets()),
                "ends_at_stop": _keyed(backend.end_offsets(ctx.stream)),
                "retention_ms": self.options.retention_ms, "cap": batch_cap(ctx.scenario),
                "crash_loop_expected": self.options.crash_loop, "max_restarts": self.options.max_restarts,
                "crash_error": self.options.crash_error,
                "drain_within_s": self.options.drain_within_s}

    def heal(self, ctx) -> dict:
        """Restore the topic, declare what aged out, bring the query back under the restart policy. Idempotent:
        a second call (the run ending) only ends the restart policy."""
        if not self.down:
            if ctx.query is not None:
                ctx.query.stop_restarting()
            return {}
        out: dict = {}
        try:
            if self.original is not None:
                out.update(self._restore(ctx))
            out["committed_at_restart"] = _keyed(ctx.committed_offsets())
            out["log_start_at_restart"] = _keyed(ctx.backend.start_offsets(ctx.stream))
            out["ends_at_restart"] = _keyed(ctx.backend.end_offsets(ctx.stream))
        finally:
            self.down = False
            data_loss = self.effect.failure == DATA_LOSS
            # a declared data-loss error ends the query at once: no supervisor restarts into it again
            ctx.query.bring_back(None if data_loss else self.options.max_restarts,
                                 through_batch=(ctx.offset_log() or [-1])[-1])
            out["restarted_at"] = time.time()
        return out

    def _restore(self, ctx) -> dict:
        backend = ctx.backend
        assert self.original is not None
        restore = {k: v for k, (v, topic_level) in self.original.items() if topic_level and v is not None}
        backend.alter_topic_configs(ctx.stream, restore, [k for k in self.original if k not in restore])
        self.original = None
        after, reads = settled_start_offsets(ctx, self.options.settle_timeout_s)
        failure = self.effect.failure
        cut = self.declare_cut(ctx, self.start_before, after, DATA_LOSS)
        if failure == CRASH_LOOP:
            self.effect.failure = CRASH_LOOP
        return {"restored": restore, "log_start_after": _keyed(after), "stable_after_reads": reads,
                "removed": {str(p): after[p] - self.start_before.get(p, 0) for p in sorted(after)}, **cut}


def batch_cap(scenario) -> dict | None:
    """The per-trigger cap the query runs with: {"option", "value"} (the backend's option name, as the connector
    spells it), or None when uncapped."""
    name = getattr(scenario.backend, "batch_cap_option", None)
    if not name:
        return None
    for key, value in scenario.source_options().items():
        if key.lower() == name.lower():
            return {"option": name, "value": int(value)}
    return None


def _keyed(offsets: dict[int, int]) -> dict[str, int]:
    return {str(p): int(o) for p, o in sorted(offsets.items())}
