"""Kafka side of a producer process: one confluent-kafka Producer, serviced by poll(0) from one greenlet.

Never flush() or poll(timeout>0) here: under gevent those block the hub inside librdkafka and stall every
other greenlet. A full local queue (BufferError) is answered by a cooperative sleep and a retry, and counted.
Delivery reports are collected by one producer-wide callback and handled in bulk after each poll; the event's id
and intended time are read back from its own value, so no per-event closure is needed.
"""
from __future__ import annotations

import time

import gevent
from confluent_kafka import Producer

from producers.records import AckLog, SecondStats

DEFAULTS = {
    "partitioner": "murmur2_random",  # what Java clients do, so key placement matches production
    "enable.idempotence": True,  # per-partition order survives retries: the checker relies on it
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 200000,
    "compression.type": "none",
}


def event_fields(value: bytes) -> tuple[str, str]:
    """(seq, intended_ms) as text, read from the head of an encoded event (see producers.event)."""
    _, seq, intended, _ = value[:80].split(b",", 3)
    return seq[4:].decode(), intended[4:].decode()


class KafkaSender:
    name = "kafka"

    def __init__(self, topic: str, settings: dict, acks: AckLog, stats: SecondStats):
        config = dict(DEFAULTS)
        config.update(settings)
        reports = self._reports = []
        config["on_delivery"] = lambda err, msg: reports.append((err, msg))
        self.topic = topic
        self.producer = Producer(config)
        self.acks = acks
        self.stats = stats

    @classmethod
    def from_job(cls, job: dict, acks: AckLog, stats: SecondStats) -> "KafkaSender":
        return cls(job["stream"], job["settings"], acks, stats)

    def send(self, value: bytes, key: bytes | None, partition: int | None, headers: list | None = None) -> None:
        while True:
            try:
                if partition is None:
                    self.producer.produce(self.topic, value, key, headers=headers)
                else:
                    self.producer.produce(self.topic, value, key, partition, headers=headers)
                return
            except BufferError:
                self.stats.on_buffer_full(time.time())
                gevent.sleep(0.005)

    def service(self) -> None:
        self.producer.poll(0)
        if not self._reports:
            return
        batch = self._reports[:]
        del self._reports[:]
        now = time.time()
        ack_ms = f"{now * 1000.0:.3f}"
        rows, partitions, sizes, latencies = [], [], [], []
        for err, msg in batch:
            value = msg.value()
            seq, intended = event_fields(value)
            latency_us = int((msg.latency() or 0.0) * 1e6)  # produce() call to delivery report
            partition = msg.partition()
            if err is None:
                # acked without an offset (librdkafka: a retried send the broker already had): -1, "unknown"
                offset = msg.offset()
                rows.append(f"{seq},{partition},{-1 if offset is None else offset},{intended},{ack_ms},{latency_us},\n")
                partitions.append(partition)
                sizes.append(len(value))
                latencies.append(latency_us)
            else:
                error = err.name() or str(err.code())
                rows.append(f"{seq},{-1 if partition is None else partition},-1,{intended},{ack_ms},{latency_us},"
                            f"{error}\n")
                self.stats.on_fail(error, now)
        self.acks.write_rows(rows)
        self.stats.on_acks(partitions, sizes, latencies, now)

    def outstanding(self) -> int:
        return len(self.producer)

    def close(self) -> None:
        pass

    def abandon(self) -> None:
        """Purge what is still queued so each such event gets its failure report (no flush(): see above)."""
        self.producer.purge(in_queue=True, in_flight=True, blocking=False)
