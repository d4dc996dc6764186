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


@pytest.fixture(scope="session")
def steady_run(tmp_path_factory):
    """`harness run steady` with a 4 s warm-up and a 20 s measured window, once for every test that reads a
    finished run (its result, its report, a comparison against it): (the run directory, the process, the token
    in its processes' environment)."""
    import os
    import subprocess

    base = tmp_path_factory.mktemp("steady")
    token = uuid.uuid4().hex
    env = dict(os.environ, HARNESS_RUNS=str(base / "runs"), CI="true", PYTHONUNBUFFERED="1",
               HARNESS_TEST_TOKEN=token)
    out = base / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "steady", "--out", str(out),
                           "--set", "producers.duration_s=20", "--set", "producers.warmup_s=4"],
                          env=env, capture_output=True, text=True, timeout=600)
    return out, proc, token


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session's report pages (tests/browser.py)."""
    from browser import Browser

    with Browser() as b:
        yield b
