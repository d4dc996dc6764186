"""compare.html: runs side by side on one self-contained page.

The comparison's table (each figure's value, change against the baseline and better / worse / same within
noise), the runs' time series overlaid (throughput, p99 latency over time, the latency percentile curves) and,
for a sweep, every key figure against the swept setting on the x-axis, one line per combination of the other
swept keys: the trade-off a setting buys.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from harness.reports.charts import COLORS, Chart, can_draw, missing_html, ms_axis, nines, nines_axis, thousands
from harness.reports.compare import (FIGURES, VERDICTS_TEXT, _fmt, _fmt_band, _fmt_change, _overrides, _value,
                             recommended_line)
from harness.reports.html import CSS, _table
from harness.analysis.series import dense_seconds
from harness.text.wording import PROCESSING_RATE

# sweep figures on the swept axis: (key in sweep.json runs, title, is latency)
SWEPT = (("process_rps", f"Spark's {PROCESSING_RATE}, rows/s", False), ("latency_p99_ms", "latency p99", True),
         ("latency_p50_ms", "latency p50", True), ("max_lag", "max lag, events", False),
         ("batch_p50_ms", "batch duration p50", True), ("task_spread", "slowest task / median", False),
         ("consumers_created", "consumers created", False), ("receivers_created", "receivers created", False),
         ("rate_limited_batches", "batches capped by the rate limit", False))
VERDICT_COLOR = {"better": "#2e7d32", "worse": "#c62828", "same": "#555", "n/a": "#999", "setting": "#555",
                 "cannot tell": "#b26a00"}


def _series(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "series.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def overlay_charts(runs: list[tuple[str, Path]]) -> list[Chart]:
    """(label, run dir) -> throughput, p99 over time and percentile curves, one colour a run."""
    series = [(label, _series(path)) for label, path in runs]
    series = [(label, s) for label, s in series if s]
    if not series:
        return []
    out = []
    thr = Chart("fig-cmp-throughput", "Events made visible by the sink per second, run by run",
                "Each run's sink commits per second (its scheduled rate dashed, same colour).")
    lat = Chart("fig-cmp-latency-time", "End-to-end latency p99 over time, run by run",
                "Per second of intended send time, log scale.")
    dist = Chart("fig-cmp-latency-dist", "End-to-end latency by percentile, run by run",
                 "The measured window of each run.", height=2.8)
    for i, (label, s) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        d, p = s.get("delivered") or {}, s.get("produced") or {}
        if d.get("visible_t"):
            vt, vn = dense_seconds(d["visible_t"], d["visible"])
            thr.mark(thr.ax.step(vt, vn, where="post", color=color, lw=1.1, label=label), len(vt))
        sched = [(t, v) for t, v in zip(p.get("t") or [], p.get("scheduled") or []) if v is not None]
        if sched:
            thr.ax.plot(*zip(*sched), "--", color=color, lw=0.8, alpha=0.7)
        if d.get("t"):
            lat.mark(lat.ax.plot(d["t"], d["latency_p99"], color=color, lw=1.1, label=label), len(d["t"]))
        curve = s.get("percentiles") or []
        if curve:
            dist.mark(dist.ax.plot([nines(q) for q, _ in curve], [v for _, v in curve], "o-", ms=3, lw=1.1,
                                   color=color, label=label), len(curve))
    thr.ax.set_xlabel("s since traffic started")
    thr.ax.set_ylabel("events/s")
    thousands(thr.ax)
    lat.ax.set_yscale("log")
    ms_axis(lat.ax)
    lat.ax.set_xlabel("s since traffic started (intended send time)")
    nines_axis(dist.ax)
    ms_axis(dist.ax)
    dist.ax.set_xlabel("percentile")
    for c in (thr, lat, dist):
        if c.points:
            c.ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
            out.append(c)
    return out


def swept_charts(sweep: dict) -> list[Chart]:
    """Key figures against the swept setting (the key with the most values on x; one line per combination of
    the others)."""
    runs, keys = sweep.get("runs") or [], sweep.get("keys") or []
    recommended = sweep.get("recommended")
    if not runs or not keys:
        return []
    x_key = max(keys, key=lambda k: len({json.dumps(r["values"].get(k)) for r in runs}))
    others = [k for k in keys if k != x_key]
    xs = sorted({r["values"][x_key] for r in runs}, key=_order)
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    pos = {json.dumps(x): (x if numeric else i) for i, x in enumerate(xs)}
    lines: dict[str, list[dict]] = {}
    for r in runs:
        name = ", ".join(f"{k.rsplit('.', 1)[-1]}={r['values'][k]}" for k in others) or "runs"
        lines.setdefault(name, []).append(r)
    out = []
    for key, title, latency in SWEPT:
        if not any(r.get(key) is not None for r in runs):
            continue
        c = Chart(f"fig-swept-{key.replace('_', '-')}", f"{title} against {x_key}",
                  "One point a combination (the mean of its repeats); a hollow point failed a check (did not "
                  "keep up, or worse); the star is the recommended setting.", height=2.6)
        for i, (name, members) in enumerate(lines.items()):
            pts = sorted(((pos[json.dumps(r["values"][x_key])], r[key], r.get("verdict")) for r in members
                          if r.get(key) is not None), key=lambda p: p[0])
            if not pts:
                continue
            color = COLORS[i % len(COLORS)]
            c.mark(c.ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=color, lw=1.2, label=name),
                   len(pts))
            for x, y, verdict in pts:
                c.ax.plot([x], [y], "o", ms=6, color=color, mfc=color if verdict == "pass" else "white")
            best = next((r for r in members if recommended and r["run_dir"] == recommended["run_dir"]), None)
            if best is not None and best.get(key) is not None:
                c.ax.plot([pos[json.dumps(best["values"][x_key])]], [best[key]], "*", ms=14, color=color,
                          mec="black", label="recommended")
        if numeric and min(xs) > 0 and max(xs) / min(xs) >= 20:
            c.ax.set_xscale("log")
        c.ax.set_xticks([pos[json.dumps(x)] for x in xs], [str(x) for x in xs])
        c.ax.minorticks_off()
        c.ax.set_xlabel(x_key)
        ms_axis(c.ax) if latency else thousands(c.ax)
        if len(lines) > 1 or recommended:
            c.ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
        out.append(c)
    return out


def _order(x: Any):
    return (0, x, "") if isinstance(x, (int, float)) and not isinstance(x, bool) else (1, 0, str(x))


def compare_html(summary: dict, sweep: dict | None = None) -> str:
    base = summary["baseline"]
    head = ["figure", "baseline"] + [html.escape(r["label"]) for r in summary["runs"]]
    rows = []
    for name, (what, _) in FIGURES.items():
        cells = [html.escape(f"{name} ({what})"), _fmt(base["figures"][name])]
        for r in summary["runs"]:
            ch = r["changes"][name]
            cells.append("-" if ch["value"] is None else
                         f"{_fmt(ch['value'])} ({_fmt_change(ch)} {html.escape(_fmt_band(ch))}, "
                         f"<b style=\"color:{VERDICT_COLOR[ch['verdict']]}\">"
                         f"{ch['verdict']}</b>)")
        rows.append(cells)
    runs = [(base["label"], Path(base["run"]))] + [(r["label"], Path(r["run"])) for r in summary["runs"]]
    charts = ((swept_charts(sweep) if sweep else []) + overlay_charts(runs)) if can_draw() else []
    settings = "".join(f"<li>{html.escape(label)}: {html.escape(', '.join(_overrides(path)) or 'no overrides')}"
                       f" ({html.escape(str(v))})</li>"
                       for (label, path), v in zip(runs, [base["verdict"]] + [r["verdict"] for r in summary["runs"]]))
    thresholds = ""
    if summary.get("fail_on"):
        thresholds = (f"<p>Thresholds <code>{html.escape(summary['fail_on'])}</code>: "
                      + (html.escape("; ".join(summary["failures"])) if summary["failures"] else "none crossed")
                      + "</p>")
    title = f"Sweep: {sweep['scenario']} ({sweep['verdict']})" if sweep else f"Comparison against {base['label']}"
    return "\n".join([
        "<!doctype html><html lang=en><head><meta charset=utf-8>", f"<title>{html.escape(title)}</title>",
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>',
        f"<h1>{html.escape(title)}</h1>", answer_html(sweep), settings_html(summary),
        f"<p>{html.escape(VERDICTS_TEXT)}</p>",
        f'<section id="figures">{_table(head, rows)}</section>', thresholds, "<h2>Runs</h2>", f"<ul>{settings}</ul>",
        "<h2>Figures</h2>", missing_html(), *[c.html() for c in charts],
        f'<p class="muted">{len(charts)} figures.</p></body></html>'])


def answer_html(sweep: dict | None) -> str:
    """A sweep's answer first: the recommended setting and the runs it rests on."""
    if not sweep or "recommended" not in sweep:
        return ""
    return f'<section id="answer"><p><b>{html.escape(recommended_line(sweep))}</b></p></section>'


def settings_html(summary: dict) -> str:
    """What differs between the runs' resolved scenarios, before any figure (a warning when more than what
    their overrides set)."""
    settings = summary.get("settings") or {}
    differ = settings.get("differ") or {}
    out = '<section id="settings"><h2>Settings</h2>'
    if settings.get("warning"):
        out += f'<p class="bad"><b>Warning:</b> {html.escape(settings["warning"])}.</p>'
    if not differ:
        return out + "<p>The runs' resolved scenarios are the same.</p></section>"
    head = ["setting", "baseline"] + [html.escape(r["label"]) for r in summary["runs"]]
    return out + _table(head, [[f"<code>{html.escape(k)}</code>"] + [html.escape(_value(v)) for v in values]
                               for k, values in differ.items()]) + "</section>"


def sweep_html(sweep_dir: Path, sweep: dict) -> str | None:
    """The sweep's runs compared against its first, with the swept axis; None with fewer than two runs."""
    from harness.reports.compare import CompareError, compare

    if len(sweep.get("runs") or []) < 2:
        return None
    try:
        return compare_html(compare([sweep_dir]), sweep)
    except CompareError:  # a run that left no result.json (killed): sweep.md still lists what there is
        return None
