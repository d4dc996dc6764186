"""Event Hubs side of a producer process: the unmodified azure-eventhub SDK (sync client, cooperative under gevent).

Keys are placed the way the service places partition keys (`harness.partitioning.eventhubs_partition_for_key`),
and events are sent in batches to that partition id, so a batch can hold many keys; events with no key go round
robin. One batch per partition is in flight at a time, which keeps per-partition order for the checker. The SDK
does not return offsets on send, so acked rows carry offset -1 (the checker then compares partitions only).
"""
from __future__ import annotations

import time
from collections import deque

import gevent
from azure.eventhub import EventData, EventHubProducerClient

from harness.partitioning import eventhubs_partition_for_key
from producers.kafka_sender import event_fields
from producers.records import AckLog, SecondStats

LINGER_S = 0.005


class EventHubsSender:
    name = "eventhubs"

    def __init__(self, hub: str, settings: dict, acks: AckLog, stats: SecondStats, partitions: int):
        self.client = EventHubProducerClient.from_connection_string(
            settings["connection_string"], eventhub_name=hub, retry_total=int(settings.get("retry_total", 3)))
        self.partitions = partitions
        self.acks = acks
        self.stats = stats
        self.pending: list[deque] = [deque() for _ in range(partitions)]
        self.in_flight = [0] * partitions
        self.greenlets: set = set()
        self.rr = 0
        self.max_batch = int(settings.get("max_batch_events", 1000))

    def send(self, value: bytes, key: bytes | None, partition: int | None, headers: list | None = None) -> None:
        if partition is None:
            if key is not None:
                partition = eventhubs_partition_for_key(key.decode(), self.partitions)
            else:
                partition = self.rr
                self.rr = (self.rr + 1) % self.partitions
        self.pending[partition].append((value, time.time(), headers))
        if len(self.pending[partition]) >= self.max_batch and not self.in_flight[partition]:
            self._flush(partition)

    def service(self) -> None:
        now = time.time()
        for p, queue in enumerate(self.pending):
            if queue and not self.in_flight[p] and (len(queue) >= self.max_batch or now - queue[0][1] >= LINGER_S):
                self._flush(p)

    def _flush(self, partition: int) -> None:
        queue = self.pending[partition]
        batch = self.client.create_batch(partition_id=str(partition))
        events = []
        while queue and len(events) < self.max_batch:
            value, produced, headers = queue[0]
            data = EventData(value)
            if headers:
                data.properties = {k: v for k, v in headers}
            try:
                batch.add(data)
            except ValueError:  # the batch is full (size limit): the rest goes in the next one
                break
            events.append(queue.popleft())
        if not events:
            value, produced, _ = queue.popleft()  # larger than any batch: fails on its own
            self._record(partition, [(value, produced, None)], "EventDataTooLarge")
            return
        self.in_flight[partition] = len(events)
        g = gevent.spawn(self._send, partition, batch, events)
        self.greenlets.add(g)
        g.link(self.greenlets.discard)

    def _send(self, partition: int, batch, events: list) -> None:
        try:
            self.client.send_batch(batch)
            error = None
        except Exception as exc:  # every SDK failure is recorded by its class, never swallowed
            error = type(exc).__name__
        finally:
            self.in_flight[partition] = 0
        self._record(partition, events, error)

    def _record(self, partition: int, events: list, error: str | None) -> None:
        now = time.time()
        ack_ms = f"{now * 1000.0:.3f}"
        rows, latencies = [], []
        for value, produced, _ in events:
            seq, intended = event_fields(value)
            latency_us = int((now - produced) * 1e6)
            latencies.append(latency_us)
            rows.append(f"{seq},{partition},-1,{intended},{ack_ms},{latency_us},{error or ''}\n")
            if error:
                self.stats.on_fail(error, now)
        self.acks.write_rows(rows)
        if not error:
            self.stats.on_acks([partition] * len(events), [len(e[0]) for e in events], latencies, now)

    def outstanding(self) -> int:
        return sum(len(q) for q in self.pending) + sum(self.in_flight)

    def abandon(self) -> None:
        """Events never handed to the SDK are failed; batches in flight are left to finish or fail."""
        for p, queue in enumerate(self.pending):
            if queue:
                self._record(p, list(queue), "NotSentBeforeExit")
                queue.clear()

    def close(self) -> None:
        gevent.joinall(list(self.greenlets), timeout=10)
        self.client.close()
