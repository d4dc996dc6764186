"""driver_kill's phases (harness.spark.phases): the rule that says a kill hit its declared phase, the observation of
a checkpoint it is applied to, the judge's `kill_phase` on literal fault records (passing when the recorded
observation is the declared phase, failing when it is another moment, unknown when nothing says), the option's
validation and refusals, and the inotify watch that wakes the fault. Expected values are written out by hand
from the phases' definitions (Spark's order: offsets/N, the sink's write, commits/N)."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from harness.analysis.runview import FaultFacts, add_frame
from harness.checkers import faults
from harness.checkers.catalogue import check_names
from harness.config import ConfigError, load_scenario
from harness.effects import Effect
from harness.faults.driver_kill import DriverKill, DriverKillOptions
from harness.files.inotify import Watch
from harness.spark.phases import hit, observe

from test_checkers_literal import view


def seen(batch=3, offsets=True, commit=False, written=None, commit_tmp=(), snapshot_tmp=()):
    return {"batch": batch, "offsets": offsets, "commit": commit, "sink_written": written,
            "commit_tmp": list(commit_tmp), "snapshot_tmp": list(snapshot_tmp)}


# -- the rule -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("phase, observation, expected", [
    ("after_offsets", seen(written=False), True),
    ("after_offsets", seen(written=True), False),  # the sink had written it: later than declared
    ("after_offsets", seen(written=False, commit=True), False),
    ("after_offsets", seen(written=False, offsets=False), False),  # before the offset log: earlier than declared
    ("after_offsets", seen(written=None), None),  # a sink with no log cannot say
    ("after_sink_write", seen(written=True), True),
    ("after_sink_write", seen(written=False), False),
    ("after_sink_write", seen(written=True, commit=True), False),  # committed: between batches, not in one
    ("mid_batch", seen(), True),
    ("mid_batch", seen(commit=True), False),
    ("state_snapshot", seen(snapshot_tmp=["state/0/1/.4.zip.ab.TID3.tmp"]), True),
    ("state_snapshot", seen(), False),
    ("first_commit", seen(batch=0, commit_tmp=[".0.ab.tmp"]), True),
    ("first_commit", seen(batch=0, commit_tmp=[".0.ab.tmp"], commit=True), False),  # the rename happened
    ("first_commit", seen(batch=0), False),
    ("first_commit", seen(batch=1, commit_tmp=[".1.ab.tmp"]), False),  # not the first batch
])
def test_the_phase_rule(phase, observation, expected):
    assert hit(phase, observation)[0] is expected


def test_nothing_observed_is_unknown():
    assert hit("after_offsets", None)[0] is None and hit("first_commit", {})[0] is None


def test_observe_reads_the_checkpoint_as_it_is(tmp_path):
    ck = tmp_path / "checkpoint"
    for path in ["offsets/0", "commits/.0.5e09.tmp", "commits/..0.5e09.tmp.crc", "state/0/1/3.zip",
                 "state/0/1/.4.zip.f42f.TID3.tmp", "state/0/1/SSTs/000008-ab.sst", "state/0/0/.4.zip.9c1d.TID2.tmp"]:
        (ck / path).parent.mkdir(parents=True, exist_ok=True)
        (ck / path).write_text("x")
    assert observe(ck, 0, None) == {"batch": 0, "offsets": True, "commit": False, "sink_written": None,
                                    "commit_tmp": [".0.5e09.tmp"],
                                    "snapshot_tmp": ["state/0/0/.4.zip.9c1d.TID2.tmp",
                                                     "state/0/1/.4.zip.f42f.TID3.tmp"]}
    (ck / "commits" / "0").write_text("v1")
    assert observe(ck, 0, True)["commit"] is True and observe(ck, 1, False)["offsets"] is False


# -- the judge ------------------------------------------------------------------------------------------------------

def kill_record(fault: int, observed: dict | None) -> dict:
    detail = {} if observed is None else {"inject_observed": observed}
    return {"kind": "driver_kill", "fault": fault, "n": 0, "injected_at": 1010.0 + fault, "healed_at": 1011.0 + fault,
            "detail": detail, "errors": [], "effect": Effect(query_down=True).as_dict()}


def phases_view(*records):
    facts = FaultFacts(records=list(records), effects=[Effect(query_down=True)] * len(records), expected_failures=[],
                       failed_as_expected=False)
    return view("crash-phases", fault_facts=facts)  # faults.0 after_offsets, faults.1 after_sink_write


def test_kill_phase_passes_when_each_kill_observed_its_declared_phase():
    (check,) = faults.kill_phase(phases_view(kill_record(0, seen(batch=4, written=False)),
                                             kill_record(1, seen(batch=9, written=True))))
    assert check.ok is True and "2 kills" in check.detail


def test_kill_phase_fails_when_a_kill_landed_elsewhere():
    # the after_offsets kill saw _spark_metadata/4 already there: it cut after the sink's write
    (check,) = faults.kill_phase(phases_view(kill_record(0, seen(batch=4, written=True)),
                                             kill_record(1, seen(batch=9, written=True))))
    assert check.ok is False and "faults.0" in check.detail and "after_offsets" in check.detail


def test_kill_phase_fails_when_the_batch_was_committed_at_the_kill():
    (check,) = faults.kill_phase(phases_view(kill_record(0, seen(batch=4, written=False)),
                                             kill_record(1, seen(batch=9, written=True, commit=True))))
    assert check.ok is False and "faults.1" in check.detail


def test_kill_phase_is_unknown_without_an_observation_never_a_pass():
    (check,) = faults.kill_phase(phases_view(kill_record(0, None), kill_record(1, seen(batch=9, written=True))))
    assert check.ok is None
    (check,) = faults.kill_phase(phases_view())
    assert check.ok is None


def test_kill_phase_is_not_judged_without_a_declared_phase():
    assert faults.kill_phase(view("crash-recovery")) == []


def test_kill_phase_is_listed_for_a_scenario_that_declares_a_phase():
    assert "kill_phase" in check_names(load_scenario("crash-phases")[0])
    assert "kill_phase" in check_names(load_scenario("kafka-sink-crash")[0])  # after_sink_write = true
    assert "kill_phase" not in check_names(load_scenario("crash-recovery")[0])


# -- the option -----------------------------------------------------------------------------------------------------

def test_after_sink_write_true_is_the_after_sink_write_phase():
    assert DriverKillOptions(at_s=5, after_sink_write=True).phase == "after_sink_write"
    assert DriverKillOptions(at_s=5).phase is None


def test_after_sink_write_and_another_phase_are_refused():
    with pytest.raises(ValidationError, match="give one"):
        DriverKillOptions(at_s=5, after_sink_write=True, phase="after_offsets")


@pytest.mark.parametrize("phase", ["after_offsets", "state_snapshot", "first_commit"])
def test_a_phase_needs_time_to_wait_for(phase):
    with pytest.raises(ValidationError, match="mid_batch_timeout_s must be above 0"):
        DriverKillOptions(at_s=5, phase=phase, mid_batch_timeout_s=0)


def test_first_commit_needs_real_time_mode():
    scenario = load_scenario("crash-recovery")[0]
    why = DriverKill(DriverKillOptions(at_s=0, phase="first_commit")).check(scenario)
    assert "realTime" in why and "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY" in why
    assert DriverKill(DriverKillOptions(at_s=0, phase="first_commit")).check(load_scenario("rtm-crash")[0]) is None


def test_state_snapshot_needs_rocksdb_state():
    why = DriverKill(DriverKillOptions(at_s=5, phase="state_snapshot")).check(load_scenario("stateful")[0])
    assert "rocksdb" in why
    assert DriverKill(DriverKillOptions(at_s=5, phase="state_snapshot")).check(
        load_scenario("state-snapshot-crash")[0]) is None


def test_after_offsets_is_refused_on_a_sink_that_cannot_show_its_writes(monkeypatch):
    """A sink with no log of its batches and no output to watch downstream (none ships: made so here)."""
    from harness.sinks.parquet import ParquetSink

    monkeypatch.setattr(ParquetSink, "logs_batches", False)
    with pytest.raises(ConfigError) as err:
        load_scenario("crash-phases")
    assert "faults.0.phase" in str(err.value) and "_spark_metadata" in str(err.value)


def test_after_offsets_loads_on_the_kafka_sink():
    (scenario, *_) = load_scenario("kafka-sink-phases")
    assert [f.phase for f in scenario.faults] == ["after_offsets", "after_sink_write"]


def test_after_sink_write_loads_on_the_file_sink():
    (scenario, *_) = load_scenario("crash-phases")
    assert [f.phase for f in scenario.faults] == ["after_offsets", "after_sink_write"]


# -- the parts ------------------------------------------------------------------------------------------------------

def test_the_watch_names_a_file_created_or_renamed_in(tmp_path):
    with Watch([tmp_path]) as watch:
        assert watch.names(0.01) == []
        (tmp_path / ".0.ab.tmp").write_text("v1")
        os.rename(tmp_path / ".0.ab.tmp", tmp_path / "0")
        names = [name for _, name in watch.names(2.0)]
    assert names[0] == ".0.ab.tmp" and "0" in names


def test_an_empty_sink_output_is_a_sink_that_delivered_nothing():
    empty = pd.DataFrame({"out_partition": [], "out_offset": [], "commit_ms": []})
    assert add_frame(empty, None, True, "the Kafka sink's records") is empty  # the checker is not touched
    with pytest.raises(ValueError, match="needs the columns"):
        add_frame(pd.DataFrame({"out_partition": [0], "commit_ms": [1.0]}), None, True, "x")
