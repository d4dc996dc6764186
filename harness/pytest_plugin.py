"""The harness inside a team's own pytest suite (registered as a `pytest11` entry point: installing the package is
enough, nothing to import in a conftest).

Every fixture's name starts with `harness_`: a plugin's fixtures share one namespace with every other installed
plugin's, and the first names this plugin used collided (pytest-spark's `spark_session`: whichever plugin loaded
last silently replaced the other's). A team that wants shorter names aliases them in its conftest
(`def spark(harness_spark_session): return harness_spark_session`).

Fixtures (session-scoped where start-up costs seconds; every process under a harness Supervisor, stopped at
session end, also on Ctrl-C, and killed by the kernel with pytest if pytest itself dies):

- `harness_kafka_cluster`: one embedded KRaft broker (`harness.backends.kafka.embedded.EmbeddedKafka`:
  `.bootstrap`, `.create_stream(name, partitions, config)`, `.end_offsets(name)`) shared by the session; tests
  share it, so each test uses topic names of its own.
- `harness_kafka_cluster_factory(nodes=3)`: a cluster of that many nodes, started once per node count and shared
  by the session. A factory rather than a marker because a marker can only be read by function-scoped fixtures,
  while a team's own module- or session-scoped fixtures need the cluster too.
- `harness_eventhubs_emulator`: the project's Event Hubs emulator as a supervised process (`EventHubsEmulator`:
  `.connection_string(hub)`, `.create_hub(name, partitions)`, `.control(path, body)` for its faults).
- `harness_spark_session`: local[2] with the harness's BASE_CONF and the Kafka connector's jars, PYSPARK_PYTHON
  set to this interpreter; `harness_spark_session_conf` (override it) adds settings.
- `harness_supervisor`: the Supervisor all of the above run under.
- `harness_run(scenario, **overrides) -> HarnessRun`: one `harness run`, by name (the harness's scenarios/) or
  path (a team's own file: relative to the current directory, the rootdir or the test file), overrides as
  dotted keys (`**{"producers.duration_s": 10}`, or `producers__duration_s=10`) or nested dicts
  (`producers={"duration_s": 10}`, merged key by key; `replace({...})` replaces a table whole). The result is
  the typed result (a `RunResult` subclass) with `.assert_passed()`; `assert_passed(result)` is the same. A run
  that failed fails the test; an unjudged one (no check failed, but one could not be judged, or the machine was
  too busy with other work to judge performance) fails it too, with a message that starts "unjudged:" and gives
  the cause, through `RunUnjudged`, which a test can catch (e.g. to skip on a busy machine).
  Runs go under the test's tmp_path (or `--harness-runs-dir`) with CI=true (quiet); the run directories of
  passing runs of passing tests are removed after the test unless `--harness-keep-runs`.

In-process or subprocess: a subprocess, `python -m harness run ...`, exactly what a user and CI run. The runner
owns process-wide state that must not leak into the test process: its SIGTERM handler and atexit hooks, its
Ctrl-C handling (it turns KeyboardInterrupt into an interrupted run with exit 130, which in-process would swallow
pytest's own Ctrl-C), `sys.path` entries for the scenario's user modules, and a resource sampler that measures
"the runner" (in-process: pytest with everything the session loaded). What in-process would give, a traceback,
the run already records: result.json's error and the run's log, whose paths the failure message prints. The
runner subprocess is supervised (its own process group, dies with pytest); on Ctrl-C it is sent SIGINT, stops
everything and writes its partial result, and then the interrupt goes on to pytest.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import PrivateAttr

from harness.check import status_of
from harness.records.result import RunResult
from harness.supervisor import log_lines, log_tail

RUN_TIMEOUT_S = 1800.0  # one run's wall-clock bound (a scenario's traffic plus start, drain and the verdict)
INTERRUPT_GRACE_S = 120.0  # what an interrupted runner gets to stop its processes and write its partial result
KAFKA_HEAP_MB = 384


# -- the result and its assertion ----------------------------------------------------------------------------------
class RunUnjudged(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The run decided nothing either way: no check failed, but one could not be judged, or the machine was too
    busy with other work to judge performance (result.json `unjudged_reason`). A test failure like any other
    (pytest's own Failed), of a type of its own so a test can tell it apart: `except RunUnjudged`."""


class HarnessRun(RunResult):
    """result.json as the typed RunResult, plus where the run went and how its process ended."""

    _exit_code: int | None = PrivateAttr(default=None)
    _log_path: Path | None = PrivateAttr(default=None)

    @property
    def exit_code(self) -> int | None:
        """0 pass, 1 a check failed, 3 unjudged, 130 the run was interrupted (as `harness run`)."""
        return self._exit_code

    @property
    def run_path(self) -> Path:
        return Path(self.run_dir)

    @property
    def log_path(self) -> Path | None:
        """The runner's console output (stdout and stderr)."""
        return self._log_path

    @property
    def failed_checks(self) -> list:
        return [c for c in self.checks if c.counts_against]

    @property
    def report_paths(self) -> list[Path]:
        return [self.run_path / name for name in ("report.html", "report.md")]

    def failure_message(self) -> str:
        return failure_message(self)

    def assert_passed(self) -> None:
        assert_passed(self)


def failure_message(result: RunResult) -> str:
    """The verdict, each failed check with its detail, why the run could not be judged, and where to look."""
    lines = [f"harness run {result.scenario!r} on {result.backend}: verdict {result.verdict.upper()}"]
    failed = [c for c in result.checks if status_of(c.model_dump()) == "fail"]
    if failed:
        lines.append(f"failed checks ({len(failed)} of {len(result.checks)}):")
        lines += [f"  - {c.name}: {c.detail}" for c in failed]
    undecided = [c for c in result.checks if c.counts_against and status_of(c.model_dump()) != "fail"]
    if undecided:
        lines.append(f"unjudged checks ({len(undecided)} of {len(result.checks)}):")
        lines += [f"  - {c.name}: {c.detail}" for c in undecided]
    if result.unjudged_reason:
        lines.append(f"not judged: {result.unjudged_reason}")
    if result.query.error:
        lines.append(f"query error: {result.query.error[:1000]}")
    run_dir = Path(result.run_dir)
    lines.append(f"report: {run_dir / 'report.html'} ({run_dir / 'report.md'})")
    lines.append(f"run directory: {run_dir}")
    log = getattr(result, "log_path", None)
    if log is not None:
        lines.append(f"runner log: {log}")
    from harness.secrets import scrub

    return scrub("\n".join(lines))  # an error quoted from the run may echo a setting: no secret (harness.secrets)


def assert_passed(result: RunResult) -> None:
    """Fails the test unless the run passed, with a message that needs no traceback: the verdict, every failed
    check and its detail, the report and the run directory. An unjudged run raises RunUnjudged, its message
    starting "unjudged: " and the cause."""
    __tracebackhide__ = True
    if result.verdict == "unjudged":
        raise RunUnjudged(f"unjudged: {result.unjudged_reason or 'the run could not be judged'}\n"
                          + failure_message(result), pytrace=False)
    if result.verdict != "pass":
        pytest.fail(failure_message(result), pytrace=False)


# -- overrides -----------------------------------------------------------------------------------------------------
class replace(dict):  # noqa: N801 - reads as a function at the call site: producers={"rate": replace(...)}
    """A table given whole: it replaces the scenario's table instead of being merged into it key by key
    (e.g. another rate kind, whose keys differ from the file's)."""


def toml_value(value: Any) -> str:
    """A Python value as the TOML literal `--set` reads back (strings quoted, tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            return {"nan": "nan", "inf": "inf", "-inf": "-inf"}[str(value)]
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value))  # JSON string escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"override value {value!r} ({type(value).__name__}): not a TOML value")


def override_args(overrides: dict[str, Any]) -> list[str]:
    """Keyword overrides as `--set` texts. A key is dotted (`"producers.duration_s"`; `__` reads as a dot, so
    `producers__duration_s=10` works as a keyword); a dict value is merged key by key, a `replace` value is set
    whole. Inside an option table (`spark.conf`, ...) a nested key is one option name, dots and all, as `--set`
    reads it."""
    out: list[str] = []

    def walk(key: str, value: Any) -> None:
        if isinstance(value, dict) and not isinstance(value, replace):
            if not value:
                raise ValueError(f"override {key!r}: an empty table merges nothing (replace({{}}) empties it)")
            for k, v in value.items():
                walk(f"{key}.{k}", v)
        else:
            out.append(f"{key}={toml_value(dict(value) if isinstance(value, replace) else value)}")

    for key, value in overrides.items():
        walk(key.replace("__", "."), value)
    return out


# -- running -------------------------------------------------------------------------------------------------------
class HarnessRunner:
    """Runs `python -m harness run` as a supervised child and reads its result.json back as a HarnessRun."""

    def __init__(self, supervisor, runs_dir: Path, search: list[Path], pythonpath: list[Path]):
        self.supervisor = supervisor
        self.runs_dir = Path(runs_dir)
        self.search = list(search)  # where a relative scenario path is looked for, after the current directory
        self.pythonpath = [str(p) for p in pythonpath]  # the project under test, importable in the run
        self.count = 0

    def scenario_arg(self, scenario: str | os.PathLike, extra_search: list[Path] = ()) -> str:
        """A name stays a name (the harness's scenarios/); a path is made absolute, found relative to the current
        directory, the test's directory or the rootdir."""
        text = str(scenario)
        if not (text.endswith(".toml") or os.sep in text or isinstance(scenario, os.PathLike)):
            return text
        path = Path(text)
        if path.is_absolute():
            return str(path)
        for base in [Path.cwd(), *extra_search, *self.search]:
            if (base / path).is_file():
                return str((base / path).resolve())
        return str(path)  # the runner names it: no such scenario file (exit 2)

    def run(self, scenario: str | os.PathLike, *, out: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = RUN_TIMEOUT_S, search: list[Path] = (), **overrides: Any) -> HarnessRun:
        from harness.config import ConfigError

        __tracebackhide__ = True
        arg = self.scenario_arg(scenario, list(search))
        self.count += 1
        if out is None:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(arg).stem)[:40]
            out = self.runs_dir / f"{self.count:02d}-{stem}"
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        # --replace: a --harness-runs-dir kept from an earlier session holds the same names (harness.files.outdir)
        argv = [sys.executable, "-m", "harness", "run", arg, "--out", str(out), "--replace"]
        for text in override_args(overrides):
            argv += ["--set", text]
        full_env = dict(os.environ)
        full_env.update({"HARNESS_RUNS": str(self.runs_dir), "CI": "true", "PYTHONUNBUFFERED": "1"})
        full_env["PYTHONPATH"] = os.pathsep.join(self.pythonpath + [p for p in [full_env.get("PYTHONPATH")] if p])
        full_env.update(env or {})
        log = out.with_name(out.name + ".log")
        (out / "result.json").unlink(missing_ok=True)  # a run that writes none must not be read as an old one's
        child = self.supervisor.spawn(f"harness-run-{self.count}", argv, log_path=log, env=full_env,
                                      stop_signal=signal.SIGINT)
        try:
            code = child.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.supervisor.stop(child, timeout=INTERRUPT_GRACE_S)
            pytest.fail(f"harness run {arg} did not finish within {timeout:.0f}s (stopped; partial results in "
                        f"{out}, log {log})\n{log_tail(log, 30)}", pytrace=False)
        except BaseException:  # Ctrl-C, pytest-timeout: the runner gets SIGINT, stops its processes and writes
            self.supervisor.stop(child, timeout=INTERRUPT_GRACE_S)  # what it has; then the interrupt goes on
            raise
        self.supervisor.stop(child)  # reaps it and closes its log
        if code == 2:
            errors = [line[len("error: "):] for line in log_lines(log) if line.startswith("error: ")]
            raise ConfigError("\n".join(errors) or log_tail(log, 30))
        result_file = out / "result.json"
        if not result_file.is_file():
            if (out / "sweep.json").is_file():
                raise ConfigError(f"{arg}: a sweep has no single result; harness_run runs one scenario "
                                  f"(its sweep is in {out})")
            pytest.fail(f"harness run {arg} exited {code} without a result.json (log {log}):\n"
                        f"{log_tail(log, 30)}", pytrace=False)
        result = HarnessRun.model_validate(json.loads(result_file.read_text(encoding="utf-8")))
        if not result.run_dir:
            result.run_dir = str(out)
        result._exit_code = code
        result._log_path = log
        return result



# -- the Event Hubs emulator ---------------------------------------------------------------------------------------
class EventHubsEmulator:
    """The project's emulator (one supervised process on loopback) with hub `eh1` (4 partitions) to start with."""

    def __init__(self, backend):
        self.backend = backend  # harness.backends.eventhubs.emulated.EmulatedEventHubs

    @property
    def hub(self) -> str:
        return self.backend.hub

    @property
    def control_url(self) -> str:
        return self.backend.control_url

    def connection_string(self, hub: str | None = None) -> str:
        """The namespace's connection string; with `hub`, naming it (EntityPath), as the SDK and the Spark source
        take it."""
        from harness.backends.eventhubs.common import with_entity

        conn = self.backend.connection_string()
        return with_entity(conn, hub) if hub else conn

    def create_hub(self, name: str, partitions: int = 4) -> dict:
        """A hub, empty (an existing one of that name is replaced), with consumer group $Default."""
        return self.control(f"hubs/{name}/recreate", {"partition_count": int(partitions)})["hub"]

    def control(self, path: str, body: dict | None = None) -> dict:
        """The emulator's control API (harness.emulator.control): faults such as `hubs/<hub>/delete`."""
        return self.backend.control(path, body)


# -- options and fixtures ------------------------------------------------------------------------------------------
def pytest_addoption(parser) -> None:
    group = parser.getgroup("harness", "spark-stream-harness")
    group.addoption("--harness-keep-runs", action="store_true", default=False,
                    help="keep every harness_run run directory (default: passing runs of passing tests are removed)")
    group.addoption("--harness-runs-dir", default=None, metavar="DIR",
                    help="put harness_run run directories under DIR (kept) instead of each test's tmp_path")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "harness: a test that runs harness scenarios (spark-stream-harness)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item._harness_failed = True  # a failed test keeps its run directories


@pytest.fixture(scope="session")
def harness_supervisor():
    """Every process the plugin starts (brokers, the emulator, runner subprocesses) is under this Supervisor."""
    from harness.supervisor import Supervisor

    sup = Supervisor(f"pytest-{uuid.uuid4().hex}")
    yield sup
    sup.stop_all()


@pytest.fixture(scope="session")
def harness_kafka_cluster_factory(harness_supervisor, tmp_path_factory):
    """`harness_kafka_cluster_factory(nodes=3)`: an embedded KRaft cluster of that many nodes, started at its
    first use and shared by the session (one per node count)."""
    from harness.backends.kafka.embedded import EmbeddedKafka

    clusters: dict[int, EmbeddedKafka] = {}

    def get(nodes: int = 1) -> EmbeddedKafka:
        if nodes not in clusters:
            cluster = EmbeddedKafka(nodes=nodes, heap_mb=KAFKA_HEAP_MB)
            cluster.start(tmp_path_factory.mktemp(f"kafka-{nodes}"), harness_supervisor)
            clusters[nodes] = cluster
        return clusters[nodes]

    yield get
    for cluster in clusters.values():
        cluster.stop()


@pytest.fixture(scope="session")
def harness_kafka_cluster(harness_kafka_cluster_factory):
    """One embedded broker for the session (`.bootstrap` is its bootstrap.servers)."""
    return harness_kafka_cluster_factory(1)


@pytest.fixture(scope="session")
def harness_eventhubs_emulator(harness_supervisor, tmp_path_factory):
    """The project's Event Hubs emulator on loopback with hub `eh1` (4 partitions), shared by the session."""
    from harness.backends.eventhubs.emulated import EmulatedEventHubs

    backend = EmulatedEventHubs("eh1", 4)
    backend.start(tmp_path_factory.mktemp("eventhubs"), harness_supervisor)
    yield EventHubsEmulator(backend)
    backend.stop()


@pytest.fixture(scope="session")
def harness_spark_session_conf() -> dict[str, str]:
    """Override in a conftest to add Spark settings to `harness_spark_session` (they win over the harness's)."""
    return {}


@pytest.fixture(scope="session")
def harness_spark_session(tmp_path_factory, harness_spark_session_conf):
    """local[2] as the harness runs queries (BASE_CONF: loopback, no UI, UTC), with Spark's Kafka source on the
    classpath. Its JVM is PySpark's gateway process, which exits when this Python process does."""
    from pyspark.sql import SparkSession

    from harness.jvm.artifacts import resolve
    from harness.spark.process import BASE_CONF

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = dict(BASE_CONF)
    conf["spark.jars"] = ",".join(str(j) for j in resolve("spark-kafka"))
    conf["spark.local.dir"] = str(tmp_path_factory.mktemp("spark-local"))
    conf.update(harness_spark_session_conf)
    builder = SparkSession.builder.master("local[2]").appName("harness-pytest")
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _project_paths(config) -> list[Path]:
    """The project under test, importable in a run as in its tests: the rootdir and the ini `pythonpath`."""
    paths = [Path(p) for p in (config.getini("pythonpath") or [])]
    return list(dict.fromkeys([*paths, Path(config.rootpath)]))


@pytest.fixture(scope="session")
def harness_runner(request, harness_supervisor, tmp_path_factory) -> HarnessRunner:
    """The session's runner, for session- or module-scoped fixtures that share one run:
    `harness_runner.run(scenario, out=None, env=None, **overrides)`."""
    config = request.config
    base = config.getoption("--harness-runs-dir")
    runs = Path(base).resolve() / f"session-{uuid.uuid4().hex[:8]}" if base else tmp_path_factory.mktemp("harness")
    return HarnessRunner(harness_supervisor, runs, [Path(config.rootpath)], _project_paths(config))


@pytest.fixture
def harness_run(request, harness_runner, tmp_path):
    """`harness_run(scenario, **overrides) -> HarnessRun`: one run in this test's tmp_path (or --harness-runs-dir)."""
    config = request.config
    base = config.getoption("--harness-runs-dir")
    runs_dir = (Path(base).resolve() / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]) if base \
        else tmp_path / "harness"
    results: list[HarnessRun] = []

    def run(scenario: str | os.PathLike, **overrides: Any) -> HarnessRun:
        __tracebackhide__ = True
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(str(scenario)).stem)[:40]
        out = overrides.pop("out", None) or runs_dir / f"{len(results) + 1:02d}-{stem}"
        result = harness_runner.run(scenario, out=out, search=[Path(request.path).parent], **overrides)
        results.append(result)
        return result

    yield run
    keep = config.getoption("--harness-keep-runs") or base or getattr(request.node, "_harness_failed", False)
    if not keep:
        for result in results:
            if result.verdict == "pass":
                shutil.rmtree(result.run_path, ignore_errors=True)
