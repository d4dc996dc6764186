"""What every Kafka backend does the same way once it has a bootstrap address."""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.backends.base import Backend, BackendError, SparkSource
import harness.backends.kafka.security as sec
from harness.errors import InputError
from harness.jvm.artifacts import SPARK_KAFKA
from harness.supervisor import wait_until


CLIENT_LOG = logging.getLogger("harness.kafka.client")


def client_config(bootstrap: str, security: dict[str, Any] | None = None) -> dict[str, Any]:
    """Admin/consumer clients log through Python logging, not straight onto the user's terminal; `security`: the
    run's client security settings with their secrets' values (harness.backends.kafka.security)."""
    return {"bootstrap.servers": bootstrap, **(security or {}), "logger": CLIENT_LOG}


def _accepts(bootstrap: str) -> bool:
    """Whether any of the bootstrap servers accepts a connection (a client needs one to fetch the metadata)."""
    for server in bootstrap.split(","):
        host, port = server.strip().rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return True
        except OSError:
            continue
    return False


class KafkaBackendBase(Backend):
    kind = "kafka"
    bootstrap: str = ""
    query_bootstrap: str = ""  # where the query under test connects instead, when set (a proxy in front)

    _admin: AdminClient | None = None
    client: dict[str, Any] = {}  # [backend.client]: security settings as the user wrote them (secrets too)
    _authorized = False

    def set_client(self, client: dict[str, Any]) -> None:
        """The security settings every client of the run uses (the backend's own, producers', Spark's). Literal
        secrets are exported into this process's environment now, before any child process starts (the query's
        driver starts beside the broker and only learns its source options later)."""
        self.client = dict(client)
        sec.referenced(self.client)
        self._admin = None

    def client_security(self) -> dict[str, str]:
        """The settings with their secrets' values, for clients in this process."""
        return sec.resolved(self.client)

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(client_config(self.bootstrap, self.client_security()))
        return self._admin

    def wait_ready(self, brokers: int, timeout: float = 90.0, alive=lambda: True, bootstrap: str | None = None,
                   admin: AdminClient | None = None, unreachable_s: float | None = None) -> None:
        """Until `brokers` brokers answer metadata at the run's bootstrap with the run's client settings (or at
        `bootstrap` through `admin`: the embedded broker's own listener, before its SCRAM users exist).
        `unreachable_s`: give up sooner when no bootstrap server has accepted a connection for that long (a cluster
        that is already running, named by an address where nothing listens)."""
        bootstrap = bootstrap or self.bootstrap
        started = time.monotonic()
        deadline = started + timeout
        last: Exception | None = None
        reached = False
        while time.monotonic() < deadline:
            if not alive():
                raise BackendError("the Kafka broker exited during start-up; see its log in the run directory")
            if not _accepts(bootstrap):
                if not reached and unreachable_s is not None and time.monotonic() - started >= unreachable_s:
                    raise BackendError(f"Kafka at {bootstrap}: no bootstrap server accepted a connection in "
                                       f"{unreachable_s:.0f}s (is the cluster running, and is bootstrap_servers "
                                       f"its address?)")
                time.sleep(0.2)
                continue
            reached = True
            try:
                md = (admin or self.admin()).list_topics(timeout=3)
                if len(md.brokers) >= brokers:
                    return
            except KafkaException as exc:
                last = exc
            time.sleep(0.5)
        raise BackendError(f"Kafka at {bootstrap} not ready after {timeout:.0f}s ({last})")

    replication = 1  # topic replication factor; -1 = the cluster's default
    existing_topic = "recreate"  # the harness's own brokers; on a user's cluster "refuse" unless told (spec)

    def create_stream(self, name: str, partitions: int, config: dict[str, str],
                      replication: int | None = None) -> None:
        replication = self.replication if replication is None else replication
        admin = self.admin()
        if name in admin.list_topics(timeout=10).topics:
            if self.existing_topic != "recreate":
                raise InputError(
                    f"refused before any traffic: stream.name = {name!r} is already a topic on {self.bootstrap}; "
                    "the run would delete it and its records to start from an empty topic. Give stream.name a "
                    "topic of the run's own, or set backend.existing_topic = \"recreate\" if it may go")
            for fut in admin.delete_topics([name], operation_timeout=30).values():
                fut.result()
            self._wait(lambda: name not in admin.list_topics(timeout=10).topics, f"deletion of topic {name}")
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication,
                         config={k: str(v) for k, v in config.items()})
        for fut in admin.create_topics([topic], operation_timeout=30).values():
            try:
                fut.result()
            except KafkaException as exc:
                raise BackendError(f"cannot create topic {name}: {exc}") from exc
        self._wait(lambda: self._leaders_known(name, partitions), f"leaders of topic {name}")
        if self.required and not self._authorized:  # once the topic exists, before the query or any traffic
            from harness.backends.kafka.authz import check_authorized

            check_authorized(self.admin(), name, self.required, sec.principal(self.client))
            self._authorized = True

    def create_output_topic(self, name: str, partitions: int) -> None:
        """The Kafka sink's output topic (harness.sinks.kafka), created as the stream is (a user's cluster refuses
        one that exists unless told), with LogAppendTime: the broker stamps each record when it is appended, so its
        timestamp is when it became visible downstream (the end of end-to-end latency), not the writer's clock."""
        self.create_stream(name, partitions, {"message.timestamp.type": "LogAppendTime"})

    def _leaders_known(self, name: str, partitions: int) -> bool:
        md = self.admin().list_topics(name, timeout=10).topics.get(name)
        return bool(md and len(md.partitions) == partitions and all(p.leader >= 0 for p in md.partitions.values()))

    @staticmethod
    def _wait(pred, what: str, timeout: float = 30.0) -> None:
        wait_until(pred, timeout, 0.2, what, error=BackendError, timeout_message=lambda: f"timed out waiting for {what}")

    def producer_settings(self) -> dict[str, Any]:
        """For the producers' job file: secrets as `${VAR}` references their process expands (kafka_sender)."""
        return {"bootstrap.servers": self.bootstrap, **sec.referenced(self.client)}

    def spark_source(self, stream: str, options: dict[str, str]) -> SparkSource:
        """The security settings as Java client options beneath the user's own (an explicit `kafka.*` wins);
        secrets as `${VAR}` references the query process expands."""
        derived = {"kafka.bootstrap.servers": self.query_bootstrap or self.bootstrap, "subscribe": stream,
                   **sec.spark_options(self.client)}
        opts = sec.merge_source_options(derived, options)
        return SparkSource("kafka", opts, normalise="harness.spark.events:from_kafka", jars=(SPARK_KAFKA,))

    _watermarks: Consumer | None = None
    _watermarks_lock = threading.Lock()

    def end_offsets(self, stream: str, timeout: float = 60.0) -> dict[int, int]:
        """High watermarks; one cached consumer, so sampling them every second (lag) stays cheap. While a
        partition has no live leader (a broker just died) this retries until leadership moves or `timeout`."""
        deadline = time.monotonic() + timeout
        with self._watermarks_lock:
            if self._watermarks is None:
                self._watermarks = Consumer(dict(client_config(self.bootstrap, self.client_security()), **{
                    "group.id": "harness-watermarks", "enable.auto.commit": False}))
            while True:
                try:
                    md = self._watermarks.list_topics(stream, timeout=10).topics[stream]
                    return {p: self._watermarks.get_watermark_offsets(TopicPartition(stream, p), timeout=10)[1]
                            for p in sorted(md.partitions)}
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)

    def start_offsets(self, stream: str) -> dict[int, int]:
        """Per partition, the log start offset (the first record still on the broker)."""
        from confluent_kafka.admin import OffsetSpec

        md = self.admin().list_topics(stream, timeout=10).topics[stream]
        request = {TopicPartition(stream, p): OffsetSpec.earliest() for p in sorted(md.partitions)}
        futures = self.admin().list_offsets(request, request_timeout=30)
        return {tp.partition: fut.result().offset for tp, fut in futures.items()}

    def delete_records(self, stream: str, before: dict[int, int]) -> dict[int, int]:
        """Kafka's DeleteRecords: remove every record below `before[p]`; returns the new log start offsets."""
        request = [TopicPartition(stream, p, off) for p, off in sorted(before.items())]
        futures = self.admin().delete_records(request, request_timeout=30, operation_timeout=30)
        return {tp.partition: fut.result().low_watermark for tp, fut in futures.items()}

    # -- topic-level operations the topic faults use (harness.faults: retention, topic_delete, add_partitions) --
    def topic_configs(self, stream: str) -> dict[str, tuple[str | None, bool]]:
        """Every config of the topic: name -> (value, set on the topic itself rather than inherited)."""
        from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

        resource = ConfigResource(ResourceType.TOPIC, stream)
        entries = self.admin().describe_configs([resource], request_timeout=30)[resource].result()
        topic_level = ConfigSource.DYNAMIC_TOPIC_CONFIG.value  # the client reports sources as plain ints
        return {name: (e.value, int(e.source) == topic_level) for name, e in entries.items()}

    def alter_topic_configs(self, stream: str, set_: dict[str, str], delete: list[str] = ()) -> None:
        """IncrementalAlterConfigs: set some topic configs, drop others back to the broker's default."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        ops = [ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        resource = ConfigResource(ResourceType.TOPIC, stream, incremental_configs=ops)
        for fut in self.admin().incremental_alter_configs([resource], request_timeout=30).values():
            fut.result()

    def topic_replication(self, stream: str) -> int:
        md = self.admin().list_topics(stream, timeout=10).topics[stream]
        return max(len(p.replicas) for p in md.partitions.values())

    def delete_stream(self, stream: str) -> None:
        """DeleteTopics, then wait until the topic is gone from the metadata."""
        admin = self.admin()
        for fut in admin.delete_topics([stream], operation_timeout=30).values():
            fut.result()
        self._wait(lambda: not admin.list_topics(stream, timeout=10).topics[stream].partitions,
                   f"deletion of topic {stream}")

    def stream_exists(self, stream: str) -> bool:
        md = self.admin().list_topics(stream, timeout=10).topics.get(stream)
        return bool(md and md.partitions)

    def add_partitions(self, stream: str, total: int) -> None:
        """CreatePartitions up to `total`, then wait until every partition has a leader."""
        from confluent_kafka.admin import NewPartitions

        for fut in self.admin().create_partitions([NewPartitions(stream, total)], operation_timeout=30).values():
            fut.result()
        self._wait(lambda: self._leaders_known(stream, total), f"leaders of {total} partitions of {stream}")

    def close_clients(self) -> None:
        with self._watermarks_lock:
            if self._watermarks is not None:
                self._watermarks.close()
                self._watermarks = None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "bootstrap": self.bootstrap}
