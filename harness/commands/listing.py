"""`harness list`: the shipped scenarios as a table a reader can scan and a script can filter.

Each row says what a user picks by: the backend and the protocol it is spoken over (`eh-` scenarios are Event
Hubs over AMQP, `ehk-` the same through its Kafka endpoint), the kind (load: neither faults nor a sweep; faults;
sweep: several runs, one per combination; soak), how long its traffic lasts (a sweep: times its runs), the faults
it injects, and its description. Scenarios are read without judging their setting names (that takes a JVM the
first time; `harness validate NAME` does it), so the list is instant; one that does not load is listed with why.
"""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from harness.commands.sweep import combinations
from harness.config import validate_resolved

KINDS = ("load", "faults", "sweep", "soak")
BACKENDS = ("kafka", "eventhubs")
COLUMNS = ("name", "backend", "protocol", "kind", "traffic", "faults", "description")


def describe(path: Path) -> dict:
    """One scenario file as a row (COLUMNS' keys; `traffic_s` and `runs` for --json)."""
    row = {"name": path.stem, "backend": "", "protocol": "", "kind": "", "traffic": "", "faults": "",
           "traffic_s": None, "runs": None, "description": ""}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        scenario = validate_resolved(data, str(path))
    except Exception as exc:  # noqa: BLE001 - the list goes on; `harness validate` says why in full
        return row | {"description": f"(does not load: {type(exc).__name__}; `harness validate {path.stem}` says "
                                     f"why)"}
    backend = str(scenario.backend.kind)
    protocol = getattr(scenario.backend, "protocol", None) or "kafka"
    runs = len(combinations(scenario.sweep)) * scenario.sweep_repeat if scenario.sweep else 1
    kind = "soak" if scenario.soak else "sweep" if scenario.sweep else "faults" if scenario.faults else "load"
    traffic_s = float(scenario.producers.duration_s)
    traffic = f"{traffic_s:g} s" + (f" x {runs} runs" if runs > 1 else "")
    faults = sorted({str(f.kind) for f in scenario.faults})
    return row | {"backend": backend, "protocol": protocol, "kind": kind, "traffic": traffic,
                  "faults": ", ".join(faults), "traffic_s": traffic_s, "runs": runs,
                  "description": " ".join(scenario.description.split())}


def rows(directory: Path, *, backend: str | None = None, kind: str | None = None,
         word: str | None = None) -> list[dict]:
    """The scenarios in `directory` the filters keep: `word` matched in the name or description, any case."""
    found = []
    for path in sorted(directory.glob("*.toml")):
        r = describe(path)
        if backend and r["backend"] != backend:
            continue
        if kind and r["kind"] != kind:
            continue
        if word and word.lower() not in f"{r['name']} {r['description']}".lower():
            continue
        found.append(r)
    return found


def render(found: list[dict], as_json: bool) -> str | None:
    """--json: the rows as a JSON list (returned); else a table wrapped to the terminal (printed, None)."""
    if as_json:
        return json.dumps(found, indent=2)
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
    if not console.is_terminal:  # a pipe or CI log: the COLUMNS a shell exports, else wide enough to stay readable
        console = Console(soft_wrap=False, width=int(os.environ.get("COLUMNS") or 160))
    table = Table(expand=True, pad_edge=False, box=None, header_style="bold")
    for col in COLUMNS:
        table.add_column(col, no_wrap=col != "description", ratio=1 if col == "description" else None)
    for r in found:
        table.add_row(*(r[c] for c in COLUMNS))
    console.print(table)
    return None
