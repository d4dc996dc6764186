"""The `[backend]` table for Kafka, and the names of Spark's Kafka source options (checked, never guessed)."""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, model_validator

from harness.backends.base import Backend, BackendSpec

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
    sender = "producers.kafka_sender:KafkaSender"
    batch_cap_option = "maxOffsetsPerTrigger"
    batch_cap_exact = False
    placement = "kafka"

    kind: Literal["kafka"] = "kafka"
    mode: Literal["embedded", "external", "container"] = "embedded"
    nodes: int = Field(1, ge=1, le=5, description="embedded broker nodes (3 for broker-kill faults)")
    heap_mb: int = Field(512, ge=128, le=4096)
    bootstrap_servers: str | None = Field(None, description="required with mode = external")
    broker: dict[str, Scalar] = Field(default_factory=dict, description="extra server.properties (embedded)")
    proxy: bool = Field(False, strict=True, description=(
        "embedded: the query's Kafka connections go through the loopback TCP proxy (harness.netproxy) without any "
        "fault, so every connection is recorded with its client.id (result.json consumers: Kafka consumers created "
        "per batch); a network fault puts the same proxy there anyway. Off by default: a hop and a process more"))

    @model_validator(mode="after")
    def _external_needs_bootstrap(self):
        if self.mode == "external" and not self.bootstrap_servers:
            raise ValueError("mode = 'external' needs bootstrap_servers = 'host:port,...'")
        if self.proxy and self.mode != "embedded":
            raise ValueError(f"proxy = true needs mode = 'embedded' (the proxied listener is added to its "
                             f"brokers); mode is {self.mode!r}")
        return self

    def prepare(self, ctx) -> None:
        if self.proxy:
            from harness.netproxy import put_in_front

            put_in_front(ctx)

    def starting_title(self) -> str:
        return "starting Kafka"

    def build(self, stream) -> Backend:
        if self.mode == "embedded":
            from harness.backends.kafka.embedded import EmbeddedKafka

            return EmbeddedKafka(nodes=self.nodes, heap_mb=self.heap_mb,
                                 broker_config={k: str(v) for k, v in self.broker.items()})
        if self.mode == "external":
            from harness.backends.kafka.external import ExternalKafka

            return ExternalKafka(self.bootstrap_servers or "")
        from harness.backends.kafka.container import ContainerKafka

        return ContainerKafka()

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
