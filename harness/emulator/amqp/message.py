"""AMQP message sections at byte level: split batches, stamp events, build management replies.

Events are stored already encoded as the consumer will receive them (producer's sections with the service's
message annotations merged in), so delivery is a concatenation, and only the message-annotations map is touched
when an event is accepted: the rest of the producer's bytes are checked for structure and kept as they are.

Section order is not enforced, as the service does not enforce it: the Python SDK deliberately encodes delivery
annotations *after* the body, because the service drops them in their standard place (they are hop-scoped) but
carries them to receivers from there. Stored events are normalised to the standard order (header, delivery
annotations, message annotations, the rest as sent) so runtime metrics can be merged into the one
delivery-annotations map the SDK reads.
"""

from __future__ import annotations

import struct

from .codec import DecodeError, decode, encode, skip
from .types import Described, Symbol, ULong

BATCH_FORMAT = 0x80013700
HEADER, DELIVERY_ANN, MESSAGE_ANN, PROPERTIES, APP_PROPS, DATA, SEQUENCE, VALUE, FOOTER = range(0x70, 0x79)
_SECTION_NAMES = {
    "amqp:header:list": HEADER, "amqp:delivery-annotations:map": DELIVERY_ANN,
    "amqp:message-annotations:map": MESSAGE_ANN, "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APP_PROPS, "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": SEQUENCE, "amqp:amqp-value:*": VALUE, "amqp:footer:map": FOOTER,
}

_u32 = struct.Struct(">I")
_u32u32 = struct.Struct(">II")
_q = struct.Struct(">q").pack


def _symbol_bytes(name: str) -> bytes:
    raw = name.encode("ascii")
    return bytes((0xA3, len(raw))) + raw


K_SEQ = _symbol_bytes("x-opt-sequence-number")
K_OFFSET = _symbol_bytes("x-opt-offset")
K_TIME = _symbol_bytes("x-opt-enqueued-time")
K_PKEY = b"x-opt-partition-key"
_SERVICE_KEYS = (b"x-opt-sequence-number", b"x-opt-offset", b"x-opt-enqueued-time")
K_LAST_SEQ = _symbol_bytes("last_enqueued_sequence_number")
K_LAST_OFFSET = _symbol_bytes("last_enqueued_offset")
K_LAST_TIME = _symbol_bytes("last_enqueued_time_utc")
K_RETRIEVAL = _symbol_bytes("runtime_info_retrieval_time_utc")


def section_code(buf, pos: int) -> tuple[int, int]:
    """Section code at ``pos`` and where its value starts; canonical ``00 53 xx`` fast, others decoded."""
    if buf[pos] != 0x00:
        raise DecodeError("message section is not described")
    if pos + 3 <= len(buf) and buf[pos + 1] == 0x53:
        return buf[pos + 2], pos + 3
    descriptor, vpos = decode(buf, pos + 1, 1)
    if isinstance(descriptor, int):
        return int(descriptor), vpos
    code = _SECTION_NAMES.get(str(descriptor))
    if code is None:
        raise DecodeError(f"unknown section {descriptor!r}")
    return code, vpos


def scan_sections(buf) -> list[tuple[int, int, int, int]]:
    """(code, section_start, value_start, end) for every section, in the order sent; validates the structure."""
    out = []
    pos, n = 0, len(buf)
    while pos < n:
        code, vpos = section_code(buf, pos)
        if not HEADER <= code <= FOOTER:
            raise DecodeError(f"unknown section code 0x{code:02x}")
        if vpos >= n:
            raise DecodeError("truncated section")
        end = skip(buf, vpos)
        out.append((code, pos, vpos, end))
        pos = end
    return out


def binary_at(buf, pos: int) -> bytes:
    c = buf[pos]
    if c == 0xA0:
        n = buf[pos + 1]
        start = pos + 2
    elif c == 0xB0:
        n = _u32.unpack_from(buf, pos + 1)[0]
        start = pos + 5
    else:
        raise DecodeError("data section is not binary")
    if start + n > len(buf):
        raise DecodeError("truncated data section")
    return buf[start : start + n]


def split_batch(payload: bytes) -> tuple[dict | None, list[bytes]]:
    """Outer message annotations and the encoded inner messages of a 0x80013700 batch."""
    annotations = None
    inner = []
    pos, n = 0, len(payload)
    while pos < n:
        if payload[pos : pos + 4] == b"\x00\x53\x75\xa0":  # the common small data section
            size = payload[pos + 4] if pos + 4 < n else -1
            end = pos + 5 + size
            if size < 0 or end > n:
                raise DecodeError("truncated batch entry")
            inner.append(payload[pos + 5 : end])
            pos = end
            continue
        code, vpos = section_code(payload, pos)
        if vpos >= n:
            raise DecodeError("truncated section")
        end = skip(payload, vpos)
        if code == DATA:
            inner.append(binary_at(payload, vpos))
        elif code == MESSAGE_ANN:
            value, _ = decode(payload, vpos, 1)
            if isinstance(value, dict):
                annotations = value
        elif not HEADER <= code <= FOOTER:
            raise DecodeError(f"unknown section code 0x{code:02x}")
        pos = end
    return annotations, inner


def message_annotations(buf) -> dict:
    for code, _s, vpos, _e in scan_sections(buf):
        if code == MESSAGE_ANN:
            value, _ = decode(buf, vpos, 1)
            return value if isinstance(value, dict) else {}
    return {}


def partition_key_of(annotations: dict | None) -> str | None:
    if not annotations:
        return None
    key = annotations.get(Symbol("x-opt-partition-key"))
    if key is None:
        key = annotations.get("x-opt-partition-key")
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    return None if key is None else str(key)


def _map_entries(buf, pos: int) -> tuple[int, bytes]:
    """(count, raw entries) of the map at ``pos`` (map8/map32)."""
    c = buf[pos]
    if c == 0xC1:
        size, count = buf[pos + 1], buf[pos + 2]
        return count, buf[pos + 3 : pos + 2 + size]
    if c == 0xD1:
        size, count = _u32u32.unpack_from(buf, pos + 1)
        return count, buf[pos + 9 : pos + 5 + size]
    if c == 0x40:
        return 0, b""
    raise DecodeError("message annotations are not a map")


def _map_header(count: int, body_len: int) -> bytes:
    if body_len + 1 < 256 and count < 256:
        return bytes((0xC1, body_len + 1, count))
    return b"\xd1" + _u32u32.pack(body_len + 4, count)


def stamp(inner: bytes, seq: int, offset: int, time_ms: int) -> tuple[bytes, int]:
    """The stored/delivered encoding of an accepted event, and the length of its header section.

    Delivery annotations sent before the body are dropped (hop-scoped, as the service treats them); those sent
    after it (the Python SDK's placement) travel with the event, moved to the standard place. Service annotations
    replace any the producer set under the same keys. Every section is re-described canonically (``00 53 xx``),
    the only form the SDK's decoder reads.
    """
    sections = scan_sections(inner)
    header = b""
    delivery = b""
    ann_count, ann_entries, ann_vpos = 0, b"", -1
    rest: list = []
    run_start = run_end = -1  # a run of contiguous canonical sections copied with one slice
    seen_body = False
    for code, start, vpos, end in sections:
        if code == HEADER:
            header = _canonical(inner, code, start, vpos, end)
            continue
        if code == MESSAGE_ANN:
            ann_count, ann_entries = _map_entries(inner, vpos)
            ann_vpos = vpos
            continue
        if code == DELIVERY_ANN:
            if seen_body:
                delivery = b"\x00\x53\x71" + inner[vpos:end]
            continue
        if DATA <= code <= VALUE:
            seen_body = True
        if vpos == start + 3 and inner[start + 1] == 0x53 and start == run_end:
            run_end = end
            continue
        if run_start >= 0:
            rest.append(inner[run_start:run_end])
        if vpos == start + 3 and inner[start + 1] == 0x53:
            run_start, run_end = start, end
        else:
            run_start = run_end = -1
            rest.append(_canonical(inner, code, start, vpos, end))
    if run_start >= 0:
        rest.append(inner[run_start:run_end])
    if ann_count and any(k in ann_entries for k in _SERVICE_KEYS):
        ann_count, ann_entries = _without_service_keys(inner, ann_vpos)
    off = str(offset).encode()
    own = b"".join(
        (K_SEQ, b"\x81", _q(seq), K_OFFSET, bytes((0xA1, len(off))), off, K_TIME, b"\x83", _q(time_ms))
    )
    body_len = len(ann_entries) + len(own)
    parts = [header, delivery, b"\x00\x53\x72", _map_header(ann_count + 6, body_len), ann_entries, own]
    parts.extend(rest)
    return b"".join(parts), len(header)


def _canonical(buf, code: int, start: int, vpos: int, end: int) -> bytes:
    if vpos == start + 3 and buf[start + 1] == 0x53:
        return bytes(buf[start:end])
    return bytes((0x00, 0x53, code)) + bytes(buf[vpos:end])


def _without_service_keys(inner: bytes, vpos: int) -> tuple[int, bytes]:
    value, _ = decode(inner, vpos, 1)
    out = bytearray()
    count = 0
    for key, val in value.items():
        if str(key).encode() in _SERVICE_KEYS:
            continue
        encode(key, out)
        encode(val, out)
        count += 2
    return count, bytes(out)


def runtime_annotations(last_seq: int, last_offset: int | str, last_time_ms: int, now_ms: int) -> bytes:
    """Delivery-annotations section carrying the partition's last-enqueued-event properties."""
    off = str(last_offset).encode()
    body = b"".join(
        (
            K_LAST_SEQ, b"\x81", _q(last_seq),
            K_LAST_OFFSET, bytes((0xA1, len(off))), off,
            K_LAST_TIME, b"\x83", _q(last_time_ms),
            K_RETRIEVAL, b"\x83", _q(now_ms),
        )
    )
    return DELIVERY_ANN_PREFIX + _map_header(8, len(body)) + body


DELIVERY_ANN_PREFIX = b"\x00\x53\x71"
_RUNTIME_KEYS = ("last_enqueued_sequence_number", "last_enqueued_offset", "last_enqueued_time_utc",
                 "runtime_info_retrieval_time_utc")


def with_runtime_annotations(payload: bytes, header_len: int, runtime_section: bytes) -> bytes:
    """``payload`` with the runtime-metric section inserted after the header, or merged into the event's own
    delivery annotations when it carries some (the SDK keeps only one delivery-annotations map)."""
    if payload[header_len : header_len + 3] != DELIVERY_ANN_PREFIX:
        return payload[:header_len] + runtime_section + payload[header_len:]
    vpos = header_len + 3
    end = skip(payload, vpos)
    own, _ = decode(payload, vpos, 1)
    runtime, _ = decode(runtime_section, 3, 1)
    merged = {k: v for k, v in (own or {}).items() if str(k) not in _RUNTIME_KEYS}
    merged.update(runtime)
    section = bytearray(DELIVERY_ANN_PREFIX)
    encode(merged, section)
    return payload[:header_len] + bytes(section) + payload[end:]


# ------------------------------------------------------------------------------------------ whole messages


def parse_message(buf) -> dict:
    """Fully decoded message: {'header','properties','application_properties','value','data',...}."""
    names = {
        HEADER: "header", DELIVERY_ANN: "delivery_annotations", MESSAGE_ANN: "message_annotations",
        PROPERTIES: "properties", APP_PROPS: "application_properties", VALUE: "value", FOOTER: "footer",
    }
    msg: dict = {}
    for code, _s, vpos, _e in scan_sections(buf):
        value, _ = decode(buf, vpos, 1)
        if code == DATA:
            msg.setdefault("data", []).append(value)
        elif code == SEQUENCE:
            msg.setdefault("sequence", []).append(value)
        else:
            msg[names[code]] = value
    return msg


def build_message(
    *, properties: list | None = None, application_properties: dict | None = None, value=None,
    data: list[bytes] | None = None, message_annotations: dict | None = None,
) -> bytes:
    out = bytearray()
    if message_annotations is not None:
        encode(Described(ULong(MESSAGE_ANN), message_annotations), out)
    if properties is not None:
        full = list(properties) + [None] * (13 - len(properties))
        encode(Described(ULong(PROPERTIES), full), out)
    if application_properties is not None:
        encode(Described(ULong(APP_PROPS), application_properties), out)
    if data is not None:
        for chunk in data:
            encode(Described(ULong(DATA), bytes(chunk)), out)
    else:
        encode(Described(ULong(VALUE), value), out)
    return bytes(out)
