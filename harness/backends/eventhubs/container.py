"""Microsoft's Event Hubs emulator (`mcr.microsoft.com/azure-messaging/eventhubs-emulator`) as the run's backend,
in Docker through testcontainers (`pip install '.[docker]'`), with the Azurite container it needs for its metadata
and checkpoints, as Microsoft documents it: both on one Docker network, the emulator told where Azurite is by
BLOB_SERVER and METADATA_SERVER, its licence accepted by ACCEPT_EULA=Y, its entities read at start from
/Eventhubs_Emulator/ConfigFiles/Config.json (generated here from the scenario's hub), AMQP on port 5672.

Why beside the project's own emulator: the real service's code path for sends, receives and epochs, as far as
Microsoft's emulator reproduces it. What it cannot do: it has no control API, so faults that act through one
(age_out, hub_delete, throttle, epoch_steal) are refused before the run, and it takes no hub settings from the
scenario. Docker is pinged first: with no engine the run stops at once (exit 2) with the reason.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.files import atomic
from harness.backends.base import BackendError
from harness.backends.eventhubs.common import EventHubsBackendBase
from harness.errors import InputError
from harness.supervisor import Supervisor

IMAGE = "mcr.microsoft.com/azure-messaging/eventhubs-emulator:latest"
AZURITE_IMAGE = "mcr.microsoft.com/azure-storage/azurite:latest"
AMQP_PORT = 5672
CONFIG_PATH = "/Eventhubs_Emulator/ConfigFiles/Config.json"
NAMESPACE = "emulatorNs1"
# Microsoft's emulator's quotas (its documentation's "Known limitations"): checked before anything starts
MAX_PARTITIONS = 32
MAX_CONSUMER_GROUPS = 20
KEY = "SAS_KEY_VALUE"  # the emulator's fixed development key


class DockerUnavailable(BackendError, InputError):
    """No Docker engine, no testcontainers, or a hub beyond the emulator's quotas: the run is refused before
    anything starts (exit 2)."""


def config_json(hub: str, partitions: int, consumer_groups: list[str]) -> dict[str, Any]:
    """Microsoft's Config.json for one namespace with the scenario's hub. `$Default` exists on every hub and must
    not be listed; partition counts are strings, as in Microsoft's samples."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"Microsoft's emulator allows 1-{MAX_PARTITIONS} partitions per hub; the scenario has "
                         f"{partitions}")
    groups = [g for g in dict.fromkeys(consumer_groups) if g.lower() != "$default"]
    if len(groups) > MAX_CONSUMER_GROUPS:
        raise ValueError(f"Microsoft's emulator allows {MAX_CONSUMER_GROUPS} consumer groups per hub; "
                         f"{len(groups)} given")
    return {"UserConfig": {
        "NamespaceConfig": [{"Type": "EventHub", "Name": NAMESPACE, "Entities": [
            {"Name": hub, "PartitionCount": str(partitions), "ConsumerGroups": [{"Name": g} for g in groups]}]}],
        "LoggingConfig": {"Type": "File"}}}


def connection_string(host: str, port: int) -> str:
    return (f"Endpoint=sb://{host}:{port};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={KEY};"
            f"UseDevelopmentEmulator=true")


class ContainerEventHubs(EventHubsBackendBase):
    observer_group = "harness-observer"

    def __init__(self, hub: str, partitions: int, consumer_groups: list[str] | None = None,
                 send: str = "partition_key", image: str = IMAGE, azurite_image: str = AZURITE_IMAGE):
        super().__init__()
        self.hub, self.partitions, self.send_mode = hub, partitions, send
        self.consumer_groups = list(consumer_groups or []) + [self.observer_group]
        self.image, self.azurite_image = image, azurite_image
        self.network = self.azurite = self.emulator = None
        self._conn = ""

    def connection_string(self) -> str:
        return self._conn

    def start(self, run_dir: Path, supervisor: Supervisor, timeout: float = 180.0) -> None:
        from harness.backends.kafka.container import docker_available

        try:  # the scenario's hub within Microsoft's quotas: judged before Docker is asked anything
            config_doc = config_json(self.hub, self.partitions, self.consumer_groups)
        except ValueError as exc:
            raise DockerUnavailable(f"backend.mode = 'container': {exc}") from None
        ok, why = docker_available()
        if not ok:
            raise DockerUnavailable(f"backend.mode = 'container' runs Microsoft's Event Hubs emulator in Docker: "
                                    f"{why}; use mode = 'emulator' (the project's emulator) instead")
        try:
            from testcontainers.core.container import DockerContainer
            from testcontainers.core.network import Network
        except ImportError:
            raise DockerUnavailable("backend.mode = 'container' needs testcontainers: pip install '.[docker]'") \
                from None
        home = run_dir / "services" / "eventhubs"
        home.mkdir(parents=True, exist_ok=True)
        config = home / "Config.json"
        atomic.write_json(config, config_doc)
        self.network = Network().__enter__()
        self.azurite = (DockerContainer(self.azurite_image).with_network(self.network)
                        .with_network_aliases("azurite").with_exposed_ports(10000, 10001, 10002))
        self.azurite.start()
        self.emulator = (DockerContainer(self.image).with_network(self.network)
                         .with_network_aliases("eventhubs-emulator")
                         .with_env("ACCEPT_EULA", "Y").with_env("BLOB_SERVER", "azurite")
                         .with_env("METADATA_SERVER", "azurite")
                         .with_volume_mapping(str(config.resolve()), CONFIG_PATH, "ro")
                         .with_exposed_ports(AMQP_PORT))
        self.emulator.start()
        host = self.emulator.get_container_host_ip()
        self._conn = connection_string(host, int(self.emulator.get_exposed_port(AMQP_PORT)))
        self._wait_ready(timeout, home)

    def _wait_ready(self, timeout: float, home: Path) -> None:
        """Up when the hub answers its properties with the scenario's partitions (the emulator loads its config
        after its AMQP port opens)."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                if len(self.partition_properties(self.hub)) == self.partitions:
                    return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = exc
                self.close_clients()
            time.sleep(2.0)
        logs = self.emulator.get_logs() if self.emulator is not None else (b"", b"")
        (home / "emulator.log").write_bytes(b"".join(logs))
        raise BackendError(f"Microsoft's Event Hubs emulator did not serve hub {self.hub!r} within {timeout:.0f}s "
                           f"(last error: {last!r}; its log: {home / 'emulator.log'})")

    def stop(self) -> None:
        self.close_clients()
        for name in ("emulator", "azurite"):
            container = getattr(self, name)
            if container is not None:
                try:
                    container.stop()
                finally:
                    setattr(self, name, None)
        if self.network is not None:
            self.network.remove()
            self.network = None

    def create_stream(self, name: str, partitions: int, config: dict[str, str]) -> None:
        if name != self.hub:
            raise BackendError(f"this emulator serves hub {self.hub!r}, not {name!r}")
        have = len(self.partition_properties(name))
        if have != partitions:
            raise BackendError(f"event hub {name!r} has {have} partitions, the scenario says {partitions}")
        self.remember_start(name)

    def describe(self) -> dict:
        return {"kind": self.kind, "mode": "container", "send": self.send_mode, "image": self.image,
                "azurite": self.azurite_image, "endpoint": self._conn.split(";")[0],
                "config": json.dumps(config_json(self.hub, self.partitions, self.consumer_groups))}
