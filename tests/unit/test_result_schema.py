"""result.json's JSON Schema (issue 32): shipped with the package, every field described, equal to the typed model
it comes from, and every recorded run fixture valid against it, checked by an independent validator
(jsonschema), which also refuses a result that breaks it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from harness.result import SCHEMA_FILE, json_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RESULTS = sorted(FIXTURES.rglob("*result.json"))
RUN_DIRS = sorted(p.name for p in (FIXTURES / "runs").iterdir() if (p / "scenario.json").is_file())


def _schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def test_the_shipped_schema_is_the_models():
    assert _schema() == json_schema(), "harness/schemas/result.schema.json is stale: `python -m harness.result > " \
                                       "harness/schemas/result.schema.json`"
    Draft202012Validator.check_schema(_schema())


def test_every_field_is_described():
    schema = _schema()
    undescribed = [f"{name}.{field}" for name, model in {"RunResult": schema, **schema["$defs"]}.items()
                   for field, spec in model.get("properties", {}).items() if not spec.get("description")]
    assert undescribed == []


def test_there_are_recorded_fixtures_to_validate():
    assert len(RESULTS) >= 5 and len(RUN_DIRS) >= 5, (RESULTS, RUN_DIRS)


@pytest.mark.parametrize("name", RUN_DIRS)
def test_what_the_judge_writes_today_is_valid(name, tmp_path):
    """Each recorded run directory judged again (`harness check`, no Spark): today's result.json."""
    from harness.cli import main

    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / "runs" / name, run_dir)
    main(["check", str(run_dir)])
    result = json.loads((run_dir / "result.json").read_text())
    errors = sorted(Draft202012Validator(_schema()).iter_errors(result), key=str)
    assert errors == [], [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]]


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_recorded_result_is_valid(path):
    errors = sorted(Draft202012Validator(_schema()).iter_errors(json.loads(path.read_text())), key=str)
    assert errors == [], [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]]


def test_a_result_that_breaks_it_is_refused():
    result = json.loads(RESULTS[0].read_text())
    result["verdict"] = "maybe"
    result["counts"]["lost"] = "none"
    del result["scenario"]
    found = {e.message for e in Draft202012Validator(_schema()).iter_errors(result)}
    assert any("'maybe' is not one of" in m for m in found), found
    assert any("'none' is not of type 'integer'" in m for m in found), found
    assert any("'scenario' is a required property" in m for m in found), found
