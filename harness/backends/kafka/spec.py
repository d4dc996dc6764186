"""The `[backend]` table for Kafka, and the names of Spark's Kafka source options (checked, never guessed)."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Literal, Union

from pydantic import Field, field_serializer, model_validator

from harness.backends.base import Backend, BackendSpec
from harness.backends.capabilities import BrokerProcesses, Capability, ProxiedListener, TopicAdmin
import harness.backends.kafka.security as sec
from harness.secrets import REDACTED, REF
from harness.text.durations import spark_time_string_ms
from harness.jvm.artifacts import SPARK_KAFKA
from harness.settings import check as rules
from harness.text.suggest import did_you_mean, quote

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
# KafkaSourceProvider.validateStreamOptions: a streaming query reads on for ever, so it has no end
_BATCH_ONLY = {"endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"}
# consumer settings Spark refuses (KafkaSourceProvider.validateGeneralOptions), each with what to use instead
_REFUSED_CONSUMER = {
    "kafka.auto.offset.reset": "set the source option startingOffsets to 'earliest' or 'latest' instead",
    "kafka.key.deserializer": "keys are always read as bytes; cast the key column in the query instead",
    "kafka.value.deserializer": "values are always read as bytes; cast the value column in the query instead",
    "kafka.enable.auto.commit": "Spark tracks offsets in its checkpoint, never with the consumer's commits",
    "kafka.interceptor.classes": "Spark does not support consumer interceptors",
}
_LONG_MAX = 2 ** 63 - 1
_INT_MAX = 2 ** 31 - 1


def _integer(value: str, low: int, high: int) -> int:
    """What Scala's String.toLong / toInt accepts (an optional sign and digits, nothing else), within [low, high]."""
    if not re.fullmatch(r"[+-]?[0-9]+", value) or not low <= int(value) <= high:
        kind = "an integer" if high == _LONG_MAX or high == _INT_MAX else "an integer up to " + str(high)
        raise ValueError(f"{quote(value)}: expected {kind} of at least {low}" + (
            "" if high in (_LONG_MAX, _INT_MAX) else f" and at most {high}"))
    return int(value)


def _positive_long(value: str) -> None:
    _integer(value, 1, _LONG_MAX)


def _positive_int(value: str) -> None:
    _integer(value, 1, _INT_MAX)


def _non_negative_long(value: str) -> None:
    _integer(value, 0, _LONG_MAX)


def _boolean(value: str) -> None:
    """Scala's String.toBoolean: 'true' or 'false' in any case; anything else Spark refuses or misreads."""
    if value.lower() not in ("true", "false"):
        raise ValueError(f"{quote(value)}: expected true or false")


def _time_string(value: str) -> None:
    spark_time_string_ms(value)


def _offsets_json(value: str, what: str, low: int) -> dict:
    """{"topic": {"0": n, ...}}: Spark's JsonUtils.partitionOffsets shape."""
    try:
        data = json.loads(value)
    except ValueError:
        data = None
    shape_ok = isinstance(data, dict) and data and all(
        isinstance(parts, dict) and parts and all(
            re.fullmatch(r"[0-9]+", str(p)) and isinstance(n, int) and not isinstance(n, bool) and n >= low
            for p, n in parts.items()) for parts in data.values())
    if not shape_ok:
        raise ValueError(f"{quote(value)}: expected {what}")
    return data


def _starting_offsets(value: str) -> None:
    if value.strip().lower() in ("earliest", "latest"):
        return
    _offsets_json(value, "'earliest', 'latest' or JSON such as {\"events\": {\"0\": 23, \"1\": -2}} (an offset "
                  "per partition, -2 earliest, -1 latest)", -2)


def _starting_by_timestamp(value: str) -> None:
    _offsets_json(value, "JSON such as {\"events\": {\"0\": 1700000000000, \"1\": 1700000000000}} (a timestamp "
                  "in epoch milliseconds per partition)", 0)


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value.strip().lower() not in allowed:
            raise ValueError(f"{quote(value)}: allowed: {', '.join(allowed)}")
    return check


def _non_empty(value: str) -> None:
    if not value.strip():
        raise ValueError("empty; give a prefix for the consumer group ids Spark makes")


# Every Spark Kafka source option, with the values Spark takes (KafkaSourceProvider, KafkaMicroBatchStream).
OPTION_VALUES: dict[str, Callable[[str], None]] = {
    "startingOffsets": _starting_offsets,
    "startingOffsetsByTimestamp": _starting_by_timestamp,
    "startingTimestamp": _non_negative_long,
    "startingOffsetsByTimestampStrategy": _one_of("error", "latest"),
    "failOnDataLoss": _boolean,
    "includeHeaders": _boolean,
    "kafkaConsumer.pollTimeoutMs": _positive_long,
    "fetchOffset.numRetries": _positive_int,
    "fetchOffset.retryIntervalMs": _non_negative_long,
    "maxOffsetsPerTrigger": _positive_long,
    "minOffsetsPerTrigger": _positive_long,
    "maxTriggerDelay": _time_string,
    "minPartitions": _positive_int,
    "maxRecordsPerPartition": _positive_long,
    "groupIdPrefix": _non_empty,
}
_VALUES_BY_LOWER = {k.lower(): (k, v) for k, v in OPTION_VALUES.items()}


class KafkaSpec(BackendSpec):
    sender = "harness.backends.kafka.sender:KafkaSender"
    batch_cap_option = "maxOffsetsPerTrigger"
    batch_cap_exact = False
    placement = "kafka"
    spark_jars = (SPARK_KAFKA,)  # Spark's own Kafka source (spark-sql-kafka-0-10) and its clients

    kind: Literal["kafka"] = Field("kafka", description='kafka: Apache Kafka')
    mode: Literal["embedded", "external", "container"] = Field("embedded", description="embedded (a real broker the "
                                                                                       "run starts, KRaft, loopback),"
                                                                                       " external (a cluster you "
                                                                                       "give) or container (Docker)")
    nodes: int = Field(1, ge=1, le=5, description="embedded broker nodes (3 for broker-kill faults)")
    heap_mb: int = Field(512, ge=128, le=4096, description="each embedded broker's JVM heap, MB")
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
    sasl: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(None, description=(
        "embedded: clients connect through a SASL listener with this mechanism, an ACL authorizer on; "
        "SASL_PLAINTEXT, or SASL_SSL (a certificate the harness makes) when backend.client says "
        "security.protocol = \"SASL_SSL\""))
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
        return {u: p if REF.fullmatch(p) else REDACTED for u, p in users.items()}

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
                for var in REF.findall(password):
                    if var not in os.environ:
                        raise ValueError(f"users.{u} needs the environment variable {var}, which is not set")
            problem = sec.embedded_problem(self.sasl, self.client_settings())
            if problem:
                raise ValueError(problem)
        elif self.users:
            raise ValueError("users are the embedded broker's SASL accounts: they need sasl = 'PLAIN', "
                             "'SCRAM-SHA-256' or 'SCRAM-SHA-512'")
        try:
            sec.check(self.client_settings())
        except ValueError as exc:
            raise ValueError(f"client: {exc}") from None
        if sec.tls_problem(self.client_settings()):
            raise ValueError(f"client: {sec.tls_problem(self.client_settings())}")
        if self.mode != "external" and not self.sasl and sec.protocol(self.client) != "PLAINTEXT":
            raise ValueError(f"client: security.protocol = {sec.protocol(self.client)!r} but the {self.mode} broker "
                             "listens in PLAINTEXT" + ("; set sasl = 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512' for "
                                                       "a SASL listener (with security.protocol = 'SASL_SSL' for TLS)"
                                                       if self.mode == "embedded" else ""))
        return self

    @model_validator(mode="after")
    def _external_needs_bootstrap(self):
        if self.mode == "external" and not self.bootstrap_servers:
            raise ValueError("mode = 'external' needs bootstrap_servers = 'host:port,...'")
        if self.proxy and self.mode != "embedded":
            raise ValueError(f"proxy = true needs mode = 'embedded' (the proxied listener is added to its "
                             f"brokers); mode is {self.mode!r}")
        if self.proxy and self.sasl and sec.protocol(self.client_settings()) == "SASL_SSL":
            raise ValueError("proxy = true records each connection's client.id from its first request, which "
                             "SASL_SSL encrypts: use security.protocol = 'SASL_PLAINTEXT' to count consumers (network "
                             "faults still work over TLS)")
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
                                    sasl=self.sasl, users=self.users, super_users=self.super_users,
                                    tls=bool(self.sasl) and sec.protocol(self.client_settings()) == "SASL_SSL")
        elif self.mode == "external":
            from harness.backends.kafka.external import ExternalKafka

            backend = ExternalKafka(self.bootstrap_servers or "", self.existing_topic)
        else:
            from harness.backends.kafka.container import ContainerKafka

            backend = ContainerKafka()
        backend.set_client(self.client_settings())
        return backend

    def setting_problems(self, scenario, spark_judged) -> list[str]:
        """Spark's Kafka source and sink options, the topic's and the brokers' configs (Kafka's own names), and
        librdkafka's settings of the producers and of the harness's own clients."""
        return (spark_judged("spark.source_options", scenario.spark.source_options, rules.consumer_option_problems)
                + rules.producer_option_problems(getattr(scenario.spark, "sink_options", {}))
                + rules.topic_config_problems(scenario.stream.config)
                + rules.broker_config_problems(self.broker)
                + rules.librdkafka_problems("producers.client", scenario.producers.client)
                + rules.librdkafka_problems("backend.client", self.client, env_suffix=True))

    def check_source_options(self, options: dict[str, Any]) -> None:
        """Names and values as Spark's Kafka source reads them: every option it knows has a type here, so
        `failOnDataLoss = "maybe"` or `maxOffsetsPerTrigger = 0` is refused now rather than misread later."""
        seen: dict[str, str] = {}
        for key, raw in options.items():
            low = key.lower()
            if low in seen:
                raise ValueError(f"{key!r} and {seen[low]!r} are the same option to Spark (names are "
                                 "case-insensitive); give it once")
            seen[low] = key
            if low in _SET_BY_HARNESS:
                raise ValueError(f"{key!r} is set by the harness from [stream] and [backend]")
            if low in _BATCH_ONLY:
                raise ValueError(f"{key!r} is for batch queries; Spark refuses it in a streaming query (the stream "
                                 "has no end)")
            if low in _REFUSED_CONSUMER:
                raise ValueError(f"{key!r} is not supported by Spark's Kafka source: {_REFUSED_CONSUMER[low]}")
            if low.startswith("kafka."):
                continue
            if low not in _KNOWN_OPTIONS:
                hint = did_you_mean(key, SPARK_KAFKA_SOURCE_OPTIONS) or ";"
                raise ValueError(f"{key!r} is not a Spark Kafka source option{hint} allowed: kafka.<consumer setting> or "
                                 + ", ".join(sorted(SPARK_KAFKA_SOURCE_OPTIONS)))
            _, check = _VALUES_BY_LOWER[low]
            value = str(raw).lower() if isinstance(raw, bool) else str(raw)
            try:
                check(value)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        low_values = {k.lower(): str(v) for k, v in options.items()}
        lo, hi = low_values.get("minoffsetspertrigger"), low_values.get("maxoffsetspertrigger")
        if lo is not None and hi is not None and int(lo) > int(hi):
            raise ValueError(f"minOffsetsPerTrigger ({lo}) is higher than maxOffsetsPerTrigger ({hi}); Spark "
                             "refuses it")
