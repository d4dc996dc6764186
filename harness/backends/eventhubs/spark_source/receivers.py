"""Executor side: receivers cached in the Python worker across batches, and the read of one task's range.

As the connector's CachedEventHubsReceiver, one receiver per (namespace, hub, consumer group, partition) lives in
the process (PySpark reuses its workers with spark.python.worker.reuse=true); in a Spark task, the worker that
opened it owns the partition and reads it for its sibling workers' tasks too (handoff.py), so the executor holds
one receiver per partition whichever worker PySpark hands a task. It is reused when the next range starts where
it stands; it is recreated when it stands elsewhere (mismatch), when its link was stolen by a
higher-epoch receiver (exclusive receivers, epoch 0 as the connector: a new one takes the partition from an old
one elsewhere), or when it failed.

A receiver is a thread running the SDK's public EventHubConsumerClient.receive_batch for one partition from a
sequence number (inclusive), with prefetch = eventhubs.prefetchCount, converting events to column chunks into a
bounded buffer: when the buffer is full the SDK's callback waits, the SDK stops reading the socket, and TCP holds
the rest (backpressure). A task takes chunks until it has [start, end) and leaves the rest for the next batch.

Missing events are found where they are known exactly: a receiver asked for sequence number n that delivers
m > n first skipped [n, m). A fresh receiver confirms it against the partition's earliest retained sequence
number (they aged out); a reused one is first replaced by a fresh one (the gap might be its own). A range that
can never complete (the hub was deleted, or recreated below our end) is detected when the read stalls.
"""
from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

from .handoff import claim as claim_partition, connect as connect_owner, enabled as handoff_enabled
from .handoff import OwnerGone, fetch as fetch_from_owner, owns as owns_partition, reading as reading_partition
from .handoff import release_all as release_partitions
from .clients import ClientConnectionPool, is_not_found, partition_properties, quiet_sdk_loggers
from .metrics import append_record, process_info, task_info
from .offsets import EventHubsDataLossError, PartitionBounds, Range, data_loss_message
from .options import EventHubsOptions
from .rows import EventChunk, chunk_from_events

LOG = logging.getLogger("harness.backends.eventhubs.spark_source")
quiet_sdk_loggers()  # this module runs in the executors' Python workers

POLL_S = 0.2  # how often a waiting task looks at its receiver's state
STALL_CHECK_S = 2.0  # no event for this long: ask the partition whether the range can still complete
IDLE_CLOSE_S = 600.0  # a cached receiver no task used for this long is closed
MIN_BUFFER_EVENTS = 1000


class EventBuffer:
    """Chunks between the SDK thread and the task, bounded in events (chunks vary from one event to prefetch)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._chunks: collections.deque[EventChunk] = collections.deque()
        self._events = 0
        self._cond = threading.Condition()

    def put(self, chunk: EventChunk, stop: threading.Event) -> bool:
        with self._cond:
            while self._events and self._events + len(chunk) > self.capacity:
                if stop.is_set():
                    return False
                self._cond.wait(POLL_S)
            self._chunks.append(chunk)
            self._events += len(chunk)
            self._cond.notify_all()
            return True

    def get(self, timeout: float) -> EventChunk | None:
        with self._cond:
            if not self._chunks:
                self._cond.wait(timeout)
            if not self._chunks:
                return None
            chunk = self._chunks.popleft()
            self._events -= len(chunk)
            self._cond.notify_all()
            return chunk

    def push_front(self, chunk: EventChunk) -> None:
        """Give back the unread rest of a chunk; it may exceed capacity for a moment."""
        with self._cond:
            self._chunks.appendleft(chunk)
            self._events += len(chunk)

    def clear(self) -> None:
        with self._cond:
            self._chunks.clear()
            self._events = 0
            self._cond.notify_all()

    def __len__(self) -> int:
        return self._events


def receiver_key(options: EventHubsOptions, partition: str) -> tuple[str, str, str, str]:
    return (options.connection.namespace.lower(), options.hub.lower(), options.consumer_group.lower(),
            str(partition))


class CachedEventHubsReceiver:
    def __init__(self, options: EventHubsOptions, partition: str, start: int) -> None:
        self.options = options
        self.partition = str(partition)
        self.start = start  # where it was created; a receiver nobody read from yet stands here
        self.position = start  # the sequence number the next reader takes
        self.consumed = False
        self.stolen = False
        self.failure: BaseException | None = None
        self.last_used = time.monotonic()
        self.buffer = EventBuffer(max(2 * options.prefetch_count, MIN_BUFFER_EVENTS))
        self._closing = threading.Event()
        self._closed = False
        self._close_lock = threading.Lock()
        self._finished = threading.Event()
        self._pool = ClientConnectionPool.of(options)
        self._client = self._pool.borrow()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"eventhubs-receiver-{options.hub}-{partition}@{start}")
        self._thread.start()

    # ------------------------------------------------------------------ SDK thread
    def _run(self) -> None:
        if self._closing.is_set():
            self._finished.set()
            return
        try:
            self._client.receive_batch(
                self._on_batch, partition_id=self.partition, starting_position=self.start,
                starting_position_inclusive=True,
                owner_level=0 if self.options.use_exclusive_receiver else None,  # the connector's DefaultEpoch
                prefetch=self.options.prefetch_count, max_batch_size=self.options.prefetch_count,
                on_error=self._on_error, on_partition_close=self._on_close, on_partition_initialize=self._on_open)
        except BaseException as exc:  # noqa: BLE001 - recorded; the reading task decides
            if self.failure is None:
                self.failure = exc
        finally:
            if self.failure is None and not self._closing.is_set():
                self.failure = RuntimeError("the SDK's receive_batch returned without an error (its client was "
                                            "closed from elsewhere)")
            self._finished.set()

    def _on_open(self, _ctx) -> None:
        if self._closing.is_set():  # closed while the SDK was still starting: stop it now
            self._stop_client()

    def _on_batch(self, _ctx, events) -> None:
        if self._closing.is_set():
            self._stop_client()
        elif events and not self.dead:
            self.buffer.put(chunk_from_events(events), self._closing)

    def _on_error(self, _ctx, exc: BaseException) -> None:
        # After an error the SDK's processor would reopen the partition from the *initial* position a moment
        # later (duplicates), so any error ends this receiver; the reading task replaces it.
        if "link:stolen" in str(exc):
            self.stolen = True
        if self.failure is None:
            self.failure = exc
        self._stop_client()

    def _on_close(self, _ctx, reason) -> None:
        if not self._closing.is_set() and self.failure is None:
            self.failure = RuntimeError(f"receiver closed by the SDK ({reason})")
            self._stop_client()

    def _stop_client(self) -> None:
        try:
            self._client.close()  # stops the SDK's processor; safe from its own callbacks
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------ task side
    @property
    def dead(self) -> bool:
        return self.stolen or self.failure is not None or self._finished.is_set() or self._closing.is_set()

    @property
    def fresh(self) -> bool:
        """Created at its position and not read from: a gap it shows is the service's, not ours."""
        return not self.consumed and self.position == self.start

    def close(self) -> None:
        """Idempotent: the client goes back to the pool once; closing it again later would stop whichever
        receiver borrowed it next."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._closing.set()
        self._stop_client()
        self.buffer.clear()
        self._pool_return()

    def _pool_return(self) -> None:
        """Give the client back once the SDK thread is gone (a few hundred ms after close), without waiting."""
        def give_back():
            self._thread.join(30)
            if not self._thread.is_alive():
                self._pool.give_back(self._client)

        if not self._thread.is_alive():
            self._pool.give_back(self._client)
        else:
            threading.Thread(target=give_back, daemon=True, name="eventhubs-receiver-reaper").start()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


# ---------------------------------------------------------------------------------------------- the cache
_cache: dict[tuple, CachedEventHubsReceiver] = {}
_cache_lock = threading.Lock()


def cached_receivers() -> int:
    with _cache_lock:
        return len(_cache)


def cached_state() -> list[dict]:
    """What this process holds: one dict per cached receiver (diagnostics and tests)."""
    with _cache_lock:
        receivers = list(_cache.items())
    return [{"namespace": k[0], "hub": k[1], "consumer_group": k[2], "partition": k[3], "position": r.position,
             "buffered": len(r.buffer), "stolen": r.stolen, "dead": r.dead} for k, r in receivers]


def close_all(timeout: float = 5.0) -> None:
    """Close every cached receiver and pooled client (worker exit, tests)."""
    with _cache_lock:
        receivers = list(_cache.values())
        _cache.clear()
    for r in receivers:
        r.close()
    deadline = time.monotonic() + timeout
    for r in receivers:
        r.join(max(deadline - time.monotonic(), 0.0))
    release_partitions()
    ClientConnectionPool.close_all()


atexit.register(close_all)  # a worker that exits normally closes its links; one killed closes its sockets


@dataclass
class TaskStats:
    created: int = 0
    reused: int = 0
    mismatch: int = 0
    stolen: int = 0
    failed: int = 0
    timeouts: int = 0
    expired_skipped: int = 0
    expired_ranges: list = field(default_factory=list)
    lost_ranges: list = field(default_factory=list)
    rows: int = 0
    served_by: int | None = None  # the pid of the sibling worker that read the range for this task (handoff.py)


def _same_settings(a: EventHubsOptions, b: EventHubsOptions) -> bool:
    return (a.connection_string == b.connection_string and a.prefetch_count == b.prefetch_count
            and a.use_exclusive_receiver == b.use_exclusive_receiver)


def _acquire(options: EventHubsOptions, partition: str, start: int, stats: TaskStats,
             also_at: int | None = None) -> CachedEventHubsReceiver:
    """The cached receiver when it stands at `start` (or at `also_at`, below it: the reader drops what lies
    between), else a new one (counted by reason)."""
    key = receiver_key(options, partition)
    now = time.monotonic()
    if not options.receiver_cache:  # harness.receiverCache=false: every task opens its own
        return _create(options, partition, start, stats)
    with _cache_lock:
        stale = [k for k, r in _cache.items() if k != key and (r.dead or now - r.last_used > IDLE_CLOSE_S)]
        retired = [_cache.pop(k) for k in stale]
        current = _cache.pop(key, None)
    for r in retired:
        r.close()
    if current is not None:
        if current.stolen:
            stats.stolen += 1
        elif current.dead:
            stats.failed += 1
        elif current.position not in (start, also_at) or not _same_settings(current.options, options):
            stats.mismatch += 1
        else:
            stats.reused += 1
            current.options = options
            current.last_used = now
            with _cache_lock:
                _cache[key] = current
            return current
        current.close()
    return _create(options, partition, start, stats)


def _create(options: EventHubsOptions, partition: str, start: int, stats: TaskStats) -> CachedEventHubsReceiver:
    receiver = CachedEventHubsReceiver(options, partition, start)
    stats.created += 1
    with _cache_lock:
        old = _cache.pop(receiver_key(options, partition), None)
        _cache[receiver_key(options, partition)] = receiver
    if old is not None and old is not receiver:
        old.close()
    return receiver


def _forget(receiver: CachedEventHubsReceiver) -> None:
    """Drop a receiver from the cache (if it is still the cached one) and close it."""
    key = receiver_key(receiver.options, receiver.partition)
    with _cache_lock:
        if _cache.get(key) is receiver:
            del _cache[key]
    receiver.close()


def _replace(receiver: CachedEventHubsReceiver, position: int, stats: TaskStats) -> CachedEventHubsReceiver:
    _forget(receiver)
    return _create(receiver.options, receiver.partition, position, stats)


def _consecutive_end(chunk: EventChunk, i: int, limit: int) -> int:
    """The end of the run of consecutive sequence numbers starting at index i, below index limit."""
    base = chunk.seqs[i] - i  # seqs[k] - k stays equal along a consecutive run and grows after a gap
    lo, hi = i + 1, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if chunk.seqs[mid] - mid == base:
            lo = mid + 1
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------------------------- one task's read
def read_range(options: EventHubsOptions, rng: Range) -> Iterator:
    """Arrow record batches of the events [rng.start, rng.end) of one partition, each event once, in order.

    Appends the task's metrics record (harness.metricsPath) whether the read succeeds or fails."""
    stats = TaskStats()
    started = time.time()
    error: BaseException | None = None
    try:
        yield from _read_owned(options, rng, stats)
    except GeneratorExit:
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        if options.metrics_path:
            if error is not None:  # its output is discarded; the retry skips (and reports) the same ranges again
                stats.lost_ranges, stats.expired_ranges, stats.expired_skipped = [], [], 0
            record = {
                "hub": options.hub, "partition": rng.partition, "start": rng.start, "end": rng.end,
                "reset_from": rng.reset_from, "rows": stats.rows, "created": stats.created, "reused": stats.reused,
                "mismatch": stats.mismatch, "stolen": stats.stolen, "failed": stats.failed,
                "timeouts": stats.timeouts, "expired_skipped": stats.expired_skipped,
                "expired_ranges": stats.expired_ranges, "lost_ranges": stats.lost_ranges,
                "receivers": cached_receivers(), "served_by": stats.served_by, "started_ms": int(started * 1000),
                "ended_ms": int(time.time() * 1000), "error": None if error is None else f"{type(error).__name__}: "
                f"{error}"[:2000],
            }
            record.update(process_info())
            record.update(task_info())
            try:
                append_record(options.metrics_path, record)
            except OSError as exc:
                LOG.warning("could not write the task metrics record to %s: %r", options.metrics_path, exc)


def _read_owned(options: EventHubsOptions, rng: Range, stats: TaskStats) -> Iterator:
    """In a Spark task, the partition's owner among this executor's Python workers reads the range (handoff.py);
    with no owner, or an owner that went away before it sent anything, this worker reads it and becomes the
    owner. An owner gone mid-range fails the task (part of the range was delivered; Spark retries the task)."""
    if options.receiver_cache and handoff_enabled():
        key = receiver_key(options, rng.partition)
        if not owns_partition(key):
            owner = connect_owner(key)
            if owner is not None:
                try:
                    yield from fetch_from_owner(owner, options, rng, stats)
                    return
                except OwnerGone as gone:
                    if gone.delivered:
                        raise
                    LOG.warning("%s; reading it here", gone)
            claim_partition(key, _read)
        with reading_partition(key):
            yield from _read(options, rng, stats)
        return
    yield from _read(options, rng, stats)


def _read(options: EventHubsOptions, rng: Range, stats: TaskStats) -> Iterator:
    p, end, hub = rng.partition, rng.end, options.hub
    pos = rng.start

    def lose(frm: int, to: int, why: str, expired: bool) -> None:
        detail = f"Partition {p} of event hub {hub!r}: events with sequence numbers {frm}..{to - 1} {why}"
        if options.fail_on_data_loss:
            raise EventHubsDataLossError(data_loss_message(f"{detail} (failOnDataLoss)"))
        LOG.warning("%s; skipped (failOnDataLoss=false)", detail)
        stats.lost_ranges.append([p, frm, to])
        if expired:
            stats.expired_skipped += to - frm
            stats.expired_ranges.append([frm, to])

    if rng.reset_from is not None and rng.old_end is not None and rng.old_end > rng.reset_from:
        # the recreated hub's batch also answers for the old hub's events the query never reached; reported
        # when the task ends well, so a retried task reports them once
        old_from, old_end = rng.reset_from, rng.old_end
    else:
        old_from = old_end = None
    if rng.retained_from is not None and rng.retained_from > pos:
        # aged out before planning: left out of the batch's budget, so never delivered, even from a buffer
        skip_to = min(rng.retained_from, end)
        lose(pos, skip_to, f"expired before the batch was planned (earliest retained then {rng.retained_from})",
             expired=True)
        pos = skip_to
    if pos >= end:
        if old_from is not None:
            lose(old_from, old_end, _OLD_HUB, expired=False)
        return
    receiver = _acquire(options, p, pos, stats, also_at=rng.start)
    try:
        last_progress = last_check = time.monotonic()
        waits_replaced = 0
        last_error: BaseException | None = None
        while pos < end:
            chunk = receiver.buffer.get(POLL_S)
            now = time.monotonic()
            if chunk is None:
                stalled = now - last_progress
                if stalled >= options.operation_timeout_s:
                    cause = receiver.failure or last_error
                    raise TimeoutError(
                        f"partition {p} of event hub {hub!r}: no event for {stalled:.0f} s while reading sequence "
                        f"numbers {rng.start}..{end - 1} (at {pos}; eventhubs.operationTimeout is "
                        f"{options.operation_timeout_s:g} s). " + (
                            f"The receiver kept failing, last with: {cause!r}" if cause is not None else
                            f"The SDK retries some refusals silently: check that consumer group "
                            f"{options.consumer_group!r} exists and that no receiver with a higher epoch holds the "
                            f"partition")) from cause
                if stalled >= STALL_CHECK_S and now - last_check >= STALL_CHECK_S:
                    last_check = now
                    unreachable = _unreachable_from(options, p, pos, end)
                    if unreachable is not None:
                        lose(pos, end, unreachable, expired=False)
                        pos = end
                        break
                if receiver.dead and not len(receiver.buffer):
                    last_error = receiver.failure
                    if receiver.stolen:
                        stats.stolen += 1
                        LOG.warning("receiver of partition %s of event hub %r was taken by another epoch receiver; "
                                    "reopening at %d: %s", p, hub, pos, _first_line(last_error))
                    else:
                        stats.failed += 1
                        LOG.warning("receiver of partition %s of event hub %r failed; reopening at %d: %r", p, hub,
                                    pos, last_error)
                    time.sleep(min(0.25 * (stats.stolen + stats.failed), 2.0))  # a competing owner: back off
                    receiver = _replace(receiver, pos, stats)
                elif stalled >= options.receiver_timeout_s * (waits_replaced + 1):
                    waits_replaced += 1
                    stats.timeouts += 1
                    receiver = _replace(receiver, pos, stats)
                continue
            i = chunk.index_of(pos)
            if i == len(chunk):
                continue  # all before our position (a range re-read after a give-back): drop
            stop = chunk.index_of(end)  # events past the range came after the plan: not bounded by it
            other = _other_hub(chunk, i, stop, rng)
            if other == "older":  # a receiver left over from the hub before a recreation
                stats.failed += 1
                receiver = _replace(receiver, pos, stats)
                continue
            if other == "newer":  # the hub was recreated after planning: what is left of the range is gone
                lose(pos, end, f"cannot be read: the event hub was recreated after this batch was planned (event "
                     f"{chunk.seqs[stop - 1]} was enqueued at {chunk.time_us[stop - 1] // 1000} ms, after the "
                     f"partition's last enqueued time when planned, {rng.not_after_ms} ms)", expired=False)
                pos = end
                _forget(receiver)
                break
            last_progress = last_check = now
            waits_replaced = 0
            first = chunk.seqs[i]
            if first > pos:  # events [pos, first) did not come
                if not receiver.fresh:
                    receiver = _replace(receiver, pos, stats)  # the gap may be this receiver's: ask a fresh one
                    continue
                bounds = PartitionBounds.from_properties(partition_properties(options, [p])[p])
                if pos >= bounds.first or bounds.first < first:
                    raise RuntimeError(
                        f"partition {p} of event hub {hub!r}: asked for sequence number {pos}, received {first}, "
                        f"yet the earliest retained sequence number is {bounds.first} and the last "
                        f"{bounds.end - 1}")
                to = min(first, end)
                lose(pos, to, f"expired before they were read (earliest retained now {bounds.first})",
                     expired=True)
                pos = to
                receiver.consumed = True
                if pos >= end:
                    receiver.buffer.push_front(chunk.slice(i, len(chunk)))
                    break
            j = _consecutive_end(chunk, i, chunk.index_of(end))
            if j < len(chunk):
                receiver.buffer.push_front(chunk.slice(j, len(chunk)))
            piece = chunk.slice(i, j)
            pos = piece.last + 1
            receiver.position = pos
            receiver.consumed = True
            stats.rows += len(piece)
            yield piece.to_arrow(p)
        receiver.position = pos
        receiver.consumed = True
        receiver.last_used = time.monotonic()
        if not options.receiver_cache:
            _forget(receiver)
        if old_from is not None:
            lose(old_from, old_end, _OLD_HUB, expired=False)
    except GeneratorExit:
        receiver.position = pos  # Spark stopped reading: the receiver stands where the reader stopped
        if not options.receiver_cache:
            _forget(receiver)
        raise
    except BaseException:
        _forget(receiver)
        raise


_OLD_HUB = "were never read: the event hub was recreated (the range runs to the old hub's end as last seen)"


def _other_hub(chunk: EventChunk, i: int, stop: int, rng: Range) -> str | None:
    """'older' or 'newer' when the chunk's events [i, stop) (those within the range) were enqueued outside the
    planned hub's time span (Range.not_before_ms..not_after_ms), so they belong to the hub before or after a
    recreation; None when they fit or the span is unknown. Enqueued times never go back within a partition: the
    first and the last event decide."""
    if stop <= i:
        return None
    first, last = chunk.time_us[i], chunk.time_us[stop - 1]
    if rng.not_before_ms is not None and first is not None and first < rng.not_before_ms * 1000:
        return "older"
    if rng.not_after_ms is not None and last is not None and last > rng.not_after_ms * 1000:
        return "newer"
    return None


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return "no error recorded"
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _unreachable_from(options: EventHubsOptions, partition: str, pos: int, end: int) -> str | None:
    """Why events [pos, end) can never be read, or None when they may still come."""
    try:
        props = partition_properties(options, [partition])[partition]
    except Exception as exc:  # noqa: BLE001
        if is_not_found(exc):
            return f"cannot be read: the event hub no longer exists ({exc})"
        LOG.warning("partition %s: could not check the partition while waiting: %r", partition, exc)
        return None
    bounds = PartitionBounds.from_properties(props)
    if bounds.end < end:
        return (f"cannot be read: the partition now ends at {bounds.end} (below the batch's end {end}; the hub "
                "was recreated)")
    return None
