"""A raw Kafka-protocol peer for the hostile-input tests: requests encoded by hand from the protocol guide
(kafka.apache.org/protocol: "Common Request and Response Structure", ApiVersions, SaslHandshake,
SaslAuthenticate, Metadata), independent of the emulator's own wire module, so a test can send exactly the bytes
it means, well-formed or not.
"""

from __future__ import annotations

import socket
import struct

FETCH, API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 1, 18, 3, 17, 36


def header_v1(api_key: int, version: int, correlation_id: int, client_id: str = "raw") -> bytes:
    """Request header v1: api_key int16, api_version int16, correlation_id int32, client_id (int16 string)."""
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid


def header_v2(api_key: int, version: int, correlation_id: int, client_id: str = "raw") -> bytes:
    """Request header v2 (flexible versions): v1 plus an empty tagged-field section."""
    return header_v1(api_key, version, correlation_id, client_id) + b"\x00"


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions_v0(correlation_id: int = 1, version: int = 0) -> bytes:
    return framed(header_v1(API_VERSIONS, version, correlation_id))  # v0-v2: an empty body


def sasl_handshake_v1(correlation_id: int, mechanism: str = "PLAIN") -> bytes:
    m = mechanism.encode()
    return framed(header_v1(SASL_HANDSHAKE, 1, correlation_id) + struct.pack(">h", len(m)) + m)


def sasl_authenticate_v0(correlation_id: int, user: str, password: str) -> bytes:
    """SASL PLAIN (RFC 4616): authzid NUL authcid NUL passwd, as SaslAuthenticate's auth_bytes (int32 bytes)."""
    token = b"\x00" + user.encode() + b"\x00" + password.encode()
    return framed(header_v1(SASL_AUTHENTICATE, 0, correlation_id) + struct.pack(">i", len(token)) + token)


def metadata(correlation_id: int, version: int) -> bytes:
    """A Metadata request for all topics at ``version`` (4-8: classic encoding; 9-12: flexible)."""
    if 4 <= version <= 8:
        body = struct.pack(">i", -1) + b"\x00"  # topics: null array = all; allow_auto_topic_creation false
        if version >= 8:
            body += b"\x00\x00"  # include_cluster/topic_authorized_operations
        return framed(header_v1(METADATA, version, correlation_id) + body)
    if 9 <= version <= 12:
        body = b"\x00" + b"\x00"  # topics: compact null array (length+1 = 0); allow_auto_topic_creation
        if version <= 10:
            body += b"\x00"  # include_cluster_authorized_operations (v8-v10)
        body += b"\x00" + b"\x00"  # include_topic_authorized_operations; tagged fields
        return framed(header_v2(METADATA, version, correlation_id) + body)
    raise ValueError(f"no hand encoding for Metadata v{version}")


def fetch_v4(correlation_id: int, topic: str, partition: int, offset: int, max_bytes: int,
             max_wait_ms: int = 0) -> bytes:
    """Fetch v4 of one partition from ``offset``: replica_id -1, max_wait_ms, min_bytes 1, max_bytes,
    isolation_level 0, then [topic, [partition, fetch_offset int64, partition_max_bytes]] (the protocol guide)."""
    t = topic.encode()
    body = struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, 0)
    body += struct.pack(">ih", 1, len(t)) + t + struct.pack(">iiqi", 1, partition, offset, max_bytes)
    return framed(header_v1(FETCH, 4, correlation_id) + body)


def read_response(sock: socket.socket, timeout: float = 5.0) -> bytes | None:
    """One response frame's payload (starting with the correlation id), or None when the peer closed first."""
    sock.settimeout(timeout)
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read_exact(sock, size)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closes (EOF or reset) within ``timeout`` and sent nothing before it."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    if data:
        return False
    return True


def parse_api_versions_v0(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation_id, error_code, {api_key: (min, max)}) of an ApiVersions v0 response."""
    corr, err, n = struct.unpack_from(">ihi", payload, 0)
    apis = {}
    pos = 10
    for _ in range(max(n, 0)):
        key, lo, hi = struct.unpack_from(">hhh", payload, pos)
        apis[key] = (lo, hi)
        pos += 6
    return corr, err, apis


def parse_sasl_handshake_v1(payload: bytes) -> tuple[int, int, list[str]]:
    corr, err, n = struct.unpack_from(">ihi", payload, 0)
    pos, mechs = 10, []
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">h", payload, pos)
        mechs.append(payload[pos + 2: pos + 2 + ln].decode())
        pos += 2 + ln
    return corr, err, mechs


def parse_sasl_authenticate_v0(payload: bytes) -> tuple[int, int, str | None]:
    corr, err, ln = struct.unpack_from(">ihh", payload, 0)
    msg = None if ln < 0 else payload[8: 8 + ln].decode()
    return corr, err, msg


def connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    """A loopback connection; ``rcvbuf`` sets a small receive buffer first, so a peer that does not read leaves
    what it is sent in the sender's buffers rather than in its own kernel's."""
    if rcvbuf is None:
        return socket.create_connection(("127.0.0.1", port), timeout=5)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def authenticated(port: int, password: str, user: str = "$ConnectionString",
                  rcvbuf: int | None = None) -> tuple[socket.socket, dict]:
    """A raw connection past ApiVersions, SaslHandshake (PLAIN) and SaslAuthenticate; with the versions the
    endpoint offered."""
    s = connect(port, rcvbuf)
    s.sendall(api_versions_v0(1))
    corr, err, apis = parse_api_versions_v0(read_response(s))
    assert (corr, err) == (1, 0)
    s.sendall(sasl_handshake_v1(2))
    corr, err, mechs = parse_sasl_handshake_v1(read_response(s))
    assert (corr, err) == (2, 0) and "PLAIN" in mechs, (corr, err, mechs)
    s.sendall(sasl_authenticate_v0(3, user, password))
    corr, err, msg = parse_sasl_authenticate_v0(read_response(s))
    assert (corr, err) == (3, 0), (err, msg)
    return s, apis


def metadata_version(apis: dict[int, tuple[int, int]]) -> int:
    """A Metadata version both the endpoint and this file's hand encoding know (the lowest from 4 on)."""
    lo, hi = apis[METADATA]
    for v in range(max(lo, 4), min(hi, 12) + 1):
        return v
    raise AssertionError(f"the endpoint offers Metadata v{lo}-v{hi}; the hand encoding knows v4-v12")
