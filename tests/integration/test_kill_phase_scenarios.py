"""The driver killed at exact micro-batch phases (driver_kill `phase`), each shipped scenario run as a user runs it.
Besides the verdict, each test reads the run's own files independently of the judge: faults.jsonl (what the fault
observed frozen), the checkpoint and the sink's log as the run left them (the cut batch re-run and committed by the
successor; the file sink's log entry written once, by whom; the commit's temporary file Spark refused to start on)."""
import json

import pandas as pd
import pytest

from scenario_runs import run

pytestmark = pytest.mark.integration


def injections(out):
    return [json.loads(line) for line in (out / "faults.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["action"] == "inject"]


def passed(proc, result):
    return proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if c["ok"] is not True], indent=1) + proc.stdout[-3000:])


@pytest.mark.slow
def test_kills_after_the_offset_log_and_after_the_file_sinks_write_rerun_the_batch_exactly_once(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "crash-phases")
    ok, why = passed(proc, result)
    assert ok, why
    before, after = injections(out)
    meta, commits = out / "sink" / "_spark_metadata", out / "checkpoint" / "commits"
    # after_offsets: frozen with offsets/N there and neither the sink's log entry nor the commit; the successor
    # re-ran N: it wrote the log entry (after the kill) and committed it
    n = before["detail"]["observed"]["batch"]
    assert before["detail"]["phase"] == "after_offsets" and before["detail"]["observed"]["sink_written"] is False
    assert (meta / str(n)).stat().st_mtime > before["t"] and (commits / str(n)).exists()
    # after_sink_write: the killed driver wrote _spark_metadata/M before the kill; the successor re-ran M, the file
    # sink skipped it (the entry is the killed driver's) and committed it
    m = after["detail"]["observed"]["batch"]
    assert after["detail"]["phase"] == "after_sink_write" and after["detail"]["observed"]["sink_written"] is True
    assert (meta / str(m)).stat().st_mtime < after["t"] and (commits / str(m)).exists()
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["delivered_unique"] == c["acked"] > 0


@pytest.mark.slow
def test_a_kill_during_a_rocksdb_snapshot_upload_restarts_on_the_last_committed_state(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "state-snapshot-crash")
    ok, why = passed(proc, result)
    assert ok, why
    (kill,) = injections(out)
    observed = kill["detail"]["observed"]
    assert observed["snapshot_tmp"] and not observed["commit"]
    # the version being uploaded at the kill was uploaded again, whole, by the successor's re-run of the batch
    for tmp in observed["snapshot_tmp"]:
        part, name = (out / "checkpoint" / tmp).parent, (out / "checkpoint" / tmp).name
        version = name.split(".")[1]
        assert (part / f"{version}.zip").stat().st_mtime > kill["t"]
    assert (out / "checkpoint" / "commits" / str(observed["batch"])).exists()
    checks = {c["name"]: c["status"] for c in result["checks"]}
    assert checks["state_matches"] == checks["kill_phase"] == checks["oracle_window_counts"] == "pass"


@pytest.mark.slow
def test_a_kill_during_real_time_modes_first_commit_fails_the_restart_as_declared(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "rtm-first-commit")
    ok, why = passed(proc, result)
    assert ok, why
    (kill,) = injections(out)
    observed = kill["detail"]["observed"]
    assert observed["batch"] == 0 and observed["commit_tmp"] and not observed["commit"]
    commits = out / "checkpoint" / "commits"
    assert (commits / observed["commit_tmp"][0]).exists() and not (commits / "0").exists()  # as the kill left it
    assert result["query"]["final_state"] == "failed"
    assert "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY" in result["query"]["error"]
    checks = {c["name"]: c["status"] for c in result["checks"]}
    assert checks["expected_failure"] == checks["kill_phase"] == checks["no_loss"] == "pass"


@pytest.mark.slow
def test_kafka_sink_kills_after_the_offset_log_and_after_a_visible_write(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "kafka-sink-phases")
    ok, why = passed(proc, result)
    assert ok, why
    before, after = injections(out)
    assert before["detail"]["phase"] == "after_offsets" and before["detail"]["observed"]["sink_written"] is False
    assert after["detail"]["phase"] == "after_sink_write" and after["detail"]["observed"]["sink_written"] is True
    # the broker's own append times: at the first kill the output topic held exactly what it held at the last
    # commit (the fault's reading), nothing of the cut batch
    frame = pd.read_parquet(out / "sink" / "kafka-output.parquet")
    assert int((frame["commit_ms"] <= before["t"] * 1000).sum()) == before["detail"]["observed"]["output_at_commit"]
    c = result["counts"]
    assert c["lost"] == 0 and c["delivered_unique"] == c["acked"] > 0 and c["duplicates"] == c["expected_duplicates"]
