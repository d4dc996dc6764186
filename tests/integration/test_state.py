"""State, Spark 4 style, against real Spark and a real broker: the transformWithStateInPandas sessions job under a
driver kill, its final state read back from the checkpoint with Spark's state data source (state/) and judged
(`state_matches`), a state file tampered with after the run failing that check, and a state file removed from
the checkpoint while the query is down failing the restart with Spark's own error, as the fault declared.

Expected values come from Spark's own files (the sink's Parquet, the state reader's rows, the error Spark
raised) and the raw ack logs, never from harness.oracles: every acked event is either in an emitted session's
count or in an open session's ListState, exactly once."""
import json
import shutil
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.records.history import load_acks

from scenario_runs import run

pytestmark = pytest.mark.integration


def sink_rows(out) -> pd.DataFrame:
    """Every row of the Parquet files the sink's own log lists (a killed batch may leave an unlisted, empty one)."""
    files = []
    logs = [p for p in (out / "sink" / "_spark_metadata").iterdir() if p.name.split(".")[0].isdigit()]
    for log in sorted(logs, key=lambda p: int(p.name.split(".")[0])):
        for line in log.read_text().splitlines()[1:]:
            files.append(json.loads(line)["path"].removeprefix("file://"))
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True) if files else pd.DataFrame()


def state_rows(out, store: str) -> list[dict]:
    meta = json.loads((out / "state" / "meta.json").read_text())
    entry = next(s for s in meta["stores"] if s["store"] == store)
    frame = pd.read_parquet(out / "state" / entry["file"])
    return [{c: (json.loads(v)[c] if c != "partition_id" else v) for c, v in row.items()}
            for row in frame.to_dict("records")]


@pytest.mark.slow  # `make test-slow` (nightly): 86 s; the catalogue runs sessions-crash, judged on its state
def test_sessions_survive_a_driver_kill_and_their_open_state_is_read_back(harness_env, tmp_path):
    out = tmp_path / "sessions"
    proc, result = run(harness_env, out, "sessions-crash", "producers.duration_s=14", "faults.0.at_s=6")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["query"]["kills"] == 1 and result["query"]["restarts"] == 1
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["oracle_sessions"]["status"] == "pass" and checks["state_matches"]["status"] == "pass"
    oracle = result["oracle"]
    assert oracle["sessions_emitted"] > 0 and oracle["sessions_open"] > 0  # both halves judged, neither empty

    # conservation, from Spark's files alone: each acked event is counted once, in an emitted session or in an
    # open session's ListState, and the ListState holds acked event ids only, each once
    acks = load_acks(out / "producers")
    acked = {(int(p), int(s)) for p, s, e in zip(acks["producer"], acks["seq"], acks["error"]) if e == ""}
    emitted = sink_rows(out)
    listed = [(int(r["list_element"]["producer"]), int(r["list_element"]["seq"])) for r in state_rows(out, "events")]
    assert len(listed) == len(set(listed)) and set(listed) <= acked
    assert int(emitted["count"].sum()) + len(listed) == len(acked)
    assert (emitted["count"] == emitted["listed"]).all()  # each closed session's ListState held its events
    sessions = state_rows(out, "session")
    assert len(sessions) == oracle["sessions_open"] == len(state_rows(out, "timers"))
    # each open session's one timer is at its end + gap (3 s), as registered
    ends = {r["key"]["key"]: r["value"]["end_ms"] for r in sessions}
    assert all(r["expiration_timestamp_ms"] == ends[r["key"]["key"]] + 3000 for r in state_rows(out, "timers"))
    meta = json.loads((out / "state" / "meta.json").read_text())
    assert meta["batch_id"] == max(int(p.name) for p in (out / "checkpoint" / "commits").iterdir()
                                   if p.name.isdigit())

    # the same run re-judged from a copy whose state lost one event's id: state_matches fails, naming the store
    copy = tmp_path / "tampered"
    shutil.copytree(out, copy)
    entry = next(s for s in meta["stores"] if s["store"] == "events")
    frame = pd.read_parquet(copy / "state" / entry["file"])
    frame.iloc[1:].to_parquet(copy / "state" / entry["file"], index=False)
    rejudge = subprocess.run([sys.executable, "-m", "harness", "check", str(copy)], env=harness_env,
                             capture_output=True, text=True, timeout=300)
    again = {c["name"]: c for c in json.loads((copy / "result.json").read_text())["checks"]}
    assert rejudge.returncode == 1 and again["state_matches"]["status"] == "fail"
    assert "events ListState" in again["state_matches"]["detail"]
    assert again["oracle_sessions"]["status"] == "pass"  # the output itself was not touched


@pytest.mark.slow
def test_a_state_file_removed_while_the_query_is_down_fails_the_restart_as_declared(harness_env, tmp_path):
    out = tmp_path / "tamper"
    proc, result = run(harness_env, out, "stateful-rocksdb-tamper", "producers.duration_s=25")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    (fault,) = result["faults"]
    removed = fault["detail"]["inject_removed"]
    assert len(removed) == 1 and removed[0].endswith(".changelog")  # changelog checkpointing is on
    assert not (out / "checkpoint" / removed[0]).exists()
    # Spark's own words: the file it could not read is the one removed
    assert "CANNOT_LOAD_STATE_STORE" in result["query"]["error"] and removed[0] in result["query"]["error"]
    checks = {c["name"]: c["status"] for c in result["checks"]}
    assert checks["expected_failure"] == "pass" and checks["state_matches"] == "not required"


@pytest.mark.slow
def test_a_windowed_count_on_rocksdb_with_changelogs_survives_two_kills_with_its_state(harness_env, tmp_path):
    out = tmp_path / "rocksdb"
    proc, result = run(harness_env, out, "stateful-rocksdb", "producers.duration_s=30")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["query"]["kills"] == 2
    assert list((out / "checkpoint" / "state" / "0" / "0").glob("*.changelog"))  # really changelog checkpointing
    windows = state_rows(out, "default")
    emitted = sink_rows(out)
    # the state holds windows only the sink has not written, and the two hold every acked event between them
    starts = {pd.Timestamp(next(iter(r["key"].values()))["start"]).value // 1_000_000 for r in windows}
    assert not starts & \
        set(emitted["window_start_ms"].astype("int64"))
    acks = load_acks(out / "producers")
    assert int(emitted["count"].sum()) + sum(int(r["value"]["count"]) for r in windows) == int((acks["error"] == "").sum())
