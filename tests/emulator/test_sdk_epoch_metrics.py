"""Owner level (epoch) stealing and refusal, the steal fault hook, and last-enqueued-event runtime metrics."""

from __future__ import annotations

import threading

from azure.eventhub import EventData

from emulator_helpers import collect, consumer, producer, wait_for


class Receiver:
    """EventHubConsumerClient.receive on one partition in a thread, recording events and errors."""

    def __init__(self, emu, hub, pid="0", client_kw=None, **kw):
        self.client = consumer(emu, hub, **(client_kw or {}))
        self.events, self.errors, self.closed = [], [], []
        kw.setdefault("starting_position", "-1")
        self.thread = threading.Thread(target=self.client.receive, kwargs=dict(
            on_event=lambda ctx, ev: self.events.append(ev),
            on_error=lambda ctx, err: self.errors.append(err),
            on_partition_close=lambda ctx, reason: self.closed.append(reason),
            partition_id=pid, **kw), daemon=True)
        self.thread.start()

    def stop(self):
        self.client.close()
        self.thread.join(10)


def _receivers(emu, hub, pid="0"):
    return emu.snapshot()["hubs"][hub]["receivers"]


def test_higher_epoch_steals_and_lower_is_refused(emu):
    hub = "epochs"
    with producer(emu, hub) as p:
        p.send_batch([EventData("a")], partition_id="0")
    low = Receiver(emu, hub, owner_level=1)
    assert wait_for(lambda: low.events, 10)
    high = Receiver(emu, hub, owner_level=2)
    assert wait_for(lambda: high.events, 10)
    assert wait_for(lambda: low.errors, 10), "the lower-epoch receiver must learn it lost the partition"
    assert "stolen" in str(low.errors[0]).lower() or "epoch" in str(low.errors[0]).lower()
    # a new receiver with a lower epoch is refused while the higher one is attached
    lower = Receiver(emu, hub, owner_level=1)
    assert wait_for(lambda: lower.errors, 10)
    assert not lower.events
    # a receiver without owner level is refused as well
    plain = Receiver(emu, hub)
    assert wait_for(lambda: plain.errors, 10)
    assert not plain.events
    # the owner keeps receiving
    with producer(emu, hub) as p:
        p.send_batch([EventData("b")], partition_id="0")
    assert wait_for(lambda: len(high.events) == 2, 10)
    for r in (low, high, lower, plain):
        r.stop()


def test_equal_epoch_takes_over(emu):
    hub = "epochs"
    first = Receiver(emu, hub, pid="1", owner_level=5)
    assert wait_for(lambda: _receivers(emu, hub) >= 1, 10)
    second = Receiver(emu, hub, pid="1", owner_level=5)
    assert wait_for(lambda: first.errors, 10)
    assert not second.errors
    first.stop()
    second.stop()


def test_steal_fault_hook(emu):
    hub = "epochs"
    with producer(emu, hub) as p:
        p.send_batch([EventData("s")], partition_id="1")
    r = Receiver(emu, hub, pid="1", owner_level=3)
    assert wait_for(lambda: r.events, 10)
    assert emu.steal(hub, "1", "$Default", hold_s=5) == 1
    assert wait_for(lambda: r.errors, 10)
    assert "stolen" in str(r.errors[0]).lower() or "epoch" in str(r.errors[0]).lower()
    r.stop()
    # while the phantom owner holds the partition, the same epoch is refused
    again = Receiver(emu, hub, pid="1", owner_level=3)
    assert wait_for(lambda: again.errors, 10)
    assert not again.events
    again.stop()


def test_runtime_metrics(emu):
    hub = "metrics"
    with producer(emu, hub) as p:
        p.send_batch([EventData(f"m{i}") for i in range(3)], partition_id="0")
        last = p.get_partition_properties("0")
    got = collect(consumer(emu, hub), 3, partition_id="0", starting_position="-1",
                  track_last_enqueued_event_properties=True)
    assert len(got) >= 3
    props = got.contexts[0].last_enqueued_event_properties
    assert props["sequence_number"] == last["last_enqueued_sequence_number"]
    assert props["offset"] == last["last_enqueued_offset"]
    assert props["enqueued_time"] == last["last_enqueued_time_utc"]
    assert props["retrieval_time"] is not None
    # without the capability there are no runtime metrics
    plain = collect(consumer(emu, hub), 1, partition_id="0", starting_position="-1")
    assert plain.contexts[0].last_enqueued_event_properties is None
