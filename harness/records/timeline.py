"""The run's timeline: phases and (later) faults, one JSON line each with a wall-clock time, for the report."""
from __future__ import annotations

import json
import time
from pathlib import Path

from harness.files.jsonl import read_jsonl


class Timeline:
    def __init__(self, path: Path):
        self.path = path

    def add(self, event: str, **fields) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), "event": event, **fields}, default=str) + "\n")

    def read(self) -> list[dict]:
        return read_jsonl(self.path)
