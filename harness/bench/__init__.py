"""Benchmarks (`harness bench NAME|all`): each measured side by side with its reference in one run, never as timed
tests, and all of them printed as one table.

Every benchmark is a `run_bench(json_path, quick=False) -> dict` returning at least `rows`, one per measured
figure: `name`, `value`, `unit`, `reference` (the figure measured side by side in the same run: a plain client
loop, the instrumentation off, the old engine ...), `reference_name`, `ratio` (value / reference), `goal` (in
words, e.g. ">= 0.6") and `ok` (the goal met; None without a goal); anything else it returns is kept as details.

`all` runs them in the fixed order of BENCHES in one invocation. One bench failing (an exception) is recorded
under its name with the error and the others still run; the exit code is then 1. A missed goal is not an error:
the table shows it.

`harness bench verdicts SCENARIO` (harness.bench.verdicts) is not one of them: it runs a scenario many times, quiet,
with cores busy and cold, to show whether its verdict holds, with options and a directory of its own.
"""
from __future__ import annotations

import importlib
import math
import traceback
from typing import Callable

from harness.files import atomic
from harness.console import Console

# name -> `module:function`, in the order `all` runs them (cheapest, least disturbing first is not the point:
# the order is fixed so two nights' tables line up)
BENCHES: dict[str, str] = {
    "producers": "harness.bench.producers:run_bench",
    "footprint": "harness.bench.footprint:run_bench",
    "kafka-query": "harness.bench.kafka_query:run_bench",
    "emulator": "harness.bench.emulator:run_bench",
    "eh-source": "harness.bench.eh_source:run_bench",
    "eh-producers": "harness.bench.eh_producers:run_bench",
    "checker": "harness.bench.checker:run_bench",
    "startup": "harness.bench.startup:run_bench",
    "rtm": "harness.bench.rtm:run_bench",
    "kafka-hostile": "harness.bench.kafka_hostile:run_bench",
}
ROW_KEYS = ("name", "value", "unit", "reference", "reference_name", "ratio", "goal", "ok")


def row(name: str, value: float, unit: str, *, reference: float | None = None, reference_name: str | None = None,
        goal: str | None = None, ok: bool | None = None, ratio: float | None = None) -> dict:
    """One table row; `ratio` is value / reference unless given (a figure whose goal is on another ratio)."""
    if ratio is None and reference not in (None, 0) and value is not None:
        ratio = float(value) / float(reference)
    return {"name": name, "value": None if value is None else float(value), "unit": unit,
            "reference": None if reference is None else float(reference), "reference_name": reference_name,
            "ratio": None if ratio is None else float(ratio), "goal": goal, "ok": ok}


def check_rows(result: object) -> list[dict]:
    """The rows of a bench's result, or ValueError naming what is missing (a bench that breaks the shape is a
    failed bench, not a table with holes)."""
    if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
        raise ValueError("the bench returned no 'rows' list")
    for i, r in enumerate(result["rows"]):
        missing = [k for k in ROW_KEYS if not isinstance(r, dict) or k not in r]
        if missing:
            raise ValueError(f"row {i} lacks {', '.join(missing)}")
    return result["rows"]


def resolve(name: str) -> Callable[..., dict]:
    module, _, attr = BENCHES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def run_benches(names: list[str], *, quick: bool = False, console: Console | None = None,
                runner: Callable[[str], Callable[..., dict]] | None = None) -> tuple[dict[str, dict], bool]:
    """Run `names` in order; returns ({name: result}, every bench ran). A bench that raised is recorded as
    {"error": ..., "rows": []}."""
    console = console or Console()
    runner = runner or resolve
    results: dict[str, dict] = {}
    all_ran = True
    for name in names:
        console.info(f"bench {name} ...")
        try:
            result = runner(name)(None, quick=quick)
            check_rows(result)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - one bench failing must not hide the others' figures
            all_ran = False
            result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:],
                      "rows": []}
            console.warn(f"bench {name} failed: {result['error']}")
        results[name] = result
    return results, all_ran


def write_json(path: str, results: dict[str, dict], single: bool) -> None:
    """One bench's dict for a single bench, one object keyed by bench name for several."""
    atomic.write_json(path, next(iter(results.values())) if single else results)


def fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    a = abs(value)
    if a >= 100:
        return f"{value:,.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    if a >= 0.001 or a == 0:
        return f"{value:.3f}"
    return f"{value:.2e}"


def table(results: dict[str, dict]):
    """One rich table: a row per figure of every bench, a failed bench as one row with its error."""
    from rich.table import Table

    t = Table(title="harness bench", show_header=True, header_style="bold")
    for col, justify in (("bench", "left"), ("name", "left"), ("value", "right"), ("unit", "left"),
                         ("reference", "right"), ("ratio", "right"), ("goal", "left"), ("ok", "left")):
        t.add_column(col, justify=justify, overflow="fold")
    for bench, result in results.items():
        if result.get("error"):
            t.add_row(bench, "[red]failed[/red]", "-", "", "-", "-", "", f"[red]{result['error'][:200]}[/red]")
            continue
        for r in result["rows"]:
            ref = fmt(r["reference"])
            if r["reference"] is not None and r.get("reference_name"):
                ref = f"{ref} ({r['reference_name']})"
            ok = {True: "[green]yes[/green]", False: "[red]NO[/red]"}.get(r["ok"], "-")
            t.add_row(bench, r["name"], fmt(r["value"]), r["unit"], ref, fmt(r["ratio"]), r["goal"] or "", ok)
    return t


def wide_console(console: Console):
    """Where a bench prints its table: the terminal, or for a CI log or a pipe (no terminal width to fit) a
    console 180 columns wide, so each row stays on one line."""
    if console.rich.is_terminal:
        return console.rich
    from rich.console import Console as RichConsole

    return RichConsole(width=180, highlight=False, soft_wrap=False)


def main(what: str, json_path: str | None, quick: bool, console: Console | None = None) -> int:
    """`harness bench WHAT`: run, print the table, write the JSON; 0 when every bench ran, 1 otherwise."""
    console = console or Console()
    names = list(BENCHES) if what == "all" else [what]
    results, all_ran = run_benches(names, quick=quick, console=console)
    wide_console(console).print(table(results))
    if json_path:
        write_json(json_path, results, single=what != "all")
    return 0 if all_ran else 1
