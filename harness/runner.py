"""The one pipeline every scenario runs through, in phases over one run context.

start the backend -> start the query under test (first batch done) -> traffic, with the nemesis running the
fault schedule and the query supervised (killed on purpose: restarted from its checkpoint) -> the rest of the
schedule, then every fault healed -> end offsets taken, the query drains and stops (once / availableNow: the
query starts only now and catches up) -> a checkpoint on the S3 store copied into the run directory (harness.
objstore) -> a stateful query's final state read from its checkpoint (harness.spark.
state_reader) -> everything stopped -> the verdict -> result.json + report.md.

A new fault never adds a branch here: faults act through the context (harness.context) and declare their
effects, which the verdict (harness.verdict) reads from faults.jsonl. The run directory is the contract other
tools read. Whatever happens (a failure, Ctrl-C, SIGTERM), everything started is stopped, every fault is
healed, what was recorded is kept, and result.json is written atomically.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness import secrets
from harness.files import atomic, nospace, outdir
from harness.records import calibration, environment
from harness.analysis import warmup
from harness.analysis.performance import LAG_END_INTERVALS
from harness.backends import make_backend
from harness.check import exit_code
from harness.backends.base import Backend
from harness.config import Scenario, is_cluster_master, load_scenario
from harness.console import Console
from harness.context import RunContext
from harness.text.durations import spark_interval_ms
from harness.errors import InputError
from harness.faults import FAULTS, fault_for
from harness import objstore
from harness.effects import Effect
from harness.faults.nemesis import Nemesis, recorded_faults
from harness.files.jsonl import JsonlTail
from harness.files.paths import runs_dir
from harness.samplers.resources import ResourceSampler
from harness.records.runstate import RunState
from harness.sinks import SinkPart, sink_part
from harness.soak.plan import resolve as resolve_soak
from harness.spark import CATCH_UP_TRIGGERS
from harness.spark.state_reader import read_state
from harness.spark.cluster import code_to_ship, spark_cluster, start_cluster
from harness.spark import runtimes
from harness.spark.process import SparkQueryProcess
from harness.spark.realtime import warnings as realtime_warnings
from harness.queries import query_home, resolve as resolve_query
from harness.supervisor import StoppedBySignal, Supervisor
from harness.records.timeline import Timeline
from harness.records.result import RunResult
from harness.producers.fleet import ProducerFleet
from harness.producers.rates import make_rate
from harness.samplers.lag import LagSampler
from harness.reports.ci import junit_xml, summary_markdown
from harness.reports.report import write_reports

RESOURCE_INTERVAL_S = 5.0  # every run's processes are sampled this often ([soak] sets its own)


@dataclass
class RunOutcome:
    run_dir: Path
    result: dict
    exit_code: int


def new_run_dir(name: str, out: Path | None) -> Path:
    """`out` (which must be new or empty: harness.files.outdir; `--replace` empties it first), else a new directory
    under runs/ named by the time and the scenario."""
    if out is not None:
        outdir.check(out)
        out.mkdir(parents=True, exist_ok=True)
        return out.resolve()  # the run's processes do not all share this one's working directory
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")[:-4] + "Z"
    path = runs_dir() / f"{stamp}-{name}"
    path.mkdir(parents=True, exist_ok=False)
    return path


def run_one(name_or_path: str, overrides: list[str] | None = None, out: Path | None = None,
            console: Console | None = None, backend: Backend | None = None) -> RunOutcome:
    """One run of a scenario file with `overrides` applied: what `harness run` does for a scenario without a
    `[sweep]`, and what a sweep's combination or a capacity trial is. A `[sweep]` table is the sweep command's
    (harness.commands.sweep), not the pipeline's: here the scenario runs once with its swept keys as written. A
    soak's random fault plan is drawn now and recorded (harness.soak.plan)."""
    scenario, path, _ = load_scenario(name_or_path, overrides)  # ConfigError before anything starts
    return run_loaded(scenario, path, overrides, out, console, backend)


def run_loaded(scenario: Scenario, path: Path, overrides: list[str] | None = None, out: Path | None = None,
               console: Console | None = None, backend: Backend | None = None) -> RunOutcome:
    """run_one for a scenario already loaded from `path` with `overrides`."""
    scenario = scenario.model_copy(update={"sweep": {}})
    if scenario.soak is not None:
        scenario = resolve_soak(scenario)
    return run_scenario(scenario, path, overrides, out, console, backend=backend)


def run_scenario(scenario: Scenario, path: Path, overrides: list[str] | None = None, out: Path | None = None,
                 console: Console | None = None, baseline: tuple[Path, str] | None = None,
                 backend: Backend | None = None) -> RunOutcome:
    """One run of a validated scenario (`path`: the file it came from). `baseline` = (run directory, harness
    compare's thresholds): the result gains a `baseline` check. `backend`: a service already running to use instead
    of starting the scenario's own (a broker a sweep shares: harness.commands.shared_broker)."""
    console = console or Console()
    run_dir = new_run_dir(scenario.name, out)
    console.log_to(run_dir / "console.log")
    atomic.write_json(run_dir / "scenario.json", {  # a record: secrets as *** (harness.secrets)
        "file": str(path), "overrides": [secrets.redacted_override(o) for o in overrides or []],
        "resolved": secrets.redacted(scenario.model_dump(mode="json"))})
    calibration.record(run_dir)  # what the run's figures are read against (a client library's own cost)
    console.info(f"run directory: {run_dir}")
    t0 = time.time()
    with Supervisor(uuid.uuid4().hex) as sup:
        ctx = RunContext(scenario, run_dir, sup, Timeline(run_dir / "timeline.jsonl"),
                         backend or make_backend(scenario.backend, scenario.stream),
                         console, state=RunState(scenario_dir=str(query_home(scenario.spark.query, path.parent))))
        ctx.resource_sampler = sampler = ResourceSampler(
            run_dir / "resources.jsonl", sup.run_id, run_dir,
            scenario.soak.resource_interval_s if scenario.soak else RESOURCE_INTERVAL_S)
        if hasattr(ctx.backend, "add_to_sampler"):  # a broker shared by a sweep (harness.commands.shared_broker)
            ctx.backend.add_to_sampler(sampler)
        sampler.start()
        try:
            for phase in (start_backend, start_query, run_traffic, settle_faults, drain, copy_store, read_state):
                phase(ctx)
        except InputError:  # refused before any traffic (e.g. a fault the principal may not apply): exit 2
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (StoppedBySignal): not judged
            ctx.state.interrupted = True
            how = str(exc) if isinstance(exc, StoppedBySignal) else "interrupted (Ctrl-C)"
            ctx.state.error = f"{how}: processes stopped, partial results kept"
            _note(ctx, "interrupted", reason=how)
            console.warn(ctx.state.error)
        except Exception as exc:  # a failed run still gets its result.json with the reason
            ctx.state.error = _with_cause(ctx, f"{type(exc).__name__}: {exc}")
            _note(ctx, "error", error=ctx.state.error)
            console.warn(ctx.state.error)
        finally:
            stop_everything(ctx)
    ctx.state.elapsed_s = time.time() - t0
    ctx.state.ended_at = time.time()
    try:
        ctx.state.write(run_dir / "run_state.json")
        environment.record(run_dir, ctx.state.backend,  # what it ran on, before the judge reads it
                           ctx.query.job.get("runtime") if ctx.query is not None else None)
        result, problems = record(measure_and_judge(scenario, run_dir, ctx.state), run_dir, baseline)
    except OSError as exc:  # a full disk: the cause said, no partial file left (harness.files.atomic)
        console.warn(f"writing the run's results in {run_dir} failed: {exc}")
        console.end_log()
        return RunOutcome(run_dir, {"verdict": "unjudged", "unjudged_reason": str(exc)},
                          130 if ctx.state.interrupted else 1)
    for problem in problems:
        console.warn(problem)
    for item in result.get("unreadable") or []:
        console.warn(f"unreadable: {item['file']}: {item['detail']}")
    console.summary(result, run_dir)
    console.end_log()
    code = 130 if ctx.state.interrupted else exit_code(result["verdict"])  # 0 pass, 1 fail, 3 unjudged
    return RunOutcome(run_dir, result, code)


def measure_and_judge(scenario: Scenario, run_dir: Path, state: RunState | dict,
                      clock_threshold_ms: float | None = None) -> RunResult:
    """A finished run's directory measured (harness.analysis.measure: its view, figures and series, written once)
    and judged (harness.verdict, a pure function of the measurement). A run and `harness check` both start here.
    Imported here and not at the top: the measuring step and the checkers import pandas, a third of the runner's
    imports, which would otherwise delay the start of every run (and the JVMs starting beside it) on two cores."""
    from harness.analysis.measure import measure, write_measured
    from harness.verdict import judge

    measured = measure(scenario, run_dir, state, clock_threshold_ms)
    judged = judge(measured)
    write_measured(measured)
    return judged


def record(judged: RunResult, run_dir: Path, baseline: tuple[Path, str] | None = None) -> tuple[dict, list[str]]:
    """The verdict written down: result.json, with harness compare's thresholds against `baseline` (a run
    directory, the thresholds) as one more check when given; junit.xml, summary.md and the reports. The result,
    and what could not be rendered. A run and `harness check` both end here."""
    result = judged.as_dict()
    atomic.write_json(run_dir / "result.json", result)
    comparison = None
    if baseline is not None:  # compares the result.json just written
        from harness.soak.checks import baseline_check  # the judge's (see run_scenario)
        from harness.verdict import add_check

        check, comparison = baseline_check(run_dir, *baseline)
        add_check(judged, check)  # judged as the others: set aside when the machine was busy
        result = judged.as_dict()
        atomic.write_json(run_dir / "result.json", result)
    atomic.write_text(run_dir / "junit.xml", junit_xml(result))
    atomic.write_text(run_dir / "summary.md", summary_markdown(result, comparison))
    return result, write_reports(result, run_dir)


class StoppedEarly(Exception):
    """A live check failed and the soak was told to stop at the first failure (soak.fail_fast): the traffic
    stops, the faults heal and the query drains, so the verdict on what was sent stays exact."""


# -- phases ------------------------------------------------------------------------------------------------------
def start_backend(ctx: RunContext) -> None:
    """The service up and the stream created. A query that starts before the traffic (not once/availableNow) has
    its driver started first, side by side with the service: it launches its JVM and builds its session while
    the broker starts, and waits for the source options start_query hands it."""
    s = ctx.scenario
    prepare_runtime(ctx)
    ctx.timeline.add("run_started")
    ctx.backend.required = [(f"faults.{i} ({o.kind})", needs) for i, o in enumerate(s.faults)
                            if (needs := fault_for(o).needs())]
    s.backend.prepare(ctx)  # e.g. Kafka's proxy; a fault needing the same thing finds it in place
    if s.spark.checkpoint_store == "s3":  # before the driver: its conf names the store's endpoint
        objstore.start(ctx)
    for kind in dict.fromkeys(f.kind for f in s.faults):
        FAULTS[kind].prepare(ctx, [f for f in s.faults if f.kind == kind])
    if s.spark.standalone:  # its master first (the driver connects to it); its workers come up with the service
        with ctx.console.step("starting the Spark standalone master"):
            start_cluster(ctx)
    if _start_side_by_side(ctx):
        ctx.query = _query_process(ctx, None)
        ctx.query.start(await_source=True)
        ctx.timeline.add("driver_launched")
    with ctx.console.step(s.backend.starting_title()):
        ctx.backend.start(ctx.run_dir, ctx.supervisor)
        ctx.timeline.add("backend_started")
        ctx.backend.create_stream(s.stream.name, s.stream.partitions, {k: str(v) for k, v in s.stream.config.items()})
        sink_part(s.spark.sink).create_output(ctx)  # the Kafka sink's output topic, stamped by the broker
    ctx.state.backend = ctx.backend.describe()
    ctx.timeline.add("backend_ready", **ctx.state.backend)
    if s.spark.trigger.kind in CATCH_UP_TRIGGERS:  # no query before the traffic: nothing to wait for
        _prepare_producers(ctx)
    if s.spark.standalone:
        with ctx.console.step(f"waiting for {s.spark.workers} Spark workers"):
            spark_cluster(ctx).wait_ready()
        ctx.timeline.add("spark_cluster_ready", **ctx.state.spark_cluster)


def prepare_runtime(ctx: RunContext) -> None:
    """spark.pyspark's line made ready (its virtualenv and its builds of the source's jars: minutes the first
    time, harness.spark.runtimes) before the run starts: no driver, service or start-up deadline waits on pip.
    So is the line a change rolls out (harness.faults.change: a Spark upgrade or downgrade)."""
    phases = [ctx.scenario] + [after for f in ctx.scenario.faults if (after := fault_for(f).successor(ctx.scenario))]
    for i, phase in enumerate(phases):
        line = phase.spark.pyspark
        if line is None:
            continue
        python = runtimes.prepare(line, ctx.console, jar_sets=tuple(phase.backend.spark_jars))
        ctx.console.info(f"the query runs on PySpark {runtimes.get(line).pyspark} (spark.pyspark = {line!r}"
                         + (", after a change" if i else "") + f"): {python}")


def _prepare_producers(ctx: RunContext) -> None:
    """The producer processes started once the driver's session is ready (for a query started after the traffic,
    once the stream exists): they get ready (imports, client connected, metadata) while the query starts and wait
    for run_traffic's go, so the traffic starts a moment after the query's starting offsets are fixed rather than
    after the processes' own start-up (ProducerFleet.prepare). Not sooner: on two cores their start-up, a second
    of CPU, came out of the driver JVM's own (`harness bench startup`: the session a second later)."""
    if os.environ.get(PRODUCERS_AT_GO_ENV):  # the bench's reference: started at the go, as before
        return
    ctx.fleet = ProducerFleet(ctx.run_dir / "producers", ctx.supervisor, producer_job(ctx.scenario, ctx.backend))
    ctx.fleet.prepare()
    if ctx.fleet.children:
        ctx.timeline.add("producers_launched")


def start_query(ctx: RunContext) -> None:
    s = ctx.scenario
    for warning in realtime_warnings(s, resolve_query(s.spark.query)):  # what load could not count or check
        ctx.console.warn(warning)
    source = ctx.backend.spark_source(s.stream.name, s.source_options())
    prestarted = ctx.query is not None and ctx.query.child is not None
    if prestarted and tuple(source.jars) != ctx.query.jar_names:  # a classpath guessed wrong: start afresh
        ctx.query.stop()
        prestarted = False
    if not prestarted:
        ctx.query = _query_process(ctx, source)
    ctx.make_query = lambda changed: _query_process(
        ctx, ctx.backend.spark_source_for(changed.backend, changed.stream.name, changed.source_options()), changed)
    if s.spark.trigger.kind in CATCH_UP_TRIGGERS:
        return  # started by the drain, after the traffic
    with ctx.console.step(f"starting the Spark query ({_master(ctx)})"
                          + (", its driver already up" if prestarted else "")):
        if prestarted:
            ctx.query.provide_source(source)
        else:
            ctx.query.start()
        deadline = time.monotonic() + s.spark.start_timeout_s
        if ctx.query.wait_session_ready(s.spark.start_timeout_s):  # else wait_started says what went wrong
            _prepare_producers(ctx)
        ctx.query.wait_started(max(0.0, deadline - time.monotonic()))
    _record_driver_marks(ctx)
    ctx.timeline.add("query_started")


SEQUENTIAL_START_ENV = "HARNESS_SEQUENTIAL_START"  # internal: `harness bench startup`'s reference
PRODUCERS_AT_GO_ENV = "HARNESS_PRODUCERS_AT_GO"  # internal: its reference for the producers started early


def _start_side_by_side(ctx: RunContext) -> bool:
    return not os.environ.get(SEQUENTIAL_START_ENV) and ctx.scenario.spark.trigger.kind not in CATCH_UP_TRIGGERS


def _master(ctx: RunContext) -> str:
    cluster = spark_cluster(ctx)
    return cluster.master_url if cluster is not None else ctx.scenario.spark.master


def _query_process(ctx: RunContext, source, scenario: Scenario | None = None) -> SparkQueryProcess:
    """The query-under-test process for the run's scenario (or `scenario`, a change's phase B on the same
    checkpoint); `source` None: the source comes once the service is up. On a cluster master the driver ships the
    harness's code (and the scenario's query module) to its executors."""
    s = scenario or ctx.scenario
    cluster = spark_cluster(ctx)
    master = _master(ctx)
    process = SparkQueryProcess(
        ctx.run_dir, ctx.supervisor, source=source, jars=s.backend.spark_jars,
        master=master, py_files=code_to_ship(s, ctx.state.scenario_dir) if is_cluster_master(master) else (),
        loopback=cluster is not None or not is_cluster_master(master),
        conf={**(cluster.driver_conf() if cluster else {}), **_store_conf(ctx, s), **s.spark_conf()},
        store=_store(ctx, s),
        trigger=s.spark.trigger.model_dump(), sink=s.spark.sink,
        output_mode=s.spark.output_mode, driver_memory=s.spark.driver_memory, query=s.spark.query,
        query_params=s.spark.query_params, runtime=s.spark.pyspark,
        # a user's query module sits next to the scenario file (harness.queries: the contract)
        python_path=[ctx.state.scenario_dir] if ":" in s.spark.query and ctx.state.scenario_dir else None)
    process.job.update(sink_part(s.spark.sink).job_part(s))  # e.g. the Kafka sink's topic and options
    return process


def _store(ctx: RunContext, s: Scenario) -> dict | None:
    """With spark.checkpoint_store = "s3": the checkpoint's and the sink's URIs in the store, and its connector's
    jars (harness.objstore); None: both in the run directory."""
    if s.spark.checkpoint_store != "s3":
        return None
    return {"checkpoint": objstore.uri(objstore.CHECKPOINT_KEY), "sink": objstore.uri(objstore.SINK_KEY),
            "jars": (objstore.HADOOP_AWS,)}


def _store_conf(ctx: RunContext, s: Scenario) -> dict[str, str]:
    """S3A pointed at the proxy in front of the store (the scenario's own spark.conf may override any of it)."""
    if s.spark.checkpoint_store != "s3" or not ctx.objstore:
        return {}
    return objstore.spark_conf(ctx.objstore["endpoint"])


def copy_store(ctx: RunContext) -> None:
    """With the checkpoint on the S3 store: its bucket in the run directory once the query has drained, before
    a stateful query's state is read from the checkpoint (read_state). A run that ends early copies it on its way
    out (stop_everything)."""
    if ctx.objstore and not ctx.objstore.get("exported"):
        _export_store(ctx)


def _export_store(ctx: RunContext) -> None:
    """The store's bucket (checkpoint/, sink/) copied into the run directory once the query has stopped and
    while the store runs: what the measuring step and `harness check` read. A failure is said; the verdict then
    finds no checkpoint or sink to judge."""
    try:
        if ctx.query is not None and ctx.query.child is not None and ctx.query.child.alive():
            ctx.query.stop()  # nothing may be written while it is copied
        with ctx.console.step("copying the checkpoint and the sink out of the S3 store"):
            objstore.export(ctx)
        ctx.objstore["exported"] = True
    except Exception as exc:  # noqa: BLE001 - the verdict says what it could not read
        ctx.console.warn(f"copying the S3 store into the run directory failed: {type(exc).__name__}: {exc}")


def _record_driver_marks(ctx: RunContext) -> None:
    """The driver's own start-up marks (process, JVM up, session ready, source received, query started) on the
    timeline, each line timed (`t`) when the driver took it rather than when it is copied here."""
    for m in ctx.query.marks():
        ctx.timeline.add(f"driver_{m['mark']}", t=m["at"])


def run_traffic(ctx: RunContext) -> None:
    s = ctx.scenario
    ctx.lag_sampler = sampler = LagSampler(ctx.run_dir / "lag.jsonl",
                                                     lambda: ctx.backend.end_offsets(s.stream.name))
    sampler.start()
    fleet = ctx.fleet or ProducerFleet(ctx.run_dir / "producers", ctx.supervisor, producer_job(s, ctx.backend))
    ctx.fleet = fleet
    warm_start = fleet.go()  # the prepared processes ready: the start is a moment away
    if (ready_at := fleet.ready_at()) is not None:
        ctx.timeline.add("producers_ready", t=ready_at)
    if s.producers.warmup_s or fleet.adaptive_warmup:
        ctx.timeline.add("warmup_start", at=warm_start)
    # the measured window: faults are timed from here
    batches = JsonlTail(ctx.run_dir / "progress.jsonl", keep=False)  # the live line's count, read on
    ctx.traffic_start = (warm_up(ctx, warm_start, batches) if fleet.adaptive_warmup
                         else warm_start + s.producers.warmup_s)
    ctx.timeline.add("traffic_start", at=ctx.traffic_start)
    ctx.state.traffic_start = ctx.traffic_start
    if s.soak is not None:
        from harness.soak.live import LiveMonitor

        ctx.live_monitor = monitor = LiveMonitor(s, ctx.run_dir, ctx.console, lambda: _query_state(ctx),
                                                               ctx.traffic_start)
        monitor.start()
    if s.faults:
        ctx.nemesis = nemesis = Nemesis(ctx, list(s.faults), s.seed, s.producers.duration_s)
        nemesis.start()
    duration = s.producers.duration_s
    with ctx.console.progress("traffic", duration) as bar:
        def tick():
            _watch_run(ctx)
            bar.update(min(duration, max(0.0, time.time() - ctx.traffic_start)), _live_line(ctx, batches))
        try:
            fleet.wait(max(0.0, ctx.traffic_start - time.time()) + duration + 120.0, tick)
        except StoppedEarly as exc:  # the traffic ends now; faults heal and the query drains as usual
            ctx.state.stopped_early = str(exc)
            ctx.timeline.add("stopped_early", reason=str(exc))
            ctx.console.warn(str(exc))
            if ctx.nemesis is not None:
                ctx.nemesis.stop()
            fleet.stop()
    ctx.timeline.add("traffic_end")
    if fleet.failures():
        raise RuntimeError("; ".join(fleet.failures()))


MEASURE_LEAD_S = 1.0  # measure.json comes this long before the time it names: every producer has seen it by then
WARMUP_DECIDE_EVERY_S = 1.0  # the lag is sampled about once a second


def warm_up(ctx: RunContext, warm_start: float, batches: JsonlTail) -> float:
    """A caught_up warm-up (harness.analysis.warmup): the traffic flows at the rate's starting value until the
    query has caught up with its own start, at most producers.warmup_max_s; then the producers are told when the
    measured window starts (producers/measure.json, which also says how the warm-up ended, for the judge and the
    report), and that is returned. `batches`: the live line's count of progress.jsonl's lines."""
    s, fleet = ctx.scenario, ctx.fleet
    assert fleet is not None
    p, trigger = s.producers, s.spark.trigger
    rate, period = rate_shape(p.rate)
    interval_ms = float(spark_interval_ms(trigger.interval))
    # both read on each second, not whole (the warm-up is at most warmup_max_s: its records are few)
    lag, progress = JsonlTail(ctx.run_dir / "lag.jsonl"), JsonlTail(ctx.run_dir / "progress.jsonl")
    end = None
    with ctx.console.progress(f"warm-up: until the query has caught up with its start (at most "
                              f"{p.warmup_max_s:g} s)", p.warmup_max_s) as bar:
        while end is None:
            _watch_run(ctx)
            if not fleet.running():
                raise RuntimeError("the producers exited during the warm-up: " + "; ".join(fleet.failures()))
            now = time.time()
            end = warmup.decide(lag.read(), progress.read(),
                                start=warm_start, now=now, rate_eps=rate, trigger_interval_ms=interval_ms,
                                band_intervals=LAG_END_INTERVALS, min_s=p.warmup_s, max_s=p.warmup_max_s,
                                period_s=period)
            bar.update(min(p.warmup_max_s, max(0.0, now - warm_start)), _live_line(ctx, batches))
            if end is None:
                time.sleep(WARMUP_DECIDE_EVERY_S)
    measure_at = time.time() + MEASURE_LEAD_S
    record = {**end.as_dict(), "max_s": p.warmup_max_s, "min_s": p.warmup_s}
    fleet.start_measuring(measure_at, record)
    ctx.timeline.add("warmup_end", ended=end.ended, reason=end.reason)
    (ctx.console.info if end.ended == "caught_up" else ctx.console.warn)(f"warm-up: {end.reason}")
    return measure_at


def rate_shape(spec) -> tuple[float, float | None]:
    """(events/s, period s) the warm-up judges a rate by: a periodic one (bursts, a sine) by its mean over one
    period after its start offset, and its period; any other by its rate at the start (no period)."""
    fn = make_rate(spec)
    period = getattr(spec, "period_s", None)
    if not period:
        return fn.rate(0.0), None
    start = float(getattr(spec, "offset_s", 0.0) or 0.0)
    return (fn.cumulative(start + period) - fn.cumulative(start)) / period, float(period)


def _watch_run(ctx: RunContext) -> None:
    """What every tick of the traffic does: a full disk stops the run now, named (harness.files.nospace); the query
    supervised (a killed one restarted); a soak's fail-fast."""
    nospace.check_free(ctx.run_dir)
    ctx.query_watch = _supervise_query(ctx)
    _stop_if_failing(ctx)


def _live_line(ctx: RunContext, batches: JsonlTail) -> str:
    live = ctx.fleet.live() if ctx.fleet else {"sent": 0, "acked": 0, "failed": 0}
    return (f"sent {live['sent']:,}  acked {live['acked']:,}  failed {live['failed']:,}  "
            f"batches {batches.count()}" + _live_status(ctx))


def settle_faults(ctx: RunContext) -> None:
    """The rest of the fault schedule (some faults are timed after the traffic), then everything healed, then
    the query running again (a kill near the end restarts it) unless it stopped as a fault declared."""
    nemesis: Nemesis | None = ctx.nemesis
    if nemesis is not None:
        deadline = ctx.traffic_start + nemesis.end_s + 120.0
        while nemesis.is_alive() and time.time() < deadline:
            nospace.check_free(ctx.run_dir)
            _supervise_query(ctx)
            time.sleep(0.25)
        nemesis.finish(timeout=1.0)
        ctx.state.fault_errors = list(nemesis.errors)
    if ctx.query is None or ctx.query.child is None or ctx.state.failed_as_declared:
        return
    deadline = time.monotonic() + ctx.scenario.spark.start_timeout_s
    while _supervise_query(ctx) == "restarting":
        if time.monotonic() > deadline:
            raise TimeoutError("the restarted Spark query did not come back")
        time.sleep(0.25)
    # a query brought back under a restart policy (an outage) is supervised through its first batch, each failure
    # restarted, before the drain: a crash-loop plays out (and is given up on) here, never in the drain
    query, started = ctx.query, time.monotonic()
    allowed = ctx.scenario.spark.start_timeout_s * (query.failure_restarts + 2) + ctx.scenario.spark.drain_timeout_s
    while query.under_restart_policy and not ctx.state.failed_as_declared:
        if _supervise_query(ctx) in ("failed", "finished", "exited", "absent"):
            break
        if time.monotonic() - started > allowed:
            raise TimeoutError(f"the restarted Spark query ran no batch within {allowed:g} s")
        time.sleep(0.25)


def drain(ctx: RunContext) -> None:
    s, query = ctx.scenario, ctx.query
    assert query is not None
    if ctx.state.failed_as_declared:
        ctx.state.drain_detail = "nothing to drain: the query stopped with the failure a fault declared"
        return
    ends = ctx.backend.end_offsets(s.stream.name)
    ctx.state.end_offsets = {str(p): o for p, o in ends.items()}
    target = {s.stream.name: {str(p): o for p, o in ends.items()}}
    catch_up = s.spark.trigger.kind in CATCH_UP_TRIGGERS
    with ctx.console.step("the query catching up" if catch_up else "draining the query"):
        query.drain(target, s.spark.drain_timeout_s)
        if catch_up:
            query.start(keep_drain=True)
            ctx.timeline.add("query_started")
        code = query.wait_exit(s.spark.drain_timeout_s + (s.spark.start_timeout_s if catch_up else 60))
    status = query.status()
    ctx.state.drained = code == 0 and status.get("state") == "drained"
    # once/availableNow that end on their own short of the target ('finished') say where they stopped
    why = status.get("error") or (f"it stopped having read up to {status['ends']}, short of {ends}"
                                  if status.get("state") == "finished" else "")
    ctx.state.drain_detail = (f"query reached end offsets {ends}" if ctx.state.drained else
                              _with_cause(ctx, f"query state {status.get('state')!r}, exit {code}: {str(why)[:500]}"))
    if status.get("state") == "failed" and _declared_failure(ctx, status.get("error") or ""):
        ctx.state.failed_as_declared = True
    ctx.timeline.add("query_stopped", state=status.get("state"), exit=code)


def stop_everything(ctx: RunContext) -> None:
    monitor, ctx.live_monitor = ctx.live_monitor, None
    if monitor is not None:
        monitor.stop()
        if not ctx.state.interrupted:
            monitor.evaluate_now()  # the state at the end of traffic (the drain is the final verdict's)
        monitor.close()
    nemesis, ctx.nemesis = ctx.nemesis, None
    if nemesis is not None:
        nemesis.stop()  # heals whatever is still injected, also after an error or Ctrl-C
        ctx.state.fault_errors = list(nemesis.errors)
    sampler, ctx.lag_sampler = ctx.lag_sampler, None
    if sampler is not None:
        sampler.stop()
    ctx.fleet = None
    if ctx.state.backend and not ctx.state.interrupted and not ctx.backend.sends_report_positions:
        try:  # while the service still runs: where it holds the events whose sends reported no position
            with ctx.console.step("reading back where the service stored the events"):
                ctx.state.positions_recorded = ctx.backend.record_positions(ctx.scenario.stream.name,
                                                                                ctx.run_dir / "placements")
        except Exception as exc:  # noqa: BLE001 - the verdict says the run could not be judged, and why
            ctx.state.positions_error = f"{type(exc).__name__}: {exc}"
    sink = sink_part(ctx.scenario.spark.sink)
    if sink.reads_output_after_run and ctx.state.backend and not ctx.state.interrupted:
        _record_output(ctx, sink)
    if ctx.objstore and not ctx.objstore.get("exported") and not ctx.state.interrupted:
        _export_store(ctx)
    with ctx.console.step("stopping everything"):
        ctx.backend.close_clients()  # the runner's own clients first: no reconnect noise while brokers stop
        ctx.supervisor.stop_all()  # last started, first stopped: the driver, the workers, then the master
        ctx.backend.stop()
    try:  # the file sink's commit times: the run directory keeps them when copied without mtimes
        sink.record_after_stop(ctx.run_dir / "sink")
    except OSError as exc:  # a full disk: said, and the rest still stopped and recorded
        ctx.console.warn(f"recording the sink's commit times failed: {exc}")
    cluster, ctx.cluster = ctx.cluster, None
    if cluster is not None:
        ctx.state.spark_cluster = cluster.describe()
    resources, ctx.resource_sampler = ctx.resource_sampler, None
    if resources is not None:
        resources.stop()
    if ctx.query is not None:
        status = ctx.query.status()
        ctx.state.query = {"state": status.get("state"), "error": status.get("error"),
                              "exit_code": ctx.query.child.proc.returncode if ctx.query.child else None,
                              "kills": ctx.query.kills, "restarts": ctx.query.restarts}
        if ctx.query.gave_up:  # a crash-loop given up on: failed, in the restart policy's words
            ctx.state.query.update(state="failed", error=ctx.query.gave_up)
        if ctx.query.crashes:  # failures a restart policy restarted (harness.faults.outage)
            ctx.state.query.update(crashes=len(ctx.query.crashes), crash_list=[
                {**c, "error": str(c.get("error") or "")[:8000]} for c in ctx.query.crashes])  # the cause lies deep


# -- helpers -----------------------------------------------------------------------------------------------------
def _record_output(ctx: RunContext, sink: SinkPart) -> None:
    """An output outside the run directory (the Kafka sink's topic) read completely into sink/ while the backend
    runs, once the query has stopped (harness.sinks); a failure is said, and the verdict then finds no output to
    judge (unjudged)."""
    try:
        if ctx.query is not None and ctx.query.child is not None and ctx.query.child.alive():
            ctx.query.stop()  # nothing may be written while it is read
        sink.record_output(ctx)
    except Exception as exc:  # noqa: BLE001 - the verdict says the output could not be read
        ctx.console.warn(f"{sink.recording} failed: {type(exc).__name__}: {exc}")


def _note(ctx: RunContext, event: str, **fields) -> None:
    """A timeline line on the way out of a failed run: a full disk must not turn the failure into a traceback."""
    try:
        ctx.timeline.add(event, **fields)
    except OSError:
        pass


def _with_cause(ctx: RunContext, error: str) -> str:
    """`error`, led by its cause when that was a full disk (harness.files.nospace): found in the error, the query's
    recorded error or the end of the driver's and the producers' logs, where a truncated message loses it."""
    status = ctx.query.status() if ctx.query is not None else {}
    logs = [ctx.run_dir / "spark" / "driver.log", *sorted((ctx.run_dir / "producers").glob("*.log"))]
    full = nospace.cause(ctx.run_dir, [error, status.get("error")], logs)
    return f"{full}: {error}" if full and "no space left on device under" not in error else error


def _supervise_query(ctx: RunContext) -> str:
    """The production supervisor's job: restart a query a fault killed; a query that failed on its own ends the
    run, unless a fault declared exactly that failure (then the run goes on without it)."""
    query = ctx.query
    if query is None or query.child is None or ctx.state.failed_as_declared:
        return "absent"
    state = query.watch(ctx.timeline)
    if state == "gave_up":  # a crash-loop the restart policy bounded (harness.faults.outage)
        if _declared_failure(ctx, query.gave_up or ""):
            ctx.state.failed_as_declared = True
            ctx.timeline.add("query_failed_as_declared", error=str(query.gave_up)[:300])
            return "failed"
        raise RuntimeError(f"the Spark query stopped during the run: {query.gave_up}")
    if state in ("failed", "finished", "exited"):
        status = query.status()
        if state == "failed" and _declared_failure(ctx, status.get("error") or ""):
            ctx.state.failed_as_declared = True
            ctx.timeline.add("query_failed_as_declared", error=str(status.get("error"))[:300])
            return state
        raise RuntimeError(f"the Spark query stopped during the run (state {status.get('state')!r}): "
                           f"{str(status.get('error', ''))[:500]}")
    return state


def _query_state(ctx: RunContext) -> str:
    return "failed_as_declared" if ctx.state.failed_as_declared else ctx.query_watch


def _live_status(ctx: RunContext) -> str:
    monitor = ctx.live_monitor
    if monitor is None:
        return ""
    return f"  live checks: {'FAILED ' + monitor.failed.split(':')[0] if monitor.failed else 'ok'} " \
           f"({monitor.checker.evaluations} evaluations)"


def _stop_if_failing(ctx: RunContext) -> None:
    monitor = ctx.live_monitor
    if monitor is not None and monitor.failed and ctx.scenario.soak and ctx.scenario.soak.fail_fast:
        raise StoppedEarly(f"stopped early (soak.fail_fast): live check {monitor.failed}")


def _declared_failure(ctx: RunContext, error: str) -> bool:
    declared = {Effect.from_dict(f.get("effect") or {}).failure for f in recorded_faults(ctx.run_dir)}
    return any(cls and cls in error for cls in declared)


def producer_job(scenario: Scenario, backend: Backend) -> dict:
    """What each producer process is told (producers.process): the scenario's traffic against this backend."""
    p = scenario.producers
    settings = backend.producer_settings()
    settings.update(p.client)
    return {
        "backend": backend.kind, "sender": scenario.backend.sender, "placement": scenario.backend.placement,
        "stream": scenario.stream.name, "partitions": scenario.stream.partitions,
        "settings": secrets.referenced(settings),  # secrets as ${VAR} references the producer processes expand
        "processes": p.processes, "users": p.users, "batch_size": p.batch_size,
        "batch_wait_s": p.batch_wait_ms / 1000.0,
        "duration_s": p.duration_s, "warmup_s": p.warmup_s, "max_backlog_s": p.max_backlog_s, "seed": scenario.seed,
        "warmup_until": "caught_up" if scenario.adaptive_warmup else "fixed", "warmup_max_s": p.warmup_max_s,
        "rate": p.rate.model_dump(mode="json"), "keys": p.keys.model_dump(mode="json"),
        "payload": p.payload.model_dump(mode="json"), "locust_master": p.locust_master,
    }
