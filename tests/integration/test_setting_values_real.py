"""Setting values (harness.settings.values) against the software that reads them: Spark's own converters and a
real broker's topic-config validation.

The catalogue learnt each setting's type by probing Spark's converters with a few fixed strings; here other
values, the issue's bad ones among them, go to the converter of the running Spark session (what SparkConf and
SQLConf call when the setting is read) and to a broker's CreateTopics (validate_only), and the harness must refuse
exactly what they refuse.
"""
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from harness.settings import catalogue
from harness.settings.check import topic_config_problems
from harness.settings.values import spark_value_problem

# The issue's values and their neighbours: good and bad forms of each type Spark's converters take.
SAMPLES = ["true", "FALSE", " true ", "maybe", "1", "8", "+3", "-5", "0", "8.5", "1e3", "0.25", "lots", "1 secnd",
           "30s", "5min", "500ms", "-1", "512m", "2g", "1.5g", "10MB", "zstd", "ZSTD", "zip", "banana", "3000000000"]
# Named settings of each type, plus the first few the catalogue holds of each, so every type is tried.
NAMED = ["spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions", "spark.network.timeout",
         "spark.executor.memory", "spark.sql.autoBroadcastJoinThreshold", "spark.sql.parquet.compression.codec",
         "spark.sql.streaming.minBatchesToRetain", "spark.task.cpus", "spark.memory.fraction",
         "spark.sql.streaming.stateStore.maintenanceInterval", "spark.scheduler.mode", "spark.sql.adaptive.logLevel"]
CHECKED = ("boolean", "int", "long", "double", "time", "bytes", "enum")


def _keys(spark) -> list[str]:
    """NAMED and the first four of each type among the entries this session has loaded (a Kubernetes or YARN
    entry's holder is not: ConfigEntry.findEntry knows only loaded ones)."""
    types = catalogue.spark_names().types
    find = spark._jvm.org.apache.spark.internal.config.ConfigEntry.findEntry
    keys = list(NAMED)
    for kind in CHECKED:
        keys += [k for k in sorted(k for k, t in types.items() if t.kind == kind) if find(k) is not None][:4]
    return list(dict.fromkeys(keys))


def _spark_takes(spark, key: str, value: str) -> bool:
    entry = spark._jvm.org.apache.spark.internal.config.ConfigEntry.findEntry(key)
    assert entry is not None, key
    optional = entry.getClass().getSimpleName() == "OptionalConfigEntry"  # an entry without a default
    converter = entry.rawValueConverter() if optional else entry.valueConverter()
    try:
        converter.apply(value)
        return True
    except (Py4JJavaError, PySparkException):  # pyspark turns Spark's IllegalArgumentException into its own
        return False
    except ValueError:  # py4j cannot bring a BigDecimal (spark.task.cpus) back: the converter returned one
        return True


def test_the_harness_refuses_exactly_the_values_spark_refuses(spark):
    types = catalogue.spark_names().types
    keys = _keys(spark)
    assert {types[k].kind for k in keys} >= set(CHECKED)
    disagreements = []
    for key in keys:
        for value in SAMPLES:
            ours = spark_value_problem(value, types[key]) is None
            if ours != _spark_takes(spark, key, value):
                disagreements.append((key, types[key].kind, value, "harness takes" if ours else "harness refuses"))
    assert disagreements == [], disagreements


def test_issue_values_are_refused_by_spark_and_the_harness(spark):
    """The issue's examples, one per type: Spark's converter refuses each, and so does validate."""
    types = catalogue.spark_names().types
    for key, value in [("spark.sql.adaptive.enabled", "maybe"), ("spark.network.timeout", "1 secnd"),
                       ("spark.executor.memory", "lots"), ("spark.sql.shuffle.partitions", "8.5")]:
        assert not _spark_takes(spark, key, value), (key, value)
        assert spark_value_problem(value, types[key]), (key, value)


@pytest.fixture
def admin(kafka):
    return AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})


@pytest.mark.parametrize("key,value", [
    ("retention.ms", "abc"), ("retention.ms", "-5"), ("retention.ms", "1000"), ("retention.ms", "-1"),
    ("retention.ms", "1.5"), ("cleanup.policy", "dlete"), ("cleanup.policy", "compact,delete"),
    ("compression.type", "zstd"), ("compression.type", "zip"), ("min.insync.replicas", "0"),
    ("min.insync.replicas", "1"), ("unclean.leader.election.enable", "maybe"),
    ("unclean.leader.election.enable", "TRUE"), ("min.cleanable.dirty.ratio", "0.5"),
    ("min.cleanable.dirty.ratio", "2"), ("segment.bytes", "1k"),
])
def test_the_broker_refuses_exactly_the_topic_config_values_the_harness_refuses(admin, key, value):
    name = f"values-{uuid.uuid4().hex[:8]}"
    future = admin.create_topics([NewTopic(name, 1, 1, config={key: value})], validate_only=True,
                                 operation_timeout=20)[name]
    try:
        future.result(timeout=30)
        broker_takes = True
    except KafkaException as exc:
        assert "INVALID_CONFIG" in str(exc) or key in str(exc), exc
        broker_takes = False
    assert (topic_config_problems({key: value}) == []) == broker_takes, topic_config_problems({key: value})
