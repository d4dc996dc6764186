"""The plugin's service fixtures as a team's tests use them: the shared broker, a three-node cluster, the Event
Hubs emulator through the real SDK, and the Spark session with the harness's settings."""
import os
import sys
import uuid

import pytest

pytestmark = pytest.mark.integration


def test_kafka_cluster_is_the_sessions_one_node_cluster(harness_kafka_cluster, harness_kafka_cluster_factory, kafka):
    assert harness_kafka_cluster is harness_kafka_cluster_factory(1) is kafka  # the project's `kafka` is the plugin's
    assert len(harness_kafka_cluster.admin().list_topics(timeout=10).brokers) == 1
    topic = f"plugin-{uuid.uuid4().hex[:8]}"
    harness_kafka_cluster.create_stream(topic, 3, {})
    assert harness_kafka_cluster.end_offsets(topic) == {0: 0, 1: 0, 2: 0}


@pytest.mark.slow  # three broker JVMs: about a minute on this machine
def test_kafka_cluster_factory_starts_three_nodes_once(harness_kafka_cluster_factory):
    cluster = harness_kafka_cluster_factory(3)
    assert harness_kafka_cluster_factory(3) is cluster and cluster is not harness_kafka_cluster_factory(1)
    assert len(cluster.admin().list_topics(timeout=10).brokers) == 3
    cluster.create_stream("replicated", 2, {"min.insync.replicas": "2"}, replication=3)
    md = cluster.admin().list_topics("replicated", timeout=10).topics["replicated"]
    assert sorted(len(p.replicas) for p in md.partitions.values()) == [3, 3]


def test_eventhubs_emulator_creates_hubs_and_takes_the_sdks_sends(harness_eventhubs_emulator):
    from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient

    hub = f"plugin-{uuid.uuid4().hex[:6]}"
    assert harness_eventhubs_emulator.create_hub(hub, 2)["partition_ids"] == ["0", "1"]
    conn = harness_eventhubs_emulator.connection_string(hub)
    assert conn.endswith(f";EntityPath={hub}") and "UseDevelopmentEmulator=true" in conn
    with EventHubProducerClient.from_connection_string(conn) as producer:
        batch = producer.create_batch(partition_id="1")
        for body in ("a", "b", "c"):
            batch.add(EventData(body))
        producer.send_batch(batch)
    with EventHubConsumerClient.from_connection_string(conn, consumer_group="$Default") as consumer:
        assert consumer.get_partition_properties("0")["is_empty"]
        assert consumer.get_partition_properties("1")["last_enqueued_sequence_number"] == 2  # three events: 0..2


def test_spark_session_runs_with_the_harness_settings(harness_spark_session, spark):
    assert harness_spark_session is spark
    conf = harness_spark_session.sparkContext.getConf()
    assert conf.get("spark.master") == "local[2]" and conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1" and conf.get("spark.ui.enabled") == "false"
    assert "spark-sql-kafka-0-10" in conf.get("spark.jars")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable  # its Python workers run this interpreter
    assert harness_spark_session.range(5).selectExpr("sum(id)").first()[0] == 10
