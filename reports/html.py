"""report.html: the run on one self-contained page (inline SVG and CSS, no script, nothing fetched at view time).

Verdict and checks first, in words; then what happened over time with the faults shaded on every time axis:
produced vs processed against the target, end-to-end latency over time and its percentile curve, lag per
partition, traffic skew, batch phases, task-time spread and where each partition was read; last the environment
and the resolved scenario. Built from the run directory alone (result.json, series.json, progress.jsonl,
timeline.jsonl, scenario.json), so `harness report RUN_DIR` rebuilds it. A long run's series are drawn binned
beyond a thousand points or so, each bin by its extremes (reports.binning), so the page stays under 2 MB at any
length while a single slow batch or lag spike still shows; what the page states in words is the full data's.
"""
from __future__ import annotations

import html
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from harness.check import status_of
from harness.files.jsonl import read_jsonl
from harness.secrets import redacted
from harness.text.wording import PROCESSING_RATE, PROCESSING_RATE_NOTE, warmup_line
from harness.reports.accounting import accounting_rows, environment_rows
from harness.reports.binning import COLUMNS, bin_columns, bin_size, extreme_rows, extremes, note
from harness.reports.charts import (COLORS, Chart, can_draw, human_ms, mark_performance, missing_html, ms_axis, nines,
                            nines_axis, shade_faults, thousands)
from harness.reports.performance import (RECOVERY_HEAD, RECOVERY_NOTE, headroom_line, recovery_rows, steady_lines,
                                 sustained_check, sustained_rows)
from harness.analysis.progress import epoch_s
from harness.analysis.series import dense_seconds

PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
PHASE_COLORS = dict(zip(PHASES + ("other",), COLORS))  # a phase keeps its colour whichever phases a run shows
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1040px;padding:16px 24px;
color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.verdict{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:600}
.pass{background:#2e7d32}.fail{background:#c62828}.unjudged{background:#6d4c41}
table{border-collapse:collapse;margin:6px 0;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top;overflow-wrap:break-word}th{background:#f5f5f5}td.num{text-align:right;
white-space:nowrap}table{max-width:100%}abbr{cursor:help}
figure.chart{margin:14px 0;padding:6px 0;border-top:1px solid #eee}figcaption{font-weight:600;margin-bottom:4px}
figure.chart svg{display:block;height:auto}.caption{color:#555;font-size:12.5px;margin:2px 0}
.bad{color:#c62828;font-weight:600}.muted{color:#777}pre{background:#f7f7f7;padding:8px;overflow:auto;
font-size:12px;max-height:420px}details{margin:6px 0}
"""


def load_run(run_dir: Path) -> dict[str, Any]:
    """What the page is built from; a file a run did not leave is empty, and its figures are left out."""
    def read_json(name: str):
        try:
            return json.loads((run_dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
    return {"result": read_json("result.json"), "series": read_json("series.json"),
            "scenario": read_json("scenario.json"), "progress": read_jsonl(run_dir / "progress.jsonl"),
            "timeline": read_jsonl(run_dir / "timeline.jsonl")}


def fault_spans(result: dict, t0: float) -> list[tuple[float, float | None, str]]:
    spans = []
    for f in result.get("faults") or []:
        start = f.get("inject_started_at") or f.get("injected_at")
        if start is None:
            continue
        end = f.get("healed_at")
        spans.append((start - t0, None if end is None else end - t0, f"{f['kind']} #{f['n']}"))
    return spans


# -- the figures: each takes the loaded run and returns a Chart, or None when the run has no data for it ----------
def time_chart(c: Chart, run: dict, spans, ylabel: str, y_format, xlabel: str = "s since traffic started") -> Chart:
    """What every chart over the run's time has: labels, the y format, the legend outside, warm-up and faults
    (each with where its recovery came), where the steady state began."""
    c.ax.set_xlabel(xlabel)
    c.ax.set_ylabel(ylabel)
    y_format(c.ax)
    c.ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    shade_faults(c.axes, spans, run["series"].get("warmup_s") or 0.0)
    mark_performance(c.axes, run["result"])
    return c


def throughput_chart(run: dict, spans) -> Chart | None:
    s = run["series"]
    prod, dlv = s.get("produced") or {}, s.get("delivered") or {}
    if not prod.get("t") and not dlv.get("visible_t"):
        return None
    target = (run["result"].get("throughput") or {}).get("target_eps", 0)
    c = Chart("fig-throughput", "Produced vs processed, events per second",
              f"Scheduled by the rate function (dashed), sent by the producers, and made visible by the sink "
              f"(per second of its batch commits: one spike per batch "
              f"commit). Target {target:,.0f} events/s.")
    ks = []  # each line binned on its own (reports.binning), the caption says the largest bin
    if prod.get("t"):
        sched = [(t, v) for t, v in zip(prod["t"], prod["scheduled"]) if v is not None]
        if sched:
            ks.append(bin_size(len(sched)))
            st, sv = extremes(*zip(*sched), ks[-1])
            c.mark(c.ax.plot(st, sv, "--", color=COLORS[7], lw=1.2, label="scheduled"), len(st))
        ks.append(bin_size(len(prod["t"])))
        pt, pv = extremes(prod["t"], prod["sent"], ks[-1])
        c.mark(c.ax.plot(pt, pv, color=COLORS[0], lw=1.2, label="sent"), len(pt))
    if dlv.get("visible_t"):
        vt, vn = dense_seconds(dlv["visible_t"], dlv["visible"])
        ks.append(bin_size(len(vt)))
        vt, vn = extremes(vt, vn, ks[-1])
        c.mark(c.ax.step(vt, vn, where="post", color=COLORS[2], lw=1.2, label="into the sink"), len(vt))
    c.bin(max(ks), note(max(ks), "seconds"))
    return time_chart(c, run, spans, "events/s", thousands)


def latency_time_chart(run: dict, spans) -> Chart | None:
    d = (run["series"].get("delivered") or {})
    if not d.get("t"):
        return None
    c = Chart("fig-latency-time", "End-to-end latency over time",
              "Per second of intended send time: the median, p99 and slowest event (sink commit minus intended "
              "send time; log scale).")
    k = bin_size(len(d["t"]))
    c.bin(k, note(k, "seconds", kept="each line's lowest and highest second kept"))
    for key, color, label in (("latency_max", COLORS[7], "max"), ("latency_p99", COLORS[1], "p99"),
                              ("latency_p50", COLORS[0], "p50")):
        t, v = extremes(d["t"], d[key], k)
        c.mark(c.ax.plot(t, v, color=color, lw=1.1, label=label), len(t))
    c.ax.set_yscale("log")
    return time_chart(c, run, spans, "latency", ms_axis, "s since traffic started (intended send time)")


def latency_distribution_chart(run: dict) -> Chart | None:
    curve = run["series"].get("percentiles") or []
    if not curve:
        return None
    c = Chart("fig-latency-dist", "End-to-end latency by percentile (measured window)",
              "Each point: that share of events arrived within this latency. " +
              ", ".join(f"p{p:g} {human_ms(v)}" for p, v in curve if p in (50.0, 99.0, 99.9, 100.0)),
              height=2.8)
    xs = [nines(p) for p, _ in curve]
    c.mark(c.ax.plot(xs, [v for _, v in curve], "o-", color=COLORS[1], ms=3, lw=1.2), len(curve))
    nines_axis(c.ax)
    ms_axis(c.ax)
    c.ax.set_xlabel("percentile")
    c.ax.set_ylabel("latency")
    return c


def lag_chart(run: dict, spans) -> Chart | None:
    lag = run["series"].get("lag") or {}
    if not lag.get("t") or not lag.get("partitions"):
        return None
    parts, t, matrix = lag["partitions"], lag["t"], np.array(lag["lag"], dtype=float)
    c = Chart("fig-lag", "Lag per partition over time",
              f"Events on the broker not yet committed by the query, sampled every second (max "
              f"{int(matrix.max()):,}; darker is further behind).", height=max(1.8, 0.9 + 0.16 * len(parts)))
    step = (t[-1] - t[0]) / max(1, len(t) - 1) if len(t) > 1 else 1.0
    k = bin_size(len(t), COLUMNS, per_bin=1)
    c.bin(k, note(k, "samples", "column", "each column the most behind of them"))
    matrix = bin_columns(matrix, k)
    im = c.ax.imshow(matrix, aspect="auto", interpolation="nearest", cmap="magma_r", origin="lower",
                     extent=(t[0] - step / 2, t[-1] + step / 2, -0.5, len(parts) - 0.5), vmin=0)
    c.mark(im, matrix.size)
    c.ax.grid(False)
    ticks = list(range(0, len(parts), max(1, len(parts) // 16)))
    c.ax.set_yticks(ticks, [parts[i] for i in ticks])
    c.ax.set_ylabel("partition")
    c.ax.set_xlabel("s since traffic started")
    box = c.ax.get_position()  # the colour scale in the right margin, so the time axis lines up with the others
    c.fig.colorbar(im, cax=c.fig.add_axes((box.x1 + 0.012, box.y0, 0.012, box.height)), label="events behind")
    shade_faults(c.axes, spans, run["series"].get("warmup_s") or 0.0)
    return c


def skew_chart(run: dict) -> Chart | None:
    prod = run["result"].get("producers") or {}
    events = prod.get("partition_events") or {}
    if not events:
        return None
    parts = sorted(events, key=int)
    counts = [events[p] for p in parts]
    skew = prod.get("skew") or {}
    mean = sum(counts) / len(counts)
    c = Chart("fig-skew", "Traffic per partition",
              f"Events the producers sent to each partition; dashed: the mean. Max/mean "
              f"{skew.get('max_mean_share') or 0:.2f}, Gini {skew.get('gini') or 0:.2f}.",
              height=2.6)
    c.mark(c.ax.bar(range(len(parts)), counts, color=COLORS[0]), len(parts))
    c.ax.axhline(mean, color=COLORS[7], ls="--", lw=1)
    ticks = list(range(0, len(parts), max(1, len(parts) // 32)))
    c.ax.set_xticks(ticks, [parts[i] for i in ticks])
    c.ax.set_xlabel("partition")
    c.ax.set_ylabel("events")
    thousands(c.ax)
    return c


def phases_chart(run: dict, spans, t0: float) -> Chart | None:
    rows = [p for p in run["progress"] if p.get("numInputRows", 0) > 0 and "timestamp" in p]
    if not rows:
        return None
    x = [epoch_s(p["timestamp"]) - t0 for p in rows]
    series = {ph: [p.get("durationMs", {}).get(ph, 0) for p in rows] for ph in PHASES}
    total = [p.get("durationMs", {}).get("triggerExecution", 0) for p in rows]
    series["other"] = [max(0, tot - sum(v[i] for v in series.values())) for i, tot in enumerate(total)]
    interval = _trigger_ms(run["scenario"])
    c = Chart("fig-phases", "Micro-batch phases, stacked",
              "Per batch that read rows, at its start time: Spark's own phase timings (durationMs), stacked to "
              "the batch's triggerExecution" + (f"; dashed: the trigger interval ({interval:,.0f} ms)" if interval
                                                else "") + ". A batch above the line delays the next one.")
    names = [k for k in series if any(series[k])]
    end = x[-1] + total[-1] / 1000.0  # the last batch's step reaches its end
    per = bin_size(len(x))  # binned: each bin's fastest and slowest batch, whole, at its own start
    c.bin(per, note(per, "batches", kept="each bin's fastest and slowest batch drawn"))
    rows = extreme_rows(total, per).tolist()
    x = [x[i] for i in rows] + [end]
    for k in names:
        series[k] = [series[k][i] for i in rows] + [series[k][rows[-1]]]
    polys = c.ax.stackplot(x, *[series[k] for k in names], labels=names, step="post",
                           colors=[PHASE_COLORS[k] for k in names], alpha=0.85)
    c.mark(polys, len(x) * len(names))
    if interval:
        c.ax.axhline(interval, color="#000", ls="--", lw=0.9)
    return time_chart(c, run, spans, "batch time", ms_axis)


def _trigger_ms(scenario: dict) -> float | None:
    trig = (((scenario.get("resolved") or scenario).get("spark") or {}).get("trigger") or {})
    text = str(trig.get("interval") or "").strip().lower()
    if not text:
        return None
    value, _, unit = text.partition(" ")
    try:
        n = float(value)
    except ValueError:
        return None
    scale = {"ms": 1, "millisecond": 1, "milliseconds": 1, "second": 1000, "seconds": 1000, "s": 1000,
             "minute": 60000, "minutes": 60000}.get(unit.strip(), None)
    return n * scale if scale else None


def _by_batch(tasks: dict) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for i, b in enumerate(tasks.get("batch") or []):
        out[b].append(i)
    return dict(sorted(out.items()))


def task_spread_chart(run: dict, spans) -> Chart | None:
    tasks = run["series"].get("tasks") or {}
    groups = _by_batch(tasks)
    if not groups:
        return None
    x, lo, mid, hi, n = [], [], [], [], []
    for idx in groups.values():
        d = [tasks["duration_ms"][i] for i in idx]
        x.append(min(tasks["launch_s"][i] for i in idx))
        lo.append(min(d)), mid.append(statistics.median(d)), hi.append(max(d)), n.append(len(d))
    placement = run["result"].get("placement") or {}
    spread = (placement.get("task_ms") or {}).get("median_max_over_median")
    c = Chart("fig-tasks", "Scan task time per batch: fastest, median, slowest",
              f"From Spark's event log: the tasks that read the source in each batch (shaded: fastest to slowest). "
              f"Slowest over median, the median over batches: {spread if spread is not None else '-'}; "
              f"tasks per batch: median {statistics.median(n):g}. Skewed traffic turns into a slow task.")
    last = groups[max(groups)]
    end = max(tasks["launch_s"][i] + tasks["duration_ms"][i] / 1000.0 for i in last)
    k = bin_size(len(x), per_bin=1)  # binned: a step per bin, from its fastest to its slowest task
    c.bin(k, note(k, "batches", "step", "each step from the fastest to the slowest task of its batches, the "
                  "median of their medians"))
    if k > 1:
        cut = range(0, len(x), k)
        x, lo, hi = [x[i] for i in cut], [min(lo[i:i + k]) for i in cut], [max(hi[i:i + k]) for i in cut]
        mid = [statistics.median(mid[i:i + k]) for i in cut]
    x.append(end)
    lo.append(lo[-1]), mid.append(mid[-1]), hi.append(hi[-1])
    c.mark(c.ax.fill_between(x, lo, hi, step="post", color=COLORS[0], alpha=0.25, lw=0), len(x))
    c.mark(c.ax.step(x, mid, where="post", color=COLORS[0], lw=1.1, label="median"), len(x))
    c.mark(c.ax.step(x, hi, where="post", color=COLORS[1], lw=0.9, label="slowest"), len(x))
    return time_chart(c, run, spans, "task time", ms_axis, "s since traffic started (batch's first task)")


def placement_chart(run: dict) -> Chart | None:
    tasks = run["series"].get("tasks") or {}
    known = [i for i, p in enumerate(tasks.get("partition") or []) if p is not None]
    if not known:
        return None
    executors = sorted({tasks["executor"][i] for i in known}, key=lambda e: (len(e), e))
    parts = sorted({tasks["partition"][i] for i in known})
    batches = sorted({tasks["batch"][i] for i in known})
    col = {b: j for j, b in enumerate(batches)}
    row = {p: k for k, p in enumerate(parts)}
    several = len(executors)
    per = bin_size(len(batches), COLUMNS, per_bin=1)  # binned: a column per `per` batches (col's values cut)
    col = {b: j // per for b, j in col.items()}
    grid = np.full((len(parts), -(-len(batches) // per)), np.nan)
    ex = {e: k for k, e in enumerate(executors)}
    for i in known:
        r, j, e = row[tasks["partition"][i]], col[tasks["batch"][i]], ex[tasks["executor"][i]]
        grid[r, j] = e if np.isnan(grid[r, j]) or grid[r, j] == e else several
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    colors = list(COLORS[:several]) + ["#000000"]
    placement = run["result"].get("placement") or {}
    same = placement.get("same_executor_as_last_batch")
    c = Chart("fig-placement", "Where each partition was read, per batch",
              "Colour: the executor whose task read the partition in that batch (black: split over several "
              "executors, as minPartitions does). "
              + (f"Same executor as the partition's previous batch: {same:.0%}." if same is not None else ""),
              height=max(1.8, 0.9 + 0.16 * len(parts)))
    c.bin(per, note(per, "batches", "column", "black where the partition was read on more than one executor "
                    "in them"))
    im = c.ax.imshow(grid, aspect="auto", interpolation="nearest", origin="lower",
                     cmap=ListedColormap(colors), vmin=-0.5, vmax=several + 0.5,
                     extent=(batches[0] - 0.5, batches[-1] + 0.5, -0.5, len(parts) - 0.5))
    c.mark(im, len(known) if per == 1 else int(np.count_nonzero(~np.isnan(grid))))  # binned: cells drawn
    c.ax.grid(False)
    ticks = list(range(0, len(parts), max(1, len(parts) // 16)))
    c.ax.set_yticks(ticks, [str(parts[i]) for i in ticks])
    c.ax.set_ylabel("partition")
    c.ax.set_xlabel("batch id")
    c.ax.xaxis.get_major_locator().set_params(integer=True)
    c.ax.legend(handles=[Patch(color=colors[k], label=f"executor {e}") for k, e in enumerate(executors)],
                loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    return c


def clients_chart(run: dict) -> Chart | None:
    """Kafka consumers (the proxy's records) or Event Hubs receivers (the source's records) created per batch:
    a cached client costs nothing, a new one a connection and a fetch from scratch."""
    result = run["result"]
    kafka = (result.get("consumers") or {}).get("per_batch") or {}
    eh = (result.get("source") or {}).get("per_batch") or {}
    if kafka:
        bars = {"created": {int(b): v.get("created", 0) for b, v in kafka.items()}}
        what, source = "Kafka consumers", ("the Event Hubs emulator's" if "eventhubs" in str(
            result["consumers"].get("records", "")) else "the TCP proxy's") + " connection records (a new client instance)"
    elif eh:
        bars = {k: {int(b): v.get(k, 0) for b, v in eh.items()} for k in ("created", "reused", "mismatch")}
        what, source = "Event Hubs receivers", "the source's own task records"
    else:
        return None
    batches = sorted({b for per in bars.values() for b in per})
    totals = ", ".join(f"{k} {sum(per.values()):,}" for k, per in bars.items())
    c = Chart("fig-clients", f"{what} per batch", f"From {source}: {totals}.", height=2.4)
    values = {k: np.array([per.get(b, 0) for b in batches], dtype=float) for k, per in bars.items()}
    n = bin_size(len(batches), per_bin=1)  # binned: a bar per n batches, the batch with the most clients
    c.bin(n, note(n, "batches", "bar", "each bar the one of them with the most clients"))
    total = sum(values.values())
    starts = range(0, len(batches), n)
    rows = [i + int(np.argmax(total[i:i + n])) for i in starts]
    x = [batches[i] for i in (rows if n == 1 else starts)]  # binned: the bar spans its bin
    bottom = np.zeros(len(rows))
    for i, (k, v) in enumerate(values.items()):
        c.mark(c.ax.bar(x, v[rows], bottom=bottom, color=COLORS[[1, 2, 3][i]], label=k, width=0.8 * n,
                        align="center" if n == 1 else "edge"), len(rows))
        bottom += v[rows]
    c.ax.set_xlabel("batch id")
    c.ax.set_ylabel("clients")
    c.ax.xaxis.get_major_locator().set_params(integer=True)
    c.ax.yaxis.get_major_locator().set_params(integer=True)
    c.ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return c


# a role keeps its colour from run to run (the service, the driver's two processes, executors, producers …)
ROLE_COLORS = {"broker": COLORS[0], "emulator": COLORS[0], "netproxy": COLORS[9], "driver": COLORS[1],
               "driver-jvm": COLORS[2], "executor": COLORS[3], "python-worker": COLORS[4], "producer": COLORS[5],
               "runner": COLORS[6], "launcher": COLORS[8], "other": COLORS[7],
               "spark-master": "#393b79", "spark-worker": "#637939"}  # a standalone cluster's own processes


def resources_chart(run: dict, spans) -> Chart | None:
    """RSS and CPU cores per role over time (series.json's `resources`, from harness.samplers.resources' samples)."""
    resources = (run["series"] or {}).get("resources") or {}
    rss, cpu = resources.get("rss") or {}, resources.get("cpu") or {}
    if not rss:
        return None
    c = Chart("fig-resources", "Memory and CPU of the run's processes, per role",
              "Top: resident memory (RSS) of each role's processes summed, in MB. Bottom: CPU cores each role "
              "used between samples (CPU time over wall time). A restarted process drops and regrows its role's "
              "line; a leak is a line that keeps rising after the warm-up.", height=2.5, axes=2)
    for role, series in rss.items():  # binned: each bin's lowest and highest sample (reports.binning)
        color = ROLE_COLORS.get(role, COLORS[7])
        k = bin_size(len(series["t"]))
        c.bin(k, "")
        x, y = extremes(series["t"], series["mb"], k)
        c.mark(c.axes[0].plot(x, y, color=color, lw=1.2, label=role), len(x))
        cores = (cpu.get("cores") or {}).get(role) or []
        if cores and any(cores):
            k = bin_size(len(cores))
            c.bin(k, "")
            x, y = extremes(cpu["t"], cores, k)
            c.mark(c.axes[1].step(x, y, where="post", color=color, lw=1.0), len(x))
    c.caption += note(c.binned, "samples")
    c.axes[0].set_ylabel("RSS (MB)")
    c.axes[1].set_ylabel("CPU cores")
    c.axes[0].set_ylim(bottom=0)
    c.axes[1].set_ylim(bottom=0)
    c.axes[1].set_xlabel("s since traffic started")
    thousands(c.axes[0])
    c.axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    shade_faults(c.axes, spans, run["series"].get("warmup_s") or 0.0)
    return c


def disk_chart(run: dict, spans) -> Chart | None:
    """The run directory's allocated bytes over time, stacked by top-level entry (sink, checkpoint, services…)."""
    disk = (run["series"] or {}).get("disk") or {}
    if not disk.get("t"):
        return None
    by_dir = disk.get("by_dir_mb") or {}
    dirs = sorted(by_dir, key=lambda d: -by_dir[d][-1])
    c = Chart("fig-disk", "Disk used by the run directory",
              f"Allocated bytes (what du counts) under the run directory, by top-level entry, stacked; peak "
              f"{max(disk['mb']):,.0f} MB, at the end {disk['mb'][-1]:,.0f} MB.", height=2.6)
    k = bin_size(len(disk["t"]))  # binned: each bin's smallest and largest sample, whole, and the last one
    c.bin(k, note(k, "samples"))
    rows = range(len(disk["t"]))
    if k > 1:
        rows = sorted(set(extreme_rows(disk["mb"], k)) | {len(disk["t"]) - 1})
    x = [disk["t"][i] for i in rows]
    ys = [[by_dir[d][i] for i in rows] for d in dirs]
    c.mark(c.ax.stackplot(x, *ys, labels=dirs, colors=[COLORS[i % len(COLORS)] for i in range(len(dirs))],
                          alpha=0.8), len(x) * len(dirs))
    c.ax.set_ylim(bottom=0)
    return time_chart(c, run, spans, "MB", thousands)


def figures(run: dict) -> list[Chart]:
    if not can_draw():
        return []
    t0 = float((run["series"] or {}).get("t0") or 0.0)
    spans = fault_spans(run["result"], t0) if t0 else []
    built = [throughput_chart(run, spans), latency_time_chart(run, spans), latency_distribution_chart(run),
             lag_chart(run, spans), skew_chart(run), phases_chart(run, spans, t0) if t0 else None,
             task_spread_chart(run, spans), placement_chart(run), clients_chart(run)]
    built += [resources_chart(run, spans), disk_chart(run, spans)]
    return [c for c in built if c is not None]


# -- the page --------------------------------------------------------------------------------------------------------
def _table(headers: list[str], rows: list[list], numeric: set[int] = frozenset(), css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{c}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table{f' class={css}' if css else ''}><tr>{head}</tr>{body}</table>"


def performance_html(result: dict) -> str:
    """Steady state and start-up, then keeping up (reports.performance)."""
    out = ""
    steady = steady_lines(result)
    if steady:
        out += '<h2 id="steady">Steady state and start-up</h2><ul>' + "".join(
            f"<li>{html.escape(line)}</li>" for line in steady) + "</ul>"
    rows = sustained_rows(result)
    if rows:
        check = sustained_check(result) or {}
        out += (f'<h2 id="sustained">Keeping up: {html.escape(str(check.get("status")))}</h2>'
                + _table(["criterion", "status", "detail"], [[html.escape(c) for c in row] for row in rows]))
        room = headroom_line(result)
        out += f'<p id="headroom">{html.escape(room)}</p>' if room else ""
    return out


def throughput_html(result: dict) -> str:
    """Offered against processed, the processing rate named for what it is (harness.text.wording), with its note."""
    thr = result.get("throughput") or {}
    rows = [["produced (acked), events/s", f"{thr.get('produce_eps', 0):,.1f}"],
            ["target, events/s", f"{thr.get('target_eps', 0):,.1f}"],
            [f'<abbr title="{html.escape(PROCESSING_RATE_NOTE)}">Spark\'s {html.escape(PROCESSING_RATE)}</abbr>, '
             f"rows/s", f"{thr.get('process_rps', 0):,.1f}"]]
    return (_table(["figure", "value"], rows, numeric={1})
            + f'<p class="muted">{html.escape(PROCESSING_RATE_NOTE)}</p>')


def summary_words(result: dict) -> str:
    """The verdict in a sentence or three."""
    c, lat, thr = result.get("counts") or {}, result.get("latency_ms") or {}, result.get("throughput") or {}
    failed = [x for x in result.get("checks") or [] if status_of(x) == "fail"]
    words = [f"{c.get('produced', 0):,} events produced, {c.get('acked', 0):,} acked; "
             f"{c.get('delivered_unique', 0):,} delivered, {c.get('lost', 0):,} lost "
             f"({c.get('expected_lost', 0):,} of them expected by a fault), {c.get('duplicates', 0):,} duplicated."]
    if lat.get("p50"):
        words.append(f"End-to-end latency p50 {human_ms(lat['p50'])}, p99 {human_ms(lat['p99'])}, "
                     f"max {human_ms(lat['max'])}; Spark's {PROCESSING_RATE} {thr.get('process_rps', 0):,.0f} "
                     f"rows/s (per second of batch time) for a target of {thr.get('target_eps', 0):,.0f} "
                     "events/s.")
    for u in result.get("unreadable") or []:  # left out of the figures (harness.verdict.unreadable)
        words.append(f"Unreadable, left out: {u['file']}: {u['detail']}.")
    if result.get("verdict") == "unjudged":
        words.append(f"The run could not be judged: {result.get('unjudged_reason')}.")
    elif failed:
        words.append("Failed: " + "; ".join(f"{x['name']} ({x['detail']})" for x in failed) + ".")
    else:
        words.append(f"All {len(result.get('checks') or [])} checks passed.")
    return " ".join(html.escape(w) for w in words)


def resources_html(run: dict) -> str:
    """The resource figures per role and the leak verdicts, as tables (result.json's `resources`)."""
    from harness.analysis.resources import MB
    from harness.reports.resources import footprint_html, machine_html

    summary = run["result"].get("resources") or {}
    foot = footprint_html(run["result"].get("footprint") or {}) + machine_html(run["result"].get("machine"))
    if not summary.get("roles"):
        return f"<h2>Resources</h2>{foot}" if foot else ""
    rows = [[html.escape(role), r["processes"], f"{r['rss_peak_bytes'] / MB:,.0f} MB",
             f"{r['rss_mean_bytes'] / MB:,.0f} MB", f"{r['cpu_s']:,.1f}",
             "-" if r["cores_mean"] is None else f"{r['cores_mean']:.2f}", r["fds_max"], r["threads_max"]]
            for role, r in summary["roles"].items()]
    parts = ["<h2>Resources</h2>", foot,
             _table(["role", "processes", "peak RSS", "mean RSS", "CPU s", "cores mean", "max open files",
                     "max threads"], rows, numeric=set(range(1, 8)))]
    lk = summary.get("leaks") or {}
    if lk:
        verdict = "ok" if lk["ok"] else '<span class="bad">LEAK</span>'
        leak_rows = [[html.escape(r["role"]), r["pid"], f"{r['span_s']:,.0f}",
                      "-" if r["growth_mb_per_h"] is None else f"{r['growth_mb_per_h']:+,.1f}",
                      '<span class="bad">LEAK</span>' if r["verdict"] == "leak" else html.escape(r["verdict"])]
                     for r in lk["processes"]]
        parts += [f"<p>Leaks: {verdict}. {html.escape(lk['detail'])} (RSS slope after a {lk['after_s']:g} s "
                  f"warm-up against {lk['max_growth_mb_per_h']:g} MB/h; watched less than {lk['min_span_s']:g} s: "
                  "not judged).</p>",
                  "<details><summary>Per process</summary>"
                  + _table(["role", "pid", "span s", "growth MB/h", "verdict"], leak_rows, numeric={1, 2, 3})
                  + "</details>"]
    cost = summary.get("cost_ms") or {}
    if cost:
        parts.append(f'<p class="muted">{summary["samples"]} samples every {summary.get("interval_s") or 0:g} s; '
                     f'one sample cost {cost["mean"]:.1f} ms on average.</p>')
    return "\n".join(parts)


def environment_html(run: dict) -> str:
    result = run["result"]
    rows = [[html.escape(k), html.escape(v)] for k, v in environment_rows(result)]
    rows += [["backend", html.escape(str(result.get("backend")))],
             ["run directory", html.escape(str(result.get("run_dir")))]]
    info = redacted(result.get("backend_info") or {})
    rows += [[html.escape(f"backend {k}"), html.escape(json.dumps(v) if isinstance(v, (dict, list)) else str(v))]
             for k, v in info.items() if not isinstance(v, (dict, list)) or len(json.dumps(v)) < 200]
    scenario = json.dumps(redacted(run["scenario"]), indent=2)  # a run recorded before redaction shows *** too
    return (_table(["what", "value"], rows) + "<details><summary>The resolved scenario (scenario.json)</summary>"
            f"<pre>{html.escape(scenario)}</pre></details>")


def build_html(run_dir: Path) -> str:
    run = load_run(run_dir)
    result = run["result"]
    verdict = str(result.get("verdict", "unjudged"))
    charts = figures(run)
    checks = _table(["check", "ok", "detail"],
                    [[html.escape(x["name"]), {"pass": "yes", "fail": '<span class="bad">NO</span>',
                                               "unknown": '<span class="bad">unknown</span>',
                                               "unjudged": '<span class="bad">unjudged</span>',
                                               "not required": '<span class="muted">not required</span>'}[status_of(x)],
                      html.escape(x["detail"])] for x in result.get("checks") or []])
    c = result.get("counts") or {}
    counts = _table(["figure", "count", "meaning"], [[html.escape(x) for x in row] for row in accounting_rows(c)],
                    numeric={1}, css="accounting")
    lat = result.get("latency_ms") or {}
    lat_table = _table(list(lat), [[f"{v:,.1f} ms" for v in lat.values()]], numeric=set(range(len(lat))))
    faults = result.get("faults") or []
    t0 = float(run["series"].get("t0") or 0.0)
    fault_rows = [[html.escape(f"{f['kind']} #{f['n']}"),
                   "-" if f.get("injected_at") is None or not t0 else f"{f['injected_at'] - t0:.1f}",
                   "-" if f.get("healed_at") is None or not t0 else f"{f['healed_at'] - t0:.1f}",
                   html.escape("; ".join(f.get("errors") or []) or "-")] for f in faults]
    warm = result.get("warmup") or {}
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>{html.escape(str(result.get('scenario')))}: {verdict}</title>",
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head><body>',
        f"<h1>{html.escape(str(result.get('scenario')))} on {html.escape(str(result.get('backend')))} "
        f'<span class="verdict {verdict}">{verdict.upper()}</span></h1>',
        f"<p>{summary_words(result)}</p>",
        f'<p class="muted">Traffic {result.get("traffic_s", 0):.0f} s'
        + (f" after the {html.escape(warmup_line(warm))}" if warm else "")
        + f", whole run {result.get('duration_s', 0):.0f} s; {result.get('batches', 0)} micro-batches; "
          f"{len(faults)} fault(s). Times are seconds since the traffic started; faults are shaded red.</p>",
        "<h2>Checks</h2>", checks, "<h2>Accounting</h2>", counts,
        "<h2>Throughput</h2>", throughput_html(result),
        "<h2>End-to-end latency</h2>", lat_table, performance_html(result),
    ]
    if fault_rows:
        parts += ["<h2>Faults</h2>", _table(["fault", "injected (s)", "healed (s)", "errors"], fault_rows)]
    recovery = recovery_rows(result)
    if recovery:
        parts += ['<h2 id="recovery">Recovery per fault</h2>', f"<p>{html.escape(RECOVERY_NOTE)}</p>",
                  _table(RECOVERY_HEAD, [[html.escape(c) for c in row] for row in recovery])]
    parts += ["<h2>Over time, per partition, per batch</h2>", missing_html()] + [ch.html() for ch in charts]
    missing = run["series"].get("error") or ("" if run["series"] else "no series.json in the run directory")
    if missing:
        parts.append(f'<p class="bad">Figures over time are missing: {html.escape(missing)}.</p>')
    if result.get("resources") or result.get("footprint") or result.get("machine"):
        parts.append(resources_html(run))
    parts += ["<h2>Environment</h2>", environment_html(run),
              f'<p class="muted">{len(charts)} figures. report.md beside this file has the same run in tables.</p>',
              "</body></html>"]
    return "\n".join(parts)
