"""confluent-kafka (librdkafka) against the emulator's Kafka endpoint, used the way Microsoft's pages use it.

Every expected value comes from the real clients: what librdkafka's delivery reports say was written where, what
its consumer then reads, what the azure-eventhub SDK sends and receives (its own AMQP decoder reads the header
bytes a Kafka consumer gets for an AMQP property), or from the service's documents (only gzip is a supported
codec: "apache-kafka-configurations"; AMQP properties reach Kafka consumers as their AMQP encoding and Kafka
headers reach AMQP consumers as binary: "event-hubs-exchange-events-different-protocols"). Nothing is read from
the emulator's internals.
"""

from __future__ import annotations

import threading
import time

import pytest
from azure.eventhub import EventData
from azure.eventhub._pyamqp._decode import _DECODE_BY_CONSTRUCTOR
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from emulator_helpers import collect, consumer, producer
from kafka_helpers import client_conf, collect_errors, consume_assigned, poll_n, produce

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig

CG = ("$Default",)
HUBS = (
    HubConfig("kc-basic", 4, CG),
    HubConfig("kc-many", 1, CG),
    HubConfig("kc-gzip", 1, CG),
    HubConfig("kc-codecs", 1, CG),
    HubConfig("kc-idem", 2, CG),
    HubConfig("kc-big", 1, CG),
    HubConfig("kc-group", 3, CG),
    HubConfig("kc-times", 1, CG),
    HubConfig("kc-amqp-in", 2, CG),
    HubConfig("kc-kafka-in", 2, CG),
    HubConfig("kc-tls", 1, CG),
    HubConfig("kc-threads", 4, CG),
)


@pytest.fixture(scope="module")
def kemu():
    server = EmulatorServer(EmulatorConfig(hubs=HUBS), ws_port=None, wss_port=None, kafka_port=0,
                            kafka_tls_port=0).start()
    yield server
    server.stop()


def _by_partition(deliveries) -> dict[int, list]:
    out: dict[int, list] = {}
    for d in deliveries:
        out.setdefault(d[1], []).append(d)
    return out


def test_acks_all_with_keys_and_headers_read_back_at_the_reported_offsets(kemu):
    records = [dict(value=f"value-{i}".encode(), key=f"key-{i}".encode(), partition=i % 4,
                    headers=[("seq", str(i).encode()), ("kind", b"\x00\xffbinary")]) for i in range(120)]
    sent = produce(kemu, "kc-basic", records)
    assert sent.errors() == []
    parts = _by_partition(sent)
    assert sorted(parts) == [0, 1, 2, 3]
    for p, ds in parts.items():
        offsets = [d[2] for d in ds]
        # each partition's reports: consecutive offsets in send order (a fresh hub starts at 0)
        assert offsets == list(range(offsets[0], offsets[0] + len(ds))) and offsets[0] == 0, (p, offsets)
    got = consume_assigned(kemu, "kc-basic", {p: 0 for p in parts}, len(records))
    assert len(got) == len(records)
    reported = {(d[1], d[2]): d for d in sent}
    headers_sent = {r["value"]: r["headers"] for r in records}  # delivery reports carry no headers
    for m in got:
        d = reported[(m.partition(), m.offset())]
        assert (m.key(), m.value()) == (d[3], d[4])
        assert m.headers() == headers_sent[m.value()]
    c = Consumer(client_conf(kemu, **{"group.id": "kc-wm"}))
    try:
        for p, ds in parts.items():
            assert c.get_watermark_offsets(TopicPartition("kc-basic", p), timeout=10) == (0, ds[-1][2] + 1)
    finally:
        c.close()


def test_many_small_records_batched_by_the_client(kemu):
    n = 5000
    sent = produce(kemu, "kc-many", [dict(value=b"%06d" % i, partition=0) for i in range(n)],
                   **{"linger.ms": 50, "batch.num.messages": 1000})
    assert sent.errors() == []
    assert [d[2] for d in sent] == list(range(n))
    got = consume_assigned(kemu, "kc-many", {0: 0}, n)
    assert [m.value() for m in got] == [b"%06d" % i for i in range(n)]


def test_gzip_batches_are_read_back_uncompressed(kemu):
    values = [(b"gzip me %d " % i) * 20 for i in range(300)]
    sent = produce(kemu, "kc-gzip", [dict(value=v, key=b"k", partition=0) for v in values],
                   **{"compression.codec": "gzip", "linger.ms": 20})
    assert sent.errors() == []
    got = consume_assigned(kemu, "kc-gzip", {0: 0}, len(values))
    assert [m.value() for m in got] == values and {m.key() for m in got} == {b"k"}


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_codecs_the_service_does_not_support_are_refused(kemu, codec):
    """Microsoft: "Only gzip supported ... Other compression types (snappy, lz4, zstd) aren't supported"."""
    sent = produce(kemu, "kc-codecs", [dict(value=b"y" * 200, partition=0) for _ in range(5)],
                   **{"compression.codec": codec, "message.timeout.ms": 10000})
    assert sent.ok() == []
    assert {e.code() for e in sent.errors()} == {KafkaError.UNSUPPORTED_COMPRESSION_TYPE}, sent.errors()


def test_idempotent_producer_is_served(kemu):
    """Microsoft's configuration page keeps `enable.idempotence` on (InitProducerId, sequence numbers)."""
    records = [dict(value=b"i%d" % i, partition=i % 2) for i in range(200)]
    sent = produce(kemu, "kc-idem", records, **{"enable.idempotence": True, "linger.ms": 10,
                                                "max.in.flight.requests.per.connection": 5})
    assert sent.errors() == []
    got = consume_assigned(kemu, "kc-idem", {0: 0, 1: 0}, 200)
    assert sorted(m.value() for m in got) == sorted(r["value"] for r in records)
    assert len({(m.partition(), m.offset()) for m in got}) == 200  # each once


def test_transactions_cannot_be_started(kemu):
    """Microsoft's configuration page: "Transactions: Not currently supported"; a transactional producer never
    gets a transactional id accepted (however the endpoint refuses it: no coordinator or an authorization error)."""
    p = Producer(client_conf(kemu, **{"transactional.id": "kc-tx", "log_level": 0}))
    with pytest.raises(KafkaException) as info:
        p.init_transactions(2)
    assert info.value.args[0].code() in (KafkaError._TIMED_OUT, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                         KafkaError.COORDINATOR_NOT_AVAILABLE), info.value


def test_a_record_near_the_1mb_limit_goes_through_and_one_over_it_is_refused(kemu):
    near = b"n" * 1_040_000  # below the service's max.request.size constraint of 1,046,528 bytes
    sent = produce(kemu, "kc-big", [dict(value=near, partition=0)], **{"message.max.bytes": 1_046_000})
    assert sent.errors() == []
    (m,) = consume_assigned(kemu, "kc-big", {0: sent[0][2]}, 1, **{"fetch.max.bytes": 4_000_000,
                                                                    "max.partition.fetch.bytes": 4_000_000,
                                                                    "receive.message.max.bytes": 5_000_000})
    assert m.value() == near
    # the client's own limit raised so the record reaches the endpoint: the refusal is the broker's
    over = produce(kemu, "kc-big", [dict(value=b"o" * (1024 * 1024 + 1024), partition=0)],
                   **{"message.max.bytes": 3_000_000, "message.timeout.ms": 15000, "retries": 0})
    assert [e.code() for e in over.errors()] == [KafkaError.MSG_SIZE_TOO_LARGE], over.errors()
    after = produce(kemu, "kc-big", [dict(value=b"after", partition=0)])
    assert after.errors() == [] and after[0][2] == sent[0][2] + 1  # nothing was written for the refused one


def test_subscribe_in_a_group_commits_and_a_new_member_resumes_there(kemu):
    topic, group = "kc-group", "kc-group-1"
    first = produce(kemu, topic, [dict(value=b"a%d" % i, partition=i % 3) for i in range(30)])
    assert first.errors() == []
    conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}
    c = Consumer(client_conf(kemu, **conf))
    assigned: list = []
    c.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(p.partition for p in parts))
    try:
        got = poll_n(c, 30, 30)
        assert sorted(m.value() for m in got) == sorted(b"a%d" % i for i in range(30))
        assert sorted(assigned) == [0, 1, 2]
        c.commit(asynchronous=False)
        ends = {p: max(d[2] for d in first if d[1] == p) + 1 for p in range(3)}
        committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        c.close()
    second = produce(kemu, topic, [dict(value=b"b%d" % i, partition=i % 3) for i in range(6)])
    assert second.errors() == []
    c2 = Consumer(client_conf(kemu, **conf))
    c2.subscribe([topic])
    try:
        got2 = poll_n(c2, 6, 30)
        assert sorted(m.value() for m in got2) == sorted(b"b%d" % i for i in range(6))
        assert poll_n(c2, 1, 2) == []  # nothing of the committed first round again
    finally:
        c2.close()


def test_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(kemu):
    for i in range(3):
        assert produce(kemu, "kc-times", [dict(value=b"t%d" % i, partition=0)]).errors() == []
        time.sleep(0.05)
    got = consume_assigned(kemu, "kc-times", {0: 0}, 3)
    stamps = [m.timestamp()[1] for m in got]
    assert stamps == sorted(stamps) and stamps[0] < stamps[2]
    c = Consumer(client_conf(kemu, **{"group.id": "kc-times"}))
    try:
        for m, ts in zip(got, stamps):
            (tp,) = c.offsets_for_times([TopicPartition("kc-times", 0, ts)], timeout=10)
            assert tp.error is None and tp.offset == min(x.offset() for x, s in zip(got, stamps) if s >= ts)
        (late,) = c.offsets_for_times([TopicPartition("kc-times", 0, stamps[-1] + 60_000)], timeout=10)
        assert late.offset == -1  # no record that late: Kafka answers -1 (the end)
    finally:
        c.close()


def test_list_topics_shows_every_hub_with_its_partitions_on_one_broker(kemu):
    c = Consumer(client_conf(kemu, **{"group.id": "kc-meta"}))
    try:
        md = c.list_topics(timeout=10)
        assert list(md.brokers) == [0]
        b = md.brokers[0]
        assert (b.host, b.port) == ("127.0.0.1", kemu.kafka_port)
        for hub in HUBS:
            t = md.topics[hub.name]
            assert t.error is None and sorted(t.partitions) == list(range(hub.partition_count))
            assert {p.leader for p in t.partitions.values()} == {0}
        missing = c.list_topics(topic="kc-no-such-hub", timeout=10).topics["kc-no-such-hub"]
        assert missing.error is not None and missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()


def _amqp_value(raw: bytes):
    """A header value a Kafka consumer got for an AMQP property, decoded by the SDK's own AMQP decoder (which
    gives AMQP strings, constructors 0xa1/0xb1, back as their UTF-8 bytes: decoded to str here)."""
    rest, value = _DECODE_BY_CONSTRUCTOR[raw[0]](memoryview(raw)[1:])
    assert len(rest) == 0, raw
    return value.decode() if raw[0] in (0xA1, 0xB1) else value


def test_sdk_events_with_properties_and_partition_key_read_by_a_kafka_consumer(kemu):
    with producer(kemu, "kc-amqp-in") as p:
        batch = p.create_batch(partition_key="pk-1")
        for i in range(3):
            ev = EventData(b"amqp-body-%d" % i)
            ev.properties = {"MyStringProperty": "hello", "MyIntegerProperty": 1234, "n": i}
            batch.add(ev)
        p.send_batch(batch)
    received = collect(consumer(kemu, "kc-amqp-in"), 3, starting_position="-1")
    assert len(received) == 3
    got = consume_assigned(kemu, "kc-amqp-in", {0: 0, 1: 0}, 3)
    assert len(got) == 3
    by_body = {m.value(): m for m in got}
    for ev in received:
        m = by_body[ev.body_as_str().encode()]
        # one position for both protocols: the Kafka offset is the event's sequence number
        assert m.offset() == ev.sequence_number
        assert m.partition() == int(next(ctx.partition_id for ctx, e in zip(received.contexts, received)
                                         if e is ev))
        headers = dict(m.headers())
        assert _amqp_value(headers.pop("MyStringProperty")) == "hello"
        assert _amqp_value(headers.pop("MyIntegerProperty")) == 1234
        assert _amqp_value(headers.pop("n")) == ev.properties[b"n"]
        # the service team (Azure/azure-sdk-for-python#18460): the partition key is NOT promoted to the record's
        # key; it travels as the header "x-opt-partition-key" (its value's encoding is not documented: the
        # string's UTF-8 bytes or its AMQP encoding are both taken here)
        assert m.key() is None
        pk = headers.pop("x-opt-partition-key")
        assert pk == b"pk-1" or _amqp_value(pk) == "pk-1", pk
        assert headers == {}, headers


def test_kafka_records_with_key_and_headers_read_by_the_sdk(kemu):
    records = [dict(value=b"kafka-body-%d" % i, key=b"kkey", partition=1,
                    headers=[("MyStringProperty", b"hello world"), ("MyIntegerProperty", (1234).to_bytes(4, "big")),
                             ("RawHeaders", b"\x00\x00\x00\x00")]) for i in range(3)]
    sent = produce(kemu, "kc-kafka-in", records)
    assert sent.errors() == []
    events = collect(consumer(kemu, "kc-kafka-in"), 3, partition_id="1", starting_position="-1")
    assert [e.body_as_str().encode() for e in events] == [r["value"] for r in records]
    for ev, d in zip(events, sent):
        assert ev.sequence_number == d[2]
        # Kafka headers reach AMQP consumers as binary values, byte for byte
        assert ev.properties == {b"MyStringProperty": b"hello world", b"MyIntegerProperty": b"\x00\x00\x04\xd2",
                                 b"RawHeaders": b"\x00\x00\x00\x00"}
        # by design not the partition key (Azure/azure-sdk-for-python#18460): the Kafka key is the message
        # annotation "x-opt-kafka-key"
        assert ev.partition_key is None
        assert ev.system_properties[b"x-opt-kafka-key"] == b"kkey"


def _auth_failure(kemu, code: int = KafkaError._AUTHENTICATION, *, tls: bool = False, **conf) -> list:
    """The errors librdkafka reports for a client with these settings, once it reported an error ``code`` (or
    after 10 s); the client never gets metadata."""
    errors, cb = collect_errors()
    c = Consumer(client_conf(kemu, tls=tls, **{"group.id": "kc-auth", "error_cb": cb, **conf}))
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e.code() == code for e in errors):
            c.poll(0.1)
        with pytest.raises(KafkaException):
            c.list_topics(timeout=1)
    finally:
        c.close()
    return errors


def test_wrong_key_is_an_authentication_error(kemu):
    name, key = kemu.sas_key
    bad = kemu.connection_string(key_name=name, key=key[:-4] + "AAA=")
    errors = _auth_failure(kemu, password=bad)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_wrong_user_name_is_an_authentication_error(kemu):
    errors = _auth_failure(kemu, user="admin")
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_unknown_key_name_is_an_authentication_error(kemu):
    errors = _auth_failure(kemu, password=kemu.connection_string(key_name="NoSuchKey", key="AAAA"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_no_sasl_at_all_gets_no_metadata(kemu):
    errors, cb = collect_errors()
    conf = client_conf(kemu, **{"group.id": "kc-nosasl", "error_cb": cb})
    for k in ("sasl.mechanism", "sasl.username", "sasl.password"):
        conf.pop(k)
    conf["security.protocol"] = "PLAINTEXT"
    c = Consumer(conf)
    try:
        with pytest.raises(KafkaException):
            c.list_topics(timeout=4)
    finally:
        c.close()
    assert errors and all(e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                                       KafkaError._AUTHENTICATION) for e in errors), errors


def test_sasl_ssl_with_the_emulators_ca(kemu):
    sent = produce(kemu, "kc-tls", [dict(value=b"over tls", partition=0)], tls=True)
    assert sent.errors() == []
    (m,) = consume_assigned(kemu, "kc-tls", {0: 0}, 1, tls=True)
    assert m.value() == b"over tls"
    # a client that does not trust the emulator's CA does not get through
    errors = _auth_failure(kemu, KafkaError._SSL, tls=True, **{"ssl.ca.location": "probe"})  # system CAs only
    assert any(e.code() == KafkaError._SSL and "certificate verify failed" in e.str() for e in errors), errors


def test_sasl_plaintext_clients_on_many_threads(kemu):
    """Several producers at once, each on its own connection: every delivery reported, none lost."""
    results: list = []

    def run(i):
        results.append(produce(kemu, "kc-threads", [dict(value=b"t%d-%d" % (i, j), partition=j % 4)
                                                  for j in range(50)]))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 4 and all(r.errors() == [] for r in results)
    offsets = [(d[1], d[2]) for r in results for d in r]
    assert len(set(offsets)) == 200  # no two records at one position

