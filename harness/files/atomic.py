"""Results are written atomically: a reader (CI, a comparison) never sees half a file.

The temporary file is made by `tempfile.mkstemp`, which creates it 0600; its mode would survive the rename, and
colleagues and artifact servers could not read a run's reports. So it is given the mode any tool gives a new
file, 0666 less the process umask (0644 under the usual 022), before it is renamed into place. A write that
fails (a full disk) leaves no partial file and no temporary one behind, and says where it failed.

Every file written here is also a record someone may read or upload, so its text passes through
`harness.secrets.scrub` last (a literal secret this process learnt, a connection string's key, a JAAS password):
whatever path an error message or a setting took to get here, it is written as `***`. A private file (`mode`
given: a key the harness made) is written as it is.
"""
from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness import secrets


def umask() -> int:
    """The process umask, read without changing it (os.umask can only set it: setting and restoring it would
    race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # no /proc: the only other way
    os.umask(old)
    return old


def file_mode() -> int:
    """The mode a new file gets from open(): 0666 less the umask."""
    return 0o666 & ~umask()


def write_text(path: str | os.PathLike, text: str, mode: int | None = None, scrubbed: bool = False) -> None:
    """`text` in `path`, whole or not at all; `mode` for a file that must stay private (a key: 0o600), else the
    mode a new file gets (file_mode). `scrubbed`: the caller scrubbed it already (write_json, string by string)."""
    if mode is None and not scrubbed:
        text = secrets.scrub(text)
    write_bytes(path, text.encode("utf-8"), mode)


def write_bytes(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    """`data` in `path`, whole or not at all, as it is (a binary file is no text to scrub); `mode` as write_text's."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), file_mode() if mode is None else mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise OSError(errno.ENOSPC, f"no space left on device under {path.parent} (writing {path.name})") \
                from exc
        raise


def write_json(path: str | os.PathLike, obj: Any, mode: int | None = None) -> None:
    if mode is None:
        obj = secrets.scrubbed(obj)  # string by string: scrubbing the JSON text would misread escaped quotes
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n", mode, scrubbed=True)
