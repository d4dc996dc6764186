"""harness shrink without Spark: ddmin against a brute-force search, the recorded schedule as fault tables, the
minimal scenario written and loadable, and the command's files and exit codes with the runs stood in for."""
import itertools
import json
import tomllib
from pathlib import Path

import pytest

from harness import runner
from harness.commands import shrink as sh
from harness.config import load_scenario, validate_resolved
from harness.errors import InputError
from harness.files.paths import SCENARIOS_DIR
from harness.files.tomlfile import dumps


def smallest_failing(units, fails):
    """The independent answer: every subset, smallest first (fine for a handful of units)."""
    for size in range(len(units) + 1):
        for subset in itertools.combinations(units, size):
            if fails(list(subset)):
                return list(subset)
    return None


@pytest.mark.parametrize("needed", [{3, 6}, {5}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 8}, {2, 3, 4}])
def test_ddmin_finds_what_a_brute_force_search_finds(needed):
    units = list(range(1, 9))
    calls = []

    def fails(subset):
        calls.append(tuple(subset))
        return needed <= set(subset)

    found = sh.ddmin(units, fails)
    assert found.minimal == smallest_failing(units, lambda s: needed <= set(s))
    assert found.complete and found.tests == len(set(calls)) == len(calls)  # each subset run once


def test_ddmin_is_one_minimal_when_the_failure_needs_either_of_two_pairs():
    """Two failing cores ({1, 2} and {7, 8}): ddmin returns one of them, from which no unit can be removed."""
    def fails(subset):
        return {1, 2} <= set(subset) or {7, 8} <= set(subset)

    found = sh.ddmin(list(range(1, 9)), fails)
    assert found.complete and set(found.minimal) in ({1, 2}, {7, 8})
    assert not any(fails([u for u in found.minimal if u != x]) for x in found.minimal)


def test_ddmin_out_of_budget_keeps_the_smallest_failing_subset_found():
    tests = []

    def fails(subset):
        if len(tests) == 3:
            raise sh.Budget
        tests.append(subset)
        return 4 in subset

    found = sh.ddmin(list(range(1, 9)), fails)
    assert not found.complete
    assert 4 in found.minimal and len(found.minimal) < 8  # smaller than the whole, and it fails


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_recorded_injections_one_table_each_with_planned_times_and_what_was_drawn(tmp_path):
    tables = [{"kind": "broker", "at_s": 5.0, "every_s": 10.0, "count": 2, "until_s": None, "jitter_s": 1.5,
               "duration_s": 4.0, "window": None, "mode": "pause", "node": None},
              {"kind": "driver_kill", "at_s": 30.0, "every_s": None, "count": None, "until_s": None,
               "jitter_s": 0.0, "duration_s": None, "window": None, "mid_batch_timeout_s": 20.0}]
    rows = [
        {"t": 1.0, "action": "inject", "kind": "broker", "fault": 0, "n": 0, "scheduled_s": 5.7,
         "detail": {"mode": "pause", "node": 2}},
        {"t": 2.0, "action": "heal", "kind": "broker", "fault": 0, "n": 0, "scheduled_s": 9.7, "detail": {}},
        {"t": 3.0, "action": "inject", "kind": "broker", "fault": 0, "n": 1, "scheduled_s": 16.2,
         "detail": {"mode": "pause", "node": 3}},
        {"t": 4.0, "action": "heal", "kind": "broker", "fault": 0, "n": 1, "scheduled_s": 20.2, "detail": {}},
        {"t": 5.0, "action": "inject", "kind": "driver_kill", "fault": 1, "n": 0, "scheduled_s": 30.0,
         "detail": {}, "error": "FaultError: no batch in flight"},  # did not inject: not part of the schedule
    ]
    got = sh.recorded_injections(write_jsonl(tmp_path / "faults.jsonl", rows), tables)
    assert [i.label for i in got] == ["broker@5.7s (faults.0 #0)", "broker@16.2s (faults.0 #1)"]
    assert got[0].table == {"kind": "broker", "mode": "pause", "at_s": 5.7, "duration_s": 4.0, "node": 2}
    assert got[1].table["node"] == 3 and got[1].table["at_s"] == 16.2


def test_an_injection_healed_only_at_the_drain_gets_no_duration(tmp_path):
    tables = [{"kind": "driver_kill", "at_s": 12.0, "mid_batch_timeout_s": 20.0}]
    rows = [{"t": 1.0, "action": "inject", "kind": "driver_kill", "fault": 0, "n": 0, "scheduled_s": 12.0},
            {"t": 9.0, "action": "heal", "kind": "driver_kill", "fault": 0, "n": 0, "scheduled_s": None}]
    [one] = sh.recorded_injections(write_jsonl(tmp_path / "faults.jsonl", rows), tables)
    assert one.table == {"kind": "driver_kill", "at_s": 12.0, "mid_batch_timeout_s": 20.0}


def resolved(name: str) -> dict:
    scenario, _, _ = load_scenario(name)
    return scenario.model_dump(mode="json")


@pytest.mark.parametrize("path", sorted(SCENARIOS_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_scenario_round_trips_through_the_written_toml(path):
    """What shrink writes (a run's resolved scenario as TOML, nulls left out) is the same scenario again; and a
    run's record re-validates (it did not for the Kafka-endpoint Event Hubs scenarios: a record lists `send`)."""
    data = resolved(str(path))
    again = validate_resolved(tomllib.loads(dumps(data, "header\nlines")), "written")
    assert again.model_dump(mode="json") == data


def failed_run(tmp_path: Path, scenario: str = "broker-kill", verdict: str = "fail") -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    data = resolved(scenario)
    (run / "scenario.json").write_text(json.dumps({"file": "x.toml", "overrides": [], "resolved": data}))
    (run / "result.json").write_text(json.dumps({"verdict": verdict, "checks": [
        {"name": "no_loss", "ok": verdict != "fail", "status": "fail" if verdict == "fail" else "pass"},
        {"name": "completed", "ok": True, "status": "pass"}]}))
    rows = []
    for i, f in enumerate(data["faults"]):
        rows += [{"t": 1.0 + i, "action": "inject", "kind": f["kind"], "fault": i, "n": 0,
                  "scheduled_s": f["at_s"], "detail": {"node": i + 1}},
                 {"t": 2.0 + i, "action": "heal", "kind": f["kind"], "fault": i, "n": 0,
                  "scheduled_s": f["at_s"] + f["duration_s"], "detail": {}}]
    write_jsonl(run / "faults.jsonl", rows)
    return run


def test_only_a_failed_run_with_injections_and_no_hidden_secret_is_taken(tmp_path):
    with pytest.raises(InputError, match="verdict is 'pass'"):
        sh.read_failed_run(failed_run(tmp_path / "a", verdict="pass"))
    run = failed_run(tmp_path / "b")
    (run / "faults.jsonl").write_text("")
    with pytest.raises(InputError, match="injected no fault"):
        sh.read_failed_run(run)
    run = failed_run(tmp_path / "c")
    record = json.loads((run / "scenario.json").read_text())
    record["resolved"]["producers"]["client"]["sasl.password"] = "***"
    (run / "scenario.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match="producers.client.sasl.password"):
        sh.read_failed_run(run)
    with pytest.raises(InputError, match="no scenario.json"):
        sh.read_failed_run(tmp_path)


def fake_runs(monkeypatch, fails_with):
    """runner.run_loaded stood in for: a run 'fails no_loss' when `fails_with(kinds and times)` says so."""
    ran = []

    def run_loaded(scenario, path, overrides, out, console, backend=None):
        schedule = sorted((f.kind, f.at_s, getattr(f, "node", None)) for f in scenario.faults)
        ran.append(schedule)
        failing = fails_with(schedule)
        out.mkdir(parents=True)
        result = {"verdict": "fail" if failing else "pass",
                  "checks": [{"name": "no_loss", "ok": not failing, "status": "fail" if failing else "pass"}]}
        return runner.RunOutcome(out, result, 1 if failing else 0)

    monkeypatch.setattr(runner, "run_loaded", run_loaded)
    return ran


def test_shrink_writes_the_minimal_schedule_as_a_scenario_that_loads(tmp_path, monkeypatch):
    """broker-kill injects a kill at 5 s and a pause at 28 s; the stand-in fails whenever the pause is there."""
    ran = fake_runs(monkeypatch, lambda s: any(at == 28.0 for _, at, _ in s))
    out, code = sh.shrink(failed_run(tmp_path), tmp_path / "out")
    assert code == 0
    assert ran == [[("broker", 5.0, 1), ("broker", 28.0, 2)], [], [("broker", 5.0, 1)], [("broker", 28.0, 2)]]
    summary = json.loads((out / "shrink.json").read_text())
    assert summary["outcome"] == "minimal" and summary["minimal"] == ["broker@28s (faults.1 #0)"]
    assert [t["reproduced"] for t in summary["trials"]] == [True, False, False, True]
    minimal, _, _ = load_scenario(str(out / "minimal.toml"))
    assert [(f.kind, f.at_s, f.duration_s, f.mode, f.node) for f in minimal.faults] == [
        ("broker", 28.0, 15.0, "pause", 2)]
    assert minimal.seed == 5 and minimal.producers == load_scenario("broker-kill")[0].producers
    assert "broker@28s" in (out / "shrink.md").read_text()


def test_a_failure_that_does_not_come_back_is_not_shrunk(tmp_path, monkeypatch):
    ran = fake_runs(monkeypatch, lambda s: False)
    out, code = sh.shrink(failed_run(tmp_path), tmp_path / "out")
    assert code == 1 and len(ran) == 1 and not (out / "minimal.toml").exists()
    assert json.loads((out / "shrink.json").read_text())["outcome"] == "not reproduced"


def test_a_failure_without_any_fault_is_the_querys_own(tmp_path, monkeypatch):
    fake_runs(monkeypatch, lambda s: True)
    out, code = sh.shrink(failed_run(tmp_path), tmp_path / "out")
    assert code == 0 and load_scenario(str(out / "minimal.toml"))[0].faults == []
    assert json.loads((out / "shrink.json").read_text())["outcome"] == "fails without faults"


def test_another_failing_check_is_not_the_same_failure(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="--check 'latency'"):
        sh.shrink(failed_run(tmp_path), tmp_path / "out", checks=["latency"])


def test_the_budget_bounds_the_runs(tmp_path, monkeypatch):
    ran = fake_runs(monkeypatch, lambda s: any(at == 28.0 for _, at, _ in s))
    out, code = sh.shrink(failed_run(tmp_path), tmp_path / "out", max_runs=3)
    summary = json.loads((out / "shrink.json").read_text())
    assert code == 0 and len(ran) == 3 and summary["complete"] is False
    assert summary["outcome"] == "smaller, not proven minimal"


def test_a_run_of_a_users_query_is_measured_from_anywhere(tmp_path, monkeypatch):
    """The measuring step imports a user's query module from where the run found it (run_state.json's
    scenario_dir): `harness check` and a shrink re-judge such a run from another directory."""
    import sys

    from harness.analysis.measure import measure
    from harness.records.runstate import RunState

    home = SCENARIOS_DIR.parent / "tests" / "fixtures" / "shrink"
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p).resolve() != home.resolve()])
    sys.modules.pop("pause_then_restart", None)
    scenario = validate_resolved(tomllib.loads((home / "scenario.toml").read_text()), "fixture")
    monkeypatch.chdir(tmp_path)
    nowhere = measure(scenario, tmp_path, RunState(scenario_dir=None))
    assert "No module named 'pause_then_restart'" in (nowhere.problem or "")
    found = measure(scenario, tmp_path, RunState(scenario_dir=str(home)))
    assert found.result.query.oracle == "events", found.problem
