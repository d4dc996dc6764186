"""The run's verdict, from the run directory alone: the producers' history, the sink, the faults' declared
effects, the query's own record and what the runner found (`run_state.json`). Builds the one typed result.

Whatever goes wrong while judging (a malformed sink row, a missing file) still yields a result: `unjudged`, with
the reason, and every figure computed before the problem.
"""
from __future__ import annotations

import json
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from harness import atomic, clocks
from harness.checker import Check, Expectations, IncrementalChecker, evaluate
from harness.placements import apply_placements, load_placements
from harness.config import Scenario
from harness.effects import FAULT_PRODUCER_BASE, Effect
from harness.faults.nemesis import recorded_faults
from harness.jsonl import read_jsonl
from harness.queries import resolve
from harness.result import RunResult
from harness.soak.checks import soak_checks
from harness.spark import checkpoint as ckpt
from producers.fleet import ProducerFleet
from producers.rates import make_rate, warmed_up
from harness.analysis.consumers import consumer_summary, read_connections
from harness.analysis.progress import epoch_s
from harness.analysis.lag import lag_series, lag_summary
from harness.analysis.source_tasks import read_tasks, source_summary
from harness.analysis.spark_tasks import placement_summary, placement_tasks
from harness.analysis.resources import load as load_resources, summarize as summarize_resources
from harness.analysis.series import build_series
from harness.analysis.progress import batch_stats, parse_offsets
from harness.analysis.producers import rate_accuracy, skew_section

SEND_FAILURE_GRACE_MS = 60_000.0  # a send that failed while a fault was active may report up to this much later
EVENT_RULES = {"no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries", "order", "drained"}


def judge(scenario: Scenario, run_dir: Path, state: dict) -> RunResult:
    result = RunResult(scenario=scenario.name, backend=scenario.backend.kind, verdict="unjudged",
                       run_dir=str(run_dir), duration_s=round(state.get("elapsed_s", 0.0), 3),
                       traffic_s=scenario.producers.duration_s, backend_info=state.get("backend", {}),
                       end_offsets={str(k): v for k, v in (state.get("end_offsets") or {}).items()},
                       versions=_versions())
    result.query.name = scenario.spark.query
    result.query.trigger = scenario.spark.trigger.kind
    try:
        _judge(scenario, run_dir, state, result)
        result.verdict = "pass" if all(c.ok for c in result.checks) else "fail"
    except Exception as exc:  # noqa: BLE001 - the run still gets its result.json, saying why it is unjudged
        result.verdict = "unjudged"
        result.unjudged_reason = str(exc) if isinstance(exc, Unjudgeable) else f"{type(exc).__name__}: {exc}"
        (run_dir / "judge-error.txt").write_text(traceback.format_exc())
        if state.get("error"):  # what went wrong with the run itself is still said
            result.checks = [Check("completed", False, state["error"]).as_dict()]  # type: ignore[list-item]
    return result


class Unjudgeable(Exception):
    """What could not be read or reconciled, and why: the result's unjudged_reason."""


@contextmanager
def _reading(what: str):
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - named for the reader of result.json
        raise Unjudgeable(f"{what} failed: {type(exc).__name__}: {exc}") from exc


def _judge(scenario: Scenario, run_dir: Path, state: dict, result: RunResult) -> None:
    query_def = resolve(scenario.spark.query)
    result.query.oracle = str(query_def.oracle)
    q = state.get("query") or {}
    result.query.final_state = q.get("state")
    result.query.exit_code = q.get("exit_code")
    result.query.error = q.get("error")
    result.query.kills = q.get("kills", 0)
    result.query.restarts = q.get("restarts", 0)
    if result.query.error:
        result.query.error_class = _error_class(result.query.error)

    faults = recorded_faults(run_dir)
    result.faults = faults  # type: ignore[assignment]
    effects = [Effect.from_dict(f["effect"]) for f in faults if f["injected_at"] is not None]
    expected_failures = sorted({e.failure for e in effects if e.failure})
    failed_as_expected = bool(expected_failures) and q.get("state") == "failed" and any(
        cls in (result.query.error or "") for cls in expected_failures)

    expected = Expectations(
        loss=[r for e in effects for r in e.loss],
        failure_windows_ms=[((f.get("inject_started_at") or f["injected_at"]) * 1000.0, (f["healed_at"] or state.get("ended_at", 0.0)) * 1000.0
                             + SEND_FAILURE_GRACE_MS) for f in faults
                            if f["injected_at"] is not None and f["effect"].get("send_failures")],
        generations_ms=[e.new_generation_ms for e in effects if e.new_generation_ms is not None],
        read_up_to=({int(p): o for p, o in ckpt.committed(run_dir / "checkpoint").get(scenario.stream.name,
                                                                                       {}).items()}
                    if failed_as_expected else None),
    )

    if state.get("positions_error"):
        raise Unjudgeable(f"the events' positions could not be read back from the service (their sends reported "
                          f"none): {state['positions_error']}")
    fleet = ProducerFleet.read(run_dir / "producers")
    producers = fleet.merged_summary() if fleet else {}
    warmup, duration = scenario.producers.warmup_s, scenario.producers.duration_s
    rate = warmed_up(make_rate(scenario.producers.rate), warmup)
    target = rate.cumulative(warmup + duration)
    # the measured window starts after the warm-up: latency and throughput are its events' only
    measured_from_ms = (float(fleet.job.get("start_at", 0.0)) + warmup) * 1000.0 if fleet and warmup else None
    progress = read_jsonl(run_dir / "progress.jsonl")
    stamps = [epoch_s(p["timestamp"]) for p in progress if "timestamp" in p]
    t0 = float(fleet.job.get("start_at", 0.0)) if fleet else (stamps[0] if stamps else 0.0)
    with IncrementalChecker() as checker:  # out of core: a DuckDB file in a temporary directory
        with _reading("reading the producers' history (producers/acks-*.arrows, or acks-*.csv of older runs)"):
            clock_plan = clocks.plan(run_dir / "producers", float(state.get("clock_threshold_ms")
                                                                  or clocks.DEFAULT_THRESHOLD_MS))
            # every machine's files (subdirectories gathered from producer machines), on the reference clock
            checker.add_acks(clocks.corrected_batches(run_dir / "producers", clock_plan))
            checker.set_placements(load_placements(run_dir / "placements"))
        own_sink = None
        if query_def.read_sink is not None:  # a query that owns its sink (foreachBatch) says how to read it
            with _reading("reading the query's own sink (its read_sink)"):
                own_sink = _read_own_sink(query_def, run_dir, scenario, checker)
        elif query_def.oracle == "events" or _rows_are_events(run_dir / "sink"):
            # an output judged by a user's oracle that still has one row per event (an event id, its partition
            # and offset) gives the checker its commit times: latency is measured as for the events oracle
            with _reading("reading the sink (the files its _spark_metadata log lists)"):
                checker.add_sink(run_dir / "sink")
        with _reading("reconciling the history with the sink"):
            rec = checker.reconcile(expected, measured_from_ms=measured_from_ms, t0=t0)
            # events a fault wrote itself (producer index >= FAULT_PRODUCER_BASE) are history, not the processes'
            process_rows = checker.ack_count(producer_below=FAULT_PRODUCER_BASE)
            acked = rec.acked if measured_from_ms is None else \
                checker.ack_count(ok_only=True, intended_from_ms=measured_from_ms)
    if query_def.oracle != "events":  # the output is not one row per event (its oracle judges it): no event
        rec.lost = rec.expected_lost = rec.unread = 0  # is lost for want of a row of its own
        rec.lost_by_partition, rec.expected_lost_by_partition = {}, {}
    summary = rec.latency
    latency = summary.latency.percentiles()
    result.latency_windows = summary.windows

    counts = rec.counts()
    counts.update(pacer_skipped=producers.get("pacer_skipped", 0), unacked_at_exit=producers.get("unacked_at_exit", 0))
    result.counts = counts  # type: ignore[assignment]
    result.lost_by_partition = {str(k): v for k, v in rec.lost_by_partition.items()}
    result.expected_lost_by_partition = {str(k): v for k, v in rec.expected_lost_by_partition.items()}
    result.latency_ms = latency  # type: ignore[assignment]
    result.publish_delay_ms = summary.publish_delay.percentiles()  # type: ignore[assignment]
    if measured_from_ms is not None:
        result.warmup = {"s": warmup, "measured_from": measured_from_ms / 1000.0,
                         "events_delivered": summary.warmup_delivered,
                         "latency_ms": summary.warmup_latency.percentiles()}

    drained = bool(state.get("drained"))
    checks = evaluate(rec, scenario.checks, target_events=target, latency=latency,
                      drained=drained or failed_as_expected,
                      drain_detail=(state.get("drain_detail", "not reached") if not failed_as_expected else
                                    "not drained: the query stopped with the failure a fault declared"),
                      pacer_skipped=counts["pacer_skipped"], unacked_at_exit=counts["unacked_at_exit"])
    if query_def.oracle != "events":
        checks = [c for c in checks if c.name not in EVENT_RULES - {"drained"}]
        with _reading("reading the producers' history for the query's oracle"):
            acks = apply_placements(_acks_frame(run_dir, clock_plan), load_placements(run_dir / "placements"))
        checks += _oracle_checks(query_def, acks, run_dir, scenario, result, own_sink)
    if state.get("error") and not failed_as_expected:
        checks.insert(0, Check("completed", False, state["error"]))
    if fleet:
        checks.append(Check("producers_reported", producers["reported"] == producers["processes"]
                            and producers["sent"] == process_rows,
                            f"{producers['reported']}/{producers['processes']} producer summaries; "
                            f"{producers['sent']} sent vs {process_rows} rows in the producers' ack logs"
                            + (f" (+{rec.produced - process_rows} written by faults)"
                               if rec.produced > process_rows else "")))
    clock_section = _clock_section(clock_plan, run_dir, query_def, checks)
    checks += _fault_checks(faults, state, expected_failures, result.query.error, q.get("state"))
    checks += _batch_cap_check(scenario, progress)
    with _reading("reading the source's task records (source-metrics/)"):
        source_records = read_tasks(run_dir)
        result.source = source_summary(source_records, progress, scenario.stream.name)
    tasks: list[dict] = []
    try:  # a report, not a check: an unreadable log leaves the verdict alone
        tasks = placement_tasks(run_dir, source_records)
        result.placement = placement_summary(tasks)
    except Exception as exc:  # noqa: BLE001
        result.placement = {"error": f"reading Spark's event log (spark/events/) failed: {exc!r}"}
    try:  # a report, not a check: the TCP proxy's records (Kafka with backend.proxy or a network fault)
        result.consumers = consumer_summary(read_connections(run_dir) or [], progress)
    except Exception as exc:  # noqa: BLE001
        result.consumers = {"error": f"reading the proxy's connection records failed: {exc!r}"}
    checks += _source_checks(effects, result.source,
                             {} if scenario.fail_on_data_loss else rec.expected_lost_by_partition,
                             receiver_cache=scenario.source_option("harness.receiverCache", "true").lower() != "false")
    soak = scenario.soak
    try:  # a report for every run; judged (leaks, disk) for a soak
        result.resources = summarize_resources(
            load_resources(run_dir), t0=state.get("traffic_start"),
            **({"after_s": soak.leak_after_s, "max_growth_mb_per_h": soak.leak_mb_per_h} if soak else {}))
    except Exception as exc:  # noqa: BLE001
        result.resources = {"error": f"reading resources.jsonl failed: {exc!r}"}
    checks += soak_checks(scenario, run_dir, state, result.resources)
    result.checks = [c.as_dict() for c in checks]  # type: ignore[misc]

    result.batches = len({p.get("batchId") for p in progress})  # a batch re-run after a restart counts once
    result.batch_stats = batches = batch_stats(progress if measured_from_ms is None else
                                               [p for p in progress if "timestamp" in p
                                                and epoch_s(p["timestamp"]) >= measured_from_ms / 1000.0])
    lag_samples = read_jsonl(run_dir / "lag.jsonl")
    result.lag_events = lag_summary(lag_series(lag_samples, progress))
    result.throughput = {"produce_eps": acked / duration if duration else 0.0,  # type: ignore[assignment]
                         "process_rps": batches["process_rps"],
                         "target_eps": (target - rate.cumulative(warmup)) / duration if duration else 0.0}
    accuracy, per_second = {}, []
    if fleet:
        per_second = fleet.per_second({m.directory: round(m.offset_ms / 1000.0) for m in clock_plan.machines
                                       if m.corrected and m.offset_ms})
        accuracy = rate_accuracy(per_second, rate, fleet.job.get("start_at", 0.0), warmup + duration,
                                 rec.produced)
        (run_dir / "producers" / "per_second.json").write_text(json.dumps(per_second))
    result.producers = {**producers, **skew_section(producers), **accuracy}
    if clock_section:
        result.producers["clocks"] = clock_section
    try:  # what the report draws, not what the verdict stands on
        series = build_series(t0=t0, warmup_s=warmup, latency=summary, per_second=per_second,
                              progress=progress, lag_samples=lag_samples, tasks=tasks)
    except Exception as exc:  # noqa: BLE001
        series = {"error": f"building the time series failed: {exc!r}"}
    atomic.write_json(run_dir / "series.json", series)


def _acks_frame(run_dir: Path, clock_plan: clocks.ClockPlan) -> pd.DataFrame:
    """The whole history as history.load_acks gives it, from every machine's directory, on the reference clock."""
    import pyarrow as pa

    from harness.history import ACK_SCHEMA

    acks = pa.Table.from_batches(list(clocks.corrected_batches(run_dir / "producers", clock_plan)),
                                 schema=ACK_SCHEMA).to_pandas()
    acks["error"] = acks["error"].astype("string")
    acks["produce_ms"] = acks["ack_ms"] - acks["latency_us"] / 1000.0
    return acks


def _clock_section(clock_plan: clocks.ClockPlan, run_dir: Path, query_def, checks: list[Check]) -> dict | None:
    """Producers on other machines (harness.clocks): per machine the measured offset and what was corrected;
    negative latencies counted from the sink (the checker's histogram would floor them at 1 µs unseen). When they
    cannot be explained by a measured offset the latency check is marked not judged (failed, with the reason)."""
    if not any(m.directory != "." or m.samples for m in clock_plan.machines):
        return None  # every producer ran here, on the reference clock
    if query_def.oracle == "events" and query_def.read_sink is None:
        clocks.count_negative_latencies(run_dir / "sink", clock_plan)
    section = clocks.section(clock_plan)
    if not section["latency_judged"]:
        for i, c in enumerate(checks):
            if c.name == "latency_p99":
                checks[i] = Check("latency_p99", False, f"not judged: {section['latency_not_judged_reason']}")
    return section


def _source_checks(effects: list[Effect], source: dict, expected_lost: dict[int, int],
                   receiver_cache: bool = True) -> list[Check]:
    """What faults declared the source must have seen (a steal: receivers recreated), counted by its tasks; and
    the gaps a source that reports them (Event Hubs) skipped under failOnDataLoss=false, against the declared
    loss (`expected_lost`, empty under true: then the query fails instead of skipping). Where the stream stayed
    around the gap (aged out) the source must report it exactly; where it went away (a deleted hub) the source
    cannot know how far it reached beyond its last look: then it may report less, never more. With the receiver
    cache off (harness.receiverCache=false) no task may have reused a receiver."""
    out = []
    lossy = [e for e in effects if e.loss]
    if source and "lost_ranges" in source and (source["lost_ranges"] or expected_lost) and lossy:
        skipped: dict[int, int] = {}
        for part, lo, hi in source["lost_ranges"]:
            skipped[int(part)] = skipped.get(int(part), 0) + int(hi) - int(lo)
        declared = {p: n for p, n in expected_lost.items() if n}
        if all(e.gap_visible for e in lossy):
            ok, rule = skipped == declared, "equal"
        else:
            ok, rule = all(n <= declared.get(p, 0) for p, n in skipped.items()), "at most"
        out.append(Check("source_reported_gaps", ok,
                         f"the source reported skipping {skipped or 'nothing'}; must be {rule} the faults' declared "
                         f"loss not delivered: {declared or 'nothing'}"))
    wanted: dict[str, int] = {}
    for effect in effects:
        for name, n in effect.expect_source.items():
            wanted[name] = wanted.get(name, 0) + n
    totals = (source or {}).get("totals", {})
    if source and not receiver_cache:
        out.append(Check("receivers_not_cached", totals.get("reused", 0) == 0
                         and totals.get("created", 0) >= source.get("tasks", 0),
                         f"harness.receiverCache=false: {totals.get('created', 0)} receivers created for "
                         f"{source.get('tasks', 0)} tasks, {totals.get('reused', 0)} reused (must be 0)"))
    return out + [Check(f"source_saw_{name}", totals.get(name, 0) >= n,
                        f"the source's tasks counted {totals.get(name, 0)} {name} (the faults make at least {n} "
                        f"expected)") for name, n in sorted(wanted.items())]


def _fault_checks(faults: list[dict], state: dict, expected_failures: list[str], error: str | None,
                  final_state: str | None) -> list[Check]:
    out = []
    if faults or state.get("fault_errors"):
        problems = [f"{f['kind']} #{f['n']}: {e}" for f in faults for e in f["errors"]]
        problems += state.get("fault_errors", [])
        unhealed = [f"{f['kind']} #{f['n']}" for f in faults if f["injected_at"] and not f["healed_at"]]
        out.append(Check("faults_applied", not problems and not unhealed,
                         f"{len(faults)} injections, all applied and healed" if not problems and not unhealed else
                         "; ".join(problems + [f"{u} never healed" for u in unhealed])))
    if expected_failures:
        ok = final_state == "failed" and any(cls in (error or "") for cls in expected_failures)
        got = f"failed with {_error_class(error) or (error or '')[:300]!r}" if final_state == "failed" else \
            f"did not fail (final state {final_state!r})"
        out.append(Check("expected_failure", ok, f"expected the query to fail with {' or '.join(expected_failures)};"
                                                 f" it {got}"))
    return out


def _batch_cap_check(scenario: Scenario, progress: list[dict]) -> list[Check]:
    """The source's per-trigger cap (maxOffsetsPerTrigger, maxEventsPerTrigger) bounds every batch (Trigger.Once
    ignores it). Spark's Kafka source splits the cap over the partitions by backlog and rounds a share below one
    record up to one, so a batch may read up to (partitions read - 1) more; the Event Hubs source's split is exact."""
    name = scenario.backend.batch_cap_option
    cap = next((v for k, v in scenario.spark.source_options.items() if k.lower() == name.lower()), None)
    if cap is None or scenario.spark.trigger.kind == "once":
        return []
    cap = int(cap)
    data = [p for p in progress if p.get("numInputRows", 0) > 0]
    slack = (lambda p: 0) if scenario.backend.batch_cap_exact else (lambda p: max(_partitions_read(p), 1) - 1)
    over = [p.get("batchId") for p in data if p["numInputRows"] > cap + slack(p)]
    largest = max((p["numInputRows"] for p in data), default=0)
    return [Check("batch_cap", not over, f"{len(data)} batches read rows, largest {largest} rows ({name} {cap})"
                  + (f"; batches over the cap: {over[:20]}" if over else ""))]


def _partitions_read(progress: dict) -> int:
    """Partitions a batch advanced (its sources' start and end offsets; a first batch has no start)."""
    n = 0
    for source in progress.get("sources") or []:
        start, end = parse_offsets(source.get("startOffset")), parse_offsets(source.get("endOffset"))
        for stream, parts in end.items():
            if not isinstance(parts, dict):
                continue
            before = start.get(stream) if isinstance(start.get(stream), dict) else {}
            n += sum(1 for p, off in parts.items() if int(off) > int(before.get(p, 0)))
    return n


OWN_SINK_EVENT_COLUMNS = ("producer", "seq", "partition", "offset", "commit_ms")


def _rows_are_events(sink_dir: Path) -> bool:
    """Whether the Parquet sink's files have the columns of one row per event (producer, seq, partition, offset)."""
    import pyarrow.parquet as pq

    from harness.sink import _local, batch_log

    files = [f for _, _, fs in batch_log(sink_dir) for f in fs]
    if not files:
        return False
    names = set(pq.read_schema(_local(files[0])).names)
    return all(c in names for c in OWN_SINK_EVENT_COLUMNS[:4])


def _read_own_sink(query_def, run_dir: Path, scenario: Scenario, checker: IncrementalChecker) -> pd.DataFrame:
    """What a foreachBatch query's own reader returns; with the event columns and a commit time per row the
    checker takes its rows (in commit order) and measures latency from them, as from the Parquet sink's log."""
    frame = query_def.read_sink(run_dir / "sink", dict(scenario.spark.query_params))
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{scenario.spark.query}.read_sink returned {type(frame).__name__}, not a pandas DataFrame")
    if all(c in frame.columns for c in OWN_SINK_EVENT_COLUMNS):
        checker.store.add_sink_frame(frame.sort_values("commit_ms", kind="stable"))
    elif query_def.oracle == "events":
        raise ValueError(f"the events oracle needs the columns {', '.join(OWN_SINK_EVENT_COLUMNS)} from "
                         f"read_sink (it returned {list(frame.columns)})")
    return frame


def _oracle_checks(query_def, acks: pd.DataFrame, run_dir: Path, scenario: Scenario, result: RunResult,
                   own_sink: pd.DataFrame | None = None) -> list[Check]:
    from harness.oracles import run_oracle

    outcome = run_oracle(query_def.oracle, acks[acks["error"] == ""], run_dir, dict(scenario.spark.query_params),
                         sink=own_sink)
    if own_sink is not None:
        outcome.setdefault("latency", "measured: each row's commit_ms from the query's own sink" if all(
            c in own_sink.columns for c in OWN_SINK_EVENT_COLUMNS) else
            f"not measured: read_sink gave no {', '.join(OWN_SINK_EVENT_COLUMNS)} per row")
    else:
        outcome.setdefault("latency", "measured: the sink's rows are events (commit time of their batch)"
                           if _rows_are_events(run_dir / "sink") else
                           "not measured: the sink's rows are not one per event (no event id, partition, offset)")
    result.oracle = outcome
    return [Check(f"oracle_{query_def.oracle.split(':')[-1]}", bool(outcome.get("ok")), str(outcome.get("detail")))]


def _error_class(error: str | None) -> str | None:
    """Spark's error class as it prints it: '[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data ...'."""
    if not error:
        return None
    import re

    m = re.search(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", error)
    return m.group(1) if m else None


def _versions() -> dict:
    import pyspark

    return {"pyspark": pyspark.__version__, "python": sys.version.split()[0]}
