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

from harness.records.history import AckWriter
from harness.partitioning import eventhubs_partition_for_key
from harness.producers.payloads import read_event_ids
from harness.producers.records import SecondStats

LINGER_S = 0.005
# Finished sends are recorded in bulk, as the Kafka sender records its reports: each recording has a fixed cost
# (reading the ids back, numpy calls) that a send per partition per batch would pay a hundred times a second.
HOLD_S = 0.2
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
    """A producer process's Event Hubs client. A batch from the pacer is queued to its lanes and every idle lane
    starts sending at once (`send_many`): nothing is gained by waiting, the batch holds everything due. `service`
    starts a lane a single `send` left waiting for LINGER_S; the process calls it every `service_every_s`, far
    less often than its default of a millisecond (a thousand wake-ups of the hub a second cost more CPU than the
    producer's own work at moderate rates)."""

    name = "eventhubs"
    service_every_s = 0.05

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
        self._lane_of_key: dict[bytes, int] = {}  # the service's hash of a key, computed once per key
        self._done: list[tuple[int, list, str | None, float]] = []  # finished sends not yet recorded
        self._recorded_at = time.monotonic()

    @classmethod
    def from_job(cls, job: dict, acks: AckWriter, stats: SecondStats) -> "EventHubsSender":
        return cls(job["stream"], job["settings"], acks, stats, int(job["partitions"]))

    def send_many(self, values: list[bytes], keys, partitions, headers: list | None = None) -> None:
        """Queue a batch in order (`keys`/`partitions` per event or None) and start every idle lane that has
        events; nothing here waits."""
        send = self.send
        if partitions is None:
            for value, key in zip(values, keys if keys is not None else [None] * len(values)):
                send(value, key, None, headers)
        else:
            for value, key, partition in zip(values, keys, partitions):
                send(value, key, partition, headers)
        for lane, queue in enumerate(self.pending):
            if queue and not self.in_flight[lane]:
                self._start(lane)

    def send(self, value: bytes, key: bytes | None, partition: int | None, headers: list | None = None) -> None:
        if self.mode == "round_robin":
            lane = 0
        elif partition is not None:
            lane = partition
        elif key is not None:
            lane = self._lane_of_key.get(key)
            if lane is None:
                lane = self._lane_of_key[key] = eventhubs_partition_for_key(key.decode(), self.partitions)
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
        if self._done and time.monotonic() - self._recorded_at >= HOLD_S:
            self._record_done()

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
        """A finished send (or events failed without one), held until the next bulk recording; its ack time is
        now."""
        self._done.append((lane, events, error, time.time()))

    def _record_done(self) -> None:
        """Every held send into the history and the stats as one batch of columns: each event's partition, its ack
        time (when its send finished) and its error class ("" acked)."""
        self._recorded_at = time.monotonic()
        done, self._done = self._done, []
        if not done:
            return
        counts = [len(events) for _, events, _, _ in done]
        values = [e[0] for _, events, _, _ in done for e in events]
        queued = np.fromiter((e[1] for _, events, _, _ in done for e in events), dtype=np.float64, count=len(values))
        at = np.repeat(np.array([t for _, _, _, t in done]), counts)
        partitions = np.repeat(np.array([-1 if self.mode == "round_robin" else lane for lane, _, _, _ in done],
                                        dtype=np.int64), counts)
        seq, intended_ms = read_event_ids(self.acks.producer, values)
        latency_us = ((at - queued) * 1e6).astype(np.int64)
        errors = [error or "" for _, _, error, _ in done]
        now = float(at[-1])
        if not any(errors):
            self.acks.append(seq, partitions, -1, intended_ms, at * 1000.0, latency_us)
            self.stats.on_acks(partitions, [len(v) for v in values], latency_us, now)
            return
        per_event = np.repeat(np.array(errors, dtype=object), counts)
        self.acks.append(seq, partitions, -1, intended_ms, at * 1000.0, latency_us, list(per_event))
        self.stats.on_fails([e for e in per_event if e], now)
        ok = per_event == ""
        self.stats.on_acks(partitions[ok], [len(v) for v, good in zip(values, ok) if good], latency_us[ok], now)

    def outstanding(self) -> int:
        return sum(len(q) for q in self.pending) + sum(self.sending)

    def abandon(self) -> None:
        """Events never handed to the SDK are failed; batches in flight are left to finish or fail."""
        for lane, queue in enumerate(self.pending):
            if queue and not self.in_flight[lane]:
                self._record(lane, list(queue), "NotSentBeforeExit")
                queue.clear()
        self._record_done()

    def close(self) -> None:
        gevent.joinall(list(self.greenlets), timeout=10)
        for lane, queue in enumerate(self.pending):
            if queue:  # a lane still sending when time ran out
                self._record(lane, list(queue), "NotSentBeforeExit")
                queue.clear()
        self._record_done()
        self.client.close()
