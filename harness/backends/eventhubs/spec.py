"""The `[backend]` table for Event Hubs: the project's emulator (started and stopped by the run) or a real
namespace (its connection string read from the environment, never from the scenario file)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from harness.backends.base import Backend, BackendSpec
from harness.backends.capabilities import Capability, EmulatorControl
from harness.suggest import did_you_mean

# `[stream.config]` keys the emulator applies to the hub (its Config.json entity keys)
HUB_CONFIG_KEYS = ("MessageRetentionInHours", "RetentionSeconds", "MaxEventsPerPartition", "MaxBytesPerPartition")
_SET_BY_HARNESS = {"eventhubs.connectionstring"}
_PLACEHOLDER = "Endpoint=sb://validation.invalid/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=hub"


class EventHubsSpec(BackendSpec):
    sender = "harness.backends.eventhubs.sender:EventHubsSender"
    batch_cap_option = "maxEventsPerTrigger"
    batch_cap_exact = True
    placement = "eventhubs"

    kind: Literal["eventhubs"]
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

    @model_validator(mode="after")
    def _groups(self):
        for group in self.consumer_groups:
            if not group or len(group) > 50:
                raise ValueError(f"consumer_groups: {group!r} must be 1-50 characters")
        return self

    def capabilities(self) -> frozenset[type[Capability]]:
        return frozenset({EmulatorControl}) if self.mode == "emulator" else frozenset()

    def starting_title(self) -> str:
        return {"emulator": "starting the Event Hubs emulator", "container": "starting Microsoft's Event Hubs "
                "emulator in Docker"}.get(self.mode, "connecting to Event Hubs")

    def build(self, stream) -> Backend:
        if self.mode == "emulator":
            from harness.backends.eventhubs.emulated import EmulatedEventHubs

            return EmulatedEventHubs(stream.name, stream.partitions, dict(stream.config),
                                     consumer_groups=self.consumer_groups, send=self.send)
        if self.mode == "container":
            from harness.backends.eventhubs.container import ContainerEventHubs

            return ContainerEventHubs(stream.name, stream.partitions, consumer_groups=self.consumer_groups,
                                      send=self.send)
        from harness.backends.eventhubs.namespace import NamespaceEventHubs

        return NamespaceEventHubs(self.connection_string_env, send=self.send,
                                  observer_group=self.observer_consumer_group)

    def check_source_options(self, options: dict[str, Any]) -> None:
        """The source's own parser judges names and values; the connection string is the harness's to give."""
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
