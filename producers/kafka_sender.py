"""Kafka side of a producer process: one confluent-kafka Producer, serviced by poll(0) from one greenlet.

Never flush() or poll(timeout>0) here: under gevent those block the hub inside librdkafka and stall every
other greenlet. A full local queue (BufferError) is answered by a cooperative sleep and a retry, and counted.
"""
from __future__ import annotations

import time
from functools import partial

import gevent
from confluent_kafka import KafkaError, Producer

from producers.records import AckLog, SecondStats

DEFAULTS = {
    "partitioner": "murmur2_random",  # what Java clients do, so key placement matches production
    "enable.idempotence": True,  # per-partition order survives retries: the checker relies on it
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 200000,
    "compression.type": "none",
}


class KafkaSender:
    name = "kafka"

    def __init__(self, topic: str, settings: dict, acks: AckLog, stats: SecondStats):
        config = dict(DEFAULTS)
        config.update(settings)
        self.topic = topic
        self.producer = Producer(config)
        self.acks = acks
        self.stats = stats

    def send(self, value: bytes, key: bytes | None, partition: int | None, seq: int, intended_s: float,
             headers: list | None = None) -> None:
        produce_s = time.time()
        cb = partial(self._delivered, seq, intended_s * 1000.0, produce_s * 1000.0, len(value))
        while True:
            try:
                if partition is None:
                    self.producer.produce(self.topic, value, key, callback=cb, headers=headers)
                else:
                    self.producer.produce(self.topic, value, key, partition, callback=cb, headers=headers)
                return
            except BufferError:
                self.stats.on_buffer_full(time.time())
                gevent.sleep(0.005)

    def _delivered(self, seq: int, intended_ms: float, produce_ms: float, nbytes: int, err: KafkaError | None,
                   msg) -> None:
        now = time.time()
        if err is None:
            latency = msg.latency()
            self.acks.acked(seq, msg.partition(), msg.offset(), intended_ms, produce_ms, now * 1000.0)
            self.stats.on_ack(msg.partition(), nbytes, int((latency if latency is not None else
                                                            now - produce_ms / 1000.0) * 1e6), now)
        else:
            error = err.name() or str(err.code())
            self.acks.failed(seq, msg.partition() if msg.partition() is not None else -1, intended_ms, produce_ms,
                             now * 1000.0, error)
            self.stats.on_fail(error, now)

    def service(self) -> None:
        self.producer.poll(0)

    def outstanding(self) -> int:
        return len(self.producer)

    def abandon(self) -> None:
        """Purge what is still queued so each such event gets its failure report (no flush(): see above)."""
        self.producer.purge(in_queue=True, in_flight=True, blocking=False)
