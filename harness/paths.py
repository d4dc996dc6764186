"""Where things live: the repo, the cache outside git, the runs directory."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCENARIOS_DIR = REPO / "scenarios"


def cache_dir() -> Path:
    """JVM artifacts and Maven itself are cached here, outside git, and reused by every clone."""
    base = os.environ.get("HARNESS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spark-stream-harness")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    return Path(os.environ.get("HARNESS_RUNS") or REPO / "runs")
