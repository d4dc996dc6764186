"""`harness bench startup`: the time from `harness run` to the first processed batch, by phase, with the broker
and the Spark driver started side by side against one after the other (the reference), in the same bench run.

Each run is a real `harness run steady` (embedded Kafka, local[2], a constant 3,000 events/s), alternately side
by side and sequential (the runner's internal HARNESS_SEQUENTIAL_START); once the first batch that read rows is
in progress.jsonl the run is stopped (SIGTERM: the runner stops everything and keeps what it recorded), since
nothing after it is start-up. The phases come from the run's timeline.jsonl (the runner's marks and the driver's
own, copied there with the times the driver took them) and progress.jsonl, as seconds since the launch:

  harness up        the `harness run` process imported, the scenario loaded, the run directory made (run_started)
  driver process    the query process started, its own imports done (driver_process)
  broker up         the broker answers (backend_started); stream created: the topic made (backend_ready)
  driver JVM up     the query process's JVM launched (driver_jvm_up); session ready (driver_session_ready)
  query started     writeStream.start() returned (driver_query_started); its first (empty) batch recorded: the
                    runner lets the producers start (query_started)
  first data batch  the end of the first batch that read rows (its progress: timestamp + triggerExecution); the
                    producers start 1.5 s after `query started`, and the trigger is 1 s, in both modes

Figures are the median of the runs each way; a 2-core machine shared with other work makes single runs noisy.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

from harness import atomic
from harness.bench import row
from harness.console import Console
from harness.jsonl import read_jsonl
from harness.runner import SEQUENTIAL_START_ENV
from harness.supervisor import Supervisor, wait_until

# (key, timeline event, label) in the order they happen when started side by side
MILESTONES = (
    ("harness_up", "run_started", "harness up (imports, scenario, run directory)"),
    ("driver_process", "driver_process", "driver process up (its imports)"),
    ("driver_jvm_up", "driver_jvm_up", "driver JVM up"),
    ("driver_session_ready", "driver_session_ready", "driver session ready"),
    ("broker_up", "backend_started", "broker up"),
    ("stream_created", "backend_ready", "stream created"),
    ("query_started", "driver_query_started", "query started (writeStream.start)"),
    ("first_batch_recorded", "query_started", "first (empty) batch recorded"),
)
MODES = ("side_by_side", "sequential")


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def first_data_batch_end(progress: list[dict]) -> float | None:
    """When the first batch that read rows ended (epoch s), from its progress record."""
    for p in progress:
        if p.get("numInputRows"):
            return _epoch(p["timestamp"]) + float(p.get("durationMs", {}).get("triggerExecution", 0)) / 1000.0
    return None


def phases(launched: float, timeline: list[dict], progress: list[dict]) -> dict[str, float]:
    """Seconds from the launch of `harness run` to each milestone it reached (the first time each mark appears:
    a restarted driver marks again)."""
    at: dict[str, float] = {}
    for e in timeline:
        at.setdefault(e["event"], float(e["t"]))
    out = {key: at[event] - launched for key, event, _ in MILESTONES if event in at}
    end = first_data_batch_end(progress)
    if end is not None:
        out["first_data_batch"] = end - launched
    return out


def one_run(work: Path, sup: Supervisor, mode: str, n: int, timeout: float) -> dict:
    """A `harness run steady` from its launch to its first data batch; its phases."""
    run_dir = work / f"{n:02d}-{mode}"
    env = dict(os.environ, CI="1")  # quiet progress
    env.pop(SEQUENTIAL_START_ENV, None)
    if mode == "sequential":
        env[SEQUENTIAL_START_ENV] = "1"
    launched = time.time()
    child = sup.spawn(f"harness-run-{mode}", [sys.executable, "-m", "harness", "run", "steady", "--out", str(run_dir),
                                              "--set", "producers.duration_s=60"],
                      log_path=work / f"{n:02d}-{mode}.log", env=env)
    try:
        wait_until(lambda: first_data_batch_end(read_jsonl(run_dir / "progress.jsonl")) is not None, timeout, 0.2,
                   gone=lambda: None if child.alive() else RuntimeError(
                       f"harness run ({mode}) exited with {child.proc.returncode} before its first data batch "
                       f"(see {work / f'{n:02d}-{mode}.log'})"),
                   timeout_message=lambda: f"harness run ({mode}): no data batch {timeout:.0f} s after the launch")
    finally:
        child.stop_signal = signal.SIGTERM
        sup.stop(child, timeout=60)
    return {"mode": mode, "launched": launched,
            "phases": phases(launched, read_jsonl(run_dir / "timeline.jsonl"),
                             read_jsonl(run_dir / "progress.jsonl"))}


def _median(runs: list[dict], mode: str, key: str) -> float | None:
    values = [r["phases"][key] for r in runs if r["mode"] == mode and key in r["phases"]]
    return statistics.median(values) if values else None


def summarise(runs: list[dict]) -> tuple[list[dict], dict]:
    """Table rows (side by side against sequential, median seconds since the launch) and the medians."""
    keys = [k for k, _, _ in MILESTONES] + ["first_data_batch"]
    labels = {k: label for k, _, label in MILESTONES} | {"first_data_batch": "first data batch processed"}
    medians = {mode: {k: _median(runs, mode, k) for k in keys} for mode in MODES}
    side, seq = medians["side_by_side"], medians["sequential"]
    rows = []
    for key in keys:
        if side[key] is None:
            continue
        goal = ok = None
        if key in ("first_batch_recorded", "first_data_batch") and seq[key] is not None:
            goal, ok = "< 1 (side by side sooner)", side[key] < seq[key]
        rows.append(row(f"{labels[key]}, s after launch", side[key], "s", reference=seq[key],
                        reference_name="sequential", goal=goal, ok=ok))
    if side["first_data_batch"] is not None and seq["first_data_batch"] is not None:
        rows.append(row("saving to the first data batch", seq["first_data_batch"] - side["first_data_batch"], "s"))
    return rows, medians


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    pairs = 1 if quick else 2
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        for i in range(pairs * 2):
            mode = MODES[i % 2]
            with console.step(f"harness run {i + 1}/{pairs * 2}, {mode.replace('_', ' ')}"):
                r = one_run(work, sup, mode, i, timeout=300)
            runs.append(r)
            console.info("  " + "  ".join(f"{k} {v:.1f}s" for k, v in r["phases"].items()))
    rows, medians = summarise(runs)
    result = {"rows": rows, "medians_s": medians, "runs": runs, "scenario": "steady", "quick": quick,
              "statistic": "median of the runs each way, seconds since `harness run` was launched"}
    if json_path:
        atomic.write_json(json_path, result)
    return result


if __name__ == "__main__":  # a quick look without the suite's table
    print(json.dumps(run_bench(None, quick=True), indent=2))
