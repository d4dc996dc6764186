"""The `[backend]` table for Kafka, and the names of Spark's Kafka source options (checked, never guessed)."""
from __future__ import annotations

import os
from typing import Any, Literal, Union

from pydantic import Field, field_serializer, model_validator

from harness.backends.base import Backend, BackendSpec
from harness.backends.capabilities import BrokerProcesses, Capability, ProxiedListener, TopicAdmin
import harness.backends.kafka.security as sec
from harness.jvm.artifacts import SPARK_KAFKA

Scalar = Union[str, int, float, bool]

# Spark's Kafka source options (connector/kafka-0-10-sql, KafkaSourceProvider); `kafka.*` go to the consumer.
SPARK_KAFKA_SOURCE_OPTIONS = [
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition",
    "groupIdPrefix", "includeHeaders"]
_KNOWN_OPTIONS = {o.lower() for o in SPARK_KAFKA_SOURCE_OPTIONS}  # Spark reads option names case-insensitively
_SET_BY_HARNESS = {"subscribe", "subscribepattern", "assign", "kafka.bootstrap.servers"}


class KafkaSpec(BackendSpec):
    sender = "harness.backends.kafka.sender:KafkaSender"
    batch_cap_option = "maxOffsetsPerTrigger"
    batch_cap_exact = False
    placement = "kafka"
    spark_jars = (SPARK_KAFKA,)  # Spark's own Kafka source (spark-sql-kafka-0-10) and its clients

    kind: Literal["kafka"] = "kafka"
    mode: Literal["embedded", "external", "container"] = "embedded"
    nodes: int = Field(1, ge=1, le=5, description="embedded broker nodes (3 for broker-kill faults)")
    heap_mb: int = Field(512, ge=128, le=4096)
    bootstrap_servers: str | None = Field(None, description="required with mode = external")
    existing_topic: Literal["refuse", "recreate"] = Field("refuse", description=(
        "external: when stream.name is already a topic on the cluster, \"refuse\" the run (exit 2, nothing touched) "
        "or \"recreate\" it (deleted with its records, then created anew: a topic of an earlier harness run). The "
        "harness's own brokers always start empty"))
    broker: dict[str, Scalar] = Field(default_factory=dict, description="extra server.properties (embedded)")
    proxy: bool = Field(False, strict=True, description=(
        "embedded: the query's Kafka connections go through the loopback TCP proxy (harness.netproxy) without any "
        "fault, so every connection is recorded with its client.id (result.json consumers: Kafka consumers created "
        "per batch); a network fault puts the same proxy there anyway. Off by default: a hop and a process more"))
    client: dict[str, Scalar] = Field(default_factory=dict, description=(
        "client security settings, librdkafka names (security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password, ssl.*): to the producers, the harness's admin and Spark's source (as kafka.*); a secret as "
        "\"${ENV_VAR}\" or `<name>_env = \"ENV_VAR\"`"))
    sasl: Literal["PLAIN"] | None = Field(None, description=(
        "embedded: clients connect through a SASL_PLAINTEXT listener with this mechanism, an ACL authorizer on"))
    users: dict[str, str] = Field(default_factory=dict, description=(
        "embedded with sasl: user -> password (\"${ENV_VAR}\" allowed)"))
    super_users: list[str] = Field(default_factory=lambda: ["admin"], description=(
        "embedded with sasl: users allowed everything; the others may read, write, describe, create topics and "
        "describe their configs, nothing more"))

    @field_serializer("client")
    def _redact_client(self, client: dict[str, Scalar]) -> dict[str, Scalar]:
        return sec.redacted(client)

    @field_serializer("users")
    def _redact_users(self, users: dict[str, str]) -> dict[str, str]:
        return {u: p if sec.REF.fullmatch(p) else sec.REDACTED for u, p in users.items()}

    def client_settings(self) -> dict[str, Scalar]:
        """[backend.client] as the clients get it: with `sasl` on an embedded broker, the protocol and mechanism
        filled in and the user's password taken from `users` (credentials are written once)."""
        client = dict(self.client)
        if self.sasl and self.mode == "embedded":
            client.setdefault("security.protocol", "SASL_PLAINTEXT")
            if "sasl.mechanisms" not in client:
                client.setdefault("sasl.mechanism", self.sasl)
            user = client.get("sasl.username")
            if isinstance(user, str) and user in self.users and "sasl.password_env" not in client:
                client.setdefault("sasl.password", self.users[user])
        return client

    @model_validator(mode="after")
    def _security(self):
        if self.sasl is not None:
            if self.mode != "embedded":
                raise ValueError(f"sasl = {self.sasl!r} configures the embedded broker (mode = 'embedded'); for "
                                 f"mode = {self.mode!r} give the cluster's settings in [backend.client]")
            if not self.users:
                raise ValueError("sasl needs [backend.users]: user = \"password\", ... (the broker's accounts)")
            bad = [u for u in self.users if not u or any(c in u for c in ' ";=,')]
            if bad:
                raise ValueError(f"users: {bad[0]!r} is not a user name (no spaces, quotes, ';', '=' or ',')")
            missing = [u for u in self.super_users if u not in self.users]
            if missing:
                raise ValueError(f"super_users: {missing[0]!r} is not in users ({', '.join(self.users)})")
            user = self.client.get("sasl.username")
            if user not in self.users:
                raise ValueError(f"sasl needs backend.client.\"sasl.username\" = one of users "
                                 f"({', '.join(self.users)}); got {user!r}")
            for u, password in self.users.items():
                for var in sec.REF.findall(password):
                    if var not in os.environ:
                        raise ValueError(f"users.{u} needs the environment variable {var}, which is not set")
            settings = self.client_settings()
            if sec.protocol(settings) != "SASL_PLAINTEXT" or sec.mechanism(settings) != self.sasl:
                raise ValueError(f"with sasl = {self.sasl!r} the embedded listener is SASL_PLAINTEXT with "
                                 f"{self.sasl}: backend.client says {sec.protocol(settings)} / "
                                 f"{sec.mechanism(settings)}")
        elif self.users:
            raise ValueError("users are the embedded broker's SASL accounts: they need sasl = 'PLAIN'")
        try:
            sec.check(self.client_settings())
        except ValueError as exc:
            raise ValueError(f"client: {exc}") from None
        if self.mode != "external" and not self.sasl and sec.protocol(self.client) != "PLAINTEXT":
            raise ValueError(f"client: security.protocol = {sec.protocol(self.client)!r} but the {self.mode} broker "
                             "listens in PLAINTEXT" + ("; set sasl = 'PLAIN' for a SASL listener"
                                                       if self.mode == "embedded" else ""))
        return self

    @model_validator(mode="after")
    def _external_needs_bootstrap(self):
        if self.mode == "external" and not self.bootstrap_servers:
            raise ValueError("mode = 'external' needs bootstrap_servers = 'host:port,...'")
        if self.proxy and self.mode != "embedded":
            raise ValueError(f"proxy = true needs mode = 'embedded' (the proxied listener is added to its "
                             f"brokers); mode is {self.mode!r}")
        return self

    def capabilities(self) -> frozenset[type[Capability]]:
        if self.mode == "embedded":
            return frozenset({TopicAdmin, BrokerProcesses, ProxiedListener})
        return frozenset({TopicAdmin})

    def prepare(self, ctx) -> None:
        if self.proxy:
            from harness.netproxy import put_in_front

            put_in_front(ctx)

    def starting_title(self) -> str:
        return "starting Kafka"

    def build(self, stream) -> Backend:
        if self.mode == "embedded":
            from harness.backends.kafka.embedded import EmbeddedKafka

            backend = EmbeddedKafka(nodes=self.nodes, heap_mb=self.heap_mb,
                                    broker_config={k: str(v) for k, v in self.broker.items()},
                                    sasl=self.sasl, users=self.users, super_users=self.super_users)
        elif self.mode == "external":
            from harness.backends.kafka.external import ExternalKafka

            backend = ExternalKafka(self.bootstrap_servers or "", self.existing_topic)
        else:
            from harness.backends.kafka.container import ContainerKafka

            backend = ContainerKafka()
        backend.set_client(self.client_settings())
        return backend

    def check_source_options(self, options: dict[str, Any]) -> None:
        for key in options:
            low = key.lower()
            if low in _SET_BY_HARNESS:
                raise ValueError(f"{key!r} is set by the harness from [stream] and [backend]")
            if low.startswith("kafka."):
                continue
            if low not in _KNOWN_OPTIONS:
                raise ValueError(f"{key!r} is not a Spark Kafka source option; allowed: kafka.<consumer setting> or "
                                 + ", ".join(sorted(SPARK_KAFKA_SOURCE_OPTIONS)))
