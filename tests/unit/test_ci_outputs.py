"""What a CI job reads of a run: junit.xml and summary.md (the workflows themselves: test_workflows.py)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.reports.ci import junit_xml, summary_markdown


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
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "0"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["completed", "no_loss", "live_latency_p99"]  # `completed` passed: not reported
    assert [child.tag for child in cases["completed"]] == ["system-out"]
    failure = cases["live_latency_p99"].find("failure")
    assert failure is not None and "p99 <9,000> ms & more" in failure.text  # escaped, read back intact
    assert cases["no_loss"].find("failure") is None
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["verdict"] == "fail"


def test_an_unknown_check_is_an_unjudged_error_in_junit_saying_it_was_not_judged():
    root = ET.fromstring(junit_xml(result(checks=[{"name": "no_leak", "ok": None, "status": "unknown",
                                                   "detail": "not judged: no resource samples"}])))
    suite = root.find("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "1", "0")
    error = suite.find("testcase[@name='no_leak']/error")
    assert error.get("type") == "unjudged"  # neither a failure (nothing shown wrong) nor a skip (not a pass)
    assert error.get("message") == "unjudged: could not be judged: not judged: no resource samples"


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
    assert suite.find("testcase[@name='completed']/error").get("message") == "not judged: reading the sink failed"


def test_summary_names_the_verdict_figures_and_failed_checks():
    text = summary_markdown(result(), {"baseline": {"run": "runs/base"}, "failures": ["x: p99 moved +80%"]})
    assert text.startswith("## ❌ `soak` on kafka: FAIL")
    assert "| 1,000 | 1,000 |" in text and "**1 of 2 checks failed:**" in text
    assert "`live_latency_p99`" in text and "x: p99 moved +80%" in text
    assert "All 1 checks passed." in summary_markdown(result("pass", checks=[result()["checks"][0]]))


def test_summary_lists_resources_per_role():
    text = summary_markdown(result("pass", checks=[], resources={"roles": {
        "broker": {"rss_peak_bytes": 612_000_000, "cores_mean": 0.31}}}))
    assert "| broker | 612 | 0.31 |" in text
