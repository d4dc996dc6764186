"""TLS (AMQPS) and AMQP-over-WebSockets listeners: the unmodified SDK over each, and the RFC 6455 server itself."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
import struct
import threading
import urllib.request

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.aio import EventHubProducerClient as AsyncProducer
from azure.eventhub.exceptions import AuthenticationError, EventHubError

from emulator_helpers import FAST, collect

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig, sas
from harness.emulator.websocket import accept_key, unmask

HUB = "transports"


def _last_seq(emu, pid="0"):
    return emu.snapshot()["hubs"][HUB]["partitions"][pid]["last_enqueued_sequence_number"]


# ---------------------------------------------------------------------------------------------- endpoints


def test_listeners_and_ca_are_exposed(emulator):
    ports = [emulator.port, emulator.tls_port, emulator.ws_port, emulator.wss_port]
    assert all(isinstance(p, int) and p > 0 for p in ports) and len(set(ports)) == 4
    assert os.path.isfile(emulator.ca_file)
    ssl.create_default_context(cafile=emulator.ca_file)  # a CA clients can load
    with urllib.request.urlopen(f"{emulator.control_url}/status", timeout=10) as resp:
        status = json.loads(resp.read())
    assert status["endpoints"]["amqps_port"] == emulator.tls_port
    assert status["endpoints"]["wss_port"] == emulator.wss_port
    assert status["endpoints"]["ca_file"] == emulator.ca_file
    assert status["endpoints"]["websocket_path"] == "/$servicebus/websocket"


def test_certificate_verifies_for_loopback_names(emulator):
    ctx = ssl.create_default_context(cafile=emulator.ca_file)
    for name in ("localhost", "127.0.0.1"):
        with socket.create_connection(("127.0.0.1", emulator.tls_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=name) as tls:
                assert tls.version() in ("TLSv1.2", "TLSv1.3")
    untrusted = ssl.create_default_context()  # the system CAs do not know the emulator's CA
    with socket.create_connection(("127.0.0.1", emulator.tls_port), timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            untrusted.wrap_socket(raw, server_hostname="localhost")


# ---------------------------------------------------------------------------------------------- the SDK over TLS / WS


@pytest.mark.parametrize("transport", ["amqps", "wss"])
def test_sdk_with_host_name_and_credential(emu, transport):
    before = _last_seq(emu)
    kwargs = emu.client_kwargs(transport)
    cred = AzureNamedKeyCredential(*emu.sas_key)  # the key the emulator generated at start
    with EventHubProducerClient(eventhub_name=HUB, credential=cred, **kwargs, **FAST) as p:
        assert p.get_partition_ids() == ["0", "1"]
        p.send_batch([EventData(f"over {transport}")], partition_id="0")
    assert _last_seq(emu) == before + 1
    c = EventHubConsumerClient(eventhub_name=HUB, consumer_group="$Default", credential=cred, **kwargs, **FAST)
    got = collect(c, 1, partition_id="0", starting_position=before, starting_position_inclusive=False)
    assert [e.body_as_str() for e in got] == [f"over {transport}"]


def test_sdk_over_plain_websocket_with_emulator_connection_string(emu):
    before = _last_seq(emu, "1")
    with EventHubProducerClient.from_connection_string(emu.connection_string(HUB), **emu.client_kwargs("ws"),
                                                       **FAST) as p:
        p.send_batch([EventData(b"x" * 300_000)], partition_id="1")  # several WebSocket-carried AMQP frames
    c = EventHubConsumerClient.from_connection_string(emu.connection_string(HUB), consumer_group="$Default",
                                                      **emu.client_kwargs("ws"), **FAST)
    got = collect(c, 1, partition_id="1", starting_position=before)
    assert len(got[0].body_as_str()) == 300_000


def test_custom_endpoint_without_transport_type(emu):
    """The custom-endpoint sample's way (no transport_type): the SDK then dials plain AMQP to that port for some
    connections, which the WebSocket listener serves as well."""
    before = _last_seq(emu)
    kwargs = {"custom_endpoint_address": f"sb://127.0.0.1:{emu.ws_port}"}
    with EventHubProducerClient.from_connection_string(emu.connection_string(HUB), **kwargs, **FAST) as p:
        p.send_batch([EventData("custom endpoint")], partition_id="0")
    assert _last_seq(emu) == before + 1


class _ConnectProxy:
    """An HTTP CONNECT proxy on loopback that tunnels every request to ``upstream`` and records the targets.

    Behind a proxy the SDK asks for the namespace's WebSocket port (80 for ws://, 443 for wss://) whatever
    ``custom_endpoint_address`` says; the tunnel takes it to the emulator instead.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.targets: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return client.close()
            head += chunk
        self.targets.append(head.split(b" ")[1].decode())
        upstream = socket.create_connection(("127.0.0.1", self.upstream))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pump(src, dst):
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                dst.close()

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    def close(self) -> None:
        self.sock.close()


def test_sdk_behind_http_proxy_uses_websockets(emu):
    proxy = _ConnectProxy(emu.ws_port)
    try:
        http_proxy = {"proxy_hostname": "127.0.0.1", "proxy_port": proxy.port, "username": "u", "password": "p"}
        before = _last_seq(emu, "1")
        with EventHubProducerClient.from_connection_string(emu.connection_string(HUB), http_proxy=http_proxy,
                                                           **FAST) as p:
            p.send_batch([EventData("via proxy")], partition_id="1")
        assert _last_seq(emu, "1") == before + 1
        assert proxy.targets and set(proxy.targets) == {"127.0.0.1:80"}
    finally:
        proxy.close()


def test_sas_credential_over_tls_and_untrusted_ca_fails(emu):
    token = sas.make_token(f"sb://localhost/{HUB}", *emu.sas_key)
    with EventHubProducerClient(eventhub_name=HUB, credential=AzureSasCredential(token),
                                **emu.client_kwargs("amqps"), **FAST) as p:
        assert p.get_eventhub_properties()["eventhub_name"] == HUB
    kwargs = dict(emu.client_kwargs("amqps"), connection_verify=None)  # the certifi bundle: not our CA
    with EventHubProducerClient(eventhub_name=HUB, credential=AzureNamedKeyCredential(*emu.sas_key), retry_total=0,
                                **kwargs) as p:
        with pytest.raises(EventHubError, match="(?i)certificate"):
            p.get_partition_ids()


def test_async_sdk_over_tls(emu):
    async def main():
        async with AsyncProducer(eventhub_name=HUB, credential=AzureNamedKeyCredential(*emu.sas_key),
                                 **emu.client_kwargs("amqps"), **FAST) as p:
            await p.send_batch([EventData("async tls")], partition_id="1")
            return (await p.get_partition_properties("1"))["last_enqueued_sequence_number"]

    before = _last_seq(emu, "1")
    assert asyncio.run(main()) == before + 1


def test_sas_keys_are_checked_over_tls(tmp_path):
    cfg = EmulatorConfig(hubs=(HubConfig("secure", 1),), sas_keys={"app": "c2VjcmV0"})
    with EmulatorServer(cfg, ws_port=None, wss_port=None, cert_dir=str(tmp_path)) as server:
        assert server.ws_port is None and server.wss_port is None and server.tls_port
        assert server.ca_file == str(tmp_path / "ca.pem")
        good = AzureNamedKeyCredential("app", "c2VjcmV0")
        with EventHubProducerClient(eventhub_name="secure", credential=good, **server.client_kwargs("amqps"),
                                    **FAST) as p:
            p.send_batch([EventData("signed")])
        bad = AzureNamedKeyCredential("app", "d3Jvbmc=")
        with EventHubProducerClient(eventhub_name="secure", credential=bad, retry_total=0,
                                    **server.client_kwargs("amqps")) as p:
            with pytest.raises(AuthenticationError):
                p.send_batch([EventData("forged")])
        with pytest.raises(RuntimeError, match="no wss listener"):
            server.client_kwargs("wss")
        first_ca = open(server.ca_file).read()
    # a kept certificate directory is reused, so clients trusting its CA keep working across restarts
    with EmulatorServer(cfg, ws_port=None, wss_port=None, cert_dir=str(tmp_path)) as again:
        assert open(again.ca_file).read() == first_ca


# ---------------------------------------------------------------------------------------------- RFC 6455


def test_rfc6455_published_vectors():
    # RFC 6455 section 1.3: the example key and its accept value
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    # RFC 6455 section 5.7: a masked "Hello" (mask 37 fa 21 3d)
    assert unmask(bytes.fromhex("7f9f4d5158"), bytes.fromhex("37fa213d")) == b"Hello"


def _handshake(port, path="/$servicebus/websocket", protocol="AMQPWSB10", version="13"):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", f"Sec-WebSocket-Version: {version}"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, key, head.decode("latin-1")


def _send_frame(sock, opcode, payload=b"", masked=True, fin=True):
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    mask_bit = 0x80 if masked else 0
    head += bytes([mask_bit | n]) if n < 126 else bytes([mask_bit | 126]) + struct.pack(">H", n)
    if masked:
        mask = os.urandom(4)
        sock.sendall(head + mask + unmask(payload, mask))
    else:
        sock.sendall(head + payload)


def _read_frame(sock):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    b0, b1 = exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", exact(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", exact(8))[0]
    assert not b1 & 0x80, "server frames are never masked"
    return b0 & 0x0F, exact(n)


def test_handshake_ping_amqp_and_close(emulator):
    sock, key, head = _handshake(emulator.ws_port)
    with sock:
        assert head.startswith("HTTP/1.1 101 ")
        assert f"Sec-WebSocket-Accept: {accept_key(key)}" in head
        assert "Sec-WebSocket-Protocol: AMQPWSB10" in head
        _send_frame(sock, 0x9, b"are you there")
        assert _read_frame(sock) == (0xA, b"are you there")
        _send_frame(sock, 0x2, b"AMQP\x03\x01", fin=False)  # the SASL header, fragmented
        _send_frame(sock, 0x0, b"\x00\x00")
        got = b""
        while len(got) < 8:
            opcode, payload = _read_frame(sock)
            assert opcode == 0x2
            got += payload
        assert got[:8] == b"AMQP\x03\x01\x00\x00"  # the AMQP server answered through the WebSocket
        _send_frame(sock, 0x8, struct.pack(">H", 1000))
        while True:
            opcode, payload = _read_frame(sock)
            if opcode == 0x8:
                break
        assert struct.unpack(">H", payload[:2])[0] == 1000


@pytest.mark.parametrize("bad,code", [("unmasked", 1002), ("text", 1003), ("big-control", 1002)])
def test_protocol_violations_close_with_rfc_codes(emulator, bad, code):
    sock, _, head = _handshake(emulator.ws_port)
    with sock:
        assert head.startswith("HTTP/1.1 101 ")
        if bad == "unmasked":
            _send_frame(sock, 0x2, b"AMQP\x03\x01\x00\x00", masked=False)
        elif bad == "text":
            _send_frame(sock, 0x1, b"hello")
        else:
            _send_frame(sock, 0x9, b"x" * 200)
        opcode, payload = _read_frame(sock)
        assert opcode == 0x8 and struct.unpack(">H", payload[:2])[0] == code
        assert sock.recv(1) == b""  # and the server hangs up


@pytest.mark.parametrize("kw,status", [
    (dict(path="/other"), "404"), (dict(protocol=None), "400"), (dict(version="8"), "426"),
])
def test_bad_handshakes_are_refused(emulator, kw, status):
    sock, _, head = _handshake(emulator.ws_port, **kw)
    with sock:
        assert head.startswith(f"HTTP/1.1 {status} ")


def test_server_keeps_serving_after_bad_websocket_clients(emu):
    for _ in range(3):
        sock, _, _ = _handshake(emu.ws_port)
        sock.sendall(b"\x82\x7f" + b"\xff" * 8)  # a 2^64-1 byte frame: refused without buffering
        sock.close()
    with EventHubProducerClient.from_connection_string(emu.connection_string(HUB), **emu.client_kwargs("ws"),
                                                       **FAST) as p:
        assert p.get_partition_ids() == ["0", "1"]

