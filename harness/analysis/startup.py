"""The start-up, step by step, from the run's own records: the runner's and the driver's marks (timeline.jsonl)
and Spark's progress (progress.jsonl). Why: "the first data batch came 15 s after `harness run`" says nothing
about where the time went; the report's start-up section says which step took what, and why the first batch with
data comes seconds after the first batch (the query reads from the latest offsets, so the producers start only
once its first batch has fixed them; then the next trigger; then that batch itself, slow because it is the first
to run tasks: Kafka consumers created, code generated, parquet writers opened, the JIT cold).

Times are seconds since `run_started` (the runner's first mark, once its imports and the scenario are done).
"""
from __future__ import annotations

import statistics
from typing import Any

from harness.analysis.progress import commit_s, epoch_s

# (key, timeline event, what it is) on the driver's way to its query; the broker's start runs beside it
DRIVER_STEPS = (
    ("driver_process", "driver_process", "driver process up (its imports)"),
    ("driver_jvm_up", "driver_jvm_up", "driver JVM up"),
    ("driver_session_ready", "driver_session_ready", "Spark session ready"),
    ("driver_query_started", "driver_query_started", "query started (writeStream.start)"),
)
BROKER_STEPS = (
    ("backend_started", "backend_started", "broker up"),
    ("backend_ready", "backend_ready", "stream created"),
)
# once the driver's session is ready the producer processes start beside the query and wait, ready, for the
# runner's go
PRODUCER_STEPS = (
    ("producers_launched", "producers_launched", "producer processes started"),
    ("producers_ready", "producers_ready", "producers ready (client connected, waiting for the go)"),
)
BESIDE = {key for key, _, _ in BROKER_STEPS + PRODUCER_STEPS}  # the report's "beside it": not the driver's path
STEADY_SKIP = 5  # batches with data left out of the "steady batch" median: the JIT is still warming there


def _first_times(timeline: list[dict]) -> dict[str, dict]:
    at: dict[str, dict] = {}
    for e in timeline:
        at.setdefault(e.get("event", ""), e)
    return at


def startup_steps(timeline: list[dict], progress: list[dict]) -> dict[str, Any]:
    """{"steps": [{"key", "label", "at_s", "took_s"}], "first_data_gap": {...}} or {} when the run has no start
    mark. `took_s` is since the step before it on the same path (the driver's, or the broker's beside it)."""
    marks = _first_times(timeline)
    if "run_started" not in marks:
        return {}
    origin = float(marks["run_started"]["t"])
    steps: list[dict] = []

    def add(key: str, label: str, at: float | None, after: float | None) -> float | None:
        if at is None:
            return after
        steps.append({"key": key, "label": label, "at_s": round(at - origin, 3),
                      "took_s": round(at - (origin if after is None else after), 3)})
        return at

    prev = None
    for key, event, label in BROKER_STEPS:
        prev = add(key, label, float(marks[event]["t"]) if event in marks else None, prev)
    broker_ready = prev
    for key, event, label in PRODUCER_STEPS:
        prev = add(key, label, float(marks[event]["t"]) if event in marks else None, prev)
    prev = None
    for key, event, label in DRIVER_STEPS:
        prev = add(key, label, float(marks[event]["t"]) if event in marks else None, prev)
    prev = max((p for p in (prev, broker_ready) if p is not None), default=None)  # the query needs both
    data = next((p for p in progress if p.get("numInputRows")), None)
    # once/availableNow start after the traffic: their first batch has the data, there is no gap to explain
    first = progress[0] if progress and not progress[0].get("numInputRows") else None
    first_commit = commit_s(first) if first else None
    query_started = prev
    # the runner lets the producers start once the query's starting offsets are fixed (harness.spark.process)
    fixed = float(marks["query_started"]["t"]) if first is not None and "query_started" in marks else None
    prev = add("offsets_fixed", "starting offsets fixed (the runner saw it)", fixed, prev)
    add("first_batch", "first batch committed (no data)", first_commit, query_started)
    producers = _producers_start(marks) if first is not None else None
    prev = add("producers_start", "producers started", producers, prev)
    gap: dict[str, Any] = {}
    if data is not None:
        data_start, data_commit = epoch_s(data["timestamp"]), commit_s(data)
        prev = add("first_data_batch_start", "first batch with data started (its trigger)", data_start, prev)
        add("first_data_batch", "first batch with data committed", data_commit, prev)
        durations = data.get("durationMs") or {}
        later = [p["durationMs"]["triggerExecution"] / 1000.0 for p in progress
                 if p.get("numInputRows") and (p.get("durationMs") or {}).get("triggerExecution") is not None]
        later = later[STEADY_SKIP:] if len(later) >= STEADY_SKIP + 3 else []
        gap = {"first_batch_to_first_data_s": round(data_commit - first_commit, 3) if first_commit else None,
               "producer_lead_s": round(producers - first_commit, 3) if producers and first_commit else None,
               "trigger_wait_s": round(data_start - producers, 3) if producers else None,
               "first_data_batch_s": round(durations.get("triggerExecution", 0) / 1000.0, 3),
               "first_data_batch_add_s": round(durations.get("addBatch", 0) / 1000.0, 3),
               "first_data_batch_rows": int(data.get("numInputRows") or 0),
               "later_batch_p50_s": round(statistics.median(later), 3) if later else None}
    return {"steps": steps, "first_data_gap": gap}


def _producers_start(marks: dict[str, dict]) -> float | None:
    """When the producers began sending: the warm-up's start when there is one, else the traffic's."""
    for event in ("warmup_start", "traffic_start"):
        if event in marks:
            e = marks[event]
            return float(e.get("at", e["t"]))
    return None


def describe(startup: dict[str, Any]) -> list[str]:
    """The steps in words for the report's start-up section; [] without them."""
    steps = startup.get("steps") or []
    if not steps:
        return []
    by_key = {s["key"]: s for s in steps}
    driver = [s for s in steps if s["key"].startswith("driver_")]
    broker = [s for s in steps if s["key"] in BESIDE]
    lines = ["Start-up step by step (seconds after `harness run` started, from the run's timeline; each step's own "
             "time in brackets): driver: " + ", ".join(f"{s['label']} {s['at_s']:.1f} (+{s['took_s']:.1f})"
                                                         for s in driver)
             + ("; beside it, " + ", ".join(f"{s['label']} {s['at_s']:.1f} (+{s['took_s']:.1f})" for s in broker)
                if broker else "") + "."]
    rest = sorted((s for s in steps if s not in driver and s not in broker), key=lambda s: s["at_s"])
    if rest:
        lines.append("Then: " + ", ".join(f"{s['label']} {s['at_s']:.1f} (+{s['took_s']:.1f})" for s in rest) + ".")
    gap = startup.get("first_data_gap") or {}
    if gap.get("first_batch_to_first_data_s") is not None and "first_batch" in by_key:
        lead, wait = gap.get("producer_lead_s"), gap.get("trigger_wait_s")
        later = gap.get("later_batch_p50_s")
        lines.append(
            f"Why the first batch with data came {gap['first_batch_to_first_data_s']:.1f} s after the first batch: "
            + (f"the producers started {abs(lead):.1f} s {'before' if lead < 0 else 'after'} it (once the query's "
               "starting offsets were fixed: it reads from the latest offsets, so nothing may be sent before"
               + ("; their processes started once the driver's session was ready and waited, ready, for that moment" if
                  "producers_ready" in by_key else "; plus the producer processes' own start-up")
               + "), " if lead is not None else "")
            + (f"the batch began {wait:.1f} s after the first events (its trigger, or the batch before it "
               "still running), " if wait is not None else "")
            + f"and the batch itself took {gap['first_data_batch_s']:.1f} s ({gap['first_data_batch_rows']:,} rows; "
            f"writing them {gap['first_data_batch_add_s']:.1f} s)"
            + (f" against a median {later:.1f} s for the batches after the fifth" if later is not None else "")
            + ": it is the first to run tasks (Kafka consumers created, code generated, parquet writers opened) "
              "while the JIT is cold.")
    return lines
