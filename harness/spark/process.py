"""The runner's handle on the query-under-test process: write its job, start it, drain it, stop or kill it.

It is also the query's production supervisor: a process killed on purpose (a fault) is started again from the
same checkpoint by `watch()`, which the runner calls while traffic flows; a process that died on its own is a
failure, reported with the error the query recorded.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from harness import secrets
from harness.files import atomic
from harness.backends.base import SparkSource
from harness.files.jsonl import read_jsonl
from harness.jvm import cds
from harness.jvm.artifacts import resolve
from harness.files.paths import pyspark_home
from harness.spark import runtimes
from harness.supervisor import Child, Supervisor

SOURCE_KEYS = ("format", "options", "normalise", "data_sources")  # SparkSource.as_job()'s keys


def source_part(job: dict) -> dict:
    return {k: job[k] for k in SOURCE_KEYS}

# Loopback only, no UI ports, and the file sink keeps every per-batch metadata file so the checker can time
# each batch's commit (compaction would fold them together).
BASE_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.fileSink.log.deletion": "false",
    "spark.sql.streaming.fileSink.log.compactInterval": "1000000",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
}
LOOPBACK_CONF = ("spark.driver.host", "spark.driver.bindAddress")  # left to Spark on a user's cluster
# What the harness adds to a user's query, each of which `instrumentation_off` can remove alone (the benchmark's
# reference only, harness.bench.kafka_query): the progress listener (progress.jsonl), Spark's event log, the drain
# loop polling the query.
INSTRUMENTATION = ("listener", "event_log", "polling")
# Spark's event log, kept to what harness/analysis/spark_tasks.py reads (job starts, task ends with their Task Metrics):
# no per-task copy of the metrics as accumulables, no block updates or per-stage executor metrics, a large buffer
# (fewer writes). Uncompressed: the report reads it as text, and a killed driver's log stays readable to its
# last line.
EVENT_LOG_CONF = {
    "spark.eventLog.enabled": "true",
    "spark.eventLog.compress": "false",
    "spark.eventLog.includeTaskMetricsAccumulators": "false",
    "spark.eventLog.logBlockUpdates.enabled": "false",
    "spark.eventLog.logStageExecutorMetrics": "false",
    "spark.eventLog.buffer.kb": "1m",
}


def driver_env(loopback: bool = True, python_path: list[str] | None = None,
               python: str | None = None) -> dict[str, str]:
    """The environment a driver process runs in: this interpreter (or `python`, a runtime's: harness.spark.
    runtimes) for the driver's and the workers' Python, Spark bound to loopback (`loopback`), the pip-installed
    PySpark as its own SPARK_HOME, `python_path` first."""
    env = dict(os.environ)
    python = python or sys.executable
    env.update({"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python})
    if loopback:
        env.update({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"})
    env.pop("SPARK_HOME", None)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(python_path + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def driver_classpath(conf: dict[str, str]) -> list[str]:
    """What the driver JVM's class archive is keyed by: Spark's own jars (the launcher's classpath), the jars
    and extra classpath the conf adds."""
    return [f"{pyspark_home() / 'jars'}/*", *conf.get("spark.jars", "").split(","),
            conf.get("spark.driver.extraClassPath", "")]


def _with_class_archive(conf: dict[str, str]) -> Path | None:
    """The driver JVM's class archive (harness.jvm.cds) added to its java options, after any of the scenario's
    own; the temp file its JVM writes the archive to when there is none yet."""
    options, dump = cds.options("spark-driver", driver_classpath(conf))
    if options:
        conf["spark.driver.extraJavaOptions"] = " ".join(
            [o for o in [conf.get("spark.driver.extraJavaOptions", "").strip()] if o] + options)
    return dump


# the error class a query given up on after a crash-loop fails with (the harness's, as Spark names its own)
CRASH_LOOP = "QUERY_CRASH_LOOP"


class SparkQueryProcess:
    def __init__(self, run_dir: Path, supervisor: Supervisor, *, source: SparkSource | None, master: str,
                 conf: dict[str, str], trigger: dict, sink: str = "parquet", output_mode: str = "append",
                 driver_memory: str = "1g", query_name: str = "query_under_test", query: str = "passthrough",
                 query_params: dict | None = None, python_path: list[str] | None = None, jars: tuple[str, ...] = (),
                 instrumentation: bool = True, instrumentation_off: tuple[str, ...] = (),
                 py_files: tuple[str, ...] = (), loopback: bool = True, runtime: str | None = None,
                 store: dict[str, str] | None = None):
        """`source` None: the source comes later (`provide_source`), so the driver can start its JVM and build its
        session while the service starts (`start(await_source=True)`); `jars` then names the artifact sets the
        source will need on the driver's classpath, which is fixed when its JVM starts. `instrumentation` False
        (the benchmark's reference only, harness.bench.kafka_query): no progress listener, no event log, no drain
        polling, so the query runs as a user's would without the harness; `instrumentation_off` removes only the
        items of INSTRUMENTATION it names (what each one costs). `py_files`: archives the driver ships to its
        executors before anything runs (harness.spark.pyfiles: on a cluster master); the driver then records
        where its executors imported the harness from (spark/shipped_code.jsonl). `loopback` False (a user's
        cluster, whose executors must reach the driver): the driver binds as Spark chooses, not 127.0.0.1.
        `runtime`: the PySpark line the driver runs on (harness.spark.runtimes: its virtualenv's interpreter, its
        builds of the jar sets, no class archive: those are keyed by the project's Spark); None, the project's.
        `store`: the checkpoint and the sink on an object store (harness.objstore): {"checkpoint", "sink": their
        URIs, "jars": the artifact set of its connector}; None, in the run directory."""
        off = set(INSTRUMENTATION) if not instrumentation else set(instrumentation_off)
        if off - set(INSTRUMENTATION):
            raise ValueError(f"unknown instrumentation {sorted(off - set(INSTRUMENTATION))}: {INSTRUMENTATION}")
        self.run_dir = run_dir
        self.supervisor = supervisor
        self.spark_dir = run_dir / "spark"
        self.control = run_dir / "control"
        self.checkpoint = run_dir / "checkpoint"
        self.sink_path = run_dir / "sink"
        store = store or {}
        self.spark_dir.mkdir(parents=True, exist_ok=True)
        self.control.mkdir(parents=True, exist_ok=True)
        self.jar_names = tuple(source.jars) if source is not None else tuple(jars)  # the project's set names
        self.runtime = runtime
        self.python = str(runtimes.prepare(runtime)) if runtime else sys.executable
        jar_paths = [str(j) for name in self.jar_names
                     for j in (runtimes.jars(runtime, name) if runtime else resolve(name))]
        jar_paths += [str(j) for name in store.get("jars", ()) for j in resolve(name)]  # not the source's
        full_conf = dict(BASE_CONF)
        self.loopback = loopback
        if not loopback:
            for key in LOOPBACK_CONF:
                full_conf.pop(key)
        full_conf["spark.driver.memory"] = driver_memory
        full_conf["spark.local.dir"] = str(self.spark_dir / "tmp")
        if "event_log" not in off:
            # Spark's event log: where each task ran (harness/analysis/spark_tasks.py); it outlives a killed driver
            (self.spark_dir / "events").mkdir(exist_ok=True)
            full_conf.update(EVENT_LOG_CONF)
            full_conf["spark.eventLog.dir"] = (self.spark_dir / "events").resolve().as_uri()
        if jar_paths:
            full_conf["spark.jars"] = ",".join(jar_paths)
        full_conf.update(conf)
        cds_dump = _with_class_archive(full_conf) if runtime is None else None
        full_conf.update(secrets.spark_redaction_conf(full_conf))  # Spark's own logs hide them too
        self.job = {
            "run_dir": str(run_dir), "master": master,
            "conf": secrets.referenced(full_conf),  # secrets as ${VAR}: the driver expands them (harness.secrets)
            "trigger": trigger, "sink": sink, "output_mode": output_mode,
            "checkpoint": store.get("checkpoint", str(self.checkpoint)),
            "sink_path": store.get("sink", str(self.sink_path)), "query_name": query_name,
            "app_name": f"harness-{run_dir.name}", "query": query, "query_params": dict(query_params or {}),
            "instrumentation_off": sorted(off), "py_files": [str(p) for p in py_files],
        }
        if runtime is not None:  # which Spark ran: the run directory says so
            self.job["runtime"] = runtimes.get(runtime).as_job()
        if cds_dump is not None:  # the driver keeps its JVM's classes as the archive once it exited (harness.jvm.cds)
            self.job["cds_dump"] = str(cds_dump)
        if source is not None:
            self.set_source(source)
        self.python_path = list(python_path or [])  # put first on PYTHONPATH: a user's query module lives there
        if runtime is not None:  # the runtime's interpreter imports this harness's own code, before anything else
            self.python_path.insert(0, str(runtimes.harness_source()))
        self.child: Child | None = None
        self.started_at = 0.0  # when start() last launched the driver (its marks are the ones since)
        self.kills = 0
        self.restarts = 0
        self.changes = 0  # times `change` replaced the job
        self._killed = False  # the current process was killed on purpose: restart it
        self._held = False  # taken down on purpose and kept down (harness.faults.outage): no restart until released
        self._restarting_failures = False  # a restart policy in force (bring_back): failures are restarted
        self._through_batch = -1  # ... until a batch past this one completes
        self.failure_restarts = 0  # failures still to restart from (an outage's supervisor: a crash-loop's bound)
        self.crashes: list[dict] = []  # each failure restarted from: {"at", "state", "error"}
        self.gave_up: str | None = None  # why the supervisor stopped restarting a crash-looping query
        self._lock = threading.Lock()
        self._child_env: dict[str, str] = {}  # the environment the running driver started with

    @property
    def source_path(self) -> Path:
        return self.control / "source.json"

    @property
    def marks_path(self) -> Path:
        return self.spark_dir / "marks.jsonl"

    def set_source(self, source: SparkSource) -> None:
        if source.metrics_option:  # the source's per-task records land in the run directory (source-metrics/)
            source = replace(source, options={**source.options,
                                              source.metrics_option: str(self.run_dir / "source-metrics")})
        job = source.as_job()
        job["options"] = secrets.referenced(job["options"])  # written to job.json and source.json: references
        self.job.update(job)

    def provide_source(self, source: SparkSource) -> None:
        """Hand the source to a driver started with `await_source=True` (it starts its query on reading it); the
        job keeps it, so a restart after a kill starts the query straight away."""
        self.set_source(source)
        part = source_part(self.job)  # a secret new since the driver started is sealed, not in its environment
        part["options"] = secrets.sealed_for(part["options"], self._child_env)
        atomic.write_json(self.source_path, part)

    def marks(self) -> list[dict]:
        """The driver's start-up marks ({"mark", "at"}: process, jvm_up, session_ready, source_received,
        query_started), one set per start, in order."""
        return read_jsonl(self.marks_path)

    @property
    def status_path(self) -> Path:
        return self.spark_dir / "status.json"

    def status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def start(self, keep_drain: bool = False, await_source: bool = False) -> None:
        """`keep_drain`: a drain target written before the start stays (once/availableNow run after traffic).
        `await_source`: the driver builds its session, then waits for `provide_source` before starting the query."""
        job = dict(self.job)
        if await_source:
            job["source_file"] = str(self.source_path)
            for key in SOURCE_KEYS:
                job.pop(key, None)
            self.source_path.unlink(missing_ok=True)
        elif "format" not in job:
            raise RuntimeError("the query's source is not known yet: start(await_source=True), or provide_source")
        job_path = self.spark_dir / "job.json"
        job_path.write_text(json.dumps(job, indent=2))
        log = self.spark_dir / "driver.log"
        self._log_from = log.stat().st_size if log.exists() else 0  # where this start's lines begin
        for stale in ("stop",) if keep_drain else ("drain.json", "stop"):
            (self.control / stale).unlink(missing_ok=True)
        self.status_path.unlink(missing_ok=True)
        secrets.ensure_key()  # the key a secret handed over later is sealed with (provide_source)
        env = self._child_env = driver_env(self.loopback, self.python_path, self.python)
        self.started_at = time.time()  # this start's marks are the ones from now on
        self.child = self.supervisor.spawn("spark-query", [self.python, "-m", "harness.spark.query", str(job_path)],
                                           log_path=self.spark_dir / "driver.log", env=env, cwd=self.spark_dir)

    def wait_session_ready(self, timeout: float) -> bool:
        """Whether the driver's session got built (its `session_ready` mark) before it stopped or `timeout` passed
        (wait_started then says why not): what starts beside the driver after this takes no CPU from its JVM's
        start."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(m["mark"] == "session_ready" and m["at"] >= self.started_at for m in self.marks()):
                return True
            if self.child is None or not self.child.alive() or self.status().get("state") == "failed":
                return False
            time.sleep(0.05)
        return False

    def wait_started(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        progress = self.run_dir / "progress.jsonl"
        while time.monotonic() < deadline:
            state = self.status().get("state")
            if state in ("failed", "drain_timeout") or (self.child and not self.child.alive()):
                raise RuntimeError(f"Spark query did not start: {self.status().get('error') or 'process exited'}"
                                   f" (see {self.spark_dir / 'driver.log'})")
            # started and its starting offsets fixed: only then is it safe to produce (a query reading from the
            # latest offsets would skip what came before): the first batch recorded, or sooner, Kafka's source
            # having written them to its checkpoint as that batch began (seconds before its end)
            if state == "started" and (self.offsets_fixed() or progress.exists() and progress.stat().st_size > 0):
                return
            time.sleep(0.1)
        raise TimeoutError(f"Spark query not running after {time.time() - self.started_at:.0f}s (since its driver "
                           f"started; see {self.spark_dir / 'driver.log'})")

    def offsets_fixed(self) -> bool:
        """Spark's Kafka source writes the query's starting offsets (resolved from `startingOffsets`) to
        `<checkpoint>/sources/0/0` once, atomically, before its first batch reads anything; from then on they are
        fixed, also across restarts. Other sources: not known here (False)."""
        return self.job.get("format") == "kafka" and (self.checkpoint / "sources" / "0" / "0").is_file()

    def drain(self, end_offsets: dict[str, dict[str, int]], timeout_s: float) -> None:
        atomic.write_json(self.control / "drain.json", {"end_offsets": end_offsets, "timeout_s": timeout_s})

    def wait_exit(self, timeout: float) -> int | None:
        assert self.child is not None
        try:
            return self.child.proc.wait(timeout)
        except Exception:
            return None

    def stop(self, hard: bool = False) -> int | None:
        if self.child is None:
            return None
        if hard:
            self.child.stop_signal = signal.SIGKILL
        code = self.supervisor.stop(self.child, timeout=30)
        return code

    # -- supervision ------------------------------------------------------------------------------------------
    def kill(self, then: Callable[[], object] | None = None) -> int | None:
        """SIGKILL the driver (its whole process group: executors and Python workers too); `watch` restarts it.
        `then` runs once the process is dead and before `watch` can restart it (the checkpoint tampered with while
        the query is down); the restart happens whatever `then` does."""
        with self._lock:
            self._killed = True
            self.kills += 1
            code = self.stop(hard=True)
            if then is not None:
                then()
            return code

    def change(self, successor: Callable[[], "SparkQueryProcess"], graceful: bool,
               then: Callable[[], object] | None = None) -> int | None:
        """Stop the driver and have `watch` start the job of `successor()` (made once the driver has stopped: it
        may read where the checkpoint stands) in its place, on the same checkpoint: a change to the query's code,
        settings or Spark version rolled out as a team would (harness.faults.change). `graceful`: the query is
        asked to stop (`StreamingQuery.stop()`, between batches, as a redeploy does) and killed only if it has
        not exited within a minute; else SIGKILLed wherever it is. `then` runs once it is dead and before the
        successor can start."""
        with self._lock:
            self._killed = True
            self.changes += 1
            if graceful and self.child is not None and self.child.alive():
                (self.control / "stop").touch()
                if self.wait_exit(60) is None:
                    self.child.stop_signal = signal.SIGKILL
            code = self.stop(hard=not graceful)
            try:
                if then is not None:
                    then()
            finally:
                new = successor()
                self.job, self.jar_names, self.python_path = new.job, new.jar_names, new.python_path
                self.runtime, self.python = new.runtime, new.python  # another Spark (an upgrade, a downgrade)
            return code

    def take_down(self, graceful: bool) -> int | None:
        """Stop the driver and keep it down until `bring_back` (an outage, harness.faults.outage): `graceful` asks
        the query to stop between batches (killed if it has not exited within a minute), else SIGKILL."""
        with self._lock:
            self._killed = self._held = True
            self.kills += 1
            if graceful and self.child is not None and self.child.alive():
                (self.control / "stop").touch()
                if self.wait_exit(60) is None:
                    self.child.stop_signal = signal.SIGKILL
            return self.stop(hard=not graceful)

    def bring_back(self, failure_restarts: int | None = None, through_batch: int = -1) -> None:
        """End an outage: `watch` restarts the query from its checkpoint, and restarts it again after each of
        up to `failure_restarts` failures (a production supervisor's restart policy: a crash-loop, bounded; None:
        none, a failure ends the query as usual). The policy ends once a batch after `through_batch` (the last one
        planned before the restart, which a killed query re-runs first) has completed."""
        with self._lock:
            self._held, self._through_batch = False, through_batch
            self._restarting_failures = failure_restarts is not None
            self.failure_restarts = failure_restarts or 0

    @property
    def under_restart_policy(self) -> bool:
        """A restart policy is in force: the query brought back has not yet completed a batch, nor been given up."""
        return self._restarting_failures

    def _ran_a_batch(self) -> bool:
        """Whether the running driver completed a batch planned after the restart: the last progress record
        started after its start, with an id past `bring_back`'s `through_batch`."""
        path = self.run_dir / "progress.jsonl"
        try:
            with open(path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 65_536))
                lines = f.read().split(b"\n")
        except OSError:
            return False
        for line in reversed(lines):
            try:
                record = json.loads(line)
                stamp, batch = record["timestamp"], int(record["batchId"])
            except (ValueError, KeyError, TypeError):
                continue
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            return at >= self.started_at and batch > self._through_batch
        return False

    def stop_restarting(self) -> None:
        """The supervisor's restart policy ends (the outage's query ran its backlog, or the run ends)."""
        with self._lock:
            self._restarting_failures, self.failure_restarts = False, 0

    def watch(self, timeline=None) -> str:
        """'running' | 'restarting' (started again after a kill, not yet running its query; or held down) |
        'failed' | 'finished' (once/availableNow ended on their own) | 'exited' (ended otherwise) | 'gave_up' (it
        failed again after its last allowed restart: a crash-loop, `gave_up` says why)."""
        with self._lock:
            if self.child is None:
                return "exited"
            if self.gave_up:
                return "gave_up"
            if not self.child.alive() and self._held:
                return "restarting"
            if not self.child.alive() and not self._killed and self._restarting_failures:
                return self._after_failure(timeline)
            if not self.child.alive():
                if self._killed:
                    self._killed = False
                    self.restarts += 1
                    self.start()
                    if timeline is not None:
                        timeline.add("query_restarted", n=self.restarts)
                    return "restarting"
                state = self.status().get("state")
                return {"failed": "failed", "finished": "finished", "drained": "finished"}.get(state, "exited")
            state = self.status().get("state")
            if state == "failed" and self._restarting_failures:  # it will exit: restarted or given up then
                return "restarting"
            if state == "started" and self._restarting_failures and self._ran_a_batch():
                self._restarting_failures, self.failure_restarts = False, 0  # through its first batch: no loop
            if state == "failed":  # the query is gone though its driver is still stopping: no reason to wait
                return "failed"
            return "running" if state == "started" else "restarting"

    def _fatal_jvm_line(self) -> str | None:
        """The driver JVM's own last words since this start (its log): the out-of-memory error it died of, which
        the Python side of a driver whose JVM exited never saw; None when there is none."""
        try:
            with open(self.spark_dir / "driver.log", "rb") as f:
                f.seek(getattr(self, "_log_from", 0))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        lines = [line.strip() for line in text.splitlines() if "java.lang.OutOfMemoryError" in line]
        terminating = [line for line in lines if line.startswith("Terminating due to")]
        return "driver JVM: " + (terminating or lines)[-1][:300] if lines else None

    def _after_failure(self, timeline) -> str:
        """A driver that ended on its own under a restart policy: restarted while restarts are left, else given
        up on (the crash-loop bounded). Called with the lock held."""
        status = self.status()
        if status.get("state") in ("finished", "drained"):
            return "finished"
        error = str(status.get("error") or "")
        fatal = self._fatal_jvm_line()
        if fatal and fatal not in error:  # a JVM that exited on it (-XX:+ExitOnOutOfMemoryError) said why in its log
            error = f"{error}\n{fatal}".strip()
        crash = {"at": time.time(), "state": status.get("state"), "error": error[-8000:] if fatal else error[:8000],
                 "exit_code": self.child.proc.returncode if self.child else None}
        self.crashes.append(crash)
        if self.failure_restarts <= 0:
            self._restarting_failures = False
            self.gave_up = (f"[{CRASH_LOOP}] the query failed {len(self.crashes)} times after its restart and "
                            f"was not restarted again; last error: {crash['error'][:300] or 'none recorded'}")
            if timeline is not None:
                timeline.add("query_gave_up", crashes=len(self.crashes))
            return "gave_up"
        self.failure_restarts -= 1
        self.restarts += 1
        self.start()
        if timeline is not None:
            timeline.add("query_restarted_after_failure", n=len(self.crashes), error=crash["error"][:300])
        return "restarting"
