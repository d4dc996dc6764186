"""Per-producer order against the real broker: several users of one producer process share a tiny client queue,
so they keep hitting BufferError and yielding to each other. The process must still put its events on every
partition in sequence order (the checker's order rule relies on it), and the checker, fed what the broker really
holds (read back with a plain consumer, not from the ack logs), must find no violation.

Before producers.process took a lock around each batch, this very setup gave 209 order violations in 11,826
events, and 174 sequence numbers that were never handed to the client (users stopped while waiting for space).
"""
import json
import time
import uuid

import pandas as pd
import pytest
from confluent_kafka import Consumer, TopicPartition

from harness.backends.kafka.admin import client_config
from harness.reconcile import reconcile
from harness.records.history import load_acks
from harness.producers.fleet import ProducerFleet
from harness.backends.kafka.spec import KafkaSpec

KAFKA_SENDER = KafkaSpec.model_construct().sender  # the runner writes the backend's sender into the job

pytestmark = pytest.mark.integration

PARTITIONS = 3


def read_topic(kafka, topic: str, expected: int) -> pd.DataFrame:
    """(producer, seq, partition, offset) of every record the broker holds, read with a plain consumer."""
    consumer = Consumer(dict(client_config(kafka.bootstrap), **{"group.id": f"g-{uuid.uuid4().hex}",
                                                                "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    rows = []
    deadline = time.time() + 60
    try:
        while len(rows) < expected and time.time() < deadline:
            for msg in consumer.consume(2000, timeout=1):
                assert msg.error() is None, msg.error()
                event = json.loads(msg.value())
                rows.append((event["p"], event["s"], msg.partition(), msg.offset(), event["t"]))
    finally:
        consumer.close()
    return pd.DataFrame(rows, columns=["producer", "seq", "partition", "offset", "intended_ms"])


def broker_order_violations(records: pd.DataFrame) -> int:
    """Independently of the checker: per producer and partition, by offset, each seq must exceed the previous."""
    bad = 0
    for _, group in records.sort_values("offset").groupby(["producer", "partition"]):
        seqs = group["seq"].to_numpy()
        bad += int((seqs[1:] <= seqs[:-1]).sum())
    return bad


def test_users_yielding_on_a_full_buffer_keep_sequence_order(kafka, supervisor, tmp_path):
    topic = f"order-{uuid.uuid4().hex[:8]}"
    kafka.create_stream(topic, PARTITIONS, {})
    out = tmp_path / "producers"
    settings = dict(kafka.producer_settings(), **{"queue.buffering.max.messages": 20, "linger.ms": 2})
    job = {"backend": "kafka", "sender": KAFKA_SENDER, "stream": topic, "partitions": PARTITIONS, "settings": settings,
           "processes": 1, "users": 6, "batch_size": 50, "duration_s": 4.0, "max_backlog_s": 30.0, "seed": 3,
           # every half second a burst of 100 events falls due at once: a batch of 50 handed over without a poll
           # between its sends outgrows the 20-message queue (librdkafka counts a message until its delivery report
           # is served), whatever the machine's speed; a steady rate's batches are a few events each on a fast one
           "rate": {"kind": "burst", "base_eps": 1000, "period_s": 0.5, "duration_s": 0.002, "factor": 50},
           "keys": {"kind": "uniform", "count": 100},
           "payload": {"size": {"kind": "fixed", "bytes": 64}}}
    fleet = ProducerFleet(out, supervisor, job)
    fleet.start(time.time() + 1.0)
    fleet.wait(180)
    assert not fleet.failures(), fleet.failures()

    buffer_full = sum(row["buffer_full"] for row in fleet.per_second())
    assert buffer_full > 0, "the queue never filled: the test did not exercise yielding users"
    acks = load_acks(out)
    assert len(acks) > 1000 and (acks["error"] == "").all()
    # every sequence number taken was handed to the client, also by users stopped while waiting for queue space
    summary = fleet.merged_summary()
    assert summary["sent"] == len(acks) and summary["unacked_at_exit"] == 0

    records = read_topic(kafka, topic, len(acks))
    assert len(records) == len(acks) == sum(kafka.end_offsets(topic).values())
    assert broker_order_violations(records) == 0

    sink = records.assign(commit_ms=records["intended_ms"] + 1.0)
    rec = reconcile(acks, sink)
    assert rec.delivered_unique == len(acks) and rec.misplaced == 0 and rec.lost == 0
    assert rec.order_violations == 0
