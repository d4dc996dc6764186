"""Produce and InitProducerId: Kafka record batches become Event Hubs events in the partition's log.

Each record of a batch (records.py decodes and checks CRC32C, lengths and compression) is mapped to the AMQP
message a producer of the service would have sent (mapping.py) and appended with ``PartitionLog.append``, so AMQP
receivers read it like any other event, and the Kafka offset of a record is the event's sequence number: the
response's base offset is the first sequence number assigned.

As the service: a batch larger than the event size limit (``Emulator.MaxMessageSizeBytes``, 1 MB) is
MESSAGE_TOO_LARGE; a hub or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION; while the namespace is
throttled (the control API's throttle, either mode) the response is held back by ``THROTTLE_MS`` and carries it as
``throttle_time_ms``, the records still being stored (Microsoft's Kafka troubleshooting guide: "incoming messages
are delayed before being acknowledged ... the delay length is returned in milliseconds as throttle_time_ms").

Idempotent producers (Event Hubs supports them for Kafka clients; the Java producer enables them by default):
InitProducerId hands out a new producer id with epoch 0 every time and keeps nothing (as Kafka's transaction
coordinator does for a producer without a transactional id, also when the client asks to bump its epoch), and each
partition keeps the sequence numbers of each producer's last five batches, as a Kafka partition leader does: a
retried batch already written is answered with its original base offset and not written again, a gap is
OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, and a producer whose state is unknown (after
a hub was recreated, or its state expired) continuing mid-sequence UNKNOWN_PRODUCER_ID, on which clients start
again at sequence 0. A producer's state in a partition expires ``Emulator.ProducerIdExpirationMs`` after its last
write (Kafka's ``producer.id.expiration.ms``, a day by default: ``KafkaEndpoint.expire``). Transactions (a Premium/Dedicated preview on the
service) are not offered: InitProducerId with a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import harness.emulator.kafka.errors as E
import harness.emulator.kafka.mapping as mapping
import harness.emulator.kafka.records as records
from .wire import Api, Reader, Writer

PRODUCE, INIT_PRODUCER_ID = 0, 22
THROTTLE_MS = 1000
# a partition's records decoded on the event loop itself up to this many (a few ms); more, or compressed ones
# (whose size only inflating tells), in a worker thread while the loop serves other clients
INLINE_RECORDS = 2_000
KEPT_BATCHES = 5  # per producer and partition, as Kafka keeps them for duplicate detection
_SEQ_WRAP = 1 << 31


class ProducerState:
    """One idempotent producer in one partition: its epoch, its last KEPT_BATCHES batches as (first sequence,
    last sequence, base offset), and when it last wrote (time.monotonic(), for expiry)."""

    __slots__ = ("epoch", "batches", "last_write")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque = deque(maxlen=KEPT_BATCHES)
        self.last_write = time.monotonic()


class _Result:
    __slots__ = ("index", "error", "base_offset", "log_start", "message", "append_time")

    def __init__(self, index: int, error: int, base_offset: int = -1, log_start: int = -1,
                 message: str | None = None, append_time: int = -1) -> None:
        self.index, self.error, self.base_offset, self.log_start, self.message = (
            index, error, base_offset, log_start, message)
        self.append_time = append_time


async def produce(session, version: int, r: Reader) -> bytes | None:
    flex = version >= 9
    transactional_id = r.nstr(flex)
    acks = r.int16()
    r.int32()  # timeout_ms: appends complete at once

    def partition_data(r: Reader):
        index = r.int32()
        data = r.bytes_v(flex)
        r.tags(flex)
        return index, data

    def topic_data(r: Reader):
        name = r.str(flex)
        parts = r.arr(partition_data, flex) or []
        r.tags(flex)
        return name, parts

    topics = r.arr(topic_data, flex) or []
    r.tags(flex)
    broker = session.broker
    throttle = THROTTLE_MS if broker.throttle_mode else 0
    if throttle:
        await asyncio.sleep(throttle / 1000.0)
    results = []
    budget = records.Budget()  # what this request may make the endpoint decode, over all its partitions
    for name, parts in topics:
        hub = session.hub(name)
        denied = hub is None and session.topic_error(name) == E.TOPIC_AUTHORIZATION_FAILED
        out = []
        for index, data in parts:
            if acks not in (0, 1, -1):
                out.append(_Result(index, E.INVALID_REQUIRED_ACKS))
            elif transactional_id is not None:
                out.append(_Result(index, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            elif denied:  # nothing of it is decoded or stored
                out.append(_Result(index, E.TOPIC_AUTHORIZATION_FAILED))
            else:
                out.append(await _append(session, hub, index, data, budget))
        results.append((name, out))
    if acks == 0:
        return None
    w = Writer()

    def part(w: Writer, res: _Result) -> None:
        w.int32(res.index).int16(res.error).int64(res.base_offset)
        if version >= 2:
            w.int64(res.append_time)  # the enqueued time: hubs are LogAppendTime topics (mapping.py, rule 5)
        if version >= 5:
            w.int64(res.log_start)
        if version >= 8:
            w.arr([], None, flex).nstr(res.message, flex)
        w.tags(flex)

    w.arr(results, lambda w, t: (w.str(t[0], flex).arr(t[1], part, flex).tags(flex)), flex)
    w.int32(throttle)
    return w.tags(flex).getvalue()


def _decode(data: bytes, budget: records.Budget) -> tuple[list, list[list[bytes]]]:
    """The batches in ``data`` and each record as the AMQP message it becomes (mapping.py)."""
    batches = records.decode_batches(data, budget=budget)
    return batches, [[mapping.amqp_message(rec.key, rec.value, rec.headers,
                                           batch.first_timestamp + rec.timestamp_delta)
                      for rec in batch.records] for batch in batches]


async def _append(session, hub, index: int, data: bytes | None, budget: records.Budget) -> _Result:
    partition = hub.partitions.get(str(index)) if hub is not None and index >= 0 else None
    if partition is None:
        return _Result(index, E.UNKNOWN_TOPIC_OR_PARTITION)
    limit = session.broker.cfg.max_message_size
    if data is None:
        return _Result(index, E.CORRUPT_MESSAGE, message="null records")
    if len(data) > limit:
        return _Result(index, E.MESSAGE_TOO_LARGE, log_start=partition.begin_seq,
                       message=f"The record batch is {len(data)} bytes, more than the maximum of {limit} bytes")
    try:
        count, compressed = records.declared_records(data)
        if compressed or count > INLINE_RECORDS:  # long work off the event loop, which serves every client
            batches, events = await asyncio.to_thread(_decode, data, budget)
        else:
            batches, events = _decode(data, budget)
    except records.RecordError as exc:
        return _Result(index, exc.error_code, log_start=partition.begin_seq, message=str(exc))
    # every record as the event it becomes, checked against the event size limit before anything is stored: the
    # limit is the service's on the event, so a compressed batch cannot carry a larger one past it
    largest = max((len(m) for msgs in events for m in msgs), default=0)
    if largest > limit:
        return _Result(index, E.MESSAGE_TOO_LARGE, log_start=partition.begin_seq,
                       message=f"A record is {largest} bytes as an event (decompressed), more than the maximum of "
                               f"{limit} bytes")
    base = None  # offset of the request's first record: a new one, or the original of a retried batch
    for batch, messages in zip(batches, events):
        if batch.is_transactional or batch.is_control:
            return _Result(index, E.INVALID_RECORD, message="transactional and control batches are not supported")
        if batch.producer_id >= 0:
            error, duplicate_of = _check_sequence(session.endpoint, partition, batch)
            if error != E.NONE:
                return _Result(index, error, log_start=partition.begin_seq)
            if duplicate_of is not None:  # a retry of a batch already written: its original offset, nothing new
                base = duplicate_of if base is None else base
                continue
        if not messages:
            continue
        start = partition.next_seq
        base = start if base is None else base
        partition.append(messages)
        session.broker.stats_in += len(messages)
        if batch.producer_id >= 0:
            _remember(session.endpoint, partition, batch, start)
    if base is None:
        base = partition.next_seq
    return _Result(index, E.NONE, base_offset=base, log_start=partition.begin_seq,
                   append_time=partition.last_time)


def _last_seq(batch) -> int:
    return (batch.base_sequence + batch.last_offset_delta) % _SEQ_WRAP


def _check_sequence(endpoint, partition, batch) -> tuple[int, int | None]:
    """(error, base offset of the identical batch already written or None) for an idempotent batch."""
    state = endpoint.sequences.get(partition, {}).get(batch.producer_id)
    if state is not None and batch.producer_epoch < state.epoch:
        return E.INVALID_PRODUCER_EPOCH, None
    if state is None or batch.producer_epoch != state.epoch or not state.batches:
        return (E.NONE if batch.base_sequence == 0 else E.UNKNOWN_PRODUCER_ID), None
    last_seq = _last_seq(batch)
    for first, last, offset in state.batches:
        if first == batch.base_sequence and last == last_seq:
            return E.NONE, offset
    if batch.base_sequence != (state.batches[-1][1] + 1) % _SEQ_WRAP:
        return E.OUT_OF_ORDER_SEQUENCE_NUMBER, None
    return E.NONE, None


def _remember(endpoint, partition, batch, base_offset: int) -> None:
    producers = endpoint.sequences.setdefault(partition, {})
    state = producers.get(batch.producer_id)
    if state is None or state.epoch != batch.producer_epoch:  # a new producer, or a new epoch: a new sequence
        state = producers[batch.producer_id] = ProducerState(batch.producer_epoch)
    state.batches.append((batch.base_sequence, _last_seq(batch), base_offset))
    state.last_write = time.monotonic()


async def init_producer_id(session, version: int, r: Reader) -> bytes:
    flex = version >= 2
    transactional_id = r.nstr(flex)
    r.int32()  # transaction_timeout_ms
    pid, epoch = (r.int64(), r.int16()) if version >= 3 else (-1, -1)
    r.tags(flex)
    error = E.NONE
    if transactional_id is not None:
        error, pid, epoch = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
    else:  # a new id every time, also for a bump (pid, epoch given): nothing is kept until the producer writes
        pid, epoch = next(session.endpoint.next_producer_id), 0
    return Writer().int32(0).int16(error).int64(pid).int16(epoch).tags(flex).getvalue()


APIS = (
    Api(PRODUCE, "Produce", 3, 9, 9, produce),
    Api(INIT_PRODUCER_ID, "InitProducerId", 0, 4, 2, init_producer_id),
)
