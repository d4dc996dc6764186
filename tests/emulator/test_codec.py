"""AMQP codec: round-trip property tests and fuzzing of the decoder, performatives, frames and sections."""

from __future__ import annotations

import math
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.emulator.amqp import performatives as P
from harness.emulator.amqp.codec import DecodeError, decode, dumps, loads
from harness.emulator.amqp.frames import FrameReader, frame
from harness.emulator.amqp.message import (
    runtime_annotations, scan_sections, split_batch, stamp, with_runtime_annotations,
)
from harness.emulator.amqp.types import (
    Array, Byte, Char, Decimal32, Decimal64, Decimal128, Described, Float, Int, Short, Symbol, Timestamp, UByte,
    UInt, ULong, UShort,
)

FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROUND = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ints(cls):
    return st.integers(cls.lo, cls.hi).map(cls)


symbols = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(Symbol)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    _ints(UByte), _ints(UShort), _ints(UInt), _ints(ULong), _ints(Byte), _ints(Short), _ints(Int), _ints(Timestamp),
    st.floats(allow_nan=False), st.floats(width=32, allow_nan=False).map(Float),
    st.text(max_size=300), st.binary(max_size=300), symbols, st.uuids(),
    st.characters().map(Char),
    st.binary(min_size=4, max_size=4).map(Decimal32), st.binary(min_size=8, max_size=8).map(Decimal64),
    st.binary(min_size=16, max_size=16).map(Decimal128),
)
arrays = st.one_of(
    st.lists(symbols, max_size=5).map(lambda xs: Array(Symbol, xs)),
    st.lists(_ints(UInt), max_size=5).map(lambda xs: Array(UInt, xs)),
    st.lists(st.text(max_size=20), max_size=5).map(lambda xs: Array(str, xs)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5).map(lambda xs: Array(int, xs)),
    st.lists(st.booleans(), max_size=5).map(lambda xs: Array(bool, xs)),
)
hashable = st.one_of(symbols, st.text(max_size=20), _ints(ULong), st.integers(-1000, 1000))
values = st.recursive(
    st.one_of(scalars, arrays),
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(hashable, inner, max_size=6),
        st.builds(Described, st.one_of(_ints(ULong), symbols), inner),
    ),
    max_leaves=30,
)


def same(a, b) -> bool:
    """Equal with the same AMQP type all the way down (1 == UInt(1) is not good enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, Described):
        return same(a.descriptor, b.descriptor) and same(a.value, b.value)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)) and (
            not isinstance(a, Array) or a.elem is b.elem or not a)
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    return a == b


@ROUND
@given(values)
def test_round_trip(value):
    encoded = dumps(value)
    decoded = loads(encoded)
    assert same(decoded, value), (value, decoded)
    assert dumps(decoded) == encoded


@FUZZ
@given(st.binary(max_size=200))
def test_decoder_rejects_garbage_cleanly(data):
    try:
        decode(data, 0)
    except DecodeError:
        pass


@FUZZ
@given(values, st.data())
def test_decoder_survives_mutations(value, data):
    encoded = bytearray(dumps(value))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(encoded) - 1))
        encoded[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    for buf in (bytes(encoded), bytes(encoded[:cut])):
        try:
            loads(buf)
        except DecodeError:
            pass


def test_known_encodings():
    assert dumps(None) == b"\x40"
    assert dumps(UInt(0)) == b"\x43"
    assert dumps(UInt(7)) == b"\x52\x07"
    assert dumps(UInt(300)) == b"\x70\x00\x00\x01\x2c"
    assert dumps(Symbol("ab")) == b"\xa3\x02ab"
    assert dumps("é") == b"\xa1\x02\xc3\xa9"
    assert dumps(Timestamp(1)) == b"\x83" + struct.pack(">q", 1)
    assert dumps([]) == b"\xc0\x01\x00"
    assert dumps({Symbol("k"): 1}) == b"\xc1\x06\x02\xa3\x01k\x55\x01"
    assert loads(b"\xa1\x00") == ""
    assert dumps(uuid.UUID(int=1)) == b"\x98" + uuid.UUID(int=1).bytes
    big = "x" * 300
    assert loads(dumps(big)) == big and dumps(big)[0] == 0xB1


def test_hostile_sizes_are_bounded():
    with pytest.raises(DecodeError):  # list32 claiming 4G elements in 8 bytes
        decode(b"\xd0\x00\x00\x00\x08\xff\xff\xff\xff", 0)
    with pytest.raises(DecodeError):  # array of 2^32-1 nulls
        decode(b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40", 0)
    with pytest.raises(DecodeError):  # deep nesting of described values
        decode(b"\x00\x53\x01" * 5000 + b"\x40", 0)
    with pytest.raises(DecodeError):
        decode(b"\xb0\xff\xff\xff\xff", 0)


@pytest.mark.parametrize("code", sorted(P.FIELDS))
def test_performatives_are_encoded_at_full_arity(code):
    n = len(P.FIELDS[code])
    body = bytes(P.encode_performative(code, [None] * n))
    assert body[:3] == bytes((0x00, 0x53, code))
    assert body[3] == 0xC0 and body[5] == n  # list8 with every field present
    perf = P.decode_body(body)
    assert perf.code == code and perf.fields == [None] * n


def test_short_incoming_performatives_are_padded():
    perf = P.decode_body(b"\x00\x53\x16\xc0\x03\x01\x52\x05")  # detach with only a handle
    assert perf.handle == 5 and perf.closed is None and len(perf.fields) == 3


@FUZZ
@given(st.binary(max_size=120))
def test_performative_decoder_fuzz(data):
    try:
        P.decode_body(b"\x00\x53" + data)
    except (P.ProtocolError, DecodeError):
        pass


def _frames():
    bodies = st.lists(st.binary(max_size=300), max_size=8)
    return bodies.map(lambda bs: [(i % 3, b) for i, b in enumerate(bs)])


@FUZZ
@given(_frames(), st.lists(st.integers(1, 64), min_size=1, max_size=20))
def test_frame_reader_reassembles_any_chunking(frames, cuts):
    stream = b"AMQP\x00\x01\x00\x00" + b"".join(frame(ch, body) for ch, body in frames)
    reader = FrameReader(4096)
    reader.one_at_a_time = False
    out, pos, i = [], 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        i += 1
        out.extend(reader.feed(stream[pos: pos + step]))
        pos += step
    out.extend(reader.feed(b""))
    assert out[0] == ("header", b"AMQP\x00\x01\x00\x00")
    assert [(ch, body) for _t, ch, body in out[1:]] == frames


@FUZZ
@given(st.binary(max_size=400))
def test_frame_reader_fuzz(data):
    reader = FrameReader(1024)
    reader.expect_header = False
    reader.one_at_a_time = False
    try:
        for ftype, _ch, body in reader.feed(data):
            assert ftype in (0, 1)
            assert len(body) <= 1024
        assert len(reader.buf) < 1024 + 8
    except P.ProtocolError as exc:
        assert exc.condition == "amqp:connection:framing-error"


def test_frame_reader_refuses_oversize_header_at_once():
    reader = FrameReader(1024)
    reader.expect_header = False
    with pytest.raises(P.ProtocolError):
        reader.feed(struct.pack(">IBBH", 100 * 1024 * 1024, 2, 0, 0))


def _inner(body: bytes, key: str | None = None) -> bytes:
    out = b"\x00\x53\x70\xc0\x02\x01\x41"  # header durable
    if key is not None:
        out += dumps(Described(ULong(0x72), {Symbol("x-opt-partition-key"): key}))
    out += dumps(Described(ULong(0x74), {"p": 1}))
    return out + dumps(Described(ULong(0x75), body))


@given(st.lists(st.binary(max_size=2000), min_size=1, max_size=20), st.one_of(st.none(), st.text(max_size=20)))
@ROUND
def test_batch_split_and_stamp(bodies, key):
    inners = [_inner(b, key) for b in bodies]
    outer = b"\x00\x53\x70\xc0\x02\x01\x41" + b"".join(dumps(Described(ULong(0x75), m)) for m in inners)
    if key is not None:
        outer = outer[:7] + dumps(Described(ULong(0x72), {Symbol("x-opt-partition-key"): key})) + outer[7:]
    ann, split = split_batch(outer)
    assert split == inners
    assert (ann or {}).get("x-opt-partition-key") == key
    for i, m in enumerate(split):
        stored, hl = stamp(m, 40 + i, 1000 * i, 1234)
        sections = {code: loads(stored[v:e]) for code, _s, v, e in scan_sections(stored)}
        ma = sections[0x72]
        assert ma["x-opt-sequence-number"] == 40 + i and ma["x-opt-offset"] == str(1000 * i)
        assert ma["x-opt-enqueued-time"] == Timestamp(1234)
        assert ma.get("x-opt-partition-key") == key
        assert sections[0x75] == bodies[i] and sections[0x74] == {"p": 1}
        assert stored[:hl] == m[:7]


def test_stamp_replaces_producer_service_annotations():
    m = dumps(Described(ULong(0x72), {Symbol("x-opt-sequence-number"): 999, Symbol("x"): 1}))
    m += dumps(Described(ULong(0x77), "v"))
    stored, _ = stamp(m, 5, 0, 1)
    ann = loads(stored[3:scan_sections(stored)[0][3]])
    assert ann["x-opt-sequence-number"] == 5 and ann["x"] == 1


@FUZZ
@given(st.binary(max_size=300))
def test_section_scanners_fuzz(data):
    for fn in (split_batch, scan_sections, lambda d: stamp(d, 0, 0, 0)):
        try:
            fn(data)
        except (DecodeError, IndexError, struct.error):
            pass


def _codes(stored: bytes) -> list[int]:
    return [code for code, *_ in scan_sections(stored)]


def test_stamp_keeps_delivery_annotations_sent_after_the_body():
    # what the SDK's encode_payload writes: header, properties, data, then delivery annotations last
    da = dumps(Described(ULong(0x71), {Symbol("x-trace"): "t1"}))
    m = b"\x00\x53\x70\xc0\x02\x01\x41" + dumps(Described(ULong(0x73), ["id-1"])) + dumps(
        Described(ULong(0x75), b"body")) + da
    stored, hl = stamp(m, 3, 30, 7)
    assert _codes(stored) == [0x70, 0x71, 0x72, 0x73, 0x75]  # normalised to the standard order
    assert stored[hl:hl + len(da)] == da


def test_stamp_drops_delivery_annotations_in_the_standard_place():
    # before the body they address this hop only (and the service does not pass them on)
    m = dumps(Described(ULong(0x71), {Symbol("hop"): 1})) + dumps(Described(ULong(0x77), "v"))
    stored, hl = stamp(m, 0, 0, 0)
    assert hl == 0 and _codes(stored) == [0x72, 0x77]


def test_stamp_accepts_any_section_order_and_symbolic_descriptors():
    body = dumps(Described(Symbol("amqp:data:binary"), b"payload"))
    props = dumps(Described(ULong(0x74), {"p": 1}))
    ann = dumps(Described(Symbol("amqp:message-annotations:map"), {Symbol("k"): "v"}))
    stored, _ = stamp(body + props + ann, 1, 2, 3)  # body first, annotations last
    assert _codes(stored) == [0x72, 0x75, 0x74]
    assert all(stored[start + 1] == 0x53 for _c, start, _v, _e in scan_sections(stored))  # what the SDK reads
    sections = {code: loads(stored[v:e]) for code, _s, v, e in scan_sections(stored)}
    assert sections[0x75] == b"payload" and sections[0x72]["k"] == "v" and sections[0x72]["x-opt-offset"] == "2"


def test_runtime_metrics_merge_into_the_events_delivery_annotations():
    m = dumps(Described(ULong(0x77), "v")) + dumps(
        Described(ULong(0x71), {Symbol("x-trace"): "t1", Symbol("last_enqueued_offset"): "forged"}))
    stored, hl = stamp(m, 0, 0, 0)
    merged = with_runtime_annotations(stored, hl, runtime_annotations(9, "900", 11, 12))
    assert _codes(merged).count(0x71) == 1
    da = loads(merged[hl + 3:scan_sections(merged)[0][3]])
    assert da["x-trace"] == "t1" and da["last_enqueued_offset"] == "900" and da["last_enqueued_sequence_number"] == 9
    plain, phl = stamp(dumps(Described(ULong(0x77), "v")), 0, 0, 0)
    inserted = with_runtime_annotations(plain, phl, runtime_annotations(9, "900", 11, 12))
    assert _codes(inserted) == [0x71, 0x72, 0x77]
