"""The run's verdict, from the run directory alone: the composition of the checkers (harness.checkers) over one
view of the run (the producers' history reconciled with the sink, the faults' declared effects, the query's own
record and what the runner found, run_state.json), and the run's figures (harness.analysis) in the one typed
result.

The verdict follows from the checks (harness.check.verdict_of): `fail` when a required check failed, else
`unjudged` when one could not be judged (unknown) or was set aside because the machine was busy with other work
(harness.checkers.busy, one pass after the checkers), with `unjudged_reason` naming them and why, else `pass`.

Whatever goes wrong while judging (a malformed sink row, an unreadable file) still yields a result: `unjudged`,
with the reason, and every figure computed before the problem. A run stopped from outside (Ctrl-C, SIGTERM,
SIGHUP) is `unjudged` too, with its figures and no checks: what it measured is partial, so no check can pass or
fail on it. What could not be read and was left out (a torn line, a sink file the directory lacks) is listed in
`unreadable`, never skipped silently.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from harness import atomic, calibration, clocks, environment
from harness.analysis.consumers import connections_file, consumer_summary, read_connections
from harness.analysis.lag import lag_series, lag_summary
from harness.analysis.producers import rate_accuracy, skew_section
from harness.analysis.progress import batch_stats, epoch_s
from harness.analysis.resources import run_footprint, run_machine
from harness.analysis.series import build_series
from harness.analysis.startup import startup_steps
from harness.analysis.spark_tasks import placement_summary, placement_tasks
from harness.check import Check, verdict_of
from harness.checkers import Checker, batch_cap, events, faults, oracle, run as run_checks, source, sustained
from harness.checkers.busy import set_aside_when_busy, unjudged_reason
from harness.checkers.state import state_matches
from harness.checkers.catalogue import check_names
from harness.checkers.view import RunView, Unjudgeable, read_faults, read_run
from harness.config import Scenario
from harness.history import torn_tail
from harness.jsonl import read_jsonl, unreadable_in
from harness.queries import resolve
from harness.result import RunResult
from harness.runstate import RunState
from harness.sinks.parquet.files import missing_files
from harness.soak.checks import soak

# the verdict, in the order result.json lists its checks
CHECKERS: tuple[Checker, ...] = (
    run_checks.completed, events.drained, oracle.oracle, state_matches, events.sends, events.latency, sustained.sustained,
    sustained.headroom, events.producers_reported,
    faults.faults_applied, faults.expected_failure, faults.query_recovered, batch_cap.batch_cap, source.source,
    soak)


def judge(scenario: Scenario, run_dir: Path, state: RunState | dict,
          clock_threshold_ms: float = clocks.DEFAULT_THRESHOLD_MS) -> RunResult:
    state = state if isinstance(state, RunState) else RunState.from_dict(state)
    result = RunResult(scenario=scenario.name, backend=scenario.backend.kind, verdict="unjudged",
                       run_dir=str(run_dir), duration_s=round(state.elapsed_s, 3),
                       traffic_s=scenario.producers.duration_s, backend_info=state.backend,
                       end_offsets={str(k): v for k, v in state.end_offsets.items()}, versions=_versions(),
                       environment=environment.read(run_dir))
    describe_query(result, scenario, state)
    result.expected_checks = check_names(scenario)  # junit.xml lists them all, judged or not
    result.unreadable = unreadable(run_dir)
    try:
        query_def = resolve(scenario.spark.query)
        result.query.oracle = str(query_def.oracle)
        fault_facts = read_faults(run_dir, state.query)
        result.faults = fault_facts.records  # type: ignore[assignment]
        view = read_run(scenario, run_dir, state, query_def, oracle.oracle_for(query_def.oracle), fault_facts,
                        clock_threshold_ms)
        fill_figures(result, view)  # kept when a checker then cannot judge
        if state.interrupted:  # stopped from outside (Ctrl-C, SIGTERM, SIGHUP): what was measured, no verdict
            result.unjudged_reason = state.error or "interrupted"
            return result
        # one pass after the checkers: a busy machine sets failing performance checks aside (harness.checkers.busy)
        checks = set_aside_when_busy([c for checker in CHECKERS for c in checker(view)], result.machine)
        result.oracle = view.oracle_outcome
        result.checks = [c.as_dict() for c in checks]  # type: ignore[misc]
        result.verdict = verdict_of(checks)
        if result.verdict == "unjudged":  # which checks decided nothing, and why
            result.unjudged_reason = unjudged_reason(c.as_dict() for c in checks)
    except Exception as exc:  # noqa: BLE001 - the run still gets its result.json, saying why it is unjudged
        result.verdict = "unjudged"
        result.unjudged_reason = str(exc) if isinstance(exc, Unjudgeable) else f"{type(exc).__name__}: {exc}"
        if state.interrupted:
            result.unjudged_reason = f"{state.error or 'interrupted'}; {result.unjudged_reason}"
        try:
            atomic.write_text(run_dir / "judge-error.txt", traceback.format_exc())
        except OSError as write_exc:  # a full disk: said here, and result.json (if it can be written) says why
            print(f"error: writing {run_dir / 'judge-error.txt'} failed: {write_exc}", file=sys.stderr)
        if state.error and not state.interrupted:  # what went wrong with the run itself is still said
            result.checks = [Check("completed", False, state.error).as_dict()]  # type: ignore[list-item]
    return result


def add_check(result: RunResult, check: Check) -> None:
    """One more check after the judge (`baseline`, harness.runner.record), judged by the same rule: set aside when
    the machine was busy, and the verdict decided again from all the checks, unless it did not follow from them
    (a run stopped from outside, or one the judge could not read: there is no verdict to revise)."""
    followed = verdict_of(result.as_dict()["checks"]) == result.verdict
    (check,) = set_aside_when_busy([check], result.machine)
    result.checks = [*result.checks, check.as_dict()]  # type: ignore[list-item]
    if followed:
        checks = result.as_dict()["checks"]
        result.verdict = verdict_of(checks)
        result.unjudged_reason = unjudged_reason(checks) if result.verdict == "unjudged" else None


def unreadable(run_dir: Path) -> list[dict]:
    """What the judge leaves out because it cannot be read (result.json `unreadable`): sink files the log lists
    that the run directory lacks (their rows count as lost), the producers' ack logs' torn tails, then torn or
    garbled JSON lines."""
    out = [{"file": f"sink/{m['file']}", "count": 1, "batch": m["batch"],
            "detail": f"listed in sink/_spark_metadata (batch {m['batch']}) but not in this run directory's sink/: "
                      "its rows are missing (counted as lost)"} for m in missing_files(run_dir / "sink")]
    producers = run_dir / "producers"
    for path in sorted(producers.rglob("acks-*.arrows")) + sorted(producers.rglob("acks-*.csv")):
        torn = torn_tail(path)
        if torn:
            out.append({**torn, "file": str(path.relative_to(run_dir))})
    return out + unreadable_in(run_dir)


def describe_query(result: RunResult, scenario: Scenario, state: RunState) -> None:
    q = state.query or {}
    result.query.name = scenario.spark.query
    result.query.trigger = scenario.spark.trigger.kind
    result.query.final_state = q.get("state")
    result.query.exit_code = q.get("exit_code")
    result.query.error = q.get("error")
    result.query.kills = q.get("kills", 0)
    result.query.restarts = q.get("restarts", 0)
    result.query.error_class = faults.error_class(result.query.error)


def fill_figures(result: RunResult, run: RunView) -> None:
    """The run's figures (not checks): counts, latency, batches, lag, throughput, the producers against their
    rate, the source's and Spark's tasks, consumers, resources; and series.json, what the report draws."""
    s, rec, run_dir = run.scenario, run.rec, run.run_dir
    summary = rec.latency
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
    result.startup_steps = startup_steps(read_jsonl(run_dir / "timeline.jsonl"), run.progress)
    result.publish_delay_ms = summary.publish_delay.percentiles()  # type: ignore[assignment]
    warmup, duration = run.warmup_s, s.producers.duration_s
    if run.measured_from_ms is not None:
        result.warmup = {"s": warmup, "until": "caught_up" if run.warmup_end is not None else "fixed",
                         **({"ended": run.warmup_end.get("ended"), "reason": run.warmup_end.get("reason"),
                             "max_s": run.warmup_end.get("max_s"), "lag": run.warmup_end.get("lag"),
                             "band": run.warmup_end.get("band")} if run.warmup_end else {}),
                         "measured_from": run.measured_from_ms / 1000.0,
                         "events_delivered": summary.warmup_delivered,
                         "latency_ms": summary.warmup_latency.percentiles()}
    result.source = run.source
    tasks: list[dict] = []
    try:  # a report, not a check: an unreadable log leaves the verdict alone
        tasks = placement_tasks(run_dir, run.source_records)
        result.placement = placement_summary(tasks)
    except Exception as exc:  # noqa: BLE001
        result.placement = {"error": f"reading Spark's event log (spark/events/) failed: {exc!r}"}
    try:  # a report, not a check: the TCP proxy's records (Kafka with backend.proxy or a network fault)
        result.consumers = consumer_summary(read_connections(run_dir) or [], run.progress)
        if result.consumers:
            result.consumers["records"] = str(connections_file(run_dir))
        elif getattr(s.backend, "protocol", None) == "kafka":  # Event Hubs' Kafka endpoint, nothing recorded
            result.consumers = {"created": None, "unknown": (
                "Kafka consumers created: unknown (no connection records: only the project's emulator writes them, "
                "services/eventhubs/kafka-connections.jsonl; a namespace's Kafka endpoint cannot be watched)")}
    except Exception as exc:  # noqa: BLE001
        result.consumers = {"error": f"reading the connection records failed: {exc!r}"}
    result.resources = run.resources
    window = (run.t0, run.t0 + warmup + duration)  # the measured window: the footprint's and the machine's
    try:  # a figure, not a check: how much of the machine's CPU the harness took from what it measured
        amqp = s.backend.kind == "eventhubs" and getattr(s.backend, "protocol", "amqp") == "amqp"
        result.footprint = run_footprint(run_dir, *window, client="azure-eventhub" if amqp else None,
                                         floor=calibration.read(run_dir, calibration.eh_producers(s.backend.send))
                                         if amqp else None)
    except Exception as exc:  # noqa: BLE001
        result.footprint = {"ratio": None, "ok": None, "error": f"reading resources.jsonl failed: {exc!r}"}
    try:  # what processes outside the run took meanwhile: over the bound, performance checks are set aside
        result.machine = run_machine(run_dir, *window, s.checks.max_busy_share)
    except Exception as exc:  # noqa: BLE001
        result.machine = {"busy": None, "error": f"reading resources.jsonl failed: {exc!r}"}
    progress = run.progress
    result.batches = len({p.get("batchId") for p in progress})  # a batch re-run after a restart counts once
    steady_from = run.t0 + perf.steady["from_s"] if perf else (run.measured_from_ms or 0.0) / 1000.0
    result.batch_stats = batches = batch_stats([p for p in progress if "timestamp" in p
                                                and epoch_s(p["timestamp"]) >= steady_from])
    lag_samples = run.lag_samples
    result.lag_events = lag_summary(lag_series(lag_samples, progress))
    rate = run.rate
    result.throughput = {"produce_eps": run.acked_measured / duration if duration else 0.0,  # type: ignore[assignment]
                         "process_rps": batches["process_rps"],
                         "target_eps": (run.target_events - rate.cumulative(warmup)) / duration if duration else 0.0}
    accuracy, per_second = {}, []
    if run.fleet:
        per_second = run.fleet.per_second({m.directory: round(m.offset_ms / 1000.0) for m in run.clock_plan.machines
                                           if m.corrected and m.offset_ms})
        accuracy = rate_accuracy(per_second, rate, run.fleet.job.get("start_at", 0.0), warmup + duration,
                                 rec.produced)
        atomic.write_text(run_dir / "producers" / "per_second.json", json.dumps(per_second))
    result.producers = {**run.producers, **skew_section(run.producers), **accuracy}
    if run.clocks:
        result.producers["clocks"] = run.clocks
    try:  # what the report draws, not what the verdict stands on
        series = build_series(t0=run.t0, warmup_s=warmup, latency=summary, per_second=per_second,
                              progress=progress, lag_samples=lag_samples, tasks=tasks)
    except Exception as exc:  # noqa: BLE001
        series = {"error": f"building the time series failed: {exc!r}"}
    atomic.write_json(run_dir / "series.json", series)


def _versions() -> dict:
    import pyspark

    return {"pyspark": pyspark.__version__, "python": sys.version.split()[0]}
