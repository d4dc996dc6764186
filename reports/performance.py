"""The run's performance in words and tables, for report.md and report.html alike: where its steady state began
and what start-up cost (harness.analysis.steady), whether the query kept up (the `sustained` check's figures,
harness.checkers.sustained) and how much room its batches left (`headroom`), and what each fault cost
(harness.analysis.recovery)."""
from __future__ import annotations

from typing import Any

from harness.analysis.startup import describe as describe_startup


def _n(x: Any, unit: str = "", digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}{unit}"


def steady_lines(result: dict) -> list[str]:
    steady, start = result.get("steady") or {}, result.get("startup") or {}
    if not steady:
        return []
    measured = result.get("latency_measured_ms") or {}
    cold = start.get("cold_latency_ms") or {}
    out = [f"Headline latency and throughput are the steady part's: from {steady['from_s']:.0f} s "
           f"({steady.get('reason')}; {steady.get('method')}, over the {steady.get('series', 'series')}).",
           f"Start-up: the first batch {_n(start.get('first_batch_from_run_start_s'), ' s', 1)} and the first batch "
           f"with data {_n(start.get('first_data_batch_from_run_start_s'), ' s', 1)} after `harness run` started "
           f"(traffic began at {_n(start.get('traffic_from_run_start_s'), ' s', 1)}; first data committed "
           f"{_n(start.get('first_data_batch_from_traffic_s'), ' s', 1)} into it)."]
    out += describe_startup(result.get("startup_steps") or {})  # which step took what; the gap explained
    if start.get("cold_events"):
        out.append(f"The {start['cold_s']:.0f} s of start-up in the measured window ({start['cold_events']:,} events): "
                   f"p50 {_n(cold.get('p50'), ' ms')}, p99 {_n(cold.get('p99'), ' ms')}; the whole measured window: "
                   f"p50 {_n(measured.get('p50'), ' ms')}, p99 {_n(measured.get('p99'), ' ms')}.")
    return out


def sustained_check(result: dict) -> dict | None:
    return next((c for c in result.get("checks") or [] if c.get("name") == "sustained"), None)


def sustained_rows(result: dict) -> list[list[str]]:
    """Each keeping-up criterion: name, status, detail."""
    check = sustained_check(result) or {}
    return [[c["name"], c.get("status") or "-", c["detail"]] for c in check.get("criteria") or []]


def headroom_line(result: dict) -> str | None:
    """The `headroom` check in a sentence, under the keeping-up criteria: the batches' room, not one of them."""
    check = next((c for c in result.get("checks") or [] if c.get("name") == "headroom"), None)
    if check is None:
        return None
    return (f"Headroom ({check.get('status')}; how much of the trigger the median batch leaves idle, not a "
            f"criterion of keeping up): {check.get('detail')}")


def recovery_rows(result: dict) -> list[list[str]]:
    rows = []
    for r in result.get("recovery") or []:
        rows.append([f"{r['kind']} #{r['n']}", _n(r["injected_s"], "", 1),
                     _n(r.get("first_data_batch_after_s"), " s", 1),
                     (_n(r["time_to_recover_s"], " s", 1) + (" (after the traffic)" if r.get("after_traffic") else "")
                      + (f" (with {', '.join(r['overlapped_by'])})" if r.get("overlapped_by") else ""))
                     if r.get("recovered") else "not recovered",
                     _n(r.get("backlog_peak_events")), _n(r.get("drain_eps"), "/s"),
                     f"{r['batches']}" + (f" (re-run {', '.join(map(str, r['rerun_batches']))})"
                                          if r.get("rerun_batches") else ""),
                     _n(r.get("duplicates")), _n(r.get("lost")), _n(r.get("expected_lost"))])
    return rows


RECOVERY_HEAD = ["fault", "injected (s)", "first data batch after", "lag back in its band after", "backlog peak",
                 "drained (net)", "batches", "duplicates", "lost", "declared loss"]
RECOVERY_NOTE = ("Per fault, from its injection: the first batch with data committed after it; when the lag was back "
                 "within its pre-fault band (the highest lag of the 10 s before, at least a batch's worth) and stayed "
                 "there for a batch cadence; the backlog's peak and how fast it fell; the batches that started until "
                 "then, the duplicate sink rows they committed, the undeclared losses acked in that span and the "
                 "fault's own declared losses.")
