"""The Event Hubs source's read tasks in report.md (figures: harness.analysis.source_tasks)."""
from __future__ import annotations


def source_section(summary: dict) -> list[str]:
    """The report's Markdown for it."""
    if not summary:
        return []
    t, pl = summary["totals"], summary["placement"]
    lines = ["", "## Event Hubs source tasks",
             f"{summary['tasks']} read tasks, {t['rows']:,} events; receivers created {t['created']}, reused "
             f"{t['reused']}, recreated after a cursor mismatch {t['mismatch']}, after a steal {t['stolen']}; "
             f"events skipped as expired {t['expired_skipped']:,}; tasks that failed {summary['task_errors']}.",
             f"Placement: tasks per executor {pl['tasks_per_executor']}; a partition read by the same Python worker "
             f"as in its previous batch {pct(pl['same_worker_as_last_batch'])} of the time.", ""]
    for name, s in pl.get("strategies", {}).items():
        lines.append(f"- the connector's {name} strategy would place {s['placement']} (imbalance {s['imbalance']})")
    rows = [[b, c["tasks"], c["rows"], c["created"], c["reused"], c["mismatch"], c["stolen"], c["workers"]]
            for b, c in list(summary["per_batch"].items())[:200]]
    lines += ["", "| batch | tasks | rows | created | reused | mismatch | stolen | workers |",
              "|---|---|---|---|---|---|---|---|"] + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    if summary["lost_ranges"]:
        lines += ["", "Ranges the source skipped (failOnDataLoss=false): "
                  + ", ".join(f"partition {p} [{a}, {b})" for p, a, b in summary["lost_ranges"])]
    return lines


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"
