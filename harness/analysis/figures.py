"""The run's figures (not checks), from its view (harness.analysis.runview): counts, latency, the warm-up,
batches, lag, throughput, the producers against their rate, the source's and Spark's tasks, consumers,
resources, the harness's footprint and the machine; and the series the report draws. Written into the typed
result; nothing here writes a file (harness.analysis.measure does, once)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.records import calibration
from harness.analysis.consumers import connections_file, consumer_summary, read_connections
from harness.analysis.lag import lag_series, lag_summary
from harness.analysis.producers import rate_accuracy, skew_section
from harness.analysis.progress import batch_stats, commit_s, epoch_s
from harness.analysis.resources import run_footprint, run_machine
from harness.analysis.runview import RunView
from harness.analysis.series import build_series
from harness.analysis.spark_tasks import placement_summary, placement_tasks
from harness.analysis.startup import startup_steps
from harness.spark import CATCH_UP_TRIGGERS
from harness.files.jsonl import read_jsonl
from harness.records.result import RunResult


@dataclass
class Drawn:
    """What the report draws beside the result: series.json, and the producers' rate per second (per_second.json)."""
    series: dict[str, Any] = field(default_factory=dict)
    per_second: list | None = None  # None when no producer fleet ran


def fill_figures(result: RunResult, run: RunView) -> Drawn:
    """Every figure of the run into `result`; the series to draw returned."""
    fill_counts(result, run)
    fill_warmup(result, run)
    tasks = fill_placement(result, run)
    fill_consumers(result, run)
    fill_machine(result, run)
    fill_batches(result, run)
    per_second = fill_producers(result, run)
    try:  # what the report draws, not what the verdict stands on
        series = build_series(t0=run.t0, warmup_s=run.warmup_s, latency=run.rec.latency,
                              per_second=per_second or [], progress=run.progress, lag_samples=run.lag_samples,
                              tasks=tasks, resource_samples=run.resource_samples or [])
    except Exception as exc:  # noqa: BLE001
        series = {"error": f"building the time series failed: {exc!r}"}
    return Drawn(series, per_second)


def fill_counts(result: RunResult, run: RunView) -> None:
    """Counts, losses per partition, latency (the steady part of the measured window as the headline), the
    performance sections and which start-up step took what."""
    rec, summary = run.rec, run.rec.latency
    result.latency_windows = summary.windows
    result.counts = {**rec.counts(), "pacer_skipped": run.producers.get("pacer_skipped", 0),  # type: ignore[assignment]
                     "unacked_at_exit": run.producers.get("unacked_at_exit", 0),
                     # only when a fault declared duplicates (an at-least-once sink's re-run batches)
                     **({"expected_duplicates": rec.expected_duplicates}
                        if any(e.duplicates for e in run.faults.effects) else {})}
    result.lost_by_partition = {str(k): v for k, v in rec.lost_by_partition.items()}
    result.expected_lost_by_partition = {str(k): v for k, v in rec.expected_lost_by_partition.items()}
    result.latency_measured_ms = summary.latency.percentiles()  # type: ignore[assignment]
    perf = run.performance
    # the headline: the steady part of the measured window (harness.analysis.steady)
    result.latency_ms = (perf.latency if perf else summary.latency).percentiles()  # type: ignore[assignment]
    if perf:
        result.steady, result.startup = perf.steady, perf.startup
        result.sustain, result.recovery = perf.sustain, perf.recovery
    # which start-up step took what (harness.analysis.startup), for the report's start-up section
    result.startup_steps = startup_steps(read_jsonl(run.run_dir / "timeline.jsonl"), run.progress)
    result.publish_delay_ms = summary.publish_delay.percentiles()  # type: ignore[assignment]
    result.source = run.source
    result.resources = run.resources


def fill_warmup(result: RunResult, run: RunView) -> None:
    """How long the warm-up was and why it ended, and what was delivered in it (kept out of the headline)."""
    if run.measured_from_ms is None:
        return
    summary, end = run.rec.latency, run.warmup_end
    result.warmup = {"s": run.warmup_s, "until": "caught_up" if end is not None else "fixed",
                     **({"ended": end.get("ended"), "reason": end.get("reason"), "max_s": end.get("max_s"),
                         "lag": end.get("lag"), "band": end.get("band")} if end else {}),
                     "measured_from": run.measured_from_ms / 1000.0,
                     "events_delivered": summary.warmup_delivered,
                     "latency_ms": summary.warmup_latency.percentiles()}


def fill_placement(result: RunResult, run: RunView) -> list[dict]:
    """Where Spark read each partition (its event log); the tasks, for the series."""
    tasks: list[dict] = []
    try:  # a report, not a check: an unreadable log leaves the verdict alone
        tasks = placement_tasks(run.run_dir, run.source_records)
        result.placement = placement_summary(tasks)
    except Exception as exc:  # noqa: BLE001
        result.placement = {"error": f"reading Spark's event log (spark/events/) failed: {exc!r}"}
    return tasks


def fill_consumers(result: RunResult, run: RunView) -> None:
    """The Kafka consumers Spark created, from the TCP proxy's records (Kafka with backend.proxy or a network
    fault, or the emulator's Kafka endpoint)."""
    try:  # a report, not a check
        result.consumers = consumer_summary(read_connections(run.run_dir) or [], run.progress)
        unrecorded = run.scenario.backend.consumers_unrecorded()
        if result.consumers:
            result.consumers["records"] = str(connections_file(run.run_dir))
        elif unrecorded:  # a service the harness cannot watch: said, not left out
            result.consumers = {"created": None, "unknown": unrecorded}
    except Exception as exc:  # noqa: BLE001
        result.consumers = {"error": f"reading the connection records failed: {exc!r}"}


def fill_machine(result: RunResult, run: RunView) -> None:
    """The harness's footprint and what other processes took, over the measured window: the traffic's, and for a
    query that reads after its traffic (availableNow, once: the drain is what such a run measures) up to its last
    batch's end."""
    s = run.scenario
    window = (run.t0, run.t0 + run.warmup_s + s.producers.duration_s)  # the measured window
    through = max((commit_s(p) for p in run.progress if "timestamp" in p), default=None) \
        if s.spark.trigger.kind in CATCH_UP_TRIGGERS else None
    try:  # a figure, not a check: how much of the machine's CPU the harness took from what it measured
        floor = s.backend.producer_floor_calibration()
        result.footprint = run_footprint(run.run_dir, *window, client=s.backend.producer_client_floor,
                                         floor=calibration.read(run.run_dir, floor) if floor else None,
                                         through=through, samples=run.resource_samples)
    except Exception as exc:  # noqa: BLE001
        result.footprint = {"ratio": None, "ok": None, "error": f"reading resources.jsonl failed: {exc!r}"}
    try:  # what processes outside the run took meanwhile: over the bound, performance checks are set aside
        result.machine = run_machine(run.run_dir, *window, s.checks.max_busy_share, through=through,
                                     samples=run.resource_samples)
    except Exception as exc:  # noqa: BLE001
        result.machine = {"busy": None, "error": f"reading resources.jsonl failed: {exc!r}"}


def fill_batches(result: RunResult, run: RunView) -> None:
    """Batches (a batch re-run after a restart counts once), their timings over the steady part, the lag."""
    progress, perf = run.progress, run.performance
    result.batches = len({p.get("batchId") for p in progress})
    steady_from = run.t0 + perf.steady["from_s"] if perf else (run.measured_from_ms or 0.0) / 1000.0
    result.batch_stats = batch_stats([p for p in progress if "timestamp" in p
                                      and epoch_s(p["timestamp"]) >= steady_from])
    result.lag_events = lag_summary(lag_series(run.lag_samples, progress))


def fill_producers(result: RunResult, run: RunView) -> list | None:
    """Throughput against the target, the producers against their rate each second (returned, for the series and
    per_second.json), skew and clocks."""
    warmup, duration, rate = run.warmup_s, run.scenario.producers.duration_s, run.rate
    result.throughput = {"produce_eps": run.acked_measured / duration if duration else 0.0,  # type: ignore[assignment]
                         "process_rps": result.batch_stats["process_rps"],
                         "target_eps": (run.target_events - rate.cumulative(warmup)) / duration if duration else 0.0}
    accuracy, per_second = {}, None
    if run.fleet:
        per_second = run.fleet.per_second({m.directory: round(m.offset_ms / 1000.0) for m in run.clock_plan.machines
                                           if m.corrected and m.offset_ms})
        accuracy = rate_accuracy(per_second, rate, run.fleet.job.get("start_at", 0.0), warmup + duration,
                                 run.rec.produced)
    result.producers = {**run.producers, **skew_section(run.producers), **accuracy}
    if run.clocks:
        result.producers["clocks"] = run.clocks
    return per_second
