"""A run stopped from outside, and a run whose query dies: real runs of `steady`, each stopped within seconds of
its traffic starting.

- SIGTERM (a CI job cancelled, `kill`): every process stopped, no orphan, the run `unjudged` with the reason
  "stopped by SIGTERM", its junit.xml one error and no failure, exit 130.
- The query's process killed from outside (not by a fault): the producers stop within seconds, not at the
  traffic's end (60 s here), and the run says the query stopped.
"""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET

import pytest

from harness.supervisor import processes_with_env, wait_until

pytestmark = pytest.mark.integration
TRAFFIC_S = 60  # far longer than either test lets the run go on


def _start(harness_env, out):
    token = uuid.uuid4().hex
    argv = [sys.executable, "-m", "harness", "run", "steady", "--out", str(out), "--quiet",
            "--set", f"producers.duration_s={TRAFFIC_S}", "--set", "producers.rate.eps=500"]
    proc = subprocess.Popen(argv, env=dict(harness_env, HARNESS_TEST_TOKEN=token), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, token


def _acking(out, proc):
    def acked() -> bool:
        assert proc.poll() is None, proc.stdout.read()
        return any(json.loads(line)["acked"] > 0 for f in (out / "producers").glob("stats-*.jsonl")
                   for line in f.read_text().splitlines() if line.strip())
    wait_until(acked, 240, 0.3, what="the producers' first acks")


def _no_orphans(token, timeout=30):
    deadline = time.time() + timeout
    while left := processes_with_env("HARNESS_TEST_TOKEN", token):
        if time.time() > deadline:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes left behind: {left}")
        time.sleep(0.5)


def test_a_run_stopped_by_sigterm_is_unjudged_with_one_junit_error_and_no_orphan(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, token = _start(harness_env, out)
    try:
        _acking(out, proc)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    _no_orphans(token)
    assert proc.returncode == 130, stdout
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "unjudged", result.get("checks")
    assert result["unjudged_reason"].startswith("stopped by SIGTERM"), result["unjudged_reason"]
    assert result["counts"]["produced"] > 0  # what was recorded before the signal is kept
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    assert "stopped by SIGTERM" in stdout


def test_the_producers_stop_promptly_when_the_query_dies(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, token = _start(harness_env, out)
    try:
        _acking(out, proc)
        driver = json.loads((out / "spark" / "status.json").read_text())["pid"]
        killed_at = time.time()
        os.killpg(driver, signal.SIGKILL)  # the driver and its JVM, as a crash or the OOM killer would
        stdout, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    ended_after = time.time() - killed_at
    _no_orphans(token)
    assert proc.returncode == 1, stdout
    assert ended_after < TRAFFIC_S / 2, (ended_after, stdout)
    last_sent = max(json.loads(line)["t"] for f in (out / "producers").glob("stats-*.jsonl")
                    for line in f.read_text().splitlines() if line.strip() and json.loads(line)["sent"] > 0)
    assert last_sent <= killed_at + 5, (last_sent - killed_at)  # stats are per whole second
    result = json.loads((out / "result.json").read_text())
    completed = next(c for c in result["checks"] if c["name"] == "completed")
    assert completed["ok"] is False and "the Spark query stopped during the run" in completed["detail"]
