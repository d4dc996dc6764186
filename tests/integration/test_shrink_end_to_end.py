"""`harness shrink` end to end: a deliberately broken query (tests/fixtures/shrink/pause_then_restart.py drops events
only when restarted after its driver was frozen) fails under a schedule of three injections; shrink re-runs the
scenario and must find exactly the two that make the failure, the pause and the later kill. The expected minimum
comes from how the query was written, not from the shrink: and each trial's verdict is checked against it."""
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scenario_runs import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCENARIO = Path(__file__).resolve().parent.parent / "fixtures" / "shrink" / "scenario.toml"


@pytest.mark.timeout(2400)
def test_shrink_reduces_the_schedule_to_the_pause_and_the_kill(harness_env, tmp_path):
    proc, result = run(harness_env, tmp_path / "run", str(SCENARIO), timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    failing = {c["name"] for c in result["checks"] if c["status"] == "fail"}
    assert "no_loss" in failing, result["checks"]
    assert sorted(f["kind"] for f in result["faults"]) == ["delete_records", "driver_kill", "pause"]

    argv = [sys.executable, "-m", "harness", "shrink", str(tmp_path / "run"), "--check", "no_loss",
            "--max-runs", "8", "--out", str(tmp_path / "shrink")]
    done = subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=2100)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "shrink" / "shrink.json").read_text())
    assert summary["outcome"] == "minimal", summary
    assert [label.split("@")[0] for label in summary["minimal"]] == ["pause", "driver_kill"]

    def needed(trial):  # the query's bug: a pause, then a restart after it
        kinds = [label.split("@")[0] for label in trial["injections"]]
        return "pause" in kinds and "driver_kill" in kinds

    for trial in summary["trials"]:
        assert trial["reproduced"] == needed(trial), trial
    minimal = tomllib.loads((tmp_path / "shrink" / "minimal.toml").read_text())
    assert [(f["kind"], f["at_s"]) for f in minimal["faults"]] == [("pause", 8.0), ("driver_kill", 20.0)]
    assert minimal["seed"] == 11 and minimal["spark"]["query"] == "pause_then_restart:build"
