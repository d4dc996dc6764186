"""The Spark query under test, run as its own process (its own driver JVM) so faults can kill it like production.

Started by `harness.spark.process.SparkQueryProcess` with a job file; runs until told to drain (the runner writes
`control/drain.json` with the end offsets the producers left) and the committed progress has reached them, or
until told to stop. Every StreamingQueryProgress is appended to progress.jsonl as it happens.

With `source_file` in the job (the runner starts the driver while the service is still starting), the process
launches its JVM and builds its session first, then waits for that file (the source's format and options) and
starts the query on reading it. Start-up marks (process, jvm_up, session_ready, source_received, query_started)
are appended to spark/marks.jsonl: the run's timeline and `harness bench startup` read them.

`instrumentation_off` in the job (harness.bench.kafka_query's reference only) names what to leave out: "listener"
(no progress.jsonl), "polling" (no drain loop: the query, once/availableNow, runs to its end); "event_log" is the
driver's conf (harness.spark.process). The older `instrumentation: false` is all of them. Either way a query
that ends on its own records its throughput (rows over its batches' span, from Spark's own recent progress) in
status.json.

Exit codes: 0 drained, 3 drain deadline passed, 4 the query failed (its exception is in status.json).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from harness.files import atomic
from harness.jvm import cds
from harness.secrets import expand_all, is_secret_key
from harness.sinks import sink_part
from harness.spark import CATCH_UP_TRIGGERS
from harness.spark.checkpoint import committed

EXIT_DRAINED, EXIT_DRAIN_TIMEOUT, EXIT_QUERY_FAILED = 0, 3, 4
_T0 = time.time()  # the process's own imports are done: its first mark


def _write_status(path: Path, **fields) -> None:
    atomic.write_json(path, dict(fields, at=time.time()))  # lastProgress holds UUIDs: written as strings


def _mark(run_dir: Path, mark: str, at: float | None = None, **fields) -> None:
    with open(run_dir / "spark" / "marks.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"mark": mark, "at": time.time() if at is None else at, **fields}) + "\n")


def build_session(job: dict, run_dir: Path | None = None):
    """The JVM first (its own mark: the gateway launched with the job's conf, as the builder would launch it),
    then the session on it, which gets the secrets (harness.secrets: the job carries them as ${VAR})."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = SparkConf().setMaster(job["master"]).setAppName(job["app_name"])
    for key, value in expand_all(job["conf"]).items():
        if not is_secret_key(key):  # the JVM is launched with these on its command line (ps shows it): not secrets
            conf.set(key, value)
    SparkContext._ensure_initialized(conf=conf)
    if run_dir is not None:
        _mark(run_dir, "jvm_up")
    builder = SparkSession.builder.master(job["master"]).appName(job["app_name"])
    for key, value in expand_all(job["conf"]).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def ship_code(spark, py_files: list[str], run_dir: Path):
    """On a cluster master: the harness's archive (and a scenario's query module) to every executor, before any
    data source is registered or query defined (PySpark gives each Python function the includes known when it is
    created). Then, in a thread of its own (starting Python workers on the executors takes seconds the query's
    start need not wait for), a few tasks report where the executors imported the harness from, appended to
    spark/shipped_code.jsonl (one line per driver start): the run's proof that executors ran the shipped code.
    Returns that thread."""
    import threading

    from harness.spark.pyfiles import where_imported

    sc = spark.sparkContext
    for path in py_files:
        sc.addPyFile(path)
    _mark(run_dir, "code_shipped")

    def probe():
        record: dict = {"at": time.time(), "py_files": py_files}
        try:
            n = max(2, sc.defaultParallelism)
            sc.setJobDescription("harness: where the executors import the shipped code from")
            record["tasks"] = sc.parallelize(range(n), n).map(where_imported).collect()
            record["took_s"] = round(time.time() - record["at"], 3)
        except Exception as exc:  # noqa: BLE001 - recorded; the query itself shows whether executors work
            record["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        with open(run_dir / "spark" / "shipped_code.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    thread = threading.Thread(target=probe, name="shipped-code-probe", daemon=True)
    thread.start()
    return thread


def await_source(job: dict, status: Path, control: Path) -> bool:
    """Wait for the source the runner hands over once the service is up; False when told to stop first."""
    path = Path(job["source_file"])
    _write_status(status, state="awaiting_source", pid=os.getpid())
    while not path.exists():
        if (control / "stop").exists():
            _write_status(status, state="stopped")
            return False
        time.sleep(0.02)
    job.update(json.loads(path.read_text()))
    return True


def throughput(query) -> dict:
    """Rows over the span of the query's batches (first batch's start to the last one's end), from the progress
    Spark keeps itself (spark.sql.streaming.numRecentProgressUpdates of them): the same reading with the harness's
    listener on or off."""
    from datetime import datetime

    progress = [p for p in query.recentProgress]
    if not progress:
        return {"rows": 0, "batches": 0, "seconds": 0.0}

    def epoch(p) -> float:
        return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()

    start = epoch(progress[0])
    end = epoch(progress[-1]) + float(progress[-1]["durationMs"].get("triggerExecution", 0)) / 1000.0
    return {"rows": int(sum(p["numInputRows"] for p in progress)), "batches": len(progress),
            "first_batch_id": progress[0]["batchId"], "seconds": end - start}


def end_offsets(progress: dict | None) -> dict[str, dict[str, int]]:
    """{stream: {partition: offset}} a progress record's sources ended at."""
    ends: dict[str, dict[str, int]] = {}
    for source in (progress or {}).get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict):
            for stream, parts in end.items():
                if isinstance(parts, dict):
                    ends.setdefault(stream, {}).update({str(k): int(v) for k, v in parts.items()})
    return ends


def reached(ends: dict[str, dict[str, int]], targets: dict[str, dict[str, int]]) -> bool:
    return all(ends.get(stream, {}).get(str(p), -1) >= int(off)
               for stream, parts in targets.items() for p, off in parts.items())


def error_text(exc, query=None) -> str:
    """The query's exception as text, led by the Spark error conditions of its JVM cause chain, deepest first
    ('[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may ...'): the Kafka source's exceptions carry their
    condition but leave it out of their message, and PySpark shows only the message."""
    conditions: list[str] = []
    try:  # PySpark keeps no JVM object for the query's exception: take it from the query itself
        cause = query._jsq.exception().get() if query is not None else getattr(exc, "_origin", None)
    except Exception:  # noqa: BLE001
        cause = None
    for _ in range(20):
        if cause is None:
            break
        condition = _condition(cause)
        if condition and condition not in conditions:
            conditions.append(condition)
        try:
            cause = cause.getCause()
        except Exception:  # noqa: BLE001
            break
    text = str(exc)
    return "".join(f"[{c}] " for c in reversed(conditions) if f"[{c}]" not in text) + text


def _condition(cause) -> str | None:
    """A JVM throwable's Spark error condition: getCondition (Spark 4), getErrorClass on Spark 3.5 (a query run on
    an older PySpark line, harness.spark.runtimes); None for one that is not a SparkThrowable (or a gone JVM)."""
    for method in ("getCondition", "getErrorClass"):
        try:
            return getattr(cause, method)()
        except Exception:  # noqa: BLE001 - no such method here (py4j says so only when called), or no JVM
            continue
    return None


def run(job_path: Path) -> int:
    job = json.loads(job_path.read_text())
    run_dir = Path(job["run_dir"])
    _mark(run_dir, "process", at=_T0)
    status = run_dir / "spark" / "status.json"
    control = run_dir / "control"
    progress_path = run_dir / "progress.jsonl"

    spark = build_session(job, run_dir)
    spark.sparkContext.setLogLevel(job.get("log_level", "WARN"))
    _mark(run_dir, "session_ready")
    _say_which_spark(spark)
    probe = ship_code(spark, job["py_files"], run_dir) if job.get("py_files") else None
    off = instrumentation_off(job)
    recorder = None
    if "listener" not in off:
        recorder = progress_recorder(progress_path, committed(Path(job["checkpoint"])))
        spark.streams.addListener(recorder)
    try:
        if "source_file" in job and not await_source(job, status, control):
            return EXIT_DRAINED
        if "polling" in off:
            return _run_bare(spark, job, status)
        return _run_query(spark, job, status, control, recorder or Unrecorded())
    finally:
        if recorder is not None:
            spark.streams.removeListener(recorder)
        if probe is not None:
            probe.join(60)  # its record written before the context goes
        classpath = _jvm_classpath(spark) if job.get("cds_dump") else None
        spark.stop()
        if classpath is not None:
            keep_class_archive(Path(job["cds_dump"]), classpath)


def _say_which_spark(spark) -> None:
    """One line in driver.log naming the Spark and the Python that run the query: with spark.pyspark an older
    line's (harness.spark.runtimes), which the log then shows, not only the job that asked for it."""
    import pyspark

    print(f"harness: the query runs on Spark {spark.version} (pyspark {pyspark.__version__} in "
          f"{Path(pyspark.__file__).parent}), Python {sys.version.split()[0]} ({sys.executable})", flush=True)


def _jvm_classpath(spark) -> str | None:
    try:
        return str(spark._jvm.System.getProperty("java.class.path"))
    except Exception:  # noqa: BLE001 - its JVM is gone: it wrote no archive either
        return None


def keep_class_archive(dump: Path, classpath: str) -> None:
    """The JVM was started to write its classes to `dump` when it exits (harness.jvm.cds): let it exit (its stdin
    closed, as PySpark's gateway ends) and wait, since the supervisor kills what is left of this process's group
    once it is gone; then keep the file as the archive if a JVM maps it. Once per jar set and JDK."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return
    try:
        proc.stdin.close()
        proc.wait(120)
    except Exception:  # noqa: BLE001 - no archive this time; the next run writes one
        return
    cds.promote(dump, [classpath])


def instrumentation_off(job: dict) -> set[str]:
    """The items of harness.spark.process.INSTRUMENTATION the job turns off (the benchmark's reference only)."""
    if "instrumentation_off" in job:
        return set(job["instrumentation_off"])
    return set() if job.get("instrumentation", True) else {"listener", "event_log", "polling"}


class Unrecorded:
    """The drain loop's view of the progress without the listener (benchmark only): nothing recorded, nothing to
    wait for."""

    def __init__(self):
        self.ends: dict[str, dict[str, int]] = {}

    def caught_up(self, progress: dict | None) -> bool:
        return True


def progress_recorder(progress_path: Path, ends: dict[str, dict[str, int]]):
    """The listener appending every progress record to progress.jsonl and keeping where each partition's last
    batch ended (from `ends`, where the checkpoint's last commit ended: a restarted query may have nothing left to
    read). Defined here so that pyspark is imported only once the process has marked its start.

    O(1) cheap work per batch: PySpark's own listener plumbing turns each progress into Python objects field by
    field (some fifty py4j round trips per batch, on the driver the query shares its two cores with) and `.json`
    is another. Here the JVM event is asked for its JSON once, written as is (flushed, never fsynced) and parsed
    once in Python for the offsets."""
    from pyspark import SparkContext
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressRecorder(StreamingQueryListener):
        def __init__(self):
            self.out = open(progress_path, "a", encoding="utf-8")
            self.last_batch = -1
            self.idle = False  # onQueryIdle came after the last progress
            self.ends = ends

        @property
        def _jlistener(self):  # StreamingQueryManager.add/removeListener take the JVM side from here
            if not hasattr(self, "_jlistenerobj"):
                self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_RawEvents(self))
            return self._jlistenerobj

        def caught_up(self, progress: dict | None) -> bool:
            """Listener events are asynchronous: stop only once the last batch's progress is on disk. A query idle
            for a while reports a no-data lastProgress for the next batch id, which listeners never get as progress
            (onQueryIdle instead): that one has nothing to wait for."""
            return (progress is None or self.last_batch >= progress.get("batchId", -1)
                    or (self.idle and not progress.get("numInputRows")))

        def progress(self, text: str) -> None:
            self.out.write(text.replace("\n", " ") + "\n")
            self.out.flush()
            record = json.loads(text)
            self.last_batch = max(self.last_batch, int(record.get("batchId", -1)))
            self.idle = False
            for stream, parts in end_offsets(record).items():
                mine = self.ends.setdefault(stream, {})
                for p, off in parts.items():
                    mine[p] = off  # where the last batch ended: a recreated topic restarts its offsets

        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            self.progress(event.progress.json)

        def onQueryIdle(self, event):
            self.idle = True

        def onQueryTerminated(self, event):
            self.out.flush()

    class _RawEvents:
        """The JVM's PythonStreamingQueryListener, handing the recorder the progress's JSON text only."""

        def __init__(self, recorder):
            self.recorder = recorder

        def onQueryStarted(self, jevent):
            pass

        def onQueryProgress(self, jevent):
            self.recorder.progress(jevent.progress().json())

        def onQueryIdle(self, jevent):
            self.recorder.idle = True

        def onQueryTerminated(self, jevent):
            self.recorder.out.flush()

        class Java:
            implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    return ProgressRecorder()


def _start(spark, job: dict):
    """The user's query on the normalised source, written to the sink with the job's trigger; started."""
    from harness.queries import resolve
    from harness.spark.events import load

    _mark(Path(job["run_dir"]), "source_received")
    for path in job.get("data_sources", []):
        spark.dataSource.register(load(path))
    options = expand_all(job["options"])  # secrets travel as ${VAR} references (harness.secrets)
    df = spark.readStream.format(job["format"]).options(**options).load()
    query_def, params = resolve(job["query"]), dict(job.get("query_params") or {})
    sink = sink_part(job["sink"])  # harness.sinks: e.g. the Kafka sink's rows as records first
    out = sink.rows(query_def.function(load(job["normalise"])(df), params))
    writer = (out.writeStream.outputMode(job["output_mode"]).queryName(job["query_name"])
              .option("checkpointLocation", job["checkpoint"]))
    if query_def.foreach_batch is not None:  # the query owns its sink (harness.queries: the contract)
        writer = writer.foreachBatch(own_sink(query_def.foreach_batch, job["sink_path"], params,
                                              Path(job["run_dir"]) / "control"))
    else:
        writer = sink.writer(writer, job, options)
    trigger = job["trigger"]
    if trigger["kind"] == "processingTime":
        writer = writer.trigger(processingTime=trigger["interval"])
    elif trigger["kind"] == "realTime":  # real-time mode: what it requires is checked at load (harness.spark.realtime)
        writer = writer.trigger(realTime=trigger["interval"])
    elif trigger["kind"] == "availableNow":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(once=True)
    query = writer.start()
    # which Spark ran this start, and with which query: a change (harness.faults.change) may replace either
    _mark(Path(job["run_dir"]), "query_started", spark=spark.version, query=job["query"])
    return query


def own_sink(write, sink_dir: str, params: dict, control: Path):
    """foreachBatch's function for a query that owns its sink: its writer with the run's sink directory (created
    here, empty on a first start) and its params, between the failpoints a `driver_kill`'s after_offsets and
    after_sink_write phases hold the driver at (harness.spark.sinkhold)."""
    from harness.spark.sinkhold import hold_if_requested

    Path(sink_dir).mkdir(parents=True, exist_ok=True)

    def write_batch(batch_df, batch_id):
        hold_if_requested(control, int(batch_id), "before")
        write(batch_df, int(batch_id), sink_dir, params)
        hold_if_requested(control, int(batch_id), "after")

    return write_batch


def _run_bare(spark, job: dict, status: Path) -> int:
    """The query as a user would run it, without the harness's instrumentation (the benchmark's reference)."""
    if job["trigger"]["kind"] not in CATCH_UP_TRIGGERS:
        raise ValueError("instrumentation off needs a trigger that ends on its own (once, availableNow)")
    query = _start(spark, job)
    _write_status(status, state="started", id=str(query.id), run_id=str(query.runId), pid=os.getpid())
    query.awaitTermination()
    if query.exception() is not None:
        _write_status(status, state="failed", error=error_text(query.exception(), query)[:20000])
        return EXIT_QUERY_FAILED
    _write_status(status, state="finished", id=str(query.id), throughput=throughput(query))
    return EXIT_DRAINED


def _run_query(spark, job: dict, status: Path, control: Path, recorder) -> int:
    try:
        query = _start(spark, job)
    except Exception as exc:  # noqa: BLE001 - Spark refused to start the query (e.g. a change its checkpoint or
        # its operators do not allow: an AnalysisException from writeStream.start()): a failure like any other
        _write_status(status, state="failed", error=error_text(exc)[:20000], at_start=True)
        return EXIT_QUERY_FAILED
    _write_status(status, state="started", id=str(query.id), run_id=str(query.runId), pid=os.getpid())

    drain_deadline = None
    settled = False  # the batches owed after the last data (processAllAvailable) have run
    drain = control / "drain.json"
    while True:
        if not query.isActive:  # one py4j call a turn while it runs (a failed query is no longer active)
            exc = query.exception()
            if exc is None:  # once / availableNow finished on their own: did they read up to the target?
                for _ in range(40):  # the listener is asynchronous: let the last progress arrive
                    if recorder.caught_up(query.lastProgress):
                        break
                    time.sleep(0.25)
                target = json.loads(drain.read_text())["end_offsets"] if drain.exists() else {}
                state = "drained" if reached(recorder.ends, target) else "finished"
                _write_status(status, state=state, id=str(query.id), ends=recorder.ends,
                              throughput=throughput(query))
                return EXIT_DRAINED
            _write_status(status, state="failed", error=error_text(exc, query)[:20000])
            return EXIT_QUERY_FAILED
        if (control / "stop").exists():
            query.stop()
            _write_status(status, state="stopped")
            return EXIT_DRAINED
        if drain.exists():
            spec = json.loads(drain.read_text())
            if drain_deadline is None:
                drain_deadline = time.monotonic() + float(spec["timeout_s"])
            last = query.lastProgress
            if reached(recorder.ends, spec["end_offsets"]) and recorder.caught_up(last):
                if not settled and job["trigger"]["kind"] != "realTime":
                    # everything is read; a stateful query may still owe a batch without new data (its watermark
                    # moved: windows to close, state to evict). Let it run, and its progress be recorded. Not in
                    # real-time mode: its update-mode output leaves with each record, and its batches never stop
                    # on their own (processAllAvailable would wait out a whole batch duration for nothing).
                    settled = True
                    try:
                        query.processAllAvailable()
                    except Exception:  # noqa: BLE001 - the query failed: the first branch records it
                        pass
                    continue
                query.stop()
                _write_status(status, state="drained")
                return EXIT_DRAINED
            if time.monotonic() > drain_deadline:
                query.stop()
                _write_status(status, state="drain_timeout", last_progress=query.lastProgress)
                return EXIT_DRAIN_TIMEOUT
        time.sleep(0.25)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
