"""AMQP 1.0 type system codec (OASIS AMQP 1.0 part 1).

``decode(buf, pos)`` returns ``(value, new_pos)`` and never trusts lengths from the wire: every size and
count is checked against the buffer, nesting is bounded, and any inconsistency raises ``DecodeError``
(never IndexError/struct.error), so a hostile peer can only get its own connection closed.

``encode(value, out)`` appends the smallest encoding of ``value`` to a bytearray. Python types map as
described in :mod:`.types`.
"""

from __future__ import annotations

import struct
import uuid

from .types import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

MAX_DEPTH = 32
# An array of zero-width elements (null/true/false/0) costs no bytes per element: cap its count.
MAX_ZERO_WIDTH_ARRAY = 4096


class DecodeError(ValueError):
    """Malformed AMQP encoding."""


_u8 = struct.Struct(">B")
_i8 = struct.Struct(">b")
_u16 = struct.Struct(">H")
_i16 = struct.Struct(">h")
_u32 = struct.Struct(">I")
_i32 = struct.Struct(">i")
_u64 = struct.Struct(">Q")
_i64 = struct.Struct(">q")
_f32 = struct.Struct(">f")
_f64 = struct.Struct(">d")
_u8u8 = struct.Struct(">BB")
_u32u32 = struct.Struct(">II")

# ---------------------------------------------------------------------------------------------- decode


def _need(buf, pos: int, n: int) -> None:
    if pos + n > len(buf):
        raise DecodeError("truncated value")


def _fixed(unpacker, wrap, width):
    unpack_from = unpacker.unpack_from

    if wrap is None:

        def dec(buf, pos, depth):
            if pos + width > len(buf):
                raise DecodeError("truncated value")
            return unpack_from(buf, pos)[0], pos + width

    else:

        def dec(buf, pos, depth):
            if pos + width > len(buf):
                raise DecodeError("truncated value")
            return wrap(unpack_from(buf, pos)[0]), pos + width

    return dec


def _const(value_factory):
    def dec(buf, pos, depth):
        return value_factory(), pos

    return dec


def _dec_bool(buf, pos, depth):
    if pos >= len(buf):
        raise DecodeError("truncated boolean")
    b = buf[pos]
    if b > 1:
        raise DecodeError("invalid boolean byte")
    return b == 1, pos + 1


def _dec_uuid(buf, pos, depth):
    _need(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def _dec_char(buf, pos, depth):
    _need(buf, pos, 4)
    cp = _u32.unpack_from(buf, pos)[0]
    if cp > 0x10FFFF:
        raise DecodeError("invalid char")
    return Char(chr(cp)), pos + 4


def _raw(cls, width):
    def dec(buf, pos, depth):
        _need(buf, pos, width)
        return cls(buf[pos : pos + width]), pos + width

    return dec


def _variable(small: bool, kind: int):
    """kind 0 = binary, 1 = utf-8 string, 2 = symbol (ascii)."""

    def dec(buf, pos, depth):
        if small:
            if pos >= len(buf):
                raise DecodeError("truncated length")
            n = buf[pos]
            pos += 1
        else:
            if pos + 4 > len(buf):
                raise DecodeError("truncated length")
            n = _u32.unpack_from(buf, pos)[0]
            pos += 4
        end = pos + n
        if end > len(buf):
            raise DecodeError("truncated variable-width value")
        raw = bytes(buf[pos:end])
        try:
            if kind == 1:
                return raw.decode("utf-8"), end
            if kind == 2:
                return Symbol(raw.decode("ascii")), end
        except UnicodeDecodeError as exc:
            raise DecodeError(f"bad text: {exc.reason}") from None
        return raw, end

    return dec


def _compound_header(buf, pos, small):
    if small:
        if pos + 2 > len(buf):
            raise DecodeError("truncated compound header")
        size, count = _u8u8.unpack_from(buf, pos)
        body = pos + 2
        end = pos + 1 + size
        if size < 1:
            raise DecodeError("compound size too small")
    else:
        if pos + 8 > len(buf):
            raise DecodeError("truncated compound header")
        size, count = _u32u32.unpack_from(buf, pos)
        body = pos + 8
        end = pos + 4 + size
        if size < 4:
            raise DecodeError("compound size too small")
    if end > len(buf):
        raise DecodeError("compound exceeds buffer")
    if count > end - body:
        raise DecodeError("compound count exceeds its size")
    return count, body, end


def _list(small):
    def dec(buf, pos, depth):
        if depth > MAX_DEPTH:
            raise DecodeError("nesting too deep")
        count, pos, end = _compound_header(buf, pos, small)
        out = []
        append = out.append
        table = _DECODERS
        for _ in range(count):
            if pos >= end:
                raise DecodeError("list element outside its size")
            fn = table[buf[pos]]
            if fn is None:
                raise DecodeError(f"unknown constructor 0x{buf[pos]:02x}")
            value, pos = fn(buf, pos + 1, depth + 1)
            append(value)
        if pos != end:
            raise DecodeError("list size mismatch")
        return out, end

    return dec


def _map(small):
    def dec(buf, pos, depth):
        if depth > MAX_DEPTH:
            raise DecodeError("nesting too deep")
        count, pos, end = _compound_header(buf, pos, small)
        if count % 2:
            raise DecodeError("map with odd element count")
        out = {}
        table = _DECODERS
        for _ in range(count // 2):
            if pos >= end:
                raise DecodeError("map key outside its size")
            fn = table[buf[pos]]
            if fn is None:
                raise DecodeError(f"unknown constructor 0x{buf[pos]:02x}")
            key, pos = fn(buf, pos + 1, depth + 1)
            if pos >= end:
                raise DecodeError("map value outside its size")
            fn = table[buf[pos]]
            if fn is None:
                raise DecodeError(f"unknown constructor 0x{buf[pos]:02x}")
            value, pos = fn(buf, pos + 1, depth + 1)
            try:
                out[key] = value
            except TypeError:
                raise DecodeError("unhashable map key") from None
        if pos != end:
            raise DecodeError("map size mismatch")
        return out, end

    return dec


_ELEM_TYPE = {}  # constructor -> python type used for Array.elem (filled below)


def _array(small):
    def dec(buf, pos, depth):
        if depth > MAX_DEPTH:
            raise DecodeError("nesting too deep")
        count, pos, end = _compound_header(buf, pos, small)
        if pos >= end:
            raise DecodeError("array without element constructor")
        ctor_pos = pos
        descriptor = None
        ctor = buf[pos]
        pos += 1
        if ctor == 0x00:
            if pos >= end:
                raise DecodeError("truncated array descriptor")
            fn = _DECODERS[buf[pos]]
            if fn is None:
                raise DecodeError("bad array descriptor")
            descriptor, pos = fn(buf, pos + 1, depth + 1)
            if pos >= end:
                raise DecodeError("truncated array constructor")
            ctor = buf[pos]
            pos += 1
        fn = _DECODERS[ctor]
        if fn is None or ctor == 0x00:
            raise DecodeError(f"bad array element constructor 0x{ctor:02x}")
        if ctor in _ZERO_WIDTH and count > MAX_ZERO_WIDTH_ARRAY:
            raise DecodeError("array of zero-width elements too long")
        items = []
        append = items.append
        for _ in range(count):
            if pos > end:
                raise DecodeError("array element outside its size")
            value, pos = fn(buf, pos, depth + 1)
            if descriptor is not None:
                value = Described(descriptor, value)
            append(value)
        if pos != end:
            raise DecodeError("array size mismatch")
        elem = Described if descriptor is not None else _ELEM_TYPE.get(ctor, object)
        del ctor_pos
        return Array(elem, items), end

    return dec


def _dec_described(buf, pos, depth):
    if depth > MAX_DEPTH:
        raise DecodeError("nesting too deep")
    if pos >= len(buf):
        raise DecodeError("truncated descriptor")
    fn = _DECODERS[buf[pos]]
    if fn is None or buf[pos] == 0x00:
        raise DecodeError("bad descriptor")
    descriptor, pos = fn(buf, pos + 1, depth + 1)
    if pos >= len(buf):
        raise DecodeError("truncated described value")
    fn = _DECODERS[buf[pos]]
    if fn is None:
        raise DecodeError(f"unknown constructor 0x{buf[pos]:02x}")
    value, pos = fn(buf, pos + 1, depth + 1)
    return Described(descriptor, value), pos


def _small_uint(buf, pos, depth):
    if pos >= len(buf):
        raise DecodeError("truncated value")
    return UInt(buf[pos]), pos + 1


def _small_ulong(buf, pos, depth):
    if pos >= len(buf):
        raise DecodeError("truncated value")
    return ULong(buf[pos]), pos + 1


_DECODERS: list = [None] * 256
_D = _DECODERS
_D[0x00] = _dec_described
_D[0x40] = _const(lambda: None)
_D[0x41] = _const(lambda: True)
_D[0x42] = _const(lambda: False)
_D[0x43] = _const(lambda: UInt(0))
_D[0x44] = _const(lambda: ULong(0))
_D[0x45] = _const(list)
_D[0x50] = _fixed(_u8, UByte, 1)
_D[0x51] = _fixed(_i8, Byte, 1)
_D[0x52] = _small_uint
_D[0x53] = _small_ulong
_D[0x54] = _fixed(_i8, Int, 1)
_D[0x55] = _fixed(_i8, None, 1)
_D[0x56] = _dec_bool
_D[0x60] = _fixed(_u16, UShort, 2)
_D[0x61] = _fixed(_i16, Short, 2)
_D[0x70] = _fixed(_u32, UInt, 4)
_D[0x71] = _fixed(_i32, Int, 4)
_D[0x72] = _fixed(_f32, Float, 4)
_D[0x73] = _dec_char
_D[0x74] = _raw(Decimal32, 4)
_D[0x80] = _fixed(_u64, ULong, 8)
_D[0x81] = _fixed(_i64, None, 8)
_D[0x82] = _fixed(_f64, None, 8)
_D[0x83] = _fixed(_i64, Timestamp, 8)
_D[0x84] = _raw(Decimal64, 8)
_D[0x94] = _raw(Decimal128, 16)
_D[0x98] = _dec_uuid
_D[0xA0] = _variable(True, 0)
_D[0xA1] = _variable(True, 1)
_D[0xA3] = _variable(True, 2)
_D[0xB0] = _variable(False, 0)
_D[0xB1] = _variable(False, 1)
_D[0xB3] = _variable(False, 2)
_D[0xC0] = _list(True)
_D[0xD0] = _list(False)
_D[0xC1] = _map(True)
_D[0xD1] = _map(False)
_D[0xE0] = _array(True)
_D[0xF0] = _array(False)
del _D

_ZERO_WIDTH = frozenset((0x40, 0x41, 0x42, 0x43, 0x44, 0x45))
_ELEM_TYPE.update(
    {
        0x40: type(None), 0x41: bool, 0x42: bool, 0x56: bool, 0x43: UInt, 0x52: UInt, 0x70: UInt,
        0x44: ULong, 0x53: ULong, 0x80: ULong, 0x45: list, 0xC0: list, 0xD0: list, 0x50: UByte,
        0x51: Byte, 0x54: Int, 0x71: Int, 0x55: int, 0x81: int, 0x60: UShort, 0x61: Short,
        0x72: Float, 0x73: Char, 0x74: Decimal32, 0x82: float, 0x83: Timestamp, 0x84: Decimal64,
        0x94: Decimal128, 0x98: uuid.UUID, 0xA0: bytes, 0xB0: bytes, 0xA1: str, 0xB1: str,
        0xA3: Symbol, 0xB3: Symbol, 0xC1: dict, 0xD1: dict, 0xE0: Array, 0xF0: Array,
    }
)


def decode(buf, pos: int = 0, depth: int = 0):
    """Decode one value at ``pos``; returns ``(value, next_pos)``. Raises DecodeError on bad input."""
    try:
        if pos >= len(buf):
            raise DecodeError("empty buffer")
        fn = _DECODERS[buf[pos]]
        if fn is None:
            raise DecodeError(f"unknown constructor 0x{buf[pos]:02x}")
        return fn(buf, pos + 1, depth)
    except DecodeError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"malformed value: {type(exc).__name__}") from None


def skip(buf, pos: int) -> int:
    """Position after the value at ``pos``, without building compound values when avoidable."""
    if pos >= len(buf):
        raise DecodeError("empty buffer")
    c = buf[pos]
    if c in (0xC0, 0xC1, 0xE0):
        if pos + 2 > len(buf):
            raise DecodeError("truncated compound")
        end = pos + 2 + buf[pos + 1]
    elif c in (0xD0, 0xD1, 0xF0):
        if pos + 5 > len(buf):
            raise DecodeError("truncated compound")
        end = pos + 5 + _u32.unpack_from(buf, pos + 1)[0]
    elif c in (0xA0, 0xA1, 0xA3):
        if pos + 2 > len(buf):
            raise DecodeError("truncated value")
        end = pos + 2 + buf[pos + 1]
    elif c in (0xB0, 0xB1, 0xB3):
        if pos + 5 > len(buf):
            raise DecodeError("truncated value")
        end = pos + 5 + _u32.unpack_from(buf, pos + 1)[0]
    else:
        return decode(buf, pos)[1]
    if end > len(buf):
        raise DecodeError("value exceeds buffer")
    return end


# ---------------------------------------------------------------------------------------------- encode

_p_u32 = _u32.pack


def _enc_none(v, out):
    out.append(0x40)


def _enc_bool(v, out):
    out.append(0x41 if v else 0x42)


def _enc_long(v, out):
    if -128 <= v <= 127:
        out.append(0x55)
        out += _i8.pack(v)
    else:
        out.append(0x81)
        out += _i64.pack(v)


def _enc_uint(v, out):
    if v == 0:
        out.append(0x43)
    elif v < 256:
        out.append(0x52)
        out.append(v)
    else:
        out.append(0x70)
        out += _u32.pack(v)


def _enc_ulong(v, out):
    if v == 0:
        out.append(0x44)
    elif v < 256:
        out.append(0x53)
        out.append(v)
    else:
        out.append(0x80)
        out += _u64.pack(v)


def _enc_int(v, out):
    if -128 <= v <= 127:
        out.append(0x54)
        out += _i8.pack(v)
    else:
        out.append(0x71)
        out += _i32.pack(v)


def _simple(code, packer):
    def enc(v, out):
        out.append(code)
        out += packer.pack(v)

    return enc


def _enc_variable(small_code, large_code, data: bytes, out):
    n = len(data)
    if n < 256:
        out.append(small_code)
        out.append(n)
    else:
        out.append(large_code)
        out += _p_u32(n)
    out += data


def _enc_binary(v, out):
    _enc_variable(0xA0, 0xB0, bytes(v), out)


def _enc_str(v, out):
    _enc_variable(0xA1, 0xB1, v.encode("utf-8"), out)


def _enc_symbol(v, out):
    _enc_variable(0xA3, 0xB3, v.encode("ascii"), out)


def _enc_char(v, out):
    out.append(0x73)
    out += _p_u32(ord(v))


def _enc_uuid(v, out):
    out.append(0x98)
    out += v.bytes


def _enc_raw(code, width):
    def enc(v, out):
        if len(v) != width:
            raise ValueError(f"decimal needs {width} bytes")
        out.append(code)
        out += v

    return enc


def _compound(small_code, large_code, count: int, body: bytes | bytearray, out):
    if len(body) + 1 < 256 and count < 256:
        out.append(small_code)
        out.append(len(body) + 1)
        out.append(count)
    else:
        out.append(large_code)
        out += _u32u32.pack(len(body) + 4, count)
    out += body


def _enc_list(v, out):
    body = bytearray()
    for item in v:
        encode(item, body)
    _compound(0xC0, 0xD0, len(v), body, out)


def _enc_map(v, out):
    body = bytearray()
    for key, value in v.items():
        encode(key, body)
        encode(value, body)
    _compound(0xC1, 0xD1, 2 * len(v), body, out)


def _enc_described(v, out):
    out.append(0x00)
    encode(v.descriptor, out)
    encode(v.value, out)


# Element encoders for arrays: fixed (large) constructor, then values without constructor.
def _array_elem_encoder(elem):
    if elem is Described:
        return None
    code = {
        type(None): 0x40, bool: 0x56, UInt: 0x70, ULong: 0x80, UByte: 0x50, Byte: 0x51, UShort: 0x60,
        Short: 0x61, Int: 0x71, int: 0x81, Float: 0x72, float: 0x82, Timestamp: 0x83, Char: 0x73,
        uuid.UUID: 0x98, bytes: 0xB0, str: 0xB1, Symbol: 0xB3, list: 0xD0, dict: 0xD1, Array: 0xF0,
        Decimal32: 0x74, Decimal64: 0x84, Decimal128: 0x94,
    }.get(elem)
    if code is None:
        raise TypeError(f"cannot encode array of {elem!r}")
    return code


def _enc_array(v, out):
    elem = v.elem
    body = bytearray()
    if elem is Described:
        if not v:
            raise TypeError("empty described array has no descriptor")
        descriptor = v[0].descriptor
        inner = [item.value for item in v]
        inner_arr = Array(type(inner[0]), inner)
        tmp = bytearray()
        _enc_array(inner_arr, tmp)
        # tmp = header + ctor + values; rebuild with descriptor before ctor
        count, start, _end = _compound_header(tmp, 1, tmp[0] == 0xE0)
        body.append(0x00)
        encode(descriptor, body)
        body += tmp[start:]
        _compound(0xE0, 0xF0, count, body, out)
        return
    code = _array_elem_encoder(elem)
    body.append(code)
    scratch = bytearray()
    for item in v:
        if type(item) is not elem and not (elem is bool and isinstance(item, bool)):
            raise TypeError(f"array of {elem.__name__} holds {type(item).__name__}")
        scratch.clear()
        _ARRAY_ELEM[code](item, scratch)
        body += scratch
    _compound(0xE0, 0xF0, len(v), body, out)


def _elem_fixed(packer):
    return lambda v, out: out.__iadd__(packer.pack(v))


def _elem_var(conv):
    def enc(v, out):
        data = conv(v)
        out += _p_u32(len(data))
        out += data

    return enc


def _elem_compound(fn):
    def enc(v, out):
        tmp = bytearray()
        fn(v, tmp)
        # re-emit in large form without constructor
        if tmp[0] in (0xC0, 0xC1, 0xE0):
            count, start, _ = _compound_header(tmp, 1, True)
            body = tmp[start:]
        elif tmp[0] == 0x45:
            count, body = 0, b""
        else:
            count, start, _ = _compound_header(tmp, 1, False)
            body = tmp[start:]
        out += _u32u32.pack(len(body) + 4, count)
        out += body

    return enc


_ARRAY_ELEM = {
    0x40: lambda v, out: None,
    0x56: lambda v, out: out.append(1 if v else 0),
    0x70: _elem_fixed(_u32),
    0x80: _elem_fixed(_u64),
    0x50: _elem_fixed(_u8),
    0x51: _elem_fixed(_i8),
    0x60: _elem_fixed(_u16),
    0x61: _elem_fixed(_i16),
    0x71: _elem_fixed(_i32),
    0x81: _elem_fixed(_i64),
    0x72: _elem_fixed(_f32),
    0x82: _elem_fixed(_f64),
    0x83: _elem_fixed(_i64),
    0x73: lambda v, out: out.__iadd__(_p_u32(ord(v))),
    0x98: lambda v, out: out.__iadd__(v.bytes),
    0x74: lambda v, out: out.__iadd__(v),
    0x84: lambda v, out: out.__iadd__(v),
    0x94: lambda v, out: out.__iadd__(v),
    0xB0: _elem_var(bytes),
    0xB1: _elem_var(lambda s: s.encode("utf-8")),
    0xB3: _elem_var(lambda s: s.encode("ascii")),
    0xD0: _elem_compound(_enc_list),
    0xD1: _elem_compound(_enc_map),
    0xF0: _elem_compound(_enc_array),
}

_ENCODERS = {
    type(None): _enc_none,
    bool: _enc_bool,
    int: _enc_long,
    float: _simple(0x82, _f64),
    str: _enc_str,
    bytes: _enc_binary,
    bytearray: _enc_binary,
    memoryview: _enc_binary,
    list: _enc_list,
    tuple: _enc_list,
    dict: _enc_map,
    uuid.UUID: _enc_uuid,
    Symbol: _enc_symbol,
    Char: _enc_char,
    UByte: _simple(0x50, _u8),
    Byte: _simple(0x51, _i8),
    UShort: _simple(0x60, _u16),
    Short: _simple(0x61, _i16),
    UInt: _enc_uint,
    ULong: _enc_ulong,
    Int: _enc_int,
    Timestamp: _simple(0x83, _i64),
    Float: _simple(0x72, _f32),
    Decimal32: _enc_raw(0x74, 4),
    Decimal64: _enc_raw(0x84, 8),
    Decimal128: _enc_raw(0x94, 16),
    Described: _enc_described,
    Array: _enc_array,
}


def encode(value, out: bytearray) -> bytearray:
    """Append the encoding of ``value`` to ``out`` (and return ``out``)."""
    fn = _ENCODERS.get(type(value))
    if fn is None:
        raise TypeError(f"no AMQP encoding for {type(value).__name__}")
    fn(value, out)
    return out


def dumps(value) -> bytes:
    return bytes(encode(value, bytearray()))


def loads(buf):
    value, pos = decode(buf, 0)
    if pos != len(buf):
        raise DecodeError("trailing bytes")
    return value


def encode_list_full(fields, out: bytearray) -> bytearray:
    """Encode a performative/composite field list as list8/list32 (never list0: the SDK indexes it)."""
    body = bytearray()
    for item in fields:
        encode(item, body)
    _compound(0xC0, 0xD0, len(fields), body, out)
    return out
