"""The Kafka-endpoint half of ``harness bench emulator``: librdkafka (confluent-kafka) producers and consumers in
their own processes, one partition each, through the emulator's Kafka port (SASL PLAIN ``$ConnectionString``),
with the same CPU accounting as the SDK phases in harness/bench/emulator.py.

Why its own clients: the endpoint is there for Kafka clients (Spark's Kafka source, librdkafka senders), so its
cost is judged against what such clients spend per event. librdkafka is C and batches, so it spends far less CPU
per event than the pure-Python SDK: the same goal (emulator <= half the clients' CPU per event) is a much harder
bar here, and the table shows where it stands.

Each client connects and fetches metadata (and the producer delivers one warm-up record) before the phase's
barrier, so connection set-up and SASL are not counted; a phase ends when the last client has all its events.
"""

from __future__ import annotations

import time

HUB = "bench-kafka"
USER = "$ConnectionString"


def conf(port: int, password: str, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": password, **extra}


def producer_main(port: int, password: str, pid: str, events: int, body: int, barrier, out_q) -> None:
    from confluent_kafka import Producer

    value = b"x" * body
    failed: list = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    p = Producer(conf(port, password, **{"acks": "all", "linger.ms": 5, "batch.num.messages": 10000,
                                         "queue.buffering.max.messages": 1_000_000}))
    partition = int(pid)
    p.produce(HUB, value, partition=partition, on_delivery=report)  # connects, authenticates, warms up
    p.flush(60)
    barrier.wait()
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _ in range(events):
        while True:
            try:
                p.produce(HUB, value, partition=partition, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(600)
    t1, cpu1 = time.perf_counter(), time.process_time()
    if failed or left:
        raise RuntimeError(f"partition {pid}: {len(failed)} records failed ({failed[:3]}), {left} undelivered")
    out_q.put(("kafka_send", pid, events, t0, t1, cpu1 - cpu0))


def consumer_main(port: int, password: str, pid: str, expected: int, barrier, out_q) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(conf(port, password, **{"group.id": f"bench-{pid}", "enable.auto.commit": False,
                                         "enable.partition.eof": False}))
    c.list_topics(HUB, timeout=30)  # connected and authenticated before the phase starts
    barrier.wait()
    cpu0, t0 = time.process_time(), time.perf_counter()
    c.assign([TopicPartition(HUB, int(pid), 0)])
    n = 0
    deadline = time.monotonic() + 600
    while n < expected and time.monotonic() < deadline:
        for m in c.consume(10000, timeout=0.5):
            if m.error() is None:
                n += 1
    t1, cpu1 = time.perf_counter(), time.process_time()
    c.close()
    out_q.put(("kafka_recv", pid, n, t0, t1, cpu1 - cpu0))
