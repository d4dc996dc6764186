"""Kafka record batches, format v2 (magic 2), decoded from Produce requests and encoded for Fetch responses.

The layout is the protocol guide's "Record Batch" section (kafka.apache.org/documentation/#recordbatch)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
    producerEpoch int16 | baseSequence int32 | recordCount int32 | records...

``batchLength`` counts the bytes after itself; the CRC is CRC32C (Castagnoli) over ``attributes`` to the end of
the batch; when ``attributes`` names a codec, only the records after ``recordCount`` are compressed. A record is
``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint | key | value | headers`` with
varint-prefixed key/value (-1 = null) and a varint header count of (key string, value bytes-or-null) pairs.

Why these rules:
- **Codecs: none and gzip only.** Microsoft's "What is Azure Event Hubs for Apache Kafka" page, section
  Compression: "Azure Event Hubs currently supports gzip compression. Compression.type = none | gzip", and AMQP
  consumers receive such events decompressed. A batch naming snappy, lz4 or zstd is refused with
  UNSUPPORTED_COMPRESSION_TYPE, the code a Kafka broker uses for a codec it will not take (the service's exact
  answer is not documented). gzip is zlib, in C.
- **Magic 0/1 message sets are refused** with INVALID_RECORD: Kafka's own ProduceRequest.validateRecords refuses
  anything but magic 2 from Produce v3 on, and today's clients (librdkafka, Java 3.x/4.x) send v2 only.
- **Bounded decompression**: a gzip batch is inflated at most to ``max_uncompressed`` bytes (the emulator's
  request bound by default), so a small "zip bomb" is refused with MESSAGE_TOO_LARGE instead of taking memory.
- **CRC32C** comes from the ``crc32c`` package (hardware CRC instruction where the CPU has one, C otherwise);
  a wrong CRC or a length that disagrees with the bytes is CORRUPT_MESSAGE, as the broker answers.
- Control batches (transaction markers) decode like any other, flagged ``is_control``; the produce path refuses
  or skips them, and ``encode_batch`` never writes one.

Speed: decoding unpacks the 61-byte batch header with one struct call and walks records with an inline varint
reader (no Reader object per record); encoding builds each record as a few byte strings joined once.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import crc32c as _crc32c

import harness.emulator.kafka.errors as E
from harness.emulator.config import DEFAULT_MAX_FRAME_SIZE
from .wire import uvarint_bytes

MAGIC = 2
NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
SUPPORTED_CODECS = (NONE, GZIP)
CREATE_TIME, LOG_APPEND_TIME = 0, 1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

# baseOffset, batchLength, then (after the CRC) the fields it covers up to recordCount.
_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc: 17 bytes
_HEAD = struct.Struct(">hiqqqhii")  # attributes .. recordCount: 40 bytes, the start of what the CRC covers
_HEADER_SIZE = _PREFIX.size + _HEAD.size  # 61
_LENGTH_END = 12  # baseOffset + batchLength: batchLength counts from here
_CRC_START = _PREFIX.size  # 17: attributes onwards
_MAGIC_AT = 16


def crc32c(data) -> int:
    """CRC32C (Castagnoli, RFC 3720) of ``data``: the checksum of a v2 record batch."""
    return _crc32c.crc32c(data)


class RecordError(Exception):
    """A batch the endpoint refuses; ``error_code`` is the Kafka error for the partition's Produce response."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class Record(NamedTuple):
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass
class RecordBatch:
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record] = field(default_factory=list)

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)


# ------------------------------------------------------------------------------------------------ decode


def _corrupt(message: str) -> RecordError:
    return RecordError(E.CORRUPT_MESSAGE, message)


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos`` -> (value, next position); one byte is the common case and costs one branch."""
    if pos >= end:
        raise _corrupt("record truncated inside a varint")
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise _corrupt("record truncated inside a varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise _corrupt("varint longer than 10 bytes")


def _records(buf, pos: int, end: int, count: int) -> list[Record]:
    """``count`` records from ``buf[pos:end]``; every length must fit and the records must fill it exactly."""
    out = []
    append = out.append
    varint = _varint
    for _ in range(count):
        length, pos = varint(buf, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise _corrupt(f"record length {length} runs past the batch")
        pos += 1  # record attributes: unused in v2
        ts_delta, pos = varint(buf, pos, rec_end)
        off_delta, pos = varint(buf, pos, rec_end)
        klen, pos = varint(buf, pos, rec_end)
        if klen < 0:
            key = None
        else:
            if pos + klen > rec_end:
                raise _corrupt("record key runs past the record")
            key = bytes(buf[pos:pos + klen])
            pos += klen
        vlen, pos = varint(buf, pos, rec_end)
        if vlen < 0:
            value = None
        else:
            if pos + vlen > rec_end:
                raise _corrupt("record value runs past the record")
            value = bytes(buf[pos:pos + vlen])
            pos += vlen
        nheaders, pos = varint(buf, pos, rec_end)
        if nheaders < 0:
            raise _corrupt(f"negative header count {nheaders}")
        headers: tuple = ()
        if nheaders:
            hs = []
            for _h in range(nheaders):
                hklen, pos = varint(buf, pos, rec_end)
                if hklen < 0 or pos + hklen > rec_end:
                    raise _corrupt("header key runs past the record")
                hkey = bytes(buf[pos:pos + hklen]).decode("utf-8", "replace")
                pos += hklen
                hvlen, pos = varint(buf, pos, rec_end)
                if hvlen < 0:
                    hval = None
                else:
                    if pos + hvlen > rec_end:
                        raise _corrupt("header value runs past the record")
                    hval = bytes(buf[pos:pos + hvlen])
                    pos += hvlen
                hs.append((hkey, hval))
            headers = tuple(hs)
        if pos != rec_end:
            raise _corrupt(f"record declares {length} bytes but its fields take {length - (rec_end - pos)}")
        append(Record(off_delta, ts_delta, key, value, headers))
    if pos != end:
        raise _corrupt(f"{end - pos} bytes left after the batch's {count} records")
    return out


def _gunzip(data, limit: int) -> bytes:
    """Inflate gzip member(s), refusing more than ``limit`` bytes of output before producing them."""
    out = []
    total = 0
    rest = bytes(data)
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        try:
            chunk = inflater.decompress(rest, limit - total + 1)
        except zlib.error as exc:
            raise _corrupt(f"gzip records do not inflate: {exc}") from None
        total += len(chunk)
        if total > limit or inflater.unconsumed_tail:
            raise RecordError(E.MESSAGE_TOO_LARGE,
                              f"gzip records inflate to more than {limit} bytes, the most this endpoint accepts")
        if not inflater.eof:
            raise _corrupt("gzip records are truncated")
        out.append(chunk)
        rest = inflater.unused_data
    return b"".join(out)


class Budget:
    """What one request may make the endpoint decode, over all its batches and partitions: decompressed bytes and
    records. A batch's inflate limit alone let one Produce carry several batches of hundreds of thousands of empty
    records each (a few KB of gzip), frozen the event loop for seconds and doubled the emulator's memory. A real
    producer's request (the service takes 1 MB; librdkafka's batches are at most 1,000,000 bytes) is far inside."""

    RECORDS, BYTES = 100_000, 16 * 1024 * 1024

    def __init__(self, records: int = RECORDS, nbytes: int = BYTES) -> None:
        self.records, self.bytes = records, nbytes

    def take_records(self, count: int) -> None:
        if count > self.records:
            raise RecordError(E.POLICY_VIOLATION, f"the request holds more than {Budget.RECORDS:,} records in all, "
                                                  f"the most this endpoint decodes for one request")
        self.records -= count

    def take_bytes(self, n: int) -> None:
        if n > self.bytes:
            raise RecordError(E.MESSAGE_TOO_LARGE, f"the request's records decompress to more than "
                                                   f"{Budget.BYTES:,} bytes in all, the most this endpoint accepts")
        self.bytes -= n


def declared_records(data) -> tuple[int, bool]:
    """(records the batches in ``data`` declare, whether any is compressed), read from their headers only: how
    much decoding them will take, known before any of it is done. A header that does not fit stops the count
    (decode_batches says what is wrong with it)."""
    buf, pos, total, compressed = memoryview(data), 0, 0, False
    while len(buf) - pos >= _HEADER_SIZE:
        _base, length = struct.unpack_from(">qi", buf, pos)
        attrs, *_rest, count = _HEAD.unpack_from(buf, pos + _CRC_START)
        total += max(0, count)
        compressed = compressed or bool(attrs & _COMPRESSION_MASK)
        if length <= 0:
            break
        pos += _LENGTH_END + length
    return total, compressed


def decode_batches(data, max_uncompressed: int = DEFAULT_MAX_FRAME_SIZE,
                   budget: Budget | None = None) -> list[RecordBatch]:
    """Every batch in a Produce request's ``records`` bytes, CRC-checked and decompressed, within ``budget`` (the
    request's, shared by all its partitions; a fresh one when None): records counted before they are decoded,
    inflated bytes before they are produced.

    Raises RecordError (CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE, MESSAGE_TOO_LARGE,
    POLICY_VIOLATION) for the first bad batch: a Produce partition is accepted or refused whole, as a broker does.
    """
    budget = budget if budget is not None else Budget()
    buf = memoryview(data)
    n = len(buf)
    pos = 0
    batches = []
    while pos < n:
        if n - pos < _LENGTH_END + 5:
            raise _corrupt(f"{n - pos} trailing bytes are too few for a record batch")
        magic = buf[pos + _MAGIC_AT]
        if magic != MAGIC:
            raise RecordError(E.INVALID_RECORD,
                              f"record batch magic {magic} is not supported: only magic 2 (Kafka 0.11+) batches")
        if n - pos < _HEADER_SIZE:
            raise _corrupt(f"{n - pos} trailing bytes are too few for a record batch")
        base, length, leader_epoch, _magic, crc = _PREFIX.unpack_from(buf, pos)
        end = pos + _LENGTH_END + length
        if length < _HEADER_SIZE - _LENGTH_END or end > n:
            raise _corrupt(f"batch length {length} does not fit the {n - pos} bytes sent")
        actual = _crc32c.crc32c(buf[pos + _CRC_START:end])
        if actual != crc:
            raise _corrupt(f"record batch CRC32C is 0x{actual:08x}, the batch says 0x{crc:08x}")
        (attrs, last_delta, first_ts, max_ts, pid, pepoch, base_seq, count) = _HEAD.unpack_from(buf, pos + _CRC_START)
        codec = attrs & _COMPRESSION_MASK
        if count < 0:
            raise _corrupt(f"negative record count {count}")
        body_start = pos + _HEADER_SIZE
        budget.take_records(count)
        if codec == NONE:
            budget.take_bytes(end - body_start)
            recs = _records(buf, body_start, end, count)
        elif codec == GZIP:
            inflated = _gunzip(buf[body_start:end], min(max_uncompressed, budget.bytes))
            budget.take_bytes(len(inflated))
            recs = _records(inflated, 0, len(inflated), count)
        else:
            name = CODEC_NAMES.get(codec, f"codec {codec}")
            raise RecordError(E.UNSUPPORTED_COMPRESSION_TYPE,
                              f"{name} compression is not supported: Event Hubs takes compression.type none or gzip")
        if count and recs[-1].offset_delta != last_delta:
            raise RecordError(E.INVALID_RECORD, f"last record's offset delta {recs[-1].offset_delta} is not the "
                                                f"batch's lastOffsetDelta {last_delta}")
        batches.append(RecordBatch(base, leader_epoch, magic, crc, attrs, last_delta, first_ts, max_ts, pid, pepoch,
                                   base_seq, recs))
        pos = end
    return batches


# ------------------------------------------------------------------------------------------------ encode

_SMALL_LIMIT = 4096  # zig-zag varints of |v| < 4096 (one or two bytes) come from a table: record lengths and
# offset deltas are nearly always there, and a table look-up is ~4x cheaper per record than building the bytes
_SMALL = [uvarint_bytes((v << 1) ^ (v >> 63)) for v in range(-_SMALL_LIMIT, _SMALL_LIMIT)]


def _zz(v: int) -> bytes:
    if -_SMALL_LIMIT <= v < _SMALL_LIMIT:
        return _SMALL[v + _SMALL_LIMIT]
    return uvarint_bytes((v << 1) ^ (v >> 63))


def _encode_record(offset_delta: int, ts_delta: int, key, value, headers) -> bytes:
    parts = [b"\x00", _zz(ts_delta), _zz(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts.append(_zz(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(_zz(len(value)))
        parts.append(value)
    if headers:
        parts.append(_zz(len(headers)))
        for hkey, hval in headers:
            raw = hkey.encode() if isinstance(hkey, str) else hkey
            parts.append(_zz(len(raw)))
            parts.append(raw)
            if hval is None:
                parts.append(b"\x01")
            else:
                parts.append(_zz(len(hval)))
                parts.append(hval)
    else:
        parts.append(b"\x00")
    body = b"".join(parts)
    return _zz(len(body)) + body


def encode_batch(
    base_offset: int,
    records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    timestamp_type: int = CREATE_TIME,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One v2 batch of ``records`` given as (timestamp_ms, key, value, headers), offsets base_offset + i.

    baseTimestamp is the first record's timestamp and maxTimestamp the largest, as Kafka's MemoryRecordsBuilder
    writes them. ``compression`` is NONE or GZIP (the codecs the service takes); the endpoint's Fetch writes NONE.
    ``partition_leader_epoch`` -1 (unknown) matches the endpoint's Metadata, so clients never validate epochs.
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    if compression not in SUPPORTED_CODECS:
        raise ValueError(f"compression {compression} is not one of {SUPPORTED_CODECS}")
    first_ts = records[0][0]
    max_ts = first_ts
    encoded = []
    for i, (ts, key, value, headers) in enumerate(records):
        if ts > max_ts:
            max_ts = ts
        encoded.append(_encode_record(i, ts - first_ts, key, value, headers))
    body = b"".join(encoded)
    if compression == GZIP:
        body = _gzip(body)
    attrs = compression | (_TIMESTAMP_TYPE if timestamp_type == LOG_APPEND_TIME else 0)
    count = len(records)
    covered = _HEAD.pack(attrs, count - 1, first_ts, max_ts, producer_id, producer_epoch, base_sequence, count) + body
    crc = _crc32c.crc32c(covered)
    length = len(covered) + 9  # partitionLeaderEpoch + magic + crc
    return _PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC, crc) + covered


def _gzip(data: bytes) -> bytes:
    deflater = zlib.compressobj(6, zlib.DEFLATED, 31)
    return deflater.compress(data) + deflater.flush()
