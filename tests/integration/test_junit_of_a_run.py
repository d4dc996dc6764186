"""A real run's junit.xml (the shared `harness run steady`): one case per check the scenario is judged by, the
names result.json records as `expected_checks`, every one the run reported among them, read back with xml.etree."""
import json
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.integration


def test_a_runs_junit_lists_the_scenarios_checks_with_the_outcomes_result_json_records(steady_run):
    out, proc, _ = steady_run
    result = json.loads((out / "result.json").read_text())
    recorded = {c["name"]: c for c in result["checks"]}
    assert result["expected_checks"][0] == "completed" and set(recorded) <= set(result["expected_checks"])
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    found = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(found) == result["expected_checks"]
    for name, case in found.items():
        tags = {child.tag for child in case}
        status = recorded[name]["status"] if name in recorded else "pass"  # `completed` reported only on failure
        expected = {"pass": {"system-out"}, "fail": {"failure"}, "unknown": {"error"}, "unjudged": {"error"},
                    "not required": {"skipped"}}[status]
        assert tags == expected, (name, status, ET.tostring(case))
    assert suite.get("failures") == str(sum(1 for c in recorded.values() if c["status"] == "fail"))


def test_a_run_stopped_by_a_set_up_error_is_one_junit_error_not_four_failures(harness_env, tmp_path):
    """A query that is not running within its start time-out (0.5 s: it cannot be) stops the run before any
    traffic. The checkers that still ran fail for that one reason (nothing drained, acked or produced); junit.xml
    says it once, as the error of `completed`, and lists every other check as skipped, not reached."""
    import subprocess
    import sys

    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "steady", "--out", str(out),
                           "--set", "spark.start_timeout_s=0.5", "--set", "producers.duration_s=5"],
                          env=harness_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    failed = [c["name"] for c in result["checks"] if c["status"] == "fail"]
    assert result["counts"]["produced"] == 0 and failed[0] == "completed" and len(failed) >= 3  # the old four
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    found = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(found) == result["expected_checks"]  # the same cases as a passing run of steady
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    error = found["completed"].find("error")
    assert error is not None and "not running after" in error.text
    assert all(c.find("skipped") is not None for n, c in found.items() if n != "completed")
