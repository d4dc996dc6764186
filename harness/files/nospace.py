"""A full disk named as such. Spark reports it as `[STREAM_FAILED] java.io.IOException: No space left on device`
(or, when the driver cannot even write its status, only in driver.log), which the run would otherwise show as
"Spark query did not start" or a Spark error cut at 500 characters; the harness's own writes fail with ENOSPC
(harness.files.atomic). `cause` finds it in the texts and logs a failure left and says where: "no space left on device
under DIR", DIR the fullest of the directories the text names (the sink, the checkpoint) or the run directory.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

NO_SPACE = re.compile(r"No space left on device|ENOSPC|\[Errno 28\]|Disk quota exceeded|EDQUOT", re.IGNORECASE)
# directories a Spark error names: FileSink[file:/...], checkpointLocation=/..., path=/..., a quoted Python path
NAMED_DIR = re.compile(r"(?:FileSink\[(?:file:)?|checkpointLocation=|path=|under |')(/[^\s,\]\)']+)")
LOG_TAIL_BYTES = 256_000  # the end of a log is where a failure is


def says_no_space(text: str | None) -> bool:
    return bool(text) and NO_SPACE.search(text) is not None  # type: ignore[arg-type]


def cause(run_dir: Path, texts: list[str | None] = (), logs: list[Path] = ()) -> str | None:
    """"no space left on device under DIR (N MB free now)" when a text or a log's tail says the disk was full,
    else None."""
    found = [t for t in texts if says_no_space(t)]
    found += [tail for log in logs if says_no_space(tail := _tail(log))]
    if not found:
        return None
    where = fullest([Path(m) for t in found for m in NAMED_DIR.findall(t)] + [Path(run_dir)])
    free = _free(where)
    return f"no space left on device under {where}" + (f" ({free / 1e6:,.1f} MB free now)" if free is not None
                                                       else "")


def fullest(paths: list[Path]) -> Path:
    """Of `paths`, the nearest existing directory of the one with the least space free (the first on a tie)."""
    best, best_free = paths[-1], None
    for path in paths:
        existing = _existing_dir(path)
        if existing is None:
            continue
        free = _free(existing)
        if free is not None and (best_free is None or free < best_free):
            best, best_free = existing, free
    return best


def _existing_dir(path: Path) -> Path | None:
    for p in (path, *path.parents):
        if p.is_dir():
            return p
    return None


def _free(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


MIN_FREE_BYTES = 16_000_000  # below this the run stops: the broker, the sink and the ack logs fail next


class DiskFull(RuntimeError):
    """The run directory's disk is (nearly) full: the run stops while its results can still be written."""


def check_free(run_dir: Path, min_free: int = MIN_FREE_BYTES) -> None:
    """Raise DiskFull when the file system under `run_dir` has less than `min_free` bytes free. A full disk does
    not fail one process cleanly: the broker halts, the producers' ack writers die, the query retries a broker
    that is gone; without this the run would go on to the traffic's end and then fail for a reason it cannot
    name. Checked every tick of the traffic (a statvfs call)."""
    free = _free(Path(run_dir))
    if free is not None and free < min_free:
        raise DiskFull(f"no space left on device under {run_dir} ({free / 1e6:,.1f} MB free, under the "
                       f"{min_free / 1e6:,.0f} MB a run needs to go on writing): the run stopped")
