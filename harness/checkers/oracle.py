"""The query's oracle: what its output must hold, judged from the producers' history (harness.oracles).

The events oracle (the default: every acked event delivered once, where its ack said) is one oracle like the
others; a query declaring another (`window_counts`, or a user's `module:function`) is judged by that one, and the
per-event delivery rules do not apply to its output.
"""
from __future__ import annotations

from harness import clocks
from harness.check import Check
from harness.checkers.events import delivery_checks
from harness.checkers.view import OWN_SINK_EVENT_COLUMNS, RunView, reading, rows_are_events
from harness.oracles import run_oracle
from harness.placements import apply_placements, load_placements
from harness.sinks import sink_part


class EventsOracle:
    """Every acked event delivered once, where its ack said: the output is one row per event."""
    name = "events"
    per_event = True

    def __call__(self, run: RunView) -> list[Check]:
        return delivery_checks(run.rec, run.scenario.checks)


class OutputOracle:
    """A named oracle over the query's output; what it returns is kept whole (result.json `oracle`)."""
    per_event = False

    def __init__(self, name: str):
        self.name = name

    def __call__(self, run: RunView) -> list[Check]:
        with reading("reading the producers' history for the query's oracle"):
            acks = apply_placements(clocks.acks_frame(run.run_dir / "producers", run.clock_plan),
                                    load_placements(run.run_dir / "placements"))
        outcome = run_oracle(self.name, acks[acks["error"] == ""], run.run_dir, dict(run.scenario.spark.query_params),
                             sink=run.own_sink)
        sink = sink_part(run.scenario.spark.sink)
        if run.own_sink is not None and sink.reads_output_after_run:  # e.g. the output topic (harness.sinks)
            outcome.setdefault("latency", sink.latency_source(run.own_sink))
        elif run.own_sink is not None:
            outcome.setdefault("latency", "measured: each row's commit_ms from the query's own sink" if all(
                c in run.own_sink.columns for c in OWN_SINK_EVENT_COLUMNS) else
                f"not measured: read_sink gave no {', '.join(OWN_SINK_EVENT_COLUMNS)} per row")
        else:
            outcome.setdefault("latency", "measured: the sink's rows are events (commit time of their batch)"
                               if rows_are_events(run.run_dir / "sink") else
                               "not measured: the sink's rows are not one per event (no event id, partition, offset)")
        run.oracle_outcome = outcome
        return [Check(f"oracle_{self.name.split(':')[-1]}", bool(outcome.get("ok")), str(outcome.get("detail")))]


def oracle_for(name: str) -> EventsOracle | OutputOracle:
    return EventsOracle() if name == "events" else OutputOracle(name)


def oracle(run: RunView) -> list[Check]:
    return run.oracle(run)
