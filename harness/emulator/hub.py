"""Event hubs, their partitions' event logs, and receiver admission (owner level / epoch, the 5-reader quota).

A partition log keeps events already encoded for delivery (see ``amqp.message.stamp``) in parallel lists indexed
from a moving head, so positions resolve by arithmetic (sequence number) or bisection (offset, enqueued time),
and retention just advances the head. Offsets are byte positions in the partition, as in the service.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from typing import Callable

import harness.emulator.service_errors as service_errors
from .amqp.message import stamp
from .config import HubConfig


def now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog:
    __slots__ = (
        "hub_name", "partition_id", "retention_ms", "max_events", "max_bytes", "payloads", "header_lens",
        "offsets", "times", "base_seq", "head", "next_offset", "bytes", "last_time", "last_offset", "listeners",
        "on_append",
    )

    def __init__(self, hub_name: str, partition_id: str, cfg: HubConfig) -> None:
        self.hub_name = hub_name
        self.partition_id = partition_id
        self.retention_ms = int(cfg.retention_s * 1000)
        self.max_events = cfg.max_events_per_partition
        self.max_bytes = cfg.max_bytes_per_partition
        self.payloads: list[bytes] = []
        self.header_lens: list[int] = []
        self.offsets: list[int] = []
        self.times: list[int] = []
        self.base_seq = 0  # sequence number of payloads[0]
        self.head = 0  # index of the first retained event
        self.next_offset = 0
        self.bytes = 0
        self.last_time = 0
        self.last_offset = -1
        self.listeners: set = set()  # receiver links waiting for new events
        self.on_append: Callable[[PartitionLog], None] | None = None

    # ------------------------------------------------------------------ state
    @property
    def begin_seq(self) -> int:
        return self.base_seq + self.head

    @property
    def next_seq(self) -> int:
        return self.base_seq + len(self.payloads)

    @property
    def count(self) -> int:
        return len(self.payloads) - self.head

    def last_enqueued(self) -> tuple[int, str, int]:
        """(sequence number, offset, enqueued ms) of the last event ever enqueued; (-1, "-1", 0) if none.

        Kept after retention removed the event, as the service reports it.
        """
        if self.next_seq == 0:
            return -1, "-1", 0
        return self.next_seq - 1, str(self.last_offset), self.last_time

    def properties(self) -> dict:
        last_seq, last_off, last_time = self.last_enqueued()
        empty = self.count == 0
        return {
            "begin_sequence_number": (-1 if self.next_seq == 0 else self.next_seq) if empty else self.begin_seq,
            "last_enqueued_sequence_number": last_seq,
            "last_enqueued_offset": last_off,
            "last_enqueued_time_utc": last_time,
            "is_partition_empty": empty,
        }

    # ------------------------------------------------------------------ append
    def append(self, messages: list[bytes], when_ms: int | None = None) -> None:
        """Stamp and store encoded producer messages (raises DecodeError before storing anything if one is bad)."""
        t = now_ms() if when_ms is None else when_ms
        if t < self.last_time:
            t = self.last_time  # enqueued times never go backwards within a partition
        seq = self.next_seq
        offset = self.next_offset
        stamped = []
        for inner in messages:
            payload, hlen = stamp(inner, seq, offset, t)
            stamped.append((payload, hlen, offset))
            seq += 1
            offset += len(payload)
        payloads, hls, offs, times = self.payloads, self.header_lens, self.offsets, self.times
        total = 0
        for payload, hlen, off in stamped:
            payloads.append(payload)
            hls.append(hlen)
            offs.append(off)
            times.append(t)
            total += len(payload)
        self.bytes += total
        self.next_offset = offset
        self.last_offset = stamped[-1][2] if stamped else self.last_offset
        self.last_time = t
        self._enforce_bounds()
        if self.on_append is not None:
            self.on_append(self)

    # ------------------------------------------------------------------ retention
    def _drop_to(self, index: int) -> int:
        """Drop retained events before ``index``; returns how many were dropped."""
        index = min(index, len(self.payloads))
        if index <= self.head:
            return 0
        dropped = index - self.head
        self.bytes -= sum(len(p) for p in self.payloads[self.head : index])
        for i in range(self.head, index):
            self.payloads[i] = b""
        self.head = index
        if self.head > 1024 and self.head * 2 > len(self.payloads):
            h = self.head
            del self.payloads[:h], self.header_lens[:h], self.offsets[:h], self.times[:h]
            self.base_seq += h
            self.head = 0
        return dropped

    def _enforce_bounds(self) -> None:
        cut = self.head
        if self.count > self.max_events:
            cut = len(self.payloads) - self.max_events
        if self.bytes > self.max_bytes:
            excess = self.bytes - self.max_bytes
            i = max(cut, self.head)
            freed = sum(len(p) for p in self.payloads[self.head : i])
            while freed < excess and i < len(self.payloads):
                freed += len(self.payloads[i])
                i += 1
            cut = i
        if cut > self.head:
            self._drop_to(cut)

    def expire(self, now: int | None = None) -> int:
        """Apply time-based retention; returns the number of events dropped."""
        if self.count == 0:
            return 0
        limit = (now_ms() if now is None else now) - self.retention_ms
        return self._drop_to(bisect_left(self.times, limit, self.head))

    def age_out(self, up_to_seq: int | None = None, before_ms: int | None = None) -> int:
        """Drop events with sequence number <= up_to_seq and/or enqueued before ``before_ms``."""
        cut = self.head
        if up_to_seq is not None:
            cut = max(cut, up_to_seq + 1 - self.base_seq)
        if before_ms is not None:
            cut = max(cut, bisect_left(self.times, before_ms, self.head))
        return self._drop_to(cut)

    # ------------------------------------------------------------------ positions
    def index_of_seq(self, seq: int) -> int:
        return seq - self.base_seq

    def start_index(self, kind: str, value: int | None, inclusive: bool) -> int:
        """List index of the first event to deliver for a starting position."""
        n = len(self.payloads)
        if kind == "latest":
            idx = n
        elif kind == "earliest":
            idx = self.head
        elif kind == "offset":
            idx = (bisect_left if inclusive else bisect_right)(self.offsets, value, self.head, n)
        elif kind == "seq":
            idx = value - self.base_seq + (0 if inclusive else 1)
        elif kind == "time":
            idx = (bisect_left if inclusive else bisect_right)(self.times, value, self.head, n)
        else:
            raise ValueError(kind)
        return min(max(idx, self.head), n)


class Hub:
    """One event hub: config, partitions, consumer groups and who is attached."""

    def __init__(self, cfg: HubConfig, on_append: Callable[[PartitionLog], None] | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.created_ms = now_ms()
        self.deleted = False
        self.partition_ids = [str(i) for i in range(cfg.partition_count)]
        self.partitions = {pid: PartitionLog(cfg.name, pid, cfg) for pid in self.partition_ids}
        for p in self.partitions.values():
            p.on_append = on_append
        self.consumer_groups = {cg.lower(): cg for cg in cfg.consumer_groups}
        self.receivers: dict[tuple[str, str], set] = {}  # (cg lower, pid) -> receiver links
        self.phantom_epochs: dict[tuple[str, str], tuple[int, float]] = {}  # stolen by a fault: (epoch, until)
        self.senders: set = set()
        self._rr = 0
        self._key_cache: dict[str, str] = {}

    def consumer_group(self, name: str) -> str | None:
        return self.consumer_groups.get(name.lower())

    def next_round_robin(self) -> str:
        pid = self.partition_ids[self._rr % len(self.partition_ids)]
        self._rr += 1
        return pid

    def partition_for_key(self, key: str) -> str:
        pid = self._key_cache.get(key)
        if pid is None:
            from harness.partitioning import eventhubs_partition_for_key

            pid = str(eventhubs_partition_for_key(key, len(self.partition_ids)))
            if len(self._key_cache) > 100_000:
                self._key_cache.clear()
            self._key_cache[key] = pid
        return pid

    def properties(self) -> dict:
        return {
            "name": self.name,
            "created_at": self.created_ms,
            "partition_count": len(self.partition_ids),
            "partition_ids": list(self.partition_ids),
        }

    # ------------------------------------------------------------------ ownership
    def owner_epoch(self, cg: str, pid: str) -> int | None:
        """Highest epoch among attached receivers and an active fault-injected phantom owner."""
        best = None
        for link in self.receivers.get((cg, pid), ()):
            if link.epoch is not None and (best is None or link.epoch > best):
                best = link.epoch
        phantom = self.phantom_epochs.get((cg, pid))
        if phantom is not None:
            epoch, until = phantom
            if until >= time.monotonic():
                best = epoch if best is None else max(best, epoch)
            else:
                del self.phantom_epochs[(cg, pid)]
        return best

    def admit_receiver(self, cg: str, pid: str, epoch: int | None, name: str = "nil",
                       limit: int = 5) -> tuple[str | None, list, str]:
        """Decide on a new receiver: (refusal condition or None, links to steal, refusal description).

        As the service: a higher or equal owner level (epoch) takes the partition from everyone; a lower one, or
        none while an epoch receiver holds it, is refused; at most ``limit`` receivers without epoch may read a
        partition of a consumer group at once.
        """
        current = self.owner_epoch(cg, pid)
        existing = list(self.receivers.get((cg, pid), ()))
        if epoch is None:
            if current is not None:
                return service_errors.LINK_STOLEN, [], service_errors.non_epoch_refused(current)
            if len(existing) >= limit:
                names = [link.receiver_name or "nil" for link in existing]
                tracker = f"{self.cfg.name}~{pid}|{cg}"
                return service_errors.RESOURCE_LIMIT, [], service_errors.receiver_quota(limit, names, tracker)
            return None, [], ""
        if current is not None and epoch < current:
            return service_errors.LINK_STOLEN, [], service_errors.lower_epoch_refused(name, epoch, current)
        self.phantom_epochs.pop((cg, pid), None)
        return None, existing, ""
