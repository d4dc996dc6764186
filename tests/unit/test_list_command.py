"""`harness list` (issue 32): columns a user picks by, filters, --json; expected values read from the scenario
files themselves with tomllib, not from the listing code."""
from __future__ import annotations

import json
import tomllib

import pytest

from harness.cli import main
from harness.files.paths import SCENARIOS_DIR


def _listed(capsys, *args) -> list[dict]:
    assert main(["list", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _file(name: str) -> dict:
    return tomllib.loads((SCENARIOS_DIR / f"{name}.toml").read_text())


def test_every_shipped_scenario_is_a_row_with_its_backend_kind_traffic_and_faults(capsys):
    rows = {r["name"]: r for r in _listed(capsys)}
    assert set(rows) == {p.stem for p in SCENARIOS_DIR.glob("*.toml")}
    steady, crash = rows["steady"], rows["crash-recovery"]
    assert (steady["backend"], steady["protocol"], steady["kind"]) == ("kafka", "kafka", "load")
    assert steady["traffic_s"] == _file("steady")["producers"]["duration_s"] and steady["faults"] == ""
    assert crash["kind"] == "faults"
    assert crash["faults"] == ", ".join(sorted({f["kind"] for f in _file("crash-recovery")["faults"]}))
    assert rows["eh-steady"]["protocol"] == "amqp" and rows["ehk-skew"]["protocol"] == "kafka"
    assert rows["soak"]["kind"] == "soak"
    sweep = _file("skew-tuning")["sweep"]
    runs = 1
    for values in sweep.values():
        runs *= len(values)
    assert rows["skew-tuning"]["kind"] == "sweep" and rows["skew-tuning"]["runs"] == runs
    assert "\n" not in steady["description"] and steady["description"].startswith(
        " ".join(_file("steady")["description"].split())[:40])


def test_filters_by_backend_kind_and_word(capsys):
    eh = _listed(capsys, "--backend", "eventhubs")
    assert eh and all(r["backend"] == "eventhubs" for r in eh)
    sweeps = _listed(capsys, "--kind", "sweep")
    assert {r["name"] for r in sweeps} == {p.stem for p in SCENARIOS_DIR.glob("*.toml") if "sweep" in _file(p.stem)}
    burst = _listed(capsys, "BURST")
    assert burst and all("burst" in (r["name"] + r["description"]).lower() for r in burst)


@pytest.mark.parametrize("args, message", [(["--backend", "kafak"], "--backend kafak: one of kafka, eventhubs"),
                                           (["--kind", "chaos"], "--kind chaos: one of load, faults, sweep, soak")])
def test_an_unknown_filter_is_refused(capsys, args, message):
    assert main(["list", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_table_wraps_descriptions_to_the_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["list", "steady"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["name", "backend", "protocol"]
    assert all(len(line) <= 100 for line in lines) and len(lines) > 2
