"""The Kafka listeners' connection protocol (``KafkaSession``) and what all connections share (``KafkaEndpoint``).

A connection reads size-prefixed request frames, answers them strictly one at a time and in order (as a Kafka
broker does: it mutes a connection while one of its requests is in progress, which is what lets a Fetch long-poll
without reordering responses), and writes each response as one ``size + header + body`` join.

Hygiene, as the AMQP side has it: a size prefix above ``Emulator.MaxFrameSizeBytes`` (or below a header's size)
closes the connection before any of the body is read; bytes of an unfinished request count towards the shared
incomplete-frame budget (``Broker.hold``) with the requests read ahead and not yet answered and the responses
the client has not read yet (the transport's buffer, responses a latency fault holds back), and the budget's
evictions drop the connection holding most at once (a client that does not read would never take a graceful
close's last bytes); connections count
towards ``MaxConnections`` (over it, the socket is closed at once: Kafka has no way to say why before a request);
a connection that has not authenticated within 30 s or stays silent for ``IdleTimeoutSeconds`` is closed; while
the client does not read its responses (the transport's write buffer is full) no further request is processed
and reading pauses, so a slow reader holds at most one response and a bounded queue of requests.

Faults reach these connections through the broker: ``drop_connections`` calls ``abort``/``close``, latency
delays every response by ``broker.latency_s``, throttling is applied by the Produce and Fetch handlers.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
from collections import deque
from pathlib import Path

import harness.emulator.kafka.apis as apis
import harness.emulator.kafka.errors as E
from harness.files.jsonl import append_jsonl
from .wire import ProtocolError, Reader

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id (then client_id, nullable string)
_CORR = struct.Struct(">i")
_ZERO_TAGS = b"\x00"
HANDSHAKE_TIMEOUT_S = 30.0  # from connect to a completed SaslAuthenticate
CLOSE_LINGER_S = 5.0  # a closed connection's unread responses wait this long for the client, then are dropped
UNREAD_RECHECK_S = 0.25  # how often the bytes a client has not read are counted again while there are any
EXPIRY_CHECK_S = 60.0  # how often expired producer and group state is looked for (at most)
QUEUE_BYTES = 8 * 1024 * 1024  # requests read ahead of the one being answered before reading pauses
API_VERSIONS_KEY = 18
CLUSTER_ID = "emulator-kafka-endpoint"  # 22 characters, like a Kafka cluster id's printed length
BROKER_ID = 0


class KafkaEndpoint:
    """State shared by every Kafka connection of one emulator: the broker, consumer groups, producer ids.

    ``groups`` is the consumer-group coordinator (groups.py), ``sequences`` the idempotent-producer state (per
    partition and producer id its epoch and last batches' sequence numbers, as a Kafka partition leader keeps it);
    both expire (``expire``). Hub faults reach waiting fetches through ``hub_changed`` (registered with the
    broker).

    ``connection_log``: a JSON-lines file that gets one row per connection when its first request after the
    sign-in is read: the requests before it carry the client library's own correlation ids (the Java client's
    reserved one for its SASL requests) and, from the Java admin client, no client.id, so only the first request
    after SASL says which client instance this is and whether it is the instance's first connection (correlation
    id 0). Connections that never sign in get no row (``t`` = connect time, ``conn``, ``listener``, ``client_id``, ``api_key``, ``api_version``,
    ``correlation_id``), the shape harness.netproxy writes, so a run counts Kafka consumer (re)creations on the
    Event Hubs endpoint as it counts them through its proxy (harness.analysis.consumers).
    """

    def __init__(self, broker, connection_log: str | Path | None = None) -> None:
        self.broker = broker
        self.connection_log = Path(connection_log) if connection_log else None
        self.connection_ids = itertools.count(1)
        self.cluster_id = CLUSTER_ID
        self.api_table = apis.TABLE
        self.groups = apis.group_coordinator(broker)
        self.next_producer_id = itertools.count(1000)
        self.sequences: dict = {}  # PartitionLog -> {producer id: handlers_produce.ProducerState}
        self.fetch_waiters: set = set()
        self._next_expiry = 0.0
        broker.hub_listeners.append(self.hub_changed)
        broker.tick_listeners.append(self.expire)

    def advertised(self, session) -> tuple[str, int]:
        """Where clients reach this broker: the address and port the client connected to."""
        return session.local_host, session.local_port

    def status(self) -> dict:
        conns = [c for c in self.broker.connections if isinstance(c, KafkaSession)]
        return {"connections": len(conns), "authenticated": sum(c.principal is not None for c in conns),
                "requests": sum(c.requests_served for c in conns), "waiting_fetches": len(self.fetch_waiters),
                "producer_ids": len({pid for producers in self.sequences.values() for pid in producers}),
                "consumer_groups": len(self.groups.groups)}

    def expire(self, now: float) -> None:
        """Forget what a Kafka broker forgets (the broker's one-second tick calls this; the work is done at most
        every EXPIRY_CHECK_S, or a quarter of the shorter expiry): an idempotent producer's state in a partition
        ``ProducerIdExpirationMs`` after its last write, an empty group's offsets ``OffsetsRetentionMs`` after it
        was last used (GroupCoordinator.expire_offsets)."""
        cfg = self.broker.cfg
        if now < self._next_expiry:
            return
        self._next_expiry = now + min(EXPIRY_CHECK_S, min(cfg.producer_id_expiration_ms,
                                                          cfg.offsets_retention_ms) / 4000)
        oldest = now - cfg.producer_id_expiration_ms / 1000
        for partition in list(self.sequences):
            producers = self.sequences[partition]
            for pid in [pid for pid, state in producers.items() if state.last_write <= oldest]:
                del producers[pid]
            if not producers:
                del self.sequences[partition]
        self.groups.expire_offsets(now - cfg.offsets_retention_ms / 1000)

    def hub_changed(self, hub_name: str) -> None:
        """A hub was deleted, recreated or aged out: wake every waiting fetch so it re-reads the partition."""
        for waiter in list(self.fetch_waiters):
            waiter.wake()
        live = {id(p) for hub in self.broker.hubs.values() for p in hub.partitions.values()}
        for key in [k for k in self.sequences if id(k) not in live]:
            del self.sequences[key]


class KafkaSession(asyncio.Protocol):
    """One client connection on ``listener`` ("kafka" = SASL_PLAINTEXT, "kafka_tls" = SASL_SSL)."""

    def __init__(self, endpoint: KafkaEndpoint, listener: str) -> None:
        self.endpoint = endpoint
        self.broker = endpoint.broker
        self.listener = listener
        self.client_id = ""
        self.principal: str | None = None
        self.scope = ""  # the entity path the credential grants ("": the whole namespace), as on AMQP links
        self.sasl_mechanism: str | None = None  # set by a successful SaslHandshake
        self.closed = False
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.local_host = "127.0.0.1"
        self.local_port = 0
        self.requests_served = 0
        self.connected_at = time.time()
        self._logged = endpoint.connection_log is None
        self._buf = bytearray()
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._wake = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._reading_paused = False
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._handshake_due = 0.0
        self._last_read = time.monotonic()
        self._delayed: deque = deque()
        self._delayed_bytes = 0
        self._recheck: asyncio.TimerHandle | None = None
        self._delay_timer: asyncio.TimerHandle | None = None
        self._max_request = self.broker.cfg.max_frame_size

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("sockname")
        if sock:
            self.local_host = "127.0.0.1" if sock[0] in ("0.0.0.0", "::", "::1") else sock[0]
            self.local_port = sock[1]
        transport.set_write_buffer_limits(high=4 * 1024 * 1024, low=1024 * 1024)
        if self.broker.over_connection_limit():
            log.info("kafka connection %s refused: Emulator.MaxConnections (%d) reached", self.peer,
                     self.broker.cfg.max_connections)
            self.closed = True
            transport.abort()
            return
        self.broker.register(self)
        self._handshake_due = time.monotonic() + HANDSHAKE_TIMEOUT_S
        self._task = self.broker.loop.create_task(self._serve())
        self._arm()

    def connection_lost(self, exc) -> None:
        self.closed = True
        for handle in (self._timer, self._delay_timer, self._recheck):
            if handle is not None:
                handle.cancel()
        self._timer = self._delay_timer = self._recheck = None
        self._delayed.clear()
        self._delayed_bytes = 0
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._buf = bytearray()
        self._queue.clear()
        self._queued_bytes = 0
        self._wake.set()
        self._writable.set()
        self.broker.unregister(self)

    def pause_writing(self) -> None:
        self._writable.clear()
        self._report()

    def resume_writing(self) -> None:
        self._writable.set()
        self._report()

    def eof_received(self):
        return None  # the client is done: close our side too

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_read = time.monotonic()
        buf = self._buf
        buf += data
        pos, end, limit = 0, len(buf), self._max_request
        while end - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < _HEADER.size + 2 or size > limit:
                self._refuse(f"request size {size} outside 10..{limit} bytes (Emulator.MaxFrameSizeBytes)")
                return
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            self._queue.append(frame)
            self._queued_bytes += size
        if pos:
            del buf[:pos]
            self._wake.set()
        if self._queued_bytes > QUEUE_BYTES and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._report()

    # ------------------------------------------------------------------ requests
    async def _serve(self) -> None:
        try:
            while not self.closed:
                if not self._queue:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                await self._writable.wait()
                if self.closed:
                    return
                frame = self._queue.popleft()
                self._queued_bytes -= len(frame)
                self._report()
                if self._reading_paused and self._queued_bytes <= QUEUE_BYTES // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()
                await self._handle(frame)
        except asyncio.CancelledError:
            pass
        except ProtocolError as exc:
            log.info("kafka connection %s closed: %s", self.peer, exc)
            self.close()
        except Exception:  # a bug here must not take the emulator down: close this connection only
            log.exception("internal error on kafka connection %s", self.peer)
            self.close()

    async def _handle(self, frame: bytes) -> None:
        key, version, correlation = _HEADER.unpack_from(frame, 0)
        r = Reader(frame, _HEADER.size)
        self.client_id = r.nullable_string() or ""
        if not self._logged and self.principal is not None:
            self._log_connection(key, version, correlation)
        api = apis.BY_KEY.get(key)
        if api is None:
            raise ProtocolError(f"API key {key} is not served by this endpoint (client {self.client_id!r})")
        if self.principal is None and not api.before_auth:
            raise ProtocolError(f"{api.name} before SASL authentication completed")
        if not api.min_version <= version <= api.max_version:
            if key == API_VERSIONS_KEY:  # answered in v0's shape, so any client can read which versions we have
                self._respond(correlation, apis.unsupported_api_versions(), flexible=False)
                return
            raise ProtocolError(f"{api.name} v{version} is not supported "
                                f"(v{api.min_version}..v{api.max_version})")
        flex = api.flexible(version)
        if flex:
            r.tagged_fields()
        body = await api.handler(self, version, r)
        self.requests_served += 1
        if body is not None and not self.closed:  # None: no response (Produce with acks=0)
            self._respond(correlation, body, flexible=flex and key != API_VERSIONS_KEY)

    def _log_connection(self, key: int, version: int, correlation: int) -> None:
        self._logged = True
        row = {"t": self.connected_at, "conn": next(self.endpoint.connection_ids), "listener": self.listener,
               "client_id": self.client_id, "api_key": key, "api_version": version, "correlation_id": correlation}
        try:
            append_jsonl(self.endpoint.connection_log, row)
        except OSError as exc:  # the log is evidence, not service: a full disk must not stop the endpoint
            log.warning("kafka connection log %s: %s", self.endpoint.connection_log, exc)

    def _respond(self, correlation: int, body: bytes, *, flexible: bool) -> None:
        head = _CORR.pack(correlation) + (_ZERO_TAGS if flexible else b"")
        self._write(b"".join((_SIZE.pack(len(head) + len(body)), head, body)))

    def _write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        delay = self.broker.latency_s
        if delay > 0 or self._delayed:
            self._delayed.append((time.monotonic() + delay, data))
            self._delayed_bytes += len(data)
            if self._delay_timer is None:
                self._delay_timer = self.broker.loop.call_later(delay, self._drain_delayed)
        else:
            transport.write(data)
        self._report()

    def _drain_delayed(self) -> None:
        self._delay_timer = None
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now + 0.0005:
            data = self._delayed.popleft()[1]
            self._delayed_bytes -= len(data)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(data)
        if self._delayed:
            self._delay_timer = self.broker.loop.call_later(max(0.0, self._delayed[0][0] - now),
                                                            self._drain_delayed)
        self._report()

    # ------------------------------------------------------------------ what this connection holds
    def _unread(self) -> int:
        """Response bytes written for the client and not taken by it yet: the transport's buffer (beyond what the
        kernel's socket buffers absorbed) and responses a latency fault holds back."""
        buffered = 0
        if self.transport is not None and not self.transport.is_closing():
            buffered = self.transport.get_write_buffer_size()
        return buffered + self._delayed_bytes

    def _report(self) -> None:
        """Tell the shared budget (Broker.hold) what this connection holds: an unfinished request, requests read
        ahead and responses not read. asyncio says when its buffer passes the high and low water marks only, so
        while anything is unread it is counted again every UNREAD_RECHECK_S, and a client that did read is not
        blamed for bytes it has taken."""
        if self.closed:
            return
        unread = self._unread()
        self.broker.hold(self, len(self._buf) + self._queued_bytes + unread)
        if unread and self._recheck is None and not self.closed:
            self._recheck = self.broker.loop.call_later(UNREAD_RECHECK_S, self._recount)

    def _recount(self) -> None:
        self._recheck = None
        self._report()

    def authenticated(self, principal: str, scope: str = "") -> None:
        """SaslAuthenticate succeeded: other APIs are allowed from now on, on the hubs `scope` covers."""
        self.principal, self.scope = principal, scope
        self._arm()

    def covers(self, name: str) -> bool:
        """Whether the credential reaches hub `name` (a namespace credential reaches every hub; one signed for a
        hub only that hub), as the AMQP side checks a link's address against the tokens put for it."""
        return not self.scope or self.scope == str(name).lower()

    def hub(self, name):
        """The hub named `name` when it exists and the credential reaches it; None otherwise (topic_error says
        which)."""
        hub = self.broker.hub(name)
        return hub if hub is not None and self.covers(name) else None

    def topic_error(self, name) -> int:
        """Why hub() gave None: the hub exists but lies outside the credential (TOPIC_AUTHORIZATION_FAILED, as the
        service answers a hub-scoped credential), or it does not exist (UNKNOWN_TOPIC_OR_PARTITION)."""
        if self.broker.hub(name) is not None and not self.covers(name):
            return E.TOPIC_AUTHORIZATION_FAILED
        return E.UNKNOWN_TOPIC_OR_PARTITION

    # ------------------------------------------------------------------ closing (also the broker's fault calls)
    def _refuse(self, why: str) -> None:
        log.info("kafka connection %s closed: %s", self.peer, why)
        self.close()

    def refuse_buffered(self, condition: str, description: str) -> None:
        """The namespace-wide budget for what clients make the emulator hold ran out and we held most
        (Broker.hold): dropped at once, unread responses with it (a graceful close would wait for a reader that
        does not read)."""
        log.info("kafka connection %s dropped: %s: %s", self.peer, condition, description)
        self._buf = bytearray()
        self._queue.clear()
        self._queued_bytes = 0
        self.abort()

    def close(self, condition: str | None = None, description: str | None = None, *, linger: bool = False) -> None:
        """Close after pending (possibly delayed) responses; Kafka has no goodbye frame to carry ``condition``."""
        if self.closed:
            return
        self.closed = True
        self._wake.set()
        if condition:
            log.info("closing kafka connection %s: %s %s", self.peer, condition, description)
        if self._delayed:
            self.broker.loop.call_later(self.broker.latency_s + 0.01, self._close_transport)
        else:
            self._close_transport()

    def _close_transport(self) -> None:
        """Close after the responses written so far; a client that has not taken them within CLOSE_LINGER_S
        is not going to, and is dropped rather than left holding them."""
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.close()
            if transport.get_write_buffer_size():
                self.broker.loop.call_later(CLOSE_LINGER_S, transport.abort)

    def abort(self) -> None:
        """Drop the TCP connection at once (fault injection, shutdown)."""
        self.closed = True
        self._wake.set()
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ the connection's one timer
    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.closed:
            return
        if self.principal is None:
            due = self._handshake_due
        elif self.broker.cfg.idle_timeout_s:
            due = self._last_read + self.broker.cfg.idle_timeout_s
        else:
            return
        self._timer = self.broker.loop.call_at(max(due, time.monotonic() + 0.01), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.closed:
            return
        now = time.monotonic()
        if self.principal is None and now >= self._handshake_due:
            self._refuse("SASL authentication not completed in time")
            return
        idle = self.broker.cfg.idle_timeout_s
        if self.principal is not None and idle and now - self._last_read >= idle and not self._busy():
            self._refuse(f"inactive for more than {int(idle * 1000)} ms")
            return
        self._arm()

    def _busy(self) -> bool:
        """A long-polling fetch is not idleness."""
        return bool(self._queue) or any(w.session is self for w in self.endpoint.fetch_waiters)


def kafka_factory(endpoint: KafkaEndpoint, listener: str):
    def make() -> KafkaSession:
        return KafkaSession(endpoint, listener)

    return make
