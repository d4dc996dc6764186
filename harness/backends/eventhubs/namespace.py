"""A real Event Hubs namespace: the hub must exist with the scenario's partition count (hubs are created in Azure,
not over AMQP); its connection string comes from the environment, so no secret sits in a scenario file."""
from __future__ import annotations

import os
from pathlib import Path

from harness.backends.base import BackendError
from harness.backends.eventhubs.common import EventHubsBackendBase
from harness.backends.eventhubs.kafka_endpoint import KafkaEndpoint, namespace_endpoint
from harness.supervisor import Supervisor


class NamespaceEventHubs(EventHubsBackendBase):
    def __init__(self, env_var: str, send: str = "partition_key", observer_group: str = "$Default"):
        super().__init__()
        self.observer_group = observer_group
        self.env_var = env_var
        self.send_mode = send
        self._conn = ""

    def connection_string(self) -> str:
        return self._conn

    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        conn = os.environ.get(self.env_var, "")
        if "Endpoint=" not in conn:
            raise BackendError(f"backend.mode = 'namespace' reads the namespace's connection string from "
                               f"${self.env_var}, which is {'unset' if not conn else 'not a connection string'}")
        self._conn = conn

    def kafka_endpoint(self) -> KafkaEndpoint:
        """The namespace's Kafka endpoint: the connection string's host, port 9093, public certificates."""
        try:
            return namespace_endpoint(self._conn)
        except ValueError as exc:
            raise BackendError(f"${self.env_var}: {exc}") from None

    def stop(self) -> None:
        self.close_clients()

    def create_stream(self, name: str, partitions: int, config: dict[str, str]) -> None:
        have = len(self.partition_properties(name))
        if have != partitions:
            raise BackendError(f"event hub {name!r} has {have} partitions, the scenario says {partitions}")
        self.remember_start(name)

    def describe(self) -> dict:
        return {"kind": self.kind, "mode": "namespace", "protocol": self.protocol,
                **({} if self.protocol == "kafka" else {"send": self.send_mode})}
