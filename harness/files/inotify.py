"""Linux inotify through ctypes: wake the moment a file appears in a directory.

Why: some moments of a micro-batch last a millisecond or less (a commit file's temporary copy before its rename,
a batch's sink log entry before its commit). Polling misses them, or burns a core on a 2-core machine to catch
them; the kernel's notification wakes a blocked reader within microseconds of the creation, in time to freeze the
writer (driver_kill's phases). Linux only, as the harness's supervision already is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
from pathlib import Path

IN_CREATE, IN_MOVED_TO = 0x100, 0x80
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then `len` bytes of NUL-padded name)


class Watch:
    """A non-blocking inotify descriptor on some directories; `names(timeout)` waits for created or renamed-in
    entries and returns (directory, name) pairs. A context manager: the descriptor is closed on exit."""

    def __init__(self, dirs: list[Path], mask: int = IN_CREATE | IN_MOVED_TO):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._dirs: dict[int, Path] = {}
        for d in dirs:
            wd = libc.inotify_add_watch(self._fd, os.fsencode(str(d)), mask)
            if wd < 0:
                os.close(self._fd)
                raise OSError(ctypes.get_errno(), f"inotify_add_watch failed on {d}")
            self._dirs[wd] = Path(d)

    def names(self, timeout: float) -> list[tuple[Path, str]]:
        ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
        if not ready:
            return []
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return []
        out, i = [], 0
        while i + _EVENT.size <= len(data):
            wd, _mask, _cookie, size = _EVENT.unpack_from(data, i)
            raw = data[i + _EVENT.size:i + _EVENT.size + size]
            i += _EVENT.size + size
            if wd in self._dirs:
                out.append((self._dirs[wd], raw.split(b"\0", 1)[0].decode(errors="replace")))
        return out

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
