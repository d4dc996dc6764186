"""One run of `harness bench verdicts` as a row of its table: what the run's result.json says, never judged again.

Its class comes from result.json's `verdict`, `unjudged_reason` and the checks' `status`:
  pass, fail          the verdict as written;
  unjudged (busy)     `unjudged` only because the machine was busy: every check that kept it from passing has
                      status `unjudged`, set aside for a busy machine (its `unjudged` cause says "busy":
                      harness.checkers.busy), none is `unknown` (the bench does not measure the machine itself);
  unjudged            unjudged for another reason (a check unknown, the run interrupted, a file unreadable);
  no result           no readable result.json (the run crashed, or was stopped before it was judged).
The checks that decided a verdict other than pass: every check whose status is neither `pass` nor `not required`
(failed, unknown, unjudged), each with its detail's first clause (for a check set aside, the clause after its
cause: what it measured; the cause is the `machine` figure's). The figures the verdict rests on are read where
result.json keeps them; each is None (shown "-") when absent: older runs, scenarios without them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.check import status_of

PASS, FAIL, UNJUDGED_BUSY, UNJUDGED, NO_RESULT = "pass", "fail", "unjudged (busy)", "unjudged", "no result"
CLASSES = (PASS, UNJUDGED_BUSY, UNJUDGED, NO_RESULT, FAIL)  # the order counts are listed in
NOT_DECIDING = ("pass", "not required")
CLAUSE_MAX = 100  # characters of a detail's first clause in the table (bench.json keeps the whole detail)
COLUMNS = ("run", "mode", "verdict", "decided by", "lag slope /s (± band; limit)", "processed / offered /s",
           "batch p50 / trigger", "footprint", "machine (others' CPU)", "first data batch")


def first_clause(text: str, limit: int = CLAUSE_MAX) -> str:
    """A detail up to its first ';' (details list their parts that way), at most `limit` characters."""
    clause = str(text or "").split(";", 1)[0].strip()
    return clause if len(clause) <= limit else clause[:limit - 1].rstrip() + "…"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _checks(result: dict) -> list[dict]:
    return [c for c in result.get("checks") or [] if isinstance(c, dict)]


def _busy_word(text: Any) -> bool:
    return bool(re.search(r"\bbusy\b", str(text or ""), re.IGNORECASE))


def _set_aside_for_busy(check: dict) -> bool:
    return status_of(check) == "unjudged" and _busy_word(check.get("unjudged") or check.get("detail"))


def class_of(result: dict | None) -> str:
    if not isinstance(result, dict) or result.get("verdict") not in (PASS, FAIL, UNJUDGED):
        return NO_RESULT
    verdict = result["verdict"]
    if verdict != UNJUDGED:
        return verdict
    undecided = [c for c in _checks(result) if status_of(c) not in NOT_DECIDING]
    busy = bool(undecided) and all(_set_aside_for_busy(c) for c in undecided)
    return UNJUDGED_BUSY if busy else UNJUDGED


def _what_it_measured(check: dict) -> str:
    """A check's detail; for one set aside, without its leading `unjudged: <cause>; ` (the cause is the same
    for every check set aside, and the machine's column says it)."""
    detail, cause = str(check.get("detail") or ""), check.get("unjudged")
    prefix = f"unjudged: {cause}; "
    return detail[len(prefix):] if cause and detail.startswith(prefix) else detail


def deciding_checks(result: dict | None) -> list[dict]:
    """The checks that kept the run from passing: name, status and detail (none for a pass)."""
    if not isinstance(result, dict) or result.get("verdict") == PASS:
        return []
    return [{"name": c.get("name"), "status": status_of(c), "detail": _what_it_measured(c)}
            for c in _checks(result) if status_of(c) not in NOT_DECIDING]


def _by_name(result: dict) -> dict[str, dict]:
    """Every check and every criterion inside one (sustained's lag_growth, processed_rate), by name."""
    out: dict[str, dict] = {}
    for c in _checks(result):
        out.setdefault(str(c.get("name")), c)
        for sub in c.get("criteria") or []:
            if isinstance(sub, dict):
                out.setdefault(str(sub.get("name")), sub)
    return out


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def figures(result: dict | None) -> dict[str, Any]:
    """The figures the verdict rests on, None where result.json has none: sustain's lag slope, its standard error
    and z (the band the judge used) and the lag_growth limit; processed and offered events/s; the batch p50 and
    the trigger interval (`sustained`'s thresholds, or `headroom`'s); the harness's footprint ratio; other
    processes' share of the machine's CPU and whether the judge found the machine busy (`machine`); the first
    data batch's time after the run started (`startup`)."""
    result = _dict(result)
    sustain = _dict(result.get("sustain"))
    lag, named = _dict(sustain.get("lag")), _by_name(result)
    thresholds = _dict(named.get("sustained", {}).get("thresholds"))
    machine = _dict(result.get("machine"))
    return {
        "lag_slope_eps": _num(lag.get("slope_eps")),
        "lag_slope_se_eps": _num(lag.get("slope_se_eps")),
        "lag_band_z": _num(thresholds.get("z")),
        "lag_slope_limit_eps": _num(_dict(named.get("lag_growth")).get("limit")),
        "processed_eps": _num(sustain.get("processed_eps")),
        "offered_eps": _num(sustain.get("offered_eps")),
        "batch_p50_ms": _num(sustain.get("batch_p50_ms")),
        "trigger_ms": next((v for v in (_num(thresholds.get("trigger_interval_ms")),
                                        _num(_dict(named.get("headroom")).get("trigger_interval_ms")))
                            if v is not None), None),
        "footprint_ratio": _num(_dict(result.get("footprint")).get("ratio")),
        "machine_other_share": _num(machine.get("other_share")),
        "machine_busy": machine.get("busy") if isinstance(machine.get("busy"), bool) else None,
        "first_data_batch_s": _num(_dict(result.get("startup")).get("first_data_batch_from_run_start_s")),
    }


def read_result(run_dir: Path) -> dict | None:
    """A run's result.json, or None when it has none or it cannot be read as a JSON object."""
    try:
        data = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def make_row(name: str, mode: str, run_dir: Path, exit_code: int | None, result: dict | None) -> dict:
    """One run's row for the table and bench.json."""
    return {"run": name, "mode": mode, "run_dir": str(run_dir), "exit_code": exit_code,
            "verdict": result.get("verdict") if isinstance(result, dict) else None, "class": class_of(result),
            "unjudged_reason": result.get("unjudged_reason") if isinstance(result, dict) else None,
            "deciding": deciding_checks(result), "figures": figures(result)}


def _n(x: float) -> str:
    return f"{x:,.0f}"


def decided_by(row: dict) -> str:
    """`name (status): first clause` of each deciding check; the reason of an unjudged run without any."""
    parts = [f"{d['name']} ({d['status']}): {first_clause(d['detail'])}" for d in row["deciding"]]
    if not parts and row.get("unjudged_reason"):
        parts = [first_clause(row["unjudged_reason"])]
    if not parts and row["class"] == NO_RESULT:
        parts = ["no result.json" + (f" (exit {row['exit_code']})" if row.get("exit_code") is not None else "")]
    return "; ".join(parts)


def cells(row: dict) -> list[str]:
    """The row's cells in COLUMNS' order, '-' for a figure result.json did not have."""
    f = row["figures"]
    slope, se, limit = f["lag_slope_eps"], f["lag_slope_se_eps"], f["lag_slope_limit_eps"]
    lag = "-"
    if slope is not None:
        lag = f"{slope:+,.0f}"
        if se is not None:  # the band the judge used: z standard errors either side
            lag += f" ± {_n((f['lag_band_z'] or 1.0) * se)}" + ("" if f["lag_band_z"] else " (1 se)")
        if limit is not None:
            lag += f" (limit {_n(limit)})"
    processed, offered = f["processed_eps"], f["offered_eps"]
    rate = "-" if processed is None and offered is None else (
        f"{'-' if processed is None else _n(processed)} / {'-' if offered is None else _n(offered)}"
        + (f" ({100 * processed / offered:.0f}%)" if processed is not None and offered else ""))
    p50, trigger = f["batch_p50_ms"], f["trigger_ms"]
    batch = "-" if p50 is None else f"{_n(p50)} / {'-' if trigger is None else _n(trigger)} ms"
    foot, others, first = f["footprint_ratio"], f["machine_other_share"], f["first_data_batch_s"]
    machine = "-" if others is None else f"{100 * others:.0f}%" + (" (busy)" if f.get("machine_busy") else "")
    return [row["run"], row["mode"], row["class"], decided_by(row), lag, rate, batch,
            "-" if foot is None else f"{100 * foot:.1f}%", machine, "-" if first is None else f"{first:.1f} s"]
