"""The fault catalog: one module per fault, found by its `kind` (the name a scenario's `[[faults]]` uses).

Adding a fault is one new module here (a `Fault` subclass decorated with `@register`) plus its test; the runner,
the nemesis and the checker need no change.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated, Union

from pydantic import Field

from harness.faults.base import Fault, FaultError, FaultOptions

FAULTS: dict[str, type[Fault]] = {}


def register(cls: type[Fault]) -> type[Fault]:
    if cls.kind in FAULTS:
        raise ValueError(f"fault kind {cls.kind!r} registered twice")
    FAULTS[cls.kind] = cls
    return cls


_NOT_FAULTS = {"base", "schedule", "nemesis"}


def _load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _NOT_FAULTS and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_all()


def fault_for(options: FaultOptions) -> Fault:
    return FAULTS[options.kind](options)


def options_union():
    """The pydantic type of one `[[faults]]` entry: each fault's own options model, chosen by `kind`."""
    models = tuple(cls.Options for cls in FAULTS.values())
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="kind")]  # type: ignore[valid-type]


__all__ = ["FAULTS", "Fault", "FaultError", "FaultOptions", "fault_for", "options_union",
           "register"]
