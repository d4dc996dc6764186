"""JSON-lines files the run directory is made of (progress, lag samples, timeline)."""
from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    """Every complete record; a torn last line (a process killed mid-write) is skipped, not fatal."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def append_jsonl(path: Path, record: dict) -> None:
    """One record, one line, flushed on return (readers tolerate a torn last line)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")
