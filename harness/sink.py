"""Reads the query's Parquet file sink the way a downstream reader sees it: through `_spark_metadata`.

Only files listed in the sink's own log count (that log is what makes the file sink exactly-once: a re-run batch
id is skipped). Each batch's log file is written when that batch commits, so its modification time is the moment
the batch's rows became visible: the end of the end-to-end latency. A copy of the run directory need not keep
modification times (git does not, nor a plain `cp -r`), so the run writes them down when the query has stopped
(`_commit_times.json` beside the log, `record_commit_times`), and readers take them from there.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pyarrow.parquet as pq

from harness import atomic

# What an `events` query must keep (harness.queries: the contract), and what the reports use when it is there.
SINK_COLUMNS = ["producer", "seq", "intended_ms", "partition", "offset"]
OPTIONAL_COLUMNS = ["broker_ms", "bytes", "batch_ms"]


COMMIT_TIMES = "_commit_times.json"  # {batch id: commit time ms}, written when the query has stopped


def record_commit_times(sink: Path) -> None:
    """Write down each committed batch's commit time (its log file's modification time) while it is still the
    original's; a sink without a log gets none."""
    if (sink / "_spark_metadata").is_dir():
        atomic.write_json(sink / COMMIT_TIMES, {str(b): t for b, t, _ in batch_log(sink)})


def batch_log(sink: Path) -> list[tuple[int, float, list[str]]]:
    """[(batch id, commit time ms, [data files added])], oldest first; compacted logs contribute new files only.
    Commit times as recorded (`_commit_times.json`), else, for a batch committed since (a soak still running),
    as the log file's modification time."""
    meta = sink / "_spark_metadata"
    if not meta.is_dir():
        return []
    try:
        recorded = {int(k): float(v) for k, v in json.loads((sink / COMMIT_TIMES).read_text()).items()}
    except FileNotFoundError:
        recorded = {}
    entries = []
    for f in meta.iterdir():
        name = f.name.removesuffix(".compact")
        if name.isdigit():
            entries.append((int(name), f))
    seen: set[str] = set()
    out = []
    for batch_id, f in sorted(entries):
        lines = f.read_text(encoding="utf-8").splitlines()
        files = []
        for line in lines[1:]:
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("action", "add") != "add" or rec["path"] in seen:
                continue
            seen.add(rec["path"])
            files.append(relocated(rec["path"], sink))
        out.append((batch_id, recorded[batch_id] if batch_id in recorded else f.stat().st_mtime * 1000.0, files))
    return out


def relocated(path: str, sink: Path) -> str:
    """A data file the log names, where it is now: Spark's log keeps absolute paths, so a run directory copied or
    moved elsewhere finds its files by their path below the sink (the longest tail of the recorded path that
    exists under `sink`, partition directories included). A path outside the local file system is kept."""
    if urlparse(path).scheme not in ("file", ""):
        return path
    local = local_path(path)
    if Path(local).exists():
        return path
    parts = Path(local).parts
    for i in range(1, len(parts)):  # the longest tail first
        candidate = sink.joinpath(*parts[i:])
        if candidate.exists():
            return str(candidate)
    return path


def local_path(path: str) -> str:
    parsed = urlparse(path)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else path


def read_sink(sink: Path, columns: list[str] | None = SINK_COLUMNS,
              optional: list[str] = OPTIONAL_COLUMNS) -> pd.DataFrame:
    """Every row the sink holds (`columns`, plus those of `optional` a file has; all with None), with the batch
    id and commit time (ms) of the batch that wrote it. A file lacking a required column is an error."""
    frames = []
    for batch_id, commit_ms, files in batch_log(sink):
        for path in files:
            wanted = None
            if columns is not None:
                names = set(pq.read_schema(local_path(path)).names)
                wanted = list(columns) + [c for c in optional if c in names]
            table = pq.read_table(local_path(path), columns=wanted)
            df = table.to_pandas()
            df["batch_id"] = batch_id
            df["commit_ms"] = commit_ms
            frames.append(df)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in (columns or []) + ["batch_id", "commit_ms"]})
    return pd.concat(frames, ignore_index=True)
