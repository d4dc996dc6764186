"""JSON-lines files the run directory is made of (progress, lag samples, timeline, faults, resources, ...).

A line that is not one JSON object (a process killed mid-write tears the last line; a disk error or a copy can
leave garbage anywhere) is left out by the reader, never silently: `unreadable` names the file and the lines,
and the judge records every run file's in result.json (`unreadable`), so a figure computed without them
says so.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness import secrets

MAX_LINES_LISTED = 20  # line numbers kept per file; the count is always the whole


def _records(path: Path) -> tuple[list[dict], list[int], int]:
    """(every JSON-object line, the 1-based numbers of the lines that are not one, the number of lines)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], [], 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out, bad = _parse(lines)
    return out, bad, len(lines)


def _parse(lines: list[bytes], first: int = 1) -> tuple[list[dict], list[int]]:
    """(the JSON-object lines, the numbers of those that are not one, counting from `first`); blank lines are
    neither."""
    out, bad = [], []
    for n, raw in enumerate(lines, first):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError included
            bad.append(n)
            continue
        if isinstance(rec, dict):
            out.append(rec)
        else:
            bad.append(n)
    return out, bad


class JsonlTail:
    """The records of a file still being appended to (progress.jsonl, lag.jsonl while the query runs), read on
    from where the last `read` stopped: whole lines only, a line still being written waits for the next call.
    A runner that looks once a second then parses each line once, where reading the file whole each time grew
    with the run (a soak's hours of batches, parsed every second). `keep=False` only counts the complete lines
    (`lines`), keeping no record: a live line's batch count over a soak's hours, in constant memory."""

    def __init__(self, path: Path, keep: bool = True):
        self.path, self.keep = Path(path), keep
        self.records: list[dict] = []  # every record so far, in file order (read_jsonl's, once complete)
        self.lines = 0  # complete lines so far, blank and malformed ones included
        self._offset = 0

    def read(self) -> list[dict]:
        """Every record so far (the same list, grown; empty when not kept)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self.records
        end = data.rfind(b"\n") + 1
        if end:
            lines = data[:end].split(b"\n")[:-1]
            if self.keep:
                self.records.extend(_parse(lines, self.lines + 1)[0])
            self._offset, self.lines = self._offset + end, self.lines + len(lines)
        return self.records

    def count(self) -> int:
        """The complete lines so far, read on."""
        self.read()
        return self.lines


def read_jsonl(path: Path) -> list[dict]:
    """Every complete record; a line that is not one (a torn last line) is left out, and `unreadable` says so."""
    return _records(Path(path))[0]


def unreadable(path: Path, root: Path | None = None) -> dict | None:
    """What of `path` read_jsonl leaves out, or None when every line is a record: {"file" (below `root`),
    "count", "lines" (the first MAX_LINES_LISTED numbers), "of" (lines in the file), "detail"}."""
    path = Path(path)
    _, bad, total = _records(path)
    if not bad:
        return None
    name = str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)
    torn_last = bad[-1] == total and not path.read_bytes().endswith(b"\n")
    where = ", ".join(map(str, bad[:MAX_LINES_LISTED])) + (", ..." if len(bad) > MAX_LINES_LISTED else "")
    return {"file": name, "count": len(bad), "lines": bad[:MAX_LINES_LISTED], "of": total,
            "detail": f"{len(bad)} of {total} lines not readable as JSON records (line{'s' if len(bad) > 1 else ''} "
                      f"{where}){': the last one torn, as by a process stopped mid-write' if torn_last else ''}; "
                      "left out of the figures"}


def unreadable_in(run_dir: Path, skip: tuple[str, ...] = ("checkpoint", "sink")) -> list[dict]:
    """`unreadable` for every .jsonl file of a run directory (Spark's own checkpoint and sink left aside)."""
    out = []
    for path in sorted(Path(run_dir).rglob("*.jsonl")):
        rel = path.relative_to(run_dir)
        if rel.parts[0] in skip:
            continue
        problem = unreadable(path, Path(run_dir))
        if problem:
            out.append(problem)
    return out


def append_jsonl(path: Path, record: dict) -> None:
    """One record, one line, flushed on return (readers tolerate a torn last line); secrets scrubbed as
    harness.files.atomic does (an error text may quote one)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(secrets.scrubbed(record), default=str) + "\n")
