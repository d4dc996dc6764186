"""A change rolled out on a live checkpoint: the query stopped and started again, on the same checkpoint, with
changed code, settings or Spark version, while the traffic goes on (issue: change rehearsal).

The most common way a streaming job breaks is a change, not a fault: a column added, a grouping changed,
`spark.sql.shuffle.partitions` raised, the state store moved to RocksDB, Spark upgraded. Spark documents which
changes a checkpoint survives ("Recovery Semantics after Changes in a Streaming Query"); what it *does* with a
given change under given traffic is what this fault rehearses. Phase A is the scenario's own `[spark]`; phase B
is the same table with the fault's `spark` keys merged in (maps key by key: `conf`, `source_options`,
`query_params`), validated at load like a scenario (`successor`). At the fault's time the fault stops phase A,
either as a redeploy does (`stop = "graceful"`: `StreamingQuery.stop()` between batches) or as a crash
(`stop = "mid_batch"`: SIGKILL with a batch in its offset log and not its commit log), and hands the runner's
supervisor phase B's job, which it starts on the same checkpoint.

What it declares: the query is down for a while (its successor's first batch must come within
`spark.start_timeout_s`), the duplicates an at-least-once sink may write when a batch is cut (as `driver_kill`),
and, when Spark is to refuse the change, the error class it must refuse with (`refused_with`: the run then passes
only if the successor failed with it). Whether the changed settings are in force afterwards (or the checkpoint
kept its own, as it does for the shuffle partitions) is measured from the checkpoint and the progress
(harness.analysis.changes) and judged against `in_force` (harness.checkers.changes). `rule` is Spark's documented
rule for the change, which the rehearsal report sets beside what happened (a difference is a finding).
"""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.driver_kill import act_when, batch_in_flight, needs_running_query, rewritable, wait_running
from harness.spark.state_reader import finish_reading, start_reading, wants_state
from harness.text.nesting import dotted

# [spark] keys a change may set: the query and what Spark is told. Not the harness's own (timeouts), nor where it
# runs (master, cluster) or writes (sink): those make another run, not a change to this one's query.
CHANGEABLE = ("query", "query_params", "trigger", "source_options", "conf", "state_store", "changelog_checkpointing",
              "output_mode", "driver_memory", "sink_options", "pyspark")
MERGED = ("conf", "source_options", "query_params", "sink_options")  # maps merged key by key into phase A's
RULES = ("allowed", "not_allowed", "not_well_defined")


class ChangeOptions(FaultOptions):
    kind: Literal["change"] = Field("change", description=(
        "change: the query stopped and started again on the same checkpoint with changed code, settings or Spark "
        "version, the traffic going on"))
    name: str = Field("", max_length=80, description="the change in a few words, for reports (default: its keys)")
    spark: dict[str, Any] = Field(default_factory=dict, description=(
        "the [spark] keys phase B runs with, merged into the scenario's (conf, source_options, query_params and "
        f"sink_options key by key); allowed keys: {', '.join(CHANGEABLE)}"))
    stop: Literal["graceful", "mid_batch"] = Field("graceful", description=(
        "how phase A ends: graceful (StreamingQuery.stop() between batches, as a redeploy) or mid_batch (SIGKILL "
        "with a batch planned and not committed, as a crash)"))
    backend: dict[str, Any] = Field(default_factory=dict, description=(
        "the [backend] keys phase B's query reads with: `protocol` alone (Event Hubs: \"kafka\", phase B reads "
        "through the namespace's Kafka endpoint with Spark's own Kafka source, resuming from the positions phase "
        "A's AMQP source committed in the checkpoint); its source_options then replace phase A's (another "
        "connector's)"))
    rule: Literal[RULES] | None = Field(None, description=(  # type: ignore[valid-type]
        "Spark's documented rule for this change (Structured Streaming guide, \"Recovery Semantics after Changes "
        "in a Streaming Query\"): allowed, not_allowed or not_well_defined; reports set it beside what happened"))
    refused_with: str | None = Field(None, min_length=3, max_length=200, description=(
        "the Spark error class the restarted query must fail with (Spark refuses the change); the run passes only "
        "if it does"))
    in_force: bool = Field(True, description=(
        "whether the changed settings must be in force after the restart (false: the checkpoint must keep its own "
        "values, as it does for spark.sql.shuffle.partitions)"))
    mid_batch_timeout_s: float = Field(10.0, gt=0, le=300, description=(
        "with stop = \"mid_batch\": wait this long for a batch in flight, then fail rather than pretend"))

    @field_validator("backend")
    @classmethod
    def _protocol_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        other = sorted(k for k in value if k != "protocol")
        if other:
            raise ValueError(f"backend.{other[0]}: a change sets only the protocol its query reads through "
                             "(backend.protocol); the service itself stays as the scenario has it")
        return value

    @field_validator("spark")
    @classmethod
    def _changeable(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            return value  # a change of protocol alone (checked with the rest: `successor` changes something)
        other = sorted(k for k in value if k not in CHANGEABLE)
        if other:
            raise ValueError(f"spark.{other[0]} is not something a change to the query sets; allowed: "
                             f"{', '.join(CHANGEABLE)} (the run's own settings stay as the scenario has them)")
        # an option name written without quotes is a nested table to TOML: in an option map it means the dotted name
        return {k: dotted(v) if k in MERGED and isinstance(v, dict) else v for k, v in value.items()}


def successor_spark(spark, changes: dict[str, Any], new_source: bool = False) -> dict[str, Any]:
    """Phase B's [spark] table as data: phase A's, with `changes` merged in (maps key by key; a new query's
    query_params, and a new source's source_options (`new_source`), replace the old ones: they are another
    function's, another connector's)."""
    table = spark.model_dump(mode="python")
    new_query = changes.get("query", table["query"]) != table["query"]
    if new_source:
        table["source_options"] = {}
    for key, value in changes.items():
        if (key == "query_params" and new_query) or (key == "source_options" and new_source):
            table[key] = value
        elif key in MERGED and isinstance(value, dict):
            table[key] = {**table.get(key, {}), **value}
        else:  # whole: a trigger's new kind does not keep the old kind's interval
            table[key] = value
    return table


def changed_settings(before, after) -> dict[str, Any]:
    """What differs between two scenarios' query settings, as the rehearsal reports it: Spark confs (the state
    store's included) and source options as {name: value} (None: no longer set), the query, its parameters,
    trigger and PySpark as [before, after]."""
    out: dict[str, Any] = {}
    for section, old, new in (("conf", before.spark_conf(), after.spark_conf()),
                              ("source_options", before.source_options(), after.source_options())):
        differ = {k: new.get(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}
        if differ:
            out[section] = differ
    if getattr(before.backend, "protocol", None) != getattr(after.backend, "protocol", None):
        out["protocol"] = [before.backend.protocol, after.backend.protocol]
    for key in ("query", "query_params", "trigger", "output_mode", "sink_options", "pyspark"):
        old, new = getattr(before.spark, key, None), getattr(after.spark, key, None)
        old, new = (v.model_dump(mode="json") if hasattr(v, "model_dump") else v for v in (old, new))
        if old != new:
            out[key] = [old, new]
    return out


@register
class Change(Fault):
    kind = "change"
    Options = ChangeOptions
    requires = "a query running during the traffic"
    takes_query_down = True

    def successor(self, scenario):
        """Phase B: the scenario with the changed [spark] table, validated like a loaded scenario (its faults
        are phase A's: none of them is phase B's to schedule again)."""
        data = scenario.model_dump(mode="python")
        protocol = self.options.backend.get("protocol")
        new_source = protocol is not None and protocol != getattr(scenario.backend, "protocol", None)
        data.update(spark=successor_spark(scenario.spark, self.options.spark, new_source), faults=[], sweep={},
                    soak=None)
        data["backend"] = scenario.backend.read_through(self.options.backend)
        return type(scenario).model_validate(data)

    @classmethod
    def prepare(cls, ctx, options: list) -> None:
        """A protocol phase B's query reads through is served from the start (the emulator's Kafka endpoint)."""
        for protocol in {o.backend["protocol"] for o in options if "protocol" in o.backend}:
            ctx.backend.offer_protocol(protocol)

    def check(self, scenario) -> str | None:
        problem = needs_running_query(scenario)
        if problem:
            return problem
        try:
            after = self.successor(scenario)
        except ValueError as exc:  # pydantic's ValidationError: phase B's table in its own words
            return "phase B's [spark] (this change's spark keys merged into the scenario's) is not valid: " \
                   + " ".join(str(exc).split())[:1500]
        if not changed_settings(scenario, after):
            return "its spark and backend keys change nothing the query runs with (phase B would be phase A)"
        return None

    def inject(self, ctx) -> dict:
        after = self.successor(ctx.scenario)
        status = wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        self.effect.failure = self.options.refused_with
        graceful = self.options.stop == "graceful"
        before = {"offset_log_last": (ctx.offset_log() or [None])[-1],
                  "commit_log_last": (ctx.commit_log() or [None])[-1]}

        def roll_out(_batch=None):
            return ctx.query.change(lambda: ctx.query_for(resuming(ctx, after)), graceful=graceful,
                                    then=lambda: setattr(self.effect, "duplicates", rewritable(ctx)))

        if graceful:
            code, batch = roll_out(), None
        else:
            hit = act_when(ctx, lambda: batch_in_flight(ctx), self.options.mid_batch_timeout_s, roll_out)
            if hit is None:
                raise FaultError(f"no batch in flight within {self.options.mid_batch_timeout_s:g}s: the change was "
                                 "not rolled out")
            batch, code = hit
        after_stop = {"offset_log_last": (ctx.offset_log() or [None])[-1],
                      "commit_log_last": (ctx.commit_log() or [None])[-1],
                      "committed": {str(p): o for p, o in sorted(ctx.committed_offsets().items())}}
        state_at = self._read_state(ctx, after_stop["commit_log_last"])
        changed = changed_settings(ctx.scenario, after)
        old = {"conf": ctx.scenario.spark_conf(), "source_options": ctx.scenario.source_options()}
        was = {section: {k: old[section].get(k) for k in changed[section]} for section in old if section in changed}
        return {"name": self.options.name or describe(changed), "changed": changed, "was": was,
                "stop": self.options.stop,
                "batch_cut": batch, "before": before, "at_stop": after_stop, "exit_code": code,
                "phase_a_started_at": status.get("at"), "rule": self.options.rule,
                "refused_with": self.options.refused_with, "in_force": self.options.in_force,
                "state_read_at": state_at}

    def _read_state(self, ctx, batch: int | None) -> int | None:
        """For a query whose oracle implies its state: the state phase A committed last, read from the
        checkpoint into `state-at-batch-<batch>/` while phase B starts (a committed version's files stay as they
        are), so the state is judged key by key at the change as well as at the end (harness.analysis.changes).
        The batch read, or None."""
        if batch is None or not wants_state(ctx.scenario.spark.query):
            return None
        self._reader = start_reading(ctx, state_dir_at(batch), batch)
        return batch

    def heal(self, ctx) -> dict:
        """The state read at the change finished (bounded), before the run is judged."""
        reader, self._reader = getattr(self, "_reader", None), None
        return {} if reader is None else {"state_read_exit": finish_reading(ctx, reader)}


def state_dir_at(batch: int) -> str:
    """Where the state a change read at `batch` lies in the run directory."""
    return f"state-at-batch-{batch}"


def resuming(ctx, after):
    """Phase B as rolled out: with another source (a protocol switch), told to start where phase A's last commit
    ended (`startingOffsets`, as a team carries the position over by hand). Spark reads the checkpoint's own
    offsets on a restart and ignores a starting position; both name the same positions here."""
    if getattr(ctx.scenario.backend, "protocol", None) == getattr(after.backend, "protocol", None):
        return after
    committed = {str(p): o for p, o in sorted(ctx.committed_offsets().items())}
    if not committed or any(k.lower() == "startingoffsets" for k in after.spark.source_options):
        return after
    options = {**after.spark.source_options, "startingOffsets": json.dumps({ctx.stream: committed})}
    return after.model_copy(update={"spark": after.spark.model_copy(update={"source_options": options})})


def describe(changed: dict[str, Any]) -> str:
    """A change in words from what it changed: 'spark.sql.shuffle.partitions 8', 'query dedup'."""
    parts = [f"{k} {v}" for section in ("conf", "source_options") for k, v in changed.get(section, {}).items()]
    parts += [f"{k} {v[1]}" for k, v in changed.items() if k not in ("conf", "source_options")]
    return ", ".join(parts)[:120]
