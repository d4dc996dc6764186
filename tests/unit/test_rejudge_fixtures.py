"""Recorded runs re-judge to exactly what they were judged when they ran.

`tests/fixtures/runs/<name>/` are real run directories (the broker's data, the rendered reports and Spark's
scratch files left out), recorded before the judge was reshaped into checkers: `<name>.result.json` and
`<name>.series.json` beside each are what the harness wrote then, but for checks whose meaning changed since
(`sustained` no longer judges a processing-time batch's length; `headroom` lists it: their entries are the rule's
new reading of the same recorded figures). `harness check` on a copy (a moved run
directory whose files lost their modification times, as git or `cp -r` copies them) must give the same checks (name, outcome, detail; their order in the list is presentation), the same
counts and the same figures. Between them
they cover the events oracle, a user's oracle (stateful: windowed counts), driver kills, a declared failure
(eh-ageout), declared loss a source reports as gaps (eh-ageout-lenient), Kafka and Event Hubs.
"""
import json
import os
import shutil
from pathlib import Path

import pytest

from harness.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
RUNS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
NOT_FIGURES = {"run_dir", "versions"}  # where the copy lies, and the Python it was judged with
ADDED_SINCE: set[str] = set()  # checks the judge gained after the recording: each has its own tests
# checks whose input the recorded runs never wrote (state/, from the state reader): listed as not required, saying so
NOT_RECORDED_THEN = {"state_matches"}
# series the measuring step gained after the recording: the processes' memory and CPU and the run directory's
# size over time, which the HTML report computed from resources.jsonl itself before
SERIES_ADDED_SINCE = {"resources", "disk"}


def test_every_recorded_run_is_here():
    assert RUNS == ["crash-recovery", "eh-ageout", "eh-ageout-lenient", "stateful", "steady"]


@pytest.mark.parametrize("name", RUNS)
def test_a_recorded_run_rejudges_the_same(name, tmp_path, capsys):
    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / name, run_dir)
    for path in run_dir.rglob("*"):  # copied as git or `cp -r` copy: no file keeps its modification time
        os.utime(path, (1_000_000_000, 1_000_000_000))
    recorded = json.loads((FIXTURES / f"{name}.result.json").read_text())
    code = main(["check", str(run_dir)])
    assert code == {"pass": 0, "fail": 1, "unjudged": 3}[recorded["verdict"]], capsys.readouterr()
    now = json.loads((run_dir / "result.json").read_text())
    by_name = {c["name"]: (c["ok"], c["detail"]) for c in now["checks"]}
    assert len(by_name) == len(now["checks"])  # one check per name
    assert all(c["status"] == "not required" and "without the state reader" in c["detail"]
               for c in now["checks"] if c["name"] in NOT_RECORDED_THEN)
    assert {k: v for k, v in by_name.items() if k not in ADDED_SINCE | NOT_RECORDED_THEN} == \
        {c["name"]: (c["ok"], c["detail"]) for c in recorded["checks"]}
    assert all(by_name[k][0] for k in by_name.keys() & ADDED_SINCE)  # the recorded runs passed them too
    assert now["counts"] == recorded["counts"]
    for key in sorted(set(recorded) - NOT_FIGURES - {"checks"}):
        assert now.get(key) == recorded[key], key
    series = json.loads((run_dir / "series.json").read_text())
    assert {k: v for k, v in series.items() if k not in SERIES_ADDED_SINCE} == \
        json.loads((FIXTURES / f"{name}.series.json").read_text())
    roles = {p["role"] for line in (run_dir / "resources.jsonl").read_text().splitlines()
             for p in json.loads(line)["procs"]}
    assert set(series["resources"]["rss"]) == roles and series["disk"]["t"]
    report = (run_dir / "report.md").read_text()
    assert ("## Recovery per fault" in report) == bool(now["recovery"]) and "## Steady state and start-up" in report


def test_a_short_run_cannot_be_judged_on_keeping_up_unless_it_says_so(tmp_path):
    """The steady recording has 6 s of traffic, all start-up: without its declaration `sustained` is unknown and
    the run unjudged (exit 3, `unjudged_reason` naming it), never a pass nor a failure of the query; the
    recording declares it not required."""
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    scenario = json.loads((run_dir / "scenario.json").read_text())
    del scenario["resolved"]["checks"]["sustained_not_required"]
    (run_dir / "scenario.json").write_text(json.dumps(scenario))
    assert main(["check", str(run_dir)]) == 3
    now = json.loads((run_dir / "result.json").read_text())
    sustained = next(c for c in now["checks"] if c["name"] == "sustained")
    assert sustained["status"] == "unknown" and "MSER-5 needs at least 20" in sustained["detail"]
    assert now["verdict"] == "unjudged" and now["unjudged_reason"].startswith("could not be judged: sustained (")
    assert "MSER-5 needs at least 20" in now["unjudged_reason"]


def test_a_rejudge_applies_the_baselines_thresholds_again(tmp_path, capsys):
    """`harness check RUN_DIR --baseline DIR` re-applies harness compare's thresholds after the re-judge: the
    crash-recovery run against the steady one moved its p99 far past +20%; a copy of the steady one moved nothing."""
    for name in ("steady", "crash-recovery"):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    shutil.copytree(FIXTURES / "steady", tmp_path / "steady-again")
    assert main(["check", str(tmp_path / "steady")]) == 0  # the baseline's result.json
    assert main(["check", str(tmp_path / "crash-recovery"), "--baseline", str(tmp_path / "steady"),
                 "--fail-on", "p99=+20%"]) == 1
    checks = {c["name"]: c for c in json.loads((tmp_path / "crash-recovery" / "result.json").read_text())["checks"]}
    assert checks["baseline"]["ok"] is False and "p99 moved +" in checks["baseline"]["detail"]
    assert main(["check", str(tmp_path / "steady-again"), "--baseline", str(tmp_path / "steady")]) == 0
    result = json.loads((tmp_path / "steady-again" / "result.json").read_text())
    assert [c["ok"] for c in result["checks"] if c["name"] == "baseline"] == [True]
    capsys.readouterr()
    assert main(["check", str(tmp_path / "steady"), "--fail-on", "p99=+1%"]) == 2
    assert "--fail-on needs --baseline" in capsys.readouterr().err
