"""The micro-batch phases a `driver_kill` can cut at, and how to tell from the checkpoint that a kill hit one.

Why one place: the fault freezes the driver, observes the checkpoint (and the sink's log) while nothing moves,
and kills only when the phase it was asked for holds (`hit`); the judge reads that recorded observation back and
applies the same rule, so "the phase was hit" is a finding of the run, not a claim of the fault's. An
observation that cannot say (a sink with no log of its batches) is unknown, never a hit.

Phases, in a batch's order (Spark's MicroBatchExecution):
- `after_offsets`: offsets/N written (the write-ahead log), the sink has not written batch N (its own log says so:
  the file sink's `_spark_metadata/N` absent), commits/N absent.
- `mid_batch`: offsets/N written, commits/N absent: anywhere in the batch.
- `after_sink_write`: the sink has written batch N (the file sink's `_spark_metadata/N`, a foreachBatch writer
  returned, records of an uncommitted batch in the Kafka sink's topic), commits/N absent.
- `state_snapshot`: a state store snapshot (RocksDB's `<version>.zip`) being written: its temporary file exists.
- `first_commit`: batch 0's commit being written: `commits/.0.<uuid>.tmp` exists and `commits/0` does not. Left
  there by a kill, Spark refuses the restart (real-time mode: FIRST_COMMIT_FAILURE).
"""
from __future__ import annotations

from pathlib import Path

PHASES = ("mid_batch", "after_offsets", "after_sink_write", "state_snapshot", "first_commit")
# what a real-time query killed while writing its first commit fails with on restart (commits/ is not empty on
# batch 0: the temporary file is there); PySpark 4.3
FIRST_COMMIT_FAILURE = "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"


def temp_file(name: str, of: str = "") -> bool:
    """A CheckpointFileManager temporary file (`.<name>.<uuid>.tmp`), of `of` when given; not its .crc."""
    return name.startswith(f".{of}") and name.endswith(".tmp") and not name.endswith(".crc")


def snapshot_temp(name: str) -> bool:
    """A state snapshot's temporary file: `.<version>.zip.<uuid>.tmp` (or `.<version>_<id>.zip...`)."""
    return temp_file(name) and ".zip." in name


def state_partitions(checkpoint: Path) -> list[Path]:
    """Every state store partition directory (state/<operator>/<partition>) that exists now."""
    return sorted(p for p in (checkpoint / "state").glob("[0-9]*/[0-9]*") if p.is_dir())


def observe(checkpoint: Path, batch: int | None, sink_written: bool | None) -> dict:
    """Facts about batch `batch` in the checkpoint as it is now (call it with the driver frozen): its offsets and
    commit, the commit's temporary files, the state snapshots being written, and whether the sink had written it
    (the caller's, from the sink: None when the sink cannot tell)."""
    commits = checkpoint / "commits"
    snapshots = [str(p.relative_to(checkpoint) / f.name) for p in state_partitions(checkpoint)
                 for f in _entries(p) if snapshot_temp(f.name)]
    return {"batch": batch,
            "offsets": batch is not None and (checkpoint / "offsets" / str(batch)).exists(),
            "commit": batch is not None and (commits / str(batch)).exists(),
            "sink_written": sink_written,
            "commit_tmp": sorted(f.name for f in _entries(commits)
                                 if batch is not None and temp_file(f.name, f"{batch}.")),
            "snapshot_tmp": sorted(snapshots)}


def hit(phase: str, seen: dict | None) -> tuple[bool | None, str]:
    """Whether observation `seen` is the phase `phase` (None: it cannot tell), and why, in a sentence."""
    if not seen:
        return None, "nothing was observed at the kill"
    n, commit = seen.get("batch"), bool(seen.get("commit"))
    written = seen.get("sink_written")
    at = f"batch {n}: offsets {'written' if seen.get('offsets') else 'absent'}, commit " \
         f"{'written' if commit else 'absent'}, sink {_said(written)}"
    if phase == "mid_batch":
        return bool(seen.get("offsets")) and not commit, at
    if phase == "after_offsets":
        if not seen.get("offsets") or commit or written:
            return False, at
        return (None if written is None else True), at + ("" if written is not None else
                                                          " (the sink keeps no log to tell)")
    if phase == "after_sink_write":
        if commit or written is False:
            return False, at
        return (None if written is None else True), at
    if phase == "state_snapshot":
        tmp = seen.get("snapshot_tmp") or []
        return bool(tmp), f"{len(tmp)} state snapshot temporary files being written ({', '.join(tmp[:3])})"
    if phase == "first_commit":
        tmp = seen.get("commit_tmp") or []
        return n == 0 and bool(tmp) and not commit, f"{at}; commit temporary files {tmp}"
    return False, f"unknown phase {phase!r}"


def _said(written: bool | None) -> str:
    return "unknown" if written is None else ("had written it" if written else "had not written it")


def _entries(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:
        return []
