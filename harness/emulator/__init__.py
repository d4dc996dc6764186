"""Event Hubs emulator: an AMQP 1.0 server on asyncio that the unmodified ``azure-eventhub`` SDK talks to.

Entry points:
  * ``EmulatorServer(config, port=0, control_port=None, tls_port=0, ws_port=0, wss_port=0, cert_dir=None)
    .start()`` - background thread; ``.port``, ``.connection_string(hub)``, ``.stop()`` and fault methods
    ``delete_hub``, ``recreate_hub``, ``age_out``, ``throttle``, ``drop_connections``, ``set_latency``,
    ``steal``, ``snapshot`` (see server.py).
  * ``serve.serve_forever(host, port, config_path, control_port, tls_port=0, ws_port=0, wss_port=0,
    cert_dir=None, accept_any_credential=False)`` - foreground process with the HTTP control API (control.py);
    ``python -m harness.emulator`` and ``harness emulator serve`` (one option set, options.py) run it and print
    ``connection_string=`` (with the key to sign with), ``control=``, ``tls_port=``, ``ws_port=``, ``wss_port=``
    and ``ca_file=`` lines.
  * Credentials are checked as on Azure (a generated key when Config.json has none) and what clients can make it
    hold is bounded (connections, idle time-out, frame size, bytes of incomplete frames): see config.py.
  * ``harness.bench.emulator.run_bench(json_path, quick)`` (`harness bench emulator`) - throughput/CPU benchmark
    with SDK clients in several processes.

Listeners (port 0 = a free port, None = off): ``port`` plain AMQP for emulator connection strings
(``UseDevelopmentEmulator=true``); ``tls_port`` AMQP over TLS and ``wss_port`` AMQP over WebSockets over TLS, for
clients given a host name and a credential (``AzureNamedKeyCredential``, ``AzureSasCredential``), which always use
TLS; ``ws_port`` AMQP over WebSockets without TLS (emulator connection strings with
``TransportType.AmqpOverWebsocket``, or behind an HTTP proxy). TLS certificates come from a CA the emulator makes
with the ``openssl`` CLI (tls.py); ``.ca_file`` is what clients pass as ``connection_verify``. The SDK dials 5671
(443 for WebSockets) unless ``custom_endpoint_address`` names the port: ``.client_kwargs("amqps" | "wss" | "ws")``
returns the arguments, ``.endpoints()`` (and the control API's ``/status``) every port and the CA path.

Kafka endpoint (``kafka/``): ``kafka_port`` (SASL_PLAINTEXT, as Microsoft's emulator on 9092) and ``kafka_tls_port``
(SASL_SSL with the same CA, as the service on 9093) serve the same hubs to Kafka clients (a hub is a topic, a
Kafka offset is the event's sequence number), SASL PLAIN with user ``$ConnectionString`` and a connection string as
the password; ``--kafka-port``, ``--kafka-tls-port``, ``--no-kafka`` on the command line.

Service behaviour reproduced for the SDK (see service_errors.py for the texts): delivery annotations the SDK
encodes after the body are delivered (merged with runtime metrics when those are requested); a refused link is
answered with a null source (receiver) or target (sender) and a detach carrying the error; the CBS put-token for
a missing hub fails with 404 (the SDK raises ``AuthenticationError``, a ``ConnectError``); a missing consumer group
is ``amqp:not-found``, a missing partition ``com.microsoft:argument-out-of-range``, an unreadable starting
position ``com.microsoft:argument-error``; at most 5 non-epoch receivers per partition and consumer group
(``amqp:resource-limit-exceeded``, ``Emulator.MaxReceiversPerPartition``); owner-level (epoch) stealing with the
service's messages. Offsets are decimal byte positions handed out as strings. Runtime metrics travel on delivered
events only, as the service sends them: an idle receiver gets no messages.

Layout: ``amqp/`` (types, codec, frames, performatives, message sections) is the AMQP engine; ``connection.py``
(protocol state machine), ``links.py`` (session/link state), ``broker.py`` (namespace, CBS, $management,
faults), ``hub.py`` (partition logs, retention, epochs, receiver quota), ``addresses.py`` (addresses, filters),
``websocket.py`` (RFC 6455 server), ``tls.py`` (certificates), ``service_errors.py``, ``sas.py``, ``config.py``.
"""

from .config import ConfigError, EmulatorConfig, HubConfig, default_config, load_config

__all__ = [
    "ConfigError", "EmulatorConfig", "EmulatorCore", "EmulatorServer", "HubConfig", "default_config", "load_config",
]


def __getattr__(name: str):
    """The server (asyncio and the AMQP engine) loads on first use, so ``harness``'s parser stays quick."""
    if name in ("EmulatorCore", "EmulatorServer"):
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
