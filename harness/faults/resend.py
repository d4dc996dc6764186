"""Duplicates in the stream, as an at-least-once upstream makes them: the last records of each partition sent
again (a producer application that restarted from an older checkpoint, a source connector re-delivering).

At the moment of the fault, per partition, the last `records` records are read back from the broker and
produced again with the same key, value and headers to the same partition (where the key's partitioner put the
first copy), so every copy sits at a later offset than its original. The count and the offset ranges of
originals and copies are recorded; nothing is lost and nothing has to fail, so no effect is declared: a query
that does not deduplicate shows the copies as duplicates, a deduplicating one must drop them all.
"""
from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import Field

from harness.secrets import expand_all
from harness.faults import register
from harness.backends.capabilities import TopicAdmin
from harness.faults.base import Fault, FaultError, FaultOptions, partitions_problem


class ResendOptions(FaultOptions):
    kind: Literal["resend"] = Field("resend", description="resend: the last records of each partition sent again, as "
                                                          "an at-least-once upstream does")
    records: int = Field(100, ge=1, le=1_000_000, description="records per partition to send again (the last ones)")
    partitions: list[int] | None = Field(None, description="partitions to resend on (default: all)")


@register
class Resend(Fault):
    kind = "resend"
    capabilities = (TopicAdmin,)
    Options = ResendOptions
    requires = "a Kafka backend"
    kafka_operations = {"READ": "Fetch", "WRITE": "Produce"}

    def check(self, scenario) -> str | None:
        return partitions_problem(scenario, self.options.partitions)

    def inject(self, ctx) -> dict:
        backend = ctx.backend
        ends = backend.end_offsets(ctx.stream)
        starts = backend.start_offsets(ctx.stream)
        chosen = self.options.partitions if self.options.partitions is not None else sorted(ends)
        ranges = {p: (max(starts[p], ends[p] - self.options.records), ends[p]) for p in chosen}
        settings = expand_all(backend.producer_settings())
        records = _read(settings, ctx.stream, {p: r for p, r in ranges.items() if r[1] > r[0]})
        if not records:
            raise FaultError(f"nothing to resend: partitions {chosen} hold no records yet")
        copies = _produce(settings, ctx.stream, records)
        return {"resent": len(records), "originals": {str(p): list(r) for p, r in ranges.items() if r[1] > r[0]},
                "copies": {str(p): [min(o), max(o) + 1] for p, o in copies.items()}}


def _read(settings: dict, stream: str, ranges: dict[int, tuple[int, int]], timeout_s: float = 60.0) -> list:
    """[(partition, key, value, headers)] of every record in `ranges`, in offset order per partition; `settings`:
    bootstrap.servers and the client security settings."""
    from confluent_kafka import Consumer, TopicPartition

    from harness.backends.kafka.admin import CLIENT_LOG

    consumer = Consumer(dict(settings, logger=CLIENT_LOG, **{"group.id": f"harness-resend-{uuid.uuid4().hex}",
                                                          "enable.auto.commit": False,
                                                          "isolation.level": "read_uncommitted"}))
    out: dict[int, list] = {p: [] for p in ranges}
    try:
        consumer.assign([TopicPartition(stream, p, lo) for p, (lo, _) in ranges.items()])
        left = {p for p, (lo, hi) in ranges.items() if hi > lo}
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise FaultError(f"could not read back {sorted(left)} within {timeout_s:.0f}s")
            for msg in consumer.consume(5000, timeout=1):
                if msg.error():
                    raise FaultError(f"reading back records: {msg.error()}")
                p, lo_hi = msg.partition(), ranges.get(msg.partition())
                if p in left and msg.offset() < lo_hi[1]:
                    out[p].append((p, msg.key(), msg.value(), msg.headers()))
                    if msg.offset() == lo_hi[1] - 1:
                        left.discard(p)
    finally:
        consumer.close()
    return [r for p in sorted(out) for r in out[p]]


def _produce(settings: dict, stream: str, records: list, timeout_s: float = 60.0) -> dict[int, list[int]]:
    """Send `records` to their partitions; {partition: [offsets of the copies]}; any failure is a FaultError."""
    from confluent_kafka import Producer

    from harness.backends.kafka.admin import CLIENT_LOG

    config = dict(settings, **{"enable.idempotence": True, "linger.ms": 5, "logger": CLIENT_LOG})
    producer = Producer(config)
    offsets: dict[int, list[int]] = {}
    errors: list[str] = []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            offsets.setdefault(msg.partition(), []).append(msg.offset())

    for partition, key, value, headers in records:
        while True:
            try:
                producer.produce(stream, value, key, partition, on_delivery=delivered, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(timeout_s) or errors or sum(map(len, offsets.values())) != len(records):
        raise FaultError(f"resending {len(records)} records: {len(errors)} failed ({errors[:3]}), "
                         f"{sum(map(len, offsets.values()))} delivered")
    return offsets
