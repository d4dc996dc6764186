"""confluent-kafka (librdkafka) clients pointed at the emulator's Kafka endpoint, configured as Microsoft's pages
configure them for Event Hubs (SASL PLAIN, user name ``$ConnectionString``, the namespace connection string as the
password), and small helpers that collect what the CLIENT reports: delivery reports, consumed messages, errors.

Imported by module name (pytest puts this directory on sys.path), like emulator_helpers.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

USER = "$ConnectionString"


def kafka_endpoint(emu) -> int:
    """The emulator's plaintext Kafka port (SASL_PLAINTEXT, as Microsoft's emulator on 9092)."""
    port = getattr(emu, "kafka_port", None)
    assert port, "the emulator has no Kafka listener (kafka_port)"
    return port


def client_conf(emu, *, tls: bool = False, user: str = USER, password: str | None = None, **extra) -> dict:
    """librdkafka settings that reach the emulator's Kafka endpoint. ``tls``: SASL_SSL on ``kafka_tls_port``,
    verified against the emulator's CA (the certificate names 127.0.0.1)."""
    port = emu.kafka_tls_port if tls else kafka_endpoint(emu)
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": emu.connection_string() if password is None else password,
        "socket.timeout.ms": 10000,
        "reconnect.backoff.max.ms": 1000,
    }
    if tls:
        conf["ssl.ca.location"] = emu.ca_file
    conf.update(extra)
    return conf


class Deliveries(list):
    """(err, partition, offset, key, value, headers, timestamp) per record, as librdkafka's delivery reports
    give them, in the order they arrived."""

    def ok(self) -> list:
        return [d for d in self if d[0] is None]

    def errors(self) -> list:
        return [d[0] for d in self if d[0] is not None]


def produce(emu, topic: str, records, *, flush_s: float = 30.0, **conf) -> Deliveries:
    """Send ``records`` (dicts of Producer.produce keyword arguments: value, key, partition, headers, timestamp)
    and wait for every delivery report."""
    out = Deliveries()

    def report(err, msg):
        out.append((err, msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()))

    p = Producer(client_conf(emu, **{"acks": "all", "linger.ms": 5, **conf}))
    n = 0
    for rec in records:
        p.produce(topic, on_delivery=report, **rec)
        n += 1
        p.poll(0)
    left = p.flush(flush_s)
    assert left == 0, f"{left} of {n} records neither delivered nor failed after {flush_s} s"
    assert len(out) == n
    return out


def consume_assigned(emu, topic: str, starts: dict[int, int], count: int, timeout: float = 20.0, **conf) -> list:
    """Read ``count`` messages with ``assign`` from explicit offsets ({partition: offset}); the client's
    messages (errors fail the call, end-of-partition events are skipped)."""
    c = Consumer(client_conf(emu, **{"group.id": "kafka-helpers-unused", "enable.auto.commit": False,
                                     "enable.partition.eof": False, **conf}))
    try:
        c.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        return poll_n(c, count, timeout)
    finally:
        c.close()


def poll_n(c: Consumer, count: int, timeout: float) -> list:
    msgs: list = []
    deadline = time.monotonic() + timeout
    while len(msgs) < count and time.monotonic() < deadline:
        for m in c.consume(min(count - len(msgs), 500), timeout=0.5):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {m.error()}")
            msgs.append(m)
    return msgs


def collect_errors() -> tuple[list, callable]:
    """A list and an ``error_cb`` that appends every KafkaError librdkafka reports to it."""
    errors: list = []
    return errors, errors.append
