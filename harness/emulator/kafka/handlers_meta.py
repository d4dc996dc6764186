"""ApiVersions and Metadata: what every Kafka client asks first (which versions, which topics, which broker).

A hub is a topic with its configured name and its partitions ``0..n-1``; there is one broker (node id 0) at the
address and port the client connected to, leader of every partition with itself as the only replica. A topic that
is not a hub is UNKNOWN_TOPIC_OR_PARTITION whatever ``allow_auto_topic_creation`` says: hubs are created in the
emulator's configuration (or the control API), as on the service, where they are made in the portal or ARM and
not by Kafka clients. Topic ids (v10+) are stable for a hub's lifetime and change when it is recreated, so a
client sees a recreated hub as a new topic, as it would see a deleted and re-created Kafka topic.
"""

from __future__ import annotations

import uuid

import harness.emulator.kafka.errors as E
from .wire import Api, Reader, Writer

API_VERSIONS, METADATA = 18, 3
NO_AUTHORIZED_OPERATIONS = -2147483648  # "not requested" in the protocol
_TOPIC_NS = uuid.UUID("0f5e4b9c-3f1e-4f43-9a55-6b0c2a9d7e11")


def topic_id(hub) -> bytes:
    """A UUID per hub instance: the same for the hub's lifetime, a new one after recreate."""
    cached = getattr(hub, "kafka_topic_id", None)
    if cached is None:
        cached = uuid.uuid5(_TOPIC_NS, f"{hub.name}/{hub.created_ms}/{id(hub)}").bytes
        try:
            hub.kafka_topic_id = cached
        except AttributeError:  # a Hub without a __dict__ would just recompute it
            pass
    return cached


def api_versions_body(apis, version: int) -> bytes:
    """The list every client negotiates from: ``apis`` are (key, min, max) sorted by key."""
    flex = version >= 3
    w = Writer().int16(E.NONE)

    def entry(w, api):
        w.int16(api[0]).int16(api[1]).int16(api[2]).tags(flex)

    w.arr(apis, entry, flex)
    if version >= 1:
        w.int32(0)
    return w.tags(flex).getvalue()


async def api_versions(session, version: int, r: Reader) -> bytes:
    if version >= 3:
        r.compact_string()  # client_software_name
        r.compact_string()  # client_software_version
        r.tagged_fields()
    return api_versions_body(session.endpoint.api_table, version)


async def metadata(session, version: int, r: Reader) -> bytes:
    flex = version >= 9

    def topic_entry(r: Reader):
        tid = r.uuid() if version >= 10 else None
        name = r.nstr(flex) if version >= 10 else r.str(flex)
        r.tags(flex)
        return tid, name

    requested = r.arr(topic_entry, flex)
    if version >= 4:
        r.boolean()  # allow_auto_topic_creation: hubs are never created by Kafka clients (module docstring)
    if 8 <= version <= 10:
        r.boolean()
    if version >= 8:
        r.boolean()
    r.tags(flex)
    broker = session.broker
    if requested is None or (version == 0 and not requested):  # v0: empty = all topics; v1+: null = all
        topics = [(E.NONE, hub.name, hub) for hub in broker.hubs.values() if session.covers(hub.name)]
    else:
        topics = []
        for tid, name in requested:
            if name is None:  # by id (v10+)
                hub = next((h for h in broker.hubs.values() if topic_id(h) == tid and session.covers(h.name)), None)
                topics.append((E.NONE if hub else E.UNKNOWN_TOPIC_ID, hub.name if hub else None, hub))
                continue
            hub = session.hub(name)
            topics.append((E.NONE if hub is not None else session.topic_error(name), name, hub))
    host, port = session.endpoint.advertised(session)
    w = Writer()
    if version >= 3:
        w.int32(0)
    w.arr([0], lambda w, _: _broker(w, version, flex, host, port), flex)
    if version >= 2:
        w.nstr(session.endpoint.cluster_id, flex)
    if version >= 1:
        w.int32(0)  # controller id
    w.arr(topics, lambda w, t: _topic(w, version, flex, *t), flex)
    if 8 <= version <= 10:
        w.int32(NO_AUTHORIZED_OPERATIONS)
    return w.tags(flex).getvalue()


def _broker(w: Writer, version: int, flex: bool, host: str, port: int) -> None:
    w.int32(0).str(host, flex).int32(port)
    if version >= 1:
        w.nstr(None, flex)  # rack
    w.tags(flex)


def _topic(w: Writer, version: int, flex: bool, error: int, name, hub) -> None:
    w.int16(error)
    if version >= 12:
        w.nstr(name, flex)
    else:
        w.str(name or "", flex)
    if version >= 10:
        w.uuid(topic_id(hub) if hub is not None else None)
    if version >= 1:
        w.boolean(False)
    ids = [int(pid) for pid in hub.partition_ids] if hub is not None else []

    def partition(w: Writer, index: int) -> None:
        w.int16(E.NONE).int32(index).int32(0)
        if version >= 7:
            w.int32(-1)  # leader epoch unknown: clients then skip OffsetForLeaderEpoch validation (not offered)
        w.arr([0], _node, flex).arr([0], _node, flex)
        if version >= 5:
            w.arr([], _node, flex)
        w.tags(flex)

    w.arr(ids, partition, flex)
    if version >= 8:
        w.int32(NO_AUTHORIZED_OPERATIONS)
    w.tags(flex)


def _node(w: Writer, node: int) -> None:
    w.int32(node)


APIS = (
    Api(API_VERSIONS, "ApiVersions", 0, 4, 3, api_versions, before_auth=True),
    Api(METADATA, "Metadata", 0, 12, 9, metadata),
)
