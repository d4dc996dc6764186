"""How a Kafka record becomes an Event Hubs event and back, following what the service does.

An event is stored once, as AMQP bytes (``PartitionLog``), whichever protocol sent it; AMQP receivers and Kafka
fetchers read the same log. ``amqp_message`` builds, from a produced Kafka record, the message sections an AMQP
producer would have sent (what ``PartitionLog.append`` takes); ``kafka_record`` reads a stored (stamped) event as
a Kafka consumer sees it. The rules and where each comes from:

1. **Value <-> body.** The record value is the event body, one AMQP data section, byte for byte; an event's
   data section is the record value. Source: Microsoft, "Exchange events between consumers and producers that use
   different protocols: AMQP, Kafka, and HTTPS", section Event Body ("an uninterpreted bag of bytes").
2. **Kafka headers -> application properties of AMQP type binary.** Same page, section Event User Properties:
   "headers set by a Kafka producer are always seen by an AMQP consumer as raw bytes" (Binary / byte[]).
3. **Application properties -> Kafka headers holding the AMQP encoding of the value**, type code included
   (a string "hello" arrives as ``a1 05 68 65 6c 6c 6f``): same section, "a Kafka consumer sees the raw
   AMQP-encoded byte sequence, including the AMQP type information" (the page's AmqpDeserializer reads them).
   A *binary* property is handed over as its bare bytes, so that headers a Kafka producer wrote come back to a
   Kafka consumer unchanged (NOT CONFIRMED for binary properties an AMQP producer set: the page does not say;
   this is the only reading under which Kafka-to-Kafka headers survive the AMQP store). A null property is a
   null header value and back (not confirmed either).
4. **The key is not the partition key.** The Kafka key travels as the message annotation ``x-opt-kafka-key``
   (binary), and an AMQP producer's partition key reaches Kafka consumers as the header ``x-opt-partition-key``
   with a null record key. Source: the Event Hubs service team via Azure/azure-sdk-for-python#18460 ("It is
   by-design that we don't promote the Kafka message key to be the Event Hubs partition key and nor the
   reverse"; "the partition key ... is available in the kafka record headers ... 'x-opt-partition-key'"), and
   the Event Hubs Spark connector's docs ("x-opt-kafka-key" among the system properties of Kafka-produced
   events). The header value here is the AMQP encoding of the key string, as for every other AMQP-side value
   (rule 3); the service's exact bytes are NOT CONFIRMED.
5. **Timestamps are the enqueued time** (Kafka LogAppendTime): Kafka consumers of Event Hubs see timestamp type
   "append" and the broker's time, the producer's CreateTime being ignored (observed against the service in
   emqx/emqx#11513). So ``amqp_message`` keeps no record timestamp and ``kafka_record`` answers the event's
   ``x-opt-enqueued-time``; ``encode_events`` writes LogAppendTime batches, one per run of equal enqueued times
   (a LogAppendTime consumer applies the batch's maxTimestamp to every record of the batch).
6. **A null value** (a Kafka tombstone) is stored as an ``amqp-value`` null body (the only AMQP body that says
   "null") and read back as a null value; any other amqp-value / amqp-sequence body reaches Kafka consumers as
   the AMQP encoding of the section's value (NOT CONFIRMED: the pages only cover data bodies).
7. Duplicate Kafka header names (legal in Kafka) cannot all live in one AMQP map: the last one wins (the
   service's behaviour is NOT CONFIRMED).

Reading for Fetch is the hot path, so ``kafka_record`` walks the stored sections with ``skip`` and slices the
bytes it hands over; it decodes nothing but the application-property names and, only when the annotations
mention them, the two annotation values it needs.
"""

from __future__ import annotations

from typing import Sequence

import harness.emulator.kafka.records as records
from harness.emulator.amqp.codec import DecodeError, decode, skip
from harness.emulator.amqp.message import APP_PROPS, DATA, MESSAGE_ANN, SEQUENCE, VALUE, section_code

KAFKA_KEY = "x-opt-kafka-key"
PARTITION_KEY = "x-opt-partition-key"
_KAFKA_KEY_RAW = KAFKA_KEY.encode()
_PARTITION_KEY_RAW = PARTITION_KEY.encode()
_NULL_BODY = b"\x00\x53\x77\x40"  # amqp-value section holding null


def _binary(b: bytes) -> bytes:
    n = len(b)
    return (b"\xa0" + bytes((n,)) if n < 256 else b"\xb0" + n.to_bytes(4, "big")) + b


def _string(text: str) -> bytes:
    raw = text.encode()
    n = len(raw)
    return (b"\xa1" + bytes((n,)) if n < 256 else b"\xb1" + n.to_bytes(4, "big")) + raw


def _map(count: int, body: bytes) -> bytes:
    """An AMQP map of ``count`` encoded keys and values: map8 when it fits, map32 otherwise."""
    if len(body) + 1 < 256 and count < 256:
        return bytes((0xC1, len(body) + 1, count)) + body
    return b"\xd1" + (len(body) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + body


_KAFKA_KEY_ENTRY = b"\xa3" + bytes((len(_KAFKA_KEY_RAW),)) + _KAFKA_KEY_RAW
_ANNOTATIONS = b"\x00\x53\x72"
_APP_PROPS = b"\x00\x53\x74"
_DATA = b"\x00\x53\x75"


def amqp_message(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
                 timestamp_ms: int | None = None) -> bytes:
    """The AMQP message sections for one produced Kafka record (rules 1, 2, 4, 6, 7 of the module docstring).

    ``timestamp_ms`` (the producer's CreateTime) is accepted and not kept: the service stamps the enqueued time.
    Written byte by byte (it runs once per produced record): message annotations {x-opt-kafka-key: binary},
    application properties {string: binary | null}, then one data section.
    """
    parts = []
    if key is not None:
        parts.append(_ANNOTATIONS + _map(2, _KAFKA_KEY_ENTRY + _binary(key)))
    if headers:
        props = dict(headers)  # the last of duplicate names wins (rule 7)
        body = b"".join(_string(name) + (b"\x40" if v is None else _binary(v)) for name, v in props.items())
        parts.append(_APP_PROPS + _map(2 * len(props), body))
    parts.append(_NULL_BODY if value is None else _DATA + _binary(value))
    return b"".join(parts)


def _header_value(buf, pos: int, end: int) -> bytes | None:
    """A property value as a Kafka header value: bare bytes for binary, None for null, else its AMQP encoding."""
    c = buf[pos]
    if c == 0xA0:
        return bytes(buf[pos + 2:end])
    if c == 0xB0:
        return bytes(buf[pos + 5:end])
    if c == 0x40:
        return None
    return bytes(buf[pos:end])


def _after(buf, p: int) -> int:
    """End of the value at ``p``: one-byte-length binary/string/symbol inline (the usual map keys and values)."""
    if buf[p] in _SMALL_VARIABLE:
        return p + 2 + buf[p + 1]
    return skip(buf, p)


_SMALL_VARIABLE = frozenset((0xA0, 0xA1, 0xA3))


def _map_items(buf, pos: int):
    """(key start, key end, value end) of each entry of the map at ``pos``."""
    c = buf[pos]
    if c == 0xC1:
        end, count, p = pos + 2 + buf[pos + 1], buf[pos + 2], pos + 3
    elif c == 0xD1:
        size = int.from_bytes(buf[pos + 1:pos + 5], "big")
        end, count, p = pos + 5 + size, int.from_bytes(buf[pos + 5:pos + 9], "big"), pos + 9
    elif c == 0x40:
        return
    else:
        raise DecodeError("section is not a map")
    for _ in range(count // 2):
        kend = _after(buf, p)
        vend = _after(buf, kend)
        if vend > end:
            raise DecodeError("map entry outside its size")
        yield p, kend, vend
        p = vend


def _name(buf, ks: int, ke: int) -> str:
    """A map key as text: str8/sym8 sliced and decoded, anything else through the codec."""
    if buf[ks] in (0xA1, 0xA3):
        return bytes(buf[ks + 2:ke]).decode("utf-8", "replace")
    return str(decode(buf, ks)[0])


def kafka_record(payload: bytes, header_len: int, enqueued_ms: int
                 ) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """A stored event as a Kafka consumer sees it: (timestamp_ms, key, value, headers) (rules 1, 3-6)."""
    key = None
    value = None
    body_seen = False
    headers: list[tuple[str, bytes | None]] = []
    partition_key_header = None
    pos, n = header_len, len(payload)
    while pos < n:
        code, vpos = section_code(payload, pos)
        end = skip(payload, vpos)
        if code == MESSAGE_ANN:
            raw = payload[vpos:end]
            wanted = (_KAFKA_KEY_RAW in raw) + (_PARTITION_KEY_RAW in raw)
            if wanted:
                for ks, ke, ve in _map_items(payload, vpos):
                    name = _name(payload, ks, ke)
                    if name == KAFKA_KEY:
                        key = _header_value(payload, ke, ve)
                        wanted -= 1
                    elif name == PARTITION_KEY:
                        partition_key_header = (PARTITION_KEY, bytes(payload[ke:ve]))
                        wanted -= 1
                    if not wanted:
                        break  # the service's own annotations come last: no need to walk them
        elif code == APP_PROPS:
            for ks, ke, ve in _map_items(payload, vpos):
                headers.append((_name(payload, ks, ke), _header_value(payload, ke, ve)))
        elif code == DATA:
            chunk = _header_value(payload, vpos, end)
            value = chunk if not body_seen or value is None else value + chunk
            body_seen = True
        elif code in (VALUE, SEQUENCE) and not body_seen:
            value = None if payload[vpos] == 0x40 else bytes(payload[vpos:end])
            body_seen = True
        pos = end
    if partition_key_header is not None:
        headers.append(partition_key_header)
    return enqueued_ms, key, value, headers


def encode_events(log, start: int, max_bytes: int, base_offset: int | None = None) -> tuple[bytes, int]:
    """Record batches for the events of ``log`` (a PartitionLog) from list index ``start``: (bytes, next index).

    Offsets are sequence numbers (``base_seq + index``; ``base_offset``, if given, is the offset of event
    ``start``). One LogAppendTime batch per run of equal enqueued times (rule 5). Stops near ``max_bytes``
    (counted in stored bytes, which exceed the records' size), except that the first record always goes out, as a
    broker returns at least one batch so a consumer can make progress (KIP-74).
    """
    payloads, header_lens, times = log.payloads, log.header_lens, log.times
    stop = len(payloads)
    out = []
    size = 0  # bytes written, plus the stored size of the records of the batch being built
    i = start
    while i < stop and size < max_bytes:
        t = times[i]
        j = i
        recs = []
        while j < stop and times[j] == t and (not recs or size + len(payloads[j]) <= max_bytes):
            recs.append(kafka_record(payloads[j], header_lens[j], t))
            size += len(payloads[j])
            j += 1
        if out and size > max_bytes:
            break
        first = log.base_seq + i if base_offset is None else base_offset + (i - start)
        out.append(records.encode_batch(first, recs, timestamp_type=records.LOG_APPEND_TIME))
        i = j
    return b"".join(out), i
