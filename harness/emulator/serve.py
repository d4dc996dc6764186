"""Foreground emulator process: ``serve_forever`` (used by ``harness emulator`` and ``python -m harness.emulator``)."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys

from .config import DEFAULT_KEY_NAME, load_config
from .server import EmulatorCore


def serve_forever(host: str = "127.0.0.1", port: int = 0, config_path: str | None = None,
                  control_port: int = 0, *, tls_port: int | None = 0, ws_port: int | None = 0,
                  wss_port: int | None = 0, cert_dir: str | None = None, accept_any_credential: bool = False,
                  key: str | None = None, key_env: str | None = None, kafka_port: int | None = 0,
                  kafka_tls_port: int | None = 0, kafka_connection_log: str | None = None) -> int:
    """Run until SIGTERM/SIGINT; prints one ``name=value`` line per endpoint once listening.

    ``key`` (given with ``key_env``, the variable it came from): the RootManageSharedAccessKey clients sign with;
    the printed lines then say ``${key_env}`` where the key would be, so a log of them holds no secret.

    Lines: ``connection_string=`` (plain AMQP, emulator mode, with the key clients must sign with), ``control=``,
    ``tls_port=``, ``ws_port=``, ``wss_port=``, ``kafka_port=`` (SASL_PLAINTEXT), ``kafka_tls_port=`` (SASL_SSL)
    (``none`` when not listening) and ``ca_file=`` (the CA TLS clients must trust). Kafka clients log in with
    SASL PLAIN, user name ``$ConnectionString`` and the connection string as the password. Raises
    ``ConfigError`` when the config file is bad and ``ListenError`` when a port cannot be listened on, before
    anything is served. Returns 0 after a clean stop.
    """
    cfg = load_config(config_path)
    if accept_any_credential:
        cfg = dataclasses.replace(cfg, accept_any_credential=True)
    if key is not None:
        cfg = dataclasses.replace(cfg, sas_keys={**cfg.sas_keys, DEFAULT_KEY_NAME: key})
    _room_for_connections(cfg.max_connections)
    listeners = dict(tls_port=tls_port, ws_port=ws_port, wss_port=wss_port, cert_dir=cert_dir,
                     kafka_port=kafka_port, kafka_tls_port=kafka_tls_port,
                     kafka_connection_log=kafka_connection_log)
    shown = "${" + key_env + "}" if key is not None and key_env else None
    return asyncio.run(_main(cfg, host, port, control_port, listeners, shown))


def _room_for_connections(max_connections: int) -> None:
    """Raise the open-file limit towards MaxConnections (plus room for listeners and logs), up to the hard limit.

    With the common soft limit of 1024, accepts beyond ~1000 connections would fail inside asyncio (logged, the
    client left hanging) instead of reaching the emulator's own refusal at MaxConnections."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    need = max_connections + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            target = soft
    if target < need:
        print(f"warning: Emulator.MaxConnections is {max_connections} but this process may open only {target} "
              f"files (ulimit -n); connections past about {max(0, target - 256)} will fail before the emulator can "
              "refuse them", file=sys.stderr, flush=True)


async def _main(cfg, host: str, port: int, control_port: int, listeners: dict, shown_key: str | None) -> int:
    core = EmulatorCore(cfg, host, port, control_port, **listeners)
    await core.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread / platform
            pass
    if shown_key is not None:
        print(f"connection_string={core.connection_string(key_name=DEFAULT_KEY_NAME, key=shown_key)}", flush=True)
    else:
        print(f"connection_string={core.connection_string()}", flush=True)
    print(f"control=http://127.0.0.1:{core.control_port}", flush=True)
    for name in ("tls_port", "ws_port", "wss_port", "ca_file", "kafka_port", "kafka_tls_port"):
        value = getattr(core, name)
        print(f"{name}={'none' if value is None else value}", flush=True)
    if core.tls_error:
        print(f"tls unavailable: {core.tls_error}", file=sys.stderr, flush=True)
    if core.kafka_port is not None or core.kafka_tls_port is not None:
        print("kafka: SASL PLAIN, user name $ConnectionString, password the connection_string= line (SASL_PLAINTEXT "
              "on kafka_port, SASL_SSL on kafka_tls_port with ca_file)", file=sys.stderr, flush=True)
    hubs = ", ".join(f"{h.name}({h.partition_count})" for h in cfg.hubs)
    print(f"hubs={hubs}", file=sys.stderr, flush=True)
    if core.cfg.accept_any_credential:
        print("credentials: any SAS token is accepted (accept-any-credential); Azure would refuse a wrong key",
              file=sys.stderr, flush=True)
    else:
        print(f"credentials: SAS tokens must be signed with key {core.sas_key[0]!r} (or another configured key)"
              + (f"; its value is in {shown_key}" if shown_key else ""),
              file=sys.stderr, flush=True)
    await stop.wait()
    await core.stop()
    return 0
