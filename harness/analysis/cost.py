"""What a run's events cost in CPU, from its result.json: the seconds of CPU the query's processes, the broker and
the harness took over the traffic window (the footprint's per-role sums from the resource samples,
harness.analysis.resources), per event offered in that window. One definition for `harness bench rtm` and a
sweep's table, so a micro-batch and a real-time run are set side by side the same way everywhere.
"""
from __future__ import annotations

QUERY_ROLES = ("driver", "driver-jvm", "executor", "python-worker", "launcher", "spark-master", "spark-worker")


def cpu_per_event(result: dict) -> dict:
    """CPU ms per event offered over the traffic window: the query's processes, the broker's; and the footprint
    ratio (the harness's CPU over the system's). None figures when the run measured no window."""
    fp = result.get("footprint") or {}
    by_role, window = fp.get("by_role") or {}, fp.get("window_s") or 0.0
    events = ((result.get("throughput") or {}).get("produce_eps") or 0.0) * window
    if not events:
        return {"query_ms": None, "broker_ms": None, "footprint": fp.get("ratio")}
    query = sum(v for k, v in by_role.items() if k in QUERY_ROLES)
    return {"query_ms": 1000.0 * query / events, "broker_ms": 1000.0 * by_role.get("broker", 0.0) / events,
            "footprint": fp.get("ratio"), "window_s": window, "events": events}


def recovery_s(result: dict) -> float | None:
    """The mean time back to the pre-fault lag band over the faults the query recovered from (result.json
    `recovery`), None without one."""
    times = [r["time_to_recover_s"] for r in result.get("recovery") or []
             if r.get("recovered") and r.get("time_to_recover_s") is not None]
    return sum(times) / len(times) if times else None
