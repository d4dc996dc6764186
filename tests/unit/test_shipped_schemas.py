"""The JSON Schemas shipped in the package (issue 32, harness.schema): equal to the typed models they come from,
every field described, and what the harness reads and writes valid against them, checked by an independent
validator (jsonschema), which also refuses what breaks them: every recorded and re-judged result.json against
result.schema.json; every shipped scenario, example and recorded run's resolved scenario against
scenario.schema.json, and its scenario.json against scenario-record.schema.json; every recorded and re-judged
series.json against series.schema.json; every recorded run_state.json against run_state.schema.json; this
machine's environment.json against environment.schema.json."""
from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from harness.schema import GENERATED, SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RESULTS = sorted(FIXTURES.rglob("*result.json"))
SERIES = sorted(FIXTURES.rglob("*series.json"))
RUN_DIRS = sorted(p.name for p in (FIXTURES / "runs").iterdir() if (p / "scenario.json").is_file())
SCENARIO_FILES = sorted([*ROOT.glob("scenarios/*.toml"), *ROOT.glob("examples/**/scenario*.toml"),
                         *ROOT.glob("examples/*/scenarios/*.toml"), *ROOT.glob("scenarios/rehearsals/bases/*.toml")])


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


def _errors(name: str, data) -> list[str]:
    found = sorted(Draft202012Validator(_schema(name)).iter_errors(data), key=str)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in found[:5]]


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_each_shipped_schema_is_its_models(name):
    assert _schema(name) == json.loads(json.dumps(GENERATED[name]())), \
        f"harness/schemas/{name} is stale: `python -m harness.schema` writes it again"
    Draft202012Validator.check_schema(_schema(name))


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_every_field_is_described(name):
    schema = _schema(name)
    undescribed = [f"{model_name}.{field}" for model_name, model in {"(top)": schema, **schema.get("$defs", {})}.items()
                   for field, spec in model.get("properties", {}).items() if not spec.get("description")]
    assert undescribed == []


def test_there_is_enough_to_validate():
    assert len(RESULTS) >= 5 and len(SERIES) >= 5 and len(RUN_DIRS) >= 5 and len(SCENARIO_FILES) >= 50


@pytest.mark.parametrize("path", SERIES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_recorded_series_is_valid(path):
    assert _errors("series.schema.json", json.loads(path.read_text())) == []


def test_the_environment_a_run_records_here_is_valid(tmp_path):
    from harness.records import environment

    recorded = environment.record(tmp_path, {"kind": "kafka", "mode": "embedded"})
    assert json.loads((tmp_path / "environment.json").read_text()) == recorded
    assert _errors("environment.schema.json", recorded) == []
    assert set(recorded) <= set(_schema("environment.schema.json")["properties"]), "a key the schema does not name"


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_recorded_result_is_valid(path):
    assert _errors("result.schema.json", json.loads(path.read_text())) == []


@pytest.mark.parametrize("name", RUN_DIRS)
def test_what_the_judge_writes_today_and_the_scenario_it_ran_are_valid(name, tmp_path):
    """Each recorded run directory judged again (`harness check`, no Spark): today's result.json; and the
    scenario the run recorded, resolved with every default."""
    from harness.cli import main

    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / "runs" / name, run_dir)
    main(["check", str(run_dir)])
    assert _errors("result.schema.json", json.loads((run_dir / "result.json").read_text())) == []
    record = json.loads((run_dir / "scenario.json").read_text())
    assert _errors("scenario.schema.json", record["resolved"]) == []
    assert _errors("scenario-record.schema.json", record) == []
    assert _errors("series.schema.json", json.loads((run_dir / "series.json").read_text())) == []
    assert _errors("run_state.schema.json", json.loads((run_dir / "run_state.json").read_text())) == []


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_scenario_file_is_valid(path):
    assert _errors("scenario.schema.json", tomllib.loads(path.read_text(encoding="utf-8"))) == []


def test_what_breaks_them_is_refused():
    result = json.loads(RESULTS[0].read_text())
    result["verdict"] = "maybe"
    result["counts"]["lost"] = "none"
    del result["scenario"]
    found = " | ".join(_errors("result.schema.json", result))
    assert "'maybe' is not one of" in found and "'none' is not of type 'integer'" in found
    assert "'scenario' is a required property" in found
    scenario = tomllib.loads((ROOT / "scenarios" / "steady.toml").read_text())
    scenario["producers"]["rate"] = {"kind": "burst", "base_eps": 100}  # no period, duration or factor
    scenario["stream"]["partitions"] = 0
    found = " | ".join(_errors("scenario.schema.json", scenario))
    assert "partitions: 0 is less than the minimum of 1" in found, found
    assert "producers/rate" in found, found
    series = json.loads(SERIES[0].read_text())
    series["lag"]["lag"][0][0] = "many"
    del series["tasks"]["records"]
    found = " | ".join(_errors("series.schema.json", series))
    assert "lag/lag/0/0: 'many' is not of type 'integer'" in found and "'records' is a required property" in found
    assert "'platform' is a required property" in " | ".join(_errors("environment.schema.json", {
        "harness": "git x", "python": "3.11", "pyspark": "4.3.0", "java": "17", "cpu cores": "2"}))
