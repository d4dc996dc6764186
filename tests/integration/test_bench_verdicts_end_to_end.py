"""`harness bench verdicts` end to end: steady once on the quiet machine and once with a core kept busy by another
process, as a user runs it. What the verdicts are depends on the machine; what must hold is the bench's own
account of them: each run's row is its result.json's, the busy process ran for the whole run and left nothing
behind, and the exit code says whether the goal was met. The agreement and goal rules, on synthetic results:
tests/unit/test_bench_verdicts.py."""
import json
import subprocess
import sys
import uuid

import pytest

from harness.check import exit_code
from harness.supervisor import processes_with_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_steady_quiet_and_with_a_core_busy(harness_env, tmp_path):
    out, token = tmp_path / "bench", uuid.uuid4().hex
    argv = [sys.executable, "-m", "harness", "bench", "verdicts", "steady", "--runs", "1", "--busy-cores", "1",
            "--set", "producers.duration_s=20", "--out", str(out)]
    proc = subprocess.run(argv, env=harness_env | {"HARNESS_TEST_TOKEN": token}, capture_output=True, text=True,
                          timeout=1200)
    print(proc.stdout)  # the table, for the record
    summary = json.loads((out / "bench.json").read_text())
    assert [(r["run"], r["mode"]) for r in summary["runs"]] == [("01-quiet", "quiet"), ("01-busy", "busy 1")]
    for r in summary["runs"]:
        result = json.loads((out / r["run"] / "result.json").read_text())
        assert r["verdict"] == result["verdict"] and r["exit_code"] == exit_code(result["verdict"])
        assert r["figures"]["offered_eps"] == result["sustain"]["offered_eps"]
        assert r["figures"]["first_data_batch_s"] == result["startup"]["first_data_batch_from_run_start_s"]
    busy, busy_run = summary["runs"][1]["busy"], json.loads((out / "01-busy" / "result.json").read_text())
    # the busy process lived through the whole run, and its spinner took a real part of a core meanwhile (on this
    # shared 2-core machine, with other jobs' tests running, it once had 31% of one: 47 CPU s in 150 s)
    assert busy["cores"] == 1 and busy["wall_s"] >= busy_run["duration_s"] and busy["cpu_s"] > 0.15 * busy["wall_s"]
    # the run counted it as another process's CPU
    assert busy_run["machine"]["other_cpu_s"] > 0
    assert proc.returncode == (0 if summary["goal"]["met"] else 1), proc.stderr[-3000:]
    assert [a["line"].split(":")[0] for a in summary["agreement"]] == ["quiet", "busy 1"]
    assert "quiet: 1/1" in proc.stdout and "01-busy" in proc.stdout and (out / "bench.md").is_file()
    assert processes_with_env("HARNESS_TEST_TOKEN", token) == []
