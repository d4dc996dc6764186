"""Skewed partitions filled by many small batches drain completely through the SDK (credit, windows, offsets).

Background (investigated for the "consumer stalls at ~531 events per partition" report): the emulator keeps
granting and honouring credit on every partition; what looks like a stall is the sync SDK's
``EventHubConsumerClient.receive()`` polling all owned partitions round-robin from one thread
(``EventProcessor.start``). Each round hands at most one event per partition to ``on_event``, and a partition
that is already drained blocks for the socket timeout (0.2 s) in ``listen``, so once the smallest partition is
caught up the others crawl at ~5 events/s each (Azure/azure-sdk-for-python#27314, #26051; the real service
behaves the same). These tests pin the emulator side: with a reader that is not throttled that way (one
receiver per partition, or ``receive_batch``) every event arrives, once, in order, quickly.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig

HUB = "skewed"
COUNTS = (60, 420, 940, 250)  # very uneven, like zipf-keyed producers; 940 > 3 x prefetch (300)


@pytest.fixture(scope="module")
def filled():
    server = EmulatorServer(EmulatorConfig(hubs=(HubConfig(HUB, len(COUNTS)),))).start()
    rng = random.Random(7)
    conn = server.connection_string()
    p = EventHubProducerClient.from_connection_string(conn, eventhub_name=HUB)
    with p:
        for pid, total in enumerate(COUNTS):
            s = 0
            while s < total:  # many small batches of varying size, events of ~200 bytes with properties
                batch = p.create_batch(partition_id=str(pid))
                for _ in range(min(rng.randint(3, 15), total - s)):
                    e = EventData(json.dumps({"p": pid, "s": s, "pad": "z" * rng.randint(150, 230)}))
                    e.properties = {"k": f"key-{rng.randint(0, 199)}"}
                    batch.add(e)
                    s += 1
                p.send_batch(batch)
        assert [p.get_partition_properties(str(i))["last_enqueued_sequence_number"] for i in range(len(COUNTS))] \
            == [n - 1 for n in COUNTS]
    yield server
    server.stop()


def _check(received: dict) -> None:
    for pid, n in enumerate(COUNTS):
        got = received.get(str(pid), [])
        assert [e["s"] for e in got] == list(range(n)), f"partition {pid}: {len(got)} of {n}"
        assert all(e["p"] == pid for e in got)


def test_per_partition_receivers_drain_skewed_partitions(filled):
    conn = filled.connection_string()
    received: dict = {str(i): [] for i in range(len(COUNTS))}
    clients = [EventHubConsumerClient.from_connection_string(conn, consumer_group="$Default", eventhub_name=HUB)
               for _ in COUNTS]

    def on_event(ctx, ev):
        if ev is not None:
            received[ctx.partition_id].append(json.loads(ev.body_as_str()))

    threads = [threading.Thread(target=c.receive, daemon=True, kwargs=dict(
        on_event=on_event, partition_id=str(i), starting_position="-1", max_wait_time=0.5))
        for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 12
    while sum(map(len, received.values())) < sum(COUNTS) and time.monotonic() < deadline:
        time.sleep(0.05)
    for c in clients:
        c.close()
    for t in threads:
        t.join(10)
    _check(received)


def test_receive_batch_drains_skewed_partitions(filled):
    conn = filled.connection_string()
    received: dict = {str(i): [] for i in range(len(COUNTS))}
    client = EventHubConsumerClient.from_connection_string(
        conn, consumer_group="$Default", eventhub_name=HUB, load_balancing_interval=0.5)

    def on_batch(ctx, events):
        received[ctx.partition_id].extend(json.loads(ev.body_as_str()) for ev in events)

    t = threading.Thread(target=client.receive_batch, daemon=True, kwargs=dict(
        on_event_batch=on_batch, max_batch_size=300, starting_position="-1", max_wait_time=0.5))
    t.start()
    deadline = time.monotonic() + 12
    while sum(map(len, received.values())) < sum(COUNTS) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.close()
    t.join(10)
    _check(received)
