"""The real broker, real producer processes (locust + confluent-kafka) and Spark's own Kafka source, shared."""
import time
import uuid

import pytest
from confluent_kafka import Consumer

from harness.backends.kafka.admin import client_config
from harness.records.history import load_acks
from harness.partitioning import kafka_partition_for_key
from harness.queries import resolve
from harness.spark.events import from_kafka
from harness.producers.fleet import ProducerFleet
from harness.backends.kafka.spec import KafkaSpec

KAFKA_SENDER = KafkaSpec.model_construct().sender  # the runner writes the backend's sender into the job

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def produced(kafka, supervisor, tmp_path_factory):
    """Two producer processes, 2,000 events/s for 3 s, into a fresh 3-partition topic."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_stream(topic, 3, {})
    out = tmp_path_factory.mktemp("producers")
    # a 10 s backlog cap: a process starting on a loaded machine sends late rather than skipping (this test is
    # about the schedule being sent exactly; skipping has its own check in every run)
    job = {"backend": "kafka", "sender": KAFKA_SENDER, "stream": topic, "partitions": 3,
           "settings": kafka.producer_settings(),
           "processes": 2, "users": 2, "batch_size": 100, "duration_s": 3.0, "max_backlog_s": 10.0, "seed": 7,
           "rate": {"kind": "constant", "eps": 2000}, "keys": {"kind": "uniform", "count": 50},
           "payload": {"size": {"kind": "fixed", "bytes": 128}}}
    fleet = ProducerFleet(out, supervisor, job)
    fleet.start(time.time() + 1.0)
    fleet.wait(60)
    assert not fleet.failures(), fleet.failures()
    return topic, out, fleet


def test_producers_send_exactly_the_schedule_and_every_event_is_acked(produced, kafka):
    topic, out, fleet = produced
    acks = load_acks(out)
    assert len(acks) == 6000  # 2,000/s for 3 s, split over two processes, exact
    assert (acks["error"] == "").all()
    assert acks.groupby("producer").size().to_dict() == {0: 3000, 1: 3000}
    summary = fleet.merged_summary()
    assert summary["sent"] == summary["acked"] == 6000 and summary["pacer_skipped"] == 0
    # offsets are dense per partition and the broker's end offsets agree with the acks
    ends = kafka.end_offsets(topic)
    for partition, group in acks.groupby("partition"):
        assert sorted(group["offset"]) == list(range(ends[partition]))
    assert sum(ends.values()) == 6000
    # intended send times follow the schedule: 2,000/s in total, first event at the start
    t = acks["intended_ms"].sort_values().to_numpy()
    assert abs((t[-1] - t[0]) - 3000) < 5


def test_keys_land_where_a_java_client_would_put_them(produced, kafka):
    topic, _, _ = produced
    consumer = Consumer(dict(client_config(kafka.bootstrap), **{"group.id": f"g-{uuid.uuid4().hex}",
                                                                "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen = 0
    deadline = time.time() + 30
    try:
        while seen < 6000 and time.time() < deadline:
            for msg in consumer.consume(1000, timeout=1):
                assert msg.error() is None
                assert msg.partition() == kafka_partition_for_key(msg.key(), 3)
                seen += 1
    finally:
        consumer.close()
    assert seen == 6000


def test_spark_kafka_source_reads_and_parses_the_events(produced, kafka, spark):
    topic, out, _ = produced
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    rows = resolve("passthrough").function(from_kafka(df), {}).select("producer", "seq", "partition", "offset", "intended_ms").collect()
    assert len(rows) == 6000
    acks = load_acks(out).set_index(["producer", "seq"])
    for r in rows[:500]:
        a = acks.loc[(r.producer, r.seq)]
        assert (a["partition"], a["offset"]) == (r.partition, r.offset)
        assert abs(a["intended_ms"] - r.intended_ms) < 0.01
    assert len({(r.producer, r.seq) for r in rows}) == 6000
