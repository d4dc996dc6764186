"""Reads the query's Parquet file sink the way a downstream reader sees it: through `_spark_metadata`.

Only files listed in the sink's own log count (that log is what makes the file sink exactly-once: a re-run batch
id is skipped). Each batch's log file is written when that batch commits, so its modification time is the moment
the batch's rows became visible: the end of the end-to-end latency. A copy of the run directory need not keep
modification times (git does not, nor a plain `cp -r`), so the run writes them down when the query has stopped
(`_commit_times.json` beside the log, `record_commit_times`), and readers take them from there. For the same
reason the log's absolute paths are only read as paths below the sink: a run directory judges its own files.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pyarrow.parquet as pq

from harness.files import atomic

# What an `events` query must keep (harness.queries: the contract), and what the reports use when it is there.
SINK_COLUMNS = ["producer", "seq", "intended_ms", "partition", "offset"]
OPTIONAL_COLUMNS = ["broker_ms", "bytes", "batch_ms"]


COMMIT_TIMES = "_commit_times.json"  # {batch id: commit time ms}, written when the query has stopped

COPIED_SCHEMES = ("s3a",)  # an object store the run copies into its run directory at its end (harness.objstore)

def record_commit_times(sink: Path) -> None:
    """Write down each committed batch's commit time (its log file's modification time) while it is still the
    original's; a sink without a log gets none."""
    if (sink / "_spark_metadata").is_dir():
        atomic.write_json(sink / COMMIT_TIMES, {str(b): t for b, t, _ in batch_log(sink)})


def batch_log(sink: Path) -> list[tuple[int, float, list[str]]]:
    """[(batch id, commit time ms, [data files added])], oldest first; compacted logs contribute new files only.
    Each file is read inside `sink` itself (`inside`), never where the log says it was written: a file the log
    lists that is not there is left out (its rows are then missing, as lost data is) and named by
    `missing_files`. Commit times as recorded (`_commit_times.json`), else, for a batch committed since (a soak
    still running), as the log file's modification time."""
    return [(b, t, [path for _, path in files if path is not None]) for b, t, files in _log(sink)]


def missing_files(sink: Path) -> list[dict]:
    """The data files the sink's log lists that are not in `sink` (a copied run directory missing some): each as
    {"file": its path below the sink, "batch": the batch that wrote it}."""
    return [{"file": listed, "batch": b} for b, _, files in _log(sink) for listed, path in files if path is None]


def _log(sink: Path) -> list[tuple[int, float, list[tuple[str, str | None]]]]:
    """[(batch id, commit ms, [(the file's path below the sink, its local path there or None when absent)])]."""
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
            files.append(inside(rec["path"], sink))
        out.append((batch_id, recorded[batch_id] if batch_id in recorded else f.stat().st_mtime * 1000.0, files))
    return out


def inside(path: str, sink: Path) -> tuple[str, str | None]:
    """A data file the log names, as (its path below the sink root, its file URI in `sink` or None if absent).

    Spark's log keeps the absolute path the file was written to; a run directory must judge its own files, also
    when copied or moved (a CI artifact downloaded elsewhere), so the recorded path only says where below the
    sink root the file is, never where to read it. The root is the last component named as `sink` is (the run
    directory's `sink/`), else the file's name with the partition directories (`column=value`) Spark writes
    above it. A path on the S3 store a run copies into its directory (harness.objstore: `s3a://bucket/sink/...`)
    is found in the copy the same way; a path under any other scheme is kept as it is."""
    parsed = urlparse(path)
    if parsed.scheme not in ("file", "", *COPIED_SCHEMES):
        return path, path
    parts = Path(local_path(path) if parsed.scheme in ("file", "") else unquote(parsed.path)).parts
    if sink.name in parts[:-1]:
        tail = parts[len(parts) - 1 - parts[:-1][::-1].index(sink.name):]
    else:
        start = len(parts) - 1
        while start > 1 and "=" in parts[start - 1]:
            start -= 1
        tail = parts[start:]
    candidate = sink.joinpath(*tail)  # as a file URI again: readers take local_path() of it, as of the log's
    return "/".join(tail), (candidate.absolute().as_uri() if candidate.is_file() else None)


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
