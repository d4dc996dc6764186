"""Malformed and hostile peers on the Kafka port: each loses its own connection (as a Kafka broker closes a
connection on a request it cannot parse or may not serve yet); the emulator keeps serving a real librdkafka
producer on another connection throughout, and its memory stays bounded.

The hostile bytes are hand-encoded from the protocol guide (kafka_raw.py); every "served" check is a real
client's delivery report.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest
from confluent_kafka import Producer

from kafka_helpers import client_conf
from kafka_raw import (API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE, api_versions_v0, authenticated,
                       closed_by_peer, connect, framed, header_v1, metadata, metadata_version,
                       parse_api_versions_v0, read_response)

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig

HUB = "kh-hostile"


@pytest.fixture(scope="module")
def kemu():
    server = EmulatorServer(EmulatorConfig(hubs=(HubConfig(HUB, 1, ("$Default",)),)), tls_port=None,
                            ws_port=None, wss_port=None, kafka_port=0, kafka_tls_port=None).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bystander(kemu):
    """A librdkafka producer sending on its own connection for the whole module."""
    stop = threading.Event()
    acked, errors = [], []

    def report(err, msg):
        (errors if err is not None else acked).append(err or time.monotonic())

    def run():
        p = Producer(client_conf(kemu, **{"acks": "all", "linger.ms": 0}))
        while not stop.is_set():
            p.produce(HUB, b"ok", partition=0, on_delivery=report)
            p.poll(0.02)
        p.flush(10)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert _wait(lambda: len(acked) > 3), f"the bystander producer never got going: {errors}"
    yield acked
    stop.set()
    t.join(15)
    assert errors == []


def _wait(pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def _still_served(acked):
    n = len(acked)
    assert _wait(lambda: len(acked) >= n + 3), "the producer on the other connection stalled"


def test_api_versions_is_answered_before_sasl_and_lists_the_sasl_apis(kemu, bystander):
    s = connect(kemu.kafka_port)
    s.sendall(api_versions_v0(5))
    corr, err, apis = parse_api_versions_v0(read_response(s))
    assert (corr, err) == (5, 0)
    assert {API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA} <= set(apis)
    s.close()


def test_unsupported_api_versions_version_gets_unsupported_version_and_the_list(kemu, bystander):
    """KIP-511: a broker answers an ApiVersions version it does not know with UNSUPPORTED_VERSION (35) in a v0
    response that still lists what it supports, so the client can retry."""
    s = connect(kemu.kafka_port)
    s.sendall(api_versions_v0(6, version=99))
    corr, err, apis = parse_api_versions_v0(read_response(s))
    assert (corr, err) == (6, 35) and API_VERSIONS in apis
    s.close()


def test_a_client_sending_a_byte_a_second_stalls_nobody_and_is_answered(kemu, bystander):
    request = api_versions_v0(77)
    s = connect(kemu.kafka_port)
    for b in request[:3]:  # three seconds (at least) of a size prefix arriving a byte at a time
        s.sendall(bytes([b]))
        time.sleep(1.0)
        _still_served(bystander)  # acks keep coming while the request is incomplete (waited for, not timed)
    s.sendall(request[3:])
    corr, err, _ = parse_api_versions_v0(read_response(s))
    assert (corr, err) == (77, 0)  # slow is not malformed: the request is served once whole
    s.close()


def test_garbage_bytes_close_the_connection(kemu, bystander):
    s = connect(kemu.kafka_port)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # read as a size prefix of ~1.2 GB
    assert closed_by_peer(s)
    _still_served(bystander)


@pytest.mark.parametrize("size", [2**31 - 1, -1, 0, 3])
def test_impossible_size_prefixes_close_without_buffering(kemu, bystander, size):
    s = connect(kemu.kafka_port)
    s.sendall(struct.pack(">i", size) + b"\x00" * 64)
    assert closed_by_peer(s)
    _still_served(bystander)


def test_a_known_api_before_sasl_closes_the_connection(kemu, bystander):
    # the same Metadata request is answered once authenticated (so it is well-formed) ...
    s, apis = authenticated(kemu.kafka_port, kemu.connection_string())
    version = metadata_version(apis)
    s.sendall(metadata(9, version))
    reply = read_response(s)
    assert reply is not None and struct.unpack_from(">i", reply)[0] == 9 and HUB.encode() in reply
    s.close()
    # ... and closes a connection that has not authenticated, answering nothing
    raw = connect(kemu.kafka_port)
    raw.sendall(metadata(9, version))
    assert closed_by_peer(raw)
    _still_served(bystander)


def test_an_unknown_api_key_closes_the_connection(kemu, bystander):
    s, _ = authenticated(kemu.kafka_port, kemu.connection_string())
    s.sendall(framed(header_v1(9999, 0, 11) + b"\x00" * 8))
    assert closed_by_peer(s)
    _still_served(bystander)


def test_a_truncated_request_body_closes_the_connection(kemu, bystander):
    s, apis = authenticated(kemu.kafka_port, kemu.connection_string())
    whole = metadata(12, metadata_version(apis))
    cut = whole[4:-2]  # the header and part of the body, framed as if that were all of it
    s.sendall(struct.pack(">i", len(cut)) + cut)
    assert closed_by_peer(s)
    _still_served(bystander)


def test_a_request_cut_off_mid_frame_then_hangup(kemu, bystander):
    s = connect(kemu.kafka_port)
    s.sendall(struct.pack(">i", 100) + b"\x00" * 20)
    _still_served(bystander)
    s.close()
    _still_served(bystander)


def test_sasl_authenticate_without_handshake_closes(kemu, bystander):
    """Kafka's SASL state machine: SaslAuthenticate before SaslHandshake is illegal (ILLEGAL_SASL_STATE or a
    closed connection, never a session)."""
    s = connect(kemu.kafka_port)
    token = b"\x00$ConnectionString\x00" + kemu.connection_string().encode()
    s.sendall(framed(header_v1(SASL_AUTHENTICATE, 0, 13) + struct.pack(">i", len(token)) + token))
    reply = read_response(s, timeout=5)
    if reply is not None:
        corr, err = struct.unpack_from(">ih", reply)
        assert corr == 13 and err == 34, (corr, err)  # ILLEGAL_SASL_STATE
        assert closed_by_peer(s)
    _still_served(bystander)


def test_a_crowd_of_half_open_connections(kemu, bystander):
    """100 peers that connect and send a partial size prefix or a partial request, then say nothing: the
    producer is served throughout, and every one of them can be closed cleanly."""
    socks = []
    for i in range(100):
        s = connect(kemu.kafka_port)
        s.sendall(b"\x00\x00" if i % 2 else struct.pack(">i", 50_000) + b"\x00" * 1000)
        socks.append(s)
    _still_served(bystander)
    for s in socks:
        s.close()
    _still_served(bystander)


def _rss(proc) -> int:
    return proc.memory_info().rss


def test_hoarders_of_incomplete_requests_keep_the_emulators_rss_bounded(tmp_path):
    """60 peers each declaring a 1 MB request and sending 900 KB of it: the bytes held for incomplete requests
    are capped by the emulator's shared budget (here 8 MiB, `Emulator.MaxIncompleteFrameBytes`), so its resident
    memory stays within 25 MB of where it started, and a real producer is served throughout."""
    import json
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    import psutil

    config = tmp_path / "Config.json"
    config.write_text(json.dumps({
        "UserConfig": {"NamespaceConfig": [{"Type": "EventHub", "Name": "ns", "Entities": [
            {"Name": "crowd", "PartitionCount": 1}]}]},
        "Emulator": {"MaxIncompleteFrameBytes": 8 * 1024 * 1024},
    }))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    server = subprocess.Popen([sys.executable, "-m", "harness.emulator", "--config", str(config), "--no-tls",
                               "--no-websockets", "--kafka-port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=root,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    stop = threading.Event()
    t = None
    try:
        lines = {}
        while "kafka_port" not in lines:
            line = server.stdout.readline()
            assert line, f"the emulator exited before printing kafka_port (got {lines})"
            if "=" in line:
                k, v = line.strip().split("=", 1)
                lines[k] = v
        port = int(lines["kafka_port"])

        class Emu:  # what client_conf needs
            kafka_port = port

            @staticmethod
            def connection_string():
                return lines["connection_string"]

        acked, errors = [], []

        def run():
            p = Producer(client_conf(Emu, **{"acks": "all"}))
            while not stop.is_set():
                p.produce("crowd", b"ok", partition=0,
                          on_delivery=lambda err, _m: (errors if err else acked).append(err or 1))
                p.poll(0.05)
            p.flush(10)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        assert _wait(lambda: len(acked) > 5, 20), f"the producer never got going: {errors}"
        emu = psutil.Process(server.pid)
        baseline = peak = _rss(emu)

        def hoard(_):
            s = connect(port)
            try:
                s.sendall(struct.pack(">i", 1_000_000))
                for _ in range(15):  # 900 KB of the declared 1 MB
                    s.sendall(b"\x00" * 60_000)
                return closed_by_peer(s, 3)
            except OSError:
                return True  # closed while we were still sending
            finally:
                s.close()

        before = len(acked)
        with ThreadPoolExecutor(60) as pool:
            outcomes = pool.map(hoard, range(60))
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                peak = max(peak, _rss(emu))
                time.sleep(0.1)
            outcomes = list(outcomes)
        peak = max(peak, _rss(emu))
        assert (peak - baseline) / 1e6 < 25, f"emulator RSS grew {(peak - baseline) / 1e6:.1f} MB"
        assert outcomes.count(True) >= 45, "the emulator did not close the biggest holders"
        assert len(acked) >= before + 10, "the producer stalled while the crowd hoarded"
        assert errors == []
        assert server.poll() is None
    finally:
        stop.set()
        if t is not None:
            t.join(15)  # the producer flushes while the emulator still runs
        server.terminate()
        server.wait(10)
