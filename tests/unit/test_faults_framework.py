"""The fault framework's pure parts: the seeded schedule, the nemesis's bookkeeping, scenario validation."""
import json
import threading
import time
from pathlib import Path

import pytest

from harness.config import ConfigError, load_scenario
from harness.faults import FAULTS, Fault, FaultOptions
from harness.faults.nemesis import Nemesis, recorded_faults
from harness.faults.schedule import plan
from harness.records.timeline import Timeline


def opts(**kw):
    return FaultOptions(kind="x", **kw)


def test_single_injection_at_its_time_healed_after_duration():
    [step] = plan([opts(at_s=5, duration_s=3)], seed=1, horizon_s=60)
    assert (step.inject_s, step.heal_s) == (5, 8)


def test_window_is_inject_at_start_heal_at_end():
    [step] = plan([opts(window=(10, 25))], seed=1, horizon_s=60)
    assert (step.inject_s, step.heal_s) == (10, 25)


def test_repeats_stop_at_count_until_or_horizon():
    assert [s.inject_s for s in plan([opts(at_s=5, every_s=10, count=3)], 1, 100)] == [5, 15, 25]
    assert [s.inject_s for s in plan([opts(at_s=5, every_s=10, until_s=30)], 1, 100)] == [5, 15, 25]
    assert [s.inject_s for s in plan([opts(at_s=5, every_s=10)], 1, 20)] == [5, 15]


def test_jitter_is_seeded_bounded_and_replays():
    f = [opts(at_s=5, every_s=10, count=20, jitter_s=2)]
    a, b, c = plan(f, 7, 1000), plan(f, 7, 1000), plan(f, 8, 1000)
    assert a == b and a != c
    for n, step in enumerate(a):
        assert 5 + 10 * n <= step.inject_s <= 5 + 10 * n + 2


def test_schedule_errors_are_clear():
    with pytest.raises(ValueError, match="at_s"):
        opts()
    with pytest.raises(ValueError, match="count > 1 needs every_s"):
        opts(at_s=1, count=2)
    with pytest.raises(ValueError, match="window replaces"):
        opts(at_s=1, window=(1, 2))


class _Recording(Fault):
    kind = "x"
    Options = FaultOptions
    calls: list = []

    def inject(self, ctx):
        self.calls.append(("inject", self.options.at_s, time.time()))
        if self.options.at_s == 0.3:
            raise RuntimeError("boom")
        return {"did": "it"}

    def heal(self, ctx):
        self.calls.append(("heal", self.options.at_s, time.time()))
        return {}


class _Ctx:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.timeline = Timeline(run_dir / "timeline.jsonl")
        self.traffic_start = time.time()


def test_nemesis_runs_the_schedule_records_it_and_heals_everything(tmp_path, monkeypatch):
    monkeypatch.setitem(FAULTS, "x", _Recording)
    _Recording.calls = []
    ctx = _Ctx(tmp_path)
    faults = [opts(at_s=0.1, duration_s=0.05), opts(at_s=0.2), opts(at_s=0.3)]
    nemesis = Nemesis(ctx, faults, seed=1, horizon_s=1)
    nemesis.start()
    nemesis.finish(timeout=10)
    kinds = [(c[0], c[1]) for c in _Recording.calls]
    assert kinds[:2] == [("inject", 0.1), ("heal", 0.1)]  # healed at its own time
    assert ("inject", 0.2) in kinds and ("heal", 0.2) in kinds  # healed by finish()
    assert ("heal", 0.3) in kinds  # a failed injection is still healed (it may be half applied)
    assert any("boom" in e for e in nemesis.errors)
    records = recorded_faults(tmp_path)
    assert [r["fault"] for r in records] == [0, 1, 2]
    assert all(r["injected_at"] and r["healed_at"] for r in records)
    assert records[0]["detail"] == {"inject_did": "it"}
    assert records[2]["errors"] == ["inject: RuntimeError: boom"]
    events = [json.loads(line)["event"] for line in (tmp_path / "timeline.jsonl").read_text().splitlines()]
    assert events.count("fault_inject") == 3 and events.count("fault_heal") == 3


def test_stop_heals_what_is_injected_and_skips_the_rest(tmp_path, monkeypatch):
    monkeypatch.setitem(FAULTS, "x", _Recording)
    _Recording.calls = []
    ctx = _Ctx(tmp_path)
    nemesis = Nemesis(ctx, [opts(at_s=0.05), opts(at_s=30)], seed=1, horizon_s=60)
    nemesis.start()
    deadline = time.time() + 5
    while not _Recording.calls and time.time() < deadline:
        time.sleep(0.01)
    nemesis.stop()
    assert [(c[0], c[1]) for c in _Recording.calls] == [("inject", 0.05), ("heal", 0.05)]
    assert not nemesis.is_alive()


def write(tmp_path, text):
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[producers]\nrate = { kind = "constant", eps = 10 }\n' + text)
    return path


def test_unknown_fault_kind_names_the_field_and_the_kinds(tmp_path):
    path = write(tmp_path, '[[faults]]\nkind = "meteor"\nat_s = 1\n')
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path))
    assert f"{path}: faults[0]" in str(err.value) and "delete_records" in str(err.value)


def test_unknown_fault_option_names_what_is_allowed(tmp_path):
    path = write(tmp_path, '[[faults]]\nkind = "delete_records"\nat_s = 1\npartition = [0]\n')
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path))
    assert "faults[0]" in str(err.value) and "partition: unknown key; did you mean 'partitions'? allowed:" in str(err.value)
    assert "partitions" in str(err.value)


def test_a_fault_that_does_not_fit_the_scenario_is_refused(tmp_path):
    path = write(tmp_path, '[stream]\npartitions = 4\n[[faults]]\nkind = "delete_records"\nat_s = 1\npartitions = [9]\n')
    with pytest.raises(ConfigError, match=r"faults.0 \(delete_records\): partitions \[9\] out of range"):
        load_scenario(str(path))
