"""Event Hubs emulator: an AMQP 1.0 server on asyncio that the unmodified ``azure-eventhub`` SDK talks to.

Entry points:
  * ``EmulatorServer(config).start()`` - background thread; ``.port``, ``.connection_string(hub)``, ``.stop()`` and
    fault methods ``delete_hub``, ``recreate_hub``, ``age_out``, ``throttle``, ``drop_connections``,
    ``set_latency``, ``steal``, ``snapshot`` (see server.py).
  * ``serve.serve_forever(host, port, config_path, control_port)`` - foreground process with the HTTP control
    API (control.py); ``python -m harness.emulator`` runs it.
  * ``bench.run_bench(json_path, quiet)`` - throughput/CPU benchmark with SDK clients in several processes.

Layout: ``amqp/`` (types, codec, frames, performatives, message sections) is the AMQP engine; ``connection.py``
(protocol state machine), ``links.py`` (session/link state), ``broker.py`` (namespace, CBS, $management,
faults), ``hub.py`` (partition logs, retention, epochs), ``addresses.py`` (addresses, filters), ``sas.py``,
``config.py``.
"""

from .config import ConfigError, EmulatorConfig, HubConfig, default_config, load_config
from .server import EmulatorCore, EmulatorServer

__all__ = [
    "ConfigError", "EmulatorConfig", "EmulatorCore", "EmulatorServer", "HubConfig", "default_config", "load_config",
]
