"""EmulatorServer: the emulator in a background thread (tests, harness) with a fault-injection API.

    from harness.emulator import EmulatorServer
    with EmulatorServer(config=None, port=0, control_port=0) as emu:   # or emu = EmulatorServer(...).start()
        conn_str = emu.connection_string("eh1")   # EntityPath included when a hub is given
        emu.delete_hub("eh1"); emu.recreate_hub("eh1")
        emu.age_out("eh1", partition="0", up_to_seq=10)      # or before_time=datetime/epoch-ms; partition=None: all
        emu.throttle(True, mode="reject")                    # 'reject' sends | 'detach' links; throttle(False) ends
        emu.drop_connections(graceful=False)                 # TCP abort (graceful: close amqp:connection:forced)
        emu.set_latency(50)                                  # ms added before every frame the emulator writes
        emu.steal("eh1", "0", "$Default", hold_s=0.0)        # receivers detached with amqp:link:stolen
        emu.snapshot()                                       # hubs/partitions/connections as a dict

Listeners (all on ``host``; port 0 = a free port, None = not started): ``port`` plain AMQP (emulator connection
strings), ``tls_port`` AMQP over TLS, ``ws_port`` AMQP over WebSockets (``ws://``), ``wss_port`` the same over TLS,
``kafka_port`` the Kafka protocol with SASL_PLAINTEXT and ``kafka_tls_port`` with SASL_SSL (kafka/ package).
TLS uses a CA the emulator makes with ``openssl`` (``ca_file``; kept in ``cert_dir`` when given, else in a
temporary directory removed on stop). A client given a host name and a credential always uses TLS and dials 5671
(443 for WebSockets) unless ``custom_endpoint_address`` names the port; ``emu.client_kwargs(transport)`` returns
those arguments::

    EventHubProducerClient(eventhub_name="eh1", credential=AzureNamedKeyCredential(name, key),
                           **emu.client_kwargs("amqps"))          # or "wss"
    EventHubProducerClient.from_connection_string(emu.connection_string("eh1"), **emu.client_kwargs("ws"))

``config`` is an EmulatorConfig, a path to a Config.json, or None for the defaults (see config.py). Credentials
are checked unless the config says ``accept_any_credential``: with no keys configured, a random key
``RootManageSharedAccessKey`` is made at construction; ``connection_string()`` and ``sas_key`` carry it. A port
that cannot be listened on raises ``ListenError`` (an InputError naming the listener, the port and, when it can be
found, the process holding it).
The same loop-side logic backs ``serve.serve_forever`` (foreground) and the HTTP control API (control.py).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import errno
import logging
import os
import shutil
import socket
import threading

from harness.errors import InputError
from .broker import Broker
from .config import DEFAULT_KEY, DEFAULT_KEY_NAME, EmulatorConfig, load_config
from .connection import AmqpConnection
from .kafka.server import KafkaEndpoint, kafka_factory
from .tls import TlsUnavailable, ensure_certificates
from .websocket import PATH as WEBSOCKET_PATH
from .websocket import WebSocketAmqp

log = logging.getLogger(__name__)
TRANSPORTS = ("amqps", "wss", "ws")
LISTENER_FLAGS = {"amqp": "--port", "amqps": "--tls-port", "ws": "--ws-port", "wss": "--wss-port",
                  "control": "--control-port", "kafka": "--kafka-port", "kafka_tls": "--kafka-tls-port"}


class ListenError(InputError):
    """A listener could not bind: the message names the option, the address and why (who holds the port)."""


def generated_key() -> str:
    """A key shaped like Azure's (base64 of 32 random bytes)."""
    return base64.b64encode(os.urandom(32)).decode("ascii")


def with_credentials(cfg: EmulatorConfig) -> EmulatorConfig:
    """``cfg`` with Microsoft's emulator's well-known key (RootManageSharedAccessKey = ``SAS_KEY_VALUE``, the one
    in its documentation and samples) when it has none and credentials are checked: code written against that
    emulator connects unchanged, and a token signed with any other key is still refused. A random key only when
    asked for (``harness emulator serve --generate-key``)."""
    if cfg.sas_keys or cfg.accept_any_credential:
        return cfg
    return dataclasses.replace(cfg, sas_keys={DEFAULT_KEY_NAME: DEFAULT_KEY})


def port_holder(port: int) -> str:
    """'pid 123 (python -m harness.emulator)' for who listens on ``port``, or '' when that cannot be seen."""
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    cmd = " ".join(" ".join(psutil.Process(conn.pid).cmdline()).split())[:120]  # one line
                except psutil.Error:
                    cmd = ""
                return f"pid {conn.pid}" + (f" ({cmd})" if cmd else "")
    except Exception:  # noqa: BLE001 - psutil missing or not allowed to look: the error stays without the holder
        pass
    return ""


def listen_error(listener: str, host: str, port: int, exc: OSError) -> ListenError:
    flag = LISTENER_FLAGS.get(listener, listener)
    where = f"{flag} {port}: cannot listen on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        return ListenError(f"{where}: the port is already in use" + (f" by {holder}" if holder else "")
                           + "; choose another port or 0 for any free one")
    if exc.errno == errno.EACCES:
        return ListenError(f"{where}: permission denied (ports below 1024 need privileges); choose a port from "
                           "1024 to 65535 or 0 for any free one")
    if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        return ListenError(f"{where}: {exc.strerror or exc} (--host must be an address of this machine, such as "
                           "127.0.0.1)")
    return ListenError(f"{where}: {exc.strerror or exc}")


class EmulatorCore:
    """The listening emulator on the current event loop (AMQP listeners, broker and optional control API)."""

    def __init__(self, config: EmulatorConfig | str | None = None, host: str = "127.0.0.1", port: int = 0,
                 control_port: int | None = None, *, tls_port: int | None = 0, ws_port: int | None = 0,
                 wss_port: int | None = 0, cert_dir: str | None = None, kafka_port: int | None = 0,
                 kafka_tls_port: int | None = 0, kafka_connection_log: str | None = None) -> None:
        self.cfg = with_credentials(config if isinstance(config, EmulatorConfig) else load_config(config))
        self.host = host
        self.requested_port = port
        self.requested_control_port = control_port
        self.requested = {"tls": tls_port, "ws": ws_port, "wss": wss_port, "kafka": kafka_port,
                          "kafka_tls": kafka_tls_port}
        self.cert_dir = cert_dir
        self.port = 0
        self.tls_port: int | None = None
        self.ws_port: int | None = None
        self.wss_port: int | None = None
        self.kafka_port: int | None = None  # Kafka protocol, SASL_PLAINTEXT (as Microsoft's emulator on 9092)
        self.kafka_tls_port: int | None = None  # Kafka protocol, SASL_SSL (as the service on 9093)
        self.kafka: KafkaEndpoint | None = None
        self.kafka_connection_log = kafka_connection_log  # JSON lines, one per Kafka connection (kafka/server.py)
        self.ca_file: str | None = None
        self.tls_error: str | None = None  # why TLS listeners are missing, if they are
        self.control_port: int | None = None
        self.broker: Broker | None = None
        self._servers: list = []
        self._owned_cert_dir: str | None = None
        self._control = None

    async def start(self) -> "EmulatorCore":
        loop = asyncio.get_running_loop()
        self.broker = Broker(self.cfg, loop)
        broker = self.broker

        def amqp():
            return AmqpConnection(broker)

        def websocket():
            return WebSocketAmqp(amqp, loop)

        try:
            await self._start_listeners(loop, amqp, websocket)
        except BaseException:
            await self.stop()  # what did start must not outlive the failure
            raise
        return self

    async def _start_listeners(self, loop, amqp, websocket) -> None:
        self.port = await self._listen(amqp, self.requested_port, listener="amqp")
        ssl_ctx = None
        if any(self.requested[k] is not None for k in ("tls", "wss", "kafka_tls")):
            try:
                files, self._owned_cert_dir = await loop.run_in_executor(None, ensure_certificates, self.cert_dir)
                ssl_ctx = files.server_context()
                self.ca_file = files.ca_file
            except TlsUnavailable as exc:
                self.tls_error = str(exc)
                log.warning("TLS and WSS listeners not started: %s", exc)
        if ssl_ctx is not None and self.requested["tls"] is not None:
            self.tls_port = await self._listen(amqp, self.requested["tls"], ssl_ctx, listener="amqps")
        if self.requested["ws"] is not None:
            self.ws_port = await self._listen(websocket, self.requested["ws"], listener="ws")
        if ssl_ctx is not None and self.requested["wss"] is not None:
            self.wss_port = await self._listen(websocket, self.requested["wss"], ssl_ctx, listener="wss")
        if self.requested["kafka"] is not None or self.requested["kafka_tls"] is not None:
            self.kafka = KafkaEndpoint(self.broker, self.kafka_connection_log)
        if self.requested["kafka"] is not None:
            self.kafka_port = await self._listen(kafka_factory(self.kafka, "kafka"), self.requested["kafka"],
                                                 listener="kafka")
        if ssl_ctx is not None and self.requested["kafka_tls"] is not None:
            self.kafka_tls_port = await self._listen(kafka_factory(self.kafka, "kafka_tls"),
                                                     self.requested["kafka_tls"], ssl_ctx, listener="kafka_tls")
        if self.requested_control_port is not None:
            from .control import ControlServer

            self._control = ControlServer(self)
            try:
                self.control_port = await self._control.start("127.0.0.1", self.requested_control_port)
            except OSError as exc:
                self._control = None
                raise listen_error("control", "127.0.0.1", self.requested_control_port, exc) from None

    async def _listen(self, factory, port: int, ssl_ctx=None, *, listener: str) -> int:
        try:
            server = await asyncio.get_running_loop().create_server(
                factory, self.host, port, reuse_address=True, backlog=512, ssl=ssl_ctx,
                ssl_handshake_timeout=10.0 if ssl_ctx is not None else None,
            )
        except OSError as exc:
            raise listen_error(listener, self.host, port, exc) from None
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._control is not None:
            await self._control.stop()
        for server in self._servers:
            server.close()
        if self.broker is not None:
            self.broker.shutdown()
            await asyncio.sleep(0.05)
            for conn in list(self.broker.connections):
                conn.abort()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2.0)
            except (asyncio.TimeoutError, Exception):
                pass
        if self._owned_cert_dir is not None:
            shutil.rmtree(self._owned_cert_dir, ignore_errors=True)
            self._owned_cert_dir = None

    def client_host(self) -> str:
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host

    @property
    def sas_key(self) -> tuple[str, str]:
        """(key name, key) that clients should sign with: the first configured (or generated) key."""
        return next(iter(self.cfg.sas_keys.items()), (DEFAULT_KEY_NAME, DEFAULT_KEY))

    def connection_string(self, hub: str | None = None, key_name: str | None = None, key: str | None = None,
                          host: str | None = None) -> str:
        if key_name is None:
            key_name, key_default = self.sas_key
            key = key if key is not None else key_default
        elif key is None:
            key = self.cfg.sas_keys.get(key_name, DEFAULT_KEY)
        if host is None:
            host = self.client_host()
        text = (
            f"Endpoint=sb://{host}:{self.port};SharedAccessKeyName={key_name};"
            f"SharedAccessKey={key};UseDevelopmentEmulator=true"
        )
        return text + (f";EntityPath={hub}" if hub else "")

    def endpoints(self) -> dict:
        """Where each listener is, for clients and the control API's /status."""
        return {
            "host": self.client_host(), "amqp_port": self.port, "amqps_port": self.tls_port,
            "ws_port": self.ws_port, "wss_port": self.wss_port, "websocket_path": WEBSOCKET_PATH,
            "kafka_port": self.kafka_port, "kafka_tls_port": self.kafka_tls_port,
            "ca_file": self.ca_file, "tls_error": self.tls_error,
        }

    def kafka_status(self) -> dict | None:
        """Counts for the control API's /status: Kafka connections (also in the total), waiting fetches, producers
        whose sequence numbers are kept, consumer groups; None when no Kafka listener runs."""
        return None if self.kafka is None else self.kafka.status()

    def client_kwargs(self, transport: str = "amqps") -> dict:
        """SDK client keyword arguments that reach this emulator over ``transport`` (one of TRANSPORTS).

        ``amqps`` / ``wss``: for ``EventHubProducerClient(eventhub_name=..., credential=..., **kwargs)``, i.e. a
        host name and a credential (TLS, verified against ``ca_file``). ``ws``: for ``from_connection_string(
        emu.connection_string(hub), **kwargs)`` (emulator mode, no TLS) over WebSockets.
        """
        from azure.eventhub import TransportType

        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
        port = {"amqps": self.tls_port, "wss": self.wss_port, "ws": self.ws_port}[transport]
        if port is None:
            why = f": {self.tls_error}" if self.tls_error and transport != "ws" else ""
            raise RuntimeError(f"the emulator has no {transport} listener{why}")
        kind = TransportType.Amqp if transport == "amqps" else TransportType.AmqpOverWebsocket
        kwargs = {"transport_type": kind, "custom_endpoint_address": f"sb://{self.client_host()}:{port}"}
        if transport != "ws":
            kwargs.update(fully_qualified_namespace="localhost", connection_verify=self.ca_file)
        return kwargs


class EmulatorServer:
    """Threaded wrapper around EmulatorCore; every method is safe to call from any thread."""

    def __init__(self, config: EmulatorConfig | str | None = None, host: str = "127.0.0.1", port: int = 0,
                 control_port: int | None = None, *, tls_port: int | None = 0, ws_port: int | None = 0,
                 wss_port: int | None = 0, cert_dir: str | None = None, kafka_port: int | None = 0,
                 kafka_tls_port: int | None = 0, kafka_connection_log: str | None = None) -> None:
        self.core = EmulatorCore(config, host, port, control_port, tls_port=tls_port, ws_port=ws_port,
                                 wss_port=wss_port, cert_dir=cert_dir, kafka_port=kafka_port,
                                 kafka_tls_port=kafka_tls_port, kafka_connection_log=kafka_connection_log)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stopped: asyncio.Event | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 10.0) -> "EmulatorServer":
        """Idempotent: `with EmulatorServer().start() as emu` must not start a second server."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="eventhubs-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("emulator did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)

        async def main():
            self._stopped = asyncio.Event()
            try:
                await self.core.start()
            except BaseException as exc:  # report to start()
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self._stopped.wait()
            await self.core.stop()

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        if self.loop is None or self._thread is None:
            return
        if self._stopped is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._stopped.set)
            except RuntimeError:
                pass
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> "EmulatorServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ info
    @property
    def port(self) -> int:
        return self.core.port

    @property
    def host(self) -> str:
        return self.core.host

    @property
    def tls_port(self) -> int | None:
        return self.core.tls_port

    @property
    def ws_port(self) -> int | None:
        return self.core.ws_port

    @property
    def wss_port(self) -> int | None:
        return self.core.wss_port

    @property
    def kafka_port(self) -> int | None:
        """Kafka endpoint, SASL_PLAINTEXT + PLAIN (user ``$ConnectionString``, password a connection string)."""
        return self.core.kafka_port

    @property
    def kafka_tls_port(self) -> int | None:
        """Kafka endpoint, SASL_SSL + PLAIN, with the certificate ``ca_file`` verifies."""
        return self.core.kafka_tls_port

    @property
    def ca_file(self) -> str | None:
        return self.core.ca_file

    def endpoints(self) -> dict:
        return self.core.endpoints()

    def client_kwargs(self, transport: str = "amqps") -> dict:
        return self.core.client_kwargs(transport)

    @property
    def control_port(self) -> int | None:
        return self.core.control_port

    @property
    def control_url(self) -> str | None:
        return None if self.core.control_port is None else f"http://127.0.0.1:{self.core.control_port}"

    @property
    def config(self) -> EmulatorConfig:
        return self.core.cfg

    @property
    def sas_key(self) -> tuple[str, str]:
        """(key name, key) a client signs with, e.g. ``AzureNamedKeyCredential(*emu.sas_key)``."""
        return self.core.sas_key

    def connection_string(self, hub: str | None = None, key_name: str | None = None, key: str | None = None) -> str:
        return self.core.connection_string(hub, key_name, key)

    # ------------------------------------------------------------------ loop-side calls
    def call(self, fn, *args, timeout: float = 10.0, **kwargs):
        """Run ``fn(*args, **kwargs)`` on the emulator loop and return its result (re-raising errors)."""

        async def runner():
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(runner(), self.loop).result(timeout)

    def delete_hub(self, hub: str) -> bool:
        return self.call(self.core.broker.delete_hub, hub)

    def recreate_hub(self, hub: str, partition_count: int | None = None) -> dict:
        return self.call(self.core.broker.recreate_hub, hub, partition_count)

    def age_out(self, hub: str, partition=None, up_to_seq: int | None = None, before_time=None) -> int:
        return self.call(self.core.broker.age_out, hub, partition, up_to_seq, before_time)

    def throttle(self, on: bool = True, mode: str = "reject") -> None:
        return self.call(self.core.broker.throttle, on, mode)

    def drop_connections(self, graceful: bool = False) -> int:
        return self.call(self.core.broker.drop_connections, graceful)

    def set_latency(self, ms: float) -> None:
        return self.call(self.core.broker.set_latency, ms)

    def steal(self, hub: str, partition, consumer_group: str = "$Default", hold_s: float = 0.0) -> int:
        return self.call(self.core.broker.steal, hub, partition, consumer_group, hold_s)

    def snapshot(self) -> dict:
        return self.call(self.core.broker.snapshot)
