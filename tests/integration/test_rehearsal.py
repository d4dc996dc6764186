"""Change rehearsals end to end, as a user runs them (`harness rehearse`): a real broker, the query stopped and
started again with a change on its live checkpoint while the traffic goes on, the rows checked against what Spark
documents and does. The expected outcomes are written out here by hand; the checkpoint's own files are read to
confirm the settings in force, independently of the harness's measuring step."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

SHUFFLE = "shuffle partitions 4 to 8"


def rehearse(harness_env, out, *only, timeout=900):
    argv = [sys.executable, "-m", "harness", "rehearse", "spark-changes", "--out", str(out), "--quiet"]
    for name in only:
        argv += ["--only", name]
    proc = subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=timeout)
    return proc, json.loads((out / "rehearsal.json").read_text())


def offset_log_conf(run_dir, batch: int) -> dict:
    lines = (run_dir / "checkpoint" / "offsets" / str(batch)).read_text().splitlines()
    return json.loads(lines[1])["conf"]


@pytest.mark.slow  # 100 s; the same row runs in the matrix below, and change-shuffle-partitions in the catalogue's
def test_a_shuffle_partitions_change_restarts_and_the_checkpoint_keeps_its_own(harness_env, tmp_path):
    """Spark documents spark.sql.shuffle.partitions as not to be changed on a checkpoint, and neither refuses nor
    applies a change: every batch after the restart still runs with 4 (its offset log says so), the windowed
    count stays exactly right and the state is carried. The row is a finding: not refused, silently ignored."""
    proc, summary = rehearse(harness_env, tmp_path / "r", SHUFFLE)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (row,) = summary["rows"]
    assert (row["name"], row["verdict"], row["restarted"], row["exactly_once"], row["state"]) == (
        SHUFFLE, "pass", True, "held", "carried")
    assert row["settings"] == "spark.sql.shuffle.partitions = 8 not taken (4 in force)"
    assert row["finding"] == ("documented as not allowed, yet Spark restarted and kept the checkpoint's "
                              "spark.sql.shuffle.partitions silently")
    run_dir = tmp_path / "r" / "00-shuffle_partitions_4_to_8"
    result = json.loads((run_dir / "result.json").read_text())
    (change,) = result["changes"]
    fault = next(f for f in result["faults"] if f["kind"] == "change")
    after = [b for b in sorted(int(p.name) for p in (run_dir / "checkpoint" / "offsets").iterdir() if p.name.isdigit())
             if b > fault["detail"]["inject_at_stop"]["offset_log_last"]]
    assert after and all(offset_log_conf(run_dir, b)["spark.sql.shuffle.partitions"] == "4" for b in after)
    job = json.loads((run_dir / "spark" / "job.json").read_text())  # phase B's driver was given 8
    assert job["conf"]["spark.sql.shuffle.partitions"] == "8"
    assert change["restarted"] and change["batches_after"] >= len(after) - 1
    html = (tmp_path / "r" / "rehearsal.html").read_text()
    assert "<tr class=\"finding\">" in html and SHUFFLE in html
    assert "| " + SHUFFLE + " | not allowed | yes" in (tmp_path / "r" / "rehearsal.md").read_text()


# What Spark 4.3 does with each change of the shipped matrix, written out by hand: restarted (True) or the error
# class it refused with; each changed setting in force (True), kept by the checkpoint (False) or not measured (None).
EXPECTED = {
    "filter added": (True, {}),
    "column added": (True, {}),
    "rate limit added": (True, {"source_options.maxOffsetsPerTrigger": True}),
    "grouping key added": ("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", {}),
    "aggregation to deduplication": ("STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", {}),
    SHUFFLE: (True, {"spark.sql.shuffle.partitions": False}),
    "state store HDFS to RocksDB": (True, {"spark.sql.streaming.stateStore.providerClass": False}),
    "changelog checkpointing on": (True, {
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": True}),
    "state encoding to Avro": ("_LEGACY_ERROR_TEMP_3102", {}),  # refused at start: not for an aggregation
    "checkpoint format version 2": (True, {"spark.sql.streaming.stateStore.checkpointFormatVersion": False}),
    "Event Hubs AMQP to Kafka endpoint": (True, {"source_options.maxOffsetsPerTrigger": True}),
    "Spark 3.5 to 4.3": (True, {}),
    "Spark 4.0 to 4.3": (True, {}),
    "Spark 4.3 to 3.5": (True, {}),  # a downgrade: Spark documents none; a windowed count on HDFS state goes on
    # a micro-batch checkpoint is state checkpoint format v1, which real-time mode refuses
    "micro-batch to real-time mode": ("STREAMING_REAL_TIME_MODE.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED", {}),
    # transformWithState's state schema evolves with the Avro encoding only
    "transformWithState field added (Avro)": (True, {}),
    "transformWithState field added (UnsafeRow)": ("STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE", {}),
}
SPARK = {"Spark 3.5 to 4.3": ["3.5.7", "4.3.0"], "Spark 4.0 to 4.3": ["4.0.1", "4.3.0"],
         "Spark 4.3 to 3.5": ["4.3.0", "3.5.7"]}  # which Spark ran before and after, from the drivers' own marks


@pytest.mark.slow
@pytest.mark.timeout(5700)  # seventeen runs of one to two minutes each
def test_the_shipped_matrix_does_what_spark_does(harness_env, tmp_path):
    proc, summary = rehearse(harness_env, tmp_path / "m", timeout=5400)
    rows = {r["name"]: r for r in summary["rows"]}
    assert proc.returncode == 0, proc.stdout[-6000:]
    for name, (outcome, settings) in EXPECTED.items():
        row = rows[name]
        assert row["verdict"] == "pass", (name, row)
        if outcome is True:
            assert row["restarted"] and row["exactly_once"] == "held", (name, row)
        else:
            assert not row["restarted"] and row["refused_with"] == outcome, (name, row)
        result = json.loads((tmp_path / "m" / row["run_dir"].split("/")[-1] / "result.json").read_text())
        measured = {s["setting"]: s["taken"] for c in result["changes"] for s in c["settings"]}
        assert {k: measured.get(k) for k in settings} == settings, (name, measured)
        if name in SPARK:
            assert result["changes"][0]["spark"] == SPARK[name], (name, row)
        if name in SPARK or name == "transformWithState field added (Avro)":
            assert row["state"] == "carried", (name, row)  # at the change and at the end, key by key
    assert set(EXPECTED) <= set(rows)
