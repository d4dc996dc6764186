"""Loopback only: every server the harness starts binds 127.0.0.1 on a port the system hands out.

`free_port` asks the system for a port nobody holds now (bind to port 0, read it back, release it) for a server
that must be told its port before it starts (a broker's listeners, Spark's master and workers, a proxy's front).
The port is free when asked, not reserved: a server that cannot bind it fails to start and says so.
"""
from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
