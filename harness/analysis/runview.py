"""The run as the checkers see it: read once from the run directory and the run's state by the measuring step
(harness.analysis.measure), the history reconciled with the sink (harness.reconcile), every figure a checker judges
computed. A checker never reads a file itself.

Whatever cannot be read raises `Unjudgeable`, naming what was being read; the judge turns it into an unjudged
result that keeps what was computed before.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness import clocks
from harness.analysis.performance import Performance, performance
from harness.analysis.progress import epoch_s
from harness.analysis.resources import load as load_resources, summarize as summarize_resources
from harness.analysis.source_tasks import read_tasks, source_summary
from harness.reconcile import Expectations, Reconciler, Reconciliation
from harness.config import Scenario
from harness.text.durations import spark_interval_ms
from harness.effects import FAULT_PRODUCER_BASE, Effect
from harness.faults.nemesis import recorded_faults
from harness.files.jsonl import read_jsonl
from harness.records.placements import load_placements
from harness.queries import QueryDef
from harness.records.runstate import RunState
from harness.sinks import EVENT_COLUMNS, EVENT_ID_COLUMNS, sink_part
from harness.sinks.parquet.files import local_path, batch_log
from harness.spark import checkpoint as ckpt
from harness.producers.fleet import ProducerFleet
from harness.producers.rates import make_rate, warmed_up

SEND_FAILURE_GRACE_MS = 60_000.0  # a send that failed while a fault was active may report up to this much later


class Unjudgeable(Exception):
    """What could not be read or reconciled, and why: the result's unjudged_reason."""


@contextmanager
def reading(what: str):
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - named for the reader of result.json
        raise Unjudgeable(f"{what} failed: {type(exc).__name__}: {exc}") from exc


@dataclass
class FaultFacts:
    """The faults as recorded (faults.jsonl) and what they declared."""
    records: list[dict]
    effects: list[Effect]
    expected_failures: list[str]  # Spark error classes a fault declared the query must fail with
    failed_as_expected: bool  # ... and it did


@dataclass
class RunView:
    scenario: Scenario
    run_dir: Path
    state: RunState
    query_def: QueryDef
    per_event: bool  # the query's oracle is the events oracle: its output is one row per event
    faults: FaultFacts
    progress: list[dict]
    t0: float  # epoch s: the producers' start (the first progress record's time without producers)
    measured_from_ms: float | None  # the warm-up's end, when there was one
    target_events: float  # events the rate schedules, warm-up included
    fleet: ProducerFleet | None
    producers: dict[str, Any]  # the producer processes' merged summary
    process_rows: int  # rows the producer processes wrote to the history (not the faults')
    acked_measured: int  # acked events in the measured window
    rec: Reconciliation
    clock_plan: clocks.ClockPlan
    own_sink: pd.DataFrame | None  # what a query that owns its sink returned from read_sink
    source: dict[str, Any] = field(default_factory=dict)  # the source's own task records, summarized
    source_records: list[dict] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)  # every process's RSS/CPU/fds, disk, leaks
    resource_samples: list[dict] | None = None  # resources.jsonl as read once (None: it could not be read)
    clocks: dict[str, Any] | None = None  # producers on other machines: offsets measured and corrected
    oracle_outcome: dict[str, Any] | None = None  # what a query's own oracle returned (result.json `oracle`)
    state_read: dict[str, Any] | None = None  # the query's final state against its oracle's (harness.analysis.state)
    live_checks: list[dict] = field(default_factory=list)  # a soak's live evaluations (live_checks.jsonl)
    changes: list[dict] = field(default_factory=list)  # what each change on the checkpoint did (analysis.changes)
    outages: list[dict] = field(default_factory=list)  # what each outage's restart did (analysis.outages)
    lag_samples: list[dict] = field(default_factory=list)  # the broker's end offsets, about once a second
    performance: Performance | None = None  # steady state, start-up, recovery per fault, keeping up
    warmup_s: float = 0.0  # the warm-up the traffic had: producers.warmup_s, or a caught_up one's (measure.json)
    warmup_end: dict[str, Any] | None = None  # how a caught_up warm-up ended (harness.analysis.warmup)
    spark_log: dict[str, dict] | None = None  # what Spark logged per executor, when a fault declared some

    @property
    def rate(self):
        return warmed_up(make_rate(self.scenario.producers.rate), self.warmup_s)

    @property
    def query(self) -> dict[str, Any]:
        return self.state.query or {}


def read_faults(run_dir: Path, query: dict) -> FaultFacts:
    records = recorded_faults(run_dir)
    effects = [Effect.from_dict(f["effect"]) for f in records if f["injected_at"] is not None]
    expected = sorted({e.failure for e in effects if e.failure})
    failed = bool(expected) and query.get("state") == "failed" and any(
        cls in (query.get("error") or "") for cls in expected)
    return FaultFacts(records, effects, expected, failed)


def read_run(scenario: Scenario, run_dir: Path, state: RunState, query_def: QueryDef, faults: FaultFacts,
             clock_threshold_ms: float) -> RunView:
    """Everything the checkers judge, reconciled once (out of core: a DuckDB file in a temporary directory)."""
    if state.positions_error:
        raise Unjudgeable(f"the events' positions could not be read back from the service (their sends reported "
                          f"none): {state.positions_error}")
    per_event = query_def.oracle == "events"  # the events oracle: the output is one row per event
    traffic = read_traffic(scenario, run_dir)
    with Reconciler() as checker:
        with reading("reading the producers' history (producers/acks-*.arrows, or acks-*.csv of older runs)"):
            clock_plan = clocks.plan(run_dir / "producers", clock_threshold_ms)
            # every machine's files (subdirectories gathered from producer machines), on the reference clock
            checker.add_acks(clocks.corrected_batches(run_dir / "producers", clock_plan))
            checker.set_placements(load_placements(run_dir / "placements"))
        own_sink = add_output(scenario, run_dir, query_def, checker, per_event)
        with reading("reconciling the history with the sink"):
            rec = checker.reconcile(expectations(scenario, run_dir, state, faults),
                                    measured_from_ms=traffic.measured_from_ms, t0=traffic.t0)
            # events a fault wrote itself (producer index >= FAULT_PRODUCER_BASE) are history, not the processes'
            process_rows = checker.ack_count(producer_below=FAULT_PRODUCER_BASE)
            acked = rec.acked if traffic.measured_from_ms is None else \
                checker.ack_count(ok_only=True, intended_from_ms=traffic.measured_from_ms)
    if not per_event:  # the output is not one row per event (its oracle judges it): no event
        rec.lost = rec.expected_lost = rec.unread = 0  # is lost for want of a row of its own
        rec.lost_by_partition, rec.expected_lost_by_partition = {}, {}
        rec.lost_by_ack_second, rec.expected_lost_by_range = {}, {}
    view = RunView(scenario, run_dir, state, query_def, per_event, faults, traffic.progress, traffic.t0,
                   traffic.measured_from_ms, traffic.target, traffic.fleet, traffic.producers, process_rows, acked,
                   rec, clock_plan, own_sink, warmup_s=traffic.warmup_s, warmup_end=traffic.warmup_end)
    view.clocks = clock_section(clock_plan, run_dir, per_event and query_def.read_sink is None)
    add_run_figures(view)
    return view


@dataclass
class Traffic:
    """What the producers' records say of the traffic: its start, warm-up and measured window, its target."""
    fleet: ProducerFleet | None
    producers: dict[str, Any]  # the producer processes' merged summary
    progress: list[dict]
    t0: float
    warmup_s: float
    warmup_end: dict[str, Any] | None
    target: float
    measured_from_ms: float | None


def read_traffic(scenario: Scenario, run_dir: Path) -> Traffic:
    fleet = ProducerFleet.read(run_dir / "producers")
    producers = fleet.merged_summary() if fleet else {}
    warmup, duration = (fleet.warmup_s() if fleet else scenario.producers.warmup_s), scenario.producers.duration_s
    warmup_end = None
    if fleet and fleet.adaptive_warmup:  # a run stopped before its warm-up ended has no measure.json
        warmup_end = fleet.measure_record() or {"ended": None, "reason": "the run ended during the warm-up"}
    target = warmed_up(make_rate(scenario.producers.rate), warmup).cumulative(warmup + duration)
    # the measured window starts after the warm-up: latency and throughput are its events' only
    measured_from_ms = (float(fleet.job.get("start_at", 0.0)) + warmup) * 1000.0 if fleet and warmup else None
    progress = read_jsonl(run_dir / "progress.jsonl")
    stamps = [epoch_s(p["timestamp"]) for p in progress if "timestamp" in p]
    t0 = float(fleet.job.get("start_at", 0.0)) if fleet else (stamps[0] if stamps else 0.0)
    return Traffic(fleet, producers, progress, t0, warmup, warmup_end, target, measured_from_ms)


def expectations(scenario: Scenario, run_dir: Path, state: RunState, faults: FaultFacts) -> Expectations:
    """What the faults declared: loss ranges, windows in which sends may fail, new generations, duplicates, and
    (a query that stopped with a declared failure) how far its checkpoint says it read."""
    return Expectations(
        loss=[r for e in faults.effects for r in e.loss],
        failure_windows_ms=[((f.get("inject_started_at") or f["injected_at"]) * 1000.0,
                             (f["healed_at"] or state.ended_at) * 1000.0 + SEND_FAILURE_GRACE_MS)
                            for f in faults.records
                            if f["injected_at"] is not None and f["effect"].get("send_failures")],
        generations_ms=[e.new_generation_ms for e in faults.effects if e.new_generation_ms is not None],
        duplicates=[r for e in faults.effects for r in e.duplicates],
        read_up_to=read_up_to(scenario, run_dir, faults),
    )


def read_up_to(scenario: Scenario, run_dir: Path, faults: FaultFacts) -> dict[int, int] | None:
    """A query that stopped with the failure a fault declared: how far its checkpoint says it read ({partition:
    its last commit's end offset}), what it is judged on; None for any other run."""
    if not faults.failed_as_expected:
        return None
    return {int(p): o for p, o in ckpt.committed(run_dir / "checkpoint").get(scenario.stream.name, {}).items()}


def add_output(scenario: Scenario, run_dir: Path, query_def: QueryDef, checker: Reconciler,
               per_event: bool) -> pd.DataFrame | None:
    """The query's output into the checker: a query's own sink (its read_sink), the Kafka sink's output topic as
    the run read it, or the Parquet sink's files when its rows are events. What an own sink or the output topic
    returned is kept for the oracle."""
    if query_def.read_sink is not None:  # a query that owns its sink (foreachBatch) says how to read it
        with reading("reading the query's own sink (its read_sink)"):
            return read_own_sink(query_def, run_dir, scenario, checker, per_event)
    sink = sink_part(scenario.spark.sink)
    if sink.reads_output_after_run:  # e.g. the Kafka sink's output topic, as the run read it back (harness.sinks)
        with reading(f"reading {sink.output_name}"):
            return add_frame(sink.read_output(run_dir / "sink"), checker, per_event, sink.rows_name)
    if per_event or rows_are_events(run_dir / "sink"):
        # an output judged by a user's oracle that still has one row per event (an event id, its partition
        # and offset) gives the checker its commit times: latency is measured as for the events oracle
        with reading("reading the sink (the files its _spark_metadata log lists)"):
            checker.add_sink(run_dir / "sink")
    return None


def add_run_figures(view: RunView) -> None:
    """The figures read beside the reconciliation: resources, the source's tasks, the broker's lag, and the
    performance (steady state, recovery per fault, keeping up) when producers ran."""
    scenario, run_dir, state, rec = view.scenario, view.run_dir, view.state, view.rec
    soak = scenario.soak
    try:  # a figure for every run; judged (leaks, disk) for a soak
        view.resource_samples = load_resources(run_dir)
        view.resources = summarize_resources(
            view.resource_samples, t0=state.traffic_start,
            **({"after_s": soak.leak_after_s, "max_growth_mb_per_h": soak.leak_mb_per_h} if soak else {}))
    except Exception as exc:  # noqa: BLE001
        view.resources = {"error": f"reading resources.jsonl failed: {exc!r}"}
    with reading("reading the source's task records (source-metrics/)"):
        view.source_records = read_tasks(run_dir)
        view.source = source_summary(view.source_records, view.progress, scenario.stream.name)
    view.lag_samples = read_jsonl(run_dir / "lag.jsonl")
    if view.fleet is None:
        return
    # which fault record each declared loss range came from (a fault's recovery counts its own losses)
    range_fault = [i for i, f in enumerate(view.faults.records) if f["injected_at"] is not None
                   for _ in Effect.from_dict(f["effect"]).loss]
    by_fault: dict[int, int] = {}
    for idx, n in rec.expected_lost_by_range.items():
        by_fault[range_fault[idx]] = by_fault.get(range_fault[idx], 0) + n
    trigger, duration = scenario.spark.trigger, scenario.producers.duration_s
    with reading("working out the performance figures (steady state, recovery per fault, keeping up)"):
        view.performance = performance(
            per_second=rec.latency.per_second, measured_latency=rec.latency.latency, t0=view.t0,
            warmup_s=view.warmup_s, duration_s=duration, progress=view.progress, lag_samples=view.lag_samples,
            faults=view.faults.records,
            trigger_interval_ms=(spark_interval_ms(trigger.interval)  # realTime: its batch duration
                                 if trigger.kind in ("processingTime", "realTime") else None),
            run_started=(state.ended_at - state.elapsed_s) if state.ended_at else None,
            run_end=state.ended_at or (view.t0 + view.warmup_s + duration), expected_lost_by_fault=by_fault,
            lost_by_ack_second=rec.lost_by_ack_second, duplicate_commits_ms=rec.duplicate_commits,
            warmup_end=view.warmup_end)


def clock_section(clock_plan: clocks.ClockPlan, run_dir: Path, sink_rows_are_events: bool) -> dict | None:
    """Producers on other machines (harness.clocks): per machine the measured offset and what was corrected;
    negative latencies counted from the Parquet sink's rows when they are events (the checker's histogram would
    floor them at 1 µs unseen)."""
    if not any(m.directory != "." or m.samples for m in clock_plan.machines):
        return None  # every producer ran here, on the reference clock
    if sink_rows_are_events:
        clocks.count_negative_latencies(run_dir / "sink", clock_plan)
    return clocks.section(clock_plan)


def rows_are_events(sink_dir: Path) -> bool:
    """Whether the Parquet sink's files have the columns of one row per event (producer, seq, partition, offset)."""
    import pyarrow.parquet as pq

    files = [f for _, _, fs in batch_log(sink_dir) for f in fs]
    if not files:
        return False
    names = set(pq.read_schema(local_path(files[0])).names)
    return all(c in names for c in EVENT_ID_COLUMNS)


def read_own_sink(query_def: QueryDef, run_dir: Path, scenario: Scenario, checker: Reconciler,
                  per_event: bool = True) -> pd.DataFrame:
    """What a foreachBatch query's own reader returns; with the event columns and a commit time per row the
    checker takes its rows (in commit order) and measures latency from them, as from the Parquet sink's log.
    `per_event`: the query's oracle judges one row per event (the events oracle), so the columns are required."""
    frame = query_def.read_sink(run_dir / "sink", dict(scenario.spark.query_params))
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{scenario.spark.query}.read_sink returned {type(frame).__name__}, not a pandas DataFrame")
    return add_frame(frame, checker, per_event, "read_sink")


def add_frame(frame: pd.DataFrame, checker: Reconciler, per_event: bool, source: str) -> pd.DataFrame:
    """Sink rows with the event columns and a commit time each go to the checker in commit order (latency is
    measured from them); `per_event`: the events oracle needs those columns. No rows at all (an output topic the
    query never wrote to, a Kafka sink killed in its first batch) is a sink that delivered nothing: the rules judge
    that, whatever columns an empty read could name."""
    if frame.empty and not all(c in frame.columns for c in EVENT_COLUMNS):
        return frame
    if all(c in frame.columns for c in EVENT_COLUMNS):
        checker.store.add_sink_frame(frame.sort_values("commit_ms", kind="stable"))
    elif per_event:
        raise ValueError(f"the events oracle needs the columns {', '.join(EVENT_COLUMNS)} from "
                         f"{source} (it returned {list(frame.columns)})")
    return frame
