"""AMQP over WebSockets (RFC 6455, subprotocol ``AMQPWSB10``) on asyncio, for ``TransportType.AmqpOverWebsocket``.

The SDK dials ``ws[s]://<host>:<port>/$servicebus/websocket`` (port 443 unless ``custom_endpoint_address`` gives
one) and then speaks plain AMQP inside binary messages, so this layer only turns frames into a byte stream and
back: ``WebSocketAmqp`` does the opening handshake, unmasks client frames, answers ping and close, and hands the
bytes to an ordinary AMQP protocol object through ``FramedTransport``, which frames what that protocol writes.
Anything that breaks RFC 6455 closes the socket with the matching close code (1002 protocol error, 1003
unsupported data, 1009 too big), never the server. A connection that opens with an AMQP protocol header instead of
an HTTP request is served as plain AMQP (see ``data_received``). Bytes of an unfinished WebSocket frame count
towards the emulator's budget for incomplete frames (``outer_buffered`` of the AMQP connection).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import struct

log = logging.getLogger(__name__)

PATH = "/$servicebus/websocket"
SUBPROTOCOL = "AMQPWSB10"
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_REQUEST_BYTES = 16 * 1024
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # above the largest AMQP frame the emulator accepts
HANDSHAKE_TIMEOUT_S = 10.0

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CLOSE_NORMAL, CLOSE_PROTOCOL, CLOSE_UNSUPPORTED, CLOSE_TOO_BIG = 1000, 1002, 1003, 1009


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a client's ``Sec-WebSocket-Key`` (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")


def unmask(payload: bytes, mask: bytes) -> bytes:
    """XOR ``payload`` with the repeated 4-byte ``mask``; one big-integer XOR keeps it linear and fast."""
    n = len(payload)
    if not n:
        return b""
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")


def frame(opcode: int, payload: bytes = b"") -> bytes:
    """One final, unmasked (server-to-client) frame."""
    n = len(payload)
    first = 0x80 | opcode
    if n < 126:
        head = bytes((first, n))
    elif n < 65536:
        head = struct.pack(">BBH", first, 126, n)
    else:
        head = struct.pack(">BBQ", first, 127, n)
    return head + payload


class _HandshakeError(Exception):
    def __init__(self, status: str, reason: str, extra: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.extra = extra


def _parse_request(raw: bytes) -> tuple[str, dict[str, str]]:
    """(path, lower-cased headers) of a valid opening handshake, else _HandshakeError with the HTTP answer."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _HandshakeError("400 Bad Request", "not an HTTP/1.1 request line")
    method, target = parts[0], parts[1]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise _HandshakeError("400 Bad Request", f"malformed header line {line[:60]!r}")
        name = name.strip().lower()
        headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
    if method != "GET":
        raise _HandshakeError("405 Method Not Allowed", "the WebSocket handshake is a GET", "Allow: GET\r\n")
    path = target.split("?", 1)[0]
    if path != PATH:
        raise _HandshakeError("404 Not Found", f"AMQP over WebSockets is served at {PATH}, not {path}")
    if "host" not in headers:
        raise _HandshakeError("400 Bad Request", "missing Host header")
    if headers.get("upgrade", "").lower() != "websocket":
        raise _HandshakeError("426 Upgrade Required", "Upgrade: websocket is required", "Upgrade: websocket\r\n")
    if "upgrade" not in [t.strip().lower() for t in headers.get("connection", "").split(",")]:
        raise _HandshakeError("400 Bad Request", "Connection: Upgrade is required")
    if headers.get("sec-websocket-version") != "13":
        raise _HandshakeError("426 Upgrade Required", "only WebSocket version 13 is supported",
                              "Sec-WebSocket-Version: 13\r\n")
    key = headers.get("sec-websocket-key", "")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except ValueError:
        raise _HandshakeError("400 Bad Request", "Sec-WebSocket-Key must be 16 base64-encoded bytes") from None
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    if SUBPROTOCOL not in offered:
        raise _HandshakeError("400 Bad Request", f"the WebSocket subprotocol {SUBPROTOCOL} is required")
    return path, headers


class FramedTransport(asyncio.Transport):
    """What the inner AMQP protocol writes to: each write becomes one binary WebSocket message."""

    def __init__(self, ws: "WebSocketAmqp") -> None:
        super().__init__()
        self._ws = ws

    def write(self, data) -> None:
        if data and not self.is_closing():
            self._ws.send(OP_BINARY, bytes(data))

    def writelines(self, chunks) -> None:
        self.write(b"".join(chunks))

    def is_closing(self) -> bool:
        return self._ws.closing or self._ws.transport is None or self._ws.transport.is_closing()

    def close(self) -> None:
        self._ws.close(CLOSE_NORMAL)

    def abort(self) -> None:
        if self._ws.transport is not None:
            self._ws.transport.abort()

    def get_extra_info(self, name, default=None):
        return self._ws.transport.get_extra_info(name, default) if self._ws.transport is not None else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        self._ws.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._ws.transport.get_write_buffer_size()

    def pause_reading(self) -> None:
        self._ws.transport.pause_reading()

    def resume_reading(self) -> None:
        self._ws.transport.resume_reading()

    def is_reading(self) -> bool:
        return self._ws.transport.is_reading()

    def can_write_eof(self) -> bool:
        return False


class WebSocketAmqp(asyncio.Protocol):
    """Server side of one WebSocket connection whose messages carry the byte stream of ``inner_factory()``."""

    def __init__(self, inner_factory, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.inner_factory = inner_factory
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.state = "handshake"  # handshake -> open -> closed, or handshake -> raw (plain AMQP, no WebSocket)
        self.closing = False
        self._fragmented = False  # a data message is being continued
        self._timer: asyncio.TimerHandle | None = None
        self._loop = loop

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        loop = self._loop or asyncio.get_running_loop()
        self._timer = loop.call_later(HANDSHAKE_TIMEOUT_S, self._handshake_deadline)

    def connection_lost(self, exc) -> None:
        self.state = "closed"
        if self._timer is not None:
            self._timer.cancel()
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def data_received(self, data: bytes) -> None:
        if self.state == "raw":
            self.inner.data_received(data)
            return
        if self.state == "closed" or self.closing:
            return
        self.buf += data
        if self.state == "handshake" and len(self.buf) >= 4 and self.buf[:4] == b"AMQP":
            # A protocol header instead of an HTTP request: the SDK's management client dials plain AMQP to a
            # custom_endpoint_address port when transport_type is not given, so serve that too.
            self.state = "raw"
            if self._timer is not None:
                self._timer.cancel()
            self.inner = self.inner_factory()
            self.inner.connection_made(self.transport)
            data, self.buf = bytes(self.buf), bytearray()
            self.inner.data_received(data)
            return
        if self.state == "handshake":
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_REQUEST_BYTES:
                    self._refuse(_HandshakeError("431 Request Header Fields Too Large", "handshake too large"))
                return
            raw = bytes(self.buf[:end])
            del self.buf[: end + 4]
            try:
                key = _parse_request(raw)[1]["sec-websocket-key"]
            except _HandshakeError as exc:
                self._refuse(exc)
                return
            self.transport.write((
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept_key(key)}\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n"
            ).encode("ascii"))
            self.state = "open"
            if self._timer is not None:
                self._timer.cancel()
            self.inner = self.inner_factory()
            self.inner.connection_made(FramedTransport(self))
        self._read_frames()
        self._report_buffered()

    def _report_buffered(self) -> None:
        report = getattr(self.inner, "outer_buffered", None)  # an unfinished WebSocket frame counts as one
        if report is not None and not self.closing:
            report(len(self.buf))

    # ------------------------------------------------------------------ frames
    def _read_frames(self) -> None:
        buf = self.buf
        while self.state == "open" and not self.closing:
            if len(buf) < 2:
                return
            b0, b1 = buf[0], buf[1]
            opcode, fin, length = b0 & 0x0F, bool(b0 & 0x80), b1 & 0x7F
            pos = 2
            if b0 & 0x70:
                return self.close(CLOSE_PROTOCOL, "reserved bits set without a negotiated extension")
            if not b1 & 0x80:
                return self.close(CLOSE_PROTOCOL, "client frames must be masked")
            if length == 126:
                if len(buf) < 4:
                    return
                length = struct.unpack_from(">H", buf, 2)[0]
                pos = 4
            elif length == 127:
                if len(buf) < 10:
                    return
                length = struct.unpack_from(">Q", buf, 2)[0]
                pos = 10
            if opcode >= OP_CLOSE and (length > 125 or not fin):
                return self.close(CLOSE_PROTOCOL, "control frames must be final and at most 125 bytes")
            if length > MAX_MESSAGE_BYTES:
                return self.close(CLOSE_TOO_BIG, f"frame of {length} bytes exceeds {MAX_MESSAGE_BYTES}")
            if len(buf) < pos + 4 + length:
                return
            mask = bytes(buf[pos : pos + 4])
            payload = unmask(bytes(buf[pos + 4 : pos + 4 + length]), mask)
            del buf[: pos + 4 + length]
            if length > 65536:
                self._report_buffered()  # the frame's bytes move to the AMQP reader: not counted twice
            self._on_frame(opcode, fin, payload)

    def _on_frame(self, opcode: int, fin: bool, payload: bytes) -> None:
        if opcode == OP_BINARY or opcode == OP_CONT:
            if (opcode == OP_CONT) != self._fragmented:
                return self.close(CLOSE_PROTOCOL, "unexpected continuation frame" if opcode == OP_CONT
                                  else "new message before the fragmented one ended")
            self._fragmented = not fin
            if payload:
                self.inner.data_received(payload)
        elif opcode == OP_TEXT:
            self.close(CLOSE_UNSUPPORTED, "AMQP travels in binary messages only")
        elif opcode == OP_PING:
            self.send(OP_PONG, payload)
        elif opcode == OP_PONG:
            pass
        elif opcode == OP_CLOSE:
            code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else CLOSE_NORMAL
            self.close(code if 1000 <= code < 5000 and code not in (1005, 1006, 1015) else CLOSE_PROTOCOL)
        else:
            self.close(CLOSE_PROTOCOL, f"unknown opcode 0x{opcode:x}")

    # ------------------------------------------------------------------ output
    def send(self, opcode: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing() and not self.closing:
            self.transport.write(frame(opcode, payload))

    def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        """Send a close frame (once) and end the TCP connection after what is buffered."""
        if self.closing or self.transport is None:
            return
        if code != CLOSE_NORMAL:
            log.info("websocket %s closed with %d: %s", self.transport.get_extra_info("peername"), code, reason)
        self.send(OP_CLOSE, struct.pack(">H", code) + reason.encode("utf-8")[:120])
        self.closing = True
        self.buf = bytearray()  # nothing more is read: let an unfinished frame go now
        self.transport.close()

    def _refuse(self, exc: _HandshakeError) -> None:
        body = (exc.reason + "\n").encode("utf-8")
        self.transport.write((
            f"HTTP/1.1 {exc.status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            f"{exc.extra}Connection: close\r\n\r\n"
        ).encode("latin-1") + body)
        self.state = "closed"
        self.transport.close()

    def _handshake_deadline(self) -> None:
        if self.state == "handshake" and self.transport is not None:
            self.transport.abort()

