"""The `[backend]` table for Event Hubs: the project's emulator (started and stopped by the run) or a real
namespace (its connection string read from the environment, never from the scenario file), spoken to over AMQP
(the SDK's producers, the project's PySpark source) or through its Kafka endpoint (`protocol = "kafka"`:
librdkafka producers and Spark's own Kafka source, harness.backends.eventhubs.kafka_endpoint).

Why the sender, key placement, batch cap and jars are properties here (class constants on the Kafka table): they
follow the protocol, so on the Kafka path they are exactly the Kafka backend's."""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from harness.records import calibration
from harness.backends.base import RECORDED, Backend, BackendSpec
from harness.backends.capabilities import Capability, EmulatorControl, EpochReceivers
from harness.backends.eventhubs.kafka_endpoint import PRODUCER_SET_BY_HARNESS, SET_BY_HARNESS as KAFKA_SET_BY_HARNESS
from harness.backends.kafka.spec import KafkaSpec
from harness.emulator.config import check_hub_settings
from harness.settings import check as rules
from harness.text.suggest import did_you_mean

# What harness.backends.eventhubs.sender reads from the producers' settings that a scenario may give (the
# connection string and send mode come from [backend]): name -> the smallest value it takes.
PRODUCER_SETTINGS = {"retry_total": 0, "max_batch_events": 1}

# `[stream.config]` keys the emulator applies to the hub (its Config.json entity keys)
HUB_CONFIG_KEYS = ("MessageRetentionInHours", "RetentionSeconds", "MaxEventsPerPartition", "MaxBytesPerPartition")
_SET_BY_HARNESS = {"eventhubs.connectionstring"}
_PLACEHOLDER = "Endpoint=sb://validation.invalid/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=hub"


_AMQP = {"sender": "harness.backends.eventhubs.sender:EventHubsSender", "batch_cap_option": "maxEventsPerTrigger",
         "batch_cap_exact": True, "placement": "eventhubs", "spark_jars": (), "python_data_source": True,
         # the SDK encodes AMQP in pure Python: its own cost per event is a floor (harness.records.calibration)
         "producer_client_floor": "azure-eventhub"}
# through the Kafka endpoint: the Kafka backend's producer, key placement (librdkafka's murmur2, the client picks
# the partition), Spark's Kafka source and its cap (shared out per partition, rounded up: not exact)
_KAFKA = {name: getattr(KafkaSpec, name) for name in _AMQP}
# what the query fails with when events it had to read are gone and failOnDataLoss = true
DATA_LOSS = {"amqp": "EventHubsDataLossError", "kafka": "KAFKA_DATA_LOSS"}


def connection_string_problem(conn: str) -> str | None:
    """What the azure-eventhub SDK's own parser (the one `from_connection_string` runs) refuses in `conn`, or None.
    Its messages name the rule, never the value."""
    from azure.eventhub._client_base import _parse_conn_str  # noqa: PLC2701 - the rule the clients apply

    try:
        _parse_conn_str(conn, eventhub_name="hub")
    except ValueError as exc:
        return str(exc).rstrip(".")
    return None


class EventHubsSpec(BackendSpec):
    sender = property(lambda self: self._by_protocol["sender"])  # type: ignore[assignment]
    batch_cap_option = property(lambda self: self._by_protocol["batch_cap_option"])  # type: ignore[assignment]
    batch_cap_exact = property(lambda self: self._by_protocol["batch_cap_exact"])  # type: ignore[assignment]
    placement = property(lambda self: self._by_protocol["placement"])  # type: ignore[assignment]
    spark_jars = property(lambda self: self._by_protocol["spark_jars"])  # type: ignore[assignment]
    python_data_source = property(lambda self: self._by_protocol["python_data_source"])  # type: ignore[assignment]
    producer_client_floor = property(  # type: ignore[assignment]
        lambda self: self._by_protocol["producer_client_floor"])

    kind: Literal["eventhubs"] = Field(description="eventhubs: Azure Event Hubs (the project's emulator, a real "
                                                   "namespace or Microsoft's emulator)")
    protocol: Literal["amqp", "kafka"] = Field("amqp", description=(
        "amqp: the azure-eventhub SDK's producers and the project's PySpark source over AMQP | kafka: the "
        "namespace's Kafka endpoint (SASL_SSL, PLAIN, user $ConnectionString, the connection string as password; "
        "port 9093 of a namespace, the emulator's kafka_tls_port): librdkafka producers and Spark's own Kafka "
        "source (format kafka, Spark's Kafka source option names)"))
    mode: Literal["emulator", "namespace", "container"] = Field("emulator", description=(
        "emulator: the project's (faults through its control API) | namespace: a real one, by connection string | "
        "container: Microsoft's emulator in Docker via testcontainers"))
    connection_string_env: str = Field(
        "EVENTHUBS_CONNECTION_STRING", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="mode = namespace: the environment variable holding the namespace's connection string")
    send: Literal["partition_key", "partition_id", "round_robin"] = Field(
        "partition_key", description="how producers address events: a partition key the service hashes (as in "
                                     "production), the partition id the key hashes to, or no key at all")
    consumer_groups: list[str] = Field(default_factory=list, description="emulator: consumer groups besides $Default")
    observer_consumer_group: str = Field(
        "$Default", description="namespace: the consumer group the harness reads with (faults' placement reads); "
                                "give one the query does not use, or its exclusive receivers keep the harness out")

    def read_through(self, changes: dict[str, Any]) -> dict[str, Any]:
        """A query that reads through another protocol than the producers send with: `send` is the SDK producers'
        own choice, which a table for the Kafka protocol may not carry (its producers place keys themselves)."""
        table = super().read_through(changes)
        if table.get("protocol") == "kafka":
            table.pop("send", None)
        return table

    @property
    def _by_protocol(self) -> dict:
        return _KAFKA if self.protocol == "kafka" else _AMQP

    def producer_floor_calibration(self) -> str | None:
        return calibration.eh_producers(self.send) if self.producer_client_floor else None

    def label(self) -> str:
        return "eventhubs (kafka)" if self.protocol == "kafka" else "eventhubs"

    def consumers_unrecorded(self) -> str | None:
        if self.protocol != "kafka":
            return None
        return ("Kafka consumers created: unknown (no connection records: only the project's emulator writes them, "
                "services/eventhubs/kafka-connections.jsonl; a namespace's Kafka endpoint cannot be watched)")

    @property
    def data_loss_failure(self) -> str:
        """What the query fails with under failOnDataLoss = true when events it had to read are gone: the project's
        source's error, or Spark's Kafka source's error class."""
        return DATA_LOSS[self.protocol]

    @model_validator(mode="after")
    def _groups(self):
        for group in self.consumer_groups:
            if not group or len(group) > 50:
                raise ValueError(f"consumer_groups: {group!r} must be 1-50 characters")
        return self

    @model_validator(mode="after")
    def _installed(self):
        """Event Hubs needs the `eventhubs` extra (the azure-eventhub SDK, and crc32c for the emulator's Kafka
        endpoint): without it the scenario is refused at load, not halfway through a run."""
        missing = [name for module, name in (("azure.eventhub", "azure-eventhub"), ("crc32c", "crc32c"))
                   if importlib.util.find_spec(module.split(".")[0]) is None
                   or importlib.util.find_spec(module) is None]
        if missing:
            raise ValueError(f"Event Hubs needs {' and '.join(missing)}, which are not installed: pip install "
                             "'spark-stream-harness[eventhubs]'")
        return self

    @model_validator(mode="after")
    def _namespace_connection_string(self):
        """mode = namespace: the connection string must be in the environment and be one the SDK takes, checked at
        load (exit 2 before anything starts) rather than as the SDK's ValueError in the middle of a run. Never
        quoted: it holds the key."""
        if self.mode != "namespace":
            return self
        var = self.connection_string_env
        conn = os.environ.get(var)
        if not conn or not conn.strip():
            raise ValueError(f"connection_string_env: mode = 'namespace' reads the namespace's connection string "
                             f"from ${var}, which is {'unset' if conn is None else 'empty'}")
        problem = connection_string_problem(conn)
        if problem:
            shape = "" if "Endpoint=sb://" in problem else (
                " (Endpoint=sb://<namespace>.servicebus.windows.net/;SharedAccessKeyName=<name>;SharedAccessKey=<key>,"
                " or a SharedAccessSignature=<token> in place of the key)")
            raise ValueError(f"connection_string_env: ${var} is not a connection string the azure-eventhub SDK "
                             f"takes: {problem}{shape}")
        return self

    @model_validator(mode="after")
    def _kafka_protocol(self, info: ValidationInfo):
        if self.protocol != "kafka":
            return self
        if self.mode == "container":
            raise ValueError("protocol = 'kafka' with mode = 'container' is not supported: Microsoft's emulator "
                             "serves Kafka on its fixed port 9092 in plain SASL_PLAINTEXT, and the harness maps the "
                             "container's ports to free ones, which the broker's own address in its metadata "
                             "answers would not follow; use mode = 'emulator' (the project's emulator serves the "
                             "Kafka endpoint over TLS as the service does) or mode = 'namespace'")
        if "send" in self.model_fields_set and not (info.context or {}).get(RECORDED):  # a record lists every field
            raise ValueError(f"send = {self.send!r} chooses how the SDK's producers address events (protocol = "
                             "'amqp'); with protocol = 'kafka' the Kafka producer places keys itself (murmur2, as "
                             "Java clients do): leave send out")
        return self

    def capabilities(self) -> frozenset[type[Capability]]:
        if self.mode != "emulator":
            return frozenset()
        return frozenset({EmulatorControl} | ({EpochReceivers} if self.protocol == "amqp" else set()))

    def starting_title(self) -> str:
        return {"emulator": "starting the Event Hubs emulator", "container": "starting Microsoft's Event Hubs "
                "emulator in Docker"}.get(self.mode, "connecting to Event Hubs")

    def build(self, stream) -> Backend:
        if self.mode == "emulator":
            from harness.backends.eventhubs.emulated import EmulatedEventHubs

            backend = EmulatedEventHubs(stream.name, stream.partitions, dict(stream.config),
                                        consumer_groups=self.consumer_groups, send=self.send,
                                        kafka=self.protocol == "kafka")
        elif self.mode == "container":
            from harness.backends.eventhubs.container import ContainerEventHubs

            backend = ContainerEventHubs(stream.name, stream.partitions, consumer_groups=self.consumer_groups,
                                         send=self.send)
        else:
            from harness.backends.eventhubs.namespace import NamespaceEventHubs

            backend = NamespaceEventHubs(self.connection_string_env, send=self.send,
                                         observer_group=self.observer_consumer_group)
        backend.use_protocol(self.protocol)
        return backend

    def setting_problems(self, scenario, spark_judged) -> list[str]:
        """AMQP: the Event Hubs sender's own settings. Kafka: Spark's Kafka source options and librdkafka's
        producer settings, judged as on Kafka, except those the harness derives from [backend]."""
        client = scenario.producers.client
        if self.protocol != "kafka":
            return rules.min_int_problems("producers.client", "Event Hubs sender setting", client, PRODUCER_SETTINGS)
        return (spark_judged("spark.source_options", scenario.spark.source_options, rules.consumer_option_problems)
                + [f"producers.client.{k}: set by the harness from [backend] (protocol = 'kafka': the endpoint, "
                   "SASL PLAIN with $ConnectionString and the connection string, the emulator's CA)"
                   for k in client if k in PRODUCER_SET_BY_HARNESS]
                + rules.librdkafka_problems("producers.client", client))

    def check_source_options(self, options: dict[str, Any]) -> None:
        """AMQP: the source's own parser judges names and values; the connection string is the harness's to give.
        Kafka: Spark's Kafka source's names and values, as on the Kafka backend; the endpoint, the sign-in and the
        topic are the harness's to give."""
        if self.protocol == "kafka":
            for key in options:
                if key.lower() in {k.lower() for k in KAFKA_SET_BY_HARNESS}:
                    raise ValueError(f"{key!r} is set by the harness from [backend] and [stream] (protocol = "
                                     "'kafka': the endpoint, SASL PLAIN with the connection string, the hub as topic)")
            KafkaSpec.check_source_options(KafkaSpec.model_construct(), options)
            return
        from harness.backends.eventhubs.spark_source.options import (ALIASES, ALLOWED_OPTIONS,
                                                                       CONNECTOR_ONLY_OPTIONS, parse_options)

        known = {name.lower() for name in (*ALLOWED_OPTIONS, *ALIASES, *CONNECTOR_ONLY_OPTIONS)}
        for key in options:
            if key.lower() in _SET_BY_HARNESS:
                raise ValueError(f"{key!r} is set by the harness from [backend] and [stream]")
            if key.lower() not in known:
                choices = [o for o in ALLOWED_OPTIONS if o.lower() not in _SET_BY_HARNESS]
                raise ValueError(f"unknown option {key!r}{did_you_mean(key, choices)} allowed options: "
                                 f"{', '.join(choices)}")
        parse_options({**options, "eventhubs.connectionString": _PLACEHOLDER})

    def check_stream_config(self, config: dict[str, Any]) -> None:
        for key in config:
            if key not in HUB_CONFIG_KEYS:
                raise ValueError(f"{key!r} is not an Event Hubs hub setting{did_you_mean(key, HUB_CONFIG_KEYS) or ';'} "
                                 f"allowed: {', '.join(HUB_CONFIG_KEYS)}")
            if self.mode == "namespace":
                raise ValueError(f"{key!r}: a real namespace's hub is configured in Azure, not by the harness")
            if self.mode == "container":
                raise ValueError(f"{key!r}: Microsoft's emulator (mode = 'container') takes no hub settings from "
                                 f"the harness (its retention is its own); use mode = 'emulator' for them")
        check_hub_settings(config)  # the values as the emulator will check them when it starts
