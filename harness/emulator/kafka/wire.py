"""Kafka's primitive wire types (the protocol guide's "Protocol Primitive Types"), read and written with struct.

Why hand-rolled: the endpoint needs only a few dozen message shapes, and a schema compiler would be more code than
the shapes themselves. Every fixed-width value is one ``struct.unpack_from``/``pack`` call; the only loops are over
the bytes of a varint (at most 10) and over array elements, so no per-byte Python loop touches record data.

``flex`` arguments: from an API's first *flexible* version on, strings, bytes and arrays carry unsigned-varint
lengths plus one (0 = null) and every structure ends with a tagged-field section (KIP-482); the shorthands
``str``/``nstr``/``bytes_v``/``arr``/``tags`` pick the right encoding so a handler is written once for all versions.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from dataclasses import dataclass
from typing import Awaitable, Callable

_I8, _I16, _I32, _I64, _U32, _F64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q", ">I", ">d"))
_U16 = struct.Struct(">H")
NULL_UUID = b"\x00" * 16
# Elements in one array of a request (topics, partitions, group ids ...): a namespace holds at most 1,000 hubs of at
# most 2,000 partitions (Event Hubs' largest tiers), and no client lists more in one array; each element costs
# work and a reply entry, so a few MB naming millions of topics would otherwise freeze the loop and cost GBs.
MAX_ARRAY = 10_000


class ProtocolError(Exception):
    """A malformed request: the server closes the connection, as a Kafka broker does."""


@dataclass(frozen=True)
class Api:
    """One API the endpoint serves: its key, the versions it accepts and the coroutine that answers it.

    ``handler(session, version, reader)`` returns the response BODY; the server adds the size and response header
    (v1, with tagged fields, when ``version >= flexible_from`` -- except ApiVersions, whose response header is
    always v0 so that a client can read it before it knows our versions). ``before_auth``: allowed before SASL
    completes (ApiVersions, SaslHandshake, SaslAuthenticate only).
    """

    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    handler: Callable[..., Awaitable[bytes]]
    before_auth: bool = False

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


class Reader:
    """Sequential reader over one request body; every read past the end raises ProtocolError."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def _fixed(self, st: struct.Struct):
        pos = self.pos
        if pos + st.size > self.end:
            raise ProtocolError(f"request truncated: {st.size} more bytes wanted at {pos} of {self.end}")
        self.pos = pos + st.size
        return st.unpack_from(self.buf, pos)[0]

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def float64(self) -> float:
        return self._fixed(_F64)

    def boolean(self) -> bool:
        return self._fixed(_I8) != 0

    def uvarint(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        value = shift = 0
        while True:
            if pos >= end:
                raise ProtocolError("request truncated inside a varint")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ProtocolError("varint longer than 10 bytes")
        self.pos = pos
        return value

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    varlong = varint

    def uuid(self) -> bytes:
        return self._take(16)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ProtocolError(f"request truncated: {n} bytes wanted at {self.pos} of {self.end}")
        start = self.pos
        self.pos = start + n
        return bytes(self.buf[start:self.pos])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolError("null where a string is required")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise ProtocolError("null where a string is required")
        return self._text(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._text(n)

    def _text(self, n: int) -> str:
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("string is not UTF-8") from None

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise ProtocolError("null where bytes are required")
        return self._take(n)

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self._take(n)

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise ProtocolError("null where bytes are required")
        return self._take(n)

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n)

    def _count(self, n: int) -> int:
        if n > self.end - self.pos:  # every element takes at least one byte: refuse absurd counts at once
            raise ProtocolError(f"array of {n} elements in {self.end - self.pos} remaining bytes")
        if n > MAX_ARRAY:  # each element asks for work and a reply entry: a small request, a huge reply
            raise ProtocolError(f"array of {n:,} elements, more than the {MAX_ARRAY:,} a request may hold")
        return n

    def array(self, fn) -> list | None:
        n = self.int32()
        if n < 0:
            return None
        return [fn(self) for _ in range(self._count(n))]

    def compact_array(self, fn) -> list | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return [fn(self) for _ in range(self._count(n))]

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self._count(self.uvarint())):
            tag = self.uvarint()
            fields[tag] = self._take(self.uvarint())
        return fields

    def remaining(self) -> int:
        return self.end - self.pos

    # flexible-aware shorthands
    def str(self, flex: bool) -> str:
        return self.compact_string() if flex else self.string()

    def nstr(self, flex: bool) -> str | None:
        return self.compact_nullable_string() if flex else self.nullable_string()

    def bytes_v(self, flex: bool) -> bytes | None:
        return self.compact_nullable_bytes() if flex else self.nullable_bytes()

    def arr(self, fn, flex: bool) -> list | None:
        return self.compact_array(fn) if flex else self.array(fn)

    def tags(self, flex: bool) -> None:
        if flex:
            self.tagged_fields()


def uvarint_bytes(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class Writer:
    """Builds a response body as a list of parts joined once by ``getvalue``; every method returns self."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, data: bytes) -> "Writer":
        self.parts.append(data)
        return self

    def int8(self, v: int) -> "Writer":
        self.parts.append(_I8.pack(v))
        return self

    def int16(self, v: int) -> "Writer":
        self.parts.append(_I16.pack(v))
        return self

    def int32(self, v: int) -> "Writer":
        self.parts.append(_I32.pack(v))
        return self

    def int64(self, v: int) -> "Writer":
        self.parts.append(_I64.pack(v))
        return self

    def uint32(self, v: int) -> "Writer":
        self.parts.append(_U32.pack(v))
        return self

    def boolean(self, v: bool) -> "Writer":
        self.parts.append(b"\x01" if v else b"\x00")
        return self

    def uvarint(self, v: int) -> "Writer":
        self.parts.append(uvarint_bytes(v))
        return self

    def varint(self, v: int) -> "Writer":
        self.parts.append(uvarint_bytes((v << 1) ^ (v >> 63)))
        return self

    varlong = varint

    def uuid(self, v: bytes | _uuid.UUID | None) -> "Writer":
        if isinstance(v, _uuid.UUID):
            v = v.bytes
        self.parts.append(NULL_UUID if v is None else bytes(v))
        return self

    def string(self, s: str) -> "Writer":
        data = s.encode("utf-8")
        self.parts.append(_I16.pack(len(data)))
        self.parts.append(data)
        return self

    def nullable_string(self, s: str | None) -> "Writer":
        if s is None:
            self.parts.append(b"\xff\xff")
            return self
        return self.string(s)

    def compact_string(self, s: str) -> "Writer":
        data = s.encode("utf-8")
        self.parts.append(uvarint_bytes(len(data) + 1))
        self.parts.append(data)
        return self

    def compact_nullable_string(self, s: str | None) -> "Writer":
        if s is None:
            self.parts.append(b"\x00")
            return self
        return self.compact_string(s)

    def bytes_(self, b: bytes) -> "Writer":
        self.parts.append(_I32.pack(len(b)))
        self.parts.append(b)
        return self

    def nullable_bytes(self, b: bytes | None) -> "Writer":
        if b is None:
            self.parts.append(b"\xff\xff\xff\xff")
            return self
        return self.bytes_(b)

    def compact_bytes(self, b: bytes) -> "Writer":
        self.parts.append(uvarint_bytes(len(b) + 1))
        self.parts.append(b)
        return self

    def compact_nullable_bytes(self, b: bytes | None) -> "Writer":
        if b is None:
            self.parts.append(b"\x00")
            return self
        return self.compact_bytes(b)

    def array(self, items, fn) -> "Writer":
        if items is None:
            self.parts.append(b"\xff\xff\xff\xff")
            return self
        self.parts.append(_I32.pack(len(items)))
        for item in items:
            fn(self, item)
        return self

    def compact_array(self, items, fn) -> "Writer":
        if items is None:
            self.parts.append(b"\x00")
            return self
        self.parts.append(uvarint_bytes(len(items) + 1))
        for item in items:
            fn(self, item)
        return self

    def tagged_fields(self, fields: dict[int, bytes] | None = None) -> "Writer":
        if not fields:
            self.parts.append(b"\x00")
            return self
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag).uvarint(len(fields[tag])).raw(fields[tag])
        return self

    # flexible-aware shorthands
    def str(self, s: str, flex: bool) -> "Writer":
        return self.compact_string(s) if flex else self.string(s)

    def nstr(self, s: str | None, flex: bool) -> "Writer":
        return self.compact_nullable_string(s) if flex else self.nullable_string(s)

    def bytes_v(self, b: bytes | None, flex: bool) -> "Writer":
        return self.compact_nullable_bytes(b) if flex else self.nullable_bytes(b)

    def arr(self, items, fn, flex: bool) -> "Writer":
        return self.compact_array(items, fn) if flex else self.array(items, fn)

    def tags(self, flex: bool) -> "Writer":
        if flex:
            self.parts.append(b"\x00")
        return self

    def getvalue(self) -> bytes:
        return b"".join(self.parts)
