"""Every starting position the SDK can express, against a partition with known events."""

from __future__ import annotations

import threading
import time

import pytest
from azure.eventhub import EventData

from emulator_helpers import collect, consumer, producer

HUB = "positions"


@pytest.fixture(scope="module")
def seeded(emulator):
    """Partition 0 holds 10 events; returns their (seq, offset, enqueued_time)."""
    with producer(emulator, HUB) as p:
        for i in range(10):
            p.send_batch([EventData(f"e{i}")], partition_id="0")
            if i == 4:
                time.sleep(0.05)  # distinct enqueued times between the halves
    got = collect(consumer(emulator, HUB), 10, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in got] == [f"e{i}" for i in range(10)]
    return [(e.sequence_number, e.offset, e.enqueued_time) for e in got]


def _bodies(emulator, n, timeout=5.0, **kw):
    got = collect(consumer(emulator, HUB), max(n, 1), timeout=timeout, partition_id="0", **kw)
    return [e.body_as_str() for e in got][: max(n, 1)]


def test_from_start(emulator, seeded):
    assert _bodies(emulator, 10, starting_position="-1") == [f"e{i}" for i in range(10)]
    assert [s for s, _, _ in seeded] == list(range(10))


@pytest.mark.parametrize("inclusive,expected", [(False, ["e4", "e5"]), (True, ["e3", "e4"])])
def test_offset(emulator, seeded, inclusive, expected):
    offset = seeded[3][1]
    assert isinstance(offset, str)
    assert _bodies(emulator, 2, starting_position=offset, starting_position_inclusive=inclusive) == expected


@pytest.mark.parametrize("inclusive,expected", [(False, ["e7", "e8", "e9"]), (True, ["e6", "e7", "e8"])])
def test_sequence_number(emulator, seeded, inclusive, expected):
    assert _bodies(emulator, 3, starting_position=6, starting_position_inclusive=inclusive) == expected


def test_enqueued_time(emulator, seeded):
    t5 = seeded[5][2]
    got = _bodies(emulator, 5, starting_position=t5, starting_position_inclusive=True)
    assert got == [f"e{i}" for i in range(5, 10)]
    # exclusive: strictly after e5's time (e6.. may share it only if sent in the same millisecond)
    later = _bodies(emulator, 0, timeout=2.5, starting_position=seeded[-1][2], starting_position_inclusive=False)
    assert later == []


def test_per_partition_dict_positions(emulator, seeded):
    got = _bodies(emulator, 2, starting_position={"0": 7}, starting_position_inclusive={"0": True})
    assert got == ["e7", "e8"]


def test_latest_sees_only_new_events(emulator, seeded):
    c = consumer(emulator, HUB)
    received = []
    receiving = threading.Event()

    def on_event(ctx, ev):
        if ev is None:  # max_wait_time passed without an event: the SDK's link is attached and reading
            receiving.set()
        else:
            received.append(ev.body_as_str())

    t = threading.Thread(target=c.receive, kwargs=dict(
        on_event=on_event, partition_id="0", starting_position="@latest", max_wait_time=0.2), daemon=True)
    t.start()
    # "latest" is where the partition ends when the link attaches: only then is an event sent "new" (a fixed
    # pause after initialize was too short on a busy machine, which left "fresh" before the link's position)
    assert receiving.wait(30)
    with producer(emulator, HUB) as p:
        p.send_batch([EventData("fresh")], partition_id="0")
    deadline = time.monotonic() + 10
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    c.close()
    t.join(10)
    assert received == ["fresh"]
    # and the default starting position of receive() is @latest as well
    assert _bodies(emulator, 0, timeout=2.5) == []


def test_position_beyond_end_waits(emulator, seeded):
    assert _bodies(emulator, 0, timeout=2.5, starting_position=10_000) == []
