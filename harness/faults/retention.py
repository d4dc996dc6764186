"""Records aged out by Kafka itself: the topic's retention cut to about a second while the fault is active.

Inject reads the topic's configs and sets a tiny `retention.ms` and `segment.ms` (and `segment.bytes` if asked) with
IncrementalAlterConfigs: the broker rolls a segment on the first append after `segment.ms` and its retention
check (every `log.retention.check.interval.ms`, 1 s on the embedded broker) deletes closed segments older than
`retention.ms`, moving the log start offset, as in production. Heal restores the original configs, waits until
the log start offsets stop moving, and reads them: the declared loss is exact per partition, [log start at
inject, log start after heal).

Only failOnDataLoss=false is accepted: under true the query may fail while retention is still deleting, before
the loss (and so the failure) can be known; `delete_records` is the deterministic fault for that case.
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import TopicAdmin
from harness.faults.base import Fault, FaultOptions
from harness.effects import LossRange

STABLE_READS = 3  # log start offsets equal this many times in a row (a second apart): retention has stopped


class RetentionOptions(FaultOptions):
    kind: Literal["retention"] = Field("retention", description="retention: the topic's retention cut so Kafka itself"
                                                                " ages records out")
    retention_ms: int = Field(1000, ge=1, description="topic retention.ms while the fault is active")
    segment_ms: int = Field(500, ge=1, description="topic segment.ms while the fault is active")
    segment_bytes: int | None = Field(None, ge=1_048_576,
                                      description="topic segment.bytes while active (Kafka's minimum is 1 MiB)")
    settle_timeout_s: float = Field(30.0, gt=0, le=3600, description="after heal, wait at most this long for the log "
                                                           "start offsets to stop moving")


@register
class Retention(Fault):
    kind = "retention"
    capabilities = (TopicAdmin,)
    Options = RetentionOptions
    requires = "a Kafka backend and failOnDataLoss=false"
    kafka_operations = {"DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "IncrementalAlterConfigs"}

    def __init__(self, options):
        super().__init__(options)
        self.original: dict[str, tuple[str | None, bool]] | None = None
        self.start_before: dict[int, int] = {}

    def check(self, scenario) -> str | None:
        if scenario.fail_on_data_loss:
            return ("needs spark.source_options.failOnDataLoss = false: under true the query may fail while "
                    "retention is still deleting, before the loss is known (use delete_records for that)")
        return None

    def _changes(self) -> dict[str, str]:
        o = self.options
        out = {"retention.ms": str(o.retention_ms), "segment.ms": str(o.segment_ms)}
        if o.segment_bytes is not None:
            out["segment.bytes"] = str(o.segment_bytes)
        return out

    def inject(self, ctx) -> dict:
        backend = ctx.backend
        configs = backend.topic_configs(ctx.stream)
        changes = self._changes()
        self.original = {k: configs.get(k, (None, False)) for k in changes}
        self.start_before = backend.start_offsets(ctx.stream)
        backend.alter_topic_configs(ctx.stream, changes)
        return {"set": changes, "original": {k: {"value": v, "topic_level": t} for k, (v, t) in self.original.items()},
                "log_start_before": self.start_before, "end_offsets": backend.end_offsets(ctx.stream)}

    def heal(self, ctx) -> dict:
        if self.original is None:
            return {}
        backend = ctx.backend
        restore = {k: v for k, (v, topic_level) in self.original.items() if topic_level and v is not None}
        backend.alter_topic_configs(ctx.stream, restore, [k for k in self.original if k not in restore])
        self.original = None
        after, reads = self._settled(ctx)
        before = self.start_before
        self.effect.loss = [LossRange(p, before.get(p, 0), after[p]) for p in sorted(after)
                            if after[p] > before.get(p, 0)]
        return {"restored": restore, "log_start_after": after, "stable_after_reads": reads,
                "removed": {p: after[p] - before.get(p, 0) for p in sorted(after)},
                "query_planned_up_to": ctx.planned_offsets()}

    def _settled(self, ctx) -> tuple[dict[int, int], int]:
        return settled_start_offsets(ctx, self.options.settle_timeout_s)


def settled_start_offsets(ctx, timeout_s: float) -> tuple[dict[int, int], int]:
    """Log start offsets once they no longer move (a retention pass may be running while configs change), and
    the reads it took; at `timeout_s` the last read."""
    deadline = time.monotonic() + timeout_s
    last, same, reads = None, 0, 0
    while True:
        now = ctx.backend.start_offsets(ctx.stream)
        reads += 1
        same = same + 1 if now == last else 1
        last = now
        if same >= STABLE_READS or time.monotonic() > deadline:
            return now, reads
        time.sleep(1.0)
