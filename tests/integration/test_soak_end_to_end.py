"""`harness soak` as a nightly job runs it: a subprocess, its exit code, result.json, junit.xml, summary.md."""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from harness.soak.plan import replayed

pytestmark = pytest.mark.integration


def soak(out, env, *args, timeout=900):
    argv = [sys.executable, "-m", "harness", "soak", *args, "--out", str(out)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert (out / "result.json").exists(), proc.stdout[-5000:] + proc.stderr[-5000:]
    return proc, json.loads((out / "result.json").read_text())


def test_fail_fast_stops_at_the_first_failed_live_check_and_the_verdict_stays_exact(tmp_path, harness_env):
    """An impossible live latency limit: the first judged window fails it; the traffic stops then (far short of
    its 300 s), the query drains, and every event that was sent is still accounted for exactly."""
    summary_file = tmp_path / "step-summary.md"
    env = dict(harness_env, GITHUB_STEP_SUMMARY=str(summary_file))
    out = tmp_path / "run"
    proc, result = soak(out, env, "steady", "--duration", "300s", "--fail-fast",
                        "--set", "soak.check_every_s=4", "--set", "soak.window_s=4",
                        "--set", "soak.latency_p99_ms=1", "--set", "soak.recovery_s=2",
                        "--set", "soak.min_throughput_ratio=0")
    assert proc.returncode == 1, proc.stdout[-3000:]
    checks = {c["name"]: c for c in result["checks"]}
    assert not checks["ran_to_the_end"]["ok"] and "live check latency_p99" in checks["ran_to_the_end"]["detail"]
    assert not checks["live_latency_p99"]["ok"]
    assert "live check failed: latency_p99" in proc.stdout + proc.stderr  # said while running
    timeline = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    start = next(e["at"] for e in timeline if e["event"] == "traffic_start")
    stopped = next(e["t"] for e in timeline if e["event"] == "stopped_early")
    assert stopped - start < 120
    # stopped, then drained: what was sent is judged exactly, nothing is called lost for want of a drain
    assert checks["drained"]["ok"] and checks["no_loss"]["ok"] and checks["no_duplicates"]["ok"]
    c = result["counts"]
    assert c["delivered_unique"] == c["acked"] > 0 and c["lost"] == 0
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    failed = {case.get("name") for case in suite.findall("testcase") if case.find("failure") is not None}
    assert {"ran_to_the_end", "live_latency_p99"} <= failed and "no_loss" not in failed
    assert int(suite.get("failures")) == len(failed)
    assert summary_file.read_text() == (out / "summary.md").read_text()
    assert "FAIL" in summary_file.read_text().splitlines()[0]
    assert result["resources"]["roles"]["broker"]["rss_peak_bytes"] > 50e6  # sampled while it ran


@pytest.mark.slow
def test_a_short_soak_with_random_faults_passes_and_replays_its_plan(tmp_path, harness_env):
    out = tmp_path / "run"
    proc, result = soak(out, harness_env, "soak", "--duration", "150s", "--set", "soak.check_every_s=10",
                        "--set", "soak.random_faults.start_s=20", "--set", "soak.random_faults.every_s=[25, 35]",
                        "--set", "soak.random_faults.quiet_end_s=20")
    failed = [c for c in result["checks"] if not c["ok"]]
    assert proc.returncode == 0 and result["verdict"] == "pass", json.dumps(failed, indent=1)
    assert len(result["faults"]) >= 3 and all(f["healed_at"] for f in result["faults"])
    evaluations = [json.loads(line) for line in (out / "live_checks.jsonl").read_text().splitlines()]
    assert len(evaluations) >= 10
    assert {"broker", "driver", "producer"} <= set(result["resources"]["roles"])
    html = (out / "report.html").read_text()
    assert 'id="fig-resources"' in html and 'id="fig-disk"' in html
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    listed = {"completed", *result["expected_checks"], *(c["name"] for c in result["checks"])}  # reports.junit
    assert suite.get("failures") == "0" and {c.get("name") for c in suite.findall("testcase")} == listed
    again, _ = replayed(out)
    stored = json.loads((out / "scenario.json").read_text())["resolved"]
    assert again.model_dump(mode="json") == stored  # --replay runs exactly this plan
