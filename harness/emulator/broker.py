"""The namespace: hubs, connections, CBS/$management handling and fault injection (loop thread only).

Everything here runs on the emulator's event loop; ``EmulatorServer`` (server.py) marshals calls from other
threads onto it.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
import urllib.parse
from collections import deque
from datetime import datetime

import harness.emulator.sas as sas
import harness.emulator.service_errors as service_errors
from .addresses import audience_path, entity_uri
from .amqp.message import build_message
from .amqp.types import Array, Int, Timestamp
from .config import EmulatorConfig, HubConfig
from .hub import Hub, PartitionLog
from .links import KIND_HUB, OutLink

log = logging.getLogger(__name__)

THROTTLE_MODES = ("reject", "detach")
BUSY = ("com.microsoft:server-busy", "The server is busy (emulator throttle). Please retry.")


TRIM_AFTER_BYTES = 1024 * 1024  # a connection that held this much leaves memory worth handing back (_trim_soon)
TRIM_EVERY_S = 1.0


def _libc_malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _libc_malloc_trim()


class Broker:
    def __init__(self, cfg: EmulatorConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.cfg = cfg
        self.loop = loop
        self.hubs: dict[str, Hub] = {}
        self.hub_configs: dict[str, HubConfig] = {h.name.lower(): h for h in cfg.hubs}
        for h in cfg.hubs:
            self.hubs[h.name.lower()] = Hub(h, self._on_append)
        self.connections: set = set()
        self.refusing: set = set()  # connections over MaxConnections, being told so (not in ``connections``)
        self.held: dict = {}  # connection -> bytes it holds for incomplete frames and multi-frame messages
        self.held_total = 0
        self.evictions = 0  # connections closed because the incomplete-frame budget ran out
        self.throttle_mode: str | None = None
        self.latency_s = 0.0
        self.stats_in = 0
        self.stats_out = 0
        self.detach_log: deque = deque(maxlen=200)  # links we detached or refused, newest last
        self.hub_listeners: list = []  # callables(hub name) told of delete/recreate/age-out (the Kafka endpoint)
        self.tick_listeners: list = []  # callables(time.monotonic()) called every second (state that expires)
        self._retention_timer = loop.call_later(1.0, self._retention_tick)
        self._trim_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ registry
    def hub(self, name: str) -> Hub | None:
        return self.hubs.get(str(name).lower())

    def register(self, conn) -> None:
        self.connections.add(conn)

    def unregister(self, conn) -> None:
        self.connections.discard(conn)
        self.refusing.discard(conn)
        if self.held.get(conn, 0) >= TRIM_AFTER_BYTES:
            self._trim_soon()
        self.hold(conn, 0)

    def _trim_soon(self) -> None:
        """Give the memory a big holder left back to the system a moment after it is gone. Its buffers were
        megabytes each, freed into the C allocator's heap, which keeps freed pages for reuse: without this, the
        emulator's resident memory stayed at the peak a crowd of non-reading clients caused long after they
        left (glibc's malloc_trim; elsewhere nothing happens). At most once per TRIM_EVERY_S."""
        if self._trim_timer is not None or _malloc_trim is None:
            return
        self._trim_timer = self.loop.call_later(TRIM_EVERY_S, self._trim)

    def _trim(self) -> None:
        self._trim_timer = None
        _malloc_trim(0)

    def over_connection_limit(self) -> bool:
        return len(self.connections) >= self.cfg.max_connections

    def hold(self, conn, nbytes: int) -> None:
        """Record what ``conn`` holds for unfinished frames (a Kafka connection: also requests read ahead and
        responses its client has not read); past the namespace-wide budget, close the biggest.

        The budget is shared, so one connection may use most of it while others are quiet; whoever holds the most
        when it runs out is the likeliest hoarder (a legitimate sender holds at most one batch at a time).
        """
        before = self.held.pop(conn, 0)
        if nbytes:
            self.held[conn] = nbytes
        self.held_total += nbytes - before
        limit = self.cfg.max_incomplete_frame_bytes
        while self.held_total > limit and self.held:
            biggest = max(self.held, key=self.held.__getitem__)
            total = self.held_total
            amount = self.held.pop(biggest)
            self.held_total -= amount
            self.evictions += 1
            biggest.refuse_buffered(service_errors.RESOURCE_LIMIT,
                                    service_errors.incomplete_frames_limit(total, limit, amount))
            if amount >= TRIM_AFTER_BYTES:
                self._trim_soon()

    def _on_append(self, partition: PartitionLog) -> None:
        for link in partition.listeners:
            if link.credit > 0:
                link.conn.schedule_pump()

    def receiver_attached(self, link: OutLink) -> None:
        key = (link.consumer_group, link.partition_id)
        link.hub.receivers.setdefault(key, set()).add(link)
        link.partition.listeners.add(link)
        link.conn.schedule_pump()

    def link_gone(self, link) -> None:
        hub = link.hub
        if hub is None:
            return
        hub.senders.discard(link)
        if isinstance(link, OutLink) and link.partition is not None:
            link.partition.listeners.discard(link)
            group = hub.receivers.get((link.consumer_group, link.partition_id))
            if group is not None:
                group.discard(link)

    def record_detach(self, link, condition: str | None) -> None:
        self.detach_log.append({
            "address": link.address, "role": "receiver" if isinstance(link, OutLink) else "sender",
            "kind": link.kind, "condition": condition, "time_ms": int(time.time() * 1000),
        })

    def _hub_links(self, hub: Hub) -> list:
        links = list(hub.senders)
        for group in hub.receivers.values():
            links.extend(group)
        return links

    def _retention_tick(self) -> None:
        try:
            for hub in self.hubs.values():
                for p in hub.partitions.values():
                    p.expire()
            now = time.monotonic()
            for listener in self.tick_listeners:
                listener(now)
        finally:
            self._retention_timer = self.loop.call_later(1.0, self._retention_tick)

    def shutdown(self) -> None:
        self._retention_timer.cancel()
        if self._trim_timer is not None:
            self._trim_timer.cancel()
        for conn in list(self.connections) + list(self.refusing):
            conn.close("amqp:connection:forced", "The emulator is shutting down.")

    # ------------------------------------------------------------------ auth
    def check_plain(self, response) -> bool:
        if self.cfg.accept_any_credential:
            return True
        if not isinstance(response, (bytes, bytearray)):
            return False
        parts = bytes(response).split(b"\x00")
        if len(parts) != 3:
            return False
        user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        return self.cfg.sas_keys.get(user) == password

    def _token_error(self, token, audience: str) -> str | None:
        """Why ``token`` does not grant ``audience`` (None = granted); always granted with accept_any_credential."""
        if self.cfg.accept_any_credential:
            return None
        if isinstance(token, bytes):
            token = token.decode("utf-8", "replace")
        if not isinstance(token, str):
            return "no token"
        try:
            sas.validate(token, self.cfg.sas_keys)
            resource = audience_path(urllib.parse.unquote_plus(sas.parse_token(token)["sr"]))
        except sas.SasError as exc:
            return str(exc)
        wanted = audience_path(audience)
        if resource and wanted != resource and not wanted.startswith(resource + "/"):
            return f"token for '{resource}' does not cover '{wanted}'"
        return None

    def check_link_auth(self, conn, address) -> str | None:
        if self.cfg.accept_any_credential:
            return None
        path = audience_path(address)
        for granted in conn.authorized:
            if not granted or path == granted or path.startswith(granted + "/"):
                return None
        return f"Unauthorized access to '{path}': no valid CBS token was put for it."

    def handle_cbs(self, conn, msg: dict) -> tuple[int, str, object]:
        props = msg.get("application_properties") or {}
        operation = props.get("operation")
        if operation != "put-token":
            return 400, f"Unsupported CBS operation {operation!r}.", None
        audience = props.get("name")
        if not isinstance(audience, str):
            return 400, "put-token needs a 'name' (audience).", None
        why = self._token_error(msg.get("value"), audience)
        if why is not None:
            return 401, f"InvalidSignature: {why}", None
        path = audience_path(audience)
        hub_name = path.split("/", 1)[0]
        if hub_name and self.hub(hub_name) is None:
            # The service resolves the audience's entity when the token is put: "Put token failed.
            # status-code: 404" is what clients of a missing hub see first.
            return 404, service_errors.entity_not_found(audience.rstrip("/")), None
        conn.authorized.add(path)
        return 202, "Accepted", None

    def handle_management(self, msg: dict) -> tuple[int, str, object]:
        props = msg.get("application_properties") or {}
        if props.get("operation") != "READ":
            return 400, f"Unsupported management operation {props.get('operation')!r}.", None
        name = props.get("name")
        hub = self.hub(name) if isinstance(name, str) else None
        if hub is None:
            return 404, f"The messaging entity '{name}' could not be found.", None
        why = self._token_error(props.get("security_token"), f"sb://x/{hub.name}")
        if why is not None:
            return 401, f"InvalidSignature: {why}", None
        kind = props.get("type")
        if kind == "com.microsoft:eventhub":
            p = hub.properties()
            return 200, "OK", {
                "name": hub.name, "type": "com.microsoft:eventhub", "created_at": Timestamp(p["created_at"]),
                "partition_count": Int(p["partition_count"]), "partition_ids": Array(str, p["partition_ids"]),
            }
        if kind == "com.microsoft:partition":
            pid = props.get("partition")
            partition = hub.partitions.get(str(pid))
            if partition is None:
                return 404, f"Partition {pid!r} of '{hub.name}' does not exist.", None
            partition.expire()
            p = partition.properties()
            return 200, "OK", {
                "name": hub.name, "type": "com.microsoft:partition", "partition": partition.partition_id,
                "begin_sequence_number": p["begin_sequence_number"],
                "last_enqueued_sequence_number": p["last_enqueued_sequence_number"],
                "last_enqueued_offset": p["last_enqueued_offset"],
                "last_enqueued_time_utc": Timestamp(p["last_enqueued_time_utc"]),
                "is_partition_empty": p["is_partition_empty"],
            }
        return 400, f"Unsupported entity type {kind!r}.", None

    @staticmethod
    def build_response(message_id, status: int, description: str, body) -> bytes:
        return build_message(
            properties=[None, None, None, None, None, message_id],
            application_properties={"status-code": Int(status), "status-description": description},
            value=body,
        )

    # ------------------------------------------------------------------ faults
    def _detach_all(self, links, condition: str, description: str) -> int:
        touched = set()
        n = 0
        for link in links:
            if not link.detached:
                link.conn.detach(link, condition, description)
                touched.add(link.conn)
                n += 1
        for conn in touched:
            conn.flush()
        return n

    def delete_hub(self, name: str) -> bool:
        hub = self.hubs.pop(str(name).lower(), None)
        if hub is None:
            return False
        hub.deleted = True
        for link in self._hub_links(hub):
            self._detach_all([link], service_errors.NOT_FOUND,
                             service_errors.entity_not_found(entity_uri(link.address, hub.name)))
        self._hub_changed(hub.name)
        return True

    def _hub_changed(self, name: str) -> None:
        for listener in self.hub_listeners:
            listener(name)

    def recreate_hub(self, name: str, partition_count: int | None = None) -> dict:
        """Create the hub empty (replacing it if present) from its configuration (or the defaults)."""
        key = str(name).lower()
        if key in self.hubs:
            self.delete_hub(name)
        cfg = self.hub_configs.get(key) or HubConfig(str(name), 4, ("$Default",))
        if partition_count is not None:
            cfg = HubConfig(cfg.name, int(partition_count), cfg.consumer_groups, cfg.retention_s,
                            cfg.max_events_per_partition, cfg.max_bytes_per_partition)
        self.hub_configs[key] = cfg
        hub = Hub(cfg, self._on_append)
        self.hubs[key] = hub
        self._hub_changed(hub.name)
        return hub.properties()

    def age_out(self, hub_name: str, partition: str | int | None = None, up_to_seq: int | None = None,
                before_time=None) -> int:
        hub = self._require_hub(hub_name)
        before_ms = None
        if before_time is not None:
            if isinstance(before_time, datetime):
                before_ms = int(before_time.timestamp() * 1000)
            else:
                before_ms = int(before_time)
        if up_to_seq is None and before_ms is None:
            raise ValueError("age_out needs up_to_seq or before_time")
        pids = hub.partition_ids if partition is None else [self._require_partition(hub, partition)]
        dropped = sum(hub.partitions[pid].age_out(up_to_seq, before_ms) for pid in pids)
        self._hub_changed(hub.name)
        return dropped

    def throttle(self, on: bool, mode: str = "reject") -> None:
        if on and mode not in THROTTLE_MODES:
            raise ValueError(f"throttle mode must be one of {THROTTLE_MODES}, got {mode!r}")
        self.throttle_mode = mode if on else None
        if on and mode == "detach":
            links = []
            for hub in self.hubs.values():
                links.extend(self._hub_links(hub))
            self._detach_all(links, *BUSY)

    def drop_connections(self, graceful: bool = False) -> int:
        conns = list(self.connections)
        for conn in conns:
            if graceful:
                conn.close("amqp:connection:forced", "The connection was closed by the emulator (fault).")
            else:
                conn.abort()
        return len(conns)

    def set_latency(self, ms: float) -> None:
        if ms < 0:
            raise ValueError("latency must be >= 0")
        self.latency_s = ms / 1000.0

    def steal(self, hub_name: str, partition: str | int, consumer_group: str = "$Default",
              hold_s: float = 0.0) -> int:
        """Detach the partition's receivers with amqp:link:stolen, as a higher-epoch receiver would.

        For ``hold_s`` seconds a phantom owner with that higher epoch keeps lower-epoch (and epoch-less)
        receivers out. Returns the number of receivers detached.
        """
        hub = self._require_hub(hub_name)
        pid = self._require_partition(hub, partition)
        cg = hub.consumer_group(consumer_group)
        if cg is None:
            raise KeyError(f"consumer group {consumer_group!r} not found in {hub.name!r}")
        key = (cg.lower(), pid)
        current = hub.owner_epoch(*key)
        new_epoch = (current if current is not None else 0) + 1
        if hold_s > 0:
            hub.phantom_epochs[key] = (new_epoch, time.monotonic() + hold_s)
        touched = 0
        for link in list(hub.receivers.get(key, ())):
            touched += self._detach_all([link], service_errors.LINK_STOLEN, service_errors.epoch_stolen(
                "nil", new_epoch, link.receiver_name or "nil", link.epoch if link.epoch is not None else "nil"))
        return touched

    def _require_hub(self, name: str) -> Hub:
        hub = self.hub(name)
        if hub is None:
            raise KeyError(f"event hub {name!r} not found")
        return hub

    @staticmethod
    def _require_partition(hub: Hub, partition) -> str:
        pid = str(partition)
        if pid not in hub.partitions:
            raise KeyError(f"partition {pid!r} not found in {hub.name!r}")
        return pid

    # ------------------------------------------------------------------ introspection
    def snapshot(self) -> dict:
        hubs = {}
        for hub in self.hubs.values():
            parts = {}
            for pid, p in hub.partitions.items():
                parts[pid] = dict(p.properties(), retained_events=p.count, retained_bytes=p.bytes)
            hubs[hub.name] = {
                "partition_count": len(hub.partition_ids), "consumer_groups": sorted(hub.consumer_groups.values()),
                "created_at": hub.created_ms, "partitions": parts,
                "receivers": sum(len(g) for g in hub.receivers.values()), "senders": len(hub.senders),
            }
        return {
            "hubs": hubs, "connections": len(self.connections), "refusing_connections": len(self.refusing),
            "incomplete_frame_bytes": self.held_total, "evicted_connections": self.evictions,
            "throttle": self.throttle_mode,
            "latency_ms": self.latency_s * 1000.0, "events_in": self.stats_in, "events_out": self.stats_out,
            "recent_detaches": list(self.detach_log)[-50:],
        }


__all__ = ["Broker", "KIND_HUB"]
