"""The batch time the checkpoint costs, from Spark's own progress: each micro-batch writes its offset log entry
before it runs (durationMs `walCommit`) and its commit log entry after its sink wrote (`commitOffsets`); on an
object store each is a few HTTP requests (apache/spark#31495, #37474), which a slow store makes the batch wait for
unless asynchronous progress tracking (asyncProgressTrackingEnabled) takes them off the batch's path.

Pure functions of the progress records and the recorded faults: harness.checkers.checkpoint judges them.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from harness.analysis.progress import epoch_s

FAULT_KIND = "checkpoint_storage"


@dataclass(frozen=True)
class BatchCost:
    """One batch: when it started and ended (epoch s), its offset log and commit log writes (ms), its whole time."""

    batch: int
    start_s: float
    end_s: float
    wal_ms: float
    commit_ms: float
    trigger_ms: float

    @property
    def total_ms(self) -> float:
        return self.wal_ms + self.commit_ms


@dataclass(frozen=True)
class FaultWindow:
    """One injection of a checkpoint_storage fault: its scenario entry, when it was on (epoch s), what it saw."""

    fault: int
    n: int
    start_s: float
    end_s: float
    since_inject: dict | None  # the store's and the proxy's counts while it was on (the fault's heal record)


def batch_costs(progress: list[dict]) -> list[BatchCost]:
    """Every batch that wrote its offset log (a progress record with durationMs walCommit), in batch order."""
    out = []
    for p in progress:
        d = p.get("durationMs") or {}
        if "walCommit" not in d or "timestamp" not in p:
            continue
        start = epoch_s(p["timestamp"])
        trigger = float(d.get("triggerExecution", 0.0))
        out.append(BatchCost(int(p.get("batchId", -1)), start, start + trigger / 1000.0, float(d["walCommit"]),
                             float(d.get("commitOffsets", 0.0)), trigger))
    return sorted(out, key=lambda c: (c.batch, c.start_s))


def fault_windows(records: list[dict], ended_s: float | None) -> list[FaultWindow]:
    """The checkpoint_storage injections as recorded (faults.jsonl); one never healed lasts until `ended_s`."""
    out = []
    for f in records:
        if f["kind"] != FAULT_KIND or f["injected_at"] is None:
            continue
        end = f["healed_at"] if f["healed_at"] is not None else (ended_s or float("inf"))
        out.append(FaultWindow(f["fault"], f["n"], float(f["injected_at"]), float(end),
                               (f.get("detail") or {}).get("heal_since_inject")))
    return out


def inside(costs: list[BatchCost], window: FaultWindow) -> list[BatchCost]:
    """The batches that ran at any time while the fault was on. Not only those wholly inside: a batch the fault
    slows may outlast it (on a busy machine one batch can span the whole fault), and there would be none to judge."""
    return [c for c in costs if c.start_s < window.end_s and c.end_s > window.start_s]


def outside(costs: list[BatchCost], windows: list[FaultWindow], from_s: float | None) -> list[BatchCost]:
    """The batches from `from_s` on (the measured window) that overlapped no fault: the store's own cost."""
    return [c for c in costs if (from_s is None or c.start_s >= from_s)
            and not any(c.start_s < w.end_s and c.end_s > w.start_s for w in windows)]


def summary(costs: list[BatchCost]) -> dict:
    """Median and worst of the checkpoint's time per batch, its two writes' medians, and its median share of the
    batch; {} without batches."""
    if not costs:
        return {}
    totals = sorted(c.total_ms for c in costs)
    shares = [c.total_ms / c.trigger_ms for c in costs if c.trigger_ms > 0]
    return {"batches": len(costs), "p50_ms": median(totals), "p90_ms": totals[int(0.9 * (len(totals) - 1))],
            "max_ms": totals[-1], "wal_p50_ms": median(c.wal_ms for c in costs),
            "commit_p50_ms": median(c.commit_ms for c in costs),
            "share_p50": round(median(shares), 4) if shares else None}
