"""The examples of users' jobs (examples/jobs/) run as a team runs them, through the pytest plugin's harness_run:
each under its faults with its own oracle, and each oracle shown failing on a job that gets it wrong under the
same faults. Expected figures come from the ack logs, the broker's records of the faults, the checkpoint and the
table itself, read here directly, never from the oracles' own output alone.

Only the upsert's one-kill run is in `make test`; the others are `slow` (`make test-slow`)."""
import sqlite3
from pathlib import Path

import pytest

from harness.records.history import load_acks
from harness.pytest_plugin import assert_passed

pytestmark = pytest.mark.integration

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"
# the upsert shortened to one kill, held after the write of the first batch planned from 8 s on (driver_kill's
# after_sink_write), so it lands between the table's commit and Spark's however busy the machine is
# exactly-once under the kill is the point; 20 s with a kill at 8 s leaves too little steady traffic to judge
# keeping up, so the shortened run says so (SHORT)
SHORT = {"sustained_not_required": "shortened to test exactly-once: too little steady traffic to judge keeping up"}
ONE_KILL = {"producers": {"duration_s": 20}, "checks": SHORT,
            "faults": [{"kind": "driver_kill", "at_s": 8, "after_sink_write": True, "mid_batch_timeout_s": 30}]}


def acked_ids(run_dir: Path) -> set[tuple[int, int]]:
    acks = load_acks(run_dir / "producers")
    ok = acks[acks["error"] == ""]
    return set(zip(ok["producer"].astype(int), ok["seq"].astype(int)))


def kills(result) -> list[dict]:
    return [f for f in result.faults if f.kind == "driver_kill"]


@pytest.mark.slow  # `make test-slow`: its oracle is tests/unit/test_job_examples_oracles; a driver killed mid-batch
# is crash-recovery's (make test)
def test_upsert_is_exactly_once_under_a_driver_kill(harness_run):
    """The foreachBatch writer, idempotent by batch id, its driver SIGKILLed after a batch's write and before
    Spark's commit: Spark hands the batch over again, the writer skips it, every acked event is once in the table
    at version 1."""
    result = harness_run(JOBS / "upsert" / "scenario.toml", **ONE_KILL)
    assert_passed(result)
    run_dir = result.run_path
    assert result.query.kills == 1
    con = sqlite3.connect(run_dir / "sink" / "events.sqlite")
    rows = con.execute("SELECT producer, seq, version FROM events").fetchall()
    batches = {b: (t, r) for b, t, r in con.execute("SELECT batch_id, committed_ms, redelivered FROM batches")}
    con.close()
    assert {(p, s) for p, s, _ in rows} == acked_ids(run_dir) and len(rows) == result.counts.acked == 10_000
    assert {v for _, _, v in rows} == {1}
    # the batch the kill cut (in the offset log, not in the commit log: the fault's record) was in the table
    # before the kill (its transaction's time), so Spark's re-run of it reached the writer, which skipped it
    (kill,) = kills(result)
    cut = kill.detail["inject_batch"]
    assert kill.detail["inject_after_sink_write"] and kill.detail["inject_mid_batch"] and cut in batches, kill.detail
    assert batches[cut][0] <= kill.detail["inject_written_at"] * 1000.0, "the kill came before the batch's write"
    assert batches[cut][1] == 1  # handed over once more, skipped
    assert (run_dir / "checkpoint" / "commits" / str(cut)).exists()  # and then committed by the new driver
    assert result.oracle["batches_redelivered"] == 1
    assert result.oracle["latency"].startswith("measured") and result.latency_ms.p50 > 0


@pytest.mark.slow
def test_upsert_without_the_batch_check_fails_under_the_same_kill(harness_run):
    result = harness_run(JOBS / "upsert" / "scenario.toml", **ONE_KILL,
                         spark={"query_params": {"skip_applied": False}})
    assert result.verdict == "fail"
    failed = {c.name for c in result.failed_checks}
    assert failed == {"oracle_each_event_once"}, result.failure_message()
    con = sqlite3.connect(result.run_path / "sink" / "events.sqlite")
    twice = con.execute("SELECT count(*) FROM events WHERE version > 1").fetchone()[0]
    con.close()
    assert twice > 0 and result.oracle["written_more_than_once"] == twice


@pytest.mark.slow
def test_upsert_scenario_passes_under_three_kills(harness_run):
    result = harness_run(JOBS / "upsert" / "scenario.toml")
    assert_passed(result)
    assert result.query.kills == 3 and result.oracle["max_version"] == 1
    cut = [k.detail["inject_batch"] for k in kills(result) if k.detail.get("inject_after_sink_write")]
    assert len(set(cut)) == 3 and result.oracle["batches_redelivered"] == 3  # three batches, each skipped once


@pytest.mark.slow
def test_dedup_job_drops_resent_copies_across_driver_restarts(harness_run):
    result = harness_run(JOBS / "dedup" / "scenario.toml")
    assert_passed(result)
    resends = [f for f in result.faults if f.kind == "resend"]
    assert [f.detail["inject_resent"] for f in resends] == [1600, 1600]  # 200 records x 8 partitions, twice
    assert result.query.kills == 2
    assert result.oracle["acked"] == result.counts.acked == len(acked_ids(result.run_path))
    assert result.oracle["ids_twice"] == 0
    assert result.oracle["latency"].startswith("measured") and result.latency_ms.p50 > 0  # its rows are events


@pytest.mark.slow
def test_dedup_oracle_catches_a_job_that_forgets_to_deduplicate(harness_run):
    result = harness_run(JOBS / "dedup" / "scenario.toml", producers={"duration_s": 12}, checks=SHORT,
                         spark={"query": "dedup_job:query_without_dedup"},
                         faults=[{"kind": "resend", "at_s": 8, "records": 200}])
    assert result.verdict == "fail"
    assert {c.name for c in result.failed_checks} == {"oracle_each_id_once"}, result.failure_message()
    assert result.oracle["extra_rows"] == 1600  # every copy came through


@pytest.mark.slow
def test_join_job_under_a_driver_kill(harness_run):
    result = harness_run(JOBS / "join" / "scenario.toml")
    assert_passed(result)
    assert result.query.kills == 1
    o = result.oracle
    # the bound split the orders (the sine traffic: some payments within 4 ms, some not) and the watermark
    # released unpaired orders
    assert 0 < o["orders_paired"] < o["orders"] and o["pairs_out"] == o["orders_paired"] and o["unpaired_out"] > 0
    evens = sum(1 for _, s in acked_ids(result.run_path) if s % 2 == 0)
    assert o["orders"] == evens


@pytest.mark.slow
def test_join_oracle_catches_a_join_without_its_time_bound(harness_run):
    result = harness_run(JOBS / "join" / "scenario.toml", producers={"duration_s": 12}, checks=SHORT, faults=[],
                         spark={"query": "join_job:query_without_bound"})
    assert result.verdict == "fail"
    assert {c.name for c in result.failed_checks} == {"oracle_pairs_once"}, result.failure_message()
    assert result.oracle["wrong"] > 0
