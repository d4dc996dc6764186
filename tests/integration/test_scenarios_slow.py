"""Every shipped scenario at full length must pass (`make test-slow`; minutes each)."""
import json
import subprocess
import sys

import pytest

from harness.files.paths import SCENARIOS_DIR

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS_DIR.glob("*.toml")))
def test_scenario_passes_at_full_length(name, harness_env, tmp_path):
    out = tmp_path / name
    proc = subprocess.run([sys.executable, "-m", "harness", "run", name, "--out", str(out)], env=harness_env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-5000:]
    if (out / "sweep.json").exists():  # a sweep: every run of it
        sweep = json.loads((out / "sweep.json").read_text())
        assert sweep["verdict"] == "pass" and len(sweep["runs"]) == sweep["planned"] > 1
        results = [json.loads((out / r["run_dir"] / "result.json").read_text()) for r in sweep["runs"]]
        # one broker for the sweep when its runs cannot tell (harness.commands.shared_broker), each result naming
        # it and its turn on it; else sweep.json says why each run started its own
        if sweep["broker"]["shared"]:
            assert len({r["backend_info"]["shared"]["cluster_id"] for r in results}) == 1
            assert [r["backend_info"]["shared"]["run_on_it"] for r in results] == list(range(1, len(results) + 1))
        else:
            assert sweep["broker"]["why_not"] and not any("shared" in r["backend_info"] for r in results)
    else:
        results = [json.loads((out / "result.json").read_text())]
    for result in results:
        assert result["verdict"] == "pass"
        c = result["counts"]
        assert c["lost"] == 0 and c["duplicates"] == 0
        if not result["faults"]:  # clean traffic: everything through exactly once, at the exact rate
            # (one sink row per event only under the events oracle; another oracle's verdict is above)
            assert c["delivered_unique"] == c["acked"] > 0 or result["query"]["oracle"] != "events"
            assert result["producers"]["rate"]["achieved_over_target"] > 0.999
        else:  # each fault scenario's own outcome is asserted by its own test; here: it happened and was judged
            assert all(f["injected_at"] and f["healed_at"] and not f["errors"] for f in result["faults"])


def test_steady_on_two_executor_jvms(harness_env, tmp_path):
    out = tmp_path / "lc"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "steady", "--out", str(out), "--set",
                           'spark.master="local-cluster[2,1,1024]"', "--set", "producers.duration_s=30"],
                          env=harness_env, capture_output=True, text=True, timeout=1800)
    result = json.loads((out / "result.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    # Spark's Kafka source prefers an executor per partition (hash of the topic partition): in the event log
    # every partition was read, on both executor JVMs
    placement = result["placement"]
    assert placement["executors"] == ["0", "1"] and placement["partition_known"] == 1.0
    assert len(placement["partitions"]) == 8
