"""``python -m harness.emulator --port P --config FILE [--host H] [--control-port C]``."""

from __future__ import annotations

import argparse
import sys

from .config import ConfigError
from .serve import serve_forever


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.emulator", description="Event Hubs emulator (AMQP 1.0)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="AMQP port (0 = any free port)")
    ap.add_argument("--config", default=None, help="Config.json in Microsoft's emulator shape")
    ap.add_argument("--control-port", type=int, default=0, help="HTTP control API port (0 = any free port)")
    args = ap.parse_args(argv)
    try:
        return serve_forever(args.host, args.port, args.config, args.control_port)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
