"""What this machine has, for bounds on inputs: a heap larger than the machine's memory validates nowhere useful
(the JVM starts, then swaps or is killed), so memory fields are refused above it before anything starts."""
from __future__ import annotations

import os


def memory_bytes() -> int:
    """Physical memory of this machine; a very large number where the platform cannot say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no bound
        return 1 << 62


def describe(n: int) -> str:
    """'15.6 GiB' / '512 MiB'."""
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"
