"""`harness setup`'s second half (harness.commands.setup): it names what a first `steady` run would make and is
missing, looks for each where the run's own code will (the driver's archive where the runner's query process
asks for it), and starts nothing when everything is in place. The JVMs themselves: tests/integration/
test_setup_makes_the_archives.py."""
from __future__ import annotations

import uuid

import pytest

from harness.backends.kafka import storage
from harness.commands import setup
from harness.console import Console
from harness.jvm import cds

EVERYTHING = {"the Kafka storage tool's output", "the storage tool's class archive", "the broker's class archive",
              "the Spark driver's class archive"}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """An empty cache for what setup makes (the jars stay where they are: resolving them is not under test)."""
    monkeypatch.setattr(cds, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(storage, "cache_dir", lambda: tmp_path)
    monkeypatch.delenv(cds.CDS_ENV, raising=False)
    return tmp_path


def _put(item: setup.Item) -> None:
    """What the item's maker leaves: an archive's magic number and a plausible size, or the tool's output."""
    item.path.parent.mkdir(parents=True, exist_ok=True)
    if item.path.suffix == ".jsa":
        item.path.write_bytes(cds.DYNAMIC_MAGIC.to_bytes(4, "little") + b"\0" * 8192)
    else:
        item.path.write_bytes(b"a snapshot")


def test_an_empty_cache_misses_everything_a_first_run_makes(cache):
    scenario = setup.first_run_scenario()
    items = setup.missing(scenario)
    assert {i.what for i in items} == EVERYTHING
    assert all(cache in i.path.parents for i in items)


def test_with_everything_in_place_nothing_starts(cache, monkeypatch):
    scenario = setup.first_run_scenario()
    for item in setup.wanted(scenario):
        _put(item)

    def started(*_args, **_kwargs):
        raise AssertionError("a JVM was started although everything was in place")

    monkeypatch.setattr(setup, "Supervisor", started)
    monkeypatch.setattr(setup, "SparkQueryProcess", started)
    assert setup.missing(scenario) == []
    assert setup.make_first_run_files(Console(quiet=True)) == []


def test_once_the_tool_output_is_kept_the_tool_and_its_archive_are_not_wanted(cache):
    """A run that finds the kept output runs no storage tool: its archive is then nothing a first run makes."""
    scenario = setup.first_run_scenario()
    output = next(i for i in setup.wanted(scenario) if i.what == "the Kafka storage tool's output")
    _put(output)
    assert {i.what for i in setup.missing(scenario)} == {"the broker's class archive",
                                                         "the Spark driver's class archive"}


def test_without_class_archives_only_the_tool_output_is_wanted(cache, monkeypatch):
    monkeypatch.setenv(cds.CDS_ENV, "0")
    assert [i.what for i in setup.wanted(setup.first_run_scenario())] == ["the Kafka storage tool's output"]


def test_the_driver_archive_is_where_the_runners_query_process_asks_for_it(cache, tmp_path):
    """The runner builds steady's query process (harness.runner._query_process): with the archive setup names in
    place, that driver is started on it, not asked to write one."""
    from harness.backends import make_backend
    from harness.config import load_scenario
    from harness.context import RunContext
    from harness.runner import _query_process
    from harness.records.runstate import RunState
    from harness.supervisor import Supervisor
    from harness.records.timeline import Timeline

    scenario, path, _ = load_scenario("steady")
    driver = next(i for i in setup.wanted(scenario) if i.what == "the Spark driver's class archive")
    _put(driver)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = RunContext(scenario, run_dir, Supervisor(uuid.uuid4().hex), Timeline(run_dir / "timeline.jsonl"),
                     make_backend(scenario.backend, scenario.stream), Console(quiet=True),
                     state=RunState(scenario_dir=str(path.parent)))
    query = _query_process(ctx, None)
    assert "cds_dump" not in query.job
    assert f"-XX:SharedArchiveFile={driver.path}" in query.job["conf"]["spark.driver.extraJavaOptions"].split()
