"""The network proxy as the harness runs it (its own supervised process, driven over its control port), in front
of a local TCP echo server: what each fault does to the bytes, measured from the outside with plain sockets.
Real Kafka clients through the proxy are in tests/integration/test_faults_network.py."""
import json
import os
import socket
import struct
import threading
import time
import uuid

import pytest

from harness.netproxy import parse_request_header, role, start_proxy
from harness.records.runstate import RunState
from harness.supervisor import Supervisor


class Echo:
    """Echoes every connection; remembers per connection the bytes received and when the last one came."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.received: list[int] = []
        self.last_at: list[float] = []
        self.errors: list[BaseException] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            i = self.accepted
            self.accepted += 1
            self.received.append(0)
            self.last_at.append(0.0)
            threading.Thread(target=self._echo, args=(conn, i), daemon=True).start()

    def _echo(self, conn, i):
        try:
            with conn:
                while data := conn.recv(65536):
                    self.received[i] += len(data)
                    self.last_at[i] = time.monotonic()
                    conn.sendall(data)
        except OSError as exc:
            self.errors.append(exc)

    def close(self):
        self.sock.close()


@pytest.fixture
def echo():
    server = Echo()
    yield server
    server.close()


@pytest.fixture
def proxy(echo, tmp_path):
    with Supervisor(f"test-netproxy-{uuid.uuid4().hex}") as sup:
        handle = start_proxy(sup, tmp_path / "proxy", [f"127.0.0.1:{echo.port}"])
        yield handle


def connect(proxy, timeout=10.0):
    host, port = proxy.listen[0].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def recv_exactly(sock, n):
    out = bytearray()
    while len(out) < n:
        data = sock.recv(min(65536, n - len(out)))
        if not data:
            raise EOFError(f"closed after {len(out)} of {n} bytes")
        out += data
    return bytes(out)


def rtt(sock, payload=b"ping"):
    start = time.perf_counter()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.perf_counter() - start


def kafka_header(client_id, api_key=18, api_version=3, correlation_id=7):
    """A request header as the Kafka protocol guide lays it out, with an empty body after it."""
    cid = b"" if client_id is None else client_id.encode()
    n = -1 if client_id is None else len(cid)
    body = struct.pack(">hhih", api_key, api_version, correlation_id, n) + cid + b"\x00"
    return struct.pack(">i", len(body)) + body


def test_passes_bytes_unchanged_both_ways(proxy):
    data = os.urandom(3_000_000)
    with connect(proxy) as s:
        sender = threading.Thread(target=s.sendall, args=(data,))
        sender.start()
        assert recv_exactly(s, len(data)) == data
        sender.join()
    stats = proxy.call("stats")["stats"]
    assert stats["bytes"] == {"up": len(data), "down": len(data)}


def test_latency_delays_each_direction_keeps_order_and_does_not_throttle(proxy):
    with connect(proxy) as s:
        base = min(rtt(s) for _ in range(5))
        proxy.call("set", id="lat", latency_ms=150)
        slowed = min(rtt(s) for _ in range(5))
        assert slowed >= 0.300 - 0.005, slowed  # 150 ms out and 150 ms back (timer granularity aside)
        # order: many small writes in a row come back as one identical stream
        parts = [f"<{i}>".encode() for i in range(500)]
        for p in parts:
            s.sendall(p)
        assert recv_exactly(s, sum(map(len, parts))) == b"".join(parts)
        # a pipeline, not a throttle: 4 MB would take 25 s if every 64 KiB chunk waited its turn
        data = os.urandom(4_000_000)
        start = time.perf_counter()
        sender = threading.Thread(target=s.sendall, args=(data,))
        sender.start()
        assert recv_exactly(s, len(data)) == data
        sender.join()
        assert time.perf_counter() - start < 10.0
        proxy.call("clear", id="lat")
        healed = min(rtt(s) for _ in range(5))
        assert healed < 0.150, (base, healed)


def test_bandwidth_cap_holds_per_direction_and_heals(proxy, echo):
    cap = 200_000
    proxy.call("set", id="bw", bytes_per_s=cap)
    data = os.urandom(600_000)
    with connect(proxy, timeout=30) as s:
        start = time.monotonic()
        sender = threading.Thread(target=s.sendall, args=(data,))
        sender.start()
        assert recv_exactly(s, len(data)) == data
        sender.join()
        up_rate = len(data) / (echo.last_at[0] - start)  # as the server saw the bytes arrive
        round_trip_rate = len(data) / (time.monotonic() - start)
        assert up_rate <= cap * 1.1, up_rate
        assert round_trip_rate <= cap * 1.1, round_trip_rate
        assert up_rate >= cap * 0.3, up_rate  # capped, not stalled
        proxy.call("clear", id="bw")
        start = time.monotonic()
        sender = threading.Thread(target=s.sendall, args=(data,))
        sender.start()
        assert recv_exactly(s, len(data)) == data
        sender.join()
        assert len(data) / (time.monotonic() - start) > cap * 2


def test_reset_sends_rst_to_both_sides_then_new_connections_pass(proxy, echo):
    with connect(proxy) as s, connect(proxy) as anonymous:
        header = kafka_header("resettable")
        s.sendall(header)
        recv_exactly(s, len(header))
        rtt(anonymous)
        reply = proxy.call("reset")
        assert reply["reset"] == 2 and reply["reset_clients"] == {"resettable": 1, "": 1}
        with pytest.raises(ConnectionResetError):
            anonymous.recv(10)
        with pytest.raises(ConnectionResetError):
            s.recv(10)
    deadline = time.monotonic() + 5
    while not echo.errors and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(isinstance(e, ConnectionResetError) for e in echo.errors), echo.errors
    with connect(proxy) as s:
        assert rtt(s) < 1.0


def test_reset_new_refuses_every_new_connection_until_cleared(proxy, echo):
    proxy.call("set", id="rst", reset_new=True)
    with connect(proxy) as s:
        s.sendall(kafka_header("knocking-client"))
        with pytest.raises(ConnectionResetError):
            s.recv(10)
    stats = proxy.call("stats")["stats"]
    assert stats["refused"] == 1 and stats["refused_by_client"] == {"knocking-client": 1}
    assert stats["by_client"] == {} and stats["refused_by_role"]["other"] == 1
    assert echo.accepted == 0
    proxy.call("clear", id="rst")
    with connect(proxy) as s:
        assert rtt(s) < 1.0


def test_blackhole_forwards_nothing_and_holds_connections_until_healed(proxy, echo):
    with connect(proxy) as held:
        rtt(held)
        proxy.call("set", id="bh", blackhole=True)
        held.sendall(b"held-bytes")
        held.settimeout(1.5)
        with pytest.raises(socket.timeout):
            held.recv(10)
        late = connect(proxy)  # the kernel accepts; nothing reaches the server
        late.sendall(b"late-bytes")
        time.sleep(0.5)
        assert echo.received == [4] and echo.accepted == 1
        assert proxy.call("stats")["stats"]["open"] == 2  # both held, neither dropped
        proxy.call("clear", id="bh")
        held.settimeout(10)
        assert recv_exactly(held, 10) == b"held-bytes"
        with late:
            late.settimeout(10)
            assert recv_exactly(late, 10) == b"late-bytes"
        assert echo.accepted == 2


def test_overlapping_faults_compose_and_heal_separately(proxy):
    with connect(proxy) as s:
        proxy.call("set", id="a", latency_ms=120)
        proxy.call("set", id="b", latency_ms=60)
        assert rtt(s) >= 0.240 - 0.005  # the larger latency rules
        proxy.call("clear", id="a")
        assert 0.120 - 0.005 <= rtt(s)  # b still holds
        proxy.call("clear", id="b")
        assert rtt(s) < 0.100


def test_counts_connections_per_client_id_and_records_them(proxy):
    ids = ["consumer-spark-kafka-source-1a2b-77-executor-3", "adminclient-1",
           "consumer-spark-kafka-source-1a2b-77-executor-3", "my-tool", None]
    for cid in ids:
        with connect(proxy) as s:
            header = kafka_header(cid)
            s.sendall(header)
            recv_exactly(s, len(header))  # the echo server answers: the header went through unchanged
    with connect(proxy) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        recv_exactly(s, 18)
    stats = proxy.call("stats")["stats"]
    assert stats["by_client"] == {"consumer-spark-kafka-source-1a2b-77-executor-3": 2, "adminclient-1": 1,
                                  "my-tool": 1}
    assert stats["connections"] == {"executor": 2, "driver": 1, "other": 1, "unidentified": 2}
    assert stats["clients"] == {"executor": 1, "driver": 1, "other": 1, "unidentified": 0}
    rows = [json.loads(line) for line in (proxy.out_dir / "connections.jsonl").read_text().splitlines()]
    assert [r["client_id"] for r in rows] == ids + [None]
    assert [r["api_key"] for r in rows] == [18] * 5 + [None]
    assert [r["correlation_id"] for r in rows] == [7] * 5 + [None]  # 0 would be a client instance's first request
    assert all(r["broker"] == 0 and r["t"] > 0 for r in rows)


def test_header_parsing_waits_for_bytes_and_rejects_what_is_not_kafka():
    header = kafka_header("client-ü", api_key=1, api_version=12, correlation_id=42)
    assert parse_request_header(header[:10]) is None
    assert parse_request_header(header[:16]) is None  # the id is cut
    assert parse_request_header(header) == {"api_key": 1, "api_version": 12, "correlation_id": 42,
                                            "client_id": "client-ü"}
    assert parse_request_header(kafka_header(None))["client_id"] is None
    for junk in (b"GET / HTTP/1.1\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03abcdefgh"):
        with pytest.raises(ValueError):
            parse_request_header(junk)


def test_roles_follow_sparks_client_ids():
    assert role("consumer-spark-kafka-source-5c1d1f2e-0b7a-4a7e-9d7e-1c9d7f1f2a3b-1234567-executor-7") == "executor"
    assert role("adminclient-2") == "driver"
    assert role("consumer-spark-kafka-source-5c1d-1234567-driver-0-1") == "driver"
    assert role("rdkafka") == "other" and role(None) == "unidentified"


def test_control_refuses_unknown_requests_and_the_process_ends_with_its_supervisor(echo, tmp_path):
    with Supervisor(f"test-netproxy-{uuid.uuid4().hex}") as sup:
        handle = start_proxy(sup, tmp_path / "proxy", [f"127.0.0.1:{echo.port}"])
        with pytest.raises(RuntimeError, match="unknown op"):
            handle.call("explode")
        with pytest.raises(RuntimeError, match="unknown settings"):
            handle.call("set", id="x", latency=5)
        with connect(handle) as s:
            rtt(s)
            sup.stop(handle.child)
            try:
                closed = s.recv(10) == b""
            except ConnectionResetError:
                closed = True
            assert closed  # the proxy's connections end with it
    assert handle.child.proc.returncode == 0  # SIGTERM: stopped cleanly, wrote its final counts
    final = json.loads((tmp_path / "proxy" / "stats.json").read_text())
    assert final["accepted"] == 1 and 0 < final["cpu_s"] < 30


@pytest.mark.parametrize("fault, message", [
    ('mode = "latency"', "mode = 'latency' needs latency_ms"),
    ('mode = "bandwidth"\nlatency_ms = 5', "mode = 'bandwidth' needs bytes_per_s"),
    ('mode = "blackhole"\nbytes_per_s = 100000', "bytes_per_s belongs to mode = 'bandwidth'"),
    ('mode = "latency"\nlatency_ms = 5\nkeep_resetting = true', "keep_resetting belongs to mode = 'reset'"),
    ('mode = "jitter"', "faults[0].network.mode: Input should be 'latency'"),
])
def test_bad_network_fault_input_names_the_field(tmp_path, fault, message):
    from harness.config import ConfigError, load_scenario

    path = tmp_path / "bad.toml"
    path.write_text(f'name = "bad"\n[producers]\nrate = {{ kind = "constant", eps = 10 }}\n'
                    f'[[faults]]\nkind = "network"\nat_s = 1\n{fault}\n')
    with pytest.raises(ConfigError, match="faults") as err:
        load_scenario(str(path))
    assert str(path) in str(err.value) and message in str(err.value)


def test_network_fault_needs_the_embedded_broker(tmp_path):
    from harness.config import ConfigError, load_scenario

    path = tmp_path / "ext.toml"
    path.write_text('name = "ext"\n[backend]\nmode = "external"\nbootstrap_servers = "127.0.0.1:9"\n'
                    '[producers]\nrate = { kind = "constant", eps = 10 }\n'
                    '[[faults]]\nkind = "network"\nmode = "blackhole"\nat_s = 1\n')
    with pytest.raises(ConfigError, match="mode = 'embedded'"):
        load_scenario(str(path))


@pytest.mark.parametrize("fault, message", [
    ('mode = "blackhole"\nat_s = 1', "a blackhole needs duration_s or window"),
    ('mode = "reset"\nkeep_resetting = true\nat_s = 1', "a reset with keep_resetting needs duration_s or window"),
    ('mode = "blackhole"\nwindow = [1, 9]', "a 8 s blackhole reaches the query's 5000 ms Kafka timeouts"),
])
def test_a_network_cut_must_stay_below_the_querys_timeouts(tmp_path, fault, message):
    from harness.config import ConfigError, load_scenario

    path = tmp_path / "long.toml"
    path.write_text('name = "long"\n[producers]\nrate = { kind = "constant", eps = 10 }\n'
                    '[spark.source_options]\n"kafkaConsumer.pollTimeoutMs" = 5000\n'
                    f'[[faults]]\nkind = "network"\n{fault}\n')
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path))
    assert message in str(err.value)
    path.write_text(path.read_text().replace("5000", "60000"))
    if "needs" not in message:
        assert load_scenario(str(path))[0].faults[0].mode == "blackhole"  # 8 s under 60 s: judged as recovering


@pytest.mark.parametrize("backend, message", [
    ('proxy = "yes"', "backend.kafka.proxy: Input should be a valid boolean (got 'yes')"),
    ('proxy = 1', "backend.kafka.proxy: Input should be a valid boolean (got 1)"),
    ('mode = "external"\nbootstrap_servers = "127.0.0.1:9"\nproxy = true', "proxy = true needs mode = 'embedded'"),
    ('kind = "eventhubs"\nproxy = true', "backend.eventhubs.proxy: unknown key"),
])
def test_the_backend_proxy_option_is_checked(tmp_path, backend, message):
    from harness.config import ConfigError, load_scenario

    path = tmp_path / "proxy.toml"
    path.write_text(f'name = "p"\n[backend]\n{backend}\n[producers]\nrate = {{ kind = "constant", eps = 10 }}\n')
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path))
    assert str(path) in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("proxy, faults, started", [
    (True, 0, 1), (False, 1, 1), (True, 2, 1), (False, 0, 0),
], ids=["option", "fault", "option-and-faults", "neither"])
def test_the_proxy_is_put_in_front_once_whoever_asks(tmp_path, monkeypatch, proxy, faults, started):
    """backend.proxy and the network fault share one start-up (harness.netproxy.put_in_front): the brokers get
    one proxied listener and the query one bootstrap, whichever asks or both."""
    from types import SimpleNamespace

    from harness import netproxy, runner
    from harness.config import load_scenario
    from harness.console import Console
    from harness.records.timeline import Timeline

    calls = []

    def fake_start(supervisor, out_dir, upstreams, timeout=30.0):
        calls.append(upstreams)
        return netproxy.ProxyHandle(SimpleNamespace(pid=4242), [f"127.0.0.1:{7000 + i}" for i in range(len(upstreams))],
                                    "127.0.0.1:6999", out_dir)

    class Brokers:
        query_bootstrap = ""

        def __init__(self):
            self.listeners = []

        def add_listener(self, name, ports):
            self.listeners.append((name, ports))

        def start(self, run_dir, supervisor):
            pass

        def create_stream(self, *args):
            pass

        def describe(self):
            return {"kind": "kafka"}

    monkeypatch.setattr(netproxy, "start_proxy", fake_start)
    monkeypatch.setenv(runner.SEQUENTIAL_START_ENV, "1")  # the backend phase alone: no query driver beside it
    monkeypatch.setenv(runner.PRODUCERS_AT_GO_ENV, "1")  # ... and no producers started beside it either
    fault = '[[faults]]\nkind = "network"\nmode = "latency"\nlatency_ms = 5\nat_s = 1\n'
    path = tmp_path / "s.toml"
    path.write_text(f'name = "p"\n[backend]\nnodes = 2\nproxy = {str(proxy).lower()}\n'
                    f'[producers]\nrate = {{ kind = "constant", eps = 10 }}\n' + fault * faults)
    scenario, _, _ = load_scenario(str(path))
    brokers = Brokers()
    ctx = SimpleNamespace(scenario=scenario, run_dir=tmp_path, supervisor=None, backend=brokers,
                          timeline=Timeline(tmp_path / "timeline.jsonl"), console=Console(quiet=True), state=RunState(),
                          netproxy=None)
    runner.start_backend(ctx)
    assert len(calls) == started
    if started:
        assert [name for name, _ in brokers.listeners] == ["QUERY"] and len(brokers.listeners[0][1]) == 2
        assert brokers.query_bootstrap == "127.0.0.1:7000,127.0.0.1:7001"
        assert ctx.netproxy["pid"] == 4242 and ctx.netproxy["control"] == "127.0.0.1:6999"
    else:
        assert brokers.listeners == [] and ctx.netproxy is None
