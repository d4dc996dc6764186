"""Messaging systems, found by kind: each kind is one package here (`kafka/`, `eventhubs/`), named as the
`[backend]` table's `kind`, exporting `SPEC`, its options model.

A `BackendSpec` says what the scenario's `[backend]` table may hold and how its stream config and Spark source
options are checked; it builds its `Backend` (harness.backends.base), names the producer sender its producer
processes load and how keys map to partitions, the jars its Spark source needs, and the capabilities it offers
faults (harness.backends.capabilities). Nothing else in the harness branches on the kind string: the runner, the
faults, the query process and the producers ask the spec or the backend. Adding a kind is adding a package.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated, Any, Union, get_args

from pydantic import Discriminator, Tag

from harness.backends.base import Backend, BackendError, BackendSpec, SparkSource

DEFAULT_KIND = "kafka"  # a `[backend]` table without `kind`


def _discover() -> dict[str, type[BackendSpec]]:
    """Every kind's `SPEC`, by its package's name (the default kind first, then by name)."""
    specs = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: (i.name != DEFAULT_KIND, i.name)):
        if not info.ispkg:
            continue
        spec = importlib.import_module(f"{__name__}.{info.name}").SPEC
        if get_args(spec.model_fields["kind"].annotation) != (info.name,):
            raise TypeError(f"{spec.__name__}.kind must be Literal[{info.name!r}], the name of its package")
        specs[info.name] = spec
    return specs


SPECS: dict[str, type[BackendSpec]] = _discover()


def _kind(value: Any) -> str:
    return (value.get("kind", DEFAULT_KIND) if isinstance(value, dict) else getattr(value, "kind", DEFAULT_KIND))


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
