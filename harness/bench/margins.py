"""How far each threshold-decided check of a run is from flipping: the catalogue's margins (issue 30).

A verdict that passes with processed 96% of the offered rate against a 95% floor holds today and flips on a
slightly worse day. The margin says how much of what a check allows was left unused, read from result.json
(never judged again):

  ceiling checks (value <= limit):  (limit - value) / limit
      latency_p99 (p99 against checks.latency_p99_ms), headroom when required (batch p50 against the longest
      p50 the scenario allows), batch_duration (real-time mode: the time beyond the interval against 20% of
      it), query_recovered (the slowest return against spark.start_timeout_s);
  lag_growth: passes when the slope's high end (slope + z se) is within its limit *or* the fitted end lag is
      within its own, so it flips only when both are crossed: the larger of the two ceiling margins;
  processed_rate (processed >= (1 - f) x offered): the share of the allowed shortfall f x offered left unused,
      (processed - need) / (offered - need): 1 at exactly the offered rate, 0 on the floor (96% against 95%
      is 0.2).

1 is the whole allowance unused, 0 the edge, negative over it (a failed check). Counts judged against an exact
allowance (lost, duplicated, out of order: 0 allowed) have no margin: one event is a failure. Checks that are
"not required" are listed by the run but decide nothing, so they get no margin either.

NARROW (10%): a margin under it is flagged by the catalogue unless the scenario says why
(`checks.narrow_margin`).
"""
from __future__ import annotations

from typing import Any

NARROW = 0.10
CEILINGS = ("latency_p99", "headroom", "batch_duration", "query_recovered")


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _ceiling(value: Any, limit: Any) -> float | None:
    v, lim = _num(value), _num(limit)
    if v is None or lim is None or lim <= 0:
        return None
    return (lim - v) / lim


def lag_margin(c: dict, z: float) -> float | None:
    """lag_growth's margin: the larger of its two ceilings (module docstring)."""
    slope, se = _num(c.get("value")), _num(c.get("slope_se_eps"))
    slope_m = None if slope is None else _ceiling(slope + z * (se or 0.0), c.get("limit"))
    end_m = _ceiling(c.get("end_lag"), c.get("end_lag_max"))
    found = [m for m in (slope_m, end_m) if m is not None]
    return max(found) if found else None


def rate_margin(c: dict) -> float | None:
    processed, need, offered = _num(c.get("value")), _num(c.get("limit")), _num(c.get("offered_eps"))
    if processed is None or need is None or offered is None or offered <= need:
        return None
    return (processed - need) / (offered - need)


def _decides(c: dict) -> bool:
    return c.get("status") in ("pass", "fail", "unknown", "unjudged")


def margins(result: dict | None) -> list[dict]:
    """[{"check", "margin", "detail"}] for every threshold-decided check (or criterion of `sustained`) that
    decides the run, in result.json's order; empty for a run without any."""
    out: list[dict] = []
    for c in (result or {}).get("checks") or []:
        if not isinstance(c, dict) or not _decides(c):
            continue
        name = c.get("name")
        if name == "sustained":
            z = _num((c.get("thresholds") or {}).get("z")) or 2.0
            for sub in c.get("criteria") or []:
                m = {"lag_growth": lambda s: lag_margin(s, z), "processed_rate": rate_margin,
                     "batch_duration": lambda s: _ceiling(s.get("value"), s.get("limit"))}.get(sub.get("name"))
                value = m(sub) if m else None
                if value is not None:
                    out.append({"check": f"sustained.{sub['name']}", "margin": value, "detail": sub.get("detail")})
        elif name in CEILINGS:
            value = _ceiling(c.get("value"), c.get("limit"))
            if value is not None:
                out.append({"check": name, "margin": value, "detail": c.get("detail")})
    return out


def smallest(found: list[dict]) -> dict | None:
    """The margin closest to flipping, None without any."""
    return min(found, key=lambda m: m["margin"], default=None)


def margin_text(m: dict | None) -> str:
    """`sustained.processed_rate 20%` (the share of the allowance left), '-' without a margin."""
    if m is None:
        return "-"
    return f"{m['check']} {100 * m['margin']:.0f}%"
