"""``python -m harness.emulator --port P --config FILE [--host H] [--control-port C] [--tls-port T] [--ws-port W]
[--wss-port S] [--cert-dir D] [--no-tls] [--no-websockets]``."""

from __future__ import annotations

import argparse
import sys

from .config import ConfigError
from .serve import serve_forever


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535 (0 = any free port), got {text!r}")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535 (0 = any free port), got {value}")
    return value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.emulator", description="Event Hubs emulator (AMQP 1.0)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=_port, default=0, help="AMQP port (0 = any free port)")
    ap.add_argument("--config", default=None, help="Config.json in Microsoft's emulator shape")
    ap.add_argument("--control-port", type=_port, default=0, help="HTTP control API port (0 = any free port)")
    ap.add_argument("--tls-port", type=_port, default=0, help="AMQP over TLS port (0 = any free port)")
    ap.add_argument("--ws-port", type=_port, default=0, help="AMQP over WebSockets (ws://) port")
    ap.add_argument("--wss-port", type=_port, default=0, help="AMQP over WebSockets over TLS (wss://) port")
    ap.add_argument("--cert-dir", default=None,
                    help="keep (and reuse) the TLS CA and certificate here; default: a temporary directory")
    ap.add_argument("--no-tls", action="store_true", help="start neither the TLS nor the WSS listener")
    ap.add_argument("--no-websockets", action="store_true", help="start neither the WS nor the WSS listener")
    args = ap.parse_args(argv)
    listeners = dict(
        tls_port=None if args.no_tls else args.tls_port,
        ws_port=None if args.no_websockets else args.ws_port,
        wss_port=None if args.no_tls or args.no_websockets else args.wss_port,
        cert_dir=args.cert_dir,
    )
    try:
        return serve_forever(args.host, args.port, args.config, args.control_port, **listeners)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
