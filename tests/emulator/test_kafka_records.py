"""Kafka record batches v2 (harness/emulator/kafka/records.py) against independent sources.

- CRC32C: the published vectors of RFC 3720 appendix B.4 (iSCSI) and the catalogue check value of "123456789".
- Batches: bytes a real client wrote. A minimal fake broker here (Kafka's wire format written by hand with struct
  from the protocol guide, not the emulator's wire module) answers ApiVersions and Metadata so that librdkafka
  (confluent-kafka) sends it Produce requests; the test keeps the record bytes of each request. What decode gives
  is compared with what the test handed the client; what encode gives is compared byte for byte with what the
  client wrote for the same records.
"""

from __future__ import annotations

import gzip
import socket
import struct
import threading

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.emulator.kafka.errors as E
from harness.emulator.kafka import records as R

# ------------------------------------------------------------------------------------------ CRC32C vectors


@pytest.mark.parametrize(
    "data, crc",
    [
        (b"\x00" * 32, 0x8A9136AA),  # RFC 3720 B.4: 32 bytes of zeroes -> aa 36 91 8a (little-endian on the wire)
        (b"\xff" * 32, 0x62A8AB43),  # 32 bytes of ones
        (bytes(range(32)), 0x46DD794E),  # 32 incrementing bytes
        (bytes(range(31, -1, -1)), 0x113FDB5C),  # 32 decrementing bytes
        (b"123456789", 0xE3069283),  # the CRC catalogue's check value for CRC-32C
    ],
)
def test_crc32c_published_vectors(data, crc):
    assert R.crc32c(data) == crc


# ------------------------------------------------------------------------------------------ a fake broker


class _FakeBroker:
    """Just enough of a broker for librdkafka to send Produce: ApiVersions (any version), Metadata v1 (one topic,
    one partition led by node 0 = this socket) and Produce v3-v7 (answered as accepted at offset 0). Keeps the
    ``records`` bytes of every Produce partition in ``captured``."""

    TOPIC = "t"

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.captured: list[bytes] = []
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self.stopped = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def close(self) -> None:
        self.stopped = True
        for c in [self.sock, *self.conns]:  # shutdown, not just close: it wakes a thread blocked in accept/recv
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self.acceptor.join(5)
        for t in self.threads:
            t.join(5)

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    @staticmethod
    def _read(conn, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def _serve(self, conn) -> None:
        try:
            while True:
                size = struct.unpack(">i", self._read(conn, 4))[0]
                req = self._read(conn, size)
                key, version, corr = struct.unpack_from(">hhi", req)
                clen = struct.unpack_from(">h", req, 8)[0]
                pos = 10 + max(clen, 0)
                if key == 18:
                    body = self._api_versions(version)
                elif key == 3:
                    body = self._metadata()
                elif key == 0:
                    body = self._produce(req, pos)
                else:
                    return
                resp = struct.pack(">i", corr) + body
                conn.sendall(struct.pack(">i", len(resp)) + resp)
        except (EOFError, OSError):
            return
        finally:
            conn.close()

    @staticmethod
    def _api_versions(version: int) -> bytes:
        # Produce, Metadata, ApiVersions, and APIs a producer never sends here that librdkafka still wants listed
        # before it uses a format: Fetch v4+ (magic-2 batches), Fetch v10+ (zstd), FindCoordinator (lz4).
        apis = [(0, 3, 7), (1, 4, 11), (3, 1, 1), (10, 0, 0), (18, 0, 3)]
        if version >= 3:  # flexible: compact array (n+1), tagged fields after each entry and at the end
            body = struct.pack(">h", 0) + bytes((len(apis) + 1,))
            body += b"".join(struct.pack(">hhh", *a) + b"\x00" for a in apis)
            return body + struct.pack(">i", 0) + b"\x00"
        body = struct.pack(">hi", 0, len(apis)) + b"".join(struct.pack(">hhh", *a) for a in apis)
        return body + (struct.pack(">i", 0) if version >= 1 else b"")

    def _metadata(self) -> bytes:
        host = b"127.0.0.1"
        topic = self.TOPIC.encode()
        brokers = struct.pack(">ii", 1, 0) + struct.pack(">h", len(host)) + host + struct.pack(">ih", self.port, -1)
        part = struct.pack(">hii", 0, 0, 0) + struct.pack(">ii", 1, 0) + struct.pack(">ii", 1, 0)
        topics = struct.pack(">i", 1) + struct.pack(">hh", 0, len(topic)) + topic + b"\x00" + struct.pack(">i", 1)
        return brokers + struct.pack(">i", 0) + topics + part

    def _produce(self, req: bytes, pos: int) -> bytes:
        tlen = struct.unpack_from(">h", req, pos)[0]
        pos += 2 + max(tlen, 0) + 2 + 4  # transactional id, acks, timeout
        out_topics = []
        for _ in range(struct.unpack_from(">i", req, pos)[0]):
            pos += 4
            nlen = struct.unpack_from(">h", req, pos)[0]
            name = req[pos + 2:pos + 2 + nlen]
            pos += 2 + nlen
            parts = []
            for _ in range(struct.unpack_from(">i", req, pos)[0]):
                pos += 4
                index, rlen = struct.unpack_from(">ii", req, pos)
                pos += 8
                self.captured.append(req[pos:pos + rlen])
                pos += rlen
                parts.append(struct.pack(">ihqqq", index, 0, 0, -1, 0))
            out_topics.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts)) + b"".join(parts))
        return struct.pack(">i", len(out_topics)) + b"".join(out_topics) + struct.pack(">i", 0)


SENT = [
    dict(key=b"k0", value=b"v" * 100, headers=[("h1", b"one"), ("empty", b""), ("null", None)],
         timestamp=1_700_000_000_000),
    dict(key=None, value=b"no key", headers=None, timestamp=1_700_000_000_005),
    dict(key=b"k2", value=None, headers=[("x", b"\x00\xff")], timestamp=1_699_999_999_990),  # an earlier timestamp
    dict(key="ünïcode".encode(), value=bytes(range(256)) * 8, headers=None, timestamp=1_700_000_000_100),
]


def _capture(compression: str) -> list[bytes]:
    """What librdkafka sends for SENT in one batch with ``compression``."""
    broker = _FakeBroker()
    reports = []
    try:
        p = Producer({
            "bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 200, "compression.type": compression,
            "enable.idempotence": False, "acks": 1, "message.timeout.ms": 10000,
        })
        for rec in SENT:
            p.produce(_FakeBroker.TOPIC, partition=0, on_delivery=lambda err, msg: reports.append(err), **rec)
        assert p.flush(15) == 0
    finally:
        broker.close()
    assert reports == [None] * len(SENT)
    return broker.captured


@pytest.fixture(scope="module")
def plain_batch() -> bytes:
    captured = _capture("none")
    assert len(captured) == 1
    return captured[0]


def _expected_headers(rec) -> tuple:
    return tuple((k, v) for k, v in (rec["headers"] or ()))


def _check_decoded(batch: R.RecordBatch) -> None:
    assert batch.magic == 2
    assert batch.producer_id == -1 and batch.base_sequence == -1
    assert batch.last_offset_delta == len(SENT) - 1
    assert batch.first_timestamp == SENT[0]["timestamp"]
    assert batch.max_timestamp == max(r["timestamp"] for r in SENT)
    assert batch.timestamp_type == R.CREATE_TIME and not batch.is_control and not batch.is_transactional
    got = [(r.offset_delta, batch.first_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
           for r in batch.records]
    want = [(i, r["timestamp"], r["key"], r["value"], _expected_headers(r)) for i, r in enumerate(SENT)]
    assert got == want


def test_decodes_what_librdkafka_sends(plain_batch):
    (batch,) = R.decode_batches(plain_batch)
    assert batch.compression == R.NONE
    _check_decoded(batch)


def test_encodes_the_bytes_librdkafka_writes(plain_batch):
    """Same records, same producer fields: encode_batch writes exactly the client's batch (CRC included)."""
    base_offset = struct.unpack_from(">q", plain_batch, 0)[0]
    leader_epoch = struct.unpack_from(">i", plain_batch, 12)[0]
    records = [(r["timestamp"], r["key"], r["value"], _expected_headers(r)) for r in SENT]
    assert R.encode_batch(base_offset, records, partition_leader_epoch=leader_epoch) == plain_batch


def test_decodes_librdkafka_gzip():
    (raw,) = _capture("gzip")
    (batch,) = R.decode_batches(raw)
    assert batch.compression == R.GZIP
    _check_decoded(batch)


@pytest.mark.parametrize("codec, name", [("snappy", "snappy"), ("lz4", "lz4"), ("zstd", "zstd")])
def test_codecs_the_service_does_not_take_are_refused(codec, name):
    (raw,) = _capture(codec)
    with pytest.raises(R.RecordError, match=name) as info:
        R.decode_batches(raw)
    assert info.value.error_code == E.UNSUPPORTED_COMPRESSION_TYPE


def test_gzip_encode_round_trips_through_stdlib_gzip():
    """The gzip body encode_batch writes is a gzip stream the standard library reads, holding the plain records."""
    records = [(1000 + i, b"k%d" % i, b"x" * 1024, (("h", b"v"),)) for i in range(20)]
    plain = R.encode_batch(7, records)
    zipped = R.encode_batch(7, records, compression=R.GZIP)
    assert gzip.decompress(zipped[61:]) == plain[61:]
    (batch,) = R.decode_batches(zipped)
    assert [(1000 + r.timestamp_delta, r.key, r.value, r.headers) for r in batch.records] == records


# ------------------------------------------------------------------------------------------ refusals


def _with_crc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, 17, R.crc32c(bytes(raw[21:])))
    return bytes(raw)


def test_bad_crc_is_corrupt_message(plain_batch):
    raw = bytearray(plain_batch)
    raw[-1] ^= 0x01
    with pytest.raises(R.RecordError, match="CRC32C") as info:
        R.decode_batches(bytes(raw))
    assert info.value.error_code == E.CORRUPT_MESSAGE


def test_truncated_and_overlong_batches_are_corrupt(plain_batch):
    for bad in (plain_batch[:-3], plain_batch[:40], plain_batch + b"\x00" * 5):
        with pytest.raises(R.RecordError) as info:
            R.decode_batches(bad)
        assert info.value.error_code == E.CORRUPT_MESSAGE


def test_record_count_that_disagrees_with_the_records_is_corrupt(plain_batch):
    raw = bytearray(plain_batch)
    struct.pack_into(">i", raw, 57, len(SENT) + 1)  # recordCount, covered by the CRC: recompute it
    with pytest.raises(R.RecordError) as info:
        R.decode_batches(_with_crc(raw))
    assert info.value.error_code == E.CORRUPT_MESSAGE


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_refused(plain_batch, magic):
    raw = bytearray(plain_batch)
    raw[16] = magic
    with pytest.raises(R.RecordError, match="magic") as info:
        R.decode_batches(bytes(raw))
    assert info.value.error_code == E.INVALID_RECORD


def test_gzip_bomb_is_refused_before_it_inflates():
    """64 MB of zeroes gzip to ~64 KB: the decoder stops at its bound instead of inflating them."""
    bomb = gzip.compress(b"\x00" * (64 << 20))
    covered = struct.pack(">hiqqqhii", R.GZIP, 0, 0, 0, -1, -1, -1, 1) + bomb
    head = struct.pack(">qiibI", 0, len(covered) + 9, 0, 2, R.crc32c(covered))
    with pytest.raises(R.RecordError, match="inflate") as info:
        R.decode_batches(head + covered, max_uncompressed=1 << 20)
    assert info.value.error_code == E.MESSAGE_TOO_LARGE


def test_several_batches_in_one_request(plain_batch):
    second = R.encode_batch(4, [(5, b"a", b"b", ())])
    batches = R.decode_batches(plain_batch + second)
    assert [b.base_offset for b in batches] == [0, 4]
    assert batches[1].records == [R.Record(0, 0, b"a", b"b", ())]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_bytes_only_ever_give_a_record_error(plain_batch, data):
    """Any corruption of a real batch (CRC recomputed, so the parser itself is reached) decodes or is refused with
    RecordError; nothing else escapes to the emulator."""
    raw = bytearray(plain_batch)
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    raw = raw[:cut] if data.draw(st.booleans()) else raw
    if len(raw) > 21 and data.draw(st.booleans()):
        raw = bytearray(_with_crc(raw))
    try:
        R.decode_batches(bytes(raw))
    except R.RecordError as exc:
        assert exc.error_code in (E.CORRUPT_MESSAGE, E.INVALID_RECORD, E.UNSUPPORTED_COMPRESSION_TYPE,
                                  E.MESSAGE_TOO_LARGE)
