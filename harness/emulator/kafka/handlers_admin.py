"""What admin clients ask besides Metadata and ListOffsets: DescribeCluster and DescribeConfigs.

Spark's Kafka source on the driver and Apache Kafka's ``kafka-topics --describe`` use Kafka's Admin client, which
describes topics through Metadata, asks DescribeCluster for the brokers (newer clients) and DescribeConfigs for a
topic's configuration. A hub's configuration is answered read-only from its emulator settings (retention, event
size limit, delete cleanup), as the service answers it: topic-level settings are made in the portal or ARM, not
with the Kafka admin API (Microsoft's "Apache Kafka configurations for Event Hubs"). CreateTopics, DeleteTopics,
AlterConfigs and the other admin APIs are not offered, so they are absent from ApiVersions and a client reports
them as unsupported by the broker.
"""

from __future__ import annotations

import harness.emulator.kafka.errors as E
from .wire import Api, Reader, Writer

DESCRIBE_CONFIGS, DESCRIBE_CLUSTER = 32, 60
TOPIC, BROKER = 2, 4  # resource types
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # config sources
STRING, INT, LONG = 2, 3, 5  # config types
NO_AUTHORIZED_OPERATIONS = -2147483648


async def describe_cluster(session, version: int, r: Reader) -> bytes:
    r.boolean()  # include cluster authorized operations
    endpoint_type = r.int8() if version >= 1 else 1
    r.tagged_fields()
    host, port = session.endpoint.advertised(session)
    w = Writer().int32(0)
    if endpoint_type != 1:  # 1 = brokers; 2 = controllers, which clients never reach here
        w.int16(E.UNSUPPORTED_ENDPOINT_TYPE).compact_nullable_string("only broker endpoints are served")
    else:
        w.int16(E.NONE).compact_nullable_string(None)
    if version >= 1:
        w.int8(endpoint_type)
    w.compact_string(session.endpoint.cluster_id).int32(0)
    w.compact_array([0], lambda w, _: w.int32(0).compact_string(host).int32(port).compact_nullable_string(None)
                    .tags(True))
    return w.int32(NO_AUTHORIZED_OPERATIONS).tags(True).getvalue()


def topic_configs(broker, hub) -> list[tuple[str, str, int, int]]:
    """(name, value, source, type) of a hub as a Kafka topic's configuration."""
    cfg = hub.cfg
    return [
        ("cleanup.policy", "delete", DEFAULT_CONFIG, STRING),
        ("compression.type", "producer", DEFAULT_CONFIG, STRING),
        ("max.message.bytes", str(broker.cfg.max_message_size), DEFAULT_CONFIG, INT),
        ("message.timestamp.type", "LogAppendTime", DEFAULT_CONFIG, STRING),
        ("retention.bytes", str(cfg.max_bytes_per_partition), DYNAMIC_TOPIC_CONFIG, LONG),
        ("retention.ms", str(int(cfg.retention_s * 1000)), DYNAMIC_TOPIC_CONFIG, LONG),
    ]


async def describe_configs(session, version: int, r: Reader) -> bytes:
    flex = version >= 4

    def resource(r: Reader):
        kind = r.int8()
        name = r.str(flex)
        keys = r.arr(lambda r: r.str(flex), flex)
        r.tags(flex)
        return kind, name, keys

    resources = r.arr(resource, flex) or []
    synonyms = r.boolean() if version >= 1 else False
    if version >= 3:
        r.boolean()  # include documentation: none to give
    r.tags(flex)
    broker = session.broker
    results = []
    for kind, name, keys in resources:
        if kind == TOPIC:
            hub = session.hub(name)
            if hub is None:
                error = session.topic_error(name)
                results.append((error, f"Topic '{name}' does not exist" if error == E.UNKNOWN_TOPIC_OR_PARTITION
                                else f"Not authorized to access topic '{name}'", kind, name, []))
                continue
            configs = topic_configs(broker, hub)
        elif kind == BROKER:
            configs = []
        else:
            results.append((E.INVALID_REQUEST, f"resource type {kind} is not described here", kind, name, []))
            continue
        if keys is not None:
            configs = [c for c in configs if c[0] in keys]
        results.append((E.NONE, None, kind, name, configs))

    def config(w: Writer, c) -> None:
        w.str(c[0], flex).nstr(c[1], flex).boolean(True)
        if version >= 1:
            w.int8(c[2])
        w.boolean(False)
        if version >= 1:
            w.arr([c] if synonyms else [], lambda w, s: w.str(s[0], flex).nstr(s[1], flex).int8(s[2]).tags(flex), flex)
        if version >= 3:
            w.int8(c[3]).nstr(None, flex)
        w.tags(flex)

    w = Writer().int32(0)
    w.arr(results, lambda w, res: w.int16(res[0]).nstr(res[1], flex).int8(res[2]).str(res[3], flex)
          .arr(res[4], config, flex).tags(flex), flex)
    return w.tags(flex).getvalue()


APIS = (
    Api(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, 4, describe_configs),
    Api(DESCRIBE_CLUSTER, "DescribeCluster", 0, 1, 0, describe_cluster),
)
