"""junit.xml: a run as one test suite, each check one test case, so a CI job's test view names what failed and its
history follows each check from build to build.

The same cases in every run of a scenario: the checks the scenario is judged by (result.json `expected_checks`,
harness.checkers.catalogue), then any check the run added. A check the run did not judge is a skipped case with
the reason, never a missing one: not required, or not reached because the run stopped. A check that decided
nothing, unknown (it could not be judged) or unjudged (a performance check set aside because the machine was busy),
is an <error> of type "unjudged" with the reason: not a failure (nothing was shown wrong), and not a skip (a
skipped case reads as not-a-problem, and it keeps the run from passing).

One cause, one error: when the run as a whole could not be judged (the judge could not read it, or it was stopped
from outside: its verdict does not follow from its checks), or stopped before any traffic (a configuration or set-up
error: a broker that did not start, a query that did not start), the `completed` case is the one <error> with the
reason and every other case is skipped saying so, rather than four failures that are all the same error.
A pure function of result.json.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from harness.check import REPORTED_ONLY_WHEN_FAILED as IMPLICIT_PASS, UNDECIDED, status_of, verdict_of

RUN_CASE = "completed"  # the case that carries what stopped the run


def stop_reason(result: dict[str, Any]) -> str | None:
    """Why no check of this run was judged, or None when the run was judged on what it sent (an unjudged verdict
    that follows from its checks was judged: its undecided checks say why)."""
    if result.get("verdict") == "unjudged" and verdict_of(result.get("checks") or []) != "unjudged":
        return f"not judged: {result.get('unjudged_reason') or 'the run could not be judged'}"
    run = next((c for c in result.get("checks") or [] if c.get("name") == RUN_CASE), None)
    if run is not None and status_of(run) == "fail" and not (result.get("counts") or {}).get("produced"):
        return f"not reached: the run stopped before any traffic: {run.get('detail')}"
    return None


def case_names(result: dict[str, Any]) -> list[str]:
    """The scenario's checks (expected_checks), then the ones this run added; `completed` always first."""
    recorded = [c["name"] for c in result.get("checks") or []]
    return list(dict.fromkeys([RUN_CASE, *(result.get("expected_checks") or []), *recorded]))


def junit_xml(result: dict[str, Any]) -> str:
    name = f"harness.{result.get('scenario', 'run')}"
    checks = {c["name"]: c for c in result.get("checks") or []}
    stopped = stop_reason(result)
    suite = ET.Element("testsuite", name=name, time=f"{float(result.get('duration_s') or 0.0):.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("verdict", "run_dir", "backend"):
        ET.SubElement(props, "property", name=key, value=str(result.get(key, "")))
    tally = {"failures": 0, "errors": 0, "skipped": 0}
    names = case_names(result)
    for case_name in names:
        case = ET.SubElement(suite, "testcase", classname=name, name=case_name, time="0")
        check = checks.get(case_name)
        if case_name == RUN_CASE and stopped:
            detail = stopped.split(": ", 1)[1] if check is None else check["detail"]
            ET.SubElement(case, "error", message=_one_line(stopped),
                          type="unjudged" if result.get("verdict") == "unjudged" else "stopped").text = detail
            tally["errors"] += 1
        elif stopped:
            ET.SubElement(case, "skipped", message=_one_line(stopped))
            tally["skipped"] += 1
        elif check is None and case_name in IMPLICIT_PASS:
            ET.SubElement(case, "system-out").text = IMPLICIT_PASS[case_name]
        elif check is None:
            ET.SubElement(case, "skipped", message="not judged in this run: the checker found nothing it applies to "
                                                   "(e.g. no injection took place)")
            tally["skipped"] += 1
        elif status_of(check) == "fail":
            ET.SubElement(case, "error" if case_name == RUN_CASE else "failure", message=_one_line(check["detail"]),
                          type="run" if case_name == RUN_CASE else "check").text = check["detail"]
            tally["errors" if case_name == RUN_CASE else "failures"] += 1
        elif status_of(check) in UNDECIDED:  # it decided nothing and keeps the run from passing: an error, not a skip
            message = (check["detail"] if status_of(check) == "unjudged"
                       else f"unjudged: could not be judged: {check['detail']}")
            ET.SubElement(case, "error", message=_one_line(message), type="unjudged").text = check["detail"]
            tally["errors"] += 1
        elif status_of(check) == "not required":  # its detail says so itself
            ET.SubElement(case, "skipped", message=_one_line(check["detail"]))
            tally["skipped"] += 1
        else:
            ET.SubElement(case, "system-out").text = check["detail"]
    suite.attrib.update(tests=str(len(names)), **{k: str(v) for k, v in tally.items()})
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
