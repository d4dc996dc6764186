"""`--out`: a run directory is one run's. Re-using an earlier run's directory would mix two runs (the old
checkpoint resumes the query, the old sink and progress are read with the new ones) and report a false loss, so
a directory that is not empty is refused before anything starts, unless the user asks to replace it
(`--replace`). Replacing removes only what looks like the harness's own output (a run, sweep, repeat, capacity,
soak or `bench verdicts` directory), never an arbitrary directory.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from harness.errors import InputError

# a file any of the harness's commands writes at the top of its output directory, first or early
MARKERS = ("scenario.json", "run_state.json", "result.json", "timeline.jsonl", "sweep.json", "repeat.json",
           "capacity.json", "bench.json", "rehearsal.json")


def looks_like_harness_output(path: Path) -> bool:
    return any((path / name).is_file() for name in MARKERS)


def check(out: Path | None, replace: bool = False, flag: str = "--out") -> None:
    """Refuse (InputError, exit 2) an `out` that is a file, or a directory that is not empty unless `replace`; a
    non-empty one that is not the harness's output is refused even with `replace`. Removes nothing."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out}: is a file, not a directory; give a new directory for the run")
    if not _non_empty(out):
        return
    if not replace:
        raise InputError(f"{flag} {out}: not empty ({_what(out)}); a run directory holds one run, and re-using "
                         f"it would mix two runs' checkpoint, sink and progress. Give a new directory, or add "
                         f"--replace to delete its contents first")
    if not looks_like_harness_output(out):
        raise InputError(f"{flag} {out}: --replace deletes only an earlier harness output directory (one with "
                         f"{', '.join(MARKERS)}), and this one has none of them ({_what(out)}); "
                         f"give a new directory, or empty this one yourself")


def prepare(out: Path | None, replace: bool = False, flag: str = "--out") -> None:
    """`check`, then, with `replace`, the earlier output's contents removed (the directory itself is kept)."""
    check(out, replace, flag)
    if out is None or not replace or not _non_empty(out):
        return
    for child in list(out.iterdir()):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _non_empty(path: Path) -> bool:
    try:
        return path.is_dir() and any(path.iterdir())
    except OSError as exc:
        raise InputError(f"--out {path}: cannot be read ({exc.strerror})") from None


def _what(path: Path, limit: int = 5) -> str:
    names = sorted(p.name for p in path.iterdir())
    shown = ", ".join(names[:limit]) + (f", ... ({len(names)} entries)" if len(names) > limit else "")
    return f"it holds {shown}"
