"""The project's Event Hubs emulator as the run's backend: its own supervised process on loopback (free ports),
configured with the scenario's hub, driven by its HTTP control API for faults (harness.emulator.control).

The emulator checks credentials as Azure does: it makes a random key when it starts and prints the connection
string carrying it, which is the one this backend hands the producers, its own clients and the Spark source, so a
run signs with the real key and a client that does not is refused here as it would be there. The key is the
backend's own (made here, handed to the emulator in its environment, `--key-env`): the emulator's log and every
file of the run say `${HARNESS_EMULATOR_KEY}` where it would be, and the harness remembers it as a secret
(harness.secrets), so no record of the run holds it. With `protocol = "kafka"` the emulator serves its Kafka
endpoint too, and the producers and the query sign in there with the same connection string as SASL PLAIN
password (harness.backends.eventhubs.kafka_endpoint)."""
from __future__ import annotations

import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from harness import secrets
from harness.files import atomic
from harness.backends.base import BackendError
from harness.backends.eventhubs.common import EventHubsBackendBase
from harness.backends.eventhubs.kafka_endpoint import KafkaEndpoint
from harness.supervisor import Child, Supervisor, log_lines, log_tail


KEY_ENV = "HARNESS_EMULATOR_KEY"


class EmulatedEventHubs(EventHubsBackendBase):
    observer_group = "harness-observer"

    def __init__(self, hub: str, partitions: int, hub_config: dict[str, Any] | None = None,
                 consumer_groups: list[str] | None = None, send: str = "partition_key", kafka: bool = False):
        super().__init__()
        self.kafka = kafka  # serve the Kafka endpoint too (kafka_port, kafka_tls_port)
        self.hub = hub
        self.partitions = partitions
        self.hub_config = dict(hub_config or {})
        self.consumer_groups = list(consumer_groups or [])
        self.send_mode = send
        self.child: Child | None = None
        self.supervisor: Supervisor | None = None
        self._conn = ""
        self.control_url = ""
        # tls_port, ws_port, wss_port, ca_file (and kafka_port, kafka_tls_port) as the emulator reported them
        self.endpoints: dict[str, str] = {}

    def connection_string(self) -> str:
        return self._conn

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def config_json(self) -> dict:
        entity = {"Name": self.hub, "PartitionCount": self.partitions,
                  "ConsumerGroups": [{"Name": g} for g in dict.fromkeys(self.consumer_groups + [self.observer_group])]}
        entity.update(self.hub_config)
        return {"UserConfig": {"NamespaceConfig": [{"Type": "EventHub", "Name": "emulatorNs1",
                                                    "Entities": [entity]}]}}

    def start(self, run_dir: Path, supervisor: Supervisor, timeout: float = 30.0) -> None:
        home = run_dir / "services" / "eventhubs"
        home.mkdir(parents=True, exist_ok=True)
        config, log = home / "Config.json", home / "emulator.log"
        atomic.write_json(config, self.config_json())
        log.unlink(missing_ok=True)
        # one row per Kafka connection, inside the run directory (a copied run re-judges the same): the consumers
        # Spark's executors create, counted as through the proxy (harness.analysis.consumers)
        connections = home / "kafka-connections.jsonl"
        connections.unlink(missing_ok=True)
        self.supervisor = supervisor
        sas_key = base64.b64encode(os.urandom(32)).decode("ascii")  # shaped like Azure's
        secrets.remember(sas_key)
        self.child = supervisor.spawn("eventhubs-emulator", [
            sys.executable, "-m", "harness.emulator", "--host", "127.0.0.1", "--port", "0", "--control-port", "0",
            "--config", str(config), "--cert-dir", str(home / "tls"), "--key-env", KEY_ENV,
            *(["--kafka-port", "0", "--kafka-tls-port", "0", "--kafka-connection-log", str(connections)]
              if self.kafka else ["--no-kafka"])],
            log_path=log, env={**os.environ, KEY_ENV: sas_key})  # TLS/WebSocket listeners too
        deadline = time.monotonic() + timeout
        last = "kafka_tls_port" if self.kafka else "wss_port"  # printed after the others
        while not (self._conn and self.control_url and last in self.endpoints):
            if not self.child.alive():
                raise BackendError(f"the Event Hubs emulator exited during start-up:\n{log_tail(log)}")
            if time.monotonic() > deadline:
                raise BackendError(f"the Event Hubs emulator did not report its ports within {timeout:.0f}s")
            for line in log_lines(log):
                key, _, value = line.partition("=")
                if key == "connection_string":
                    self._conn = secrets.expand(value, {KEY_ENV: sas_key})
                elif key == "control":
                    self.control_url = value
                elif key in ("tls_port", "ws_port", "wss_port", "ca_file", "kafka_port", "kafka_tls_port"):
                    self.endpoints[key] = value
            time.sleep(0.05)

    def offer_protocol(self, protocol: str) -> None:
        """A changed query reads through the Kafka endpoint (harness.faults.change): the emulator serves it too."""
        if protocol == "kafka":
            self.kafka = True

    def kafka_endpoint(self) -> KafkaEndpoint:
        """The emulator's Kafka endpoint over TLS (SASL_SSL, as the service's 9093), its certificate signed by the
        CA the emulator printed."""
        port = self.endpoints.get("kafka_tls_port", "none")
        if port == "none" or "ca_file" not in self.endpoints:
            raise BackendError("the Event Hubs emulator serves no Kafka endpoint over TLS (its kafka_tls_port= line "
                               f"says {port!r}); protocol = 'kafka' needs it")
        return KafkaEndpoint("127.0.0.1", int(port), self.endpoints["ca_file"])

    def stop(self) -> None:
        self.close_clients()
        if self.child is not None and self.supervisor is not None:
            self.supervisor.stop(self.child, timeout=10)
            self.child = None

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    def create_stream(self, name: str, partitions: int, config: dict[str, str]) -> None:
        if name != self.hub:
            raise BackendError(f"this emulator serves hub {self.hub!r}, not {name!r}")
        self.control(f"hubs/{name}/recreate", {"partition_count": partitions})  # empty, whatever ran before
        self.remember_start(name)

    # -- the control API (faults) ------------------------------------------------------------------------------
    def control(self, path: str, body: dict | None = None, timeout: float = 15.0) -> dict:
        request = urllib.request.Request(f"{self.control_url}/{path}", data=json.dumps(body or {}).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise BackendError(f"emulator control {path}: {exc.code} {exc.read().decode(errors='replace')}") \
                from None

    def describe(self) -> dict:
        return {"kind": self.kind, "mode": "emulator", "protocol": self.protocol,
                **({} if self.protocol == "kafka" else {"send": self.send_mode}), "endpoint": self._conn.split(";")[0],
                **self.endpoints}

