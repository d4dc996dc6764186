"""The service's behaviour as the unmodified SDK sees it: delivery annotations, refused links, receiver quota,
offsets, idle runtime metrics and partition-key placement."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from azure.eventhub import EventData
from azure.eventhub.amqp import AmqpAnnotatedMessage
from azure.eventhub.exceptions import (
    AuthenticationError, ConnectError, ConnectionLostError, EventHubError,
)

from emulator_helpers import collect, consumer, producer, wait_for
from test_sdk_epoch_metrics import Receiver

NO_RETRY = {"retry_total": 0}  # errors reach on_error at once (with retries the SDK re-attaches quietly forever)
RUNTIME_KEYS = {b"last_enqueued_sequence_number", b"last_enqueued_offset", b"last_enqueued_time_utc",
                b"runtime_info_retrieval_time_utc"}


# ---------------------------------------------------------------------------------------------- delivery annotations


@pytest.mark.parametrize("track", [False, True])
def test_delivery_annotations_reach_receivers(emu, track):
    """The SDK encodes delivery annotations after the body; the service accepts that and passes them on."""
    hub = "annotations"
    with producer(emu, hub) as p:
        event = EventData(b"traced")
        event.raw_amqp_message.delivery_annotations = {"x-trace": "t1", "hops": 7}
        p.send_batch([event, AmqpAnnotatedMessage(value_body={"k": 1}, delivery_annotations={"da": "v"})],
                     partition_id="0")
        single = EventData(b"single")
        single.raw_amqp_message.delivery_annotations = {"solo": True}
        p.send_event(single, partition_id="0")
    got = collect(consumer(emu, hub), 3, partition_id="0", starting_position="-1",
                  track_last_enqueued_event_properties=track)
    assert not got.errors
    annotations = [e.raw_amqp_message.delivery_annotations for e in got[:3]]
    own = [{k: v for k, v in a.items() if k not in RUNTIME_KEYS} for a in annotations]
    assert own == [{b"x-trace": b"t1", b"hops": 7}, {b"da": b"v"}, {b"solo": True}]
    assert got[1].body == {b"k": 1}
    if track:  # the service's runtime metrics share the one delivery-annotations map with the producer's
        assert all(RUNTIME_KEYS <= set(a) for a in annotations)
        last = emu.snapshot()["hubs"][hub]["partitions"]["0"]["last_enqueued_sequence_number"]
        assert got.contexts[2].last_enqueued_event_properties["sequence_number"] == last
    else:
        assert not any(RUNTIME_KEYS & set(a) for a in annotations)


# ---------------------------------------------------------------------------------------------- refused links


def test_missing_hub_create_batch_and_send_raise(emu):
    """As against the service: the CBS put-token for a missing entity fails with 404, so the SDK raises
    AuthenticationError (a ConnectError) instead of handing out a batch."""
    with producer(emu, "no-such-hub", retry_total=0) as p:
        with pytest.raises(ConnectError) as info:
            p.create_batch()
        assert isinstance(info.value, AuthenticationError)
        assert "404" in str(info.value) and "/no-such-hub' could not be found" in str(info.value)
        with pytest.raises(ConnectError, match="could not be found"):
            p.send_batch([EventData("lost")])


def test_missing_consumer_group_refuses_the_link_with_null_source(emu, caplog):
    caplog.set_level(logging.INFO, logger="azure.eventhub._pyamqp.link")
    c = consumer(emu, "refusals", cg="no-such-group", retry_total=0)
    got = collect(c, 1, timeout=10, stop_on_error=True, partition_id="0", starting_position="-1")
    assert not got
    assert got.errors, "the receiver must fail"
    err = got.errors[0][1]
    assert isinstance(err, ConnectionLostError) and "amqp:not-found" in str(err)
    assert "/refusals/consumergroups/no-such-group' could not be found" in str(err)
    # the SDK logs this when the attach reply's source is null, the AMQP 1.0 way of refusing a link (2.6.3)
    assert "Cannot get source or target" in caplog.text


def test_partition_gone_after_recreate_is_argument_out_of_range(emu):
    """A sender to a partition the hub no longer has is refused as the service does it (the SDK's cached
    partition ids let it try)."""
    hub = "shrink"
    emu.recreate_hub(hub, partition_count=4)
    with producer(emu, hub, retry_total=0) as p:
        p.send_batch([EventData("a")], partition_id="3")
        emu.recreate_hub(hub, partition_count=2)
        errors = []
        for _ in range(3):  # the first send may only learn that the old link was detached
            try:
                p.send_batch([EventData("b")], partition_id="3")
            except EventHubError as exc:
                errors.append(exc)
                if "partition is invalid" in str(exc):
                    break
    refused = errors[-1]
    assert isinstance(refused, ConnectError) and "com.microsoft:argument-out-of-range" in str(refused)
    assert "It should be between 0 and 1" in str(refused)
    assert emu.snapshot()["hubs"][hub]["partition_count"] == 2
    emu.recreate_hub(hub, partition_count=4)


# ---------------------------------------------------------------------------------------------- receiver quota


def test_sixth_non_epoch_receiver_is_refused(emu):
    hub = "quota"
    first = [Receiver(emu, hub, client_kw=NO_RETRY) for _ in range(5)]
    try:
        assert wait_for(lambda: emu.snapshot()["hubs"][hub]["receivers"] == 5, 15)
        sixth = Receiver(emu, hub, client_kw=NO_RETRY)
        assert wait_for(lambda: sixth.errors, 15)
        err = sixth.errors[0]
        assert isinstance(err, ConnectionLostError) and "amqp:resource-limit-exceeded" in str(err)
        assert ("Exceeded the maximum number of allowed receivers per partition in a consumer group which is 5. "
                "List of connected receivers - nil, nil, nil, nil, nil.") in str(err)
        assert not any(r.errors for r in first)
        # an epoch receiver is not counted: it takes the partition from all of them
        owner = Receiver(emu, hub, owner_level=1)
        assert wait_for(lambda: all(r.errors for r in first), 15)
        owner.stop()
        sixth.stop()
    finally:
        for r in first:
            r.stop()


# ---------------------------------------------------------------------------------------------- offsets


def test_offsets_are_strings_the_sdk_echoes(emu):
    hub = "refusals"
    with producer(emu, hub) as p:
        p.send_batch([EventData(f"o{i}") for i in range(3)], partition_id="1")
        last = p.get_partition_properties("1")["last_enqueued_offset"]
    got = collect(consumer(emu, hub), 3, partition_id="1", starting_position="-1")
    offsets = [e.offset for e in got]
    assert all(isinstance(o, str) for o in offsets) and offsets[-1] == last
    assert [e.system_properties[b"x-opt-offset"] for e in got] == [o.encode() for o in offsets]
    after = collect(consumer(emu, hub), 1, partition_id="1", starting_position=offsets[0])
    assert after[0].body_as_str() == "o1"


def test_non_numeric_offset_is_an_argument_error_not_not_found(emu):
    got = collect(consumer(emu, "refusals", retry_total=0), 1, timeout=10, stop_on_error=True, partition_id="0",
                  starting_position="not-an-offset")
    assert got.errors
    err = got.errors[0][1]
    assert isinstance(err, ConnectError) and "com.microsoft:argument-error" in str(err)
    assert "The supplied offset 'not-an-offset' is invalid." in str(err)
    assert "not-found" not in str(err)


# ---------------------------------------------------------------------------------------------- idle receivers


def test_idle_tracked_receiver_gets_no_fabricated_events(emu):
    """The service carries last-enqueued-event properties on delivered events only (every SDK reads them from
    the events' delivery annotations); an idle receiver gets nothing, so its properties stay those of the last
    event until a new one arrives and refreshes them."""
    hub = "idle"
    with producer(emu, hub) as p:
        p.send_batch([EventData("first")], partition_id="0")
    batches = []
    c = consumer(emu, hub)
    t = threading.Thread(target=c.receive_batch, kwargs=dict(
        on_event_batch=lambda ctx, evs: batches.append((list(evs), ctx.last_enqueued_event_properties)),
        partition_id="0", starting_position="-1", max_wait_time=0.5, track_last_enqueued_event_properties=True,
    ), daemon=True)
    t.start()
    try:
        assert wait_for(lambda: any(evs for evs, _ in batches), 10)
        time.sleep(2.0)  # idle: only empty batches, no fabricated events
        events = [e for evs, _ in batches for e in evs]
        assert [e.body_as_str() for e in events] == ["first"]
        idle_props = batches[-1][1]
        assert idle_props["sequence_number"] == events[0].sequence_number
        with producer(emu, hub) as p:
            p.send_batch([EventData("second")], partition_id="0")
        assert wait_for(lambda: any(e.body_as_str() == "second" for evs, _ in batches for e in evs), 10)
        assert batches[-1][1]["sequence_number"] == events[0].sequence_number + 1
    finally:
        c.close()
        t.join(10)


# ---------------------------------------------------------------------------------------------- key placement

# Published placements: Azure/azure-sdk-for-js sdk/eventhub/event-hubs/test/internal/mapPartitionKeyToId.spec.ts
# ("created from outputs received from the C# implementation of Jenkins lookup3 that the Event Hubs service
# uses"). "alphabet"/11 and "TheWorstParitionEver"/15 are where the service differs from a floor-mod port.
JS_PLACEMENTS = [("alphabet", "keys3", 0), ("alphabet", "keys11", 4), ("TheBestParitionEver", "keys4", 2),
                 ("TheWorstParitionEver", "keys15", 1)]


def test_partition_key_lands_where_the_service_puts_it(emu):
    def retained(hub):
        return {pid: p["retained_events"] for pid, p in emu.snapshot()["hubs"][hub]["partitions"].items()}

    for key, hub, expected in JS_PLACEMENTS:
        before = retained(hub)
        with producer(emu, hub) as p:
            batch = p.create_batch(partition_key=key)
            batch.add(EventData("keyed"))
            p.send_batch(batch)
        after = retained(hub)
        moved = [int(pid) for pid in after if after[pid] != before[pid]]
        assert moved == [expected], (key, hub)
