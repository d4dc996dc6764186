"""The restart after an outage (harness.faults.outage) as a user runs it: the shipped `outage-expiry` scenario
against the real broker and Spark. Besides the verdict, what the outage left is recomputed here from the run's raw
records, never from the checker: the records that aged out unread (the broker's log start at the restart, read by
the fault, past the checkpoint's last commit, counted in the producers' ack logs and missing from the Parquet
sink), and the first batch the restarted query planned (progress.jsonl) against the backlog at the restart.
"""
import json

import pytest

from tests.integration.test_faults_topic import acked, assert_passed, checks, delivered, fault_rows, run_scenario

pytestmark = pytest.mark.integration


def first_batch_after(out, restarted_at: float, after_batch) -> dict:
    from datetime import datetime

    for line in (out / "progress.jsonl").read_text().splitlines():
        p = json.loads(line)
        at = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        if at >= restarted_at and (after_batch is None or p["batchId"] > after_batch):
            return p
    raise AssertionError("no batch after the restart")


@pytest.mark.slow  # a whole scenario: about 3 minutes here
@pytest.mark.timeout(900)
def test_outage_expiry_loses_exactly_what_aged_out_unread_and_reads_the_backlog_at_once(harness_env, tmp_path):
    out = tmp_path / "outage-expiry"
    result, proc = run_scenario("outage-expiry", out, harness_env)
    assert_passed(result, proc)
    assert {"outage_backlog", "outage_crash_loop", "outage_expired", "query_recovered"} <= set(checks(result))
    rows = fault_rows(out)
    inject = next(r for r in rows if r["action"] == "inject")["detail"]
    heal = next(r for r in rows if r["action"] == "heal")["detail"]
    committed, start, ends = heal["committed_at_restart"], heal["log_start_at_restart"], heal["ends_at_restart"]
    aged = {int(p): (int(committed.get(p, 0)), int(s)) for p, s in start.items() if int(s) > int(committed.get(p, 0))}
    assert aged, "nothing aged out while the query was down"
    acks, sink = acked(out), delivered(out)
    in_aged = acks[[any(p == q and lo <= o < hi for q, (lo, hi) in aged.items())
                    for p, o in zip(acks["partition"], acks["offset"])]]
    undelivered = in_aged.merge(sink[["producer", "seq"]].drop_duplicates(), how="left", indicator=True)
    lost = int((undelivered["_merge"] == "left_only").sum())
    assert lost == sum(hi - lo for lo, hi in aged.values()) == result["counts"]["expected_lost"]
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0
    first = first_batch_after(out, heal["restarted_at"], inject["offset_log_last"])
    backlog = sum(int(e) - max(int(committed.get(p, 0)), int(start.get(p, 0))) for p, e in ends.items())
    assert first["numInputRows"] >= backlog > 0
    (o,) = result["outages"]
    assert (o["backlog_events"], o["expired_events"], o["first_batch"]["rows"]) == (backlog, lost,
                                                                                    first["numInputRows"])
    assert o["crashes"] == 0 and not o["gave_up"]


@pytest.mark.slow  # a whole scenario and three restarts: about 4 minutes here
@pytest.mark.timeout(900)
def test_outage_dataloss_loop_restarts_into_the_data_loss_error_and_is_given_up_on(harness_env, tmp_path):
    out = tmp_path / "outage-dataloss-loop"
    result, proc = run_scenario("outage-dataloss-loop", out, harness_env)
    assert_passed(result, proc)
    c = checks(result)
    assert c["outage_crash_loop"]["status"] == "pass" and c["expected_failure"]["status"] == "pass"
    assert result["query"]["final_state"] == "failed"
    assert result["query"]["error"].startswith("[QUERY_CRASH_LOOP] the query failed 3 times")
    (o,) = result["outages"]
    assert (o["crashes"], o["gave_up"], o["first_batch"]) == (3, True, None)
    # every failure was Spark's own data-loss error: the records aged out unread (the broker's log start at the
    # restart, as the fault read it, past the checkpoint's last commit)
    assert all("KAFKA_DATA_LOSS" in e for e in o["crash_errors"]), o["crash_errors"]
    heal = next(r for r in fault_rows(out) if r["action"] == "heal")["detail"]
    committed, start = heal["committed_at_restart"], heal["log_start_at_restart"]
    assert any(int(s) > int(committed.get(p, 0)) for p, s in start.items())
    # nothing the query had committed before the outage is missing from the sink
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0


@pytest.mark.slow  # a whole scenario and three restarts that each run out of memory: about 5 minutes here
@pytest.mark.timeout(1200)
def test_outage_oom_restarts_into_an_out_of_memory_error_and_is_given_up_on(harness_env, tmp_path):
    """The uncapped first batch after the outage collected to a 512 MiB driver: Java heap space, at every restart
    (the same planned batch), given up on. Recomputed from the raw records: the driver's own log, the sink's
    files, the producers' acks and the offsets the fault read."""
    import pandas as pd
    from pathlib import Path

    out = tmp_path / "outage-oom"
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "outage-oom.toml"
    result, proc = run_scenario(str(scenario), out, harness_env)
    assert_passed(result, proc)
    c = checks(result)
    assert c["outage_crash_loop"]["status"] == "pass" and c["expected_failure"]["status"] == "pass"
    assert result["query"]["error"].startswith("[QUERY_CRASH_LOOP] the query failed 3 times")
    (o,) = result["outages"]
    assert (o["crashes"], o["crashes_as_declared"], o["gave_up"], o["first_batch"]) == (3, 3, True, None)
    # the driver JVM's own log says why, once per failure: the heap (-XX:+ExitOnOutOfMemoryError), not another error
    log = (out / "spark" / "driver.log").read_text(errors="replace")
    assert log.count("Terminating due to java.lang.OutOfMemoryError: Java heap space") == 3  # it exits on it
    # the backlog the first batch had to collect: the ends at the restart less the commits, > the 512 MiB heap
    heal = next(r for r in fault_rows(out) if r["action"] == "heal")["detail"]
    committed, ends = heal["committed_at_restart"], heal["ends_at_restart"]
    backlog = sum(int(e) - int(committed.get(p, 0)) for p, e in ends.items())
    assert backlog == o["backlog_events"] and backlog * 8192 > 512 * 2**20
    # the sink holds exactly the acked events below the commits: every batch before the outage, once
    sink = pd.concat([pd.read_parquet(f) for f in sorted((out / "sink").glob("batch-*.parquet"))])
    acks = acked(out)
    below = acks[[int(off) < int(committed.get(str(p), 0)) for p, off in zip(acks["partition"], acks["offset"])]]
    assert len(sink) == len(sink[["producer", "seq"]].drop_duplicates()) == len(below) > 0
