"""What each outage (harness.faults.outage) did to the query that came back, read from the run's records: the
backlog it came back to, its first batch (rows, time, the driver's and executors' memory while it ran), whether it
crash-looped, how long it took to drain, and what aged out unread.

Why these: the restart after an outage fails in production in one of three ways, each measured here so it can be
judged (harness.checkers.outages): the first batch reads the whole backlog and runs out of memory, again at each
restart (the crash-loop); the query drains too slowly (the backlog outlives the topic's retention); records expire
while it is down. The backlog is exact: per partition, the end offset at the restart less where the query had
committed (or the log start, when records aged out past that). The first batch is the first one the restarted
query planned itself (a batch id past the offset log at the stop: a killed query first re-runs its cut batch).
The drain is the fault's recovery (harness.analysis.recovery: from the restart, the heal, until the lag is back
within its band before the outage).
"""
from __future__ import annotations

from typing import Any

from harness.analysis.progress import epoch_s

MB = 1024 * 1024
MEMORY_ROLES = ("driver-jvm", "executor")  # where Spark's batches run (local[*]: the driver's JVM)
CRASH_LOOP = "QUERY_CRASH_LOOP"  # harness.spark.process.CRASH_LOOP, the error class a given-up query fails with


def backlog(detail: dict) -> dict[str, int]:
    """Per partition, the records the restarted query had to read: the end offset at the restart less the later
    of its last commit and the log start (what aged out is not backlog, it is loss)."""
    ends, committed = detail.get("heal_ends_at_restart") or {}, detail.get("heal_committed_at_restart") or {}
    start = detail.get("heal_log_start_at_restart") or {}
    return {p: max(0, int(e) - max(int(committed.get(p, 0)), int(start.get(p, 0)))) for p, e in ends.items()}


def expired(detail: dict) -> dict[str, int]:
    """Per partition, the records that aged out before the query read them: the log start at the restart past
    its last commit."""
    committed, start = detail.get("heal_committed_at_restart") or {}, detail.get("heal_log_start_at_restart") or {}
    return {p: int(s) - int(committed.get(p, 0)) for p, s in start.items() if int(s) > int(committed.get(p, 0))}


def peak_rss_mb(samples: list[dict], start: float, end: float) -> dict[str, float]:
    """The highest RSS each of the Spark roles reached between `start` and `end` (epoch s), in MB."""
    out: dict[str, float] = {}
    for s in samples:
        if not start <= float(s["t"]) <= end:
            continue
        sums: dict[str, int] = {}
        for proc in s.get("procs") or []:
            if proc.get("role") in MEMORY_ROLES:
                sums[proc["role"]] = sums.get(proc["role"], 0) + int(proc["rss_bytes"])
        for role, rss in sums.items():
            out[role] = max(out.get(role, 0.0), round(rss / MB, 1))
    return out


def first_batch(progress: list[dict], restarted_at: float, after_batch: int | None) -> dict[str, Any] | None:
    """The first batch the restarted query planned itself: its id, rows, time (ms) and when it started."""
    for p in progress:
        if "timestamp" not in p or epoch_s(p["timestamp"]) < restarted_at:
            continue
        if after_batch is not None and int(p.get("batchId", -1)) <= after_batch:
            continue  # the batch a killed query re-runs (planned before the stop)
        return {"batch": p.get("batchId"), "rows": int(p.get("numInputRows", 0)),
                "duration_ms": int((p.get("durationMs") or {}).get("triggerExecution", p.get("batchDuration", 0))),
                "started_at": epoch_s(p["timestamp"])}
    return None


def crash_loop(query: dict, restarted_at: float, expected: str | None = None) -> dict[str, Any]:
    """The failures after the restart, why each failed (its cause: the line a reader looks for, deep in a
    foreachBatch traceback), how many show the declared error (`expected`, the outage's `crash_error`), and
    whether the restart policy gave up on the query (a crash-loop)."""
    crashes = [c for c in query.get("crash_list") or [] if float(c.get("at", 0)) >= restarted_at]
    gave_up = query.get("state") == "failed" and CRASH_LOOP in str(query.get("error") or "")
    return {"crashes": len(crashes), "gave_up": gave_up,
            "crash_errors": sorted({cause(c.get("error"), expected) for c in crashes})[:3],
            "crash_error": expected,
            "crashes_as_declared": sum(1 for c in crashes if expected and expected in str(c.get("error") or ""))}


CAUSES = ("java.lang.OutOfMemoryError", "spark.driver.maxResultSize")  # what a reader looks for first


def cause(error: Any, expected: str | None = None) -> str:
    """The line of an error that says why the query failed: the one with the declared text, else with an
    out-of-memory or result-size error (a foreachBatch failure's first line only names the Python proxy), else
    the first line."""
    lines = [line.strip() for line in str(error or "").splitlines() if line.strip()]
    for marker in ((expected,) if expected else ()) + CAUSES:
        for line in lines:
            if marker in line:
                return line[:200]
    return _first_line(error)


def measure_outage(record: dict, progress: list[dict], query: dict, samples: list[dict], recovery: dict | None,
                   run_end: float) -> dict[str, Any]:
    """One outage's figures (module docstring); `recovery` its fault recovery, when the run had producers."""
    detail = record["detail"]
    restarted = detail.get("heal_restarted_at")
    rest = float(restarted) if restarted is not None else None
    log_backlog, aged = backlog(detail), expired(detail)
    first = first_batch(progress, rest, detail.get("inject_offset_log_last")) if rest is not None else None
    drained_at = drain_s(record, recovery, rest)
    until = rest + drained_at if rest is not None and drained_at is not None else run_end
    out: dict[str, Any] = {
        "n": record["n"], "fault": record["fault"], "stop": detail.get("inject_stop"),
        "down_s": detail.get("inject_down_s"), "restarted": rest is not None,
        "down_for_s": round(rest - float(record["injected_at"]), 3) if rest is not None else None,
        "cap": detail.get("inject_cap"), "crash_loop_expected": bool(detail.get("inject_crash_loop_expected")),
        "max_restarts": detail.get("inject_max_restarts"), "drain_within_s": detail.get("inject_drain_within_s"),
        "backlog_events": sum(log_backlog.values()), "backlog_partitions": sum(1 for n in log_backlog.values() if n),
        "expired_events": sum(aged.values()), "retention_ms": detail.get("inject_retention_ms"),
        "expired_undelivered": (recovery or {}).get("expected_lost"),
        "expired_by_partition": aged, "first_batch": first,
        "peak_rss_mb": peak_rss_mb(samples, rest, until) if rest is not None else {},
        "drain_s": drained_at, "drain_eps": (recovery or {}).get("drain_gross_eps"),
        "backlog_peak_events": (recovery or {}).get("backlog_peak_events"),
        **(crash_loop(query, rest, detail.get("inject_crash_error")) if rest is not None else
           {"crashes": 0, "gave_up": False, "crash_errors": [], "crash_error": detail.get("inject_crash_error"),
            "crashes_as_declared": 0})}
    return out


def drain_s(record: dict, recovery: dict | None, restarted_at: float | None) -> float | None:
    """Seconds from the restart until the lag was back within its band before the outage (the recovery's time
    from the injection, less the time the query was down); None when it never was, or was never restarted."""
    took = (recovery or {}).get("time_to_recover_s")
    if took is None or restarted_at is None:
        return None
    return round(float(record["injected_at"]) + float(took) - restarted_at, 3)


def measure_outages(records: list[dict], progress: list[dict], query: dict, samples: list[dict] | None,
                    recovery: list[dict], run_end: float) -> list[dict]:
    """One entry per outage injection, in order."""
    by_fault = {(r.get("fault"), r.get("n")): r for r in recovery}
    return [measure_outage(f, progress, query, samples or [], by_fault.get((f["fault"], f["n"])), run_end)
            for f in records if f["kind"] == "outage" and f["injected_at"] is not None]


def _first_line(error: Any) -> str:
    return (str(error or "").strip().splitlines() or ["(no error recorded)"])[0][:200]
