"""The failpoint `driver_kill` with `after_sink_write` uses (harness.spark.sinkhold): the driver holds after its
writer returned only when asked, only for the batches asked for, says which batch it holds, and lets go when the
request goes or its timeout passes; a request holds at its own point (before the writer, or after it). And the
phases load where they can be judged."""
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.config import load_scenario
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


def test_a_request_holds_at_its_own_point_only(tmp_path, clock):
    """after_offsets asks for the point before the writer, after_sink_write for the one after it: a driver at the
    other point goes on at once."""
    sinkhold.request(tmp_path, from_batch=0, timeout_s=30, point="before")
    sinkhold.hold_if_requested(tmp_path, 4, "after")
    assert clock.slept == [] and sinkhold.held(tmp_path) is None
    sinkhold.request(tmp_path, from_batch=0, timeout_s=30)  # "after", as before points existed
    sinkhold.hold_if_requested(tmp_path, 4, "before")
    assert clock.slept == [] and sinkhold.held(tmp_path) is None
    with pytest.raises(ValueError, match="allowed after, before"):
        sinkhold.request(tmp_path, from_batch=0, timeout_s=30, point="during")


def test_a_before_hold_says_its_point(tmp_path):
    sinkhold.request(tmp_path, from_batch=2, timeout_s=30, point="before")
    thread = threading.Thread(target=sinkhold.hold_if_requested, args=(tmp_path, 2, "before"), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while sinkhold.held(tmp_path) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    hold = sinkhold.held(tmp_path)
    assert hold["batch"] == 2 and hold["point"] == "before" and hold["pid"] == os.getpid()
    sinkhold.release(tmp_path)
    thread.join(10)
    assert not thread.is_alive()


def test_after_offsets_loads_for_a_query_that_owns_its_sink_or_on_the_file_sink(tmp_path):
    """A foreachBatch writer is held before it is called; the file sink has its _spark_metadata. Both can say the
    batch was not written (the Kafka sink cannot: tests/unit/test_kill_phases.py)."""
    shutil.copytree(UPSERT.parent, tmp_path / "upsert")
    scenario = tmp_path / "upsert" / "scenario.toml"
    load_scenario(str(scenario))  # the example as shipped: its query owns its sink
    before = ["faults.0.after_sink_write=false", 'faults.0.phase="after_offsets"']
    assert load_scenario(str(scenario), before)[0].faults[0].phase == "after_offsets"
    passthrough = load_scenario(str(scenario), [*before, 'spark.query="passthrough"', "spark.query_params={}"])
    assert passthrough[0].faults[0].phase == "after_offsets"
