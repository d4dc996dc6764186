"""Where Spark ran each micro-batch's read tasks, from Spark's own event log: executor, host, locality level,
duration, and the source partition each task read. A pure function of the run directory.

The query process writes the event log (`spark/events/`, one file per driver start, the record the history
server serves its REST API from). It outlives the driver, so a run whose driver was killed keeps the tasks it
logged. A task's source partition comes from where the source says it is:
  * Event Hubs: the source's own task records (source-metrics/), matched by task id and time;
  * Kafka (and any source) when the batch wrote its sink in the stage that read it (the passthrough query): the
    sink file `part-<task index>-...` holds that task's rows, with their `partition` column.
A task whose partition cannot be known is counted, with its partition None.
"""
from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable


BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property MicroBatchExecution sets on a batch's jobs
_PART_FILE = re.compile(r"^part-(\d+)-")


def event_log_files(run_dir: Path) -> list[list[Path]]:
    """One list of files per application (driver start), oldest first: a rolling log (Spark 4's default) is a
    directory `eventlog_v2_<app>/` of `events_<n>_<app>` files; a plain one is a single file."""
    apps = []
    for entry in (run_dir / "spark" / "events").glob("*"):
        if entry.is_dir():
            parts = [f for f in entry.iterdir() if f.name.startswith("events_")]
            parts.sort(key=lambda f: int(f.name.split("_")[1]) if f.name.split("_")[1].isdigit() else 0)
            if parts:
                apps.append(parts)
        elif not entry.name.startswith("."):
            apps.append([entry])
    return sorted(apps, key=_app_start_ms)


def _app_start_ms(files: list[Path], look: int = 200) -> float:
    """When the application started, as its log says (SparkListenerApplicationStart, among its first lines): a
    copied run directory need not keep the files' modification times. Else the first file's."""
    with open(files[0], encoding="utf-8", errors="replace") as f:
        for _, line in zip(range(look), f):
            if '"SparkListenerApplicationStart"' in line:
                return float(json.loads(line)["Timestamp"])
    return files[0].stat().st_mtime * 1000.0


def read_event_logs(run_dir: Path) -> list[dict]:
    """Every finished task of a micro-batch's scan stage (its job's stage without parents), oldest first."""
    tasks: list[dict] = []
    for n, files in enumerate(event_log_files(run_dir)):
        tasks += _tasks_of(files, n)
    return sorted(tasks, key=lambda t: (t["launch_ms"], t["index"]))


def _lines(files: list[Path]):
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield from f


def _tasks_of(files: list[Path], app: int) -> list[dict]:
    scan_stage: dict[int, int] = {}  # stage id -> batch id, for the stages that read the source
    stages_in_job: dict[int, int] = {}  # stage id -> how many stages its job has
    out = []
    for line in _lines(files):
        if '"SparkListenerJobStart"' not in line and '"SparkListenerTaskEnd"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:  # the last line of a log whose driver was killed mid-write
            continue
        if event.get("Event") == "SparkListenerJobStart":
            batch = (event.get("Properties") or {}).get(BATCH_ID_PROPERTY)
            if batch is None:
                continue
            infos = event.get("Stage Infos") or []
            for info in infos:
                if not info.get("Parent IDs"):
                    scan_stage[int(info["Stage ID"])] = int(batch)
                stages_in_job[int(info["Stage ID"])] = len(infos)
        elif event.get("Event") == "SparkListenerTaskEnd" and int(event.get("Stage ID", -1)) in scan_stage:
            info, metrics = event.get("Task Info") or {}, event.get("Task Metrics") or {}
            stage = int(event["Stage ID"])
            out.append({
                "app": app, "batch": scan_stage[stage], "stage": stage, "single_stage": stages_in_job[stage] == 1,
                "index": int(info.get("Index", -1)), "attempt": int(info.get("Attempt", 0)),
                "task_id": int(info.get("Task ID", -1)), "executor": str(info.get("Executor ID")),
                "host": info.get("Host"), "locality": info.get("Locality"),
                "launch_ms": int(info.get("Launch Time") or 0), "finish_ms": int(info.get("Finish Time") or 0),
                "failed": bool(info.get("Failed")) or bool(info.get("Killed")),
                "records_read": int((metrics.get("Input Metrics") or {}).get("Records Read") or 0),
                "partition": None,
            })
    return out


def partitions_from_sink(sink: Path) -> dict[tuple[int, int], set[int]]:
    """(batch id, task index) -> the source partitions of the rows that task wrote (part-<index>-... files)."""
    import pyarrow.parquet as pq

    from harness.sinks.parquet.files import local_path, batch_log

    out: dict[tuple[int, int], set[int]] = defaultdict(set)
    for batch_id, _, files in batch_log(sink):
        for path in files:
            match = _PART_FILE.match(Path(local_path(path)).name)
            if not match:
                continue
            try:
                column = pq.read_table(local_path(path), columns=["partition"]).column("partition")
            except (OSError, KeyError, ValueError):
                continue
            out[(batch_id, int(match.group(1)))].update(int(p) for p in column.unique().to_pylist() if p is not None)
    return out


def partitions_from_records(tasks: list[dict], source_records: Iterable[dict]) -> bool:
    """Set each task's partition from the source's own task records (matched by stage, task id and start time:
    ids restart with each driver); False when the source keeps none."""
    by_id: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for t in tasks:
        by_id[(t["stage"], t["task_id"])].append(t)
    matched = False
    for r in source_records:
        if r.get("task_id") is None or r.get("stage") is None:
            continue
        for t in by_id.get((int(r["stage"]), int(r["task_id"])), []):
            if t["launch_ms"] - 1000 <= int(r.get("started_ms") or 0) <= t["finish_ms"] + 1000:
                t["partition"], matched = int(r["partition"]), True
    return matched


def partitions_from_sink_files(tasks: list[dict], sink: Path) -> None:
    """Set the partition of each task of a one-stage batch from the sink file it wrote (one partition per file)."""
    if not any(t["single_stage"] for t in tasks):
        return
    written = partitions_from_sink(sink)
    for t in tasks:
        parts = written.get((t["batch"], t["index"]))
        if t["single_stage"] and not t["failed"] and parts and len(parts) == 1:
            t["partition"] = next(iter(parts))


def placement_summary(tasks: list[dict]) -> dict[str, Any]:
    """Where the scan tasks ran and how stable that was: per partition, the executors that read it and how often
    it moved between consecutive batches; locality levels; task times (the median task, and the slowest task
    over the median within a batch: skew turned into task-time skew)."""
    done = [t for t in tasks if not t["failed"]]
    if not done:
        return {}
    executors = sorted({t["executor"] for t in done})
    per_partition: dict[int, list[str]] = defaultdict(list)
    seen_batch: dict[int, int] = {}
    for t in done:  # oldest first; a partition split over several tasks of a batch counts once per batch
        p = t["partition"]
        if p is None or seen_batch.get(p) == t["batch"]:
            continue
        seen_batch[p] = t["batch"]
        per_partition[p].append(t["executor"])
    moves = {p: sum(1 for a, b in zip(seq, seq[1:]) if a != b) for p, seq in per_partition.items()}
    pairs = sum(len(seq) - 1 for seq in per_partition.values())
    by_batch: dict[int, list[float]] = defaultdict(list)
    for t in done:
        by_batch[t["batch"]].append(t["finish_ms"] - t["launch_ms"])
    spread = [max(d) / statistics.median(d) for d in by_batch.values() if len(d) > 1 and statistics.median(d) > 0]
    return {
        "tasks": len(done), "tasks_reading": len(_reading(done)), "failed_tasks": len(tasks) - len(done),
        "batches": len(by_batch),
        "executors": executors,
        "tasks_per_executor": dict(sorted(Counter(t["executor"] for t in done).items())),
        "locality": dict(sorted(Counter(str(t["locality"]) for t in done).items())),
        "partition_known": _share_known(done),
        "partitions": {str(p): {"executors": dict(sorted(Counter(seq).items())), "moves": moves[p],
                                "batches": len(seq)} for p, seq in sorted(per_partition.items())},
        "same_executor_as_last_batch": None if pairs <= 0 else round(1 - sum(moves.values()) / pairs, 4),
        "task_ms": {"median_of_batch_medians": _median([statistics.median(d) for d in by_batch.values()]),
                    "median_max_over_median": _median(spread)},
    }


def _reading(tasks: list[dict]) -> list[dict]:
    return [t for t in tasks if t["records_read"] > 0 or t["partition"] is not None]


def _share_known(tasks: list[dict]) -> float | None:
    """Of the tasks that read something (an empty range's task has no partition to know), those whose source
    partition is known."""
    reading = _reading(tasks)
    return round(sum(t["partition"] is not None for t in reading) / len(reading), 4) if reading else None


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def placement_tasks(run_dir: Path, source_records: Iterable[dict] = ()) -> list[dict]:
    """The scan tasks of the event log, each with its source partition where it can be known."""
    tasks = read_event_logs(run_dir)
    if tasks and not partitions_from_records(tasks, source_records):
        partitions_from_sink_files(tasks, run_dir / "sink")
    return tasks
