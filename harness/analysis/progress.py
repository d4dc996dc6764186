"""Spark's progress records (progress.jsonl, one per micro-batch as StreamingQueryProgress reports it) read once
into figures: batch durations per phase, rows per second, how far each batch stayed behind the latest offset, the
state operators; the offsets' JSON and the records' timestamps parsed in one place."""
from __future__ import annotations

import json
from datetime import datetime

import numpy as np


def epoch_s(iso: str) -> float:
    """A progress record's ISO-8601 `timestamp` (UTC, "Z") as epoch seconds."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def commit_s(progress: dict) -> float:
    """When a batch committed (epoch s): its start (`timestamp`) plus its triggerExecution."""
    return epoch_s(progress["timestamp"]) + progress.get("durationMs", {}).get("triggerExecution", 0) / 1000.0


PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def parse_offsets(value) -> dict[str, dict[str, int]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _lag(source: dict) -> int | None:
    """Rows available but not yet read after this batch: latestOffset - endOffset, summed over partitions."""
    latest, end = parse_offsets(source.get("latestOffset")), parse_offsets(source.get("endOffset"))
    if not latest or not end:
        return None
    total = 0
    for stream, parts in latest.items():
        for p, off in parts.items():
            total += max(0, int(off) - int(end.get(stream, {}).get(p, off)))
    return total


def batch_stats(progress: list[dict]) -> dict:
    """Per-batch timings and lag from StreamingQueryProgress records (only batches that read rows count)."""
    data = [p for p in progress if p.get("numInputRows", 0) > 0]
    rows = sum(p["numInputRows"] for p in data)
    busy_ms = sum(p.get("durationMs", {}).get("triggerExecution", 0) for p in data)
    out: dict = {"count": len({p.get("batchId") for p in progress}), "with_data": len(data), "input_rows": rows,
                 "process_rps": rows / (busy_ms / 1000.0) if busy_ms else 0.0, "duration_ms": {}}
    for phase in PHASES:
        values = np.array([p.get("durationMs", {}).get(phase, 0) for p in data], dtype=float)
        if len(values):
            out["duration_ms"][phase] = {"p50": float(np.percentile(values, 50)),
                                         "p99": float(np.percentile(values, 99)), "max": float(values.max())}
    lags = [lag for p in progress for s in p.get("sources", []) if (lag := _lag(s)) is not None]
    # rows Spark knew were available but left for later batches (non-zero with a rate limit such as
    # maxOffsetsPerTrigger); the broker-side lag over time is harness.analysis.lag's business
    out["known_backlog_rows"] = {"max": max(lags) if lags else 0, "final": lags[-1] if lags else 0}
    # a batch that ended below what the source reported available was cut by its per-trigger cap
    cut = [lag for p in data for s in p.get("sources", []) if (lag := _lag(s))]
    out["rate_limited"] = {"batches": len(cut), "of": len(data), "backlog_left_max": max(cut) if cut else 0}
    sizes = np.array([p["numInputRows"] for p in data], dtype=float)
    if len(sizes):
        out["rows_per_batch"] = {"p50": float(np.percentile(sizes, 50)), "max": float(sizes.max())}
    state = state_operators(progress)
    if state:
        out["state_operators"] = state
    return out


def state_operators(progress: list[dict]) -> dict:
    """Per stateful operator, Spark's own figures over the run: rows in state at the end, rows it dropped as
    later than the watermark, and (deduplication) rows it dropped as duplicates. Only completed batches report
    progress, so a batch re-run after a crash counts once."""
    ops: dict[str, dict] = {}
    for p in progress:
        for i, op in enumerate(p.get("stateOperators") or []):
            o = ops.setdefault(f"{i}:{op.get('operatorName', 'state')}",
                               {"rows_total": 0, "dropped_by_watermark": 0, "dropped_duplicates": 0})
            o["rows_total"] = int(op.get("numRowsTotal", 0))
            o["dropped_by_watermark"] += int(op.get("numRowsDroppedByWatermark", 0))
            o["dropped_duplicates"] += int((op.get("customMetrics") or {}).get("numDroppedDuplicateRows", 0))
    return ops


def partitions_read(progress: dict) -> int:
    """Partitions a batch advanced (its sources' start and end offsets; a first batch has no start)."""
    n = 0
    for source in progress.get("sources") or []:
        start, end = parse_offsets(source.get("startOffset")), parse_offsets(source.get("endOffset"))
        for stream, parts in end.items():
            if not isinstance(parts, dict):
                continue
            before = start.get(stream) if isinstance(start.get(stream), dict) else {}
            n += sum(1 for p, off in parts.items() if int(off) > int(before.get(p, 0)))
    return n


def kafka_cap_slack(progress: dict) -> int:
    """How far a batch may read past its per-trigger cap on Spark's Kafka source, which splits the cap over the
    partitions by backlog and rounds a share below one record up to one: (partitions read - 1)."""
    return max(partitions_read(progress), 1) - 1
