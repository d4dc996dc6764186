"""The Kafka backends: a three-node embedded quorum, a user's cluster (external), and Docker's absence."""
import uuid

import pytest

from harness.backends.base import BackendError
from harness.backends.kafka.container import ContainerKafka
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.backends.kafka.external import ExternalKafka

pytestmark = pytest.mark.integration


@pytest.mark.slow  # a minute of three brokers; broker-kill (also slow) runs a whole scenario on three
def test_three_node_cluster_replicates_and_survives_a_broker_stop(supervisor, tmp_path):
    cluster = EmbeddedKafka(nodes=3, heap_mb=256)
    cluster.start(tmp_path, supervisor)
    try:
        assert len(cluster.admin().list_topics(timeout=10).brokers) == 3
        cluster.create_stream("replicated", 3, {"min.insync.replicas": "2"}, replication=3)
        md = cluster.admin().list_topics("replicated", timeout=10).topics["replicated"]
        assert all(len(p.replicas) == 3 for p in md.partitions.values())
        cluster.stop_node(cluster.nodes[2], hard=True)  # what a broker-kill fault will do
        cluster.wait_ready(2)
        assert cluster.end_offsets("replicated") == {0: 0, 1: 0, 2: 0}
    finally:
        cluster.stop()


def test_external_backend_uses_the_given_cluster(kafka, tmp_path, supervisor):
    external = ExternalKafka(kafka.bootstrap)
    external.start(tmp_path, supervisor)
    topic = f"ext-{uuid.uuid4().hex[:6]}"
    external.create_stream(topic, 2, {})
    assert external.end_offsets(topic) == {0: 0, 1: 0}
    source = external.spark_source(topic, {"maxOffsetsPerTrigger": "10"})
    assert source.format == "kafka" and source.options == {"kafka.bootstrap.servers": kafka.bootstrap,
                                                           "subscribe": topic, "maxOffsetsPerTrigger": "10"}
    assert source.jars == ("spark-kafka",) and source.normalise == "harness.spark.events:from_kafka"
    external.stop()  # never stops someone else's cluster
    assert kafka.admin().list_topics(timeout=10).brokers


def test_external_backend_refuses_to_delete_a_topic_already_there_unless_told(kafka, tmp_path, supervisor):
    """A user's cluster keeps its topics: a stream name already taken stops the run before anything is touched;
    `existing_topic = "recreate"` lets the run start from an empty topic of that name. Read back with the
    broker's own admin and a consumer of the test's."""
    from confluent_kafka import Producer

    from harness.backends.kafka.spec import KafkaSpec
    from harness.errors import InputError

    topic = f"taken-{uuid.uuid4().hex[:6]}"
    kafka.create_stream(topic, 3, {})
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(topic, b"theirs", partition=1)
    assert producer.flush(30) == 0
    spec = dict(mode="external", bootstrap_servers=kafka.bootstrap)
    refusing = KafkaSpec(**spec).build(None)
    refusing.start(tmp_path, supervisor)
    with pytest.raises(InputError, match=f"stream.name = '{topic}' is already a topic on "
                                         f"{kafka.bootstrap}.*backend.existing_topic = \"recreate\""):
        refusing.create_stream(topic, 2, {})
    assert kafka.end_offsets(topic) == {0: 0, 1: 1, 2: 0}  # untouched: partitions and the record
    recreating = KafkaSpec(**spec, existing_topic="recreate").build(None)
    recreating.start(tmp_path, supervisor)
    recreating.create_stream(topic, 2, {})
    assert kafka.end_offsets(topic) == {0: 0, 1: 0}
    refusing.stop()
    recreating.stop()


def test_container_backend_says_clearly_when_no_docker_engine_answers(tmp_path, supervisor, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(BackendError, match="needs Docker: .*use mode = 'embedded'"):
        ContainerKafka().start(tmp_path, supervisor)
