"""What the Event Hubs source's read tasks did, from their records (source-metrics/*.jsonl, one line per task):
receivers created, reused, recreated after a cursor mismatch or a steal, per batch; where each partition was read
(executor and Python worker) and how often that moved; and where the connector's preferred-location strategies
would have put the same partitions. A pure function of the run directory."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from harness.files.jsonl import read_jsonl
from harness.analysis.progress import parse_offsets

COUNTERS = ("rows", "created", "reused", "mismatch", "stolen", "expired_skipped")


def read_tasks(run_dir: Path) -> list[dict]:
    rows: list[dict] = []
    for path in sorted((run_dir / "source-metrics").glob("*.jsonl")):
        rows += read_jsonl(path)
    return sorted(rows, key=lambda r: (r.get("started_ms", 0), str(r.get("partition"))))


def batch_of(progress: list[dict], stream: str) -> dict[tuple[int, int], int]:
    """(partition, end position) -> batch id: a task's range ends where its batch's end offset says (a batch
    re-run after a crash has the same end, so it maps to the same id)."""
    out = {}
    for p in progress:
        for source in p.get("sources") or []:
            for part, end in parse_offsets(source.get("endOffset")).get(stream, {}).items():
                out.setdefault((int(part), int(end)), int(p["batchId"]))
    return out


def source_summary(tasks: list[dict], progress: list[dict], stream: str) -> dict[str, Any]:
    """`tasks`: read_tasks(run_dir)."""
    if not tasks:
        return {}
    batches = batch_of(progress, stream)
    totals = Counter()
    per_batch: dict[int, Counter] = defaultdict(Counter)
    workers_by_batch: dict[int, set] = defaultdict(set)
    where: dict[int, list[tuple[str, int]]] = defaultdict(list)  # partition -> (executor, pid) per task, in order
    lost_ranges, errors = [], 0
    for t in tasks:
        part = int(t["partition"])
        batch = batches.get((part, int(t["end"])), -1)
        counts = {k: int(t.get(k) or 0) for k in COUNTERS}
        totals.update(counts)
        totals["tasks"] += 1
        per_batch[batch].update(counts)
        per_batch[batch]["tasks"] += 1
        # the worker whose receiver read the events: the partition's owner when a sibling served the task
        reader = int(t.get("served_by") or t.get("pid") or 0)
        workers_by_batch[batch].add((str(t.get("executor")), reader))
        where[part].append((str(t.get("executor")), reader))
        lost_ranges += [list(r) for r in t.get("lost_ranges") or []]
        errors += bool(t.get("error"))
    moves = {p: sum(1 for a, b in zip(seq, seq[1:]) if a != b) for p, seq in where.items()}
    executors = sorted({e for seq in where.values() for e, _ in seq})
    return {
        "tasks": totals["tasks"], "totals": {k: totals[k] for k in COUNTERS}, "task_errors": errors,
        "per_batch": {str(b): dict(c, workers=len(workers_by_batch[b])) for b, c in sorted(per_batch.items())},
        "placement": {
            "executors": executors,
            "tasks_per_executor": dict(Counter(e for seq in where.values() for e, _ in seq)),
            "worker_moves_per_partition": {str(p): n for p, n in sorted(moves.items())},
            "same_worker_as_last_batch": _share(sum(len(s) - 1 for s in where.values()), sum(moves.values())),
            "strategies": _strategies(stream, sorted(where), [e for e in executors if e not in ("driver", "unknown")]),
        },
        "lost_ranges": lost_ranges,
    }


def _share(pairs: int, moved: int) -> float | None:
    return None if pairs <= 0 else round(1.0 - moved / pairs, 4)


def _strategies(hub: str, partitions: list[int], executors: list[str]) -> dict[str, Any]:
    """The connector's Hash and BalancedHash placement over the executors the tasks really ran on, and the
    imbalance each gives (most partitions on one executor / the even share). Local mode has no executors to
    prefer: nothing to project."""
    from harness.backends.eventhubs.spark_source.locality import placement

    if not executors:
        return {}
    out = {}
    for strategy in ("Hash", "BalancedHash"):
        chosen = placement(strategy, hub, partitions, executors)
        load = Counter(chosen.values())
        even = len(partitions) / len(executors)
        out[strategy] = {"placement": chosen, "imbalance": round(max(load.values()) / even, 3) if even else None}
    return out
