"""The emulator's Kafka endpoint seen by a real Kafka client (confluent-kafka / librdkafka), in-process emulator.

Focused on the endpoint's own contract (tests/emulator/test_kafka_*.py go broader): hubs as topics, SASL PLAIN
with ``$ConnectionString`` (good and wrong key, plaintext and TLS), offsets = sequence numbers (checked with the
azure-eventhub SDK's partition properties, an independent reader), watermarks and offsets for times, and the
control API's faults as a Kafka client meets them (hub delete, age-out, throttle, dropped connections). Expected
values come from what the clients report, never from the emulator's code.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from emulator_helpers import producer as sdk_producer
from kafka_helpers import client_conf, collect_errors, consume_assigned, produce

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig

CG = ("$Default",)
HUBS = (HubConfig("ke-meta", 3, CG), HubConfig("ke-round", 2, CG), HubConfig("ke-times", 1, CG),
        HubConfig("ke-gone", 1, CG), HubConfig("ke-age", 1, CG), HubConfig("ke-throttle", 1, CG),
        HubConfig("ke-drop", 1, CG), HubConfig("ke-amqp", 1, CG), HubConfig("ke-idem", 1, CG),
        HubConfig("ke-dup", 1, CG))


@pytest.fixture(scope="module")
def emu():
    server = EmulatorServer(EmulatorConfig(hubs=HUBS), ws_port=None, wss_port=None, control_port=0).start()
    yield server
    server.stop()


def _admin(emu, **kw) -> AdminClient:
    return AdminClient(client_conf(emu, **kw))


def test_metadata_lists_hubs_as_topics_on_one_broker_at_the_connected_port(emu):
    md = _admin(emu).list_topics(timeout=10)
    assert {name: len(t.partitions) for name, t in md.topics.items()} == {h.name: h.partition_count for h in HUBS}
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [(0, "127.0.0.1", emu.kafka_port)]
    part = md.topics["ke-meta"].partitions[2]
    assert (part.leader, part.replicas, part.isrs) == (0, [0], [0])
    missing = _admin(emu).list_topics(topic="no-such-hub", timeout=10).topics["no-such-hub"]
    assert missing.error is not None and missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_tls_listener_with_the_emulator_ca(emu):
    md = _admin(emu, tls=True).list_topics(timeout=10)
    assert [b.port for b in md.brokers.values()] == [emu.kafka_tls_port]
    assert "ke-meta" in md.topics


def test_wrong_key_is_refused_and_named(emu):
    errors, cb = collect_errors()
    bad = emu.connection_string(key="d3Jvbmcta2V5")
    admin = _admin(emu, password=bad, error_cb=cb, **{"reconnect.backoff.ms": 500})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1.5)
    admin.poll(1)  # error callbacks are served by poll
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "does not match" in auth[0].str()
    errors2, cb2 = collect_errors()
    admin2 = _admin(emu, user="someone", error_cb=cb2, **{"reconnect.backoff.ms": 500})
    with pytest.raises(KafkaException):
        admin2.list_topics(timeout=1.5)
    admin2.poll(1)
    assert any("$ConnectionString" in e.str() for e in errors2 if e.code() == KafkaError._AUTHENTICATION)


def test_round_trip_offsets_are_sequence_numbers(emu):
    records = [dict(value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 2,
                    headers=[("n", str(i).encode())]) for i in range(200)]
    got = produce(emu, "ke-round", records)
    assert not got.errors()
    by_part = {p: sorted(d[2] for d in got if d[1] == p) for p in (0, 1)}
    assert by_part == {0: list(range(100)), 1: list(range(100))}
    msgs = consume_assigned(emu, "ke-round", {0: 0, 1: 0}, 200)
    assert sorted((m.partition(), m.offset(), m.value()) for m in msgs) == sorted(
        (d[1], d[2], d[4]) for d in got)
    assert all(dict(m.headers())["n"] == m.value()[1:] for m in msgs)
    with sdk_producer(emu, "ke-round") as p:  # the SDK's view: last sequence number = high watermark - 1
        assert p.get_partition_properties("1")["last_enqueued_sequence_number"] == 99


def test_watermarks_and_offsets_for_times(emu):
    first = produce(emu, "ke-times", [dict(value=b"a", partition=0) for _ in range(5)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    second = produce(emu, "ke-times", [dict(value=b"b", partition=0) for _ in range(3)])
    c = Consumer(client_conf(emu, **{"group.id": "ke-times"}))
    try:
        assert c.get_watermark_offsets(TopicPartition("ke-times", 0), timeout=10) == (0, 8)
        found = c.offsets_for_times([TopicPartition("ke-times", 0, middle)], timeout=10)[0]
        assert found.offset == min(d[2] for d in second) == max(d[2] for d in first) + 1
        future = c.offsets_for_times([TopicPartition("ke-times", 0, middle + 3_600_000)], timeout=10)[0]
        assert future.offset == -1  # no event at or after it: librdkafka's OFFSET_END
    finally:
        c.close()


def test_hub_delete_is_unknown_topic_to_producer_and_consumer(emu):
    assert not produce(emu, "ke-gone", [dict(value=b"x", partition=0)]).errors()
    emu.delete_hub("ke-gone")
    got = produce(emu, "ke-gone", [dict(value=b"y", partition=0)], **{"message.timeout.ms": 1000})
    assert [e.code() for e in got.errors()] in ([KafkaError.UNKNOWN_TOPIC_OR_PART], [KafkaError._MSG_TIMED_OUT])
    md = _admin(emu).list_topics(topic="ke-gone", timeout=10).topics["ke-gone"]
    assert md.error is not None and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    emu.recreate_hub("ke-gone")
    again = produce(emu, "ke-gone", [dict(value=b"z", partition=0)])
    assert [d[2] for d in again] == [0]  # a recreated hub starts from offset 0


def test_age_out_is_offset_out_of_range_and_auto_offset_reset(emu):
    produce(emu, "ke-age", [dict(value=f"e{i}".encode(), partition=0) for i in range(10)])
    assert emu.age_out("ke-age", partition="0", up_to_seq=5) == 6
    c = Consumer(client_conf(emu, **{"group.id": "ke-age", "auto.offset.reset": "error",
                                     "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition("ke-age", 0, 2)])
        deadline = time.monotonic() + 15
        err = None
        while err is None and time.monotonic() < deadline:
            for m in c.consume(10, 0.5):
                if m.error() is not None and m.error().code() != KafkaError._PARTITION_EOF:
                    err = m.error()
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "out of range" in err.str().lower()
        lo_hi = c.get_watermark_offsets(TopicPartition("ke-age", 0), timeout=10)
        assert lo_hi == (6, 10)
    finally:
        c.close()
    msgs = consume_assigned(emu, "ke-age", {0: 2}, 4, **{"auto.offset.reset": "earliest"})
    assert [(m.offset(), m.value()) for m in msgs] == [(i, f"e{i}".encode()) for i in range(6, 10)]


def test_throttle_is_delay_with_throttle_time(emu):
    throttles = []
    emu.throttle(True)
    try:
        got = produce(emu, "ke-throttle", [dict(value=b"t", partition=0)],
                      throttle_cb=lambda ev: throttles.append(ev.throttle_time))
    finally:
        emu.throttle(False)
    assert not got.errors() and [d[2] for d in got] == [0]  # delayed, not refused
    assert throttles and max(throttles) >= 0.9  # seconds, as librdkafka reports throttle_time_ms


def test_dropped_connections_are_survived(emu):
    first = produce(emu, "ke-drop", [dict(value=b"1", partition=0)])
    c = Consumer(client_conf(emu, **{"group.id": "ke-drop", "enable.partition.eof": False}))
    try:
        c.assign([TopicPartition("ke-drop", 0, 0)])
        msg = None
        while msg is None:
            msg = c.poll(5)
        assert msg.error() is None and msg.value() == b"1"
        assert emu.drop_connections() >= 1
        produce(emu, "ke-drop", [dict(value=b"2", partition=0)])
        msg = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (msg is None or msg.error() is not None):
            msg = c.poll(1)
        assert msg is not None and msg.error() is None and (msg.offset(), msg.value()) == (first[0][2] + 1, b"2")
    finally:
        c.close()


def test_event_sent_over_amqp_is_read_over_kafka_at_its_sequence_number(emu):
    from azure.eventhub import EventData

    with sdk_producer(emu, "ke-amqp") as p:
        batch = p.create_batch(partition_id="0")
        for i in range(3):
            batch.add(EventData(f"amqp-{i}"))
        p.send_batch(batch)
        last = p.get_partition_properties("0")["last_enqueued_sequence_number"]
    msgs = consume_assigned(emu, "ke-amqp", {0: 0}, 3)
    assert [(m.offset(), m.value()) for m in msgs] == [(i, f"amqp-{i}".encode()) for i in range(3)]
    assert last == 2


def test_describe_configs_answers_the_hub_settings(emu):
    res = ConfigResource(ConfigResource.Type.TOPIC, "ke-meta")
    admin = _admin(emu)  # kept alive until the result is in
    configs = admin.describe_configs([res])[res].result(timeout=10)
    assert configs["max.message.bytes"].value == str(emu.config.max_message_size)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].value == str(int(HUBS[0].retention_s * 1000))


def test_control_status_and_printed_lines(emu, tmp_path):
    with urllib.request.urlopen(f"{emu.control_url}/status", timeout=5) as resp:
        status = json.load(resp)
    assert status["endpoints"]["kafka_port"] == emu.kafka_port
    assert status["endpoints"]["kafka_tls_port"] == emu.kafka_tls_port
    assert status["kafka"]["connections"] >= 0
    proc = subprocess.Popen([sys.executable, "-m", "harness.emulator", "--no-websockets", "--kafka-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        lines = dict(proc.stdout.readline().strip().split("=", 1) for _ in range(8))
        port = int(lines["kafka_port"])
        assert lines["kafka_tls_port"] != "none"
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "$ConnectionString",
                "sasl.password": lines["connection_string"]}
        assert "eh1" in AdminClient(conf).list_topics(timeout=10).topics
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


@pytest.mark.parametrize("idempotent,hub", [(True, "ke-idem"), (False, "ke-dup")])
def test_idempotent_producer_retry_after_a_lost_acknowledgement_is_not_written_twice(emu, idempotent, hub):
    """Records stored, acknowledgement lost with the connection: librdkafka retries the same batches. With
    idempotence the partition keeps each record once (the retry is answered with the original offsets); without,
    the same scenario writes them twice, which shows the check can fail."""
    reports = []
    emu.set_latency(500)  # responses held back, so the drop below loses acknowledgements of stored records
    try:
        p = Producer(client_conf(emu, **{"enable.idempotence": idempotent, "acks": "all", "linger.ms": 0,
                                         "retry.backoff.ms": 100, "message.timeout.ms": 30000}))
        for i in range(20):
            p.produce(hub, value=f"r{i}".encode(), partition=0,
                      on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        p.poll(0)
        deadline = time.monotonic() + 10
        while emu.snapshot()["hubs"][hub]["partitions"]["0"]["retained_events"] < 20:
            assert time.monotonic() < deadline, "the records never reached the partition"
            time.sleep(0.02)
        assert emu.drop_connections() >= 1
    finally:
        emu.set_latency(0)
    assert p.flush(30) == 0
    assert [r for r in reports if r[0] is not None] == []
    with sdk_producer(emu, hub) as sdk:
        last = sdk.get_partition_properties("0")["last_enqueued_sequence_number"]
    if idempotent:
        assert last == 19 and sorted(r[1] for r in reports) == list(range(20))
    else:
        assert last > 19


def test_connection_log_has_one_row_per_connection_with_the_client_id(tmp_path):
    log = tmp_path / "connections.jsonl"
    with EmulatorServer(EmulatorConfig(hubs=HUBS[:1]), ws_port=None, wss_port=None, tls_port=None,
                        kafka_tls_port=None, kafka_connection_log=str(log)) as server:
        for name in ("spark-executor-a", "spark-driver-b"):
            admin = AdminClient(client_conf(server, **{"client.id": name}))
            assert "ke-meta" in admin.list_topics(timeout=10).topics
            del admin
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    # librdkafka opens the bootstrap connection, then one to broker 0 as Metadata names it: each is a row
    assert {r["client_id"] for r in rows} == {"spark-driver-b", "spark-executor-a"}
    # the row is the first request after the sign-in (librdkafka opens with ApiVersions 18, then SaslHandshake 17
    # and SaslAuthenticate 36)
    assert all(r["api_key"] not in (17, 18, 36) and r["listener"] == "kafka" for r in rows), rows
    assert len({r["conn"] for r in rows}) == len(rows) >= 2


def test_connection_log_in_a_missing_folder_is_refused_before_start(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness.emulator", "--kafka-connection-log",
                           str(tmp_path / "nope" / "c.jsonl")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--kafka-connection-log" in proc.stderr and "does not exist" in proc.stderr
