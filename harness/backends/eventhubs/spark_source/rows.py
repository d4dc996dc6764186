"""The connector's row schema (EventHubsSourceProvider.eventHubsSchema) and SDK events turned into its columns.

Events are converted on the receiver's thread as they arrive, into column lists (an EventChunk), so a task only
slices chunks and hands Spark Arrow record batches: no per-row Python objects on the task's path.

Value conversion follows the connector's toInternalRow: string properties stay as they are, anything else is
written as JSON; systemProperties leave out x-opt-offset, x-opt-sequence-number and x-opt-enqueued-time (they
have their own columns). The Python SDK hands AMQP strings over as bytes, so a bytes value is read as UTF-8 text
and only bytes that are not UTF-8 become a JSON array of numbers (json4s's form of a byte array).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import pyarrow as pa

COLUMNS = ("body", "partition", "offset", "sequenceNumber", "enqueuedTime", "publisher", "partitionKey",
           "properties", "systemProperties")
_SEQ, _OFFSET, _TIME = b"x-opt-sequence-number", b"x-opt-offset", b"x-opt-enqueued-time"
_PARTITION_KEY, _PUBLISHER = b"x-opt-partition-key", b"x-opt-publisher"
_OWN_COLUMNS = {_SEQ, _OFFSET, _TIME}


def spark_schema():
    from pyspark.sql.types import (BinaryType, LongType, MapType, StringType, StructField, StructType,
                                   TimestampType)

    return StructType([
        StructField("body", BinaryType()),
        StructField("partition", StringType()),
        StructField("offset", StringType()),
        StructField("sequenceNumber", LongType()),
        StructField("enqueuedTime", TimestampType()),
        StructField("publisher", StringType()),
        StructField("partitionKey", StringType()),
        StructField("properties", MapType(StringType(), StringType()), nullable=True),
        StructField("systemProperties", MapType(StringType(), StringType()), nullable=True),
    ])


_TEXT_MAP = pa.map_(pa.string(), pa.string())
#: The Arrow form of the schema, as PySpark's to_arrow_schema(spark_schema(), timezone="UTC") gives it (PySpark
#: checks a data source's record batches against exactly that); written out so a read needs no pyspark import.
ARROW_SCHEMA = pa.schema([
    ("body", pa.binary()), ("partition", pa.string()), ("offset", pa.string()), ("sequenceNumber", pa.int64()),
    ("enqueuedTime", pa.timestamp("us", tz="UTC")), ("publisher", pa.string()), ("partitionKey", pa.string()),
    ("properties", _TEXT_MAP), ("systemProperties", _TEXT_MAP),
])


def _key(k) -> str:
    return k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)


def _json_default(value):
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, (datetime, UUID)):
        return str(value)
    return repr(value)


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return json.dumps(list(value))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return json.dumps(value, default=_json_default)


def _body(event) -> bytes:
    body = event.body
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    try:
        parts = list(body)
    except TypeError:
        return _text(body).encode("utf-8")
    if all(isinstance(b, (bytes, bytearray)) for b in parts):
        return b"".join(parts)  # a data body: one or more data sections
    return _text(parts).encode("utf-8")  # an AMQP sequence body


@dataclass
class EventChunk:
    """Consecutive events of one partition as columns; seqs ascending."""

    seqs: list[int]
    body: list[bytes]
    offset: list[str]
    time_us: list[int]
    publisher: list
    partition_key: list
    properties: list[list[tuple[str, str]]]
    system_properties: list[list[tuple[str, str]]]

    @property
    def first(self) -> int:
        return self.seqs[0]

    @property
    def last(self) -> int:
        return self.seqs[-1]

    def __len__(self) -> int:
        return len(self.seqs)

    def slice(self, lo: int, hi: int) -> "EventChunk":
        return EventChunk(self.seqs[lo:hi], self.body[lo:hi], self.offset[lo:hi], self.time_us[lo:hi],
                          self.publisher[lo:hi], self.partition_key[lo:hi], self.properties[lo:hi],
                          self.system_properties[lo:hi])

    def index_of(self, seq: int) -> int:
        """Position of the first event with sequence number >= seq (chunks are dense unless events expired)."""
        lo, hi = 0, len(self.seqs)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.seqs[mid] < seq:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def to_arrow(self, partition: str) -> pa.RecordBatch:
        schema = ARROW_SCHEMA
        types = [f.type for f in schema]
        columns = (self.body, [partition] * len(self.seqs), self.offset, self.seqs, self.time_us, self.publisher,
                   self.partition_key, self.properties, self.system_properties)
        return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, types)], schema=schema)


def chunk_from_events(events) -> EventChunk:
    """SDK EventData objects (one partition, in order) -> an EventChunk."""
    seqs, bodies, offsets, times, publishers, keys, props, sysprops = [], [], [], [], [], [], [], []
    for event in events:
        system = event.system_properties
        seqs.append(int(system[_SEQ]))
        offset = system.get(_OFFSET)
        offsets.append(_key(offset) if offset is not None else None)
        when = system.get(_TIME)
        times.append(int(when) * 1000 if when is not None else None)  # epoch ms -> us
        publisher = system.get(_PUBLISHER)
        publishers.append(_text(publisher) if publisher is not None else None)
        key = system.get(_PARTITION_KEY)
        keys.append(_text(key) if key is not None else None)
        bodies.append(_body(event))
        app = event.properties
        props.append([(_key(k), _text(v)) for k, v in app.items()] if app else [])
        sysprops.append([(_key(k), _text(v)) for k, v in system.items() if k not in _OWN_COLUMNS])
    return EventChunk(seqs, bodies, offsets, times, publishers, keys, props, sysprops)
