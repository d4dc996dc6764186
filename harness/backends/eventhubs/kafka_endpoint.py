"""Event Hubs through its Kafka endpoint (`[backend] protocol = "kafka"`): what the producers (librdkafka) and
Spark's own Kafka source are given to reach a namespace's Kafka endpoint, exactly as Microsoft documents it.

Why a module of its own: the same connection string that signs AMQP sends is, on this path, a Kafka SASL PLAIN
password (user name the literal `$ConnectionString`), so the rules for where it may travel are the same as for
any Kafka password (harness.backends.kafka.security, harness.secrets): the settings built here carry it only as a
`${VAR}` reference that the child process expands; nothing the run writes holds it.

- The service: `<namespace host>:9093`, SASL_SSL, PLAIN, certificates from public CAs (the clients' own trust
  stores). The project's emulator: 127.0.0.1 and its `kafka_tls_port`, with the CA it printed (`ca_file`), which
  librdkafka gets as `ssl.ca.location` and Spark's Java client as a PEM truststore.
- Spark's Kafka source options are Microsoft's Spark tutorial's: `kafka.bootstrap.servers`,
  `kafka.security.protocol = SASL_SSL`, `kafka.sasl.mechanism = PLAIN`, `kafka.sasl.jaas.config = ...PlainLoginModule
  required username="$ConnectionString" password="<connection string>";`, `kafka.request.timeout.ms = 60000`,
  `kafka.session.timeout.ms = 30000`, and `subscribe = <hub>` (a hub is a topic).
- Kafka offsets on Event Hubs are the events' sequence numbers, so where the query starts is given the same way
  as on AMQP: `startingOffsets` as JSON of the sequence numbers the hub stood at when the run began.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import harness.backends.kafka.security as sec

USERNAME = "$ConnectionString"  # the literal user name the service expects (not a variable)
SERVICE_PORT = 9093  # the namespace's Kafka endpoint (SASL_SSL)
# Microsoft's tutorial and "Recommended configurations for Apache Kafka clients": the service closes idle
# connections and rebalances slower than a Kafka broker; these keep Spark's consumers from timing out first
TUTORIAL_SOURCE_OPTIONS = {"kafka.request.timeout.ms": "60000", "kafka.session.timeout.ms": "30000"}
# Spark source options the harness derives here; a scenario giving one is refused (they would point the query
# elsewhere, or sign it in otherwise, than the producers and the checker)
# ... and the producers' librdkafka settings it derives (kafka_producer_settings): refused in producers.client
PRODUCER_SET_BY_HARNESS = ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
                           "sasl.username", "sasl.password", "ssl.ca.location")
SET_BY_HARNESS = ("kafka.bootstrap.servers", "kafka.security.protocol", "kafka.sasl.mechanism",
                  "kafka.sasl.jaas.config", "kafka.ssl.truststore.type", "kafka.ssl.truststore.location",
                  "kafka.ssl.truststore.certificates", "subscribe", "subscribePattern", "assign")


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where a namespace's Kafka endpoint listens: `host:port` over TLS, `ca_file` the PEM CA that signed its
    certificate (None: a public CA, the clients' default trust)."""

    host: str
    port: int
    ca_file: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def namespace_host(connection_string: str) -> str:
    """The host of a connection string's `Endpoint=sb://<host>[:port]/` (the namespace's FQDN)."""
    for part in connection_string.strip().split(";"):
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "endpoint":
            rest = value.strip().split("://", 1)[-1]
            host = rest.split("/", 1)[0].split(":", 1)[0]
            if host:
                return host
    raise ValueError("the connection string has no Endpoint=sb://<namespace host>/")


def namespace_endpoint(connection_string: str) -> KafkaEndpoint:
    """A real namespace: its Kafka endpoint is the connection string's host on port 9093, public certificates."""
    return KafkaEndpoint(namespace_host(connection_string), SERVICE_PORT)


def without_entity(connection_string: str) -> str:
    """The namespace-level connection string (no EntityPath): the password signs in to the namespace, and the
    topic read or written is named by the client (`subscribe`, the produce request), not by the password."""
    parts = [p for p in connection_string.strip().strip(";").split(";") if p and not p.startswith("EntityPath=")]
    return ";".join(parts)


def client_settings(connection_string: str, endpoint: KafkaEndpoint) -> dict[str, str]:
    """The librdkafka names (what the Kafka backend's `[backend.client]` holds) for this endpoint, the
    connection string as the password, literally: callers pass them through `referenced` before writing."""
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": USERNAME,
              "sasl.password": without_entity(connection_string)}
    if endpoint.ca_file:
        client["ssl.ca.location"] = endpoint.ca_file
    return client


def kafka_producer_settings(connection_string: str, endpoint: KafkaEndpoint,
                      environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The producers' librdkafka settings (harness.backends.kafka.sender), the password as a `${VAR}` reference."""
    client = client_settings(connection_string, endpoint)
    client["sasl.mechanisms"] = client.pop("sasl.mechanism")  # librdkafka's documented name
    return {"bootstrap.servers": endpoint.bootstrap, **sec.referenced(client, environ)}


def kafka_source_options(connection_string: str, endpoint: KafkaEndpoint, hub: str, user: Mapping[str, Any],
                   starting: Mapping[int, int] | None = None,
                   environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark's Kafka source options for `hub`, beneath the user's own (which never name what SET_BY_HARNESS
    holds: the spec refuses them). `starting`: the sequence numbers to start from (inclusive) unless the user
    gave a starting position."""
    derived = {"kafka.bootstrap.servers": endpoint.bootstrap, "subscribe": hub,
               **sec.spark_options(client_settings(connection_string, endpoint), environ),
               **TUTORIAL_SOURCE_OPTIONS}
    given = {k.lower() for k in user}
    if starting and not given & {"startingoffsets", "startingoffsetsbytimestamp", "startingtimestamp"}:
        derived["startingOffsets"] = json.dumps({hub: {str(p): int(o) for p, o in sorted(starting.items())}})
    return sec.merge_source_options(derived, {k: str(v).lower() if isinstance(v, bool) else str(v)
                                              for k, v in user.items()})
