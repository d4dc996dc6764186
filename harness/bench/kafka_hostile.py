"""``harness bench kafka-hostile``: the emulator's Kafka endpoint under a mix of hostile clients for ten minutes
(one with --quick), while well-behaved clients use it: a librdkafka producer and an azure-eventhub producer, whose
round trips are measured quiet first (the reference) and then under attack, and the emulator's resident memory,
sampled every second, minute by minute.

Why a soak and not only the tests: each hostile-client test (tests/emulator/test_kafka_hostile.py) shows one
attack bounded for seconds; state that expires (groups, offsets, producer ids), memory the allocator keeps, and
budgets shared by every connection only show over minutes of all of them at once. The emulator runs with its
default limits, except that an empty group's offsets and a producer's state expire after a minute instead of a
week and a day (Emulator.OffsetsRetentionMs, ProducerIdExpirationMs), so that their expiry happens inside the
soak; the hub the attackers write to keeps a minute of events, the one the unread fetches read keeps its 9 MB.

The attackers run in a process of their own (``python -m harness.bench.kafka_hostile PORT``, their threads would
otherwise take the GIL from the measured clients), each kind in a loop with a pause, speaking raw Kafka requests:
- bomb: a Produce of three gzip batches of 590,000 empty records each (6 KB that inflate to megabytes);
- names: a Metadata request naming 100,000 topics (a small request asking for a huge reply);
- unread: connections that ask for 8 MiB fetches and never read a byte (a small receive buffer), for 5 s each;
- groups: JoinGroups of new groups left to expire, and offset commits to new groups;
- producer-ids: InitProducerId and one idempotent batch under each new id;
- half-open: connections that send part of a request and wait; bad-login: SASL with a wrong key.

Rows: each well-behaved client's longest round trip under attack against the same client's quiet longest (goal
under a second), its p99, its failures (goal 0), and the emulator's RSS: the second half of the attack against
the first (goal: flat, within 32 MB), and after the attack against before.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from harness.files import atomic

HUB, WRITES = "soak", "soak-writes"
ROUND_TRIP_GOAL_MS = 1000.0
RSS_FLAT_MB = 32.0
EXPIRY_MS = 60_000
ATTACKS = ("bomb", "names", "unread", "groups", "producer-ids", "half-open", "bad-login")
UNREAD_CONNECTIONS = 20
HALF_OPEN_CONNECTIONS = 100
PASSWORD_ENV = "KAFKA_HOSTILE_CONNECTION_STRING"


# ---------------------------------------------------------------------------------------------- raw requests
def _frame(key: int, version: int, corr: int, body: bytes) -> bytes:
    from harness.emulator.kafka.wire import Writer

    payload = Writer().int16(key).int16(version).int32(corr).nullable_string("hostile").getvalue() + body
    return struct.pack(">i", len(payload)) + payload


class _Raw:
    """One raw Kafka connection: requests framed by hand, responses read whole (or not at all)."""

    def __init__(self, port: int, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", port))
        self.corr = itertools.count(1)

    def send(self, key: int, version: int, body: bytes) -> None:
        self.sock.sendall(_frame(key, version, next(self.corr), body))

    def call(self, key: int, version: int, body: bytes) -> bytes | None:
        """Send and read the response (None: the emulator closed the connection)."""
        self.send(key, version, body)
        head = self._exact(4)
        return None if head is None else self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def login(self, password: str) -> bool:
        from harness.emulator.kafka.wire import Writer

        if self.call(18, 0, b"") is None:  # ApiVersions v0
            return False
        if self.call(17, 1, Writer().string("PLAIN").getvalue()) is None:  # SaslHandshake v1
            return False
        token = b"\x00$ConnectionString\x00" + password.encode()
        reply = self.call(36, 0, Writer().bytes_(token).getvalue())  # SaslAuthenticate v0
        return reply is not None and struct.unpack_from(">h", reply, 4)[0] == 0

    def close(self) -> None:
        self.sock.close()


def _produce_v3(topic: str, batches: list[bytes]) -> bytes:
    from harness.emulator.kafka.wire import Writer

    return (Writer().nullable_string(None).int16(1).int32(10_000)
            .array([topic], lambda w, t: w.string(t).array(batches, lambda w2, b: w2.int32(0).bytes_(b)))
            .getvalue())


def _fetch_v4(topic: str, max_bytes: int) -> bytes:
    from harness.emulator.kafka.wire import Writer

    return (Writer().int32(-1).int32(0).int32(1).int32(max_bytes).int8(0)
            .array([topic], lambda w, t: w.string(t).array([0], lambda w2, p: w2.int32(p).int64(0).int32(max_bytes)))
            .getvalue())


# ---------------------------------------------------------------------------------------------- the attackers
class _Attackers:
    """Every attack kind in a thread of its own until `stop`; `counts` says how many times each struck."""

    def __init__(self, port: int, password: str) -> None:
        from harness.emulator.kafka import records

        self.port, self.password = port, password
        self.stop = threading.Event()
        self.counts = {kind: 0 for kind in ATTACKS}
        self.bomb = records.encode_batch(0, [(0, None, b"", ())] * 590_000, compression=records.GZIP)
        self.names = (struct.pack(">i", 100_000) + b"".join(struct.pack(">h", 20) + b"t%019d" % i
                                                            for i in range(100_000)) + b"\x00")
        self.serial = itertools.count()

    def run(self, seconds: float) -> dict:
        threads = [threading.Thread(target=self._loop, args=(kind,), daemon=True) for kind in ATTACKS]
        threads += [threading.Thread(target=self._loop, args=("unread",), daemon=True)
                    for _ in range(UNREAD_CONNECTIONS - 1)]
        for t in threads:
            t.start()
        self.stop.wait(seconds)
        self.stop.set()
        for t in threads:
            t.join(40)
        return self.counts

    def _loop(self, kind: str) -> None:
        strike = getattr(self, "_" + kind.replace("-", "_"))
        while not self.stop.is_set():
            try:
                strike()
                self.counts[kind] += 1
            except OSError:
                self.stop.wait(0.2)  # refused or dropped, as it should be: strike again

    def _authenticated(self, rcvbuf: int | None = None) -> _Raw:
        raw = _Raw(self.port, rcvbuf)
        if not raw.login(self.password):
            raw.close()
            raise ConnectionError("the sign-in was refused")
        return raw

    def _bomb(self) -> None:
        raw = self._authenticated()
        try:
            raw.call(0, 3, _produce_v3(HUB, [self.bomb] * 3))
        finally:
            raw.close()
        self.stop.wait(1.0)

    def _names(self) -> None:
        raw = self._authenticated()
        try:
            raw.call(3, 4, self.names)  # Metadata v4: topics, allow_auto_topic_creation
        finally:
            raw.close()
        self.stop.wait(1.0)

    def _unread(self) -> None:
        raw = self._authenticated(rcvbuf=4096)
        try:
            for _ in range(10):
                raw.send(1, 4, _fetch_v4(HUB, 8 * 1024 * 1024))
            self.stop.wait(5.0)
        finally:
            raw.close()

    def _groups(self) -> None:
        from harness.emulator.kafka.wire import Writer

        raw = self._authenticated()
        try:
            for _ in range(20):
                n = next(self.serial)
                raw.call(11, 1, Writer().string(f"soak-join-{n}").int32(6000).int32(6000).string("")
                         .string("consumer").array(["range"], lambda w, p: w.string(p).bytes_(b"")).getvalue())
                raw.call(8, 2, Writer().string(f"soak-commit-{n}").int32(-1).string("").int64(-1)
                         .array([HUB], lambda w, t: w.string(t).array(
                             [0], lambda w2, p: w2.int32(p).int64(0).nullable_string(None))).getvalue())
        finally:
            raw.close()
        self.stop.wait(0.5)

    def _producer_ids(self) -> None:
        from harness.emulator.kafka import records
        from harness.emulator.kafka.wire import Writer

        raw = self._authenticated()
        try:
            for _ in range(20):
                reply = raw.call(22, 0, Writer().nullable_string(None).int32(60_000).getvalue())
                if reply is None:
                    return
                pid = struct.unpack_from(">q", reply, 10)[0]  # correlation, throttle, error, then the id
                batch = records.encode_batch(0, [(int(time.time() * 1000), None, b"p" * 100, ())],
                                             producer_id=pid, producer_epoch=0, base_sequence=0)
                raw.call(0, 3, _produce_v3(WRITES, [batch]))
        finally:
            raw.close()
        self.stop.wait(0.5)

    def _half_open(self) -> None:
        socks = []
        try:
            for i in range(HALF_OPEN_CONNECTIONS):
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                s.sendall(b"\x00\x00" if i % 2 else struct.pack(">i", 50_000) + b"\x00" * 1000)
                socks.append(s)
            self.stop.wait(20.0)
        finally:
            for s in socks:
                s.close()

    def _bad_login(self) -> None:
        raw = _Raw(self.port)
        try:
            raw.login(self.password.replace("SharedAccessKey=", "SharedAccessKey=wrong"))
        finally:
            raw.close()
        self.stop.wait(0.2)


def attackers_main(argv: list[str]) -> int:
    """``python -m harness.bench.kafka_hostile PORT SECONDS``, the connection string in PASSWORD_ENV (never on a
    command line): attack, then print the counts as one JSON line."""
    port, seconds = int(argv[0]), float(argv[1])
    password = os.environ[PASSWORD_ENV]
    counts = _Attackers(port, password).run(seconds)
    print(json.dumps(counts), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------- the measured side
class _RoundTrips:
    """A well-behaved client's round trips as (time sent, milliseconds), and its failures."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self.failures = 0
        self.stop = threading.Event()

    def between(self, start: float, end: float) -> list[float]:
        return [ms for t, ms in list(self.samples) if start <= t < end]


def _conf(port: int, password: str, **extra) -> dict:
    """librdkafka's settings for the emulator's Kafka port (SASL PLAIN, the connection string as password)."""
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "$ConnectionString", "sasl.password": password, **extra}


def _kafka_client(port: int, password: str, trips: _RoundTrips) -> None:
    from confluent_kafka import Producer

    p = Producer(_conf(port, password, **{"acks": "all", "linger.ms": 0, "message.timeout.ms": 30_000}))

    def report(err, _msg, sent):
        if err is not None:
            trips.failures += 1
        else:
            trips.samples.append((sent, (time.monotonic() - sent) * 1000))

    while not trips.stop.is_set():
        sent = time.monotonic()
        p.produce(HUB, b"well-behaved", partition=0, on_delivery=lambda e, m, s=sent: report(e, m, s))
        deadline = sent + 0.1
        while time.monotonic() < deadline:
            p.poll(0.01)
    p.flush(30)


def _amqp_client(connection_string: str, trips: _RoundTrips) -> None:
    from azure.eventhub import EventData, EventHubProducerClient

    with EventHubProducerClient.from_connection_string(connection_string, eventhub_name=HUB) as client:
        while not trips.stop.is_set():
            sent = time.monotonic()
            try:
                batch = client.create_batch(partition_id="0")
                batch.add(EventData(b"well-behaved"))
                client.send_batch(batch)
                trips.samples.append((sent, (time.monotonic() - sent) * 1000))
            except Exception:  # noqa: BLE001 - any SDK error is a failed round trip, counted
                trips.failures += 1
            trips.stop.wait(max(0.0, sent + 0.5 - time.monotonic()))


def _config(path: Path) -> None:
    atomic.write_json(path, {
        "UserConfig": {"NamespaceConfig": [{"Type": "EventHub", "Name": "ns", "Entities": [
            {"Name": HUB, "PartitionCount": 1},  # the hour's retention: the 8 MiB fetches stay full all along
            {"Name": WRITES, "PartitionCount": 1, "RetentionSeconds": 60}]}]},
        "Emulator": {"OffsetsRetentionMs": EXPIRY_MS, "ProducerIdExpirationMs": EXPIRY_MS},
    })


def _fill(port: int, password: str) -> None:
    """Nine 900 KB events in the hub, so a fetch of 8 MiB gets a full response."""
    from confluent_kafka import Producer

    p = Producer(_conf(port, password, **{"acks": "all", "message.max.bytes": 2_000_000}))
    for _ in range(9):
        p.produce(HUB, b"f" * 900_000, partition=0)
    if p.flush(60):
        raise RuntimeError("the hub could not be filled for the unread-fetch attack")


def run_bench(json_path: str | None, quick: bool = False, *, attack_s: float | None = None,
              quiet_s: float | None = None) -> dict:
    """Quiet (the reference round trips), attack (`attack_s`: 600 s, 60 with `quick`), then quiet again; the
    figures and rows as harness.bench asks."""
    import psutil

    from harness.supervisor import Supervisor, wait_until

    attack_s = attack_s if attack_s is not None else (60.0 if quick else 600.0)
    quiet_s = quiet_s if quiet_s is not None else (10.0 if quick else 30.0)
    rss: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="kafka-hostile-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        config = Path(tmp) / "Config.json"
        _config(config)
        emu = sup.spawn("emulator", [sys.executable, "-m", "harness.emulator", "--config", str(config), "--no-tls",
                                     "--no-websockets", "--kafka-port", "0"], stdout_pipe=True,
                        env=dict(os.environ, PYTHONUNBUFFERED="1"))
        lines: dict[str, str] = {}
        while "kafka_port" not in lines:
            line = emu.proc.stdout.readline().decode()
            if not line:
                raise RuntimeError(f"the emulator exited before printing kafka_port (got {sorted(lines)})")
            key, _, value = line.strip().partition("=")
            lines[key] = value
        port, conn = int(lines["kafka_port"]), lines["connection_string"]
        proc = psutil.Process(emu.pid)
        _fill(port, conn)
        kafka, amqp = _RoundTrips(), _RoundTrips()
        clients = [threading.Thread(target=_kafka_client, args=(port, conn, kafka), daemon=True),
                   threading.Thread(target=_amqp_client, args=(conn, amqp), daemon=True)]
        for t in clients:
            t.start()
        wait_until(lambda: kafka.samples and amqp.samples, 60, what="the well-behaved clients' first round trips")
        marks = {"quiet": time.monotonic()}

        def sample_until(end: float) -> None:
            while time.monotonic() < end:
                rss.append((time.monotonic(), proc.memory_info().rss / 1e6))
                time.sleep(1.0)

        sample_until(marks["quiet"] + quiet_s)
        marks["attack"] = time.monotonic()
        attackers = sup.spawn("attackers", [sys.executable, "-m", "harness.bench.kafka_hostile", str(port),
                                            str(attack_s)], stdout_pipe=True,
                              env=dict(os.environ, **{PASSWORD_ENV: conn}))
        sample_until(marks["attack"] + attack_s)
        counts_line = attackers.proc.stdout.readline().decode() if _wait_exit(attackers.proc, 60) else ""
        marks["after"] = time.monotonic()
        sample_until(marks["after"] + quiet_s)
        marks["end"] = time.monotonic()
        for trips in (kafka, amqp):
            trips.stop.set()
        for t in clients:
            t.join(40)
    result = _figures(kafka, amqp, rss, marks, json.loads(counts_line) if counts_line.strip() else {})
    result["attack_s"], result["quick"] = attack_s, quick
    if json_path:
        atomic.write_json(json_path, result)
    return result


def _wait_exit(proc, timeout: float) -> bool:
    try:
        proc.wait(timeout)
        return True
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: still attacking, counts unknown
        return False


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _figures(kafka: _RoundTrips, amqp: _RoundTrips, rss: list[tuple[float, float]], marks: dict,
             counts: dict) -> dict:
    from harness.bench import row

    quiet, attack, after, end = marks["quiet"], marks["attack"], marks["after"], marks["end"]
    middle = attack + (after - attack) / 2

    def mb(start: float, stop: float) -> list[float]:
        return [v for t, v in rss if start <= t < stop]

    before_mb, first_mb, second_mb, after_mb = (mb(quiet, attack), mb(attack, middle), mb(middle, after),
                                                mb(after, end + 1))
    minutes = []
    for i in range(max(1, math.ceil((after - attack - 1) / 60))):  # the attackers' exit takes a moment
        lo, hi = attack + 60 * i, min(after, attack + 60 * (i + 1))
        k, a, m = kafka.between(lo, hi), amqp.between(lo, hi), mb(lo, hi)
        minutes.append({"minute": i + 1, "rss_mb_max": round(max(m), 1) if m else None,
                        "kafka_max_ms": round(max(k), 1) if k else None,
                        "amqp_max_ms": round(max(a), 1) if a else None})
    result = {"attacks": counts, "minutes": minutes,
              "rss_mb": {"before": round(max(before_mb), 1), "first_half_max": round(max(first_mb), 1),
                         "second_half_max": round(max(second_mb), 1), "after": round(after_mb[-1], 1)},
              "failures": {"kafka": kafka.failures, "amqp": amqp.failures}}
    rows = []
    for name, trips in (("librdkafka producer", kafka), ("azure-eventhub producer", amqp)):
        calm, hit = trips.between(quiet, attack), trips.between(attack, after)
        worst = max(hit) if hit else None
        result[name] = {"quiet_max_ms": max(calm) if calm else None, "attack_max_ms": worst,
                        "attack_p99_ms": _percentile(hit, 0.99), "round_trips": len(hit)}
        rows.append(row(f"{name}: longest round trip under attack", worst, "ms",
                        reference=max(calm) if calm else None, reference_name="the same client, quiet",
                        goal=f"< {ROUND_TRIP_GOAL_MS:.0f} ms", ok=worst is not None and worst < ROUND_TRIP_GOAL_MS))
        rows.append(row(f"{name}: p99 round trip under attack", _percentile(hit, 0.99), "ms",
                        reference=_percentile(calm, 0.99), reference_name="the same client, quiet"))
        rows.append(row(f"{name}: failed round trips", trips.failures, "count", goal="0",
                        ok=trips.failures == 0))
    growth = max(second_mb) - max(first_mb)
    rows.append(row("emulator RSS, second half of the attack", max(second_mb), "MB", reference=max(first_mb),
                    reference_name="first half", goal=f"flat (within {RSS_FLAT_MB:.0f} MB)",
                    ok=growth <= RSS_FLAT_MB))
    rows.append(row("emulator RSS after the attack", after_mb[-1], "MB", reference=max(before_mb),
                    reference_name="before it"))
    result["rows"] = rows
    return result


if __name__ == "__main__":
    sys.exit(attackers_main(sys.argv[1:]))
