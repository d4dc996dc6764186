"""The Kafka <-> AMQP mapping (harness/emulator/kafka/mapping.py) against the real azure-eventhub SDK.

AMQP side in: an event the SDK sent (body, application properties, partition key) read from the emulator's log
with ``kafka_record`` must look as Microsoft's "exchange events between protocols" page says a Kafka consumer
sees it; the enqueued time and sequence numbers it must carry come from the SDK's own receiver.
Kafka side in: what ``amqp_message`` builds, appended to the log as the Kafka endpoint's Produce does, must reach
an SDK receiver as the page says an AMQP consumer sees a Kafka producer's record.
"""

from __future__ import annotations

import pytest
from azure.eventhub import EventData

from emulator_helpers import collect, consumer, producer

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig
from harness.emulator.amqp.codec import decode
from harness.emulator.kafka import mapping as M
from harness.emulator.kafka import records as R

HUBS = (HubConfig("amqp-in", 1, ("$Default",)), HubConfig("kafka-in", 1, ("$Default",)),
        HubConfig("batches", 1, ("$Default",)))


@pytest.fixture(scope="module")
def emu():
    server = EmulatorServer(EmulatorConfig(hubs=HUBS)).start()
    yield server
    server.stop()


def _log(emu, hub: str):
    return emu.core.broker.hub(hub).partitions["0"]


def _stored(emu, hub: str, index: int):
    def read():
        log = _log(emu, hub)
        return log.payloads[index], log.header_lens[index], log.times[index]

    return emu.call(read)


def _ms(dt) -> int:
    return round(dt.timestamp() * 1000)


def test_sdk_event_as_a_kafka_consumer_sees_it(emu):
    event = EventData(b"an event body")
    event.properties = {"MyStringProperty": "hello", "MyIntegerProperty": 1234, "raw": b"\x00\x01"}
    with producer(emu, "amqp-in") as p:
        batch = p.create_batch(partition_key="user-42")
        batch.add(event)
        p.send_batch(batch)
    (received,) = collect(consumer(emu, "amqp-in"), 1, starting_position="-1")

    ts, key, value, headers = M.kafka_record(*_stored(emu, "amqp-in", 0))
    assert value == b"an event body"  # the body, byte for byte
    assert key is None  # the partition key is not promoted to the Kafka key
    assert ts == _ms(received.enqueued_time)  # the service's time, as the SDK's receiver reports it
    got = dict(headers)
    assert len(got) == len(headers) == 4
    # application properties arrive AMQP-encoded, type code included: str8-utf8 (0xa1), length 5, "hello"
    assert got["MyStringProperty"] == b"\xa1\x05hello"
    int_header = got["MyIntegerProperty"]
    assert int_header[0] in (0x54, 0x55, 0x71, 0x81)  # smallint / smalllong / int / long, whichever the SDK chose
    assert decode(int_header, 0)[0] == 1234
    assert got["raw"] == b"\x00\x01"
    # the partition key reaches Kafka consumers as a header, AMQP-encoded like every AMQP-side value
    assert got["x-opt-partition-key"] == b"\xa1\x07user-42"


def test_kafka_record_as_an_sdk_consumer_sees_it(emu):
    msgs = [
        M.amqp_message(b"kafka-key", b"kafka value" * 100, [("MyIntegerProperty", (1234).to_bytes(4, "big")),
                                                           ("empty", b""), ("null", None), ("big", b"\x07" * 300)],
                       1_700_000_000_000),
        M.amqp_message(None, b"no key, no headers", [], 1_700_000_000_001),
    ]
    emu.call(_log(emu, "kafka-in").append, msgs)
    events = collect(consumer(emu, "kafka-in"), 2, starting_position="-1")
    assert len(events) == 2
    first, second = events
    assert b"".join(first.body) == b"kafka value" * 100  # past 255 bytes: the vbin32 and map32 encodings
    # Kafka headers are raw bytes to an AMQP consumer (binary application properties)
    props = {(k.decode() if isinstance(k, bytes) else k): v for k, v in first.properties.items()}
    assert props == {"MyIntegerProperty": b"\x00\x00\x04\xd2", "empty": b"", "null": None, "big": b"\x07" * 300}
    assert first.partition_key is None  # the Kafka key is not promoted to the partition key ...
    system = {(k.decode() if isinstance(k, bytes) else k): v for k, v in first.system_properties.items()}
    assert system["x-opt-kafka-key"] == b"kafka-key"  # ... it travels as x-opt-kafka-key
    assert b"".join(second.body) == b"no key, no headers"
    assert not second.properties
    assert [e.sequence_number for e in events] == [0, 1]


def test_round_trip_kafka_in_kafka_out(emu):
    """A Kafka producer's record read back by a Kafka consumer: key, value and headers unchanged."""
    headers = [("a", b"\x00\xff"), ("text", "ü".encode()), ("none", None)]
    emu.call(_log(emu, "kafka-in").append, [M.amqp_message(b"\x01key", b"\x00value", headers, 5)])
    payload, hlen, t = _stored(emu, "kafka-in", 2)
    assert M.kafka_record(payload, hlen, t) == (t, b"\x01key", b"\x00value", headers)


def test_null_value_is_a_null_value_again(emu):
    emu.call(_log(emu, "kafka-in").append, [M.amqp_message(b"tombstone", None, [], 5)])
    payload, hlen, t = _stored(emu, "kafka-in", 3)
    assert M.kafka_record(payload, hlen, t) == (t, b"tombstone", None, [])


def test_encode_events_offsets_are_sequence_numbers(emu):
    """Batches for Fetch: offsets are the SDK's sequence numbers, timestamps the enqueued times (LogAppendTime),
    one batch per enqueued time, and the byte bound stops between batches but never before the first record."""
    with producer(emu, "batches") as p:
        for n in range(3):  # three sends: three enqueued times (the emulator never lets them go backwards)
            batch = p.create_batch(partition_id="0")
            for i in range(4):
                batch.add(EventData(b"x" * 100 + bytes([n, i])))
            p.send_batch(batch)
    sdk = collect(consumer(emu, "batches"), 12, starting_position="-1")
    assert len(sdk) == 12
    log = _log(emu, "batches")
    raw, nxt = emu.call(M.encode_events, log, 0, 1 << 20)
    assert nxt == 12
    batches = R.decode_batches(raw)
    got = [(b.base_offset + r.offset_delta, b.max_timestamp, r.value) for b in batches for r in b.records]
    want = [(e.sequence_number, _ms(e.enqueued_time), b"".join(e.body)) for e in sdk]
    assert got == want
    assert all(b.timestamp_type == R.LOG_APPEND_TIME for b in batches)
    assert len(batches) == len({_ms(e.enqueued_time) for e in sdk})

    raw, nxt = emu.call(M.encode_events, log, 5, 1)  # a bound smaller than one event: one record still goes out
    (only,) = R.decode_batches(raw)
    assert (only.base_offset, len(only.records), nxt) == (sdk[5].sequence_number, 1, 6)
