"""Event Hubs side of a producer process: the unmodified azure-eventhub SDK (sync client, cooperative under gevent).

How events are addressed is the scenario's choice (`[backend] send`):
- `partition_key`: each batch carries one partition key and the service hashes it, as production senders do;
  consecutive events with the same key share a batch. The ack names the partition the key hashes to
  (`harness.partitioning`, checked against published vectors), so the checker sees any placement the service
  got wrong.
- `partition_id`: the same hash done here, events batched per partition id (many keys per batch: cheaper).
- `round_robin`: no key, no partition; the service spreads the batches. The ack's partition is unknown (-1).
Events wait in one lane per partition (one lane in round robin) and a lane has one send in flight at a time, so
each partition receives a producer's events in sequence order. The SDK returns no offsets: acks carry -1.
A finished send goes to the history as one batch of columns (ids read back from the values in bulk).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable

import gevent
import numpy as np
from azure.eventhub import EventData, EventHubProducerClient

from harness.history import AckWriter
from harness.partitioning import eventhubs_partition_for_key
from producers.payloads import read_event_ids
from producers.records import SecondStats

LINGER_S = 0.005
SEND_MODES = ("partition_key", "partition_id", "round_robin")



def fill_batch(batch, event_at: Callable[[int], "EventData | None"], limit: int) -> int:
    """Adds event_at(0), event_at(1), ... to an EventDataBatch until `limit` events, until event_at gives None,
    or until the batch is full (the SDK refuses an event past the batch's size limit with ValueError: it goes in
    the next batch): how many went in."""
    n = 0
    while n < limit:
        event = event_at(n)
        if event is None:
            break
        try:
            batch.add(event)
        except ValueError:
            break
        n += 1
    return n

class EventHubsSender:
    name = "eventhubs"

    def __init__(self, hub: str, settings: dict, acks: AckWriter, stats: SecondStats, partitions: int):
        self.mode = settings.get("send", "partition_key")
        if self.mode not in SEND_MODES:
            raise ValueError(f"send must be one of {', '.join(SEND_MODES)}, got {self.mode!r}")
        self.client = EventHubProducerClient.from_connection_string(
            settings["connection_string"], eventhub_name=hub, retry_total=int(settings.get("retry_total", 3)))
        self.partitions = partitions
        self.acks = acks
        self.stats = stats
        lanes = 1 if self.mode == "round_robin" else partitions
        self.pending: list[deque] = [deque() for _ in range(lanes)]
        self.in_flight = [0] * lanes  # a greenlet is draining the lane
        self.sending = [0] * lanes  # events in the batch on the wire
        self.greenlets: set = set()
        self.rr = 0
        self.max_batch = int(settings.get("max_batch_events", 1000))

    @classmethod
    def from_job(cls, job: dict, acks: AckWriter, stats: SecondStats) -> "EventHubsSender":
        return cls(job["stream"], job["settings"], acks, stats, int(job["partitions"]))

    def send_many(self, values: list[bytes], keys, partitions, headers: list | None = None) -> None:
        """Queue a batch in order (`keys`/`partitions` per event or None); nothing here waits."""
        send = self.send
        if partitions is None:
            for value, key in zip(values, keys if keys is not None else [None] * len(values)):
                send(value, key, None, headers)
        else:
            for value, key, partition in zip(values, keys, partitions):
                send(value, key, partition, headers)

    def send(self, value: bytes, key: bytes | None, partition: int | None, headers: list | None = None) -> None:
        if self.mode == "round_robin":
            lane = 0
        elif partition is not None:
            lane = partition
        elif key is not None:
            lane = eventhubs_partition_for_key(key.decode(), self.partitions)
        else:
            lane = self.rr
            self.rr = (self.rr + 1) % self.partitions
        self.pending[lane].append((value, time.time(), headers, key if partition is None else None))
        if len(self.pending[lane]) >= self.max_batch and not self.in_flight[lane]:
            self._start(lane)

    def service(self) -> None:
        now = time.time()
        for lane, queue in enumerate(self.pending):
            if queue and not self.in_flight[lane] and (len(queue) >= self.max_batch or now - queue[0][1] >= LINGER_S):
                self._start(lane)

    def _start(self, lane: int) -> None:
        self.in_flight[lane] = 1
        g = gevent.spawn(self._drain, lane)
        self.greenlets.add(g)
        g.link(self.greenlets.discard)

    def _drain(self, lane: int) -> None:
        """Send the lane's queue in order, batch after batch, until it is empty."""
        queue = self.pending[lane]
        try:
            while queue:
                self._send_one(lane, queue)
        finally:
            self.in_flight[lane] = 0

    def _send_one(self, lane: int, queue: deque) -> None:
        key = queue[0][3] if self.mode == "partition_key" else None
        if self.mode == "round_robin":
            batch = self.client.create_batch()
        elif key is not None:
            batch = self.client.create_batch(partition_key=key.decode())
        else:
            batch = self.client.create_batch(partition_id=str(lane))
        def event_at(i: int) -> EventData | None:  # one batch holds one key's events (partition_key)
            if i >= len(queue) or (key is not None and queue[i][3] != key):
                return None
            value, _, headers, _ = queue[i]
            data = EventData(value)
            if headers:
                data.properties = {k: v for k, v in headers}
            return data

        events = [queue.popleft() for _ in range(fill_batch(batch, event_at, self.max_batch))]
        if not events:
            self._record(lane, [queue.popleft()], "EventDataTooLarge")  # larger than any batch: fails on its own
            return
        self.sending[lane] = len(events)
        try:
            self.client.send_batch(batch)
            error = None
        except Exception as exc:  # every SDK failure is recorded by its class, never swallowed
            error = type(exc).__name__
        finally:
            self.sending[lane] = 0
        self._record(lane, events, error)

    def _record(self, lane: int, events: list, error: str | None) -> None:
        partition = -1 if self.mode == "round_robin" else lane
        now = time.time()
        values = [e[0] for e in events]
        seq, intended_ms = read_event_ids(self.acks.producer, values)
        latency_us = ((now - np.array([e[1] for e in events], dtype=np.float64)) * 1e6).astype(np.int64)
        self.acks.append(seq, partition, -1, intended_ms, now * 1000.0, latency_us, error)
        if error:
            self.stats.on_fail(error, now, len(events))
        else:
            self.stats.on_acks(np.full(len(events), partition), [len(v) for v in values], latency_us, now)

    def outstanding(self) -> int:
        return sum(len(q) for q in self.pending) + sum(self.sending)

    def abandon(self) -> None:
        """Events never handed to the SDK are failed; batches in flight are left to finish or fail."""
        for lane, queue in enumerate(self.pending):
            if queue and not self.in_flight[lane]:
                self._record(lane, list(queue), "NotSentBeforeExit")
                queue.clear()

    def close(self) -> None:
        gevent.joinall(list(self.greenlets), timeout=10)
        for lane, queue in enumerate(self.pending):
            if queue:  # a lane still sending when time ran out
                self._record(lane, list(queue), "NotSentBeforeExit")
                queue.clear()
        self.client.close()
