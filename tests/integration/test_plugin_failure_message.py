"""A failing scenario inside someone's pytest session (pytester, in a subprocess: the plugin from the installed
package): the test fails with the failed check, its detail and the report path, and that report is kept."""
import json
import re
from pathlib import Path

import pytest

# about a minute on a quiet machine (one run's start, drain and verdict), two under load; the message itself is
# unit-tested (tests/unit/test_pytest_plugin.py), and the example project's test runs the plugin end to end
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_failing_run_names_its_failed_check_and_its_report(pytester):
    pytester.makepyfile(test_tight="""
        def test_latency_bound_too_tight(harness_run):
            # max_busy_share = 1: failed however busy the machine (a busy one would leave latency_p99 unjudged)
            result = harness_run("steady", producers={"duration_s": 2}, checks={"latency_p99_ms": 1,
                                                                                "max_busy_share": 1})
            result.assert_passed()
    """)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=400)
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "verdict FAIL" in out
    failed = re.findall(r"^\s*- (\w+): (.*)$", out, re.M)
    assert [name for name, _ in failed] == ["latency_p99"], out[-4000:]
    assert "(limit 1.0 ms)" in failed[0][1]
    report = Path(re.search(r"report: (\S+report\.html) \(", out).group(1))
    assert report.is_file() and (report.parent / "report.md").is_file()  # a failed test keeps its runs
    result = json.loads((report.parent / "result.json").read_text())
    assert result["verdict"] == "fail"
    assert [c["name"] for c in result["checks"] if not c["ok"]] == ["latency_p99"]
    assert result["latency_ms"]["p99"] > 1.0
    assert "pytest_plugin.py" not in out  # no traceback into the plugin: the message is the whole story
