"""One client connection: protocol headers, SASL, open/begin/attach/flow/transfer/detach/end/close.

Runs as an ``asyncio.Protocol`` on the broker's loop. Every failure caused by the peer's bytes closes only this
connection with an AMQP error (``close`` frame, then the socket); nothing propagates into the loop. Output is
collected per callback and written with one ``transport.write``; when the transport's buffer is full
(``pause_writing``) deliveries to this client stop until it drains, so a slow reader costs only its own memory
bounded by the write-buffer high-water mark.

What a peer can make the emulator hold is bounded (limits in config.py): one timer per connection (handshake
deadline, idle time-out, heartbeats; re-armed, never accumulated), the connection count (``MaxConnections``:
beyond it a connection is answered with open + close ``amqp:resource-limit-exceeded``, and past
``REFUSING_MAX`` such refusals in progress it is dropped at once), silence (``IdleTimeoutSeconds``), and the bytes
of incomplete frames and multi-frame messages, reported to ``Broker.hold`` after every read.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid

import harness.emulator.service_errors as service_errors
from .addresses import (
    AddressError, FilterError, entity_uri, parse_filter, parse_receive_source, parse_send_target,
)
from .amqp.codec import DecodeError
from .amqp.frames import AMQP_HEADER, HEARTBEAT, SASL_HEADER, TYPE_AMQP, TYPE_SASL, FrameReader, frame
from .amqp.message import (
    BATCH_FORMAT, message_annotations, partition_key_of, runtime_annotations, split_batch, with_runtime_annotations,
)
from .amqp import performatives as P
from .amqp.types import Array, Described, Symbol, UByte, UInt, ULong, UShort
from .hub import now_ms
from .links import IN_CREDIT, KIND_CBS, KIND_HUB, KIND_MGMT, SESSION_WINDOW, InLink, OutLink, Session

log = logging.getLogger(__name__)

PRE_OPEN_FRAME_SIZE = 64 * 1024
CHANNEL_MAX = 255
MAX_LINKS_PER_SESSION = 1024
HANDSHAKE_TIMEOUT_S = 30.0
REFUSAL_TIMEOUT_S = 5.0  # a connection over MaxConnections gets this long to hear why
REFUSING_MAX = 256  # refusals in progress beyond which further connections are dropped without a word
LINGER_S = 2.0  # how long a refused connection stays open for the client to read why (see ``close``)
PUMP_BUDGET_BYTES = 512 * 1024  # per pump turn, so one busy consumer cannot starve other connections

RUNTIME_METRIC = "com.microsoft:enable-receiver-runtime-metric"
GEOREPLICATION = "com.microsoft:georeplication"
EPOCH = "com.microsoft:epoch"
RECEIVER_NAME = "com.microsoft:receiver-name"

_DELIV = struct.Struct(">IBBH6sBIBI2sI8s")
_DELIV_PERF = b"\x00\x53\x14\xc0\x19\x0b"
_DELIV_TAIL_LAST = b"\x43\x41\x42\x40\x40\x40\x40\x40"  # format 0, settled, more=false, 5 nulls
_DELIV_TAIL_MORE = b"\x43\x41\x41\x40\x40\x40\x40\x40"  # more=true
_DELIV_OVERHEAD = _DELIV.size
_ACCEPTED = Described(ULong(P.ACCEPTED), [])
_MASK32 = 0xFFFFFFFF


class AmqpConnection(asyncio.Protocol):
    def __init__(self, broker) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader(PRE_OPEN_FRAME_SIZE)
        self.state = "header"  # header -> sasl -> sasl-done -> open-wait -> opened -> closed
        self.sasl_used = False
        self.out: list = []
        self.sessions: dict[int, Session] = {}  # by the client's channel
        self.ended_channels: set[int] = set()  # ended by the client and not begun again
        self.remote_max_frame = 512
        self.remote_idle_s: float | None = None
        self.paused = False
        self.pump_scheduled = False
        self.closed = False
        self.peer = None
        self.authorized: set[str] = set()  # audience paths granted by CBS (only checked with SAS validation)
        self.container_id = f"emulator-{uuid.uuid4().hex[:12]}"
        self.refusal: tuple[str, str] | None = None  # (condition, description) to close with right after open
        self._timer: asyncio.TimerHandle | None = None  # the one timer of this connection
        self._handshake_due = 0.0
        self._partial_links: set = set()  # links reassembling a multi-frame message
        self._outer_held = 0  # bytes a wrapping layer (WebSocket) holds for this connection's next frame
        self._delayed: list[tuple[float, bytes]] = []
        self._delay_timer: asyncio.TimerHandle | None = None
        self._last_write = self._last_read = time.monotonic()

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        transport.set_write_buffer_limits(high=4 * 1024 * 1024, low=1024 * 1024)
        broker = self.broker
        timeout = HANDSHAKE_TIMEOUT_S
        if broker.over_connection_limit():
            if len(broker.refusing) >= REFUSING_MAX:
                self.closed = True
                self.state = "closed"
                transport.abort()
                return
            self.refusal = (service_errors.RESOURCE_LIMIT,
                            service_errors.connection_quota(broker.cfg.max_connections, broker.cfg.namespace))
            broker.refusing.add(self)
            timeout = REFUSAL_TIMEOUT_S
        else:
            broker.register(self)
        self._handshake_due = time.monotonic() + timeout
        self._arm()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.state = "closed"
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._delay_timer is not None:
            self._delay_timer.cancel()
        for session in list(self.sessions.values()):
            self._drop_session(session)
        self.sessions.clear()
        self.broker.unregister(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.schedule_pump()

    def data_received(self, data: bytes) -> None:
        if self.closed or self.state == "closed":
            return
        self._last_read = time.monotonic()
        try:
            pending = data
            while True:
                events = self.reader.feed(pending)
                pending = b""
                for ev in events:
                    if self.state == "closed":
                        return
                    if ev[0] == "header":
                        self._on_header(ev[1])
                    else:
                        self._on_frame(*ev)
                if not events or not self.reader.buf or self.state == "closed":
                    break
        except P.ProtocolError as exc:
            self.close(exc.condition, exc.description)
        except DecodeError as exc:
            self.close("amqp:decode-error", str(exc))
        except Exception as exc:  # a bug here must not take the server down
            log.exception("internal error on connection %s", self.peer)
            self.close("amqp:internal-error", f"{type(exc).__name__}: {exc}")
        finally:
            if self.state != "closed":
                self.broker.hold(self, self._held_bytes())
            else:
                self._release_buffers()
                self.broker.hold(self, 0)
            self.flush()

    def outer_buffered(self, nbytes: int) -> None:
        """The WebSocket layer holds ``nbytes`` of an unfinished frame of ours: count them with our own."""
        if self.closed or self.state == "closed":
            return
        self._outer_held = nbytes
        self.broker.hold(self, self._held_bytes())
        if self.state == "closed":
            self.flush()

    def _held_bytes(self) -> int:
        held = len(self.reader.buf) + self._outer_held
        if self._partial_links:
            done = [link for link in self._partial_links if link.partial is None]
            self._partial_links.difference_update(done)
            held += sum(len(link.partial) for link in self._partial_links)
        return held

    def _release_buffers(self) -> None:
        self.reader.buf = bytearray()
        self._outer_held = 0
        for link in self._partial_links:
            link.partial = None
            link.partial_first = None
        self._partial_links.clear()

    def refuse_buffered(self, condition: str, description: str) -> None:
        """Close because the namespace-wide budget for incomplete frames ran out (Broker.hold chose us).

        Before open there is no close frame to carry the reason: the socket is just shut."""
        self._release_buffers()
        self.close(condition, description, linger=True)

    # ------------------------------------------------------------------ output
    def send(self, channel: int, code: int, fields: list) -> None:
        self.out.append(frame(channel, P.encode_performative(code, fields)))

    def flush(self) -> None:
        if not self.out or self.transport is None:
            self.out.clear()
            return
        data = b"".join(self.out)
        self.out.clear()
        delay = self.broker.latency_s
        if delay > 0 or self._delayed:
            self._delayed.append((time.monotonic() + delay, data))
            if self._delay_timer is None:
                self._delay_timer = self.broker.loop.call_later(delay, self._drain_delayed)
            return
        if not self.transport.is_closing():
            self.transport.write(data)
            self._last_write = time.monotonic()

    def _drain_delayed(self) -> None:
        self._delay_timer = None
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now + 0.0005:
            _, data = self._delayed.pop(0)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(data)
                self._last_write = now
        if self._delayed:
            self._delay_timer = self.broker.loop.call_later(
                max(0.0, self._delayed[0][0] - now), self._drain_delayed
            )

    def close(self, condition: str | None = None, description: str | None = None, *, linger: bool = False) -> None:
        """Send close (with an error if given) and shut the socket after the pending output.

        ``linger``: keep the socket open (discarding what arrives) until the peer hangs up or LINGER_S passes. A
        client pipelines begin/attach behind its open; shutting at once turns those writes into a broken pipe that
        the SDK reports instead of the close's error condition, which is what a refusal must get across.
        """
        if self.state == "closed" or self.transport is None:
            return
        if condition:
            log.info("closing connection %s: %s %s", self.peer, condition, description)
        said = self.state in ("opened", "open-wait")
        if said:
            err = P.error(condition, description) if condition else None
            self.send(0, P.CLOSE, [err])
        self.state = "closed"
        self.flush()
        if linger and said:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.broker.loop.call_later(self.broker.latency_s + LINGER_S, self._close_transport)
        elif self._delayed:
            self.broker.loop.call_later(self.broker.latency_s + 0.01, self._close_transport)
        else:
            self._close_transport()

    def eof_received(self):
        return None  # the peer is done: close our side too (ends a lingering close at once)

    def _close_transport(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Drop the TCP connection without any AMQP goodbye (fault injection)."""
        self.state = "closed"
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ the connection's one timer
    def _next_due(self) -> float | None:
        if self.state == "closed":
            return None
        if self.state != "opened":
            return self._handshake_due
        due = None
        idle = self.broker.cfg.idle_timeout_s
        if idle:
            due = self._last_read + idle
        if self.remote_idle_s is not None:
            beat = self._last_write + self.remote_idle_s / 2
            due = beat if due is None else min(due, beat)
        return due

    def _arm(self) -> None:
        """(Re)schedule the single timer at the next deadline; the fired handle is dropped, so nothing piles up."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self._next_due()
        if due is not None and not self.closed:
            self._timer = self.broker.loop.call_at(max(due, time.monotonic() + 0.01), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.closed or self.state == "closed":
            return
        now = time.monotonic()
        if self.state != "opened":
            if now >= self._handshake_due:
                self.close("amqp:connection:forced", "handshake not completed in time")
                self.abort()
                return
        else:
            idle = self.broker.cfg.idle_timeout_s
            if idle and now - self._last_read >= idle:
                self.close("amqp:connection:forced",
                           service_errors.connection_inactive(int(idle * 1000), self.container_id), linger=True)
                return
            if (self.remote_idle_s is not None and now - self._last_write >= self.remote_idle_s / 2
                    and not self._delayed):
                self.out.append(HEARTBEAT)
                self.flush()
        self._arm()

    # ------------------------------------------------------------------ headers, SASL, open
    def _on_header(self, header: bytes) -> None:
        if self.state == "header" and header == SASL_HEADER:
            self.out.append(SASL_HEADER)
            mechs = Array(Symbol, [Symbol("ANONYMOUS"), Symbol("PLAIN")])
            self.out.append(frame(0, P.encode_performative(P.SASL_MECHANISMS, [mechs]), TYPE_SASL))
            self.state = "sasl"
            self.sasl_used = True
            return
        if header == AMQP_HEADER and self.state in ("header", "sasl-done"):
            self.out.append(AMQP_HEADER)
            self.state = "open-wait"
            self.reader.allowed_types = (TYPE_AMQP,)
            return
        # Unsupported protocol: answer with the header we do support, then hang up (AMQP 1.0 section 2.2).
        self.out.append(SASL_HEADER if self.state == "header" else AMQP_HEADER)
        self.state = "closed"
        self.flush()
        self._close_transport()

    def _on_frame(self, ftype: int, channel: int, body: bytes) -> None:
        if not body:
            return  # heartbeat
        if self.state == "sasl":
            if ftype != TYPE_SASL:
                raise P.ProtocolError("amqp:connection:framing-error", "expected a SASL frame")
            self._on_sasl(P.decode_body(body))
            return
        if ftype != TYPE_AMQP or self.state not in ("open-wait", "opened"):
            raise P.ProtocolError("amqp:connection:framing-error", f"unexpected frame in state {self.state}")
        perf = P.decode_body(body)
        code = perf.code
        if self.state == "open-wait":
            if code != P.OPEN:
                raise P.ProtocolError("amqp:illegal-state", f"expected open, got {perf.kind}")
            self._on_open(perf)
            return
        if channel in self.ended_channels and code in (P.DETACH, P.FLOW, P.DISPOSITION, P.TRANSFER):
            return  # the SDK can send a link's detach after its session's end when closing; nothing left to do
        if code == P.TRANSFER:
            self._on_transfer(channel, perf)
        elif code == P.FLOW:
            self._on_flow(channel, perf)
        elif code == P.DISPOSITION:
            pass  # everything we send is pre-settled
        elif code == P.ATTACH:
            self._on_attach(channel, perf)
        elif code == P.DETACH:
            self._on_detach(channel, perf)
        elif code == P.BEGIN:
            self._on_begin(channel, perf)
        elif code == P.END:
            self._on_end(channel, perf)
        elif code == P.CLOSE:
            self.send(0, P.CLOSE, [None])
            self.state = "closed"
            self.flush()
            self._close_transport()
        else:
            raise P.ProtocolError("amqp:illegal-state", f"unexpected {perf.kind}")

    def _on_sasl(self, perf: P.Performative) -> None:
        if perf.code != P.SASL_INIT:
            raise P.ProtocolError("amqp:connection:framing-error", f"expected sasl-init, got {perf.kind}")
        mech = str(perf.mechanism or "")
        code = 0
        if mech == "PLAIN":
            code = 0 if self.broker.check_plain(perf.initial_response) else 1
        elif mech != "ANONYMOUS":
            code = 1
        self.out.append(frame(0, P.encode_performative(P.SASL_OUTCOME, [UByte(code), None]), TYPE_SASL))
        if code:
            self.state = "closed"
            self.flush()
            self._close_transport()
            return
        self.state = "sasl-done"
        self.reader.expect_header = True

    def _on_open(self, perf: P.Performative) -> None:
        remote_max = perf.max_frame_size
        self.remote_max_frame = int(remote_max) if remote_max else 0xFFFFFFFF
        if self.remote_max_frame < 512:
            raise P.ProtocolError("amqp:invalid-field", "max-frame-size below 512")
        self.remote_max_frame = min(self.remote_max_frame, 64 * 1024 * 1024)
        idle = perf.idle_time_out
        if idle:
            self.remote_idle_s = max(0.05, int(idle) / 1000.0)
        cfg = self.broker.cfg
        self.reader.max_frame_size = cfg.max_frame_size
        self.reader.one_at_a_time = False
        self.state = "opened"
        # AMQP 1.0 2.4.5: advertise half the real limit, so a peer heartbeating at that pace is never closed
        our_idle = UInt(int(cfg.idle_timeout_s * 500)) if cfg.idle_timeout_s else None
        self.send(0, P.OPEN, [
            self.container_id, None, UInt(cfg.max_frame_size), UShort(CHANNEL_MAX), our_idle, None, None, None,
            None, {Symbol("product"): "harness-eventhubs-emulator"},
        ])
        if self.refusal is not None:
            self.close(*self.refusal, linger=True)
            return
        self._arm()

    # ------------------------------------------------------------------ sessions
    def _session(self, channel: int) -> Session:
        session = self.sessions.get(channel)
        if session is None or session.ended:
            raise P.ProtocolError("amqp:connection:framing-error", f"no session on channel {channel}")
        return session

    def _on_begin(self, channel: int, perf: P.Performative) -> None:
        if perf.remote_channel is not None:
            raise P.ProtocolError("amqp:not-implemented", "server-initiated sessions are not used")
        if channel in self.sessions or channel > CHANNEL_MAX:
            raise P.ProtocolError("amqp:connection:framing-error", f"channel {channel} in use or above max")
        session = Session(self, channel, channel, int(perf.next_outgoing_id or 0), int(perf.incoming_window or 0))
        self.sessions[channel] = session
        self.ended_channels.discard(channel)
        self.send(channel, P.BEGIN, [
            UShort(channel), UInt(0), UInt(SESSION_WINDOW), UInt(SESSION_WINDOW), UInt(_MASK32), None, None, None,
        ])

    def _on_end(self, channel: int, perf: P.Performative) -> None:
        session = self.sessions.pop(channel, None)
        if session is None:
            raise P.ProtocolError("amqp:connection:framing-error", f"end on unknown channel {channel}")
        self._drop_session(session)
        self.ended_channels.add(channel)
        if not session.ended:
            self.send(channel, P.END, [None])

    def _drop_session(self, session: Session) -> None:
        for link in list(session.links.values()):
            self.broker.link_gone(link)
        session.links.clear()

    def end_session(self, session: Session, condition: str, description: str) -> None:
        session.ended = True
        for link in list(session.links.values()):
            self.broker.link_gone(link)
        self.send(session.channel, P.END, [P.error(condition, description)])

    # ------------------------------------------------------------------ links
    def _on_attach(self, channel: int, perf: P.Performative) -> None:
        session = self._session(channel)
        name, rhandle, role = perf.name, perf.handle, perf.role
        if not isinstance(name, str) or rhandle is None or not isinstance(role, bool):
            raise P.ProtocolError("amqp:invalid-field", "attach needs name, handle and role")
        if rhandle in session.links and not session.links[rhandle].detached:
            raise P.ProtocolError("amqp:session:handle-in-use", f"handle {rhandle} in use")
        if len(session.links) >= MAX_LINKS_PER_SESSION:
            self.end_session(session, "amqp:resource-limit-exceeded", "too many links")
            return
        handle = session.alloc_handle()
        source_f = P.terminus_fields(perf.source, P.SOURCE_FIELDS)
        target_f = P.terminus_fields(perf.target, P.TARGET_FIELDS)
        terminus = target_f if role is False else source_f
        address = terminus[0] if terminus else None
        kind = KIND_HUB
        if address in ("$cbs", "$management"):
            kind = KIND_CBS if address == "$cbs" else KIND_MGMT
        cls = InLink if role is False else OutLink
        link = cls(session, name, handle, rhandle, kind, perf.source, perf.target)
        link.address = address if isinstance(address, str) else None
        link.snd_settle_mode = perf.snd_settle_mode
        link.rcv_settle_mode = perf.rcv_settle_mode
        session.links[rhandle] = link
        if isinstance(link, InLink):
            link.delivery_count = int(perf.initial_delivery_count or 0)
        offered = None
        error = None
        if kind == KIND_HUB:
            try:
                if isinstance(link, InLink):
                    error = self._attach_sender(link, address)
                else:
                    error = self._attach_receiver(link, address, source_f, perf)
                    if link.runtime_metric:
                        offered = Array(Symbol, [Symbol(RUNTIME_METRIC)])
            except FilterError as exc:
                error = (service_errors.ARGUMENT_ERROR, service_errors.tracked(str(exc), str(address)))
            except AddressError as exc:
                error = (service_errors.NOT_FOUND, service_errors.tracked(str(exc), str(address)))
        if error is not None:
            # AMQP 1.0 2.6.3: a refused link is answered with an attach whose local terminus is null (source for
            # the client's receiver, target for its sender), then a detach carrying the error.
            self._send_attach(link, None, refused=True)
            self.detach(link, *error)
            return
        self._send_attach(link, offered)
        if isinstance(link, InLink):
            self._grant_credit(link)
        elif kind == KIND_HUB:
            self.broker.receiver_attached(link)

    def _send_attach(self, link, offered, refused: bool = False) -> None:
        is_out = isinstance(link, OutLink)
        source = link.source if link.source is not None else Described(ULong(P.SOURCE), [None] * 11)
        target = link.target if link.target is not None else Described(ULong(P.TARGET), [None] * 7)
        if refused:
            if is_out:
                source = None
            else:
                target = None
        self.send(link.session.channel, P.ATTACH, [
            link.name, UInt(link.handle), not is_out,
            link.snd_settle_mode if link.snd_settle_mode is not None else UByte(2),
            link.rcv_settle_mode if link.rcv_settle_mode is not None else UByte(0),
            source, target,
            None, False, UInt(0) if is_out else None, ULong(self.broker.cfg.max_message_size), offered, None,
            None,
        ])

    def _refusal(self, hub, address, partition_id: str | None) -> tuple | None:
        """The refusal shared by senders and receivers: partition, authorization, throttle."""
        if partition_id is not None and partition_id not in hub.partitions:
            return (service_errors.ARGUMENT_OUT_OF_RANGE, service_errors.invalid_partition(
                partition_id, len(hub.partition_ids), f"{hub.name}~{partition_id}"))
        denied = self.broker.check_link_auth(self, address)
        if denied:
            return ("amqp:unauthorized-access", denied)
        if self.broker.throttle_mode == "detach":
            return ("com.microsoft:server-busy", "The server is busy (emulator throttle). Please retry.")
        return None

    def _attach_sender(self, link: InLink, address) -> tuple | None:
        target = parse_send_target(address)
        hub = self.broker.hub(target.hub)
        if hub is None:
            return (service_errors.NOT_FOUND, service_errors.entity_not_found(entity_uri(address, target.hub)))
        refused = self._refusal(hub, address, target.partition_id)
        if refused:
            return refused
        link.hub = hub
        link.partition_id = target.partition_id
        hub.senders.add(link)
        return None

    def _attach_receiver(self, link: OutLink, address, source_f, perf) -> tuple | None:
        src = parse_receive_source(address)
        hub = self.broker.hub(src.hub)
        if hub is None:
            return (service_errors.NOT_FOUND, service_errors.entity_not_found(entity_uri(address, src.hub)))
        cg = hub.consumer_group(src.consumer_group)
        if cg is None:
            return (service_errors.NOT_FOUND, service_errors.entity_not_found(
                entity_uri(address, src.hub, "consumergroups", src.consumer_group)))
        refused = self._refusal(hub, address, src.partition_id)
        if refused:
            return refused
        props = perf.properties if isinstance(perf.properties, dict) else {}
        epoch = props.get(EPOCH)
        link.epoch = None if epoch is None else int(epoch)
        name = props.get(RECEIVER_NAME)
        link.receiver_name = name.decode("utf-8", "replace") if isinstance(name, bytes) else (
            str(name) if name is not None else None)
        caps = perf.desired_capabilities
        caps = caps if isinstance(caps, list) else [caps] if caps is not None else []
        link.runtime_metric = any(str(c) == RUNTIME_METRIC for c in caps)
        position = parse_filter(source_f[7])
        key = (cg.lower(), src.partition_id)
        refusal, to_steal, why = hub.admit_receiver(
            key[0], key[1], link.epoch, link.receiver_name or "nil", self.broker.cfg.max_receivers_per_partition)
        if refusal is not None:
            return (refusal, why)
        for old in to_steal:
            old.conn.detach(old, service_errors.LINK_STOLEN, service_errors.epoch_stolen(
                link.receiver_name or "nil", link.epoch, old.receiver_name or "nil",
                old.epoch if old.epoch is not None else "nil"))
            old.conn.flush()
        partition = hub.partitions[src.partition_id]
        partition.expire()
        idx = partition.start_index(position.kind, position.value, position.inclusive)
        link.hub = hub
        link.partition = partition
        link.partition_id = src.partition_id
        link.consumer_group = key[0]
        link.next_seq = partition.base_seq + idx
        return None

    def _grant_credit(self, link: InLink) -> None:
        link.credit = IN_CREDIT
        self._send_link_flow(link, link.delivery_count, IN_CREDIT)

    def _send_link_flow(self, link, delivery_count: int, credit: int, echo: bool = False) -> None:
        s = link.session
        self.send(s.channel, P.FLOW, [
            UInt(s.next_incoming_id & _MASK32), UInt(SESSION_WINDOW), UInt(s.next_outgoing_id & _MASK32),
            UInt(SESSION_WINDOW), UInt(link.handle), UInt(delivery_count & _MASK32), UInt(credit), None, False,
            echo, None,
        ])
        s.in_window_left = SESSION_WINDOW

    def detach(self, link, condition: str | None, description: str | None = None) -> None:
        """Detach (closed) a link from our side, with an error condition."""
        if link.detached or self.state != "opened":
            return
        link.detached = True
        self.broker.link_gone(link)
        self.broker.record_detach(link, condition)
        err = P.error(condition, description) if condition else None
        self.send(link.session.channel, P.DETACH, [UInt(link.handle), True, err])

    def _on_detach(self, channel: int, perf: P.Performative) -> None:
        session = self._session(channel)
        link = session.links.pop(perf.handle, None)
        if link is None:
            raise P.ProtocolError("amqp:session:unattached-handle", f"detach of unknown handle {perf.handle}")
        session.handles_used.discard(link.handle)
        if link.detached:
            return  # the client's answer to our detach
        link.detached = True
        self.broker.link_gone(link)
        self.send(channel, P.DETACH, [UInt(link.handle), bool(perf.closed), None])

    # ------------------------------------------------------------------ flow
    def _on_flow(self, channel: int, perf: P.Performative) -> None:
        session = self._session(channel)
        f = perf.fields
        next_in = f[0] if f[0] is not None else 0
        if f[1] is not None:
            session.remote_in_window = int(next_in) + int(f[1]) - session.next_outgoing_id
        handle = f[4]
        if handle is None:
            if f[9]:
                self._send_session_flow(session)
            self.schedule_pump()
            return
        link = session.links.get(handle)
        if link is None:
            raise P.ProtocolError("amqp:session:unattached-handle", f"flow for unknown handle {handle}")
        if isinstance(link, OutLink):
            if f[6] is not None:
                rcv_count = int(f[5]) if f[5] is not None else link.delivery_count
                behind = ((rcv_count - link.delivery_count + 0x80000000) & _MASK32) - 0x80000000
                link.credit = max(0, behind + int(f[6]))
            link.drain = bool(f[8])
            if f[9]:
                self._send_link_flow(link, link.delivery_count, link.credit)
            if link.pending:
                self._send_responses(link)
            self.schedule_pump()
        elif f[9]:
            self._send_link_flow(link, link.delivery_count, link.credit)

    def _send_session_flow(self, session: Session) -> None:
        self.send(session.channel, P.FLOW, [
            UInt(session.next_incoming_id & _MASK32), UInt(SESSION_WINDOW), UInt(session.next_outgoing_id & _MASK32),
            UInt(SESSION_WINDOW), None, None, None, None, False, False, None,
        ])
        session.in_window_left = SESSION_WINDOW

    # ------------------------------------------------------------------ incoming transfers
    def _on_transfer(self, channel: int, perf: P.Performative) -> None:
        session = self._session(channel)
        session.next_incoming_id += 1
        session.in_window_left -= 1
        if session.in_window_left <= 0:
            raise P.ProtocolError("amqp:session:window-violation", "transfer beyond the incoming window")
        if session.in_window_left < SESSION_WINDOW // 2:
            self._send_session_flow(session)
        f = perf.fields
        link = session.links.get(f[0])
        if link is None:
            raise P.ProtocolError("amqp:session:unattached-handle", f"transfer on unknown handle {f[0]}")
        if not isinstance(link, InLink):
            raise P.ProtocolError("amqp:session:errant-link", "transfer on a link we send on")
        if link.detached:
            return  # in flight while we detached; dropped (unsettled for the client)
        if f[9]:  # aborted
            link.partial = None
            link.partial_first = None
            return
        payload = perf.payload
        if link.partial is not None:
            link.partial += payload
            if len(link.partial) > self.broker.cfg.max_message_size + 65536:
                first = link.partial_first
                link.partial = None
                link.partial_first = None
                if not f[5]:
                    self._finish_delivery(link, first, None, too_big=True)
                else:
                    self.detach(link, "amqp:link:message-size-exceeded", "message exceeds the maximum size")
                return
            if f[5]:
                return
            payload, first = bytes(link.partial), link.partial_first
            link.partial = None
            link.partial_first = None
        else:
            first = f
            if f[5]:  # more frames follow
                link.partial = bytearray(payload)
                link.partial_first = f
                self._partial_links.add(link)
                return
        self._finish_delivery(link, first, payload)

    def _finish_delivery(self, link: InLink, first: list, payload: bytes | None, too_big: bool = False) -> None:
        link.delivery_count += 1
        link.credit -= 1
        if link.credit < IN_CREDIT // 2 and not link.detached:
            self._grant_credit(link)
        delivery_id, settled = first[1], bool(first[4])
        if too_big or (payload is not None and len(payload) > self.broker.cfg.max_message_size):
            outcome = self._rejected("amqp:link:message-size-exceeded", (
                f"The received message exceeds the limit of {self.broker.cfg.max_message_size} bytes."
            ))
        elif link.kind == KIND_HUB:
            outcome = self._produce(link, first, payload)
        else:
            outcome = self._request(link, first, payload)
        if outcome is None or settled or delivery_id is None:
            return
        self.send(link.session.channel, P.DISPOSITION, [True, UInt(delivery_id), None, True, outcome, None])

    @staticmethod
    def _rejected(condition: str, description: str) -> Described:
        return Described(ULong(P.REJECTED), [P.error(condition, description)])

    def _produce(self, link: InLink, first: list, payload: bytes):
        broker = self.broker
        if broker.throttle_mode == "reject":
            return self._rejected("com.microsoft:server-busy", "The server is busy (emulator throttle). Please retry.")
        if broker.throttle_mode == "detach":
            self.detach(link, "com.microsoft:server-busy", "The server is busy (emulator throttle). Please retry.")
            return None
        hub = link.hub
        try:
            if first[3] == BATCH_FORMAT:
                annotations, messages = split_batch(payload)
            else:
                annotations, messages = None, [payload]
            pid = link.partition_id
            if pid is None:
                if annotations is None and first[3] != BATCH_FORMAT:
                    annotations = message_annotations(payload)
                key = partition_key_of(annotations)
                pid = hub.partition_for_key(key) if key is not None else hub.next_round_robin()
            if messages:
                hub.partitions[pid].append(messages)
        except (DecodeError, IndexError, struct.error) as exc:
            return self._rejected("amqp:decode-error", f"malformed message: {exc}")
        broker.stats_in += len(messages)
        return _ACCEPTED

    def _request(self, link: InLink, first: list, payload: bytes):
        """A $cbs or $management request; the reply goes on the session's response link."""
        from .amqp.message import parse_message

        try:
            msg = parse_message(payload)
        except (DecodeError, IndexError, struct.error) as exc:
            return self._rejected("amqp:decode-error", f"malformed request: {exc}")
        if link.kind == KIND_CBS:
            status, description, body = self.broker.handle_cbs(self, msg)
        else:
            status, description, body = self.broker.handle_management(msg)
        props = msg.get("properties") or []
        message_id = props[0] if props else None
        reply = self.broker.build_response(message_id, status, description, body)
        resp = link.session.response_link(link.kind)
        if resp is not None:
            resp.pending.append(reply)
            self._send_responses(resp)
        return _ACCEPTED

    # ------------------------------------------------------------------ outgoing transfers
    def _send_responses(self, link: OutLink) -> None:
        session = link.session
        while link.pending and link.credit > 0 and session.remote_in_window > 0:
            payload = link.pending.popleft()
            self._write_delivery(session, link, payload)

    def _write_delivery(self, session: Session, link: OutLink, payload: bytes) -> None:
        did = session.next_delivery_id
        session.next_delivery_id = (did + 1) & _MASK32
        max_body = self.remote_max_frame - _DELIV_OVERHEAD
        out = self.out
        if len(payload) <= max_body:
            out.append(_DELIV.pack(_DELIV_OVERHEAD + len(payload), 2, 0, session.channel, _DELIV_PERF, 0x70,
                                   link.handle, 0x70, did, b"\xa0\x04", did, _DELIV_TAIL_LAST))
            out.append(payload)
            session.next_outgoing_id += 1
            session.remote_in_window -= 1
        else:
            for start in range(0, len(payload), max_body):
                chunk = payload[start : start + max_body]
                tail = _DELIV_TAIL_MORE if start + max_body < len(payload) else _DELIV_TAIL_LAST
                out.append(_DELIV.pack(_DELIV_OVERHEAD + len(chunk), 2, 0, session.channel, _DELIV_PERF, 0x70,
                                       link.handle, 0x70, did, b"\xa0\x04", did, tail))
                out.append(chunk)
                session.next_outgoing_id += 1
                session.remote_in_window -= 1
        link.delivery_count = (link.delivery_count + 1) & _MASK32
        link.credit -= 1

    def schedule_pump(self) -> None:
        if not self.pump_scheduled and not self.closed:
            self.pump_scheduled = True
            self.broker.loop.call_soon(self.pump)

    def pump(self) -> None:
        """Send available events to this connection's consumers within credit, window and a byte budget."""
        self.pump_scheduled = False
        if self.paused or self.state != "opened":
            return
        budget = PUMP_BUDGET_BYTES
        more = False
        now = None
        for session in self.sessions.values():
            if session.ended:
                continue
            for link in session.out_links():
                if link.kind != KIND_HUB or link.partition is None:
                    continue
                if budget <= 0:
                    more = True
                    break
                p = link.partition
                idx = link.next_seq - p.base_seq
                if idx < p.head:
                    idx = p.head
                end = len(p.payloads)
                if link.credit <= 0 or session.remote_in_window <= 0 or idx >= end:
                    if link.drain and link.credit > 0 and idx >= end:
                        link.delivery_count = (link.delivery_count + link.credit) & _MASK32
                        link.credit = 0
                        self._send_link_flow(link, link.delivery_count, 0)
                    continue
                n = min(end - idx, link.credit, session.remote_in_window)
                ra = None
                if link.runtime_metric:
                    if now is None:
                        now = now_ms()
                    last_seq, last_off, last_t = p.last_enqueued()
                    ra = runtime_annotations(last_seq, last_off, last_t, now)
                payloads, hls = p.payloads, p.header_lens
                sent = 0
                for i in range(idx, idx + n):
                    payload = payloads[i]
                    if ra is not None:
                        payload = with_runtime_annotations(payload, hls[i], ra)
                    self._write_delivery(session, link, payload)
                    budget -= len(payload)
                    sent += 1
                    if budget <= 0 or session.remote_in_window <= 0:
                        break
                link.next_seq = p.base_seq + idx + sent
                self.broker.stats_out += sent
                if idx + sent < end and link.credit > 0 and session.remote_in_window > 0:
                    more = True
        self.flush()
        if more:
            self.schedule_pump()
