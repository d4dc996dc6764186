"""source_summary counts where a partition's events were read: a task served by the partition's owner in a sibling
Python worker (served_by, handoff.py) was read by the owner, not by the worker that ran the task."""
from harness.analysis.source_tasks import source_summary


def task(partition: int, start: int, end: int, pid: int, served_by: int | None = None) -> dict:
    return {"partition": str(partition), "start": start, "end": end, "rows": end - start, "created": 0,
            "reused": 1, "mismatch": 0, "stolen": 0, "expired_skipped": 0, "executor": "driver", "pid": pid,
            "served_by": served_by, "started_ms": start, "lost_ranges": [], "error": None}


def progress(batch: int, ends: dict[int, int]) -> dict:
    return {"batchId": batch, "sources": [{"endOffset": {"hub": {str(p): e for p, e in ends.items()}}}]}


def test_the_owner_is_where_a_served_task_was_read():
    # partition 0 owned by worker 11 throughout: its batch-1 task ran in worker 12 and was served by 11;
    # partition 1 really moved from worker 12 to worker 11 (read there itself)
    tasks = [task(0, 0, 5, 11), task(1, 0, 5, 12), task(0, 5, 9, 12, served_by=11), task(1, 5, 9, 11)]
    summary = source_summary(tasks, [progress(0, {0: 5, 1: 5}), progress(1, {0: 9, 1: 9})], "hub")
    assert summary["placement"]["worker_moves_per_partition"] == {"0": 0, "1": 1}
    assert summary["placement"]["same_worker_as_last_batch"] == 0.5  # 1 of 2 consecutive pairs stayed
    assert summary["per_batch"]["1"]["workers"] == 1  # both batch-1 ranges were read by worker 11
