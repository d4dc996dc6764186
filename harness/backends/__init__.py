"""Messaging systems, found by kind: one registry of the `[backend]` table's models.

Each kind brings its own options model (a `BackendSpec`: what the scenario's `[backend]` table may hold, how its
stream config and Spark source options are checked), builds its `Backend` (harness.backends.base) and names the
producer sender its producer processes load. Nothing else in the harness branches on the kind string: the runner,
the query process and the producers ask the backend.
"""
from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag

from harness.backends.base import Backend, BackendError, BackendSpec, SparkSource
from harness.backends.eventhubs.spec import EventHubsSpec
from harness.backends.kafka.spec import KafkaSpec

SPECS: dict[str, type[BackendSpec]] = {"kafka": KafkaSpec, "eventhubs": EventHubsSpec}


def _kind(value: Any) -> str:
    return (value.get("kind", "kafka") if isinstance(value, dict) else getattr(value, "kind", "kafka"))


def spec_union():
    """The `[backend]` table: one model per kind, chosen by `kind` (Kafka when absent)."""
    members = tuple(Annotated[model, Tag(kind)] for kind, model in SPECS.items())
    return Annotated[Union[members], Discriminator(  # type: ignore[valid-type]
        _kind, custom_error_type="backend_kind", custom_error_message=f"kind must be one of {', '.join(SPECS)}")]


def spec_for(kind: str) -> type[BackendSpec]:
    try:
        return SPECS[kind]
    except KeyError:
        raise ValueError(f"unknown backend kind {kind!r}; known: {', '.join(SPECS)}") from None


def make_backend(spec: BackendSpec, stream) -> Backend:
    return spec.build(stream)


__all__ = ["Backend", "BackendError", "BackendSpec", "SPECS", "SparkSource", "make_backend", "spec_for",
           "spec_union"]
