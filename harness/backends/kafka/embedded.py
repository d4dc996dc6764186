"""A real Apache Kafka cluster in KRaft mode (combined broker+controller nodes), started on loopback per run.

One node by default; `nodes = 3` gives a three-node quorum so a broker can be killed while the others serve. Every
node runs in its own supervised JVM with a small heap, its own free ports and log dir inside the run directory.
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.backends.base import BackendError
from harness.backends.kafka.admin import KafkaBackendBase
from harness.jvm.artifacts import resolve
from harness.supervisor import Child, Supervisor

LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    File:
      name: FILE
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: FILE
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    node_id: int
    broker_port: int
    controller_port: int
    home: Path
    child: Child | None = None

    @property
    def config(self) -> Path:
        return self.home / "server.properties"


class EmbeddedKafka(KafkaBackendBase):
    """Kafka 4 in KRaft mode on 127.0.0.1, jars from the Maven cache, one JVM per node."""

    def __init__(self, nodes: int = 1, heap_mb: int = 512, broker_config: dict[str, str] | None = None):
        if nodes < 1:
            raise BackendError("kafka nodes must be >= 1")
        self.n = nodes
        self.replication = min(3, nodes)
        self.heap_mb = heap_mb
        self.extra = dict(broker_config or {})
        self.nodes: list[Node] = []
        self.supervisor: Supervisor | None = None
        self.listeners: dict[str, list[tuple[int, str]]] = {}  # extra listeners: name -> per node (port, advertised)
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.classpath = os.pathsep.join(str(j) for j in resolve("kafka-broker"))
        home = run_dir / "services" / "kafka"
        self.nodes = [Node(i + 1, free_port(), free_port(), home / f"node-{i + 1}") for i in range(self.n)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        rf = min(3, self.n)
        for i, node in enumerate(self.nodes):
            shutil.rmtree(node.home, ignore_errors=True)
            (node.home / "data").mkdir(parents=True)
            props = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},CONTROLLER://127.0.0.1:{node.controller_port}"
                             + "".join(f",{name}://127.0.0.1:{ports[i][0]}" for name, ports in self.listeners.items()),
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port}"
                                        + "".join(f",{name}://{ports[i][1]}" for name, ports in self.listeners.items()),
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                                                  + "".join(f",{name}:PLAINTEXT" for name in self.listeners),
                "log.dirs": str(node.home / "data"),
                "num.partitions": "1",
                "default.replication.factor": str(rf),
                "min.insync.replicas": "1",
                "offsets.topic.replication.factor": str(rf),
                "offsets.topic.num.partitions": "4",
                "transaction.state.log.replication.factor": str(rf),
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": str(rf),
                "share.coordinator.state.topic.min.isr": "1",
                "group.initial.rebalance.delay.ms": "0",
                "auto.create.topics.enable": "false",
                "num.network.threads": "2",
                "num.io.threads": "2",
                "log.retention.check.interval.ms": "1000",
                "log.segment.delete.delay.ms": "1000",
                "file.delete.delay.ms": "1000",
            }
            props.update(self.extra)
            node.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            (node.home / "log4j2.yaml").write_text(LOG4J2.format(log=node.home / "server.log"))
            self._format(node)
        for node in self.nodes:
            self.start_node(node)
        self.bootstrap = ",".join(f"127.0.0.1:{n.broker_port}" for n in self.nodes)
        self.wait_ready(self.n, alive=lambda: all(n.child and n.child.alive() for n in self.nodes))

    def add_listener(self, name: str, ports: list[tuple[int, str]]) -> None:
        """Before start(): a further plaintext listener on every node, binding `ports[i][0]` and advertising
        `ports[i][1]` (host:port of a proxy in front of it). Kafka answers metadata with the addresses of the
        listener a request came in on, so a client that bootstraps at the advertised addresses reaches every
        broker through them, while producers and admin keep the direct PLAINTEXT listener."""
        if len(ports) != self.n:
            raise BackendError(f"listener {name}: {len(ports)} ports for {self.n} nodes")
        self.listeners[name] = list(ports)

    def _java(self, node: Node, main: str, *args: str) -> list[str]:
        return ["java", f"-Xms{min(256, self.heap_mb)}m", f"-Xmx{self.heap_mb}m", "-XX:+UseG1GC",
                "-XX:ActiveProcessorCount=2", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={node.home / 'log4j2.yaml'}",
                f"-Dkafka.logs.dir={node.home}", "-cp", self.classpath, main, *args]

    def _format(self, node: Node) -> None:
        # `--cluster-id=` keeps an id that starts with "-" (urlsafe base64 may) from reading as an option
        argv = self._java(node, "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                          "-c", str(node.config), "--ignore-formatted")
        argv[1:3] = ["-Xms64m", "-Xmx256m"]
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise BackendError(f"formatting Kafka storage failed: {proc.stderr[-2000:] or proc.stdout[-2000:]}")

    def start_node(self, node: Node) -> None:
        assert self.supervisor is not None
        node.child = self.supervisor.spawn(f"kafka-{node.node_id}", self._java(node, "kafka.Kafka", str(node.config)),
                                           log_path=node.home / "stdout.log")

    def stop_node(self, node: Node, hard: bool = False) -> None:
        if node.child is None or self.supervisor is None:
            return
        if hard:
            node.child.stop_signal = signal.SIGKILL
        self.supervisor.stop(node.child, timeout=30)
        node.child = None

    def stop(self) -> None:
        self.close_clients()
        for node in reversed(self.nodes):
            self.stop_node(node)

    def describe(self) -> dict:
        out = {"kind": self.kind, "mode": "embedded", "bootstrap": self.bootstrap, "nodes": self.n,
               "cluster_id": self.cluster_id}
        if self.query_bootstrap:
            out["query_bootstrap"] = self.query_bootstrap
        return out
