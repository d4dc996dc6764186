"""The queries under test, and the contract every one of them (the harness's and a user's own) follows.

A scenario names its query with `spark.query`: a built-in name (`passthrough`, `windowed_count`, `dedup`,
`sessions`, `collect_to_driver`) or
`"package.module:function"` for a user's own. A user's module is looked up first in the scenario file's
directory: the harness puts that directory on its own `sys.path` when it loads the scenario and on the query
process's `PYTHONPATH` (which the Python workers of `local[N]` executors inherit), so `my_job.py` next to
`scenario.toml` is `spark.query = "my_job:build"`. An unknown name or a function that cannot be imported is bad
input: the scenario is refused before anything starts (exit 2), naming `spark.query`.

The contract
------------
- The function is called once on the driver as `function(events, params)` and returns the streaming DataFrame
  to write. `params` is the scenario's `[spark.query_params]` table (TOML scalars). A function may carry
  `function.check = check(params) -> str | None`: called when the scenario is loaded, a sentence is bad input.
- `events` is the source already normalised to the harness's event columns, whatever the backend:
  `producer` int, `seq` long (together the event's id), `intended_ms` double (intended send time, epoch ms, to
  the microsecond), `event_time` timestamp (the intended time truncated to the millisecond, for watermarks and
  windows), `partition` int, `offset` long, `broker_ms` double (the broker's timestamp), `bytes` int (the
  encoded event's size), `key` string (the record's key as the producers sent it: Kafka's key, Event Hubs'
  partition key; null for keys `none`).
- Sink and output mode: the Parquet file sink in `append` mode (the one built-in sink that is exactly-once
  across restarts: it skips a batch id already in its own log). Stateful queries therefore need a watermark,
  and an aggregation writes each group once, when the watermark passes it.
- A query that owns its sink (`foreachBatch`: a table, a database, a service) declares two more attributes:
  `function.foreach_batch = write(batch_df, batch_id, sink_dir, params)`, called by Spark on the driver for
  every micro-batch, and `function.read_sink = read(sink_dir, params) -> pandas.DataFrame`, called after the run.
  `sink_dir` is the run's `sink/` directory (created empty before the query starts): the writer keeps its table
  there (a SQLite file, files of its own). The harness still owns everything else: the checkpoint (Spark's
  offset and commit logs in `checkpoint/`), the trigger, the query name, the output mode, the progress listener
  and the drain, the faults (driver kills re-run the batch in flight with the same batch id and the same rows).
  foreachBatch is at-least-once: a batch whose write finished before a kill and whose commit did not is handed
  to the writer again, so exactly-once is the writer's to provide (by batch id, or by a naturally idempotent
  write). `read` returns what downstream sees in the table, one row per row, with `batch_id`; with `producer`,
  `seq`, `partition`, `offset` and `commit_ms` (epoch ms at which the row's write committed) the checker
  measures end-to-end latency from it, as from the Parquet sink's log (without them latency is not measured:
  result.json's `oracle.latency` says so and the latency figures are 0). Its oracle gets that frame as `sink`.
- What the output must hold depends on its *oracle*, which the checker uses to judge it:
  - `events` (default): one row per input event, keeping at least `producer`, `seq`, `intended_ms`,
    `partition`, `offset`; `broker_ms`, `bytes`, `batch_ms` are used when present. Every acked event must
    come out exactly once, where its ack said (the checker's event rules). `passthrough` and `dedup`.
  - `window_counts`: rows `window_start_ms`, `window_end_ms` (double, epoch ms) and `count` (long) of tumbling,
    epoch-aligned event-time windows of `query_params.window` (default "10 seconds"): the count of every window
    the query emitted must equal the number of acked events whose intended time (truncated to the millisecond)
    falls in [start, end), no window may be emitted twice, and every window whose end the final watermark
    (the last one the query reported) reached must have been emitted. `windowed_count`.
  - `sessions`: rows `key`, `session_start_ms`, `session_end_ms`, `count` (and `listed`, `producers` when
    present) of sessions per key split at gaps of `query_params.gap` or more (default "5 seconds"), the keys
    rebuilt from the producers' seeds (producers/keys.py draws them from the producer's seed in sequence
    order): every session the final watermark closed (end + gap below it) emitted exactly once with its
    count, nothing else emitted. `sessions`.
  - `"package.module:function"`: a user's own, called after the run as `oracle(acks, sink, params)` with pandas
    frames (acked events from the producers' ack logs; every sink row with its `batch_id` and `commit_ms`, or
    what `read_sink` returned) and returning `{"ok": bool, "detail": str, ...}`; everything it returns is kept
    in result.json's `oracle`. An oracle with a fourth parameter, `oracle(acks, sink, params, run)`, also gets
    `run` (harness.oracles.RunFacts: the run directory, every progress record, the final event-time watermark),
    for outputs that depend on how far the watermark got (an outer join's unmatched rows, a window's end).
  A function declares its oracle with an attribute, `function.oracle = "window_counts"` (default "events").
  With an oracle other than `events`, the checker's per-event rules (loss, duplicates, offsets, order) do not
  apply to the output; the oracle's verdict does.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

BUILT_IN = {"passthrough": "harness.queries.passthrough:query",
            "windowed_count": "harness.queries.windowed_count:query",
            "dedup": "harness.queries.dedup:query",
            "sessions": "harness.queries.sessions:query",
            "collect_to_driver": "harness.queries.collect_to_driver:query"}
ORACLES = ("events", "window_counts", "sessions")
# a window_counts query's `window` param when the scenario gives none: the query's and its oracle's, here (the
# contract) rather than in harness.oracles, whose pandas and numpy the query process must not import
WINDOW_DEFAULT = "10 seconds"


class QueryError(ValueError):
    pass


@dataclass
class QueryDef:
    name: str
    function: Callable[..., Any]
    oracle: str  # "events" | "window_counts" | "module:function"

    def check_params(self, params: dict) -> str | None:
        """None, or why `params` do not suit this query (the function's own `check`, when it has one)."""
        check = getattr(self.function, "check", None)
        return check(dict(params)) if callable(check) else None

    @property
    def foreach_batch(self) -> Callable[..., Any] | None:
        """The writer of a query that owns its sink (`write(batch_df, batch_id, sink_dir, params)`), else None."""
        return getattr(self.function, "foreach_batch", None)

    @property
    def read_sink(self) -> Callable[..., Any] | None:
        """How the harness reads an own sink after the run (`read(sink_dir, params) -> DataFrame`), else None."""
        return getattr(self.function, "read_sink", None)


def query_home(query: str, scenario_dir: Path | str) -> Path:
    """Where a user's query module (`package.module:function`) is imported from: the scenario file's directory, or
    the nearest directory above it that holds the module's top-level package or file (a repository keeps its
    scenarios in scenarios/ and its code at the root, as `harness init` lays it out). The scenario's directory when
    none does (the module may be installed)."""
    start = Path(scenario_dir).resolve()
    top = query.partition(":")[0].split(".")[0]
    for directory in (start, *start.parents):
        if (directory / f"{top}.py").is_file() or (directory / top).is_dir():
            return directory
    return start


def importable(directory: Path | str) -> str:
    """Put a scenario's directory first on this process's path (its user modules live there); returns it."""
    path = str(Path(directory).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    return path


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
    if not isinstance(oracle, str) or (oracle not in ORACLES and ":" not in oracle):
        raise QueryError(f"{target}.oracle = {oracle!r}; allowed: {', '.join(ORACLES)} or 'package.module:function'")
    if ":" in oracle and oracle not in ORACLES:
        if not callable(_import(oracle)):  # a user's oracle that cannot be imported is refused now, not later
            raise QueryError(f"{target}.oracle = {oracle!r} is not a function")
    own = [a for a in ("foreach_batch", "read_sink") if getattr(function, a, None) is not None]
    if own and (len(own) == 1 or not all(callable(getattr(function, a)) for a in own)):
        raise QueryError(f"{target}: a query that owns its sink needs both foreach_batch and read_sink as "
                         f"functions (it has {', '.join(f'{a} = {getattr(function, a)!r}' for a in own)})")
    return QueryDef(name, function, oracle)
