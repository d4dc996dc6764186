"""Every API the Kafka endpoint serves, by key: what ApiVersions advertises and what server.py dispatches on.

Only server.py imports this module (handler modules never do), so the handlers stay free of import cycles. An API
that is not here is absent from ApiVersions, and a request for it closes the connection, as a Kafka broker closes
it for an API key it does not know.
"""

from __future__ import annotations

import harness.emulator.kafka.errors as E
import harness.emulator.kafka.groups as groups
import harness.emulator.kafka.handlers_admin as handlers_admin
import harness.emulator.kafka.handlers_fetch as handlers_fetch
import harness.emulator.kafka.handlers_meta as handlers_meta
import harness.emulator.kafka.handlers_produce as handlers_produce
import harness.emulator.kafka.handlers_sasl as handlers_sasl
from .wire import Api, Writer

MODULES = (handlers_meta, handlers_sasl, handlers_produce, handlers_fetch, handlers_admin, groups)

BY_KEY: dict[int, Api] = {}
for _module in MODULES:
    for _api in _module.APIS:
        if _api.key in BY_KEY:
            raise RuntimeError(f"API key {_api.key} served twice ({BY_KEY[_api.key].name}, {_api.name})")
        BY_KEY[_api.key] = _api

TABLE: list[tuple[int, int, int]] = sorted((a.key, a.min_version, a.max_version) for a in BY_KEY.values())


def unsupported_api_versions() -> bytes:
    """ApiVersions at a version we do not have: v0's shape, UNSUPPORTED_VERSION and our ApiVersions range, so the
    client retries at one we have (KIP-511)."""
    api = BY_KEY[handlers_meta.API_VERSIONS]
    return (Writer().int16(E.UNSUPPORTED_VERSION)
            .array([(api.key, api.min_version, api.max_version)], lambda w, a: w.int16(a[0]).int16(a[1]).int16(a[2]))
            .getvalue())


def group_coordinator(broker):
    """The consumer-group coordinator for ``broker`` (groups.py)."""
    return groups.GroupCoordinator(broker)
