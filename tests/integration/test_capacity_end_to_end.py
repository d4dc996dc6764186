"""`harness capacity` end to end on the real pipeline: two short trials of `steady`, capacity.json's structure, and
the rates it reports as offered are the ones the trials' own result.json measured. A 5 s trigger, because on this
2-core machine a batch of `steady` takes 2-3 s whatever the rate, so with its own 1 s trigger the start rate
fails and the search stops after one trial. Each trial starts its own broker and Spark (about 80 s here), so two
are over the 2 minutes a test of `make test` may take: this is `make test-slow`."""
import json
import subprocess
import sys

import pytest

from harness.commands import capacity as cap

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_two_trials_of_steady(harness_env, tmp_path):
    out = tmp_path / "cap"
    argv = [sys.executable, "-m", "harness", "capacity", "steady", "--out", str(out), "--max-trials", "2",
            "--trial-s", "10", "--start-eps", "500", "--set", "producers.warmup_s=20",
            "--set", 'spark.trigger.interval="5 seconds"', "--quiet"]
    proc = subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    saved = json.loads((out / "capacity.json").read_text())
    assert proc.stdout.strip().splitlines()[-1] == saved["summary"]
    assert saved["scenario"] == "steady" and saved["settings"]["trial_s"] == 10 and saved["settings"]["warmup_s"] == 20
    assert set(saved["thresholds"]) == {"producer_rate", "sustained", "headroom", "latency_p99", "checks"}
    assert saved["thresholds"]["sustained"]["trigger_interval_ms"] == 5000.0
    # no checks.min_headroom in steady: the batch p50 is recorded against the 5 s trigger, not a criterion
    assert saved["thresholds"]["headroom"] == {"required": False, "min_idle_fraction": None,
                                               "batch_p50_max_ms": 5000.0}
    assert saved["thresholds"]["latency_p99"] == {"max_ms": 15000.0, "from": "default: 3 x the trigger interval"}
    trials = saved["trials"]
    assert [t["rate_eps"] for t in trials] == ([500, 1000] if trials[0]["verdict"] == "sustained" else [500])
    for t in trials:
        assert t["verdict"] in ("sustained", "failed") and set(t["criteria"]) == set(cap.CRITERIA)
        result = json.loads((out / t["run_dir"] / "result.json").read_text())
        scenario = json.loads((out / t["run_dir"] / "scenario.json").read_text())["resolved"]
        assert scenario["producers"]["rate"] == {"kind": "constant", "eps": t["rate_eps"]}
        assert scenario["producers"]["duration_s"] == 10 and scenario["producers"]["warmup_s"] == 20
        assert not scenario["sweep"]
        # the rate capacity.json says was offered is the trial's own measurement, and it is the asked rate
        offered = t["criteria"]["producer_rate"]
        assert offered["value"] == result["throughput"]["produce_eps"]
        assert offered["pacer_skipped"] == result["counts"]["pacer_skipped"]
        if offered["ok"]:
            assert abs(result["throughput"]["produce_eps"] - t["rate_eps"]) <= 0.02 * t["rate_eps"]
        assert t["criteria"]["latency_p99"]["value"] == result["latency_ms"]["p99"]
        assert t["criteria"]["checks"]["ok"] == (result["verdict"] == "pass")
        room = t["criteria"]["headroom"]
        assert room["status"] == "not required" and room["value"] == result["sustain"]["batch_p50_ms"]
    if saved["verdict"] == "pass":
        assert saved["capacity_eps"] in [t["rate_eps"] for t in trials if t["verdict"] == "sustained"]
    else:
        assert all(t["verdict"] == "failed" for t in trials) and "every rate down to" in saved["summary"]
    assert (out / "capacity.md").read_text().startswith("# Capacity: steady")
