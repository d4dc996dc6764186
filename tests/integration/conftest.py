"""The project's own integration tests use the pytest plugin's fixtures (harness/pytest_plugin.py, installed with
the package): one embedded broker and one Spark session for the whole test session (each costs seconds to start),
and one `harness run steady` shared by every test that reads a finished run."""
import uuid

import pytest


@pytest.fixture(scope="session")
def supervisor(harness_supervisor):
    return harness_supervisor


@pytest.fixture(scope="session")
def kafka(harness_kafka_cluster):
    return harness_kafka_cluster


@pytest.fixture(scope="session")
def spark(harness_spark_session):
    return harness_spark_session


@pytest.fixture(scope="session")
def steady_run(harness_runner, tmp_path_factory):
    """`harness run steady` with its warm-up (until the query has caught up with its start) and a 20 s measured
    window, once for every test that reads a finished run (its result, its report, a comparison against it): (the
    run directory, the completed process with the runner's output, the token in its processes' environment). Its
    trigger is 2 s, not the shipped 1 s: on two cores shared with the test session a median batch of 1.2 s is the
    machine, not what these tests look at (headroom lists it, not required). Its Maven mirror is a port nothing
    listens on: a run reads its jars from the cache `harness setup` filled and needs no network for them."""
    import subprocess

    out = tmp_path_factory.mktemp("steady") / "run"
    token = uuid.uuid4().hex
    result = harness_runner.run("steady", out=out, timeout=600,
                                env={"HARNESS_TEST_TOKEN": token, "HARNESS_MAVEN_MIRROR": "http://127.0.0.1:9/none"},
                                **{"producers.duration_s": 20, "spark.trigger.interval": "2 seconds"})
    proc = subprocess.CompletedProcess(["harness", "run", "steady"], result.exit_code,
                                       stdout=result.log_path.read_text(errors="replace"), stderr="")
    return out, proc, token


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session's report pages (tests/browser.py)."""
    from browser import Browser

    with Browser() as b:
        yield b
