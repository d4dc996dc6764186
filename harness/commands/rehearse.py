"""`harness rehearse FILE`: a matrix of changes rolled out on one base scenario's live checkpoint, one run each,
and the table that says which survived.

A rehearsal file is pure data (scenarios/rehearsals/*.toml): `base` names a scenario (a name, or a path relative
to the file), `at_s` when phase A stops (default for every change), and one `[[changes]]` table per change, each
a `change` fault's options (harness.faults.change: `spark`, `stop`, `rule`, `refused_with`, `in_force`) with a
`name` and, when phase A itself must differ from the base (a RocksDB store before its changelog is turned on, an
older PySpark before an upgrade), `set`: `--set` overrides of the base for that change's run. Every change's
scenario is built and validated before the first run (bad input: exit 2, naming the file and `changes.<i>`);
each runs as an ordinary run in `<out>/<nn>-<name>/`.

What a row says (reports.rehearsal): restarted (or Spark's error class when it refused), exactly-once held
across the change (the run's delivery checks, or its oracle's), the state carried (the state at the change and
the final state against the history's, for a stateful query), the settings in force, Spark's documented rule for
the change and whether what happened differs from it (a finding, listed first). rehearsal.json is rewritten
atomically after each run, so an interrupted rehearsal keeps its rows (and runs no further change: exit 130). The
exit code is the runs' (each judged against what its change declares): 0 when all passed, 1 when one failed, 3
when one could not be judged.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness import runner
from harness.config import ConfigError, Scenario, format_errors, load_scenario, read_toml, scenario_path
from harness.files.paths import SCENARIOS_DIR
from harness.console import Console
from harness.faults.change import ChangeOptions
from harness.files import atomic, outdir
from harness.reports.rehearsal import row_of, write_rehearsal_reports

REHEARSALS_DIR = SCENARIOS_DIR / "rehearsals"

WORST = {"pass": 0, "unjudged": 1, "fail": 2}


class ChangeRow(BaseModel):
    """One change of a rehearsal: a `change` fault's options (its `kind` implied), named, with phase A's own
    overrides of the base."""
    model_config = ConfigDict(extra="allow")  # the change fault's own fields, validated by ChangeOptions

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._>+(),-]{0,79}$", description="the change, as the report "
                                                                                   "names it")
    set: list[str] = Field(default_factory=list, description="--set overrides of the base scenario for this "
                                                            "change's run (phase A's own settings)")
    base: str | None = Field(None, min_length=1, description="this change's own base scenario (default: the "
                                                             "rehearsal's)")


class Rehearsal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    base: str = Field(min_length=1, description="the base scenario: a name, or a path relative to this file")
    at_s: float = Field(15.0, ge=0, description="when phase A stops, seconds after traffic starts (a change's "
                                                "own at_s wins)")
    changes: list[ChangeRow] = Field(min_length=1, max_length=64)

    @field_validator("changes")
    @classmethod
    def _names_unique(cls, rows: list[ChangeRow]) -> list[ChangeRow]:
        names = [r.name for r in rows]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"change names must differ: {twice[0]!r} is given twice")
        return rows


def rehearsal_path(name_or_path: str) -> Path:
    """A name from scenarios/rehearsals/ or a path to a .toml file."""
    return scenario_path(name_or_path, REHEARSALS_DIR, "rehearsal")


def load_rehearsal(path: Path) -> Rehearsal:
    data = read_toml(path)
    try:
        return Rehearsal.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(path, exc)) from None


def base_path(base: str, path: Path) -> str:
    """A base scenario: a path relative to the rehearsal file when one is there, else a scenario's name."""
    near = path.parent / base
    return str(near) if near.suffix == ".toml" or near.is_file() else base


def fault_of(rehearsal: Rehearsal, row: ChangeRow) -> dict[str, Any]:
    """The change fault's table for `row`: its options with the rehearsal's defaults."""
    options = {k: v for k, v in (row.model_extra or {}).items()}
    options.setdefault("at_s", rehearsal.at_s)
    options.setdefault("name", row.name)
    return {"kind": "change", **options}


def build(rehearsal: Rehearsal, path: Path) -> list[tuple[ChangeRow, Scenario, Path, list[str]]]:
    """Every change's scenario, validated (ConfigError naming the rehearsal file and the change otherwise)."""
    out = []
    for i, row in enumerate(rehearsal.changes):
        fault = fault_of(rehearsal, row)
        where = f"{path}: changes.{i} ({row.name})"
        try:
            ChangeOptions.model_validate(fault)
        except ValidationError as exc:
            raise ConfigError(format_errors(where, exc)) from None

        def amend(data: dict, fault=fault, i=i) -> None:
            data["name"] = f"{rehearsal.name}-{i:02d}"[:64]
            data["description"] = f"{rehearsal.name}: {row.name} (rehearsal {path.name}, change {i})"
            data["faults"] = [*data.get("faults", []), fault]
            data.pop("sweep", None)

        try:
            scenario, scenario_file, _ = load_scenario(base_path(row.base or rehearsal.base, path), row.set,
                                                       amend=amend)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        out.append((row, scenario, scenario_file, row.set))
    return out


def slug(index: int, name: str) -> str:
    return f"{index:02d}-" + re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:60]


def rehearse(name_or_path: str, out: Path | None = None, only: list[str] | None = None,
             console: Console | None = None, replace: bool = False) -> tuple[Path, int]:
    """Every change of the rehearsal (or those named in `only`) run in turn; (its directory, the exit code)."""
    console = console or Console()
    outdir.check(out, replace)
    path = rehearsal_path(name_or_path)
    rehearsal = load_rehearsal(path)
    runs = build(rehearsal, path)  # all validated before the first run
    if only:
        unknown = sorted(set(only) - {row.name for row, *_ in runs})
        if unknown:
            raise ConfigError(f"--only {unknown[0]!r}: not a change of {path}; its changes: "
                              + ", ".join(row.name for row, *_ in runs))
        runs = [r for r in runs if r[0].name in only]
    outdir.prepare(out, replace)  # an earlier output replaced only once every change is known good
    out = runner.new_run_dir(f"{rehearsal.name}-rehearsal", out)
    summary: dict[str, Any] = {"rehearsal": rehearsal.name, "file": str(path), "description": rehearsal.description,
                               "base": rehearsal.base, "rows": []}
    atomic.write_json(out / "rehearsal.json", summary)  # the directory is the harness's from the start
    for i, (row, scenario, scenario_file, overrides) in enumerate(runs):
        console.info(f"change {i + 1}/{len(runs)}: {row.name}")
        outcome = runner.run_loaded(scenario, scenario_file, overrides, out / slug(i, row.name), console)
        summary["rows"].append(row_of(row.name, outcome.run_dir, outcome.result, fault_of(rehearsal, row)))
        summary["verdict"] = max((r["verdict"] for r in summary["rows"]), key=lambda v: WORST.get(v, 2))
        atomic.write_json(out / "rehearsal.json", summary)
        if outcome.exit_code == 130:  # Ctrl-C or SIGTERM: the rows so far kept, no further change run
            summary["interrupted"] = f"stopped after {i + 1} of {len(runs)} changes"
            atomic.write_json(out / "rehearsal.json", summary)
            break
    write_rehearsal_reports(out, summary)
    console.info(f"rehearsal {rehearsal.name}: {summary.get('verdict', 'unjudged').upper()}; {out / 'rehearsal.md'}")
    return out, 130 if summary.get("interrupted") else {"pass": 0, "unjudged": 3}.get(summary["verdict"], 1)
