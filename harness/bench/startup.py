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
  query started     writeStream.start() returned (driver_query_started); its starting offsets fixed (Kafka's
                    source wrote them to the checkpoint, or the first batch was recorded): the runner lets the
                    producers start (query_started)
  producers ready   the producer processes, started once the driver's session is ready, connected and waiting
                    for the go (producers_ready)
  first data batch  the end of the first batch that read rows (its progress: timestamp + triggerExecution); the
                    producers start a moment (0.25 s) after `query started`, and the trigger is 1 s, in both modes

Four ways, alternately: `side_by_side` (what `harness run` does), `sequential` (the broker first, then the
driver: what side by side saves), `no_cds` (side by side without the JVMs' class archives, HARNESS_CDS=0:
what harness.jvm.cds saves; the way every run started before it) and `producers_at_go` (the producer processes
started only once the offsets are fixed, with 1.5 s for their own start-up, HARNESS_PRODUCERS_AT_GO: what
starting them at the session and waiting for the go saves; started as the stream existed, before the session,
their second of CPU came out of the driver JVM's start). The producer lead is measured from the starting offsets
fixed, so the broker's and the driver's noise stays out of it. The goal: the first data batch within 10 s of
the launch. The archives are made once per jar set and JDK (`harness setup` makes them): when one is missing,
setup's first start (harness.commands.setup, not timed) makes them first, so the figures are those of every run
after the first.

Then Spark alone (harness.bench.spark_alone), as many times as each way above: a bare PySpark process, with the
same query, sink, trigger and Spark settings as the harness's side-by-side run, reading a topic filled beforehand
(one second of steady's traffic) on a broker already up. Its launch to its first data batch is the floor no
harness can go under on this machine; the harness's own part is its first data batch minus that floor.

Then a sweep of two points of `steady` (10 s of traffic each), once with its one shared broker
(harness.commands.shared_broker) and once with a broker per point (HARNESS_SHARED_BROKER=0): each point's
start-up (its `run_started` to its first data batch, and to its broker answering) and the whole sweep's wall
time, side by side.

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

from harness.files import atomic
from harness.bench import row
from harness.bench.kafka_query import fill
from harness.commands.setup import make_first_run_files
from harness.commands.shared_broker import SHARED_ENV
from harness.config import load_scenario
from harness.console import Console
from harness.files.jsonl import read_jsonl
from harness.jvm import cds
from harness.files.paths import SCENARIOS_DIR
from harness.runner import PRODUCERS_AT_GO_ENV, SEQUENTIAL_START_ENV
from harness.spark.process import driver_env
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
    ("producers_ready", "producers_ready", "producers ready (started at the session, waiting for the go)"),
    ("first_batch_recorded", "query_started", "starting offsets fixed (producers may start)"),
    ("traffic_start", "traffic_start", "traffic starts (the producers' go, plus its lead)"),
)
MODES = ("side_by_side", "sequential", "no_cds", "producers_at_go")
MODE_ENV = {"side_by_side": {}, "sequential": {SEQUENTIAL_START_ENV: "1"}, "no_cds": {cds.CDS_ENV: "0"},
            "producers_at_go": {PRODUCERS_AT_GO_ENV: "1"}}
GOAL_S = 10.0  # the first data batch within this many seconds of `harness run` (issue 21)
SWEEP_POINTS, SWEEP_TRAFFIC_S = 2, 10


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
        at.setdefault(e["event"], float(e.get("at", e["t"])))  # traffic_start: `at`, when it starts
    out = {key: at[event] - launched for key, event, _ in MILESTONES if event in at}
    end = first_data_batch_end(progress)
    if end is not None:
        out["first_data_batch"] = end - launched
    return out


def one_run(work: Path, sup: Supervisor, mode: str, n: int, timeout: float) -> dict:
    """A `harness run steady` from its launch to its first data batch; its phases."""
    run_dir = work / f"{n:02d}-{mode}"
    env = _env(MODE_ENV[mode])
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


def spark_alone(work: Path, sup: Supervisor, template: Path, rounds: int, timeout: float = 300) -> list[dict]:
    """Spark alone (harness.bench.spark_alone), `rounds` times, on one broker started here with steady's topic
    filled beforehand (one second of its traffic); the query, sink, trigger and Spark settings (class archive
    included) are those of the harness run in `template`. Seconds since each bare process's launch."""
    scenario, _, _ = load_scenario("steady")
    stream = scenario.stream
    broker = scenario.backend.build(stream)
    broker.start(work / "spark-alone-broker", sup)
    try:
        broker.create_stream(stream.name, stream.partitions, {k: str(v) for k, v in stream.config.items()})
        fill(broker.bootstrap, int(scenario.producers.rate.eps), stream.name, stream.partitions,
             int(scenario.producers.payload.size.bytes))
        base = json.loads((template / "spark" / "job.json").read_text())
        source = broker.spark_source(stream.name, scenario.source_options()).as_job()
        out = []
        for i in range(rounds):
            d = work / f"spark-alone-{i}"
            (d / "events").mkdir(parents=True)
            job = {k: base[k] for k in ("master", "trigger", "query", "query_params", "sink")} | source
            job |= {"conf": base["conf"] | {"spark.local.dir": str(d / "tmp"),
                                            "spark.eventLog.dir": (d / "events").as_uri()},
                    "checkpoint": str(d / "checkpoint"), "sink_path": str(d / "sink")}
            atomic.write_json(d / "job.json", job)
            launched = time.time()
            child = sup.spawn(f"spark-alone-{i}", [sys.executable, "-m", "harness.bench.spark_alone",
                                                   str(d / "job.json"), repr(launched), str(d / "phases.json")],
                              log_path=d / "driver.log", env=driver_env(), cwd=d)
            code = child.proc.wait(timeout)
            if code != 0 or not (d / "phases.json").exists():
                raise RuntimeError(f"Spark alone exited with {code} (see {d / 'driver.log'})")
            out.append(json.loads((d / "phases.json").read_text()))
    finally:
        broker.stop()
    return out


def spark_alone_rows(side: dict, alone: list[dict]) -> list[dict]:
    """The harness's run against Spark alone (medians): what of the start-up is Spark's own on this machine."""
    med = {k: statistics.median(r[k] for r in alone) for k in ("session_ready", "query_started", "first_data_batch")}
    rows = [row(f"Spark alone: {label}, s after its launch", med[key], "s")
            for key, label in (("session_ready", "session ready"), ("query_started", "query started"),
                               ("first_data_batch", "first data batch processed"))]
    if side.get("first_data_batch") is not None:
        rows.append(row("first data batch: harness run against Spark alone (broker up, topic filled beforehand)",
                        side["first_data_batch"], "s", reference=med["first_data_batch"],
                        reference_name="Spark alone"))
        rows.append(row("the harness's own part of the start-up (its first data batch minus Spark alone's)",
                        side["first_data_batch"] - med["first_data_batch"], "s"))
    return rows


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ, CI="1")  # quiet progress
    for key in (SEQUENTIAL_START_ENV, cds.CDS_ENV, SHARED_ENV, PRODUCERS_AT_GO_ENV):
        env.pop(key, None)
    return env | extra


def sweep_file(work: Path) -> Path:
    """`steady` with a [sweep] of SWEEP_POINTS values of a key that changes nothing at this rate."""
    text = (SCENARIOS_DIR / "steady.toml").read_text()
    values = ", ".join(str(1_000_000 * (i + 1)) for i in range(SWEEP_POINTS))
    path = work / "steady-sweep.toml"
    path.write_text(text + f'\n[sweep]\n"spark.source_options.maxOffsetsPerTrigger" = [{values}]\n')
    return path


def sweep_run(work: Path, sup: Supervisor, shared: bool, timeout: float = 900) -> dict:
    """A whole sweep; each point's start-up (s since its run_started) and the sweep's wall time."""
    out = work / f"sweep-{'shared' if shared else 'fresh'}"
    launched = time.time()
    child = sup.spawn(f"harness-sweep-{'shared' if shared else 'fresh'}",
                      [sys.executable, "-m", "harness", "run", str(sweep_file(work)), "--out", str(out),
                       "--set", f"producers.duration_s={SWEEP_TRAFFIC_S}"],
                      log_path=work / f"{out.name}.log", env=_env({} if shared else {SHARED_ENV: "0"}))
    code = child.proc.wait(timeout)
    wall = time.time() - launched
    summary = json.loads((out / "sweep.json").read_text())
    points = []
    for r in summary["runs"]:
        timeline = read_jsonl(out / r["run_dir"] / "timeline.jsonl")
        started = next((float(e["t"]) for e in timeline if e["event"] == "run_started"), None)
        if started is not None:
            points.append(phases(started, timeline, read_jsonl(out / r["run_dir"] / "progress.jsonl")))
    return {"shared": shared, "exit_code": code, "wall_s": wall, "broker": summary.get("broker"), "points": points}


def sweep_rows(shared: dict, fresh: dict) -> list[dict]:
    """Per point, the shared broker against a broker per point (medians over the points), and the whole sweep."""
    def med(r: dict, key: str) -> float | None:
        values = [p[key] for p in r["points"] if key in p]
        return statistics.median(values) if values else None

    ref = "a broker per point"
    rows = []
    for key, label in (("stream_created", "sweep point: broker up and topic made"),
                       ("first_data_batch", "sweep point: first data batch")):
        value = med(shared, key)
        if value is not None:
            rows.append(row(f"{label}, s after the point's start", value, "s", reference=med(fresh, key),
                            reference_name=ref))
    rows.append(row(f"sweep of {SWEEP_POINTS} points x {SWEEP_TRAFFIC_S} s, wall time", shared["wall_s"], "s",
                    reference=fresh["wall_s"], reference_name=ref, goal="< 1 (the shared broker sooner)",
                    ok=shared["wall_s"] < fresh["wall_s"]))
    return rows


def _median(runs: list[dict], mode: str, key: str) -> float | None:
    values = [r["phases"][key] for r in runs if r["mode"] == mode and key in r["phases"]]
    return statistics.median(values) if values else None


def summarise(runs: list[dict]) -> tuple[list[dict], dict]:
    """Table rows (side by side against sequential, median seconds since the launch) and the medians."""
    keys = [k for k, _, _ in MILESTONES] + ["first_data_batch"]
    labels = {k: label for k, _, label in MILESTONES} | {"first_data_batch": "first data batch processed"}
    medians = {mode: {k: _median(runs, mode, k) for k in keys} for mode in MODES
               if mode in ("side_by_side", "sequential") or any(r["mode"] == mode for r in runs)}
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
    no_cds = medians.get("no_cds") or {}
    if side["first_data_batch"] is not None:
        rows.append(row(f"first data batch, s after launch (goal <= {GOAL_S:g} s)", side["first_data_batch"], "s",
                        reference=no_cds.get("first_data_batch"), reference_name="without class archives",
                        goal=f"<= {GOAL_S:g} s", ok=side["first_data_batch"] <= GOAL_S))
    for key in ("driver_session_ready", "broker_up", "first_data_batch"):
        if side[key] is not None and no_cds.get(key) is not None:
            rows.append(row(f"class archives' saving to {labels[key]}", no_cds[key] - side[key], "s"))
    at_go = medians.get("producers_at_go") or {}
    for key, label in (("traffic_start", "traffic starts"), ("first_data_batch", "first data batch processed")):
        lead = [(m[key] - m["first_batch_recorded"]) if m.get(key) is not None and
                m.get("first_batch_recorded") is not None else None for m in (side, at_go)]
        if lead[0] is not None:
            rows.append(row(f"{label}, s after the starting offsets were fixed (producers started early)", lead[0],
                            "s", reference=lead[1], reference_name="producers started at the go",
                            goal="< 1 (sooner)" if lead[1] is not None else None,
                            ok=lead[0] < lead[1] if lead[1] is not None else None))
    return rows, medians


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    rounds = 1 if quick else 2
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        # a run makes the archives when it ends normally, not when the bench stops it: made first, not timed
        primed = [item.what for item in make_first_run_files(console)]
        total = rounds * len(MODES)
        for i in range(total):
            mode = MODES[i % len(MODES)]
            with console.step(f"harness run {i + 1}/{total}, {mode.replace('_', ' ')}"):
                r = one_run(work, sup, mode, i, timeout=300)
            runs.append(r)
            console.info("  " + "  ".join(f"{k} {v:.1f}s" for k, v in r["phases"].items()))
        template = work / f"{MODES.index('side_by_side'):02d}-side_by_side"  # its job.json: the same Spark settings
        with console.step(f"Spark alone, {rounds}x: a bare PySpark process on a broker already up"):
            alone = spark_alone(work, sup, template, rounds)
        sweeps = []
        for shared in (True, False):
            with console.step(f"a sweep of {SWEEP_POINTS} points, " + ("one shared broker" if shared else
                                                                         "a broker per point")):
                sweeps.append(sweep_run(work, sup, shared))
    rows, medians = summarise(runs)
    rows += spark_alone_rows(medians["side_by_side"], alone)
    rows += sweep_rows(*sweeps)
    result = {"rows": rows, "medians_s": medians, "runs": runs, "spark_alone": alone, "sweeps": sweeps,
              "archives_made_first": primed,
              "scenario": "steady", "quick": quick,
              "statistic": "median of the runs each way, seconds since `harness run` was launched"}
    if json_path:
        atomic.write_json(json_path, result)
    return result


if __name__ == "__main__":  # a quick look without the suite's table
    print(json.dumps(run_bench(None, quick=True), indent=2))
