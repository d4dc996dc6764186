"""What a bench measured on this machine that a run's figures are read against: the client library's own cost.

The azure-eventhub SDK encodes AMQP in pure Python, so the Event Hubs producers take a large share of the CPU
whatever the harness does; a footprint of 20% says little until it is set beside what a plain SDK send loop of
the same events costs here. `harness bench eh-producers` measures that and keeps it in the cache
(<cache>/calibration/<name>.json, one file a bench); every run copies what is there into its own directory
(calibration.json) when it starts, so the run directory judges the same when copied elsewhere, and the footprint
(harness.analysis.resources) names the floor the run was read against, with when it was measured.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness.files import atomic
from harness.files.paths import cache_dir

FILE = "calibration.json"


def eh_producers(send: str) -> str:
    """The name of `harness bench eh-producers`' plain-loop figure for a send mode (partition_id, partition_key)."""
    return f"eh-producers-{send}"


def directory() -> Path:
    return cache_dir() / "calibration"


def save(name: str, data: dict) -> Path:
    """A bench's figures under `name`, replacing the last ones (atomically)."""
    path = directory() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, data)
    return path


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_all() -> dict[str, dict]:
    """Every calibration in the cache by name; an unreadable file is left out."""
    found = {p.stem: _read(p) for p in sorted(directory().glob("*.json"))} if directory().is_dir() else {}
    return {name: data for name, data in found.items() if data is not None}


def record(run_dir: Path) -> dict[str, dict]:
    """The cache's calibrations copied into the run directory (an empty object when there are none)."""
    found = load_all()
    atomic.write_json(Path(run_dir) / FILE, found)
    return found


def read(run_dir: Path, name: str) -> dict | None:
    """A calibration as the run recorded it; None when it had none (or the file is torn)."""
    data = _read(Path(run_dir) / FILE) or {}
    found = data.get(name)
    return found if isinstance(found, dict) else None
