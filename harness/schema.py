"""The JSON Schemas shipped in the package (harness/schemas/), every field described: the run directory's files a
user reads, result.json (harness.records.result.RunResult), scenario.json (the file, the overrides and the scenario
resolved), series.json (harness.analysis.series.Series), environment.json (harness.records.environment.FIELDS) and
run_state.json (harness.records.runstate.RunState); and a scenario (harness.config.Scenario: a scenario file, as TOML
or as JSON). Generated from the typed models, never kept by hand: `python -m harness.schema` writes them, and a test
fails when a shipped file differs from what its model gives.

An editor validates a scenario file against scenario.schema.json (taplo and the Even Better TOML extension take a
`#:schema` comment); a CI job validates a run's result.json against result.schema.json with any JSON Schema
validator.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent / "schemas"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def result_schema() -> dict[str, Any]:
    from harness.records.result import SCHEMA_VERSION, RunResult
    from harness.records.result import __doc__ as doc

    return {"$schema": DRAFT, "$id": f"https://spark-stream-harness/schemas/result-v{SCHEMA_VERSION}.schema.json",
            **RunResult.model_json_schema(), "title": "result.json", "description": (doc or "").strip()}


def scenario_schema() -> dict[str, Any]:
    from harness.config import Scenario

    return {"$schema": DRAFT, "$id": "https://spark-stream-harness/schemas/scenario.schema.json",
            **Scenario.model_json_schema(), "title": "a spark-stream-harness scenario",
            "description": "A scenario file (TOML): the backend, the stream, the traffic, the query under test, "
                           "the faults and the checks. `harness validate FILE` judges it in full (setting names "
                           "included, which this schema cannot)."}


def run_state_schema() -> dict[str, Any]:
    """run_state.json: harness.records.runstate.RunState as written (`extra`, the keys of an older file, flattened
    in)."""
    from pydantic import TypeAdapter

    from harness.records.runstate import RunState
    from harness.records.runstate import __doc__ as doc

    schema = TypeAdapter(RunState).json_schema()
    schema["properties"].pop("extra", None)
    schema["additionalProperties"] = True
    return {"$schema": DRAFT, "$id": "https://spark-stream-harness/schemas/run_state.schema.json", **schema,
            "title": "run_state.json", "description": (doc or "").strip()}


def scenario_record_schema() -> dict[str, Any]:
    """scenario.json: what a run was asked to run (its secrets shown as ***)."""
    scenario = scenario_schema()
    defs = scenario.pop("$defs", {})
    resolved = {k: v for k, v in scenario.items() if k not in ("$schema", "$id", "title")}
    resolved["description"] = ("The scenario as the run ran it: the file with the overrides applied and every "
                               "default filled in (a scenario.schema.json scenario; secrets as ***).")
    return {"$schema": DRAFT, "$id": "https://spark-stream-harness/schemas/scenario-record.schema.json",
            "title": "scenario.json", "description": "What the run was asked to run, written before it starts.",
            "type": "object", "required": ["file", "overrides", "resolved"],
            "properties": {
                "file": {"type": "string", "description": "The scenario file the run came from, as given."},
                "overrides": {"type": "array", "items": {"type": "string"},
                              "description": "The `--set key=value` overrides, in order (secrets as ***)."},
                "resolved": resolved},
            "$defs": defs}


def series_schema() -> dict[str, Any]:
    from harness.analysis.series import Series

    return {"$schema": DRAFT, "$id": "https://spark-stream-harness/schemas/series.schema.json",
            **Series.model_json_schema(by_alias=True), "title": "series.json"}


def environment_schema() -> dict[str, Any]:
    from harness.records.environment import FIELDS
    from harness.records.environment import __doc__ as doc

    return {"$schema": DRAFT, "$id": "https://spark-stream-harness/schemas/environment.schema.json",
            "title": "environment.json", "description": (doc or "").strip(), "type": "object",
            "properties": {key: {"type": "string", "description": text} for key, text in FIELDS.items()},
            "required": ["harness", "python", "pyspark", "java", "cpu cores", "platform"],
            "additionalProperties": {"type": "string"}}


GENERATED = {"result.schema.json": result_schema, "scenario.schema.json": scenario_schema,
             "scenario-record.schema.json": scenario_record_schema, "series.schema.json": series_schema,
             "environment.schema.json": environment_schema, "run_state.schema.json": run_state_schema}


def write_all() -> list[Path]:
    written = []
    for name, make in GENERATED.items():
        path = SCHEMAS / name
        path.write_text(json.dumps(make(), indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all():
        print(path)
