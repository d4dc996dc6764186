"""Kafka side of a producer process: one confluent-kafka Producer; its reports served by a native poll thread.

Never flush() or poll(timeout>0) on the hub: under gevent those block it inside librdkafka and stall every
other greenlet. A full local queue (BufferError) is answered by a cooperative sleep and a retry, and counted.
Delivery reports are collected by one producer-wide callback (it keeps the message, nothing else) on a native
thread that waits in poll(timeout) outside the hub (see KafkaSender), and handled in bulk by the hub: each
message's fields are read with C-level `map`s, the events' ids and intended times are read back from the values'
heads with numpy (`read_event_ids`), and the batch goes to the history as columns. No Python work per event
beyond the client's own calls.
"""
from __future__ import annotations

import math
import time
from collections import deque
from itertools import repeat
from operator import is_not, length_hint

import gevent
import gevent.monkey
import numpy as np
from confluent_kafka import Message, Producer

from harness.secrets import expand_all
from harness.records.history import AckWriter
from harness.producers.payloads import read_event_ids
from harness.producers.records import SecondStats

DEFAULTS = {
    "partitioner": "murmur2_random",  # what Java clients do, so key placement matches production
    "enable.idempotence": True,  # per-partition order survives retries: the checker relies on it
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 200000,
    "compression.type": "none",
}


def event_fields(value: bytes) -> tuple[str, str]:
    """(seq, intended_ms) as text, read from the head of one encoded event (see producers.event)."""
    _, seq, intended, _ = value[:80].split(b",", 3)
    return seq[4:].decode(), intended[4:].decode()


def _numbers(values: list, dtype, missing) -> np.ndarray:
    """A column from a list the client filled, where None (no offset, no latency) becomes `missing`."""
    column = np.array(values, dtype=np.float64)  # None -> nan in one C pass
    nan = np.isnan(column)
    if nan.any():
        column[nan] = missing
    return column.astype(dtype)


def _column(msgs: list, getter, dtype, missing) -> np.ndarray:
    """One field of every report as a column, straight from the iterator (no list); a None anywhere (no
    partition, offset or latency) takes the list path that maps it to `missing`."""
    try:
        return np.fromiter(map(getter, msgs), dtype=dtype, count=len(msgs))
    except TypeError:
        return _numbers(list(map(getter, msgs)), dtype, missing)


# Reports are recorded in bulk: recording has a fixed cost per call (~0.1-0.4 ms of numpy calls), which at one
# poll a millisecond with a few reports each cost more than the reports themselves.
HOLD_S, BULK = 0.2, 5000
# The poll thread's wait: poll(timeout) returns as soon as reports are served, so this is only how often an idle
# thread looks at its stop flag.
POLL_WAIT_S = 0.1
# the hub called service() twice within HUB_GAP_S, the last time within HUB_BUSY_S: it is sending flat out and
# serving the reports itself (about as promptly as the thread would), so the thread waits; a hub serving once per
# batch of a moderate rate (every batch_wait_ms) is not busy, and the thread serves the reports as they come
HUB_GAP_S, HUB_BUSY_S = 0.025, 0.01
_native_sleep = gevent.monkey.get_original("time", "sleep")
_exhaust = deque(maxlen=0).extend  # runs an iterator to its end in C, keeping nothing
_NativeLock = gevent.monkey.get_original("threading", "Lock")


class KafkaSender:
    """`poll_thread=True` (a producer process): between batches the client's reports are served by a native thread
    blocked in poll(timeout), outside the gevent hub (it releases the GIL while it waits), which wakes when reports
    arrive, instead of a greenlet polling every millisecond for them (that busy loop was most of a producer's CPU at
    moderate rates). A busy hub, calling `service` after every batch, polls with poll(0) itself and the thread
    waits. Either way a report's time is when the poll that served it returned. Without the thread (tests, a plain
    thread), `service` polls."""

    name = "kafka"
    service_every_s = HOLD_S  # between batches the poll thread serves the reports: the hub need not look more often

    def __init__(self, topic: str, settings: dict, acks: AckWriter, stats: SecondStats, poll_thread: bool = False):
        config = dict(DEFAULTS)
        config.update(expand_all(settings))  # secrets come as ${VAR} references (harness.backends.kafka.security)
        reports: list = []  # filled by the callback, on the thread that polls (the one holding _poll_lock)
        keep = reports.append
        config["on_delivery"] = lambda err, msg: keep(msg)  # msg.error() is err
        self._reports = reports
        self._ready: deque[tuple[list, float]] = deque()  # (one poll's reports, when it returned): thread-safe
        self._held: list = []  # reports taken from _ready, not yet recorded
        self._marks: list[tuple[int, float]] = []  # (reports held after a poll, when that poll returned)
        self._recorded_at = time.monotonic()
        self.topic = topic
        self.producer = Producer(config)
        self.acks = acks
        self.stats = stats
        self._stop_polling = False
        self._poll_lock = _NativeLock()  # one poller at a time: the thread or the hub (a real lock: two threads)
        self._hub_asked_at = -math.inf  # when the hub last called service()
        self._hub_gap = math.inf  # ... and how long after the call before it
        self._poller = None
        if poll_thread:
            self._poller = gevent.get_hub().threadpool.spawn(self._poll_loop)

    @classmethod
    def from_job(cls, job: dict, acks: AckWriter, stats: SecondStats) -> "KafkaSender":
        return cls(job["stream"], job["settings"], acks, stats, poll_thread=True)

    def connect(self, timeout_s: float) -> None:
        """Before the traffic (producers.process.connect): the broker connected and the topic's metadata in the
        client's cache, so the first batch does not wait for them. On the hub's thread pool: the hub goes on."""
        gevent.get_hub().threadpool.apply(self.producer.list_topics, (self.topic,), {"timeout": timeout_s})

    def _poll_once(self, timeout: float) -> None:
        """Serve reports (the caller holds _poll_lock, or there is no poll thread) and hand them on with the time
        the poll returned."""
        self.producer.poll(timeout)
        reports = self._reports
        if reports:
            batch = reports[:]
            del reports[:]
            self._ready.append((batch, time.time()))

    def _poll_loop(self) -> None:
        """The poll thread: blocks in the client (POLL_WAIT_S at a time) until reports arrive, hands each poll's to
        the hub. While the hub polls often itself (a producer flat out serves the client after every batch:
        `service`), the thread stays out of its way: its callbacks would take the GIL from the hub's produce loop,
        which cost a producer flat out half again its CPU per event."""
        while not self._stop_polling:
            if self._hub_gap < HUB_GAP_S and time.monotonic() - self._hub_asked_at < HUB_BUSY_S:
                _native_sleep(HUB_BUSY_S)
                continue
            with self._poll_lock:
                self._poll_once(POLL_WAIT_S)

    def _stop_poll_thread(self) -> None:
        if self._poller is not None:
            self._stop_polling = True
            self._poller.get()  # cooperative under gevent: the hub goes on meanwhile
            self._poller = None

    def send_many(self, values: list[bytes], keys, partitions, headers: list | None = None) -> None:
        """Hand a batch to the client in order (`keys`/`partitions` per event or None). A full queue is waited out
        cooperatively; a GreenletExit during such a wait is held until the whole batch is handed over (its
        sequence numbers are taken), then raised."""
        produce, topic = self.producer.produce, self.topic
        n, stopped = len(values), None
        if keys is None:
            keys = [None] * n
        if partitions is None and not headers:  # the usual case: the calls made by map (no bytecode per event)
            done = 0
            while done < n:
                rest = iter(values if not done else values[done:])
                try:
                    _exhaust(map(produce, repeat(topic, n - done), rest, keys if not done else keys[done:]))
                    done = n
                except BufferError:  # map took the refused event from `rest`: those before it are handed over
                    done = n - length_hint(rest) - 1
                    stopped = self._wait_for_room(stopped)
        else:
            done = 0
            while done < n:
                try:
                    if partitions is None:
                        for i in range(done, n):
                            produce(topic, values[i], keys[i], headers=headers)
                            done += 1
                    else:
                        for i in range(done, n):
                            produce(topic, values[i], keys[i], partitions[i], headers=headers)
                            done += 1
                except BufferError:
                    stopped = self._wait_for_room(stopped)
        if stopped is not None:
            raise stopped

    def _wait_for_room(self, stopped):
        """A full local queue: count it and sleep cooperatively; a GreenletExit meanwhile is returned, to be raised
        once the batch is handed over."""
        self.stats.on_buffer_full(time.time())
        try:
            gevent.sleep(0.005)
        except gevent.GreenletExit as exc:  # stopped while waiting for queue space: finish the batch first
            stopped = exc
        return stopped

    def send(self, value: bytes, key: bytes | None, partition: int | None, headers: list | None = None) -> None:
        self.send_many([value], [key], None if partition is None else [partition], headers)

    def service(self) -> None:
        """Serve the client's reports here with poll(0) unless the poll thread is in the middle of doing so (never
        waits for it); take what was served; record in bulk, at least every HOLD_S or BULK reports."""
        now = time.monotonic()
        self._hub_gap, self._hub_asked_at = now - self._hub_asked_at, now
        if self._poller is None:
            self._poll_once(0)
        elif self._poll_lock.acquire(False):
            try:
                self._poll_once(0)
            finally:
                self._poll_lock.release()
        self._take_ready()
        n = len(self._held)
        if n and (n >= BULK or time.monotonic() - self._recorded_at >= HOLD_S):
            self._record()

    def _take_ready(self) -> None:
        ready, held = self._ready, self._held
        while ready:
            batch, at = ready.popleft()
            held.extend(batch)
            self._marks.append((len(held), at))

    def _record(self) -> None:
        """The held reports into the history and the stats, as columns. Each event's ack time is when the poll
        that served its report returned (so ack_ms - latency is its produce call, however long it was held)."""
        self._recorded_at = time.monotonic()
        self._take_ready()
        msgs, self._held = self._held, []
        marks, self._marks = self._marks, []
        n = len(msgs)
        if not n:
            return
        ends = np.array([m[0] for m in marks], dtype=np.int64)
        ack_ms = np.repeat(np.array([m[1] for m in marks]) * 1000.0, np.diff(ends, prepend=0))
        now = marks[-1][1]
        values = list(map(Message.value, msgs))
        seq, intended_ms = read_event_ids(self.acks.producer, values)
        partitions = _column(msgs, Message.partition, np.int32, -1)
        # acked without an offset (librdkafka: a retried send the broker already had): -1, "unknown"
        offsets = _column(msgs, Message.offset, np.int64, -1)
        latency_us = (_column(msgs, Message.latency, np.float64, 0.0) * 1e6).astype(np.int64)
        errs = list(map(Message.error, msgs))
        sizes = np.fromiter(map(len, values), dtype=np.int64, count=n)
        if not any(errs):  # None is false, every KafkaError true (no comparison: a KafkaError's with None raises)
            self.acks.append(seq, partitions, offsets, intended_ms, ack_ms, latency_us)
            self.stats.on_acks(partitions, sizes, latency_us, now)
            return
        failed = np.fromiter(map(is_not, errs, repeat(None)), dtype=bool, count=n)
        names = [(e.name() or str(e.code())) if e is not None else "" for e in errs]
        offsets[failed] = -1
        self.acks.append(seq, partitions, offsets, intended_ms, ack_ms, latency_us, names)
        self.stats.on_fails([name for name in names if name], now)
        ok = ~failed
        self.stats.on_acks(partitions[ok], sizes[ok], latency_us[ok], now)

    def outstanding(self) -> int:
        return len(self.producer)

    def close(self) -> None:
        """Stop the poll thread, serve what it left, record whatever reports are still held."""
        self._stop_poll_thread()
        self._poll_once(0)
        self._record()

    def abandon(self) -> None:
        """Purge what is still queued so each such event gets its failure report (no flush(): see above)."""
        self.producer.purge(in_queue=True, in_flight=True, blocking=False)
