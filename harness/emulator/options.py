"""The emulator's command line, one definition for ``python -m harness.emulator`` and ``harness emulator serve``.

Both entry points build their parser with ``add_arguments`` and run it with ``run``, so every listener and limit
can be chosen from either, and bad input ends the same way: a message naming the option or the file and field,
exit code 2, before anything listens. Only argparse is imported here (the emulator itself loads in ``run``), so
the ``harness`` CLI can build its parser without loading the AMQP engine.
"""

from __future__ import annotations

import argparse

PORT_OPTIONS = (("port", "--port"), ("control_port", "--control-port"), ("tls_port", "--tls-port"),
                ("ws_port", "--ws-port"), ("wss_port", "--wss-port"), ("kafka_port", "--kafka-port"),
                ("kafka_tls_port", "--kafka-tls-port"))


def port(text: str) -> int:
    """argparse type: 0..65535 (0 = any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535 (0 = any free port), got {text!r}")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535 (0 = any free port), got {value}")
    return value


def add_arguments(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    ap.add_argument("--host", default="127.0.0.1", help="address every AMQP listener binds (default 127.0.0.1)")
    ap.add_argument("--port", type=port, default=0, help="AMQP port (0 = any free port)")
    ap.add_argument("--config", default=None, help="Config.json in Microsoft's emulator shape (see "
                                                   "harness/emulator/config.py for the extensions)")
    ap.add_argument("--control-port", type=port, default=0, help="HTTP control API port on 127.0.0.1 (0 = any)")
    ap.add_argument("--tls-port", type=port, default=0, help="AMQP over TLS port (0 = any free port)")
    ap.add_argument("--ws-port", type=port, default=0, help="AMQP over WebSockets (ws://) port")
    ap.add_argument("--wss-port", type=port, default=0, help="AMQP over WebSockets over TLS (wss://) port")
    ap.add_argument("--kafka-port", type=port, default=0,
                    help="Kafka protocol endpoint, SASL_PLAINTEXT + PLAIN (0 = any free port)")
    ap.add_argument("--kafka-tls-port", type=port, default=0,
                    help="Kafka protocol endpoint over TLS, SASL_SSL + PLAIN, as the service's 9093 (0 = any free port)")
    ap.add_argument("--no-kafka", action="store_true", help="start neither Kafka listener")
    ap.add_argument("--kafka-connection-log", metavar="PATH", default=None,
                    help="append one JSON line per Kafka connection (time, client.id, first request) to PATH, as "
                         "the harness's TCP proxy records them, to count consumer (re)creations")
    ap.add_argument("--cert-dir", default=None,
                    help="keep (and reuse) the TLS CA and certificate here; default: a temporary directory")
    ap.add_argument("--no-tls", action="store_true",
                    help="start none of the TLS listeners (AMQPS, WSS, Kafka SASL_SSL)")
    ap.add_argument("--no-websockets", action="store_true", help="start neither the WS nor the WSS listener")
    ap.add_argument("--accept-any-credential", action="store_true",
                    help="accept every SAS token, signed or not (default: tokens must be signed with a key of "
                         "Config.json's Emulator.SharedAccessKeys, else with RootManageSharedAccessKey = "
                         "SAS_KEY_VALUE, as Microsoft's emulator; the key is in connection_string=); Azure never "
                         "does this")
    ap.add_argument("--generate-key", action="store_true",
                    help="sign-in key RootManageSharedAccessKey made at random at start (printed in "
                         "connection_string=) instead of Microsoft's emulator's well-known SAS_KEY_VALUE")
    ap.add_argument("--key-env", metavar="VAR", default=None,
                    help="sign-in key RootManageSharedAccessKey from this environment variable, and printed as "
                         "${VAR} (never the key itself) in connection_string=: for a caller that keeps the key "
                         "out of logs (the harness's runs)")
    return ap


def parser(prog: str = "python -m harness.emulator") -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog=prog, description="Event Hubs emulator (AMQP 1.0)"))


def _check_ports(args) -> None:
    from harness.errors import InputError

    listening = {"tls_port": not args.no_tls, "ws_port": not args.no_websockets,
                 "wss_port": not (args.no_tls or args.no_websockets), "kafka_port": not args.no_kafka,
                 "kafka_tls_port": not (args.no_tls or args.no_kafka)}
    seen: dict[int, str] = {}
    for attr, flag in PORT_OPTIONS:
        value = getattr(args, attr)
        if not value or not listening.get(attr, True):
            continue
        if value in seen:
            raise InputError(f"{flag} {value}: the same port as {seen[value]}; each listener needs its own port "
                             "(or 0 for any free one)")
        seen[value] = flag


def _check_connection_log(path: str | None) -> None:
    import os

    from harness.errors import InputError

    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"--kafka-connection-log {path}: the folder {folder} does not exist; give a file in an "
                         "existing folder")
    if os.path.isdir(path):
        raise InputError(f"--kafka-connection-log {path}: that is a folder; give a file (it is appended to)")


def run(args) -> int:
    """Serve until SIGTERM/SIGINT (0). Raises InputError (ConfigError, ListenError) for bad input."""
    _check_ports(args)
    _check_connection_log(args.kafka_connection_log)
    from .serve import serve_forever

    listeners = dict(
        tls_port=None if args.no_tls else args.tls_port,
        ws_port=None if args.no_websockets else args.ws_port,
        wss_port=None if args.no_tls or args.no_websockets else args.wss_port,
        kafka_port=None if args.no_kafka else args.kafka_port,
        kafka_tls_port=None if args.no_tls or args.no_kafka else args.kafka_tls_port,
        kafka_connection_log=args.kafka_connection_log,
        cert_dir=args.cert_dir,
    )
    key = None
    if args.generate_key and args.key_env:
        from harness.errors import InputError

        raise InputError("--generate-key and --key-env: one or the other (the key is made here, or taken from "
                         f"{args.key_env})")
    if args.generate_key:
        from .server import generated_key

        key = generated_key()
    if args.key_env:
        import os

        from harness.errors import InputError

        key = os.environ.get(args.key_env)
        if not key:
            raise InputError(f"--key-env {args.key_env}: that environment variable is not set (or empty); it must "
                             "hold the key clients sign with")
    return serve_forever(args.host, args.port, args.config, args.control_port,
                         accept_any_credential=args.accept_any_credential, key=key, key_env=args.key_env,
                         **listeners)
