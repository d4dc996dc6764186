"""One embedded broker and one Spark session for the whole test session (each costs seconds to start)."""
import sys
import uuid

import pytest

from harness.backends.kafka.embedded import EmbeddedKafka
from harness.supervisor import Supervisor


@pytest.fixture(scope="session")
def supervisor():
    sup = Supervisor(f"tests-{uuid.uuid4().hex}")
    yield sup
    sup.stop_all()


@pytest.fixture(scope="session")
def kafka(supervisor, tmp_path_factory):
    broker = EmbeddedKafka(nodes=1, heap_mb=384)
    broker.start(tmp_path_factory.mktemp("kafka"), supervisor)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    import os

    from harness.jvm.artifacts import resolve
    from harness.spark.process import BASE_CONF
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]").appName("harness-tests")
    for k, v in BASE_CONF.items():
        builder = builder.config(k, v)
    builder = builder.config("spark.jars", ",".join(str(j) for j in resolve("spark-kafka")))
    builder = builder.config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
