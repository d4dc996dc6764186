"""Pause, not kill, and two drivers on one checkpoint, run for real (issue 35, items 1 and 2): the shipped
scenarios pass, and what the faults recorded agrees with what Spark left on disk (its logs, the second driver's
own status, the checkpoint), read here independently of the checks."""
import json
import re

import pytest

from tests.integration.test_standalone_cluster import fault_details


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_frozen_executor_is_removed_its_tasks_rerun_and_a_frozen_driver_carries_on(harness_runner, tmp_path):
    out = tmp_path / "standalone-pause"
    run = harness_runner.run("standalone-pause", out=out, timeout=1400)
    run.assert_passed()
    result = json.loads((out / "result.json").read_text())
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0
    assert result["query"]["restarts"] == 0 and result["query"]["kills"] == 0
    executor, driver = fault_details(result, "pause")
    assert executor["inject_target"] == "executor" and driver["inject_target"] == "driver"
    frozen = executor["inject_executor_id"]
    log = (out / "spark" / "driver.log").read_text(errors="replace")
    # Spark's own words, not the harness's counts: the frozen executor removed for want of heartbeats
    assert re.search(rf"Removing executor {frozen} with no recent heartbeats", log)
    assert re.search(rf"Lost executor {frozen} on \S+: Executor heartbeat timed out", log)
    assert frozen not in executor["heal_executors"].values() and len(executor["heal_executors"]) == 2
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["spark_logged"]["status"] == "pass" and checks["query_resumed"]["status"] == "pass"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_second_driver_on_the_checkpoint_is_refused_by_the_offset_log(harness_runner, tmp_path):
    out = tmp_path / "second-driver"
    run = harness_runner.run("second-driver", out=out, timeout=850)
    run.assert_passed()
    result = json.loads((out / "result.json").read_text())
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0
    [d] = fault_details(result, "second_driver")
    status = json.loads((out / "second-driver" / "spark" / "status.json").read_text())
    assert status["state"] == "failed" and "CONCURRENT_STREAM_LOG_UPDATE" in status["error"]
    assert d["heal_outcome"] == "second_refused" and d["heal_same_query_id"] and d["heal_run_ids_differ"]
    # the batch id it was refused for is one the running query wrote into the offset log itself
    refused = int(re.search(r"Multiple streaming jobs detected for (\d+)", status["error"]).group(1))
    assert (out / "checkpoint" / "offsets" / str(refused)).exists()
    assert (out / "checkpoint" / "commits" / str(refused)).exists()  # and committed: the checkpoint is whole
