"""Kafka's classic consumer-group protocol on the emulator's Kafka endpoint: one coordinator (this broker) for
every group, membership and rebalances, and committed offsets.

What the service offers and why this module does that:
- Kafka consumer groups are their own thing on Event Hubs, not the hub's AMQP consumer groups: they are created
  by the first JoinGroup/OffsetCommit (no portal step) and are not listed among a hub's consumer groups
  (Microsoft's Kafka FAQ, "Event Hubs consumer groups vs Kafka consumer groups", as understood here; the exact
  per-namespace limit is not modelled). So a group here never touches ``Hub.consumer_groups`` or AMQP receivers.
- Only the classic protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) is served; KIP-848's
  ConsumerGroupHeartbeat is not (Microsoft's emulator does not serve it either), so clients stay on "classic".
- Session timeouts must lie in 6000..300000 ms (the allowed range in Microsoft's "Recommended configurations for
  Apache Kafka clients", the group.min/max.session.timeout.ms of a Kafka broker), else INVALID_SESSION_TIMEOUT.
- Committed offsets are the emulator's, in memory, per hub: deleting or recreating a hub drops them (a new hub
  is a new topic); an age-out keeps them (the consumer then gets OFFSET_OUT_OF_RANGE and resets, as on Kafka).
- Nothing is kept for ever: a group with no member, no member id awaited and no offset is forgotten at once (a
  refused or abandoned JoinGroup leaves nothing), and an empty group's offsets expire ``Emulator.
  OffsetsRetentionMs`` (Kafka's ``offsets.retention.minutes``, seven days) after it became empty or last
  committed, whichever is later, taking the group with them.

The state machine lives in coordinator.py (Kafka's classic GroupCoordinator reduced to one process, on the
emulator's loop); this module is its wire protocol. A JoinGroup whose connection is cut while it waits still
counts as joined (as Kafka counts it), so a crashed consumer costs the others its session timeout, not the
rebalance timeout.
Static membership (group.instance.id) is honoured as a stable identity: a rejoin with a known instance id replaces
the old member id at once (FENCED_INSTANCE_ID for the old one), but, unlike Kafka, it still goes through a
rebalance rather than handing back the previous assignment. ListGroups and DescribeGroups answer what
`kafka-consumer-groups --list/--describe` and admin clients ask.

Served versions: FindCoordinator 0-4, JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit
2-8 (Kafka 4 clients' floor, KIP-896), OffsetFetch 1-8 (v8: several groups per request), DescribeGroups 0-5,
ListGroups 0-4.
"""

from __future__ import annotations

import harness.emulator.kafka.errors as E
from .coordinator import STABLE, Group, GroupCoordinator
from .wire import Api, Reader, Writer

__all__ = ["APIS", "GroupCoordinator"]  # apis.py builds the endpoint's coordinator from here

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
NODE_ID = 0  # the coordinator of every group is this one broker


# ---------------------------------------------------------------------------------------------- handlers


def _coord(session) -> GroupCoordinator:
    return session.endpoint.groups


async def find_coordinator(session, version: int, r: Reader) -> bytes:
    flex = version >= 3
    host, port = session.endpoint.advertised(session)
    if version >= 4:
        key_type = r.int8()
        keys = r.arr(lambda r: r.str(True), True) or []
    else:
        keys = [r.str(flex)]
        key_type = r.int8() if version >= 1 else 0
    r.tags(flex)
    error = E.NONE if key_type == 0 else E.COORDINATOR_NOT_AVAILABLE
    message = None if error == E.NONE else "only consumer groups have a coordinator here (no transactions)"
    w = Writer()
    if version >= 1:
        w.int32(0)
    if version >= 4:
        def entry(w, key):
            w.str(key, True).int32(NODE_ID if error == E.NONE else -1).str(host if error == E.NONE else "", True)
            w.int32(port if error == E.NONE else -1).int16(error).nstr(message, True).tags(True)
        return w.arr(keys, entry, True).tags(True).getvalue()
    w.int16(error)
    if version >= 1:
        w.nstr(message, flex)
    w.int32(NODE_ID if error == E.NONE else -1).str(host if error == E.NONE else "", flex)
    w.int32(port if error == E.NONE else -1)
    return w.tags(flex).getvalue()


async def join_group(session, version: int, r: Reader) -> bytes:
    flex = version >= 6
    group_id = r.str(flex)
    session_ms = r.int32()
    rebalance_ms = r.int32() if version >= 1 else session_ms
    member_id = r.str(flex)
    instance_id = r.nstr(flex) if version >= 5 else None
    protocol_type = r.str(flex)
    protocols = r.arr(lambda r: (r.str(flex), r.bytes_v(flex) or b"", r.tags(flex))[:2], flex) or []
    if version >= 8:
        r.nstr(flex)  # reason
    r.tags(flex)
    peer = getattr(session, "peer", None)
    host = f"/{peer[0]}" if isinstance(peer, tuple) else "/127.0.0.1"
    res = await _coord(session).join(_coord(session).group(group_id), member_id, instance_id, session_ms,
                                     rebalance_ms, protocol_type, protocols, session.client_id, host,
                                     require_known_member=version >= 4)
    error = res.get("error", E.NONE)
    w = Writer()
    if version >= 2:
        w.int32(0)
    w.int16(error).int32(res.get("generation", -1))
    if version >= 7:
        w.nstr(res.get("protocol_type") if error == E.NONE else None, flex)
        w.nstr(res.get("protocol") if error == E.NONE else None, flex)
    else:
        w.str(res.get("protocol") or "" if error == E.NONE else "", flex)
    w.str(res.get("leader") or "" if error == E.NONE else "", flex)
    if version >= 9:
        w.boolean(False)
    w.str(res.get("member_id", member_id), flex)

    def member(w, m):
        w.str(m[0], flex)
        if version >= 5:
            w.nstr(m[1], flex)
        w.bytes_v(m[2], flex).tags(flex)

    w.arr(res.get("members", []), member, flex)
    return w.tags(flex).getvalue()


async def sync_group(session, version: int, r: Reader) -> bytes:
    flex = version >= 4
    group_id = r.str(flex)
    generation = r.int32()
    member_id = r.str(flex)
    instance_id = r.nstr(flex) if version >= 3 else None
    if version >= 5:
        r.nstr(flex), r.nstr(flex)  # protocol type and name, checked by the client
    assignments = r.arr(lambda r: (r.str(flex), r.bytes_v(flex) or b"", r.tags(flex))[:2], flex) or []
    r.tags(flex)
    coord = _coord(session)
    g = coord.groups.get(group_id)
    if g is None:
        error, assignment = E.UNKNOWN_MEMBER_ID, b""
    else:
        error, assignment = await coord.sync(g, generation, member_id, instance_id, assignments)
    w = Writer()
    if version >= 1:
        w.int32(0)
    w.int16(error)
    if version >= 5:
        ok = error == E.NONE and g is not None
        w.nstr(g.protocol_type if ok else None, flex).nstr(g.protocol if ok else None, flex)
    return w.bytes_v(assignment, flex).tags(flex).getvalue()


async def heartbeat(session, version: int, r: Reader) -> bytes:
    flex = version >= 4
    group_id = r.str(flex)
    generation = r.int32()
    member_id = r.str(flex)
    instance_id = r.nstr(flex) if version >= 3 else None
    r.tags(flex)
    coord = _coord(session)
    g = coord.groups.get(group_id)
    error = E.UNKNOWN_MEMBER_ID if g is None else coord.heartbeat(g, generation, member_id, instance_id)
    w = Writer()
    if version >= 1:
        w.int32(0)
    return w.int16(error).tags(flex).getvalue()


async def leave_group(session, version: int, r: Reader) -> bytes:
    flex = version >= 4
    group_id = r.str(flex)
    if version >= 3:
        def leaver(r):
            out = (r.str(flex), r.nstr(flex))
            if version >= 5:
                r.nstr(flex)  # reason
            r.tags(flex)
            return out
        leavers = r.arr(leaver, flex) or []
    else:
        leavers = [(r.str(flex), None)]
    r.tags(flex)
    coord = _coord(session)
    g = coord.groups.get(group_id)
    results = [(mid, iid, E.UNKNOWN_MEMBER_ID if g is None else coord.leave(g, mid, iid)) for mid, iid in leavers]
    w = Writer()
    if version >= 1:
        w.int32(0)
    if version < 3:
        return w.int16(results[0][2]).getvalue()
    w.int16(E.NONE)
    w.arr(results, lambda w, x: w.str(x[0], flex).nstr(x[1], flex).int16(x[2]).tags(flex), flex)
    return w.tags(flex).getvalue()


async def offset_commit(session, version: int, r: Reader) -> bytes:
    flex = version >= 8
    group_id = r.str(flex)
    generation = r.int32() if version >= 1 else -1
    member_id = r.str(flex) if version >= 1 else ""
    instance_id = r.nstr(flex) if version >= 7 else None
    if 2 <= version <= 4:
        r.int64()  # retention_time_ms: offsets live as long as the emulator (and the hub)

    def partition(r):
        index, offset = r.int32(), r.int64()
        epoch = r.int32() if version >= 6 else -1
        if version == 1:
            r.int64()  # commit timestamp
        meta = r.nstr(flex)
        r.tags(flex)
        return index, offset, epoch, meta

    topics = r.arr(lambda r: (r.str(flex), r.arr(partition, flex) or [], r.tags(flex))[:2], flex) or []
    r.tags(flex)
    coord = _coord(session)
    g = coord.group(group_id) if group_id else None
    check = E.INVALID_GROUP_ID if g is None else coord.commit_check(g, generation, member_id, instance_id)
    results = []
    for name, parts in topics:
        out = []
        denied = E.TOPIC_AUTHORIZATION_FAILED if not session.covers(name) else E.NONE
        for index, offset, epoch, meta in parts:
            out.append((index, check if check != E.NONE else denied if denied != E.NONE
                        else coord.commit(g, name, index, offset, epoch, meta)))
        results.append((name, out))
    if g is not None:
        coord.drop_if_unused(g)  # a commit that failed everywhere leaves no group behind
    w = Writer()
    if version >= 3:
        w.int32(0)
    w.arr(results, lambda w, t: w.str(t[0], flex).arr(t[1], lambda w, p: w.int32(p[0]).int16(p[1]).tags(flex),
                                                      flex).tags(flex), flex)
    return w.tags(flex).getvalue()


async def offset_fetch(session, version: int, r: Reader) -> bytes:
    flex = version >= 6
    coord = _coord(session)

    def topic_req(r):
        out = (r.str(flex), r.arr(lambda r: r.int32(), flex) or [])
        r.tags(flex)
        return out

    if version >= 8:
        def group_req(r):
            out = (r.str(flex), r.arr(topic_req, flex))
            r.tags(flex)
            return out
        groups = r.arr(group_req, flex) or []
    else:
        groups = [(r.str(flex), r.arr(topic_req, flex))]
    if version >= 7:
        r.boolean()  # require_stable: there are no transactions, so nothing is ever unstable
    r.tags(flex)

    answers = []
    for group_id, topics in groups:
        g = coord.groups.get(group_id)
        if topics is None:  # every partition the group committed
            names: dict[str, list[int]] = {}
            for (t, p) in sorted(g.offsets) if g is not None else ():
                if coord.committed(g, t, p)[0] >= 0:
                    names.setdefault(t, []).append(p)
            topics = list(names.items())
        rows = []
        for name, parts in topics:  # a hub outside the credential: nothing committed there is shown
            rows.append((name, [(p, *(coord.committed(g, name, p) if g is not None and session.covers(name)
                                      else (-1, -1, ""))) for p in parts]))
        answers.append((group_id, rows))

    def partition(w, p):
        w.int32(p[0]).int64(p[1])
        if version >= 5:
            w.int32(p[2])
        w.nstr(p[3], flex).int16(E.NONE).tags(flex)

    def topic(w, t):
        w.str(t[0], flex).arr(t[1], partition, flex).tags(flex)

    w = Writer()
    if version >= 3:
        w.int32(0)
    if version >= 8:
        w.arr(answers, lambda w, a: w.str(a[0], flex).arr(a[1], topic, flex).int16(E.NONE).tags(flex), flex)
        return w.tags(flex).getvalue()
    w.arr(answers[0][1], topic, flex)
    if version >= 2:
        w.int16(E.NONE)
    return w.tags(flex).getvalue()


async def describe_groups(session, version: int, r: Reader) -> bytes:
    flex = version >= 5
    ids = r.arr(lambda r: r.str(flex), flex) or []
    if version >= 3:
        r.boolean()  # include_authorized_operations: no ACLs here, so "not requested" is answered
    r.tags(flex)
    coord = _coord(session)
    answers = []
    for gid in ids:
        g = coord.groups.get(gid)
        if g is None:  # a group nobody used: Kafka's classic answer is state Dead, no error
            answers.append((gid, "Dead", "", "", []))
            continue
        stable = g.state == STABLE
        rows = [(m.member_id, m.instance_id, m.client_id, m.client_host,
                 m.metadata(g.protocol) if stable else b"", m.assignment if stable else b"")
                for m in g.members.values()]
        answers.append((gid, g.state, g.protocol_type or "", (g.protocol or "") if stable else "", rows))

    def member(w, m):
        w.str(m[0], flex)
        if version >= 4:
            w.nstr(m[1], flex)
        w.str(m[2], flex).str(m[3], flex).bytes_v(m[4], flex).bytes_v(m[5], flex).tags(flex)

    def group(w, a):
        w.int16(E.NONE).str(a[0], flex).str(a[1], flex).str(a[2], flex).str(a[3], flex).arr(a[4], member, flex)
        if version >= 3:
            w.int32(-2147483648)
        w.tags(flex)

    w = Writer()
    if version >= 1:
        w.int32(0)
    return w.arr(answers, group, flex).tags(flex).getvalue()


async def list_groups(session, version: int, r: Reader) -> bytes:
    flex = version >= 3
    states = set(r.arr(lambda r: r.str(flex), flex) or []) if version >= 4 else set()
    r.tags(flex)
    groups = [g for g in _coord(session).groups.values() if not states or g.state in states]
    w = Writer()
    if version >= 1:
        w.int32(0)
    w.int16(E.NONE)

    def entry(w, g: Group):
        w.str(g.group_id, flex).str(g.protocol_type or "", flex)
        if version >= 4:
            w.str(g.state, flex)
        w.tags(flex)

    return w.arr(groups, entry, flex).tags(flex).getvalue()


APIS = (
    Api(DESCRIBE_GROUPS, "DescribeGroups", 0, 5, 5, describe_groups),
    Api(LIST_GROUPS, "ListGroups", 0, 4, 3, list_groups),
    Api(FIND_COORDINATOR, "FindCoordinator", 0, 4, 3, find_coordinator),
    Api(JOIN_GROUP, "JoinGroup", 0, 9, 6, join_group),
    Api(SYNC_GROUP, "SyncGroup", 0, 5, 4, sync_group),
    Api(HEARTBEAT, "Heartbeat", 0, 4, 4, heartbeat),
    Api(LEAVE_GROUP, "LeaveGroup", 0, 5, 4, leave_group),
    Api(OFFSET_COMMIT, "OffsetCommit", 2, 8, 8, offset_commit),
    Api(OFFSET_FETCH, "OffsetFetch", 1, 8, 6, offset_fetch),
)
