"""report.md: one page a person reads after a run, built only from what the run directory holds."""
from __future__ import annotations

from pathlib import Path

from harness.check import status_of
from harness.reports.performance import (RECOVERY_HEAD, RECOVERY_NOTE, headroom_line, recovery_rows, steady_lines,
                                 sustained_check, sustained_rows)
from harness.files.jsonl import read_jsonl
from harness.reports.accounting import accounting_rows, environment_rows
from harness.text.wording import PROCESSING_RATE, PROCESSING_RATE_NOTE, warmup_line


def oracle_section(result: dict) -> list[str]:
    """What the query's oracle found (harness.oracles), and Spark's state figures for stateful queries."""
    parts: list[str] = []
    oracle = result.get("oracle")
    name = (result.get("query") or {}).get("oracle", "events")
    if oracle:
        figures = [[k, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) and not k.endswith("_ms") else v]
                   for k, v in oracle.items() if k not in ("ok", "detail") and not isinstance(v, (dict, list))]
        parts += ["", f"## Oracle ({name}): {'ok' if oracle.get('ok') else '**FAILED**'}", "",
                  str(oracle.get("detail", "")), "",
                  "The query's output is judged against the output the producers' acked history implies; the "
                  "per-event accounting above (delivered, lost, latency) does not apply to it.", ""]
        if figures:
            parts.append(_table(["figure", "value"], figures))
    state = (result.get("batch_stats") or {}).get("state_operators")
    if state:
        parts += ["", "## State (Spark's figures)",
                  _table(["operator", "rows in state at the end", "dropped as late (watermark)",
                          "dropped as duplicates"],
                         [[k.split(":", 1)[-1], f"{v['rows_total']:,}", f"{v['dropped_by_watermark']:,}",
                           f"{v['dropped_duplicates']:,}"] for k, v in state.items()])]
    return parts



def performance_section(result: dict) -> list[str]:
    """Steady state and start-up, keeping up, recovery per fault (reports.performance)."""
    parts: list[str] = []
    steady = steady_lines(result)
    if steady:
        parts += ["", "## Steady state and start-up", "", *[f"- {line}" for line in steady]]
    rows = sustained_rows(result)
    if rows:
        check = sustained_check(result) or {}
        parts += ["", f"## Keeping up: {check.get('status')}", "", check.get("detail", ""), "",
                  _table(["criterion", "status", "detail"], rows)]
        room = headroom_line(result)
        parts += ["", room] if room else []
    recovery = recovery_rows(result)
    if recovery:
        parts += ["", "## Recovery per fault", "", RECOVERY_NOTE, "", _table(RECOVERY_HEAD, recovery)]
    outages = result.get("outages") or []
    if outages:
        parts += ["", "## The restart after each outage", "", OUTAGE_NOTE, "",
                  _table(OUTAGE_HEAD, [outage_row(o) for o in outages])]
    return parts


OUTAGE_NOTE = ("The backlog is what the restarted query had to read at the restart; the first batch is the first one "
               "it planned itself; the drain is timed from the restart until the lag was back within its band before "
               "the outage (harness.analysis.outages). `harness outage-cap` searches the cap to restart with.")
OUTAGE_HEAD = ["outage", "down s", "cap", "backlog", "aged out unread", "first batch rows", "first batch ms",
               "peak RSS MB", "failures", "given up", "drain s", "drain events/s"]


def outage_row(o: dict) -> list:
    """One outage as a table row (what harness.analysis.outages measured)."""
    first = o.get("first_batch") or {}
    cap = o.get("cap") or {}
    return [f"#{o['n']} ({o.get('stop')})", o.get("down_s"), f"{cap['option']} {cap['value']:,}" if cap else "none",
            f"{o['backlog_events']:,}", f"{o['expired_events']:,}",
            f"{first['rows']:,}" if first else "-", f"{first['duration_ms']:,}" if first else "-",
            ", ".join(f"{k} {v:,.0f}" for k, v in (o.get("peak_rss_mb") or {}).items()) or "-",
            o.get("crashes", 0), "yes" if o.get("gave_up") else "no",
            "-" if o.get("drain_s") is None else f"{o['drain_s']:,.1f}",
            "-" if not o.get("drain_eps") else f"{o['drain_eps']:,.0f}"]


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _at(t: float | None, t0: float) -> str:
    return "-" if t is None else f"{t - t0:.1f}"


def _effect_text(effect: dict) -> str:
    words = []
    loss = effect.get("loss") or []
    if loss:
        words.append(f"loss of {sum(r['end'] - r['start'] for r in loss):,} offsets in {len(loss)} range(s)"
                     + ("" if all(r.get("exact", True) for r in loss) else " (some bounded, not exact)"))
    if effect.get("failure"):
        words.append(f"query fails with {effect['failure']}")
    if effect.get("query_down"):
        words.append("query down for a while")
    if effect.get("send_failures"):
        words.append("sends may fail")
    return ", ".join(words) or "none"


def _event_text(e: dict) -> str:
    if e["event"].startswith("fault_"):
        return f"{e['event']} {e.get('kind')} #{e.get('n')}" + (f" error: {e['error']}" if e.get("error") else "")
    return e["event"]


def build_report(result: dict, run_dir: Path) -> str:
    """report.md: the result's sections in the HTML page's order, from result.json's figures and the timeline."""
    events = read_jsonl(run_dir / "timeline.jsonl")
    t0 = events[0]["t"] if events else 0.0
    parts = (_head(result, run_dir) + _checks_and_counts(result) + _latency(result) + performance_section(result)
             + oracle_section(result) + _batches(result) + _producers(result) + _sources_and_resources(result)
             + _faults(result, t0)
             + ["", "## Environment", _table(["what", "value"], [list(row) for row in environment_rows(result)])])
    if events:
        parts += ["", "## Timeline", _table(["t (s)", "event"], [[f"{e['t'] - t0:.1f}", _event_text(e)]
                                                                  for e in events])]
    return "\n".join(parts) + "\n"


def _head(result: dict, run_dir: Path) -> list[str]:
    parts = [
        f"# {result['scenario']} on {result['backend']}: **{result['verdict'].upper()}**",
        "",
        f"Run directory `{run_dir}`; traffic {result.get('traffic_s', 0):.0f} s, "
        f"whole run {result['duration_s']:.0f} s.",
        "",
    ]
    if result.get("unjudged_reason"):
        parts += [f"**The run could not be judged:** {result['unjudged_reason']}", ""]
    if result.get("unreadable"):  # left out of the figures (harness.analysis.measure): said, never silent
        parts += ["**Unreadable, left out:**", ""] + [f"- `{u['file']}`: {u['detail']}" for u in result["unreadable"]]
        parts += [""]
    q = result.get("query") or {}
    if q:
        parts += [f"Query under test: `{q.get('name')}` (oracle `{q.get('oracle')}`, trigger {q.get('trigger')}); "
                  f"killed {q.get('kills', 0)}x, restarted {q.get('restarts', 0)}x; final state "
                  f"{q.get('final_state')!r}" + (f", error class `{q['error_class']}`" if q.get("error_class") else ""),
                  ""]
    return parts


def _checks_and_counts(result: dict) -> list[str]:
    thr = result["throughput"]
    return [
        "## Checks",
        _table(["check", "ok", "detail"], [[x["name"], {"pass": "yes", "fail": "**NO**", "unknown": "**unknown**",
                                                         "unjudged": "**unjudged**",
                                                         "not required": "not required"}[status_of(x)],
                                             x["detail"]] for x in result["checks"]]),
        "",
        "## Accounting",
        _table(["figure", "count", "meaning"], [list(row) for row in accounting_rows(result["counts"])]),
        "",
        "## Throughput",
        f"- produced (acked) {thr['produce_eps']:,.1f} events/s against a target of {thr['target_eps']:,.1f}",
        f"- Spark's {PROCESSING_RATE}: {thr['process_rps']:,.1f} rows/s over {result['batches']} batches",
        f"  ({PROCESSING_RATE_NOTE})",
        "",
    ]


def _latency(result: dict) -> list[str]:
    lat = result["latency_ms"]
    parts = ["## End-to-end latency (sink commit − intended send time)",
             _table(list(lat), [[f"{v:,.1f} ms" for v in lat.values()]])]
    warm = result.get("warmup") or {}
    if warm:
        parts += ["", f"Measured after the {warmup_line(warm)}; batch timings above leave them out too. "
                      f"Their latency: " + ", ".join(f"{k} {v:,.1f} ms" for k, v in warm["latency_ms"].items()) + "."]
    return parts


def _batches(result: dict) -> list[str]:
    """Publish delay, the micro-batches' phases over the steady part, the consumer lag."""
    parts: list[str] = []
    pd_ = result.get("publish_delay_ms")
    if pd_:
        parts += ["", "Publish delay (produce call − intended send time): "
                  + ", ".join(f"{k} {v:,.1f} ms" for k, v in pd_.items())]
    bs = result.get("batch_stats") or {}
    if bs.get("duration_ms"):
        parts += ["", "## Micro-batches (the steady part)",
                  f"{bs['with_data']} batches read rows; backlog Spark knew of after a batch: max "
                  f"{bs['known_backlog_rows']['max']:,} rows."
                  + (f" Batches cut by the source's per-trigger cap (maxOffsetsPerTrigger / maxEventsPerTrigger): "
                     f"{bs['rate_limited']['batches']} of {bs['rate_limited']['of']}." if "rate_limited" in bs else ""),
                  "",
                  _table(["phase", "p50 ms", "p99 ms", "max ms"],
                         [[k, f"{v['p50']:.0f}", f"{v['p99']:.0f}", f"{v['max']:.0f}"]
                          for k, v in bs["duration_ms"].items()])]
    lag = result.get("lag_events")
    if lag and lag.get("samples"):
        parts += ["", "## Consumer lag",
                  f"Events on the broker not yet committed by the query, sampled every second: max {lag['max']:,}, "
                  f"mean {lag['mean']:,.0f}, at the end {lag['final']:,} ({lag['samples']} samples)."]
    return parts


def _producers(result: dict) -> list[str]:
    prod = result.get("producers") or {}
    if not prod.get("partition_events"):
        return []
    skew = prod.get("skew", {})
    return ["", "## Producers",
            f"{prod['processes']} process(es); sent {prod['sent']:,}, acked {prod['acked']:,}, "
            f"failed {prod['failed']:,} {prod.get('errors') or ''}; pacer skipped {prod['pacer_skipped']:,}.",
            f"Skew: max/mean share {skew.get('max_mean_share') or 0:.3f}, Gini {skew.get('gini') or 0:.3f}.", "",
            _table(["partition", "events", "bytes"],
                   [[p, f"{n:,}", f"{prod['partition_bytes'].get(p, 0):,}"]
                    for p, n in prod["partition_events"].items()])]


def _sources_and_resources(result: dict) -> list[str]:
    from harness.reports.consumers import consumers_section
    from harness.reports.resources import resources_markdown
    from harness.reports.source_tasks import source_section
    from harness.reports.spark_tasks import placement_section

    parts = (source_section(result.get("source") or {}) + placement_section(result.get("placement") or {})
             + consumers_section(result.get("consumers") or {}))
    if result.get("resources") or result.get("footprint") or result.get("machine"):  # not sampled: unknown, said
        parts += resources_markdown(result.get("resources") or {}, result.get("footprint"), result.get("machine"))
    return parts


def _faults(result: dict, t0: float) -> list[str]:
    if not result.get("faults"):
        return []
    parts = ["", "## Faults",
             _table(["fault", "injected (s)", "healed (s)", "declared effect", "errors"],
                    [[f"{f['kind']} #{f['n']}", _at(f.get("injected_at"), t0), _at(f.get("healed_at"), t0),
                      _effect_text(f.get("effect") or {}), "; ".join(f.get("errors") or []) or "-"]
                     for f in result["faults"]])]
    if result.get("expected_lost_by_partition"):
        parts += ["", "Expected loss by partition (acked, removed by a fault, not delivered): "
                  + ", ".join(f"{p}: {n:,}" for p, n in result["expected_lost_by_partition"].items())]
    return parts


def write_reports(result: dict, run_dir: Path) -> list[str]:
    """report.md and report.html beside result.json; a report that cannot be built is a problem to say, never a
    reason to lose the result (already written)."""
    from harness.files import atomic

    def html() -> str:
        from harness.reports.html import build_html  # matplotlib: a broken install costs the page, not the run

        return build_html(run_dir)

    problems = []
    for name, build in (("report.md", lambda: build_report(result, run_dir)), ("report.html", html)):
        try:
            atomic.write_text(run_dir / name, build())
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{name} could not be built: {type(exc).__name__}: {exc}")
    return problems
