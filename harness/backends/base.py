"""The one interface every messaging system implements (Kafka now, Event Hubs through the emulator).

The runner only speaks this interface: start the service, make the stream (topic / hub), tell producers how to
connect, tell Spark which source and options to use, and report the end of each partition so the query can drain.
Fault injectors get at the service through the concrete backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from harness.supervisor import Supervisor


class BackendError(RuntimeError):
    pass


class Backend(ABC):
    kind: str  # "kafka" | "eventhubs": what result.json calls the backend

    @abstractmethod
    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        """Bring the service up (or connect to it) and block until it answers."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what start() started; idempotent."""

    @abstractmethod
    def create_stream(self, name: str, partitions: int, config: dict[str, str]) -> None:
        """Create the topic / hub the scenario writes to (fresh, with `partitions` partitions)."""

    @abstractmethod
    def producer_settings(self) -> dict[str, Any]:
        """JSON-able settings a producer process needs to connect (merged with the scenario's client settings)."""

    @abstractmethod
    def spark_source(self, stream: str, options: dict[str, str]) -> tuple[str, dict[str, str]]:
        """(format, options) for `spark.readStream`, the user's options passed through verbatim."""

    @abstractmethod
    def end_offsets(self, stream: str) -> dict[int, int]:
        """Per partition, the position just after the last event (what a drained query must have read)."""

    def close_clients(self) -> None:
        """Close the clients the harness itself holds (admin, watermarks); the service keeps running."""

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}
