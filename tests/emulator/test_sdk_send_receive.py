"""The real azure-eventhub SDK (sync, pyamqp transport) against the emulator: properties and send modes."""

from __future__ import annotations

import datetime as dt

import pytest
from azure.eventhub import EventData
from azure.eventhub.exceptions import ConnectError, EventDataSendError

from harness.partitioning import eventhubs_partition_for_key
from emulator_helpers import collect, consumer, producer


def test_uses_pure_python_transport(emu):
    with producer(emu, "eh1") as p:
        assert p._amqp_transport.KIND == "pyamqp"


def test_hub_and_partition_properties(emu):
    with producer(emu, "eh1") as p:
        props = p.get_eventhub_properties()
        assert props["eventhub_name"] == "eh1"
        assert props["partition_ids"] == ["0", "1", "2", "3"]
        assert abs(props["created_at"] - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=10)
        assert p.get_partition_ids() == ["0", "1", "2", "3"]
        empty = p.get_partition_properties("3")
        assert empty["is_empty"] is True
        assert empty["last_enqueued_sequence_number"] == -1
        assert empty["beginning_sequence_number"] == -1
        assert empty["last_enqueued_offset"] == "-1"
        p.send_batch([EventData(b"x"), EventData(b"y")], partition_id="2")
        full = p.get_partition_properties("2")
        assert full["is_empty"] is False
        assert full["beginning_sequence_number"] == 0
        assert full["last_enqueued_sequence_number"] == 1
        assert int(full["last_enqueued_offset"]) > 0
        assert abs(full["last_enqueued_time_utc"] - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=1)


def test_unknown_hub_management_is_connect_error(emu):
    with producer(emu, "nosuchhub", retry_total=0) as p:
        with pytest.raises(ConnectError, match="404"):
            p.get_eventhub_properties()


def test_unknown_partition_properties_fail(emu):
    with producer(emu, "eh1", retry_total=0) as p:
        with pytest.raises(ConnectError):
            p.get_partition_properties("99")


def _partition_counts(emu, hub):
    return {pid: v["retained_events"] for pid, v in emu.snapshot()["hubs"][hub]["partitions"].items()}


def test_send_modes_place_events(emu):
    hub = "sendmodes"
    before = _partition_counts(emu, hub)
    with producer(emu, hub) as p:
        # partition-bound batch
        batch = p.create_batch(partition_id="3")
        for i in range(5):
            batch.add(EventData(f"bound-{i}"))
        p.send_batch(batch)
        # partition key: the service's hash decides
        key = "customer-42"
        p.send_batch([EventData("k1"), EventData("k2")], partition_key=key)
        # round robin: 8 batches over 4 partitions
        for i in range(8):
            p.send_batch([EventData(f"rr-{i}")])
        # single events
        p.send_event(EventData("single-bound"), partition_id="1")
        p.send_event(EventData("single-key"), partition_key=key)
    after = _partition_counts(emu, hub)
    delta = {pid: after[pid] - before[pid] for pid in after}
    keyed = str(eventhubs_partition_for_key(key, 4))
    expected = {pid: 2 for pid in after}  # round robin
    expected["3"] += 5
    expected["1"] += 1
    expected[keyed] += 3
    assert delta == expected


def test_received_events_carry_body_properties_and_system_properties(emu):
    hub = "sendmodes"
    key = "k-xyz"
    pid = str(eventhubs_partition_for_key(key, 4))
    with producer(emu, hub) as p:
        start = p.get_partition_properties(pid)["last_enqueued_sequence_number"]
        ev = EventData(b"\x00\x01payload")
        ev.properties = {"color": "blue", "n": 7}
        ev.content_type = "application/octet-stream"
        ev.correlation_id = "corr-1"
        ev.message_id = "msg-1"
        p.send_batch([ev, EventData("second")], partition_key=key)
    got = collect(consumer(emu, hub), 2, partition_id=pid, starting_position=start, starting_position_inclusive=False)
    assert [e.sequence_number for e in got] == [start + 1, start + 2]
    first = got[0]
    assert first.body_as_str(encoding="latin-1") == "\x00\x01payload"
    assert first.properties == {b"color": b"blue", b"n": 7}
    assert first.content_type == "application/octet-stream"
    assert first.correlation_id == "corr-1"
    assert first.message_id == "msg-1"
    assert first.partition_key == key.encode()
    assert int(got[1].offset) > int(first.offset)
    sp = first.system_properties
    assert sp[b"x-opt-sequence-number"] == start + 1
    assert sp[b"x-opt-partition-key"] == key.encode()
    assert got[1].body_as_str() == "second"


def test_batch_max_size_and_oversize_event(emu):
    with producer(emu, "big") as p:
        batch = p.create_batch()
        assert batch.max_size_in_bytes == 1024 * 1024
        with pytest.raises(ValueError):
            batch.add(EventData(b"x" * (1024 * 1024 + 10)))
        # a batch filled close to the limit goes through (multi-frame on the SDK side if needed)
        batch = p.create_batch(partition_id="0")
        n = 0
        while True:
            try:
                batch.add(EventData(b"z" * 1000))
                n += 1
            except ValueError:
                break
        p.send_batch(batch)
        props = p.get_partition_properties("0")
        assert props["last_enqueued_sequence_number"] >= n - 1
        # an event too large for the emulator's limit is rejected by the service side
        with pytest.raises((EventDataSendError, ValueError)):
            p.send_event(EventData(b"q" * (1024 * 1024 + 100)), partition_id="0")
