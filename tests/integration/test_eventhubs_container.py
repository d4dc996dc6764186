"""Microsoft's Event Hubs emulator in Docker (backend.mode = "container"): eh-steady end to end when a Docker
engine answers; without one the run must stop at once with the reason (exit 2), and the end-to-end test is
skipped with that same reason (the only legitimate skip: the machine has no Docker engine)."""
import subprocess
import sys

import pytest

from harness.backends.kafka.container import docker_available
from scenario_runs import run

pytestmark = pytest.mark.integration
DOCKER, WHY = docker_available()


def test_without_docker_the_run_is_refused_at_once_with_the_reason(harness_env, tmp_path):
    if DOCKER:
        pytest.skip("a Docker engine answers here: the refusal cannot be observed")
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "eh-steady", "--out", str(tmp_path / "x"),
                           "--set", 'backend.mode="container"', "--set", "producers.duration_s=5"],
                          env=harness_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "backend.mode = 'container' runs Microsoft's Event Hubs emulator in Docker" in proc.stderr
    assert not (tmp_path / "x" / "producers" / "job.json").exists()  # no producer started


@pytest.mark.skipif(not DOCKER, reason=f"Microsoft's Event Hubs emulator needs Docker: {WHY}")
def test_eh_steady_on_microsofts_emulator(harness_env, tmp_path):
    proc, result = run(harness_env, tmp_path / "run", "eh-steady", 'backend.mode="container"',
                       "producers.duration_s=10")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["backend_info"]["mode"] == "container"
    assert result["counts"]["lost"] == result["counts"]["duplicates"] == 0
    assert (tmp_path / "run" / "services" / "eventhubs" / "Config.json").is_file()
