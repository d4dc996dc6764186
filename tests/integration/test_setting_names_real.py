"""The setting-name catalogue (harness.settings) against the running software: a Spark session and a broker.

The catalogue is read from the jars with no Spark application and no broker; here the running Spark and the
running broker say which names they hold, and each must be in it (a holder the static read missed would show as
a key missing here), and the broker refuses a topic config the harness refuses, and accepts one it accepts.
"""
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from harness.settings import catalogue
from harness.settings.check import broker_config_problems, spark_conf_problems, topic_config_problems


def test_every_key_of_a_running_spark_is_known(spark):
    names = catalogue.spark_names()
    jvm = spark._jvm
    holder = getattr(getattr(jvm, "org.apache.spark.internal.config.ConfigEntry$"), "MODULE$")
    registry = holder.knownConfigs().keySet()
    running = set(jvm.java.lang.String.join("\n", registry).split("\n"))  # one call, not one per key
    running |= {row.key for row in spark.sql("SET -v").collect()}  # every public SQL conf, as Spark lists them
    running |= {k for k, _ in spark.sparkContext.getConf().getAll()}  # what the session was started with
    running = {k for k in running if k.startswith("spark.")}
    assert len(running) > 1000
    assert sorted(k for k in running if not names.knows(k)) == []
    assert [p for p in spark_conf_problems({k: "1" for k in sorted(running)}, []) if "unknown" in p] == []


def test_a_misspelt_key_is_one_spark_does_not_have(spark):
    """The typo the harness refuses is a key the running Spark has no entry for, the right one is."""
    find = spark._jvm.org.apache.spark.internal.config.ConfigEntry.findEntry
    assert find("spark.sql.shuffle.partitions") is not None
    assert find("spark.sql.shufle.partitions") is None
    assert spark_conf_problems({"spark.sql.shufle.partitions": 8}, [])


@pytest.fixture
def admin(kafka):
    return AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})


def test_the_broker_refuses_the_topic_config_the_harness_refuses(admin):
    name = f"settings-{uuid.uuid4().hex[:8]}"
    bad = admin.create_topics([NewTopic(name, 1, 1, config={"retention.mss": "1000"})], operation_timeout=20)
    with pytest.raises(KafkaException) as err:
        bad[name].result(timeout=30)
    assert "retention.mss" in str(err.value) or "INVALID_CONFIG" in str(err.value)
    assert topic_config_problems({"retention.mss": 1000})

    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "1000"})])[name].result(timeout=30)
    try:
        assert topic_config_problems({"retention.ms": 1000}) == []
        described = admin.describe_configs([ConfigResource("topic", name)])
        topic_names = set(next(iter(described.values())).result(timeout=30))
        assert "retention.ms" in topic_names
        assert sorted(topic_names - catalogue.kafka_names().topic) == []  # the broker's own list for a topic
    finally:
        admin.delete_topics([name])[name].result(timeout=30)


def test_every_config_the_broker_defines_is_known(admin):
    """A broker reports its defined configs (source DEFAULT_CONFIG when not set) and echoes whatever its
    server.properties held, known or not: the defined ones must all be in the catalogue."""
    described = admin.describe_configs([ConfigResource("broker", "1")])
    entries = next(iter(described.values())).result(timeout=30)
    default = ConfigSource.DEFAULT_CONFIG.value
    defined = {name for name, entry in entries.items() if getattr(entry.source, "value", entry.source) == default}
    assert len(defined) > 100 and "log.retention.hours" in entries
    assert [p for p in broker_config_problems({k: "x" for k in defined}) if "unknown" in p] == []  # names only
