"""A TCP proxy on loopback between the query under test and the brokers: where the network faults happen.

One listening port per broker, each forwarding to that broker's QUERY listener, which advertises the proxy's
port, so a client that bootstraps through the proxy stays behind it for every broker (Kafka answers metadata with
the advertised addresses of the listener the request came in on). Producers and the harness's admin use the
direct listener and are never shaped.

Faults are knobs set and cleared per injection id, so overlapping faults compose (the largest latency, the
smallest cap, any blackhole): latency (every chunk held this long, each direction, order kept), a bandwidth cap
(bytes/s per direction, one token bucket shared by all connections, like a link's capacity), blackhole (nothing
read or forwarded, new connections held before they reach the broker: TCP rides it out until it heals or a client
times out) and resets (every open connection closed with RST; with `reset_new`, every new one too).

Each connection is recorded with the client.id and correlation id of its first Kafka request header
(connections.jsonl): that is how consumer (re)creation is measured (reports.consumers), since every new Kafka client
instance gets a new client.id and its very first request has correlation id 0. It is in front of the query with a
network fault, or without any fault when the scenario asks (`backend.proxy = true`): `put_in_front`, once per run.

It runs as its own supervised process (`python -m harness.netproxy`): its own event loop and GIL, so shaping is
not disturbed by the runner and costs the runner nothing, and it ends with the run like every other child. The
harness drives it over a loopback control port, one JSON line per request and per reply.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import socket
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

CHUNK = 65536
QUEUED_CHUNKS = 64  # read but not yet forwarded, per direction of a connection (latency needs a pipeline)
HEADER = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, client_id length
MAX_REQUEST_BYTES = 104_857_600  # the broker's socket.request.max.bytes default: larger is no Kafka request
MAX_API_KEY, MAX_API_VERSION = 1000, 100  # far above today's (api keys < 100, versions < 20)
RESET_NEW_WAIT_S = 0.25  # a connection reset on arrival still gets this long to say who it is


# -- what a connection's first bytes say ---------------------------------------------------------------------------
def parse_request_header(buf: bytes) -> dict | None:
    """The first request's header (request header v1/v2: int32 size, int16 api_key, int16 api_version, int32
    correlation_id, int16 client_id length + UTF-8 bytes, -1 = null). None while more bytes are needed;
    ValueError for bytes that are no Kafka request."""
    if len(buf) < HEADER.size:
        return None
    size, api_key, api_version, correlation_id, n = HEADER.unpack_from(buf)
    if not (0 <= api_key <= MAX_API_KEY and 0 <= api_version <= MAX_API_VERSION and -1 <= n
            and HEADER.size - 4 + max(n, 0) <= size <= MAX_REQUEST_BYTES):
        raise ValueError(f"not a Kafka request header: {buf[:HEADER.size].hex()}")
    info = {"api_key": api_key, "api_version": api_version, "correlation_id": correlation_id, "client_id": None}
    if n >= 0:
        if len(buf) < HEADER.size + n:
            return None
        info["client_id"] = buf[HEADER.size:HEADER.size + n].decode("utf-8")  # UnicodeDecodeError is a ValueError
    return info


def role(client_id: str | None) -> str:
    """Spark's executor consumers use group `spark-kafka-source-<uuid>-<hash>-executor`, so their default
    client.id is `consumer-spark-kafka-source-...-executor-N`; the driver reads offsets with an admin client
    (`adminclient-N`) or, with the deprecated offset fetching, a `...-driver-N` consumer."""
    if client_id is None:
        return "unidentified"
    if "spark-kafka-source" in client_id and "executor" in client_id:
        return "executor"
    if "spark-kafka-source" in client_id or client_id.startswith("adminclient-"):
        return "driver"
    return "other"


ROLES = ("executor", "driver", "other", "unidentified")


# -- shaping --------------------------------------------------------------------------------------------------------
@dataclass
class Knobs:
    latency_ms: float = 0.0
    bytes_per_s: float | None = None
    blackhole: bool = False
    reset_new: bool = False

    @classmethod
    def combine(cls, entries: list[dict]) -> "Knobs":
        rates = [float(e["bytes_per_s"]) for e in entries if e.get("bytes_per_s")]
        return cls(latency_ms=max([float(e.get("latency_ms") or 0.0) for e in entries], default=0.0),
                   bytes_per_s=min(rates) if rates else None,
                   blackhole=any(e.get("blackhole") for e in entries),
                   reset_new=any(e.get("reset_new") for e in entries))


class Bucket:
    """Token bucket for one direction; holds 50 ms of the rate (at least 1 KiB), so the cap holds at any scale."""

    def __init__(self, proxy: "Proxy"):
        self.proxy = proxy
        self.tokens = 0.0
        self.last = time.monotonic()

    def burst(self) -> int:
        rate = self.proxy.knobs.bytes_per_s
        return CHUNK if rate is None else max(1024, int(rate / 20))

    async def take(self, n: int) -> None:
        while True:
            rate = self.proxy.knobs.bytes_per_s
            now = time.monotonic()
            if rate is None:
                self.tokens, self.last = 0.0, now
                return
            self.tokens = min(max(1024.0, rate / 20), self.tokens + (now - self.last) * rate)
            self.last = now
            if self.tokens >= n:
                self.tokens -= n
                return
            await asyncio.sleep(min(0.1, (n - self.tokens) / rate))


@dataclass(eq=False)
class Conn:
    id: int
    broker: int
    t: float
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    task: asyncio.Task | None = None
    head: bytes = b""
    header: dict | None = None
    recorded: bool = False

    def feed(self, data: bytes) -> bool:
        """Collects the first request's header; True once it is known (or known to be unparseable)."""
        if self.header is not None or self.recorded:
            return False
        self.head += data
        try:
            self.header = parse_request_header(self.head)
        except ValueError:  # a TLS record (0x16 0x03: a handshake) is no request: its size would be over 300 MB
            tls = self.head[:2] == b"\x16\x03"
            self.header = {"client_id": None, "error": "TLS: the request is encrypted (no client.id)" if tls
                           else "not a Kafka request"}
        if self.header is None and (not data or len(self.head) > CHUNK):
            self.header = {"client_id": None, "error": "no complete request header"}
        return self.header is not None


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with RST (SO_LINGER 0), as a middlebox dropping the connection does."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except (OSError, AttributeError):
        pass
    writer.transport.abort()


# -- the proxy ------------------------------------------------------------------------------------------------------
@dataclass
class Counters:
    """Connections forwarded to a broker and connections refused (reset on arrival) are kept apart."""

    accepted: int = 0
    refused: int = 0
    reset: int = 0  # open connections reset by a reset request
    bytes_up: int = 0
    bytes_down: int = 0
    by_client: dict[str, int] = field(default_factory=dict)
    by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    refused_by_client: dict[str, int] = field(default_factory=dict)
    refused_by_role: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))


class Proxy:
    def __init__(self, upstreams: list[tuple[str, int]], out_dir: Path):
        self.upstreams = upstreams
        self.out_dir = out_dir
        self.entries: dict[str, dict] = {}
        self.knobs = Knobs()
        self.conns: set[Conn] = set()
        self.counters = Counters()
        self.listen: list[str] = []
        self.control_addr = ""
        self._ids = itertools.count(1)
        self._servers: list[asyncio.base_events.Server] = []
        self._flowing: asyncio.Event | None = None
        self._buckets: dict[str, Bucket] = {}
        self._log = None

    async def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.out_dir / "connections.jsonl", "a", encoding="utf-8", buffering=1)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._buckets = {"up": Bucket(self), "down": Bucket(self)}
        for broker in range(len(self.upstreams)):
            server = await asyncio.start_server(lambda r, w, b=broker: self._accept(b, r, w), "127.0.0.1", 0)
            self._servers.append(server)
            self.listen.append("127.0.0.1:%d" % server.sockets[0].getsockname()[1])
        control = await asyncio.start_server(self._control, "127.0.0.1", 0)
        self._servers.append(control)
        self.control_addr = "127.0.0.1:%d" % control.sockets[0].getsockname()[1]

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.conns):
            self._drop(conn)
        await asyncio.sleep(0)
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- knobs ------------------------------------------------------------------------------------------------------
    def set(self, entry_id: str, **settings) -> None:
        self.entries[entry_id] = settings
        self._apply()

    def clear(self, entry_id: str) -> None:
        self.entries.pop(entry_id, None)
        self._apply()

    def _apply(self) -> None:
        self.knobs = Knobs.combine(list(self.entries.values()))
        if self.knobs.blackhole:
            self._flowing.clear()
        else:
            self._flowing.set()

    def reset_all(self) -> dict[str, int]:
        """RST every open connection; per client id, how many were cut ("" for a connection not yet identified)."""
        cut: dict[str, int] = {}
        for conn in list(self.conns):
            client_id = (conn.header or {}).get("client_id") or ""
            cut[client_id] = cut.get(client_id, 0) + 1
            self._drop(conn)
        self.counters.reset += sum(cut.values())
        return cut

    def _drop(self, conn: Conn) -> None:
        self.conns.discard(conn)
        _rst(conn.client)
        _rst(conn.server)
        if conn.task is not None and conn.task is not asyncio.current_task():
            conn.task.cancel()

    def stats(self) -> dict:
        """`connections`/`by_client`: connections forwarded to a broker; `refused*`: reset on arrival; `clients`:
        distinct client ids that got through, per role."""
        c = self.counters
        clients: dict[str, int] = dict.fromkeys(ROLES, 0)
        for client_id in c.by_client:
            clients[role(client_id)] += 1
        cpu = os.times()
        return {"accepted": c.accepted, "open": len(self.conns), "refused": c.refused, "reset": c.reset,
                "connections": dict(c.by_role), "clients": clients, "by_client": dict(c.by_client),
                "refused_by_role": dict(c.refused_by_role), "refused_by_client": dict(c.refused_by_client),
                "bytes": {"up": c.bytes_up, "down": c.bytes_down}, "cpu_s": round(cpu.user + cpu.system, 3),
                "knobs": asdict(self.knobs), "active": sorted(self.entries)}

    def _record(self, conn: Conn, refused: bool = False) -> None:
        conn.recorded = True
        info = conn.header or {}
        client_id = info.get("client_id")
        r = role(client_id)
        by_role, by_client = ((self.counters.refused_by_role, self.counters.refused_by_client) if refused else
                              (self.counters.by_role, self.counters.by_client))
        by_role[r] += 1
        if client_id is not None:
            by_client[client_id] = by_client.get(client_id, 0) + 1
        row = {"t": conn.t, "conn": conn.id, "broker": conn.broker, "client_id": client_id, "role": r,
               "api_key": info.get("api_key"), "api_version": info.get("api_version"),
               "correlation_id": info.get("correlation_id")}
        if refused:
            row["refused"] = True
        if info.get("error"):
            row["error"] = info["error"]
        if self._log is not None:
            self._log.write(json.dumps(row) + "\n")

    # -- connections ------------------------------------------------------------------------------------------------
    async def _accept(self, broker: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Conn(next(self._ids), broker, time.time(), writer, task=asyncio.current_task())
        self.counters.accepted += 1
        graceful = False
        try:
            if self.knobs.reset_new:
                await self._refuse(conn, reader)
                return
            self.conns.add(conn)
            await self._flowing.wait()  # blackhole: not even the connection reaches the broker
            host, port = self.upstreams[broker]
            try:
                up_reader, conn.server = await asyncio.open_connection(host, port)
            except OSError:
                _rst(writer)
                return
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(self._pipe(conn, reader, conn.server, "up"))
                    tg.create_task(self._pipe(conn, up_reader, writer, "down"))
                graceful = True  # both sides closed their end: let what is still buffered go out
            except* (OSError, RuntimeError):
                pass  # one side reset or failed: the other side is reset too
        except asyncio.CancelledError:
            pass  # reset, or the proxy stopping
        finally:
            if graceful:
                self.conns.discard(conn)
                writer.close()
                if conn.server is not None:
                    conn.server.close()
            else:
                self._drop(conn)
            if not conn.recorded:
                self._record(conn)

    async def _refuse(self, conn: Conn, reader: asyncio.StreamReader) -> None:
        try:
            data = await asyncio.wait_for(reader.read(CHUNK), RESET_NEW_WAIT_S)
            conn.feed(data)
            while conn.header is None and data:
                data = await asyncio.wait_for(reader.read(CHUNK), RESET_NEW_WAIT_S)
                conn.feed(data)
        except (TimeoutError, OSError):
            pass
        self.counters.refused += 1
        self._record(conn, refused=True)
        _rst(conn.client)

    async def _pipe(self, conn: Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    direction: str) -> None:
        """Read -> queue (stamped with when it may leave) -> write, so latency delays without throttling."""
        queue: asyncio.Queue = asyncio.Queue(QUEUED_CHUNKS)

        async def read() -> None:
            while True:
                await self._flowing.wait()
                data = await reader.read(CHUNK)
                if direction == "up" and conn.feed(data):
                    self._record(conn)
                await queue.put((time.monotonic() + self.knobs.latency_ms / 1000.0, data))
                if not data:
                    return

        async def write() -> None:
            bucket = self._buckets[direction]
            while True:
                due, data = await queue.get()
                if not data:
                    if writer.can_write_eof() and not writer.transport.is_closing():
                        writer.write_eof()
                    return
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                view = memoryview(data)
                while view:
                    piece = view[:bucket.burst()]
                    await self._flowing.wait()
                    await bucket.take(len(piece))
                    await self._flowing.wait()
                    writer.write(piece)
                    if direction == "up":
                        self.counters.bytes_up += len(piece)
                    else:
                        self.counters.bytes_down += len(piece)
                    view = view[len(piece):]
                    await writer.drain()

        await asyncio.gather(read(), write())

    # -- control ----------------------------------------------------------------------------------------------------
    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = {"ok": True, **self.handle(json.loads(line))}
                except Exception as exc:  # noqa: BLE001 - the caller gets the reason
                    reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "set":
            allowed = {"latency_ms", "bytes_per_s", "blackhole", "reset_new"}
            settings = {k: v for k, v in request.items() if k not in ("op", "id")}
            if set(settings) - allowed:
                raise ValueError(f"unknown settings {sorted(set(settings) - allowed)}; allowed: {sorted(allowed)}")
            self.set(str(request["id"]), **settings)
        elif op == "clear":
            self.clear(str(request["id"]))
        elif op == "reset":
            cut = self.reset_all()
            return {"reset": sum(cut.values()), "reset_clients": cut, "stats": self.stats()}
        elif op != "stats":
            raise ValueError(f"unknown op {op!r}; known: set, clear, reset, stats")
        return {"stats": self.stats()}


# -- the harness's side -----------------------------------------------------------------------------------------
def control(addr: str, request: dict, timeout: float = 10.0) -> dict:
    """One request to a running proxy; raises with the proxy's reason when it refuses."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(json.dumps(request).encode() + b"\n")
        line = s.makefile("rb").readline()
    if not line:
        raise ConnectionError(f"the network proxy at {addr} closed the control connection")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise RuntimeError(f"network proxy: {reply.get('error')}")
    return reply


@dataclass
class ProxyHandle:
    child: object  # harness.supervisor.Child
    listen: list[str]
    control: str
    out_dir: Path

    def call(self, op: str, **fields) -> dict:
        return control(self.control, {"op": op, **fields})


def start_proxy(supervisor, out_dir: Path, upstreams: list[str], timeout: float = 30.0) -> ProxyHandle:
    """Spawns the proxy through the supervisor and waits until it listens (it reports its ports in ready.json)."""
    import sys

    from harness.supervisor import wait_until  # the proxy process itself stays free of the harness

    out_dir.mkdir(parents=True, exist_ok=True)
    ready = out_dir / "ready.json"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "harness.netproxy", "--dir", str(out_dir)]
    for upstream in upstreams:
        argv += ["--upstream", upstream]
    child = supervisor.spawn("netproxy", argv, log_path=out_dir / "proxy.log")
    try:
        wait_until(ready.exists, timeout, 0.05, gone=lambda: None if child.alive() else RuntimeError(
            f"the network proxy exited at start-up (see {out_dir / 'proxy.log'})"),
                   timeout_message=lambda: f"the network proxy did not start within {timeout:.0f}s")
    except TimeoutError:
        supervisor.stop(child)
        raise
    info = json.loads(ready.read_text())
    return ProxyHandle(child, info["listen"], info["control"], out_dir)


def put_in_front(ctx) -> dict:
    """The proxy in front of the query's Kafka connections, once per run, whoever asks first (`backend.proxy`, a
    network fault): it starts before the brokers, whose QUERY listener advertises its ports, and the query
    bootstraps there. Returns what `ctx.netproxy` keeps (control address, ports, pid)."""
    from harness.loopback import free_port

    if ctx.netproxy:
        return ctx.netproxy
    backend = ctx.backend
    if not hasattr(backend, "add_listener"):
        raise RuntimeError("the network proxy needs the embedded Kafka backend (its brokers get the proxied "
                           "listener)")
    ports = [free_port() for _ in range(ctx.scenario.backend.nodes)]
    proxy = start_proxy(ctx.supervisor, ctx.run_dir / "services" / "proxy", [f"127.0.0.1:{p}" for p in ports])
    backend.add_listener("QUERY", list(zip(ports, proxy.listen)))
    backend.query_bootstrap = ",".join(proxy.listen)
    ctx.netproxy = info = {"control": proxy.control, "listen": proxy.listen,
                                    "upstream": [f"127.0.0.1:{p}" for p in ports], "pid": proxy.child.pid}
    ctx.timeline.add("netproxy_ready", listen=proxy.listen, control=proxy.control)
    return info


async def _serve(upstreams: list[tuple[str, int]], out_dir: Path) -> None:
    from harness.files import atomic

    proxy = Proxy(upstreams, out_dir)
    await proxy.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    atomic.write_json(out_dir / "ready.json", {"pid": os.getpid(), "listen": proxy.listen,
                                               "control": proxy.control_addr, "upstreams": [
                                                   f"{h}:{p}" for h, p in upstreams]})
    await stop.wait()
    atomic.write_json(out_dir / "stats.json", proxy.stats())
    await proxy.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.netproxy", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path, help="where connections.jsonl and ready.json go")
    parser.add_argument("--upstream", action="append", required=True, help="host:port, one per broker")
    args = parser.parse_args(argv)
    upstreams = [(u.rsplit(":", 1)[0], int(u.rsplit(":", 1)[1])) for u in args.upstream]
    asyncio.run(_serve(upstreams, args.dir))


if __name__ == "__main__":
    main()
