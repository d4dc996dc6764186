"""The service's limits, each configurable and each refused the way the SDK reports it.

Connections per namespace (``Emulator.MaxConnections``: open then close ``amqp:resource-limit-exceeded``), the idle
time-out (``IdleTimeoutSeconds``: close ``amqp:connection:forced`` with the service's "inactive for more than the
allowed ... milliseconds" text), and the budget for incomplete frames (``MaxIncompleteFrameBytes``: the biggest
holder is closed with ``amqp:resource-limit-exceeded``). Expected conditions come from the real SDK's exceptions
and from the close frames on the wire, not from the emulator's own bookkeeping.
"""

from __future__ import annotations

import base64
import os
import socket
import struct
import threading
import time

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub.exceptions import ConnectError, EventHubError

from emulator_helpers import FAST, wait_for
from test_hostile import _close_error, _opened, _read_all

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig
from harness.emulator.amqp import performatives as P
from harness.emulator.amqp.frames import HEARTBEAT

NO_TLS = dict(tls_port=None, ws_port=None, wss_port=None)


def _server(**limits) -> EmulatorServer:
    return EmulatorServer(EmulatorConfig(hubs=(HubConfig("lim", 1),), **limits), **NO_TLS)


def _server_open(sock: socket.socket) -> P.Performative:
    """The emulator's open performative (read after our open; headers and SASL frames skipped)."""
    data = b""
    sock.settimeout(5)
    while True:
        data += sock.recv(65536)
        pos = 0
        while pos + 8 <= len(data):
            if data[pos:pos + 4] == b"AMQP":
                pos += 8
                continue
            size, doff = struct.unpack_from(">IB", data, pos)
            if pos + size > len(data):
                break
            body = data[pos + doff * 4: pos + size]
            pos += size
            if body[:3] == b"\x00\x53\x10":
                return P.decode_body(body)


def test_connections_above_the_limit_are_refused_with_resource_limit_exceeded():
    with _server(max_connections=2) as emu:
        held = [_opened(emu), _opened(emu)]
        assert wait_for(lambda: emu.snapshot()["connections"] == 2)
        with EventHubProducerClient.from_connection_string(emu.connection_string("lim"), retry_total=0) as p:
            with pytest.raises(ConnectError, match="resource-limit-exceeded") as info:
                p.get_partition_ids()
        assert "Emulator.MaxConnections" in str(info.value)
        held.pop().close()
        assert wait_for(lambda: emu.snapshot()["connections"] == 1)
        with EventHubProducerClient.from_connection_string(emu.connection_string("lim"), **FAST) as p:
            assert p.get_partition_ids() == ["0"]
        held[0].close()


def test_idle_connection_closed_as_the_service_does_and_heartbeats_keep_one_open():
    with _server(idle_timeout_s=1.0) as emu:
        t0 = time.monotonic()  # before the quiet connection's last frame: it is closed at least 1 s after this
        quiet, beating = _opened(emu), _opened(emu)
        assert _server_open(beating).fields[4] == 500  # advertised: half the limit (AMQP 1.0 section 2.4.5)

        broken = []

        def beat():  # a beat late by up to 0.9 s (a busy machine's thread) still keeps the connection open
            for _ in range(36):  # 3.6 s of heartbeats every 0.1 s
                try:
                    beating.sendall(HEARTBEAT)
                except OSError as exc:
                    broken.append(exc)
                time.sleep(0.1)

        beater = threading.Thread(target=beat)
        beater.start()
        data = _read_all(quiet, 5)
        assert _close_error(data) == "amqp:connection:forced"
        assert b"inactive for more than the allowed 1000 milliseconds" in data
        assert 0.9 <= time.monotonic() - t0 < 4.5
        beater.join()
        assert not broken
        beating.settimeout(0.2)
        try:
            assert b"\x00\x53\x18" not in beating.recv(65536)  # no close frame
        except socket.timeout:
            pass
        beating.close()
        # the SDK's producer idles past the time-out, is closed, and reconnects by itself, as against Azure
        with EventHubProducerClient.from_connection_string(emu.connection_string("lim"), **FAST) as p:
            p.send_batch([EventData("before")], partition_id="0")
            time.sleep(1.6)
            p.send_batch([EventData("after")], partition_id="0")
        assert emu.snapshot()["hubs"]["lim"]["partitions"]["0"]["retained_events"] == 2


def test_incomplete_frame_budget_closes_the_biggest_holder():
    with _server(max_incomplete_frame_bytes=256 * 1024) as emu:
        small, big = _opened(emu), _opened(emu)
        small.sendall(struct.pack(">IBBH", 100_000, 2, 0, 0) + b"\x00" * 50_000)
        assert wait_for(lambda: emu.snapshot()["incomplete_frame_bytes"] >= 50_000)
        big.sendall(struct.pack(">IBBH", 1_000_000, 2, 0, 0))
        try:
            for _ in range(10):
                big.sendall(b"\x00" * 30_000)
        except OSError:
            pass
        assert _close_error(_read_all(big, 5)) == "amqp:resource-limit-exceeded"
        assert wait_for(lambda: emu.snapshot()["connections"] == 1)  # the small holder is still there
        snap = emu.snapshot()
        assert snap["evicted_connections"] == 1 and snap["incomplete_frame_bytes"] == 50_008
        small.close()
        assert wait_for(lambda: emu.snapshot()["incomplete_frame_bytes"] == 0)
        # the SDK: a batch bigger than the whole budget cannot be held; the send fails (never silently). The
        # batch is bigger than the budget plus one socket read (asyncio reads at most 256 KiB at a time), so
        # before its last read the emulator holds more than the budget however the bytes arrive.
        with EventHubProducerClient.from_connection_string(emu.connection_string("lim"), retry_total=0) as p:
            with pytest.raises(EventHubError):
                p.send_batch([EventData(b"x" * 900_000)], partition_id="0")
            p.send_batch([EventData(b"x" * 1000)], partition_id="0")  # a normal one still goes through
        assert wait_for(lambda: emu.snapshot()["incomplete_frame_bytes"] == 0)


def test_websocket_frames_count_towards_the_budget():
    with EmulatorServer(EmulatorConfig(hubs=(HubConfig("lim", 1),), max_incomplete_frame_bytes=128 * 1024),
                        tls_port=None, wss_port=None) as emu:
        s = socket.create_connection(("127.0.0.1", emu.ws_port), timeout=5)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /$servicebus/websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: AMQPWSB10\r\n"
                   "\r\n").encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 101")
        s.sendall(bytes((0x82, 0x80 | 127)) + struct.pack(">Q", 8 * 1024 * 1024) + b"\x00\x00\x00\x00")
        try:
            for _ in range(20):
                s.sendall(b"\x00" * 32 * 1024)
        except OSError:
            pass
        assert wait_for(lambda: emu.snapshot()["evicted_connections"] == 1, 5)
        assert emu.snapshot()["incomplete_frame_bytes"] == 0
        s.close()


def test_max_frame_size_is_advertised_and_enforced():
    with _server(max_frame_size=65536) as emu:
        s = _opened(emu)
        assert _server_open(s).fields[2] == 65536
        s.sendall(struct.pack(">IBBH", 70_000, 2, 0, 0))
        assert _close_error(_read_all(s)) == "amqp:connection:framing-error"
        s.close()
        with EventHubProducerClient.from_connection_string(emu.connection_string("lim"), **FAST) as p:
            p.send_batch([EventData(b"z" * 200_000)], partition_id="0")  # the SDK splits it into 64 KiB frames
        assert emu.snapshot()["hubs"]["lim"]["partitions"]["0"]["retained_events"] == 1
