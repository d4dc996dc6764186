"""Where the query writes: each sink a scenario can choose (`spark.sink`) is one package here (`parquet/`, the
default, and `kafka/`), named as the value that chooses it, exporting `PART`, a `SinkPart`.

A part says everything the harness does differently for its sink: what it refuses at load, what the query process
needs to write to it (`job_part`, then `rows` and `writer` in the driver), what exists before the query starts and
what the run keeps after it, how the checker gets the output back and where latency ends, which rows a re-run
batch may write twice, and whether a driver kill can be timed after its write. Nothing else in the harness branches
on the sink's name: the runner, the faults, the query process and the judge ask the part. Adding a sink is adding a
package (and its line in docs/sinks.md).

A query that owns its sink (`foreach_batch` and `read_sink`, harness.queries: the contract) writes with its own
function whatever `spark.sink` says (it is left at the default); what is common to every sink is judged here:
`update` output mode only for a query that aggregates (a query function's `aggregates = True`), since elsewhere it
means append under another name, and only on a sink that has it; not with the window_counts oracle, which judges
append mode's one emission per window (a query's own oracle judges its update output); real-time mode (trigger
kind realTime) runs in update mode whatever the query.

Refusals are sentences naming the field (harness.config turns them into exit 2 before anything starts). Each
part's package stays light to import (no pandas or Arrow at import time): the Spark driver process imports it.
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import ClassVar

from harness.effects import DupRange

DEFAULT_KIND = "parquet"  # a `[spark]` table without `sink`
# the columns that make a sink row one event (its id and the input position its ack named) and the moment it
# became visible: the per-event rules and the latency read them, whichever sink wrote the row
EVENT_COLUMNS = ("producer", "seq", "partition", "offset", "commit_ms")
EVENT_ID_COLUMNS = EVENT_COLUMNS[:4]


class SinkPart:
    """One sink kind. Class attributes declare what it is; methods act for it. The defaults are an exactly-once
    sink in the run directory that needs nothing before or after the run."""

    kind: ClassVar[str]  # the `spark.sink` value that chooses it: its package's name
    # `<kind>: <summary>` is its line in `spark.sink`'s description (the scenario's JSON Schema)
    summary: ClassVar[str]
    title: ClassVar[str]  # how messages name it, e.g. "Spark's file sink"
    # the output modes Spark's sink writes (a query's own foreachBatch sink is not held to them)
    output_modes: ClassVar[tuple[str, ...]] = ("append",)
    # real-time mode writes each record as it is processed, to the sinks in Spark's allowlist only
    real_time: ClassVar[bool] = False
    # a driver_kill's `after_sink_write` has a moment to hit: rows visible downstream before Spark commits
    # their batch, seen growing by `visible_output` (a query's own foreachBatch sink has one whatever the part:
    # harness.spark.sinkhold)
    kill_after_write: ClassVar[bool] = False
    # it logs each batch it wrote (`batch_log`): a driver_kill's after_offsets/after_sink_write phases read it
    logs_batches: ClassVar[bool] = False
    latency_end: ClassVar[str]  # where an event's end-to-end latency ends: when its row became visible downstream
    # The output lives outside the run directory (a broker's topic): the run reads it into sink/ once the query
    # has stopped, while the backend still runs (`record_output`, said as `recording`), and the checker judges
    # that copy (`read_output`: `output_name` says what is read, `rows_name` what its rows are); otherwise the
    # checker reads sink/ itself, as the query left it.
    reads_output_after_run: ClassVar[bool] = False
    recording: ClassVar[str] = ""
    output_name: ClassVar[str] = ""
    rows_name: ClassVar[str] = ""

    def refusal(self, scenario, query_def) -> str | None:
        """Why this sink cannot run the scenario (a sentence leading with the field), or None: what it needs of
        the backend, the query and its own fields; the output mode is judged after it (`refusal` below)."""
        return None

    def job_part(self, scenario) -> dict:
        """What the query process needs for this sink beyond `sink`, `sink_path` and `output_mode`."""
        return {}

    def rows(self, out):
        """The query's output (a streaming DataFrame, in the driver) as this sink writes it."""
        return out

    def writer(self, writer, job: dict, source_options: dict[str, str]):
        """`writer` (a DataStreamWriter, in the driver) pointed at this sink; `source_options` are the source's,
        secrets expanded, for a sink that connects as the source does."""
        raise NotImplementedError

    def create_output(self, ctx) -> None:
        """Once the backend runs and before the query starts: where the query will write, when the backend
        holds it."""

    def visible_output(self, ctx) -> int:
        """With `kill_after_write`: how many rows are visible downstream now, a count that grows as the sink
        writes (a driver_kill times its kill by it)."""
        raise NotImplementedError

    def record_output(self, ctx) -> None:
        """With `reads_output_after_run`, once the query has stopped and while the backend runs: the output read
        completely into the run directory (`ctx.run_dir`/sink), so a copy of the directory judges the same."""
        raise NotImplementedError

    def record_after_stop(self, sink_dir: Path) -> None:
        """Once everything has stopped: what the run directory must write down about the output that a copy of it
        would lose (the file sink: its batches' commit times, kept by the files' mtimes only)."""

    def read_output(self, sink_dir: Path):
        """With `reads_output_after_run`: the recorded output as a pandas DataFrame, one row per output row, with
        `commit_ms`, in the order the rows became visible."""
        raise NotImplementedError

    def latency_source(self, rows) -> str:
        """With `reads_output_after_run`: how latency is measured from `read_output`'s rows (result.json
        `oracle.latency`), or why it is not."""
        raise NotImplementedError

    def batch_log(self, ctx) -> Path | None:
        """The directory where the sink logs each batch it has written as a file named by the batch id (the file
        sink's `_spark_metadata`), or None: a driver_kill's phases read it to tell whether a batch was written."""
        return None

    def rewritable(self, ctx) -> list[DupRange]:
        """The input ranges whose rows may be written again if the batches in flight now are re-run (a killed
        driver's successor re-runs them, a lost executor's tasks are retried); none for an exactly-once sink, which
        skips a batch it has already."""
        return []


def _kinds() -> tuple[str, ...]:
    """Every sink's package name, the default first, then by name; listed without importing them."""
    names = [i.name for i in pkgutil.iter_modules(__path__) if i.ispkg]
    return tuple(sorted(names, key=lambda name: (name != DEFAULT_KIND, name)))


KINDS = _kinds()


def sink_part(kind: str) -> SinkPart:
    """The part of the sink `kind` (a scenario's `spark.sink`, a job's `sink`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown sink {kind!r} (spark.sink); known: {', '.join(KINDS)}")
    return importlib.import_module(f"{__name__}.{kind}").PART


def aggregates(query_def) -> bool:
    """Whether the query aggregates (so update mode re-emits a group as it changes)."""
    return bool(getattr(query_def.function, "aggregates", query_def.oracle == "window_counts"))


def refusal(scenario, query_def) -> str | None:
    """Why the scenario's sink choice cannot run (a sentence naming the field), or None: the sink's own reasons
    first, then the output mode's."""
    return sink_part(scenario.spark.sink).refusal(scenario, query_def) or _output_mode_refusal(scenario, query_def)


def _output_mode_refusal(scenario, query_def) -> str | None:
    spark = scenario.spark
    if spark.output_mode != "update":
        return None
    part = sink_part(spark.sink)
    if "update" not in part.output_modes and query_def.foreach_batch is None:
        others = " or ".join(f"spark.sink = \"{kind}\"" for kind in KINDS if "update" in sink_part(kind).output_modes)
        return (f"spark.output_mode = \"update\": {part.title} (spark.sink = \"{part.kind}\") writes "
                f"{' and '.join(part.output_modes)} mode only; use {others} or a query's own foreachBatch sink")
    if query_def.oracle == "window_counts":
        return (f"spark.output_mode = \"update\": {spark.query}'s oracle, window_counts, judges append mode (each "
                "window emitted once, when the watermark closes it); update mode emits a window again each time "
                "its count changes. Use append, or a query with an oracle of its own that takes a window's last "
                "emission")
    if spark.trigger.kind != "realTime" and not aggregates(query_def):
        return (f"spark.output_mode = \"update\": {spark.query} does not aggregate, so update mode would only be "
                "append under another name; it is for a query that aggregates (its function's "
                "`aggregates = True`, or the window_counts oracle)")
    return None
