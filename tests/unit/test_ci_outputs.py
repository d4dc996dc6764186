"""What a CI job reads of a run: junit.xml, summary.md, and the nightly workflow file itself."""
from __future__ import annotations

import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from harness.cli import parser
from reports.ci import junit_xml, summary_markdown

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-soak.yml"


def result(verdict="fail", checks=None, **more):
    return {"scenario": "soak", "backend": "kafka", "verdict": verdict, "duration_s": 612.5, "run_dir": "runs/x",
            "checks": checks if checks is not None else [
                {"name": "no_loss", "ok": True, "detail": "0 acked events never delivered"},
                {"name": "live_latency_p99", "ok": False, "detail": "failed in 2 of 20 evaluations; first at "
                                                                     "+300 s: p99 <9,000> ms & more"}],
            "counts": {"produced": 1000, "delivered_unique": 1000}, "latency_ms": {"p50": 800.0, "p99": 9000.0},
            "throughput": {"produce_eps": 1500.0, "process_rps": 9000.0}, "faults": [{}, {}], **more}


def test_junit_has_one_case_per_check_and_a_failure_for_each_failed_one():
    root = ET.fromstring(junit_xml(result()))
    suite = root.find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1" and suite.get("errors") == "0"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"no_loss", "live_latency_p99"}
    failure = cases["live_latency_p99"].find("failure")
    assert failure is not None and "p99 <9,000> ms & more" in failure.text  # escaped, read back intact
    assert cases["no_loss"].find("failure") is None
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["verdict"] == "fail"


def test_an_unknown_check_is_a_failure_in_junit_saying_it_was_not_judged():
    root = ET.fromstring(junit_xml(result(checks=[{"name": "no_leak", "ok": None, "status": "unknown",
                                                   "detail": "not judged: no resource samples"}])))
    failure = root.find("testsuite/testcase/failure")
    assert root.find("testsuite").get("failures") == "1"
    assert failure.get("type") == "unknown" and failure.get("message").startswith("unknown: not judged")


def test_a_check_not_required_is_skipped_in_junit_and_neither_failure_nor_pass():
    root = ET.fromstring(junit_xml(result(verdict="pass", checks=[
        {"name": "latency_p99", "ok": None, "status": "not required", "detail": "not set: p99 900.0 ms"},
        {"name": "no_loss", "ok": True, "status": "pass", "detail": "0 lost"}])))
    suite = root.find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "1")
    skipped = suite.find("testcase[@name='latency_p99']/skipped")
    assert skipped is not None and skipped.get("message") == "not set: p99 900.0 ms"
    md = summary_markdown(result(verdict="fail", checks=[
        {"name": "latency_p99", "ok": None, "status": "not required", "detail": "not set"},
        {"name": "no_loss", "ok": False, "status": "fail", "detail": "3 lost"}]))
    assert "**1 of 2 checks failed:**" in md and "`latency_p99`" not in md


def test_an_unjudged_run_is_an_error_in_junit_not_a_pass():
    root = ET.fromstring(junit_xml(result("unjudged", checks=[], unjudged_reason="reading the sink failed")))
    suite = root.find("testsuite")
    assert suite.get("errors") == "1" and suite.get("tests") == "1"
    assert suite.find("testcase/error").get("message") == "reading the sink failed"


def test_summary_names_the_verdict_figures_and_failed_checks():
    text = summary_markdown(result(), {"baseline": {"run": "runs/base"}, "failures": ["x: p99 moved +80%"]})
    assert text.startswith("## ❌ `soak` on kafka: FAIL")
    assert "| 1,000 | 1,000 |" in text and "**1 of 2 checks failed:**" in text
    assert "`live_latency_p99`" in text and "x: p99 moved +80%" in text
    assert "All 1 checks passed." in summary_markdown(result("pass", checks=[result()["checks"][0]]))


def test_the_nightly_workflow_is_valid_and_runs_the_soak():
    wf = yaml.safe_load(WORKFLOW.read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["schedule"][0]["cron"].count(" ") == 4 and "workflow_dispatch" in triggers
    assert set(wf["jobs"]) == {"soak", "slow-tests"}
    job = wf["jobs"]["soak"]
    assert job["runs-on"] and job["timeout-minutes"] > 120
    assert all(("uses" in s) != ("run" in s) for s in job["steps"])
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"].startswith("runs/nightly")
    soak_step = next(s for s in job["steps"] if "run" in s and "make soak" in s["run"])
    # the step's make line, with the expressions GitHub would fill in, must resolve to a harness command that parses
    line = soak_step["run"].replace("${{ inputs.scenario || 'soak' }}", "soak").replace(
        "${{ inputs.duration || '2h' }}", "2h")
    argv = shlex.split(line)
    assert argv[:2] == ["make", "soak"]
    # (under `make test` this is a sub-make: no directory lines, and only the soak recipe's line is the command)
    dry = subprocess.run(["make", "--no-print-directory", "-n", *argv[1:]], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    command = shlex.split(next(line for line in dry.stdout.splitlines() if " -m harness soak " in line))
    assert command[1:4] == ["-m", "harness", "soak"]
    args = parser().parse_args(command[3:])
    assert args.scenario == "soak" and args.duration == "2h" and args.out == "runs/nightly" and args.quiet


def test_the_nightly_workflow_runs_the_slow_suite():
    """`make test` leaves the slow tests out; the nightly job runs them, through the Makefile's own target, which
    selects exactly the tests marked slow."""
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["slow-tests"]
    assert all(("uses" in s) != ("run" in s) for s in job["steps"])
    assert [s["run"] for s in job["steps"] if "run" in s] == ["make test-slow"]
    dry = subprocess.run(["make", "--no-print-directory", "-n", "test-slow"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert any(" -m pytest " in line and "-m slow" in line for line in dry.stdout.splitlines())


def test_summary_lists_resources_per_role():
    text = summary_markdown(result("pass", checks=[], resources={"roles": {
        "broker": {"rss_peak_bytes": 612_000_000, "cores_mean": 0.31}}}))
    assert "| broker | 612 | 0.31 |" in text
