"""A Kafka cluster the user already runs: the harness only connects (bootstrap.servers) and never stops it."""
from __future__ import annotations

from pathlib import Path

from harness.backends.kafka.admin import KafkaBackendBase
from harness.supervisor import Supervisor


class ExternalKafka(KafkaBackendBase):
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        self.wait_ready(1, timeout=30)

    def create_stream(self, name: str, partitions: int, config: dict[str, str], replication: int = -1) -> None:
        super().create_stream(name, partitions, config, replication)  # -1: the cluster's default factor

    def stop(self) -> None:
        pass

    def describe(self) -> dict:
        return {"kind": self.kind, "mode": "external", "bootstrap": self.bootstrap}
