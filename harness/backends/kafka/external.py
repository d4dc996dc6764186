"""A Kafka cluster the user already runs: the harness only connects (bootstrap.servers) and never stops it."""
from __future__ import annotations

from pathlib import Path

from harness.backends.kafka.admin import KafkaBackendBase
from harness.supervisor import Supervisor

UNREACHABLE_S = 10.0


class ExternalKafka(KafkaBackendBase):
    replication = -1  # the cluster's own default.replication.factor
    def __init__(self, bootstrap: str, existing_topic: str = "refuse"):
        self.bootstrap = bootstrap
        self.existing_topic = existing_topic  # a topic of the stream's name already there: refused unless "recreate"

    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        # a running cluster answers at once: nothing listening for 10 s is a wrong address, said then
        self.wait_ready(1, timeout=30, unreachable_s=UNREACHABLE_S)

    def stop(self) -> None:
        self.close_clients()  # never stops someone else's cluster

    def describe(self) -> dict:
        return {"kind": self.kind, "mode": "external", "bootstrap": self.bootstrap}
