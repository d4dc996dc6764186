"""`[sweep]`: one scenario run for every combination of the swept values, side by side, and the answer.

Every combination is loaded and validated before the first run starts (a bad value is exit 2, nothing run).
Each run is an ordinary run (harness.runner.run_one) in `<sweep dir>/<nn>-<values>/`, with the swept keys applied
as `--set` overrides (recorded in its scenario.json); with `[sweep] repeat = N` (or `--repeat N`) that directory
holds N repeats (harness.commands.repeat) and the combination's figures are their means. `sweep.json` is
rewritten atomically after every run, so an interrupted sweep keeps what it measured; `sweep.md` puts the key
figures of the runs next to each other.

**The answer** (`recommended`): among the combinations whose every run passed (the query sustained the load,
`sustained`, and met the latency limit when one is set, and nothing was lost or duplicated beyond the
scenario's limits), the one with the lowest end-to-end p99, ties broken by the higher processing rate; with the
runs it rests on. A combination that failed only the goal (GOAL_CHECKS: it did not keep up, or missed the
latency limit) is a finding, not a failure of the sweep: the sweep passes when a setting meets the goal and no
run failed anything else. A combination that could not be judged (its run `unjudged`: a check unknown, or the
machine too busy with other work to judge performance) leaves the comparison incomplete: the sweep is then
unjudged (exit 3), unless a run failed beyond the goal (then it fails).
"""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from harness import runner, secrets
from harness.files import atomic
from harness.analysis.cost import cpu_per_event, recovery_s
from harness.check import counts_against, exit_code, status_of
from harness.commands.repeat import run_repeats
from harness.commands.shared_broker import reason_not_shared, shared_broker
from harness.config import Scenario, load_scenario
from harness.console import Console
from harness.reports.compare import figure, recommended_line

GOAL_CHECKS = {"sustained", "latency_p99"}
MEANS = {"process_rps": "process_rps", "latency_p50_ms": "p50", "latency_p99_ms": "p99",
         "batch_p50_ms": "batch_p50_ms", "mean_lag": "mean_lag"}


def max_lag(result: dict) -> float | None:
    """The largest lag sampled in the steady window (before a run had one: in the whole run)."""
    lag = ((result.get("sustain") or {}).get("lag") or {}).get("max_lag")
    return lag if lag is not None else (result.get("lag_events") or {}).get("max")

def combinations(sweep: dict[str, list]) -> list[dict[str, Any]]:
    keys = list(sweep)
    return [dict(zip(keys, values)) for values in itertools.product(*(sweep[k] for k in keys))]


def toml_value(value: Any) -> str:
    """A swept value as TOML: a scalar, or an inline table (`spark.trigger = [{ kind = "realTime", ... }, ...]`
    sweeps settings that only make sense together, such as a trigger's kind with its interval)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', str(k)) else json.dumps(str(k))} = "
                                f"{toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def override_text(key: str, value: Any) -> str:
    """`key=value` as `--set` reads it back: values are TOML, and so is the key (harness.config.parse_override),
    its segments bare where TOML allows, quoted where not (`spark.conf.spark.app."my key"`)."""
    segments = (s if re.fullmatch(r"[A-Za-z0-9_-]+", s) else json.dumps(s) for s in key.split("."))
    return f"{'.'.join(segments)}={toml_value(value)}"


def _label_value(value: Any) -> str:
    if isinstance(value, dict):
        return "_".join(_label_value(v) for v in value.values())
    return str(value).lower() if isinstance(value, bool) else str(value)


def label(index: int, values: dict[str, Any]) -> str:
    text = "-".join(f"{k.rsplit('.', 1)[-1]}={_label_value(v)}" for k, v in values.items())
    return f"{index:02d}-" + re.sub(r"[^A-Za-z0-9=._-]+", "_", text)[:100]


def figures(result: dict) -> dict[str, Any]:
    """The figures a sweep compares (from a run's result.json)."""
    source, placement = result.get("source") or {}, result.get("placement") or {}
    consumers = result.get("consumers") or {}
    totals = source.get("totals") or {}
    return {
        "verdict": result.get("verdict"),
        "failed_checks": [c["name"] for c in result.get("checks") or [] if status_of(c) == "fail"],
        "unjudged_checks": [c["name"] for c in result.get("checks") or []
                            if counts_against(c) and status_of(c) != "fail"],
        "process_rps": figure(result, "process_rps"),
        "latency_p50_ms": figure(result, "p50"),
        "latency_p99_ms": figure(result, "p99"),
        "batches": result.get("batches"),
        "batch_p50_ms": figure(result, "batch_p50_ms"),
        "max_lag": max_lag(result),
        "mean_lag": figure(result, "mean_lag"),
        "receivers_created": totals.get("created"), "receivers_reused": totals.get("reused"),
        "receiver_mismatches": totals.get("mismatch"),
        "consumers_created": consumers.get("created"),
        "consumers_created_later": consumers.get("created_after_first_data_batch"),
        "same_executor_as_last_batch": placement.get("same_executor_as_last_batch"),
        "task_spread": ((placement.get("task_ms") or {}).get("median_max_over_median")),
        "rate_limited_batches": ((result.get("batch_stats") or {}).get("rate_limited") or {}).get("batches"),
        "tasks_per_executor": placement.get("tasks_per_executor"),
        "query_cpu_ms_per_event": cpu_per_event(result)["query_ms"],
        "recovery_s": recovery_s(result),
        "duplicates": (result.get("counts") or {}).get("duplicates"),
    }


def repeated_figures(summary: dict, results: list[dict]) -> dict[str, Any]:
    """A repeated combination's figures: the first run's, the measured ones replaced by the repeats' means; its
    verdict the worst, its failed checks all of theirs."""
    out = figures(results[0])
    for key, name in MEANS.items():
        values = [v for r in results if (v := figure(r, name)) is not None]
        out[key] = sum(values) / len(values) if values else None
    maxima = [v for r in results if (v := max_lag(r)) is not None]
    out["max_lag"] = max(maxima) if maxima else None
    out["verdict"] = summary["verdict"]
    out["failed_checks"] = sorted({c for r in summary["runs"] for c in r["failed_checks"]})
    out["unjudged_checks"] = sorted({c for r in summary["runs"] for c in r.get("unjudged_checks") or []})
    out["repeats"] = len(results)
    return out


def recommend(runs: list[dict]) -> dict[str, Any] | None:
    """The combination that meets the goal at the lowest p99 (module docstring)."""
    eligible = [r for r in runs if r["verdict"] == "pass" and r.get("latency_p99_ms") is not None]
    if not eligible:
        return None
    best = min(eligible, key=lambda r: (r["latency_p99_ms"], -(r.get("process_rps") or 0.0)))
    return {"values": best["values"], "run_dir": best["run_dir"], "latency_p99_ms": best["latency_p99_ms"],
            "process_rps": best.get("process_rps"), "met_goal": [r["run_dir"] for r in eligible],
            "missed_goal": {r["run_dir"]: r["failed_checks"] + r.get("unjudged_checks", []) for r in runs
                            if r not in eligible},
            "why": f"the lowest p99 of the {len(eligible)} of {len(runs)} combinations that passed (sustained the "
                   f"load, within the latency limit when one is set, nothing lost)"}


def _result(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return {"verdict": "unjudged"}


def sweep_verdict(runs: list[dict], recommended: dict | None) -> str:
    """fail when a run failed beyond the goal; else unjudged when a run was; else pass when a setting met the goal."""
    if any(set(r["failed_checks"]) - GOAL_CHECKS for r in runs):
        return "fail"
    if any(r["verdict"] not in ("pass", "fail") for r in runs):
        return "unjudged"
    return "pass" if recommended else "fail"


def run_sweep(scenario: Scenario, name_or_path: str, overrides: list[str], out: Path | None, console: Console,
              repeat: int | None = None):
    combos = combinations(scenario.sweep)
    repeat = repeat or scenario.sweep_repeat
    plans = [(values, list(overrides) + [override_text(k, v) for k, v in values.items()])
             for values in combos]
    # every combination loaded and valid before anything starts; each runs as loaded here
    runs = [(values, sets, *load_scenario(name_or_path, sets)[:2]) for values, sets in plans]
    loaded = [scenario for _, _, scenario, _ in runs]
    sweep_dir = runner.new_run_dir(scenario.name, out)
    summary: dict[str, Any] = {"scenario": scenario.name, "keys": list(scenario.sweep),
                               "overrides": [secrets.redacted_override(o) for o in overrides],  # no secret
                               "planned": len(plans), "repeat": repeat, "runs": [], "verdict": "unjudged"}
    why = reason_not_shared(loaded)  # one broker for every run when they allow it (harness.commands.shared_broker)
    summary["broker"] = {"shared": why is None, "why_not": why}
    with shared_broker(loaded, sweep_dir, console, "sweep") as shared:
        interrupted = _run_plans(runs, repeat, sweep_dir, console, summary, shared)
    if not interrupted:  # an interrupted sweep stays unjudged: its missing runs were never measured
        summary["recommended"] = recommend(summary["runs"])
        summary["verdict"] = sweep_verdict(summary["runs"], summary["recommended"])
    atomic.write_json(sweep_dir / "sweep.json", summary)
    write_sweep_reports(sweep_dir, summary)
    console.info(f"sweep {scenario.name}: {summary['verdict'].upper()} ({len(summary['runs'])}/{len(plans)} runs)"
                 f"; comparison: {sweep_dir}/sweep.html, sweep.md")
    if summary.get("recommended"):
        print(recommended_line(summary), flush=True)
    return runner.RunOutcome(sweep_dir, summary, 130 if interrupted else exit_code(summary["verdict"]))


def _run_plans(runs: list, repeat: int, sweep_dir: Path, console: Console, summary: dict, shared) -> bool:
    """Every combination's run(s) (values, overrides, the scenario as loaded, its file), recorded in sweep.json
    after each; True when interrupted. `shared`: gives each run the sweep's broker (None: each run starts its
    own)."""
    for i, (values, sets, scenario, path) in enumerate(runs):
        sub = sweep_dir / label(i, values)
        what = ", ".join(override_text(k, v) for k, v in values.items())
        if repeat > 1:
            outcome = run_repeats(scenario, path, sets, repeat, sub, console,
                                  label=f"sweep run {i + 1}/{len(runs)} ({what}): ", backend=shared)
            results = [_result(sub / r["run_dir"]) for r in outcome.result["runs"]]
            row = repeated_figures(outcome.result, results)
        else:
            console.info(f"sweep run {i + 1}/{len(runs)}: {what}")
            outcome = runner.run_loaded(scenario, path, sets, sub, console, shared() if shared is not None else None)
            row = figures(outcome.result)
        shown = {k: toml_value(v) if isinstance(v, dict) else v for k, v in values.items()}  # a table as its text
        summary["runs"].append({"values": secrets.redacted(shown), "run_dir": sub.name, "exit_code": outcome.exit_code,
                                **row})
        atomic.write_json(sweep_dir / "sweep.json", summary)
        if outcome.exit_code == 130:
            return True
    return False


def write_sweep_reports(sweep_dir: Path, summary: dict) -> None:
    """sweep.md, and sweep.html once there are two runs to put side by side."""
    from harness.reports.compare_html import sweep_html

    atomic.write_text(sweep_dir / "sweep.md", sweep_markdown(summary))
    page = sweep_html(sweep_dir, summary)
    if page is not None:
        atomic.write_text(sweep_dir / "sweep.html", page)


COLUMNS = (("verdict", "verdict"), ("process_rps", "rows/s while busy"), ("latency_p50_ms", "p50 ms"),
           ("latency_p99_ms", "p99 ms"), ("batches", "batches"), ("batch_p50_ms", "batch p50 ms"),
           ("max_lag", "max lag"), ("rate_limited_batches", "batches capped"),
           ("task_spread", "slowest task / median"), ("receivers_created", "receivers created"),
           ("receivers_reused", "reused"), ("receiver_mismatches", "mismatches"),
           ("consumers_created", "consumers created"), ("consumers_created_later", "after 1st batch"),
           ("same_executor_as_last_batch", "same executor"), ("tasks_per_executor", "tasks per executor"),
           ("query_cpu_ms_per_event", "query CPU ms/event"),
           ("recovery_s", "recovery s"), ("duplicates", "duplicates"))


def sweep_markdown(summary: dict) -> str:
    runs = summary["runs"]
    shown = [(k, title) for k, title in COLUMNS if any(r.get(k) is not None for r in runs)]
    head = summary["keys"] + [title for _, title in shown]
    repeat = summary.get("repeat") or 1
    lines = [f"# Sweep: {summary['scenario']} ({summary['verdict']})", "",
             f"**{recommended_line(summary)}**" if "recommended" in summary else
             "(interrupted: no answer)" if summary.get("verdict") == "unjudged" else "(recorded before sweeps answered)",
             "",
             f"{len(runs)} of {summary['planned']} combinations"
             + (f", each run {repeat} times (figures: their means)" if repeat > 1 else "")
             + f"; swept: {', '.join(summary['keys'])}.", *_broker_line(summary.get("broker")), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        cells = [_cell(r["values"][k]) for k in summary["keys"]] + [_cell(r.get(k)) for k, _ in shown]
        lines.append("| " + " | ".join(cells) + " |")
    failed = [r for r in runs if r["failed_checks"] or r.get("unjudged_checks")]
    if failed:
        lines += [""] + [f"- {r['run_dir']}: "
                         + "; ".join(([f"failed {', '.join(r['failed_checks'])}"
                                       + (" (the goal only: not recommended)"
                                          if set(r["failed_checks"]) <= GOAL_CHECKS else "")]
                                      if r["failed_checks"] else [])
                                     + ([f"unjudged {', '.join(r['unjudged_checks'])}"]
                                        if r.get("unjudged_checks") else []))
                         for r in failed]
    return "\n".join(lines) + "\n"


def _broker_line(broker: dict | None) -> list[str]:
    """Whether the runs shared one broker (harness.commands.shared_broker), and why not when they did not."""
    if not broker:
        return []
    return ["One Kafka broker for every run (a fresh topic, driver, checkpoint and sink per run; each result.json "
            "names the broker)." if broker.get("shared") else f"A broker per run: {broker.get('why_not')}."]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):  # tasks per executor: `executor: n, ...`
        return ", ".join(f"{k}: {_cell(v)}" for k, v in value.items())
    return str(value)
