"""junit.xml lists the same test cases in every run of a scenario (passing, failing, unjudged, stopped by a set-up
error), a check not judged as a skipped case with its reason, and a run stopped before its traffic as ONE error.

Read back with xml.etree, the expected names from real runs' result.json (tests/fixtures/runs: what the checkers
reported when those scenarios ran) rather than from the catalogue under test."""
from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.checkers.catalogue import check_names
from harness.config import load_scenario
from harness.reports.junit import junit_xml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
# checks a run adds from what happened, which the scenario alone cannot name (see harness.checkers.catalogue)
FROM_WHAT_HAPPENED = re.compile(r"^(expected_failure|source_.*|receivers_not_cached|live_(?!checks$).*|baseline)$")


def real_run(name: str) -> dict:
    result = json.loads((FIXTURES / f"{name}.result.json").read_text())
    result["expected_checks"] = check_names(load_scenario(name)[0])  # what harness.verdict.judge now records
    return result


def cases(xml_text: str) -> tuple[ET.Element, dict[str, ET.Element]]:
    suite = ET.fromstring(xml_text).find("testsuite")
    found = suite.findall("testcase")
    names = [c.get("name") for c in found]
    assert len(names) == len(set(names)), names
    assert int(suite.get("tests")) == len(found)
    for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        assert int(suite.get(attr)) == sum(1 for c in found if c.find(tag) is not None), attr
    return suite, {c.get("name"): c for c in found}


def outcome(case: ET.Element) -> str:
    return next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".result.json") for p in FIXTURES.glob("*.result.json")))
def test_the_catalogue_names_every_check_a_real_run_of_the_scenario_reported(name):
    result = real_run(name)
    recorded = [c["name"] for c in result["checks"]]
    listed = result["expected_checks"]
    assert [n for n in recorded if n not in listed and not FROM_WHAT_HAPPENED.match(n)] == []
    # completed: reported only when it fails; state_matches: the recorded runs predate the state reader
    assert [n for n in listed if n not in recorded] == ["completed"] + (["state_matches"] if name == "stateful" else [])
    assert [n for n in listed if n in recorded] == [n for n in recorded if n in listed]  # the verdict's order


def steady_runs() -> dict[str, dict]:
    passing = real_run("steady")
    failing = copy.deepcopy(passing)
    failing["verdict"] = "fail"
    for check in failing["checks"]:
        if check["name"] == "no_loss":
            check.update(ok=False, status="fail", detail="12 acked events never delivered (allowed 0)")
    failing["counts"]["lost"] = 12
    unjudged = {**copy.deepcopy(passing), "verdict": "unjudged", "checks": [],
                "unjudged_reason": "interrupted (SIGTERM)"}
    # a query that did not start: the run stops before the producers, and the checkers that still ran all fail
    # for that one reason (nothing drained, nothing acked, nothing produced)
    stopped = {**copy.deepcopy(passing), "verdict": "fail", "counts": {"produced": 0, "acked": 0}}
    error = "Spark query did not start within 120 s: java.net.BindException: Address already in use"
    stopped["checks"] = [{"name": "completed", "ok": False, "status": "fail", "detail": error}] + [
        {**c, "ok": False, "status": "fail", "detail": "0 of 0"} if c["name"] in ("drained", "acked", "produce_rate")
        else c for c in stopped["checks"]]
    return {"passing": passing, "failing": failing, "unjudged": unjudged, "stopped": stopped}


def test_every_run_of_a_scenario_has_the_same_cases_in_the_same_order():
    runs = {kind: cases(junit_xml(result))[1] for kind, result in steady_runs().items()}
    real = ["completed"] + [c["name"] for c in json.loads((FIXTURES / "steady.result.json").read_text())["checks"]]
    assert {kind: list(found) for kind, found in runs.items()} == {kind: real for kind in runs}


def test_outcomes_of_a_passing_and_a_failing_run():
    runs = steady_runs()
    _, passing = cases(junit_xml(runs["passing"]))
    assert {n: outcome(c) for n, c in passing.items() if outcome(c) != "passed"} == {"latency_p99": "skipped",
                                                                                     "sustained": "skipped",
                                                                                     "headroom": "skipped"}
    assert passing["headroom"].find("skipped").get("message").startswith("unknown: 6 observations")
    assert passing["latency_p99"].find("skipped").get("message").startswith("not set")
    suite, failing = cases(junit_xml(runs["failing"]))
    assert (suite.get("failures"), suite.get("errors")) == ("1", "0")
    assert failing["no_loss"].find("failure").get("message") == "12 acked events never delivered (allowed 0)"


@pytest.mark.parametrize("kind, message", [
    ("unjudged", "not judged: interrupted (SIGTERM)"),
    ("stopped", "not reached: the run stopped before any traffic: Spark query did not start within 120 s"),
])
def test_a_run_that_was_not_judged_is_one_error_and_every_other_case_skipped_with_the_reason(kind, message):
    suite, found = cases(junit_xml(steady_runs()[kind]))
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    error = found["completed"].find("error")
    assert error is not None and error.get("message").startswith(message)
    others = [c for n, c in found.items() if n != "completed"]
    assert others and all(outcome(c) == "skipped" for c in others)
    assert {c.find("skipped").get("message") for c in others} == {error.get("message")}


def test_a_soak_lists_its_own_checks_and_ran_to_the_end_passes_unless_reported():
    scenario, _, _ = load_scenario("soak")
    result = {"scenario": "soak", "verdict": "pass", "counts": {"produced": 10}, "checks": [
        {"name": "live_checks", "ok": True, "status": "pass", "detail": "20 evaluations"}],
        "expected_checks": check_names(scenario)}
    _, found = cases(junit_xml(result))
    assert {"ran_to_the_end", "live_checks", "no_leak", "disk_budget", "faults_applied"} <= set(found)
    assert outcome(found["ran_to_the_end"]) == "passed" and outcome(found["live_checks"]) == "passed"
    assert outcome(found["no_leak"]) == "skipped"  # listed, not reported by this run: skipped, not missing
    stopped = {**result, "verdict": "fail", "checks": [
        {"name": "ran_to_the_end", "ok": False, "status": "fail", "detail": "stopped at the first failed live check"}]}
    assert outcome(cases(junit_xml(stopped))[1]["ran_to_the_end"]) == "failure"


def test_a_result_from_before_expected_checks_still_lists_its_checks():
    result = {"scenario": "old", "verdict": "pass", "counts": {"produced": 5},
              "checks": [{"name": "no_loss", "ok": True, "detail": "0 lost"}]}
    assert list(cases(junit_xml(result))[1]) == ["completed", "no_loss"]


def test_every_shipped_scenario_names_its_checks_once_each_run_case_first():
    from harness.files.paths import SCENARIOS_DIR

    for path in sorted(SCENARIOS_DIR.glob("*.toml")):
        names = check_names(load_scenario(path.stem)[0])
        assert names[:2] == ["completed", "drained"] and len(names) == len(set(names)), (path.stem, names)
        assert "latency_p99" in names and "sustained" in names, path.stem
