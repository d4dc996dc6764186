"""A real Apache Kafka cluster in KRaft mode (combined broker+controller nodes), started on loopback per run.

One node by default; `nodes = 3` gives a three-node quorum so a broker can be killed while the others serve. Every
node runs in its own supervised JVM with a small heap, its own free ports and log dir inside the run directory.

With `sasl = "PLAIN"`, `"SCRAM-SHA-256"` or `"SCRAM-SHA-512"` clients get a CLIENT listener in SASL_PLAINTEXT, or
SASL_SSL with `tls` (the bootstrap address the run hands out), Kafka's StandardAuthorizer, the scenario's users,
`super_users` allowed everything, and every other user granted what a workload needs on topics (READ, WRITE,
DESCRIBE, CREATE, DESCRIBE_CONFIGS) and groups (READ), nothing more. PLAIN passwords reach the broker through its
environment and Kafka's EnvVarConfigProvider; SCRAM users are created through the broker's own admin API
(AlterUserScramCredentials, stored salted in the cluster metadata): never a file, never a command line. With `tls`
the harness makes a CA and a server certificate for 127.0.0.1/localhost (harness.backends.kafka.tls) and hands
clients the CA (`ssl.ca.location`), so they verify the broker. The inter-broker and controller listeners stay
PLAINTEXT on loopback; their principal (User:ANONYMOUS) is a super user, so that listener is the harness's own (the
broker fault's clients and the SCRAM set-up use it), never handed to a workload.
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from harness import secrets
from harness.backends.base import BackendError
import harness.backends.kafka.tls as tls_certs
from harness.backends.kafka.admin import KafkaBackendBase, client_config
import harness.backends.kafka.security as sec
from harness.secrets import expand
import harness.backends.kafka.storage as storage
from harness.jvm import cds
from harness.jvm.artifacts import resolve
from harness.loopback import free_port
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


# what a workload's user may do when the embedded broker authorizes (sasl): produce, consume, create its topic,
# read topic configs; not delete topics or records, alter configs or add partitions (admin faults need those)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # what the embedded broker's listener offers
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 8192  # Kafka's default is 4096 (its minimum); librdkafka and Java clients take either

WORKLOAD_ACLS = {"TOPIC": ("READ", "WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS"), "GROUP": ("READ",)}


@dataclass
class Node:
    node_id: int
    broker_port: int
    controller_port: int
    home: Path
    child: Child | None = None
    client_port: int = 0  # the SASL listener's, when there is one

    @property
    def config(self) -> Path:
        return self.home / "server.properties"


class EmbeddedKafka(KafkaBackendBase):
    """Kafka 4 in KRaft mode on 127.0.0.1, jars from the Maven cache, one JVM per node."""

    def __init__(self, nodes: int = 1, heap_mb: int = 512, broker_config: dict[str, str] | None = None,
                 sasl: str | None = None, users: dict[str, str] | None = None, super_users: list[str] = (),
                 tls: bool = False):
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
        self.sasl = sasl
        self.users = dict(users or {})
        self.super_users = list(super_users)
        if tls and not sasl:
            raise BackendError("the embedded broker's TLS listener is its SASL_SSL client listener: tls needs sasl")
        if sasl is not None and sasl not in SASL_MECHANISMS:
            raise BackendError(f"embedded broker sasl = {sasl!r}; allowed: {', '.join(SASL_MECHANISMS)}")
        self.tls = tls
        self.server_tls: tls_certs.ServerTLS | None = None
        self.client_protocol = ("SASL_SSL" if tls else "SASL_PLAINTEXT") if sasl else "PLAINTEXT"
        self._cds_dumps: dict[int, Path] = {}  # node id -> the class archive its JVM writes at exit (harness.jvm.cds)

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.classpath = os.pathsep.join(str(j) for j in resolve("kafka-broker"))
        home = run_dir / "services" / "kafka"
        self.nodes = [Node(i + 1, free_port(), free_port(), home / f"node-{i + 1}",
                           client_port=free_port() if self.sasl else 0) for i in range(self.n)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        rf = min(3, self.n)
        self.server_tls = tls_certs.generate(home / "tls") if self.tls else None
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
            props.update(self._sasl_props(node, i))
            props.update(self.extra)
            props.update(secrets.kafka_properties(props))  # a literal secret as ${env:VAR}: not in the file
            node.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            (node.home / "log4j2.yaml").write_text(LOG4J2.format(log=node.home / "server.log"))
            self._format(node)
        for node in self.nodes:
            self.start_node(node)
        self.internal_bootstrap = ",".join(f"127.0.0.1:{n.broker_port}" for n in self.nodes)
        self.bootstrap = (",".join(f"127.0.0.1:{n.client_port}" for n in self.nodes) if self.sasl
                          else self.internal_bootstrap)
        alive = lambda: all(n.child and n.child.alive() for n in self.nodes)  # noqa: E731
        if self.sasl in SCRAM:
            internal = AdminClient(client_config(self.internal_bootstrap))
            self.wait_ready(self.n, alive=alive, bootstrap=self.internal_bootstrap, admin=internal)
            self._create_scram_users(internal)
        self._hand_out_ca()
        self.wait_ready(self.n, alive=alive)
        if self.sasl:
            self._grant_workload_acls()

    # -- SASL --------------------------------------------------------------------------------------------------
    def _password_var(self, index: int) -> str:
        return f"HARNESS_KAFKA_USER_{index}"

    def _sasl_props(self, node: Node, i: int) -> dict[str, str]:
        """The CLIENT listener (and a proxied QUERY one) in SASL_PLAINTEXT or SASL_SSL, the authorizer, the users
        (PLAIN: in the listener's JAAS line as env references; SCRAM: none there, created once the broker runs)."""
        if not self.sasl:
            return {}
        if self.sasl == "PLAIN":
            accounts = " ".join(f'user_{u}="${{env:{self._password_var(k)}}}"' for k, u in enumerate(self.users))
            jaas = f"{sec.LOGIN_MODULES[self.sasl]} required {accounts};"
        else:
            jaas = f"{sec.LOGIN_MODULES[self.sasl]} required;"
        names = ["CLIENT", *self.listeners]
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},CONTROLLER://127.0.0.1:{node.controller_port},"
                         f"CLIENT://127.0.0.1:{node.client_port}"
                         + "".join(f",{name}://127.0.0.1:{ports[i][0]}" for name, ports in self.listeners.items()),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},CLIENT://127.0.0.1:{node.client_port}"
                                    + "".join(f",{name}://{ports[i][1]}" for name, ports in self.listeners.items()),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                                              + "".join(f",{name}:{self.client_protocol}" for name in names),
            "sasl.enabled.mechanisms": self.sasl,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in self.super_users)]),
            "allow.everyone.if.no.acl.found": "false",
            "config.providers": "env",
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        }
        for name in names:
            props[f"listener.name.{name.lower()}.{self.sasl.lower()}.sasl.jaas.config"] = jaas
        if self.server_tls is not None:
            props.update(self.server_tls.broker_props())
        return props

    def _broker_env(self) -> dict[str, str] | None:
        if not self.sasl:
            return None
        env = dict(os.environ)
        if self.sasl == "PLAIN":
            env.update({self._password_var(k): expand(p) for k, p in enumerate(self.users.values())})
        if self.server_tls is not None:
            env.update(self.server_tls.env())
        return env

    def _create_scram_users(self, admin: AdminClient) -> None:
        """Every user's SCRAM credential for the listener's mechanism, through the internal listener (its principal
        is a super user), then waited for until the cluster describes them all."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        assert self.sasl is not None
        mechanism = getattr(ScramMechanism, self.sasl.replace("-", "_"))
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, SCRAM_ITERATIONS),
                                                expand(password).encode())
                   for user, password in self.users.items()]
        for user, fut in admin.alter_user_scram_credentials(upserts, request_timeout=30).items():
            try:
                fut.result()
            except Exception as exc:  # KafkaException: the broker's reason, e.g. an unusable user name
                raise BackendError(f"creating the SCRAM user {user!r} failed: {exc}") from None

        def described() -> bool:
            found = admin.describe_user_scram_credentials(list(self.users), request_timeout=10)
            try:
                return all(fut.result().scram_credential_infos for fut in found.values())
            except KafkaException as exc:  # not in the metadata this broker has applied yet: ask again
                if exc.args[0].code() == KafkaError.RESOURCE_NOT_FOUND:
                    return False
                raise

        self._wait(described, f"the {self.sasl} users")

    def _hand_out_ca(self) -> None:
        """Clients verify the broker against the CA made for it, unless the settings name a CA of their own."""
        if self.server_tls is not None and "ssl.ca.location" not in self.client:
            self.client = {**self.client, "ssl.ca.location": str(self.server_tls.ca_pem)}
            self._admin = None

    def set_client(self, client: dict) -> None:
        super().set_client(client)
        self._hand_out_ca()

    def _grant_workload_acls(self) -> None:
        """Users that are not super users get what a workload needs and nothing an admin fault needs."""
        from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)

        admin = AdminClient(client_config(self.internal_bootstrap))
        bindings = [AclBinding(getattr(ResourceType, kind), "*", ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                               AclPermissionType.ALLOW)
                    for user in self.users if user not in self.super_users
                    for kind, ops in WORKLOAD_ACLS.items() for op in (getattr(AclOperation, o) for o in ops)]
        if not bindings:
            return
        for fut in admin.create_acls(bindings, request_timeout=30).values():
            fut.result()
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        self._wait(lambda: len(admin.describe_acls(everything, request_timeout=10).result()) >= len(bindings),
                   "the workload users' ACLs")

    def add_listener(self, name: str, ports: list[tuple[int, str]]) -> None:
        """Before start(): a further plaintext listener on every node, binding `ports[i][0]` and advertising
        `ports[i][1]` (host:port of a proxy in front of it). Kafka answers metadata with the addresses of the
        listener a request came in on, so a client that bootstraps at the advertised addresses reaches every
        broker through them, while producers and admin keep the direct PLAINTEXT listener."""
        if len(ports) != self.n:
            raise BackendError(f"listener {name}: {len(ports)} ports for {self.n} nodes")
        self.listeners[name] = list(ports)

    def _java(self, node: Node, main: str, *args: str, cds_options: tuple[str, ...] = ()) -> list[str]:
        return ["java", f"-Xms{min(256, self.heap_mb)}m", f"-Xmx{self.heap_mb}m", "-XX:+UseG1GC",
                "-XX:ActiveProcessorCount=2", "-Djava.awt.headless=true", *cds_options,
                f"-Dlog4j2.configurationFile={node.home / 'log4j2.yaml'}",
                f"-Dkafka.logs.dir={node.home}",
                "-Dorg.apache.kafka.automatic.config.providers=org.apache.kafka.common.config.provider."
                "EnvVarConfigProvider", "-cp", self.classpath, main, *args]

    def _format(self, node: Node) -> None:
        """The node's storage formatted: by the storage tool the first time for this Kafka build and these broker
        settings, from what it wrote then after that (harness.backends.kafka.storage)."""
        template = storage.template_dir(self.classpath, self.extra)
        if template is not None and storage.from_template(template, node.home / "data", self.cluster_id,
                                                          node.node_id):
            return
        # the storage tool is a JVM of its own: its classes archived too (harness.jvm.cds)
        cds_options, dump = cds.options("kafka-storage-tool", [self.classpath])
        # `--cluster-id=` keeps an id that starts with "-" (urlsafe base64 may) from reading as an option
        argv = self._java(node, "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                          "-c", str(node.config), "--ignore-formatted", cds_options=tuple(cds_options))
        argv[1:3] = ["-Xms64m", "-Xmx256m"]
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=self._broker_env())
        if proc.returncode != 0:
            cds.promote(dump, [self.classpath])  # deletes it: a failed run's classes are no archive to keep
            raise BackendError(f"formatting Kafka storage failed: {proc.stderr[-2000:] or proc.stdout[-2000:]}")
        cds.promote(dump, [self.classpath])
        if template is not None:
            storage.keep(node.home / "data", template)

    def start_node(self, node: Node) -> None:
        """The node's JVM, with the broker's class archive (harness.jvm.cds); while there is none, one node
        writes it when it stops (stop_node keeps it)."""
        assert self.supervisor is not None
        cds_options, dump = cds.options("kafka-broker", [self.classpath])
        if dump is not None:
            if self._cds_dumps:  # another node already writes it
                cds_options = []
            else:
                self._cds_dumps[node.node_id] = dump
        node.child = self.supervisor.spawn(f"kafka-{node.node_id}",
                                           self._java(node, "kafka.Kafka", str(node.config),
                                                      cds_options=tuple(cds_options)),
                                           log_path=node.home / "stdout.log", env=self._broker_env())

    def stop_node(self, node: Node, hard: bool = False) -> None:
        if node.child is None or self.supervisor is None:
            return
        if hard:
            node.child.stop_signal = signal.SIGKILL
        self.supervisor.stop(node.child, timeout=30)
        node.child = None
        dump = self._cds_dumps.pop(node.node_id, None)
        if dump is not None:  # written at its exit unless it was killed (then deleted here)
            cds.promote(dump, [self.classpath])

    def stop(self) -> None:
        self.close_clients()
        for node in reversed(self.nodes):
            self.stop_node(node)

    def describe(self) -> dict:
        out = {"kind": self.kind, "mode": "embedded", "bootstrap": self.bootstrap, "nodes": self.n,
               "cluster_id": self.cluster_id}
        if self.sasl:
            out.update(sasl=self.sasl, users=sorted(self.users), super_users=self.super_users,
                       security_protocol=self.client_protocol)
        if self.server_tls is not None:
            out["ca"] = str(self.server_tls.ca_pem)
        if self.query_bootstrap:
            out["query_bootstrap"] = self.query_bootstrap
        return out
