"""Foreground emulator process: ``serve_forever`` (used by ``harness emulator`` and ``python -m harness.emulator``)."""

from __future__ import annotations

import asyncio
import signal
import sys

from .config import load_config
from .server import EmulatorCore


def serve_forever(host: str = "127.0.0.1", port: int = 0, config_path: str | None = None,
                  control_port: int = 0, *, tls_port: int | None = 0, ws_port: int | None = 0,
                  wss_port: int | None = 0, cert_dir: str | None = None) -> int:
    """Run until SIGTERM/SIGINT; prints one ``name=value`` line per endpoint once listening.

    Lines: ``connection_string=`` (plain AMQP, emulator mode), ``control=``, ``tls_port=``, ``ws_port=``,
    ``wss_port=`` (``none`` when not listening) and ``ca_file=`` (the CA TLS clients must trust).
    Raises ``ConfigError`` (before listening) when the config file is bad. Returns 0 after a clean stop.
    """
    cfg = load_config(config_path)
    listeners = dict(tls_port=tls_port, ws_port=ws_port, wss_port=wss_port, cert_dir=cert_dir)
    return asyncio.run(_main(cfg, host, port, control_port, listeners))


async def _main(cfg, host: str, port: int, control_port: int, listeners: dict) -> int:
    core = EmulatorCore(cfg, host, port, control_port, **listeners)
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
    for name in ("tls_port", "ws_port", "wss_port", "ca_file"):
        value = getattr(core, name)
        print(f"{name}={'none' if value is None else value}", flush=True)
    if core.tls_error:
        print(f"tls unavailable: {core.tls_error}", file=sys.stderr, flush=True)
    hubs = ", ".join(f"{h.name}({h.partition_count})" for h in cfg.hubs)
    print(f"hubs={hubs}", file=sys.stderr, flush=True)
    await stop.wait()
    await core.stop()
    return 0
