"""Issue 32: matplotlib is the `plots` extra. Without it a run is judged and its reports are written as before, with
every table; where the figures would be, the page says in one line why there are none and what to install.

The machine without matplotlib is this interpreter with the package made invisible before the harness is imported
(tests/missing_packages.py), so the whole `harness check` runs as it would there."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from missing_packages import WITHOUT

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runs"
INSTALL = "pip install 'spark-stream-harness[plots]'"


def _check(run_dir: Path, gone: tuple[str, ...]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT.format(gone=set(gone)), "check", str(run_dir)], cwd=ROOT,
                          text=True, capture_output=True, timeout=300)


def test_without_matplotlib_a_run_is_judged_the_same_and_its_page_says_why_it_has_no_figures(tmp_path):
    drawn, bare = tmp_path / "drawn", tmp_path / "bare"
    for run_dir in (drawn, bare):
        shutil.copytree(FIXTURES / "steady", run_dir)
    with_plots, without = _check(drawn, gone=()), _check(bare, gone=("matplotlib",))
    assert "Traceback" not in without.stderr, without.stderr
    assert without.returncode == with_plots.returncode
    results = [json.loads((d / "result.json").read_text()) for d in (drawn, bare)]
    assert results[0]["verdict"] == results[1]["verdict"]
    assert [c["status"] for c in results[0]["checks"]] == [c["status"] for c in results[1]["checks"]]
    page, plain = (drawn / "report.html").read_text(), (bare / "report.html").read_text()
    assert len(re.findall(r'<figure class="chart"', page)) >= 5 and INSTALL not in page
    assert 'class="chart"' not in plain and INSTALL in plain and re.search(r"\b0 figures\b", plain)
    for heading in ("<h2>Checks</h2>", "<h2>Accounting</h2>", "<h2>Throughput</h2>", "<h2>Environment</h2>"):
        assert heading in plain
    md = [(d / "report.md").read_text().replace(str(d), "RUN_DIR") for d in (drawn, bare)]
    assert md[0] == md[1]


def test_compare_and_capacity_pages_say_it_too(monkeypatch):
    from harness.reports import charts
    from harness.reports.capacity_html import capacity_html

    monkeypatch.setattr(charts, "matplotlib", None)
    trial = {"rate_eps": 1000.0, "verdict": "sustained", "limiting_factor": None, "detail": "", "run_dir": "r",
             "criteria": {"latency_p99": {"value": 900.0, "limit": 5000.0, "status": "pass", "ok": True}}}
    page = capacity_html({"scenario": "steady", "verdict": "pass", "summary": "1,000 events/s", "trials": [trial]})
    assert INSTALL in page and 'class="chart"' not in page and "0 figures" in page
