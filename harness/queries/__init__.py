"""The queries under test, and the contract every one of them (the harness's and a user's own) follows.

A scenario names its query with `spark.query`: a built-in name (`passthrough`, `windowed_count`, `dedup`) or
`"package.module:function"` for a user's own, importable on the driver (and on executors, for UDFs).

The contract
------------
- The function is called once on the driver as `function(events, params)` and returns the streaming DataFrame
  to write. `params` is the scenario's `[spark.query_params]` table (JSON scalars).
- `events` is the source already normalised to the harness's event columns, whatever the backend:
  `producer` int, `seq` long (together the event's id), `intended_ms` double (intended send time, epoch ms),
  `event_time` timestamp (the same instant, for watermarks and windows), `partition` int, `offset` long,
  `broker_ms` double (the broker's timestamp), `bytes` int (the encoded event's size).
- Sink and output mode: the Parquet file sink in `append` mode (the one built-in sink that is exactly-once
  across restarts: it skips a batch id already in its own log). Stateful queries therefore need a watermark.
- What the output must hold depends on its *oracle*, which the checker uses to judge it:
  - `events` (default): one row per input event, keeping at least `producer`, `seq`, `intended_ms`,
    `partition`, `offset`; `broker_ms`, `bytes`, `batch_ms` are used when present. Every acked event must
    come out exactly once, where its ack said (the checker's event rules).
  - `window_counts`: rows `window_start_ms`, `window_end_ms` (double, epoch ms), `count` (long): the final
    count of every window the query emitted must equal the count of acked events whose `intended_ms` falls
    in it, and every window closed by the final watermark must have been emitted.
  A user's function declares its oracle with an attribute, `function.oracle = "window_counts"`, or a
  `"package.module:function"` of its own, called as `oracle(acks, sink, params)` with pandas frames and
  returning `{"ok": bool, "detail": str, ...}`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

BUILT_IN = {"passthrough": "harness.queries.passthrough:query",
            "windowed_count": "harness.queries.windowed_count:query",
            "dedup": "harness.queries.dedup:query"}
ORACLES = ("events", "window_counts")


class QueryError(ValueError):
    pass


@dataclass
class QueryDef:
    name: str
    function: Callable[..., Any]
    oracle: str  # "events" | "window_counts" | "module:function"


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise QueryError(f"cannot import {target!r}: {exc}") from None


def resolve(name: str) -> QueryDef:
    """The query a scenario names; raises QueryError naming what is allowed."""
    target = BUILT_IN.get(name)
    if target is None:
        if ":" not in name:
            raise QueryError(f"unknown query {name!r}; allowed: {', '.join(BUILT_IN)} or 'package.module:function'")
        target = name
    function = _import(target)
    if not callable(function):
        raise QueryError(f"{target!r} is not a function")
    oracle = getattr(function, "oracle", "events")
    if oracle not in ORACLES and ":" not in str(oracle):
        raise QueryError(f"{target}.oracle = {oracle!r}; allowed: {', '.join(ORACLES)} or 'package.module:function'")
    return QueryDef(name, function, oracle)
