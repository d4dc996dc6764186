"""The failpoint `driver_kill` with `after_sink_write` uses (harness.spark.sinkhold): the driver holds after its
writer returned only when asked, only for the batches asked for, says which batch it holds, and lets go when the
request goes or its timeout passes. And the phases are refused where they cannot apply: after_offsets for a
query whose writer logs nothing, or no time to wait for one."""
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.config import ConfigError, load_scenario
from harness.faults.driver_kill import DriverKillOptions
from harness.spark import sinkhold

UPSERT = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "upsert" / "scenario.toml"


def hold_in_thread(control: Path, batch: int) -> threading.Thread:
    thread = threading.Thread(target=sinkhold.hold_if_requested, args=(control, batch), daemon=True)
    thread.start()
    return thread


class Clock:
    """sinkhold's clock (monotonic, time, sleep): a sleep moves it on at once, so a wait is measured in the time the
    hold asked for, not in how long a busy machine took to run it."""

    def __init__(self):
        self.now = 1_000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture()
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(sinkhold, "time", fake)
    return fake


def test_no_request_no_hold(tmp_path, clock):
    sinkhold.hold_if_requested(tmp_path, 7)
    assert clock.slept == [] and sinkhold.held(tmp_path) is None


def test_a_batch_before_from_batch_is_not_held(tmp_path):
    sinkhold.request(tmp_path, from_batch=5, timeout_s=30)
    thread = hold_in_thread(tmp_path, 4)  # the batch a restarted driver re-runs from an earlier kill
    thread.join(20)  # a deadline a busy machine meets, well short of the 30 s a hold would last
    assert not thread.is_alive() and sinkhold.held(tmp_path) is None


def test_held_until_released_and_says_which_batch(tmp_path):
    sinkhold.request(tmp_path, from_batch=5, timeout_s=30)
    thread = hold_in_thread(tmp_path, 6)
    deadline = time.monotonic() + 5
    while sinkhold.held(tmp_path) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    hold = sinkhold.held(tmp_path)
    assert hold is not None and hold["batch"] == 6 and hold["pid"] == os.getpid()
    time.sleep(0.3)
    assert thread.is_alive()  # still holding
    sinkhold.release(tmp_path)
    thread.join(20)  # as above: released, not timed out
    assert not thread.is_alive() and sinkhold.held(tmp_path) is None


def test_a_hold_nobody_releases_ends_at_its_timeout(tmp_path, clock):
    sinkhold.request(tmp_path, from_batch=0, timeout_s=0.3)
    sinkhold.hold_if_requested(tmp_path, 0)
    waited = clock.now - 1_000.0
    assert 0.3 - 1e-9 <= waited <= 0.3 + max(clock.slept) + 1e-9  # its timeout, and at most one poll beyond
    assert sinkhold.held(tmp_path) is None


def test_a_damaged_request_is_ignored(tmp_path):
    (tmp_path / sinkhold.REQUEST).write_text("{not json")
    sinkhold.hold_if_requested(tmp_path, 3)
    assert sinkhold.held(tmp_path) is None


def test_after_sink_write_needs_time_to_wait():
    with pytest.raises(ValidationError, match="mid_batch_timeout_s must be above 0"):
        DriverKillOptions(at_s=5, after_sink_write=True, mid_batch_timeout_s=0)


def test_after_offsets_is_refused_for_a_query_that_owns_its_sink(tmp_path):
    """A foreachBatch writer logs nothing the fault could read before its write: after_offsets could not be judged
    (after_sink_write has the hold; the file sink its _spark_metadata, so passthrough may take either)."""
    shutil.copytree(UPSERT.parent, tmp_path / "upsert")
    scenario = tmp_path / "upsert" / "scenario.toml"
    load_scenario(str(scenario))  # the example as shipped: its query owns its sink
    load_scenario(str(scenario), ['spark.query="passthrough"', "spark.query_params={}"])  # the file sink's log
    with pytest.raises(ConfigError) as err:
        load_scenario(str(scenario), ["faults.0.after_sink_write=false", 'faults.0.phase="after_offsets"'])
    text = str(err.value)
    assert str(scenario) in text and "faults.0.phase" in text and "foreachBatch writer keeps none" in text
