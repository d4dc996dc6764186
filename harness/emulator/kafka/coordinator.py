"""The consumer-group coordinator's state machine (Kafka's classic GroupCoordinator, reduced to one process):
members, generations, rebalances and committed offsets, with no wire format in it (groups.py speaks the protocol).

Rules taken from the service and from Kafka are listed in groups.py's docstring; this module implements them:
Empty -> PreparingRebalance (a join, a leave, an expired session) -> CompletingRebalance (every member rejoined,
or the rebalance timeout passed and the late ones were dropped; the leader gets the member list) -> Stable (the
leader's SyncGroup gave the assignments). Waiting JoinGroup/SyncGroup requests are asyncio futures on the
emulator's loop; session and rebalance timeouts are loop timers, so nothing polls.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import harness.emulator.kafka.errors as E

MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS = 6000, 300000
MAX_METADATA = 4096  # offset metadata bytes a Kafka broker keeps (offset.metadata.max.bytes)

EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join: asyncio.Future | None = None
    sync: asyncio.Future | None = None
    timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)  # member ids handed out with MEMBER_ID_REQUIRED
    instances: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    rebalance_timer: asyncio.TimerHandle | None = None
    # (topic, partition) -> (offset, leader epoch, metadata); per topic the hub object the commits belong to
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = field(default_factory=dict)
    topic_hubs: dict[str, object] = field(default_factory=dict)  # the Hub itself: a new one is a new topic
    committed_at: dict[tuple[str, int], float] = field(default_factory=dict)  # time.monotonic() of each commit
    emptied_at: float = field(default_factory=time.monotonic)  # when it last had no member (created empty)


class GroupCoordinator:
    """Every Kafka consumer group of one emulator (created on first use), on the emulator's event loop."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.groups: dict[str, Group] = {}
        broker.hub_listeners.append(self.hub_changed)

    @property
    def loop(self):
        return self.broker.loop

    def group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    def drop_if_unused(self, g: Group) -> None:
        """Forget a group that holds nothing: no member, no member id handed out and awaited, no committed offset
        (Kafka's empty group without offsets becomes Dead and is removed). A request that failed leaves nothing
        behind, and 20,000 JoinGroups leave no 20,000 groups once their sessions ended."""
        if (g.state == EMPTY and not g.members and not g.pending and not g.offsets
                and self.groups.get(g.group_id) is g):
            if g.rebalance_timer is not None:
                g.rebalance_timer.cancel()
            del self.groups[g.group_id]

    def expire_offsets(self, cutoff: float) -> None:
        """Offset retention (Kafka's ``offsets.retention.minutes``): a group without members loses each committed
        offset whose commit and the group's becoming empty are both at or before ``cutoff`` (time.monotonic()),
        and a group left holding nothing is forgotten. Groups with members keep their offsets."""
        for g in list(self.groups.values()):
            if g.state != EMPTY or g.members or g.emptied_at > cutoff:
                continue
            for tp in [tp for tp, at in g.committed_at.items() if at <= cutoff]:
                del g.committed_at[tp]
                g.offsets.pop(tp, None)
            for topic in [t for t in g.topic_hubs if not any(tp[0] == t for tp in g.offsets)]:
                del g.topic_hubs[topic]
            self.drop_if_unused(g)

    # ------------------------------------------------------------------ hubs
    def hub_changed(self, hub_name: str) -> None:
        """Drop committed offsets of a hub that was deleted or recreated (an age-out leaves the same hub)."""
        hub = self.broker.hub(hub_name)
        key = hub_name.lower()
        for g in self.groups.values():
            for topic in [t for t in g.topic_hubs if t.lower() == key]:
                if g.topic_hubs[topic] is not hub:
                    del g.topic_hubs[topic]
                    for tp in [tp for tp in g.offsets if tp[0] == topic]:
                        del g.offsets[tp]
                        g.committed_at.pop(tp, None)

    # ------------------------------------------------------------------ membership
    def _touch(self, g: Group, m: Member) -> None:
        """(Re)start the member's session timer; a member waiting in JoinGroup is timed by the rebalance instead."""
        if m.timer is not None:
            m.timer.cancel()
        m.timer = self.loop.call_later(m.session_timeout_ms / 1000, self._expire, g, m.member_id)

    def _expire(self, g: Group, member_id: str) -> None:
        m = g.members.get(member_id)
        if m is None or (m.join is not None and not m.join.done()):
            return  # waiting in JoinGroup: the rebalance timeout decides
        self._remove(g, m)
        self._member_left(g)

    def _remove(self, g: Group, m: Member) -> None:
        g.members.pop(m.member_id, None)
        if m.instance_id is not None and g.instances.get(m.instance_id) == m.member_id:
            del g.instances[m.instance_id]
        if m.timer is not None:
            m.timer.cancel()
        if m.join is not None and not m.join.done():
            m.join.set_result({"error": E.UNKNOWN_MEMBER_ID})
        if m.sync is not None and not m.sync.done():
            m.sync.set_result((E.UNKNOWN_MEMBER_ID, b""))
        if g.leader == m.member_id:
            g.leader = None

    def _member_left(self, g: Group) -> None:
        if g.state in (STABLE, COMPLETING):
            self._prepare(g)
        elif g.state == PREPARING:
            self._maybe_complete(g)

    def _prepare(self, g: Group) -> None:
        """Start a rebalance: pending SyncGroups learn REBALANCE_IN_PROGRESS; members rejoin via Heartbeat's error."""
        for m in g.members.values():
            if m.sync is not None and not m.sync.done():
                m.sync.set_result((E.REBALANCE_IN_PROGRESS, b""))
        g.state = PREPARING
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        g.rebalance_timer = self.loop.call_later(timeout / 1000, self._rebalance_timeout, g)
        self._maybe_complete(g)

    def _rebalance_timeout(self, g: Group) -> None:
        if g.state != PREPARING:
            return
        for m in [m for m in g.members.values() if not _rejoined(m)]:
            self._remove(g, m)  # did not rejoin in time
        self._maybe_complete(g, force=True)

    def _maybe_complete(self, g: Group, force: bool = False) -> None:
        if g.state != PREPARING:
            return
        if not force and not all(_rejoined(m) for m in g.members.values()):
            return  # someone has not rejoined yet
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
            g.rebalance_timer = None
        g.generation += 1
        if not g.members:
            g.state, g.protocol, g.protocol_type, g.leader = EMPTY, None, None, None
            g.emptied_at = time.monotonic()
            self.drop_if_unused(g)
            return
        g.protocol = _select_protocol(g.members.values())
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING
        everyone = [(m.member_id, m.instance_id, m.metadata(g.protocol)) for m in g.members.values()]
        for m in g.members.values():
            m.assignment = b""
            if m.join.cancelled():  # its connection went away: a member until its session ends, not rejoined
                m.join = None
            else:
                m.join.set_result({"error": E.NONE, "members": everyone if m.member_id == g.leader else []})
            self._touch(g, m)

    # ------------------------------------------------------------------ requests
    async def join(self, g: Group, member_id: str, instance_id: str | None, session_ms: int, rebalance_ms: int,
                   protocol_type: str, protocols: list[tuple[str, bytes]], client_id: str, client_host: str,
                   require_known_member: bool) -> dict:
        result = await self._join(g, member_id, instance_id, session_ms, rebalance_ms, protocol_type, protocols,
                                  client_id, client_host, require_known_member)
        if result.get("error", E.NONE) not in (E.NONE, E.MEMBER_ID_REQUIRED):
            self.drop_if_unused(g)  # a refused join creates no group
        return result

    def _forget_pending(self, g: Group, member_id: str) -> None:
        """A member id handed out with MEMBER_ID_REQUIRED that was not used to join within its session timeout."""
        g.pending.discard(member_id)
        self.drop_if_unused(g)

    async def _join(self, g: Group, member_id: str, instance_id: str | None, session_ms: int, rebalance_ms: int,
                    protocol_type: str, protocols: list[tuple[str, bytes]], client_id: str, client_host: str,
                    require_known_member: bool) -> dict:
        if not g.group_id:
            return {"error": E.INVALID_GROUP_ID}
        if not MIN_SESSION_TIMEOUT_MS <= session_ms <= MAX_SESSION_TIMEOUT_MS:
            return {"error": E.INVALID_SESSION_TIMEOUT}
        if not protocols or (g.members and (protocol_type != g.protocol_type
                                            or not _common(g.members.values(), protocols))):
            return {"error": E.INCONSISTENT_GROUP_PROTOCOL}
        if not member_id:
            if instance_id is not None and instance_id in g.instances:
                old = g.members.get(g.instances[instance_id])
                if old is not None:
                    self._remove(g, old)  # the static member came back under a new id: fence the old one
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member and instance_id is None:
                g.pending.add(member_id)  # kept for one session timeout, as Kafka keeps a pending member
                self.loop.call_later(session_ms / 1000, self._forget_pending, g, member_id)
                return {"error": E.MEMBER_ID_REQUIRED, "member_id": member_id}
        elif member_id not in g.members and member_id not in g.pending:
            return {"error": E.UNKNOWN_MEMBER_ID, "member_id": member_id}
        elif instance_id is not None and g.instances.get(instance_id, member_id) != member_id:
            return {"error": E.FENCED_INSTANCE_ID, "member_id": member_id}
        g.pending.discard(member_id)
        m = g.members.get(member_id)
        if m is None:
            m = g.members[member_id] = Member(member_id, instance_id, client_id, client_host, session_ms,
                                              rebalance_ms, protocol_type, protocols)
            if instance_id is not None:
                g.instances[instance_id] = member_id
        else:
            m.session_timeout_ms, m.rebalance_timeout_ms, m.protocols = session_ms, rebalance_ms, protocols
        if m.timer is not None:
            m.timer.cancel()
            m.timer = None
        if m.join is not None and not m.join.done():
            m.join.set_result({"error": E.UNKNOWN_MEMBER_ID})  # an older JoinGroup of the same member
        m.join = self.loop.create_future()
        g.protocol_type = protocol_type
        if g.state != PREPARING:
            self._prepare(g)
        else:
            self._maybe_complete(g)
        result = await m.join
        if result.get("error", E.NONE) != E.NONE:
            return {**result, "member_id": member_id}
        return {**result, "member_id": member_id, "generation": g.generation, "protocol": g.protocol,
                "protocol_type": g.protocol_type, "leader": g.leader}

    async def sync(self, g: Group, generation: int, member_id: str, instance_id: str | None,
                   assignments: list[tuple[str, bytes]]) -> tuple[int, bytes]:
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID, b""
        if instance_id is not None and g.instances.get(instance_id) != member_id:
            return E.FENCED_INSTANCE_ID, b""
        if generation != g.generation:
            return E.ILLEGAL_GENERATION, b""
        if g.state == PREPARING:
            return E.REBALANCE_IN_PROGRESS, b""
        self._touch(g, m)
        if g.state == STABLE:
            return E.NONE, m.assignment
        m.sync = self.loop.create_future()
        if member_id == g.leader:
            given = dict(assignments)
            for other in g.members.values():
                other.assignment = given.get(other.member_id, b"")
            g.state = STABLE
            for other in g.members.values():
                if other.sync is not None and not other.sync.done():
                    other.sync.set_result((E.NONE, other.assignment))
        return await m.sync

    def heartbeat(self, g: Group, generation: int, member_id: str, instance_id: str | None) -> int:
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if instance_id is not None and g.instances.get(instance_id) != member_id:
            return E.FENCED_INSTANCE_ID
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
        self._touch(g, m)
        return E.REBALANCE_IN_PROGRESS if g.state == PREPARING else E.NONE

    def leave(self, g: Group, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            known = g.instances.get(instance_id)
            if known is None:
                return E.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return E.FENCED_INSTANCE_ID
            member_id = known
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        self._remove(g, m)
        self._member_left(g)
        return E.NONE

    def commit_check(self, g: Group, generation: int, member_id: str, instance_id: str | None) -> int:
        """Whether this OffsetCommit may write (Kafka's order of checks): a simple commit (generation -1) to a group
        without members, else the member of the current generation, outside CompletingRebalance."""
        if generation < 0 and not g.members:
            return E.NONE
        if g.state == COMPLETING:
            return E.REBALANCE_IN_PROGRESS
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if instance_id is not None and g.instances.get(instance_id) != member_id:
            return E.FENCED_INSTANCE_ID
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
        self._touch(g, m)
        return E.NONE

    def commit(self, g: Group, topic: str, partition: int, offset: int, epoch: int, metadata: str | None) -> int:
        hub = self.broker.hub(topic)
        if hub is None or str(partition) not in hub.partitions:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if metadata is not None and len(metadata.encode()) > MAX_METADATA:
            return E.OFFSET_METADATA_TOO_LARGE
        if g.topic_hubs.get(topic) is not hub:
            for tp in [tp for tp in g.offsets if tp[0] == topic]:
                del g.offsets[tp]
                g.committed_at.pop(tp, None)
            g.topic_hubs[topic] = hub
        g.offsets[(topic, partition)] = (offset, epoch, metadata)
        g.committed_at[(topic, partition)] = time.monotonic()
        return E.NONE

    def committed(self, g: Group, topic: str, partition: int) -> tuple[int, int, str | None]:
        hub = self.broker.hub(topic)
        if hub is None or g.topic_hubs.get(topic) is not hub:
            return -1, -1, ""
        return g.offsets.get((topic, partition), (-1, -1, ""))


def _rejoined(m: Member) -> bool:
    """The member has a JoinGroup in this rebalance: waiting, or cut off by its connection (as Kafka counts it)."""
    return m.join is not None and (not m.join.done() or m.join.cancelled())


def _common(members, protocols) -> bool:
    names = {p for p, _ in protocols}
    return all(names & {p for p, _ in m.protocols} for m in members)


def _select_protocol(members) -> str:
    """Kafka's choice: among protocols every member supports, the one most members list first among those."""
    members = list(members)
    candidates = set.intersection(*({p for p, _ in m.protocols} for m in members))
    votes: dict[str, int] = {}
    for m in members:
        choice = next(p for p, _ in m.protocols if p in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    return max(votes, key=lambda p: (votes[p], -min(i for m in members for i, (q, _) in enumerate(m.protocols)
                                                    if q == p)))
