"""Fault hooks and retention, and how the unmodified SDK reacts to them."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from azure.eventhub import EventData
from azure.eventhub.exceptions import AuthenticationError, ConnectError, EventDataSendError, EventHubError

from emulator_helpers import collect, consumer, producer, wait_for
from test_sdk_epoch_metrics import Receiver


def _props(emu, hub, pid="0"):
    return emu.snapshot()["hubs"][hub]["partitions"][pid]


def test_delete_and_recreate_hub(emu):
    hub = "deleteme"
    with producer(emu, hub) as p:
        p.send_batch([EventData("before")], partition_id="0")
    r = Receiver(emu, hub)
    assert wait_for(lambda: r.events, 10)
    assert emu.delete_hub(hub) is True
    assert hub not in emu.snapshot()["hubs"]
    # the attached receiver was detached (its link is gone from the emulator) ...
    with producer(emu, hub, retry_total=0) as p:
        with pytest.raises(ConnectError, match="404"):
            p.get_eventhub_properties()
    with producer(emu, hub, retry_total=0) as p:
        with pytest.raises(EventHubError):
            p.send_batch([EventData("lost")], partition_id="0")
    r.stop()
    assert r.events[0].body_as_str() == "before" and len(r.events) == 1
    # recreated empty
    info = emu.recreate_hub(hub)
    assert info["partition_count"] == 2
    with producer(emu, hub) as p:
        assert p.get_partition_properties("0")["is_empty"] is True
        p.send_batch([EventData("after")], partition_id="0")
        assert p.get_partition_properties("0")["last_enqueued_sequence_number"] == 0
    got = collect(consumer(emu, hub), 1, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in got] == ["after"]


def _detaches(emu, hub, role, condition):
    return [d for d in emu.snapshot()["recent_detaches"]
            if d["role"] == role and d["condition"] == condition and f"/{hub}/" in (d["address"] or "") + "/"]


def test_delete_hub_detaches_links_with_not_found(emu):
    hub = "deleteme"
    emu.recreate_hub(hub)
    r = Receiver(emu, hub, pid="1")
    assert wait_for(lambda: emu.snapshot()["hubs"][hub]["receivers"] == 1, 10)
    before = len(_detaches(emu, hub, "receiver", "amqp:not-found"))
    emu.delete_hub(hub)
    # the open link is detached with amqp:not-found; reconnecting then fails at the CBS put-token, which the
    # service answers with 404 for a missing entity (the SDK keeps retrying that receiver quietly) ...
    assert wait_for(lambda: len(_detaches(emu, hub, "receiver", "amqp:not-found")) >= before + 1, 10)
    # ... and a new consumer of the missing hub gets AuthenticationError naming it, as against the service
    late = Receiver(emu, hub, pid="1")
    assert wait_for(lambda: late.errors, 15)
    assert isinstance(late.errors[0], AuthenticationError)
    assert "404" in str(late.errors[0]) and f"/{hub}' could not be found" in str(late.errors[0])
    assert not r.events and not late.events
    r.stop()
    late.stop()
    emu.recreate_hub(hub)


def test_age_out_by_sequence_number_and_time(emu):
    hub = "ageout"
    with producer(emu, hub) as p:
        p.send_batch([EventData(f"a{i}") for i in range(10)], partition_id="0")
        assert emu.age_out(hub, "0", up_to_seq=4) == 5
        props = p.get_partition_properties("0")
        assert props["beginning_sequence_number"] == 5
        assert props["last_enqueued_sequence_number"] == 9
    got = collect(consumer(emu, hub), 5, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in got][:5] == [f"a{i}" for i in range(5, 10)]
    # a consumer asking for an aged-out sequence number starts at the oldest retained event
    got = collect(consumer(emu, hub), 1, partition_id="0", starting_position=1, starting_position_inclusive=True)
    assert got[0].sequence_number == 5
    assert emu.age_out(hub, None, before_time=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)) == 5
    with producer(emu, hub) as p:
        props = p.get_partition_properties("0")
        assert props["is_empty"] is True
        assert props["last_enqueued_sequence_number"] == 9
        assert props["beginning_sequence_number"] == 10


def test_retention_expires_events(emu):
    hub = "retention"  # 3 s retention
    with producer(emu, hub) as p:
        p.send_batch([EventData("old")], partition_id="0")
        assert _props(emu, hub)["retained_events"] == 1
        assert wait_for(lambda: _props(emu, hub)["retained_events"] == 0, 10)
        p.send_batch([EventData("new")], partition_id="0")
        props = p.get_partition_properties("0")
        assert props["beginning_sequence_number"] == 1
    got = collect(consumer(emu, hub), 1, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in got] == ["new"]


def test_max_events_per_partition_bounds_memory(emu):
    hub = "bounded"  # at most 10 events retained
    with producer(emu, hub) as p:
        for _ in range(5):
            p.send_batch([EventData(b"x" * 100) for _ in range(5)], partition_id="0")
        props = p.get_partition_properties("0")
    assert props["last_enqueued_sequence_number"] == 24
    assert props["beginning_sequence_number"] == 15
    assert _props(emu, hub)["retained_events"] == 10


def test_throttle_reject_fails_send_until_lifted(emu):
    hub = "faults"
    with producer(emu, hub) as p:
        p.send_batch([EventData("ok")], partition_id="0")
        emu.throttle(True, mode="reject")
        with pytest.raises(EventDataSendError) as info:
            p.send_batch([EventData("busy")], partition_id="0")
        assert "server-busy" in str(info.value) or "busy" in str(info.value).lower()
        emu.throttle(False)
        p.send_batch([EventData("ok again")], partition_id="0")


def test_throttle_detach_consumer_resumes_without_duplicates(emu):
    hub = "faults"
    with producer(emu, hub) as p:
        start = p.get_partition_properties("1")["last_enqueued_sequence_number"]
        p.send_batch([EventData("t0")], partition_id="1")
        r = Receiver(emu, hub, pid="1", starting_position=start)
        assert wait_for(lambda: len(r.events) == 1, 10)
        emu.throttle(True, mode="detach")
        assert wait_for(lambda: emu.snapshot()["hubs"][hub]["receivers"] == 0, 5)
        with pytest.raises(EventHubError):
            p.send_batch([EventData("refused")], partition_id="1")
        emu.throttle(False)
        p.send_batch([EventData("t1")], partition_id="1")
        assert wait_for(lambda: len(r.events) >= 2, 15)
        time.sleep(0.3)
        r.stop()
    assert [e.body_as_str() for e in r.events] == ["t0", "t1"]


def test_drop_connections_sdk_reconnects_without_duplicates(emu):
    hub = "faults"
    with producer(emu, hub) as p:
        start = p.get_partition_properties("0")["last_enqueued_sequence_number"]
        r = Receiver(emu, hub, pid="0", starting_position=start)
        p.send_batch([EventData("d0")], partition_id="0")
        assert wait_for(lambda: len(r.events) == 1, 10)
        assert emu.drop_connections() >= 2
        p.send_batch([EventData("d1")], partition_id="0")  # the producer reconnects
        assert wait_for(lambda: len(r.events) >= 2, 15)
        emu.drop_connections(graceful=True)
        p.send_batch([EventData("d2")], partition_id="0")
        assert wait_for(lambda: len(r.events) >= 3, 15)
        time.sleep(0.3)
        r.stop()
    assert [e.body_as_str() for e in r.events] == ["d0", "d1", "d2"]
    assert not r.errors


def test_latency_delays_replies(emu):
    hub = "faults"
    with producer(emu, hub) as p:
        p.send_batch([EventData("warm")], partition_id="0")
        t0 = time.perf_counter()
        p.send_batch([EventData("fast")], partition_id="0")
        fast = time.perf_counter() - t0
        emu.set_latency(400)
        t0 = time.perf_counter()
        p.send_batch([EventData("slow")], partition_id="0")
        slow = time.perf_counter() - t0
        emu.set_latency(0)
    assert slow >= 0.4 > fast
