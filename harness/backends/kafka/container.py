"""Kafka in a container via testcontainers, for users with a Docker engine (`pip install '.[docker]'`).

Docker is checked with a fast ping first: with no engine the run fails at once with a clear message instead of
hanging in a connection retry loop.
"""
from __future__ import annotations

from pathlib import Path

from harness.backends.base import BackendError
from harness.backends.kafka.admin import KafkaBackendBase
from harness.supervisor import Supervisor

IMAGE = "confluentinc/cp-kafka:7.6.0"  # the image testcontainers' KafkaContainer scripts for (KRaft)


def docker_available(timeout: float = 2.0) -> tuple[bool, str]:
    try:
        import docker
    except ImportError:
        return False, "the 'docker' Python package is missing (pip install '.[docker]')"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return True, "ok"
    except Exception as exc:  # docker raises several unrelated types for 'no engine'
        return False, f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:200]})"


class ContainerKafka(KafkaBackendBase):
    def __init__(self, image: str = IMAGE):
        self.image = image
        self.container = None

    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        ok, why = docker_available()
        if not ok:
            raise BackendError(f"backend mode 'container' needs Docker: {why}; use mode = 'embedded' instead")
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError as exc:
            raise BackendError("backend mode 'container' needs testcontainers: pip install '.[docker]'") from exc
        self.container = KafkaContainer(self.image).with_kraft()
        self.container.start()
        self.bootstrap = self.container.get_bootstrap_server()
        self.wait_ready(1)

    def stop(self) -> None:
        self.close_clients()
        if self.container is not None:
            self.container.stop()
            self.container = None

    def describe(self) -> dict:
        return {"kind": self.kind, "mode": "container", "image": self.image, "bootstrap": self.bootstrap}
