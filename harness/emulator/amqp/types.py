"""Python values for AMQP 1.0 types that plain Python types cannot tell apart.

A plain ``int`` is an AMQP ``long``, ``float`` a ``double``, ``str`` a ``string``, ``bytes`` a ``binary``.
The wrappers below carry the other encodings (uint, ulong, symbol, timestamp, ...) so that values decoded
from the wire re-encode with the same type, which the SDK relies on for some fields (e.g. handles are uint).
"""

from __future__ import annotations


class Symbol(str):
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Char(str):
    """A single unicode code point (AMQP char, utf32)."""

    __slots__ = ()


class _TypedInt(int):
    __slots__ = ()
    lo = 0
    hi = 0

    def __new__(cls, value: int = 0):
        value = int(value)
        if not cls.lo <= value <= cls.hi:
            raise ValueError(f"{cls.__name__} out of range: {value}")
        return int.__new__(cls, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_TypedInt):
    __slots__ = ()
    lo, hi = 0, 0xFF


class UShort(_TypedInt):
    __slots__ = ()
    lo, hi = 0, 0xFFFF


class UInt(_TypedInt):
    __slots__ = ()
    lo, hi = 0, 0xFFFFFFFF


class ULong(_TypedInt):
    __slots__ = ()
    lo, hi = 0, 0xFFFFFFFFFFFFFFFF


class Byte(_TypedInt):
    __slots__ = ()
    lo, hi = -0x80, 0x7F


class Short(_TypedInt):
    __slots__ = ()
    lo, hi = -0x8000, 0x7FFF


class Int(_TypedInt):
    __slots__ = ()
    lo, hi = -0x80000000, 0x7FFFFFFF


class Timestamp(_TypedInt):
    """Milliseconds since the Unix epoch (signed 64-bit)."""

    __slots__ = ()
    lo, hi = -0x8000000000000000, 0x7FFFFFFFFFFFFFFF


class Float(float):
    """IEEE 754 single precision (AMQP float); plain float is a double."""

    __slots__ = ()


class Decimal32(bytes):
    """Opaque 4-byte decimal32 (kept raw: nothing in Event Hubs uses it)."""


class Decimal64(bytes):
    """Opaque 8-byte decimal64."""


class Decimal128(bytes):
    """Opaque 16-byte decimal128."""


class Described:
    """A described value: descriptor (ULong code or Symbol name) plus the value."""

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor, value) -> None:
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Described)
            and type(self.descriptor) is type(other.descriptor)
            and self.descriptor == other.descriptor
            and self.value == other.value
        )

    def __hash__(self) -> int:
        return hash((self.descriptor, repr(self.value)))

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


class Array(list):
    """Homogeneous AMQP array. ``elem`` is the element type (a class from this module or a builtin)."""

    def __init__(self, elem: type, items=()) -> None:
        super().__init__(items)
        self.elem = elem

    def __eq__(self, other) -> bool:
        return isinstance(other, Array) and self.elem is other.elem and list.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Array({self.elem.__name__}, {list.__repr__(self)})"
