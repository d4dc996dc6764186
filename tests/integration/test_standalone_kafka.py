"""`harness kafka up|status|down` gives a broker that outlives the command and goes away on `down`."""
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.integration


def harness(env, *args):
    return subprocess.run([sys.executable, "-m", "harness", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def test_up_status_down(harness_env):
    up = harness(harness_env, "kafka", "up")
    try:
        assert up.returncode == 0, up.stderr
        line = next(x for x in up.stdout.splitlines() if x.startswith("bootstrap.servers="))
        bootstrap = line.split("=", 1)[1]
        assert bootstrap.startswith("127.0.0.1:")
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert len(md.brokers) == 1
        status = harness(harness_env, "kafka", "status")
        assert status.returncode == 0 and bootstrap in status.stdout
        again = harness(harness_env, "kafka", "up")  # idempotent: same broker
        assert bootstrap in again.stdout
    finally:
        down = harness(harness_env, "kafka", "down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert harness(harness_env, "kafka", "status").returncode == 1
