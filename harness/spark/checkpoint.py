"""Reading a streaming query's checkpoint: the offset log (planned batches) and the commit log (finished ones).

`offsets/<batch>` holds 'v1', the batch metadata, then one JSON line per source ({stream: {partition: offset}}
for Kafka); `commits/<batch>` exists once the batch is done. Faults read and tamper with these; the query
process starts its drain bookkeeping from them.
"""
from __future__ import annotations

import json
from pathlib import Path


def batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(f.name) for f in directory.iterdir() if f.name.isdigit())


def offset_metadata(checkpoint: Path, batch: int) -> dict:
    """The metadata line of offsets/<batch> (its watermark, its time, the confs Spark pins in the checkpoint); {}
    when unreadable."""
    try:
        lines = (checkpoint / "offsets" / str(batch)).read_text(encoding="utf-8").splitlines()
        meta = json.loads(lines[1]) if len(lines) > 1 else {}
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def offset_log_entry(path: Path) -> dict[str, dict[str, int]]:
    """The first source's {stream: {partition: offset}} in one offsets/<batch> file ({} if unreadable)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        source = json.loads(lines[2]) if len(lines) >= 3 else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(source, dict):
        return {}
    return {stream: {str(p): int(o) for p, o in parts.items()} for stream, parts in source.items()
            if isinstance(parts, dict)}


def committed(checkpoint: Path) -> dict[str, dict[str, int]]:
    """Where the last committed batch ended ({} before the first commit)."""
    commits = batch_ids(checkpoint / "commits")
    return offset_log_entry(checkpoint / "offsets" / str(commits[-1])) if commits else {}


def planned(checkpoint: Path) -> dict[str, dict[str, int]]:
    """Where the last planned batch (committed or not) ends."""
    ids = batch_ids(checkpoint / "offsets")
    return offset_log_entry(checkpoint / "offsets" / str(ids[-1])) if ids else {}
