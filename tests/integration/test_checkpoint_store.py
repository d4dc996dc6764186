"""The checkpoint on the S3 store end to end: the real S3A connector writing the checkpoint and the Parquet sink to
moto through the proxy, the checkpoint_storage faults acting on those writes, the bucket copied into the run
directory, and a copy of that directory re-judged alike (`harness check`). Whole scenarios: `make test-slow`."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.integration.scenario_runs import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORRECTNESS = ("drained", "no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries",
               "faults_applied", "checkpoint_storage")


def statuses(result: dict) -> dict:
    """Each check's status; `completed` is listed only when the run did not complete."""
    got = {c["name"]: c["status"] for c in result["checks"]}
    assert got.get("completed", "pass") == "pass", got
    return got


def timeline(out, event: str) -> dict:
    rows = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    return next(r for r in rows if r.get("event") == event)


@pytest.mark.timeout(1200)
def test_the_checkpoint_on_s3_is_slowed_and_throttled_and_exactly_once_holds(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "checkpoint-s3", timeout=1100)
    got = statuses(result)
    # correctness is judged on any machine; the times (checkpoint_cost, sustained) may be set aside when it is busy
    assert {n: got.get(n) for n in CORRECTNESS} == dict.fromkeys(CORRECTNESS, "pass"), proc.stdout[-5000:]
    assert result["verdict"] in ("pass", "unjudged") and got["checkpoint_cost"] in ("pass", "unjudged"), \
        proc.stdout[-5000:]
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["delivered_unique"] == c["acked"] > 0

    # the checkpoint and the sink were written to the store, through its proxy, by S3A, and copied out
    requests = [json.loads(line) for line in (out / "services" / "objstore" / "requests.jsonl").read_text()
                .splitlines()]
    puts = {r["key"] for r in requests if r["method"] == "PUT" and r["status"] == 200}
    offsets = sorted(p.name for p in (out / "checkpoint" / "offsets").iterdir())
    assert offsets and all(f"/harness/checkpoint/offsets/{n}" in puts for n in offsets)
    assert any(k.startswith("/harness/sink/part-") for k in puts)
    assert any(r.get("throttled") and r["status"] == 503 for r in requests)
    proxy = json.loads((out / "services" / "objstore-proxy" / "stats.json").read_text())
    assert proxy["accepted"] >= len(requests) - sum(1 for r in requests if r.get("throttled")) > 0
    faults = result["faults"]
    assert [f["detail"]["inject_mode"] for f in faults] == ["latency", "throttle"]
    assert faults[1]["detail"]["heal_since_inject"]["throttled"] > 0

    # the store and its proxy ended with the run
    ready = timeline(out, "objstore_ready")
    for pid in (ready["pid"], ready["proxy_pid"]):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)

    # a copy of the run directory (no store any more) is judged alike
    copy = tmp_path / "copied"
    shutil.copytree(out, copy)
    check = subprocess.run([sys.executable, "-m", "harness", "check", str(copy)], env=harness_env,
                           capture_output=True, text=True, timeout=600)
    again = statuses(json.loads((copy / "result.json").read_text()))
    assert {n: again.get(n) for n in CORRECTNESS} == dict.fromkeys(CORRECTNESS, "pass"), check.stdout[-3000:]


@pytest.mark.timeout(1200)
def test_async_progress_tracking_keeps_the_checkpoint_latency_off_the_batches(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "checkpoint-s3-async", timeout=1100)
    got = statuses(result)
    assert {n: got.get(n) for n in CORRECTNESS} == dict.fromkeys(CORRECTNESS, "pass"), proc.stdout[-5000:]
    assert result["verdict"] in ("pass", "unjudged"), proc.stdout[-5000:]
    # the latency met checkpoint requests (the store saw them while it was on), and the batches did not wait
    (fault,) = result["faults"]
    assert fault["detail"]["heal_since_inject"]["requests"] > 0
    storage = next(c for c in result["checks"] if c["name"] == "checkpoint_storage")
    assert "progress is tracked asynchronously" in storage["detail"]
    assert (out / "checkpoint" / "commits").is_dir()
