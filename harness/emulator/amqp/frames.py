"""AMQP frame layer: incremental reader over a byte stream, and frame writers.

The reader validates each header (size, data offset, frame type, the negotiated maximum size) before buffering the
body, so an oversize or garbage header is refused at once instead of making the server wait for or hold
megabytes from a hostile peer.
"""

from __future__ import annotations

import struct

from .performatives import ProtocolError

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
TYPE_AMQP = 0
TYPE_SASL = 1
HEARTBEAT = b"\x00\x00\x00\x08\x02\x00\x00\x00"

_head = struct.Struct(">IBBH")
_pack_head = _head.pack


class FrameReader:
    """Feed bytes in, get ``("header", b"AMQP....")`` or ``(frame_type, channel, body)`` tuples out.

    ``expect_header`` is set when the next thing on the wire is an 8-byte protocol header (start, and after
    SASL); ``one_at_a_time`` makes ``feed`` stop after each frame (negotiation). ``max_frame_size`` may be raised after open negotiation.
    """

    __slots__ = ("buf", "expect_header", "max_frame_size", "allowed_types", "one_at_a_time")

    def __init__(self, max_frame_size: int = 65536) -> None:
        self.buf = bytearray()
        self.expect_header = True
        self.max_frame_size = max_frame_size
        self.allowed_types = (TYPE_AMQP, TYPE_SASL)
        # During negotiation each frame may change what comes next (e.g. a header after sasl-outcome),
        # so the caller gets frames one by one until the connection is open.
        self.one_at_a_time = True

    def feed(self, data: bytes) -> list:
        buf = self.buf
        buf += data
        out = []
        pos = 0
        n = len(buf)
        try:
            while True:
                if self.expect_header:
                    if n - pos < 8:
                        break
                    header = bytes(buf[pos : pos + 8])
                    pos += 8
                    self.expect_header = False
                    out.append(("header", header))
                    # the consumer decides what follows a header (another header after SASL)
                    break
                if n - pos < 8:
                    break
                size, doff, ftype, channel = _head.unpack_from(buf, pos)
                if size < 8 or size > self.max_frame_size:
                    raise ProtocolError(
                        "amqp:connection:framing-error", f"frame size {size} outside 8..{self.max_frame_size}"
                    )
                if doff < 2 or doff * 4 > size:
                    raise ProtocolError("amqp:connection:framing-error", f"bad data offset {doff}")
                if ftype not in self.allowed_types:
                    raise ProtocolError("amqp:connection:framing-error", f"bad frame type {ftype}")
                if n - pos < size:
                    break
                body = bytes(buf[pos + doff * 4 : pos + size])
                pos += size
                out.append((ftype, channel, body))
                if self.one_at_a_time:
                    break
        finally:
            if pos:
                del buf[:pos]
        return out

    def resume(self, data: bytes = b"") -> list:
        """Continue parsing buffered bytes (after the caller switched mode on a header)."""
        return self.feed(data)


def frame(channel: int, body: bytes | bytearray, ftype: int = TYPE_AMQP) -> bytes:
    return _pack_head(8 + len(body), 2, ftype, channel) + body
