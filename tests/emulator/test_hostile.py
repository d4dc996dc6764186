"""Malformed and hostile peers: each loses its own connection; the server and other clients carry on."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from azure.eventhub import EventData

from emulator_helpers import producer

from harness.emulator.amqp import performatives as P
from harness.emulator.amqp.codec import loads
from harness.emulator.amqp.frames import AMQP_HEADER, SASL_HEADER, frame
from harness.emulator.amqp.types import Symbol, UInt


def _connect(emu) -> socket.socket:
    port = emu if isinstance(emu, int) else emu.port
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def _read_all(s: socket.socket, timeout: float = 5.0) -> bytes:
    s.settimeout(timeout)
    chunks = []
    try:
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    except (socket.timeout, ConnectionResetError):
        pass
    return b"".join(chunks)


def _opened(emu, idle_ms: int | None = None) -> socket.socket:
    """A raw connection past SASL and open (``emu``: a server or a port); ``idle_ms``: the idle-time-out we ask
    the emulator to keep us alive with (it heartbeats at half of it)."""
    s = _connect(emu)
    s.sendall(SASL_HEADER)
    init = P.encode_performative(P.SASL_INIT, [Symbol("ANONYMOUS"), b"", None])
    s.sendall(frame(0, init, 1))
    s.sendall(AMQP_HEADER)
    idle = None if idle_ms is None else UInt(idle_ms)
    s.sendall(frame(0, P.encode_performative(P.OPEN, ["raw", None, UInt(65536), None, idle] + [None] * 5)))
    return s


def _close_error(data: bytes):
    """The error condition of the close frame at the end of ``data`` (None if there is none)."""
    pos = 0
    cond = None
    while pos + 8 <= len(data):
        if data[pos:pos + 4] == b"AMQP":
            pos += 8
            continue
        size, doff = struct.unpack_from(">IB", data, pos)
        body = data[pos + doff * 4: pos + size]
        pos += size
        if body[:3] == b"\x00\x53\x18":
            err = P.decode_body(body).error
            cond = str(loads(P.encode_value(err)).value[0]) if err is not None else "none"
    return cond


@pytest.fixture
def bystander(emu):
    """A producer sending steadily on another connection while a hostile peer misbehaves."""
    stop = threading.Event()
    sent, errors = [], []

    def run():
        with producer(emu, "hostile") as p:
            while not stop.is_set():
                try:
                    p.send_batch([EventData(b"ok")], partition_id="0")
                    sent.append(time.monotonic())
                except Exception as exc:  # noqa: BLE001 - recorded for the assertion
                    errors.append(exc)
                time.sleep(0.02)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert _wait(lambda: len(sent) > 2)
    yield sent
    stop.set()
    t.join(10)
    assert not errors


def _wait(pred, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def _still_served(sent):
    n = len(sent)
    assert _wait(lambda: len(sent) >= n + 3), "the other connection stalled"


def test_garbage_header_gets_our_header_and_hangup(emu, bystander):
    s = _connect(emu)
    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert _read_all(s) == SASL_HEADER
    _still_served(bystander)


def test_garbage_after_open_closes_with_framing_error(emu, bystander):
    s = _opened(emu)
    s.sendall(b"\x00\x00\x00\x05garbage-garbage")
    data = _read_all(s)
    assert _close_error(data) == "amqp:connection:framing-error"
    _still_served(bystander)


def test_oversize_frame_is_refused_without_buffering(emu, bystander):
    s = _opened(emu)
    s.sendall(struct.pack(">IBBH", 512 * 1024 * 1024, 2, 0, 0) + b"\x00" * 100)
    data = _read_all(s)
    assert _close_error(data) == "amqp:connection:framing-error"
    _still_served(bystander)


def test_undecodable_performative_closes_with_decode_error(emu, bystander):
    s = _opened(emu)
    s.sendall(frame(0, b"\x00\x53\x11\xd0\xff\xff\xff\xff\x00\x00\x00\x09"))  # begin with a lying list32
    assert _close_error(_read_all(s)) == "amqp:decode-error"
    _still_served(bystander)


def test_truncated_frame_then_hangup_and_idle_peer(emu, bystander):
    idle = _connect(emu)  # connects and never speaks
    half = _opened(emu)
    begin = frame(0, P.encode_performative(P.BEGIN, [None, UInt(0), UInt(100), UInt(100)] + [None] * 4))
    half.sendall(begin[: len(begin) // 2])
    _still_served(bystander)
    half.close()
    _still_served(bystander)
    idle.close()


def test_frames_on_unknown_channel_and_handle(emu, bystander):
    s = _opened(emu)
    s.sendall(frame(7, P.encode_performative(P.FLOW, [UInt(0), UInt(1), UInt(0), UInt(1)] + [None] * 7)))
    assert _close_error(_read_all(s)) == "amqp:connection:framing-error"
    _still_served(bystander)


def test_random_byte_storm(emu, bystander):
    import random

    rnd = random.Random(1234)
    for i in range(20):
        s = _opened(emu) if i % 2 else _connect(emu)
        s.sendall(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 2000))))
        s.close()
    _still_served(bystander)
    assert emu.snapshot()["hubs"]["hostile"]["partitions"]["0"]["retained_events"] > 0


def test_slow_reader_does_not_stall_others(emu, bystander):
    """A client that gives huge credit and never reads: only its own socket buffer fills."""
    with producer(emu, "hostile") as p:
        p.send_batch([EventData(b"y" * 50_000) for _ in range(15)], partition_id="0")
    s = _opened(emu)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(frame(0, P.encode_performative(P.BEGIN, [None, UInt(0), UInt(100000), UInt(100000)] + [None] * 4)))
    from harness.emulator.amqp.types import Described, ULong

    source = Described(ULong(0x28), ["amqps://x/hostile/ConsumerGroups/$Default/Partitions/0"] + [None] * 10)
    target = Described(ULong(0x29), ["r"] + [None] * 6)
    attach = [ "slow", UInt(0), True, None, None, source, target] + [None] * 7
    s.sendall(frame(0, P.encode_performative(P.ATTACH, attach)))
    flow = [UInt(0), UInt(100000), UInt(0), UInt(100000), UInt(0), UInt(0), UInt(100000), None, None, None, None]
    s.sendall(frame(0, P.encode_performative(P.FLOW, flow)))
    _still_served(bystander)
    time.sleep(0.5)
    _still_served(bystander)
    s.close()


# ---------------------------------------------------------------------------------------------- bounded memory


def test_one_timer_per_connection_however_long_it_heartbeats(emu):
    """A client asking for a 50 ms idle time-out makes the emulator heartbeat every 25 ms; each beat used to keep
    its spent timer handle in a list for the connection's life (100 such clients: 31 -> 112 MB in 90 s)."""
    import asyncio
    import gc

    from harness.emulator.connection import AmqpConnection

    def timers_of_connections() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.TimerHandle)
                   and isinstance(getattr(o._callback, "__self__", None), AmqpConnection))

    before = timers_of_connections()
    socks = [_opened(emu, idle_ms=50) for _ in range(20)]
    try:
        time.sleep(2.0)  # ~80 beats per connection
        beats = socks[0].recv(65536)
        assert beats.count(b"\x00\x00\x00\x08\x02\x00\x00\x00") >= 10, "the emulator stopped heartbeating"
        assert timers_of_connections() - before <= 2 * len(socks)
    finally:
        for s in socks:
            s.close()


def _rss(proc) -> int:
    return proc.memory_info().rss


def test_hostile_crowd_keeps_emulator_rss_flat(tmp_path):
    """Heartbeat-hungry, silent and huge-frame clients at once: the emulator's resident memory stays within
    25 MB of where it started, and a normal SDK producer on its own connection is served throughout.

    50 connections each declaring a 4 MiB frame and sending 3 MiB of it used to cost 31 -> 236 MB; now the bytes
    held for incomplete frames of all connections are capped (here 8 MiB) by closing the biggest holder."""
    import json
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    import psutil
    from azure.eventhub import EventHubProducerClient

    config = tmp_path / "Config.json"
    config.write_text(json.dumps({
        "UserConfig": {"NamespaceConfig": [{"Type": "EventHub", "Name": "ns", "Entities": [
            {"Name": "crowd", "PartitionCount": 1}]}]},
        "Emulator": {"IdleTimeoutSeconds": 4, "MaxIncompleteFrameBytes": 8 * 1024 * 1024},
    }))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    server = subprocess.Popen([sys.executable, "-m", "harness.emulator", "--config", str(config), "--no-tls",
                               "--no-websockets"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              cwd=root, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    socks: list = []
    stop = threading.Event()
    try:
        lines = dict(server.stdout.readline().strip().split("=", 1) for _ in range(6))
        conn = lines["connection_string"]
        port = int(conn.split(";")[0].rsplit(":", 1)[1])
        emu = psutil.Process(server.pid)
        sent, errors = [], []

        def bystander():
            with EventHubProducerClient.from_connection_string(conn, eventhub_name="crowd", retry_total=3) as p:
                while not stop.is_set():
                    try:
                        p.send_batch([EventData(b"ok")], partition_id="0")
                        sent.append(time.monotonic())
                    except Exception as exc:  # noqa: BLE001 - recorded for the assertion
                        errors.append(exc)
                    time.sleep(0.05)

        t = threading.Thread(target=bystander, daemon=True)
        t.start()
        assert _wait(lambda: len(sent) > 5, 20), f"the SDK producer never got going: {errors}"
        baseline = _rss(emu)
        peak = baseline

        beating = [_opened(port, idle_ms=50) for _ in range(100)]  # the emulator beats every 25 ms for each
        silent = [_connect(port) for _ in range(50)]  # never even send the protocol header
        quiet = [_opened(port) for _ in range(50)]  # open, then nothing: the idle time-out's business
        socks.extend(beating + silent + quiet)

        def keep_beating():
            while not stop.is_set():
                for s in beating:
                    try:
                        s.sendall(b"\x00\x00\x00\x08\x02\x00\x00\x00")
                        s.recv(65536)
                    except OSError:
                        pass
                stop.wait(1.0)

        threading.Thread(target=keep_beating, daemon=True).start()

        def huge_frame(_):
            s = _opened(port)
            s.sendall(struct.pack(">IBBH", 4 * 1024 * 1024 - 8, 2, 0, 0))
            try:
                for _ in range(48):  # 3 MiB of the declared 4 MiB
                    s.sendall(b"\x00" * 65536)
            except OSError:
                pass  # closed by the emulator: expected for most of them
            got = _close_error(_read_all(s, 6))
            s.close()
            return got

        sent_before = len(sent)
        with ThreadPoolExecutor(50) as pool:
            hoarders = pool.map(huge_frame, range(50))
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                peak = max(peak, _rss(emu))
                time.sleep(0.2)
            outcomes = list(hoarders)
        for _ in range(10):
            peak = max(peak, _rss(emu))
            time.sleep(0.2)
        assert (peak - baseline) / 1e6 < 25, f"emulator RSS grew {(peak - baseline) / 1e6:.1f} MB"
        assert outcomes.count("amqp:resource-limit-exceeded") >= 40, outcomes
        assert len(sent) >= sent_before + 20, "the SDK producer stalled while the crowd misbehaved"
        assert not errors, errors
        assert _close_error(_read_all(quiet[0], 3)) == "amqp:connection:forced"  # 4 s of silence
        assert emu.is_running() and server.poll() is None
    finally:
        stop.set()
        for s in socks:
            s.close()
        server.terminate()
        server.wait(10)
