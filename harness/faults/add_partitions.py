"""Partitions added mid-run, whose first records age out before the query sees them (as in Spark's own tests).

CreatePartitions raises the topic to a new total; the fault then writes a few events into each new partition with
its own idempotent producer (real events with ids the checker understands, logged as acked history in
`producers/acks-fault-<k>.arrows` under producer index FAULT_PRODUCER_BASE + k) and at once deletes everything the
new partitions hold with DeleteRecords (the producer processes may have reached them already: their metadata
refreshes, and keyed traffic goes through the client's partitioner). The loss is exact: per new partition,
[0, log start after); sends acked without an offset before the deletion are declared as possibly among it.

Spark notices a new partition when it plans the next batch. If that is after the deletion, the partition starts
above 0: under failOnDataLoss=true the query fails with KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_
OFFSET_ZERO (declared only when no planned batch had the new partitions yet, read after the deletion), under false
it logs a warning and reads from the new log start.
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field, model_validator

from harness.faults import register
from harness.backends.capabilities import TopicAdmin
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.effects import FAULT_PRODUCER_BASE, LossRange

ADDED_PARTITION_LOSS = "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO"


class AddPartitionsOptions(FaultOptions):
    kind: Literal["add_partitions"] = Field("add_partitions", description="add_partitions: partitions added mid-run, "
                                                                          "their first records deleted before the "
                                                                          "query reads them")
    to: int | None = Field(None, ge=2, le=1024, description="new partition count of the topic")
    add: int | None = Field(None, ge=1, le=1023, description="partitions to add (instead of `to`)")
    records: int = Field(5, ge=1, le=10_000, description="events written to each new partition, then deleted")

    @model_validator(mode="after")
    def _one_target(self):
        if (self.to is None) == (self.add is None):
            raise ValueError("give exactly one of `to` (new total) or `add` (partitions to add)")
        if self.to is not None and (self.every_s is not None or (self.count or 1) > 1):
            raise ValueError("`to` can be reached only once: repeat with `add` instead")
        return self


@register
class AddPartitions(Fault):
    kind = "add_partitions"
    capabilities = (TopicAdmin,)
    Options = AddPartitionsOptions
    requires = "a Kafka backend"
    kafka_operations = {"ALTER": "CreatePartitions", "WRITE": "Produce", "DELETE": "DeleteRecords"}

    def check(self, scenario) -> str | None:
        if self.options.to is not None and self.options.to <= scenario.stream.partitions:
            return f"to = {self.options.to} must exceed the stream's {scenario.stream.partitions} partitions"
        return None

    def inject(self, ctx) -> dict:
        backend = ctx.backend
        old = len(backend.end_offsets(ctx.stream))
        total = self.options.to if self.options.to is not None else old + self.options.add
        if total <= old:
            raise FaultError(f"the topic already has {old} partitions (asked for {total})")
        backend.add_partitions(ctx.stream, total)
        new = list(range(old, total))
        producer, path, written = self._write(ctx, new)
        start = backend.start_offsets(ctx.stream)
        ends = backend.end_offsets(ctx.stream)  # the fault's events, and any the producers put there already
        after = backend.delete_records(ctx.stream, {p: ends[p] for p in new})
        deleted = time.time()
        self.effect.loss = [LossRange(p, start[p], after[p]) for p in new if after[p] > start[p]]
        # a send acked without its offset (-1 in the ack log) before the deletion may have been among them
        self.effect.loss += [LossRange(p, -1, 0, acked_before_ms=deleted * 1000.0, exact=False) for p in new]
        planned = ctx.planned_offsets()  # read after the deletion: a batch planned from now on sees it
        seen = sorted(p for p in new if p in planned)
        removed = any(after[p] > start[p] for p in new)
        if removed and not seen and ctx.scenario.fail_on_data_loss:
            self.effect.failure = ADDED_PARTITION_LOSS
        return {"partitions_before": old, "partitions_after": total, "producer": producer, "ack_log": path,
                "written_up_to": written, "deleted_at": deleted, "log_start_before": {p: start[p] for p in new},
                "log_start_after": {p: after[p] for p in new}, "query_planned_up_to": planned,
                "new_partitions_already_planned": seen}

    def _write(self, ctx, partitions: list[int]) -> tuple[int, str, dict[int, int]]:
        """The fault's own events into `partitions`, acked into their own ack log; returns (producer index, log
        path, per partition the offset after the fault's last event)."""
        from confluent_kafka import Producer

        from harness.backends.kafka.admin import CLIENT_LOG
        from harness.secrets import expand_all
        from harness.records.history import AckWriter
        from harness.producers.event import encode

        out = ctx.run_dir / "producers"
        out.mkdir(parents=True, exist_ok=True)
        k = len(list(out.glob("acks-fault-*.arrows")))
        index, path = FAULT_PRODUCER_BASE + k, out / f"acks-fault-{k}.arrows"
        reports: list = []
        config = dict(expand_all(ctx.backend.producer_settings()), **{"enable.idempotence": True, "acks": "all",
                                                           "linger.ms": 0, "logger": CLIENT_LOG})
        producer = Producer(config)
        seq = 0
        for p in partitions:
            for _ in range(self.options.records):
                now = time.time()
                producer.produce(ctx.stream, encode(index, seq, now), None, p,
                                 on_delivery=lambda err, msg, s=seq, t=now: reports.append((s, t, err, msg)))
                seq += 1
        left = producer.flush(30)
        log = AckWriter(path, index)
        written, errors = {p: 0 for p in partitions}, []
        rows = []  # seq, partition, offset, intended_ms, latency_us, error
        for s, t, err, msg in sorted(reports, key=lambda r: r[0]):
            latency_us = int((msg.latency() or 0.0) * 1e6)
            if err is None:
                offset = -1 if msg.offset() is None else msg.offset()  # acked without its offset: unknown
                rows.append((s, msg.partition(), offset, round(t * 1000.0, 3), latency_us, ""))
                written[msg.partition()] = max(written[msg.partition()], offset + 1)
            else:
                errors.append(err.name())
                partition = -1 if msg.partition() is None else msg.partition()
                rows.append((s, partition, -1, round(t * 1000.0, 3), latency_us, err.name()))
        if rows:
            seqs, parts, offsets, intended, latencies, names = zip(*rows)
            log.append(seqs, parts, offsets, intended, time.time() * 1000.0, latencies, list(names))
        log.close()
        if left or errors or len(reports) != seq:
            raise FaultError(f"the fault's own events were not all acked: {left} unflushed, errors {errors}")
        return index, str(path), written
