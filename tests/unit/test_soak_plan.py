"""The soak's plan: durations, the seeded random fault plan, and the replay of a stored night."""
from __future__ import annotations

import json

import pytest

from harness.config import ConfigError, load_scenario
from harness.soak.plan import draw_faults, replayed, resolve


def soak(*sets):
    return load_scenario("soak", list(sets))[0]


def test_random_faults_are_drawn_from_the_seed_within_the_window():
    plan = draw_faults(soak("producers.duration_s=3600"))
    assert plan == draw_faults(soak("producers.duration_s=3600"))  # the same seed, the same night
    assert plan != draw_faults(soak("producers.duration_s=3600", "seed=12"))
    starts = [f.get("at_s", f.get("window", [None])[0]) for f in plan]
    assert starts == sorted(starts) and starts[0] == 45.0  # soak.random_faults.start_s
    assert max(starts) <= 3600 - 90  # quiet_end_s
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= 60  # every_s = [60, 150] after the previous heal
    assert {f["kind"] for f in plan} == {"driver_kill", "network"}
    assert all("every_s" not in f and "count" not in f for f in plan)
    windows = [f["window"] for f in plan if "window" in f]
    assert windows and all(round(w[1] - w[0], 3) == 20.0 for w in windows)  # the catalog entry's own length


def test_weights_pick_only_weighted_entries():
    plan = draw_faults(soak("soak.random_faults.weights=[0, 0, 1]", "producers.duration_s=1800"))
    assert plan and all(f["kind"] == "network" and f["mode"] == "reset" for f in plan)


def test_weights_must_match_the_catalog():
    with pytest.raises(ConfigError, match="one per entry"):
        soak("soak.random_faults.weights=[1, 1]")


def test_the_resolved_scenario_replays_exactly(tmp_path):
    resolved = resolve(soak("producers.duration_s=900"))
    assert resolved.soak.random_faults is None and len(resolved.faults) >= 3
    (tmp_path / "scenario.json").write_text(json.dumps({"file": "scenarios/soak.toml", "overrides": [],
                                                        "resolved": resolved.model_dump(mode="json")}))
    again, source = replayed(tmp_path)
    assert again.model_dump() == resolved.model_dump() and source.name == "soak.toml"


def test_replay_of_a_directory_without_a_scenario_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="--replay .*scenario.json"):
        replayed(tmp_path)


def test_a_scenario_without_soak_gets_the_defaults_and_keeps_its_faults():
    resolved = resolve(load_scenario("crash-recovery")[0])
    assert resolved.soak is not None and resolved.soak.check_every_s == 30
    assert [f.kind for f in resolved.faults] == ["driver_kill"] and resolved.faults[0].count == 3
