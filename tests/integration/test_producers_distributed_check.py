"""Producers on several machines: a run whose producers are two locust workers (one with its clock 300 s ahead)
writing into directories of their own, gathered into the run directory afterwards, then `harness check`.

The run itself cannot see the workers' files (they are "elsewhere"), so its own verdict fails; after gathering,
`harness check` finds both machines' ack logs, measures the skewed worker's offset over locust's message channel
(it was recorded in its clock sidecar), corrects its times and passes. With correction turned off (a threshold
above the skew) the negative latencies are counted and latency is marked not judged: never silently clipped."""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SKEW_S = 300.0  # far beyond any latency on this shared machine: every event of that worker looks early


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def harness(*args, timeout=600):
    env = dict(os.environ, CI="true")
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_two_locust_workers_one_skewed_gathered_then_checked(tmp_path):
    port = free_port()
    run_dir = tmp_path / "run"
    machines = [tmp_path / "machine-a", tmp_path / "machine-b"]
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "steady", "--out", str(run_dir), "--quiet",
         "--set", "producers.processes=2", "--set", f'producers.locust_master="127.0.0.1:{port}"',
         "--set", "producers.duration_s=10", "--set", "producers.rate.eps=1000",
         "--set", "checks.latency_p99_ms=120000",
         # 10 s is too short to judge keeping up (unknown, never a pass); the point here is the gathered clocks
         "--set", 'checks.sustained_not_required="10 s of traffic: this run is about gathered producers and skew"'],
        cwd=ROOT, env=dict(os.environ, CI="true"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = []
    for i, out in enumerate(machines):
        env = dict(os.environ, HARNESS_PRODUCER_OUT=str(out))
        env.pop("HARNESS_PRODUCER_JOB", None)  # the job comes from the master
        if i == 1:
            env["HARNESS_TEST_CLOCK_OFFSET_S"] = str(SKEW_S)
        workers.append(subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(ROOT / "producers" / "locustfile.py"), "--worker",
             "--master-host", "127.0.0.1", "--master-port", str(port)],
            cwd=tmp_path, env=env, stdout=open(tmp_path / f"worker-{i}.log", "w"), stderr=subprocess.STDOUT))
    try:
        output, _ = run.communicate(timeout=600)
        for w in workers:
            w.wait(timeout=60)
    finally:
        for p in [run, *workers]:
            if p.poll() is None:
                p.kill()
    # the run could not see the workers' files: nothing acked there, so its own verdict fails
    assert run.returncode == 1, output
    assert not list((run_dir / "producers").glob("*/acks-*.arrows"))

    # gather: each machine's directory (named by host and a run-unique id) into the run's producers/
    gathered = []
    for out in machines:
        (sub,) = [d for d in out.iterdir() if d.is_dir()]
        assert (sub / "machine.json").is_file() and list(sub.glob("clock-*.jsonl")), list(sub.iterdir())
        shutil.copytree(sub, run_dir / "producers" / sub.name)
        gathered.append(sub.name)
    assert len(set(gathered)) == 2

    checked = harness("check", str(run_dir))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "pass"
    assert result["counts"]["acked"] == 10_000 and result["counts"]["lost"] == 0
    clocks = result["producers"]["clocks"]
    machines_found = {m["directory"]: m for m in clocks["machines"]}
    skewed = machines_found[gathered[1]]
    straight = machines_found[gathered[0]]
    # measured over locust's channel on this one host: the injected skew within the exchange's own bound
    assert abs(skewed["offset_ms"] - SKEW_S * 1000) <= skewed["uncertainty_ms"] + 1.0, skewed
    assert skewed["uncertainty_ms"] < 100 and skewed["corrected"]
    assert abs(straight["offset_ms"]) <= straight["uncertainty_ms"] + 1.0 and not straight["corrected"]
    assert skewed["negative_latencies"] == skewed["delivered"] == 5_000  # every event of it looked minutes early
    assert skewed["negative_after_correction"] == 0 and straight["negative_latencies"] == 0
    assert clocks["latency_judged"] and clocks["corrected"] == [skewed["machine"]]
    assert 0 < result["latency_ms"]["p50"] < 120_000
    assert "offset +" in checked.stdout and "corrected" in checked.stdout

    # without the correction (threshold above the skew): counted and reported, latency not judged, so the run
    # cannot be judged (exit 3, never a pass and never blamed on the query)
    raw = harness("check", str(run_dir), "--skew-threshold-ms", "600000")
    assert raw.returncode == 3, raw.stdout + raw.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "unjudged" and "negative latencies from" in result["unjudged_reason"]
    latency = next(c for c in result["checks"] if c["name"] == "latency_p99")
    assert not latency["ok"] and latency["detail"].startswith("not judged: negative latencies from")
    assert "was not corrected, threshold 600000 ms" in latency["detail"]
    assert result["producers"]["clocks"]["latency_judged"] is False
    assert (run_dir / "junit.xml").read_text().count("latency_p99") >= 1
