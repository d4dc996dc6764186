"""The measuring step: a finished run's directory read once into its view (harness.analysis.runview) and every
figure and series made once (harness.analysis.figures), before anything is judged. The judge
(harness.verdict) is then a pure function of what this returns; `write_measured` is the one place the step's
own files are written (series.json, producers/per_second.json, and judge-error.txt when the run could not be
read).

Whatever goes wrong while reading (a malformed sink row, an unreadable file) still yields a measurement: the
figures computed before the problem, and the problem, which the judge turns into an `unjudged` verdict.
"""
from __future__ import annotations

import json
import re
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness import clocks
from harness.files import atomic
from harness.records import environment
from harness.analysis.changes import measure_changes
from harness.analysis.outages import measure_outages
from harness.analysis.figures import Drawn, fill_figures
from harness.analysis.runview import (RunView, Unjudgeable, read_faults, read_run, read_up_to, reading,
                                      rows_are_events)
from harness.analysis.spark_log import read_spark_log
from harness.analysis.state import read_state
from harness.faults.change import state_dir_at
from harness.config import Scenario
from harness.records.history import torn_tail
from harness.files.jsonl import read_jsonl, unreadable_in
from harness.oracles import run_oracle
from harness.records.placements import apply_placements, load_placements
from harness.queries import importable, resolve
from harness.records.result import RunResult
from harness.records.runstate import RunState
from harness.sinks import EVENT_COLUMNS, sink_part
from harness.sinks.parquet.files import missing_files
from harness.spark import checkpoint as ckpt
from harness.spark.state_reader import STATE_ORACLES


@dataclass
class Measured:
    """A run as measured: the result with its figures (no checks yet), the view the checkers judge (None when
    the run could not be read), what the report draws, and why the run cannot be judged when it cannot."""
    scenario: Scenario
    run_dir: Path
    state: RunState
    result: RunResult
    view: RunView | None = None
    drawn: Drawn | None = None
    problem: str | None = None  # why the run could not be read or measured: the unjudged reason
    trace: str | None = None  # ... and where (judge-error.txt)


def measure(scenario: Scenario, run_dir: Path, state: RunState | dict,
            clock_threshold_ms: float | None = None) -> Measured:
    """`clock_threshold_ms`: the clock skew between machines past which a producer machine's times are corrected
    (harness.clocks; default DEFAULT_THRESHOLD_MS)."""
    state = state if isinstance(state, RunState) else RunState.from_dict(state)
    result = RunResult(scenario=scenario.name, backend=scenario.backend.kind, verdict="unjudged",
                       run_dir=str(run_dir), duration_s=round(state.elapsed_s, 3),
                       traffic_s=scenario.producers.duration_s, backend_info=state.backend,
                       end_offsets={str(k): v for k, v in state.end_offsets.items()}, versions=_versions(),
                       environment=environment.read(run_dir))
    describe_query(result, scenario, state)
    result.unreadable = unreadable(run_dir)
    out = Measured(scenario, run_dir, state, result)
    try:
        if ":" in scenario.spark.query and state.scenario_dir and Path(state.scenario_dir).is_dir():
            importable(state.scenario_dir)  # a user's query module, where the run found it (a re-judge from elsewhere)
        query_def = resolve(scenario.spark.query)
        result.query.oracle = str(query_def.oracle)
        fault_facts = read_faults(run_dir, state.query)
        result.faults = fault_facts.records  # type: ignore[assignment]
        view = read_run(scenario, run_dir, state, query_def, fault_facts,
                        clocks.DEFAULT_THRESHOLD_MS if clock_threshold_ms is None else clock_threshold_ms)
        out.drawn = fill_figures(result, view)  # kept when what follows cannot be read
        if not state.interrupted:  # stopped from outside: what was measured, nothing more to judge
            read_judged_outputs(view)
            result.changes = view.changes
            result.outages = view.outages
        out.view = view
    except Exception as exc:  # noqa: BLE001 - the run still gets its result.json, saying why it is unjudged
        out.problem = str(exc) if isinstance(exc, Unjudgeable) else f"{type(exc).__name__}: {exc}"
        out.trace = traceback.format_exc()
    return out


def read_judged_outputs(view: RunView) -> None:
    """What the oracle, the state check and a soak's live checks judge, read into the view: a query's own oracle's
    outcome, its final state against the history's, the live evaluations."""
    run_dir = view.run_dir
    oracle = view.query_def.oracle
    view.changes = measure_changes(run_dir, view.faults.records, view.progress, view.query)
    view.outages = measure_outages(view.faults.records, view.progress, view.query, view.resource_samples,
                                   view.performance.recovery if view.performance else [],
                                   view.state.ended_at or time.time())
    if any(e.expect_log for e in view.faults.effects):  # harness.analysis.spark_log: judged by spark_logged
        view.spark_log = read_spark_log(run_dir)
    if view.scenario.soak is not None:
        view.live_checks = read_jsonl(run_dir / "live_checks.jsonl")
    wants_state = oracle in STATE_ORACLES and not view.faults.failed_as_expected
    if oracle == "events" and not wants_state:
        return
    acks = None
    if oracle != "events":
        with reading("reading the producers' history for the query's oracle"):
            acks = acked_frame(view)
        view.oracle_outcome = oracle_outcome(view, acks)
    if wants_state:
        view.state_read = read_state(run_dir, oracle, dict(view.scenario.spark.query_params),
                                     lambda meta: acks if acks is not None else acked_frame(view))
    for change in view.changes if oracle in STATE_ORACLES else []:  # judged also when phase B was refused
        if change.get("state_read_at") is not None:
            change["state"] = state_at_change(view, int(change["state_read_at"]), acks)


def state_at_change(view: RunView, batch: int, acks: pd.DataFrame | None) -> dict:
    """The state read at a change (harness.faults.change: what phase A committed last) against the state the
    history implies for the events that batch had read: those below its end offsets in the offset log."""
    ends = ckpt.offset_log_entry(view.run_dir / "checkpoint" / "offsets" / str(batch)).get(
        view.scenario.stream.name, {})

    def read_by_then(meta: dict) -> pd.DataFrame:
        return read_below(acks if acks is not None else acked_frame(view), ends)

    read = read_state(view.run_dir, view.query_def.oracle, dict(view.scenario.spark.query_params), read_by_then,
                      state_dir=state_dir_at(batch))
    outcome = read.get("outcome") or {}
    return {"batch": batch, "status": read["status"], "ok": outcome.get("ok") if outcome else None,
            "summary": outcome.get("summary") or read.get("detail"), "problems": outcome.get("problems", [])}


def acked_frame(view: RunView) -> pd.DataFrame:
    """The acked events (placements applied), on the reference clock: what an oracle computes its output from. A
    query that stopped with the failure a fault declared (a change Spark refused) is judged on what it had read:
    the events below its last commit's end offsets, as the events oracle judges it (runview.read_up_to)."""
    acks = apply_placements(clocks.acks_frame(view.run_dir / "producers", view.clock_plan),
                            load_placements(view.run_dir / "placements"))
    acks = acks[acks["error"] == ""]
    ends = read_up_to(view.scenario, view.run_dir, view.faults)
    return acks if ends is None else read_below(acks, ends)


def read_below(acks: pd.DataFrame, ends: dict) -> pd.DataFrame:
    """The events below `ends` ({partition: end offset} of a batch in the offset log): what the query had read."""
    limit = acks["partition"].map({int(p): int(o) for p, o in ends.items()}).fillna(-1)
    return acks[acks["offset"] < limit]


def oracle_outcome(view: RunView, acks: pd.DataFrame) -> dict:
    """What the query's own oracle returns for its output (result.json `oracle`), with where latency came from."""
    own = view.own_sink
    if view.faults.failed_as_expected and acks.empty:  # nothing read before the declared failure: nothing to judge
        return {"ok": None, "detail": "not judged: the query stopped with the failure a fault declared before it "
                                      "had committed a batch that read an event"}
    outcome = run_oracle(view.query_def.oracle, acks, view.run_dir, dict(view.scenario.spark.query_params),
                         sink=own)
    has_columns = own is not None and all(c in own.columns for c in EVENT_COLUMNS)
    sink = sink_part(view.scenario.spark.sink)
    if own is not None and sink.reads_output_after_run:  # e.g. the output topic
        outcome.setdefault("latency", sink.latency_source(own))
    elif own is not None:
        outcome.setdefault("latency", "measured: each row's commit_ms from the query's own sink" if has_columns else
                           f"not measured: read_sink gave no {', '.join(EVENT_COLUMNS)} per row")
    else:
        outcome.setdefault("latency", "measured: the sink's rows are events (commit time of their batch)"
                           if rows_are_events(view.run_dir / "sink") else
                           "not measured: the sink's rows are not one per event (no event id, partition, offset)")
    return outcome


def write_measured(measured: Measured) -> None:
    """The measuring step's files: series.json (what the report draws), producers/per_second.json (the producers'
    rate each second), and judge-error.txt (the traceback) when the run could not be read."""
    run_dir = measured.run_dir
    if measured.trace is not None:
        try:
            atomic.write_text(run_dir / "judge-error.txt", measured.trace)
        except OSError as exc:  # a full disk: said here, and result.json (if it can be written) says why
            print(f"error: writing {run_dir / 'judge-error.txt'} failed: {exc}", file=sys.stderr)
    drawn = measured.drawn
    if drawn is None:
        return
    if drawn.per_second is not None:
        atomic.write_text(run_dir / "producers" / "per_second.json", json.dumps(drawn.per_second))
    atomic.write_json(run_dir / "series.json", drawn.series)


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
    result.query.error_class = error_class(result.query.error)


def error_class(error: str | None) -> str | None:
    """Spark's error class as it prints it: '[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data ...'."""
    if not error:
        return None
    m = re.search(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", error)
    return m.group(1) if m else None


def _versions() -> dict:
    import pyspark

    return {"pyspark": pyspark.__version__, "python": sys.version.split()[0]}
