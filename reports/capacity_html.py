"""capacity.html: a capacity search on one self-contained page, as sweeps have theirs.

The answer first (the capacity, what bounded it, whether it is a lower bound), the thresholds, every trial's
criteria in a table, and each criterion's figure against the offered rate on the x-axis (filled: the trial was
sustained; hollow: it failed; the capacity a vertical line), with the limit drawn where it is one number. The batch
p50 is the trial's headroom: a figure, failing a trial only when the scenario sets `checks.min_headroom` (a cross
in the table marks a failed criterion, never a figure that was not required).
"""
from __future__ import annotations

import html
from typing import Any

from harness.check import status_of
from harness.reports.charts import COLORS, Chart, can_draw, missing_html, ms_axis, thousands
from harness.reports.html import CSS, _table

# criterion -> (title, is latency, the trial's figure key)
PANELS = (("latency_p99", "end-to-end latency p99 (steady part)", True),
          ("headroom", "batch duration p50 (headroom)", True),
          ("lag_growth", "lag slope, events/s", False),
          ("processed_rate", "processed events/s", False))


def _n(x: Any) -> str:
    return "-" if x is None else f"{x:,.0f}"


def capacity_charts(summary: dict) -> list[Chart]:
    trials = summary.get("trials") or []
    out = []
    for name, title, latency in PANELS:
        pts = [(t["rate_eps"], (t["criteria"].get(name) or {}).get("value"), t["verdict"],
                (t["criteria"].get(name) or {}).get("limit")) for t in trials]
        pts = sorted((p for p in pts if p[1] is not None), key=lambda p: p[0])
        if not pts:
            continue
        c = Chart(f"fig-capacity-{name.replace('_', '-')}", f"{title} against the offered rate",
                  "One point a trial: filled sustained, hollow failed; the dashed line is the trial's limit, "
                  "the vertical line the capacity.", height=2.6)
        c.mark(c.ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=COLORS[0], lw=1), len(pts))
        for x, y, verdict, _ in pts:
            c.ax.plot([x], [y], "o", ms=6, color=COLORS[0], mfc=COLORS[0] if verdict == "sustained" else "white")
        limits = [(p[0], p[3]) for p in pts if p[3] is not None]
        if limits:
            c.ax.plot([x for x, _ in limits], [v for _, v in limits], "--", color=COLORS[1], lw=0.8, label="limit")
        if summary.get("capacity_eps") is not None:
            c.ax.axvline(summary["capacity_eps"], color=COLORS[2], lw=1, label="capacity")
        c.ax.set_xlabel("offered rate, events/s")
        thousands(c.ax) if not latency else ms_axis(c.ax)
        c.ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        out.append(c)
    return out


def capacity_html(summary: dict) -> str:
    trials = summary.get("trials") or []
    rows = []
    for i, t in enumerate(trials):
        c = t["criteria"]
        rows.append([str(i), _n(t["rate_eps"]), html.escape(t["verdict"])]
                    + [f"{_n((c.get(n) or {}).get('value'))}"
                       + (' <span class="bad">✗</span>' if c.get(n) and status_of(c[n]) == "fail" else "")
                       for n in ("producer_rate", "headroom", "lag_growth", "processed_rate", "latency_p99")]
                    + [html.escape(t.get("limiting_factor") or "-"), html.escape(t.get("detail") or ""),
                       html.escape(t.get("run_dir") or "-")])
    charts = capacity_charts(summary) if can_draw() else []
    title = f"Capacity: {summary['scenario']} ({summary['verdict']})"
    return "\n".join([
        "<!doctype html><html lang=en><head><meta charset=utf-8>", f"<title>{html.escape(title)}</title>",
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>',
        f"<h1>{html.escape(title)}</h1>", f'<section id="answer"><p><b>{html.escape(summary["summary"])}</b></p>'
        f"<p>{html.escape(summary.get('bounded_by') or '')}</p></section>",
        '<h2>Trials</h2><section id="trials">',
        _table(["#", "rate", "verdict", "offered/s", "batch p50 ms", "lag slope/s", "processed/s", "p99 ms",
                "limiting factor", "detail", "run"], rows), "</section>",
        "<h2>Figures</h2>", missing_html(), *[c.html() for c in charts],
        f'<p class="muted">{len(charts)} figures. capacity.md and capacity.json beside this file.</p></body></html>'])
