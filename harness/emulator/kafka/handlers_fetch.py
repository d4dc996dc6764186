"""Fetch and ListOffsets: reading a hub's partition log as Kafka records, where offset = sequence number.

Fetch long-polls as a broker does: it answers at once when ``min_bytes`` are there, else it waits up to
``max_wait_ms`` for an append to one of the partitions (the log's append listeners, as AMQP receivers use them) or
for a hub fault (delete, recreate, age-out: ``KafkaEndpoint.hub_changed``), then answers with what there is.
Limits are the protocol's: ``partition_max_bytes`` per partition and ``max_bytes`` per response, measured on the
stored events, but the first partition with data always returns at least one event, so a consumer cannot stall
on an event larger than its limits. The log start offset is the first retained sequence number, the high
watermark (and the last stable offset: there are no transactions) the last enqueued sequence number + 1; an
offset below the log start (aged out) or above the high watermark is OFFSET_OUT_OF_RANGE, on which a consumer
applies its ``auto.offset.reset``. While the namespace is throttled, responses are held back ``THROTTLE_MS`` and
carry it as ``throttle_time_ms`` (the service delays outgoing messages the same way).

Fetch sessions (KIP-227) are not kept: every response says session id 0, which clients take as "send full fetch
requests", as when a broker's session cache is full.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left

import harness.emulator.kafka.errors as E
import harness.emulator.kafka.mapping as mapping
from .wire import Api, Reader, Writer

FETCH, LIST_OFFSETS = 1, 2
THROTTLE_MS = 1000
RESPONSE_MAX_BYTES = 8 * 1024 * 1024  # per response whatever the client asks (its default is 50 MiB): bounds
# what one connection makes the emulator hold, as a broker's own fetch.max.bytes bounds it
MAX_WAIT_S = 30.0  # a client's max_wait_ms beyond this is cut short (Kafka's own request timeouts are 30 s)
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


class FetchWaiter:
    """A fetch waiting for data. It sits in the partition logs' ``listeners`` beside AMQP receiver links, which
    the broker wakes on append through ``listener.credit`` and ``listener.conn.schedule_pump()``: here credit is
    always 1 and ``conn`` is the waiter itself, so an append (or a hub fault) completes its future."""

    __slots__ = ("session", "future", "credit", "conn")

    def __init__(self, session) -> None:
        self.session = session
        self.future = session.broker.loop.create_future()
        self.credit = 1
        self.conn = self

    def schedule_pump(self) -> None:
        self.wake()

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


async def fetch(session, version: int, r: Reader) -> bytes:
    flex = version >= 12
    r.int32()  # replica_id (-1 for consumers)
    max_wait = max(0, r.int32()) / 1000.0
    min_bytes = r.int32()
    max_bytes = min(r.int32() if version >= 3 else 0x7FFFFFFF, RESPONSE_MAX_BYTES)
    if version >= 4:
        r.int8()  # isolation level: no transactions, both levels read the same
    session_id, session_epoch = (r.int32(), r.int32()) if version >= 7 else (0, -1)

    def partition(r: Reader):
        index = r.int32()
        if version >= 9:
            r.int32()  # current leader epoch
        offset = r.int64()
        if version >= 12:
            r.int32()  # last fetched epoch
        if version >= 5:
            r.int64()  # log start offset (followers only)
        limit = r.int32()
        r.tags(flex)
        return index, offset, limit

    def topic(r: Reader):
        name = r.str(flex)
        parts = r.arr(partition, flex) or []
        r.tags(flex)
        return name, parts

    topics = r.arr(topic, flex) or []
    if version >= 7:
        r.arr(lambda r: (r.str(flex), r.arr(Reader.int32, flex), r.tags(flex)), flex)  # forgotten topics
    if version >= 11:
        r.str(flex)  # rack id
    r.tags(flex)
    top_error = E.NONE
    if session_id != 0 or session_epoch > 0:  # an incremental fetch on a session we never created
        top_error, topics = E.FETCH_SESSION_ID_NOT_FOUND, []
    broker = session.broker
    throttle = THROTTLE_MS if broker.throttle_mode else 0
    if throttle:
        await asyncio.sleep(throttle / 1000.0)
    deadline = time.monotonic() + min(max_wait, MAX_WAIT_S)
    while True:
        results, total = _read(session, topics, max_bytes)
        wait = deadline - time.monotonic()
        if total >= min_bytes or wait <= 0 or session.closed or top_error != E.NONE or _any_error(results):
            break  # an error (hub deleted, offset aged out) is news the client needs now, as data is
        await _wait_for_data(session, broker, topics, wait)
    for name, parts in results:
        for res in parts:
            if res[5] is not None:
                broker.stats_out += res[5][1]
    w = Writer().int32(throttle)
    if version >= 7:
        w.int16(top_error).int32(0)

    def part(w: Writer, res) -> None:
        index, error, hw, log_start, _, batch = res
        w.int32(index).int16(error).int64(hw).int64(hw)  # last stable offset = high watermark
        if version >= 5:
            w.int64(log_start)
        w.arr(None, None, flex)  # aborted transactions
        if version >= 11:
            w.int32(-1)  # preferred read replica
        w.bytes_v(batch[0] if batch is not None else b"", flex).tags(flex)  # empty, not null, as brokers send

    w.arr(results, lambda w, t: w.str(t[0], flex).arr(t[1], part, flex).tags(flex), flex)
    return w.tags(flex).getvalue()


def _any_error(results) -> bool:
    return any(res[1] != E.NONE for _, parts in results for res in parts)


def _read(session, topics, max_bytes: int):
    """[(topic, [(index, error, high watermark, log start, None, (batch bytes, count) | None)])], bytes found."""
    results = []
    budget = max_bytes
    total = 0
    for name, parts in topics:
        hub = session.hub(name)
        missing = E.UNKNOWN_TOPIC_OR_PARTITION if hub is not None else session.topic_error(name)
        out = []
        for index, offset, limit in parts:
            p = hub.partitions.get(str(index)) if hub is not None and index >= 0 else None
            if p is None:
                out.append((index, missing, -1, -1, None, None))
                continue
            if p.count == 0:  # nothing retained: the log starts where the next event will be
                start = p.next_seq
            else:
                start = p.begin_seq
            hw = p.next_seq
            if offset < start or offset > hw:
                out.append((index, E.OFFSET_OUT_OF_RANGE, hw, start, None, None))
                continue
            batch = None
            if offset < hw and (budget > 0 or total == 0):
                batch, size = _encode(p, offset, min(limit, budget))
                total += size
                budget -= size
            out.append((index, E.NONE, hw, start, None, batch))
        results.append((name, out))
    return results, total


def _encode(p, offset: int, limit: int):
    """((record batches, event count), bytes) of the events from ``offset`` within about ``limit`` bytes, the first
    event always included (mapping.encode_events: LogAppendTime batches, as the service's)."""
    i = offset - p.base_seq
    data, nxt = mapping.encode_events(p, i, max(1, limit), base_offset=offset)
    if nxt == i:
        return None, 0
    return (data, nxt - i), len(data)


async def _wait_for_data(session, broker, topics, timeout: float) -> None:
    waiter = FetchWaiter(session)
    logs = []
    for name, parts in topics:
        hub = session.hub(name)
        if hub is None:
            continue
        for index, _, _ in parts:
            p = hub.partitions.get(str(index))
            if p is not None:
                p.listeners.add(waiter)
                logs.append(p)
    session.endpoint.fetch_waiters.add(waiter)
    try:
        await asyncio.wait_for(asyncio.shield(waiter.future), timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        session.endpoint.fetch_waiters.discard(waiter)
        for p in logs:
            p.listeners.discard(waiter)


async def list_offsets(session, version: int, r: Reader) -> bytes:
    flex = version >= 6
    r.int32()  # replica id
    if version >= 2:
        r.int8()  # isolation level

    def partition(r: Reader):
        index = r.int32()
        if version >= 4:
            r.int32()
        ts = r.int64()
        r.tags(flex)
        return index, ts

    def topic(r: Reader):
        name = r.str(flex)
        parts = r.arr(partition, flex) or []
        r.tags(flex)
        return name, parts

    topics = r.arr(topic, flex) or []
    r.tags(flex)
    broker = session.broker
    w = Writer()
    if version >= 2:
        w.int32(0)

    def part(w: Writer, res) -> None:
        w.int32(res[0]).int16(res[1]).int64(res[2]).int64(res[3])
        if version >= 4:
            w.int32(-1)  # leader epoch unknown (see handlers_meta)
        w.tags(flex)

    results = []
    for name, parts in topics:
        hub = session.hub(name)
        if hub is None and session.topic_error(name) == E.TOPIC_AUTHORIZATION_FAILED:
            results.append((name, [(index, E.TOPIC_AUTHORIZATION_FAILED, -1, -1) for index, _ in parts]))
            continue
        results.append((name, [_offset_for(hub, index, ts) for index, ts in parts]))
    w.arr(results, lambda w, t: w.str(t[0], flex).arr(t[1], part, flex).tags(flex), flex)
    return w.tags(flex).getvalue()


def _offset_for(hub, index: int, ts: int) -> tuple[int, int, int, int]:
    """(partition, error, timestamp, offset) for one ListOffsets query."""
    p = hub.partitions.get(str(index)) if hub is not None and index >= 0 else None
    if p is None:
        return index, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    p.expire()
    start = p.begin_seq if p.count else p.next_seq
    if ts == LATEST:
        return index, E.NONE, -1, p.next_seq
    if ts == EARLIEST:
        return index, E.NONE, -1, start
    if ts == MAX_TIMESTAMP:
        if p.count == 0:
            return index, E.NONE, -1, -1
        return index, E.NONE, p.times[-1], p.next_seq - 1
    if ts < 0:
        return index, E.INVALID_REQUEST, -1, -1
    i = bisect_left(p.times, ts, p.head, len(p.times))  # first event enqueued at or after ts
    if i >= len(p.times):
        return index, E.NONE, -1, -1
    return index, E.NONE, p.times[i], p.base_seq + i


APIS = (
    Api(FETCH, "Fetch", 4, 12, 12, fetch),
    Api(LIST_OFFSETS, "ListOffsets", 1, 7, 6, list_offsets),
)
