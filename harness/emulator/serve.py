"""Foreground emulator process: ``serve_forever`` (used by ``harness emulator`` and ``python -m harness.emulator``)."""

from __future__ import annotations

import asyncio
import signal
import sys

from .config import load_config
from .server import EmulatorCore


def serve_forever(host: str = "127.0.0.1", port: int = 0, config_path: str | None = None,
                  control_port: int = 0) -> int:
    """Run until SIGTERM/SIGINT; prints ``connection_string=...`` and ``control=http://...`` once listening.

    Raises ``ConfigError`` (before listening) when the config file is bad. Returns 0 after a clean stop.
    """
    cfg = load_config(config_path)
    return asyncio.run(_main(cfg, host, port, control_port))


async def _main(cfg, host: str, port: int, control_port: int) -> int:
    core = EmulatorCore(cfg, host, port, control_port)
    await core.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread / platform
            pass
    print(f"connection_string={core.connection_string()}", flush=True)
    print(f"control=http://127.0.0.1:{core.control_port}", flush=True)
    hubs = ", ".join(f"{h.name}({h.partition_count})" for h in cfg.hubs)
    print(f"hubs={hubs}", file=sys.stderr, flush=True)
    await stop.wait()
    await core.stop()
    return 0
