"""Event Hubs runs end to end: the emulator, the SDK producers, the project's Spark source, a fault, the verdict.
(Every eh-* scenario at full length runs in `make test-slow`.)"""
import re
import subprocess
import sys

import pytest

from scenario_runs import run

pytestmark = pytest.mark.integration


def checks(result: dict) -> dict:
    return {c["name"]: c for c in result["checks"]}


@pytest.mark.slow  # `make test-slow`: the source reports aged-out ranges exactly in test_eventhubs_source (make test)
def test_aged_out_events_are_skipped_and_reported_exactly(harness_env, tmp_path):
    """failOnDataLoss=false: the source skips what the emulator aged out, reports exactly those ranges, and every
    other acked event arrives once, at the sequence number the service gave it."""
    proc, result = run(harness_env, tmp_path / "run", "eh-ageout-lenient", "producers.duration_s=14",
                       'spark.trigger.interval="1 second"')  # still behind at the cut (400 a batch), drains sooner
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    c, by_name = result["counts"], checks(result)
    assert c["expected_lost"] > 0 and c["lost"] == c["duplicates"] == c["misplaced"] == 0
    assert c["delivered_unique"] + c["expected_lost"] == c["acked"] == c["produced"]
    assert by_name["source_reported_gaps"]["ok"]
    skipped = sum(hi - lo for _, lo, hi in result["source"]["lost_ranges"])
    assert skipped == c["expected_lost"] == sum(result["expected_lost_by_partition"].values())
    assert result["source"]["totals"]["rows"] >= c["delivered_unique"]  # re-run batches read again
    assert (tmp_path / "run" / "placements" / "retained.csv").exists()
    # Spark's event log and the source's own task records agree task by task: each scan task is matched to the
    # partition its record names (a re-run batch's tasks included)
    placement = result["placement"]
    assert placement["partition_known"] == 1.0 and placement["executors"] == ["driver"]
    assert placement["tasks_reading"] == result["source"]["tasks"]
    # the emulator checked the run's key (a wrong one is refused: tests/emulator), and no file of the run holds it:
    # every connection string written says ${...} or *** where the key would be
    key_values = set()
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            key_values |= set(re.findall(rb"SharedAccessKey=([^;\"'\s]*)", path.read_bytes()))
    assert b"${HARNESS_EMULATOR_KEY}" in key_values  # the emulator's log
    assert all(v == b"***" or re.fullmatch(rb"\$\{[A-Z0-9_]+\}", v) for v in key_values), key_values


@pytest.mark.slow
def test_aged_out_events_fail_the_query_under_fail_on_data_loss(harness_env, tmp_path):
    proc, result = run(harness_env, tmp_path / "run", "eh-ageout")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["query"]["final_state"] == "failed" and "EventHubsDataLossError" in result["query"]["error"]
    c = result["counts"]
    assert c["expected_lost"] > 0 and c["lost"] == 0 and c["unread"] > 0


def test_a_scenario_naming_a_kafka_option_on_event_hubs_is_refused(harness_env, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "eh-steady", "--out", str(tmp_path / "x"),
                           "--set", "spark.source_options.maxOffsetsPerTrigger=10"], env=harness_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "spark.source_options" in proc.stderr and "maxOffsetsPerTrigger" in proc.stderr
    assert "maxEventsPerTrigger" in proc.stderr  # the allowed names are listed
    assert not (tmp_path / "x" / "result.json").exists()
