"""The PySpark lines the query under test can run on besides the project's own (`spark.pyspark`), each in a
virtualenv of its own in the cache, so that one checkpoint can be driven by an older Spark and then the project's
(rehearsing an upgrade) without a second checkout.

Why a virtualenv per line: a PySpark release carries its Spark (the jars, Scala's line) and pins its py4j; two
cannot live in one interpreter. The query process (`python -m harness.spark.query job.json`) imports only the
stdlib, the harness's own modules and pyspark, so a runtime's virtualenv holds `pyspark==X` and what pip brings
with it (py4j), and more only where a query needs it: 3.5's nothing else (no pandas, pyarrow or numpy: PySpark
3.5 with numpy 2 is a problem only where numpy is installed); 4.0's also pandas, pyarrow and protobuf, which
transformWithStateInPandas (the sessions query) imports in its Python workers. It imports the harness from the
harness's own source, first on its PYTHONPATH (harness.spark.process), so both lines run the same code.

Where: `<cache>/pyspark/<version>-<key>/`, the key a hash of what goes in (the requirements and the interpreter
the virtualenv is made from: a virtualenv is bound to it). Built in place (a virtualenv is not relocatable) under
a file lock, so a second caller waits for the first; complete only once its stamp (`runtime.json`, what the
built interpreter itself reports) is written, last: a half-built one is never used, and the next build starts it
afresh. pip's log stays in the cache when the build fails (`<cache>/pyspark/<version>-<key>.log`).

What each line can run is judged when the scenario loads (`spark_refusal` for the `[spark]` table, `refusal` for
its backend and query, harness.config): pure checks over the scenario's fields, with no virtualenv made.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import harness
from harness.files.paths import cache_dir
from harness.jvm import artifacts
from harness.jvm.artifacts import SPARK_KAFKA, SPARK_KAFKA_35, SPARK_KAFKA_40, SetupError

STAMP = "runtime.json"
# the masters a runtime runs on: local, local[N], local[N,F], local[*]
LOCAL = re.compile(r"^local(\[([1-9]\d*|\*)(,[1-9]\d*)?\])?$")


@dataclass(frozen=True)
class Runtime:
    """A PySpark line offered besides the project's: its release, its Scala line, the artifact sets of
    harness/jvm/ that stand in for the project's (harness.jvm.artifacts.SPARK_KAFKA -> its own connector
    build), and what pip installs into its virtualenv."""
    line: str
    pyspark: str
    scala: str
    jar_sets: Mapping[str, str] = field(hash=False)
    requirements: tuple[str, ...] = ()

    def jar_set(self, name: str) -> str:
        """The runtime's artifact set for the project's `name` (SetupError when it has none: no jar of another
        Spark may reach this one's classpath)."""
        try:
            return self.jar_sets[name]
        except KeyError:
            raise SetupError(f"PySpark {self.pyspark} (spark.pyspark = {self.line!r}) has no build of the artifact "
                             f"set {name!r}; it has: {', '.join(self.jar_sets) or 'none'}") from None

    def as_job(self) -> dict:
        """What the query's job records (job.json's `runtime`): which Spark ran."""
        return {"line": self.line, "pyspark": self.pyspark, "scala": self.scala, "jar_sets": dict(self.jar_sets)}


RUNTIMES = {
    "3.5": Runtime("3.5", "3.5.7", "2.12", {SPARK_KAFKA: SPARK_KAFKA_35}, ("pyspark==3.5.7",)),
    # with what transformWithStateInPandas imports in its Python workers (the sessions query; run on 4.0.1 here), at
    # the project's own tested versions (constraints.txt)
    "4.0": Runtime("4.0", "4.0.1", "2.13", {SPARK_KAFKA: SPARK_KAFKA_40},
                   ("pyspark==4.0.1", "pandas==2.3.3", "pyarrow==26.0.1", "protobuf==6.33.6")),
}
LINES = tuple(RUNTIMES)
# The first line that has what a feature needs; a feature a line lacks is refused at load (`refusal`).
REAL_TIME_FROM = "4.1"  # Trigger.RealTime
# the Event Hubs source's admission control (pyspark.sql.streaming.datasource): not in 3.5's nor in 4.0.1's PySpark
# (looked for in their virtualenvs); in the project's 4.3
PYTHON_STREAMING_SOURCE_FROM = "4.1"
TRANSFORM_WITH_STATE_FROM = "4.0"  # transformWithStateInPandas
# built-in queries that need more than a line's PySpark has: query -> (the first line with it, why)
QUERIES_FROM = {"sessions": (TRANSFORM_WITH_STATE_FROM, "sessions is a transformWithStateInPandas query "
                                                        "(Spark 4.0+)")}


def project_line() -> str:
    """The project's own PySpark line ("4.3"), from the installed distribution's version (not imported: a
    quarter second of CPU): what `spark.pyspark` names to mean the project's (a change back to it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return ".".join(version("pyspark").split(".")[:2])
    except PackageNotFoundError:
        return ""


def get(line: str) -> Runtime:
    try:
        return RUNTIMES[line]
    except KeyError:
        raise SetupError(f"no PySpark line {line!r}; offered: {', '.join(LINES)}") from None


def _at_least(line: str, first: str) -> bool:
    return tuple(map(int, line.split("."))) >= tuple(map(int, first.split(".")))


def spark_refusal(spark) -> str | None:
    """Why the `[spark]` table cannot run on its spark.pyspark line (a sentence naming the field and what is
    allowed), or None (no line asked, or it runs): its master and trigger."""
    line = spark.pyspark
    if line is None:
        return None
    named = f"spark.pyspark = \"{line}\" (PySpark {get(line).pyspark})"
    if spark.cluster != "none" or not LOCAL.match(spark.master):
        what = "cluster = \"standalone\"" if spark.cluster != "none" else f"master = {spark.master!r}"
        return (f"{named} runs the query in local mode only (master = \"local[N]\"); spark.{what} starts executors "
                "the harness proves with the project's own Spark only; leave spark.pyspark out, or use a local[N] "
                "master")
    if spark.trigger.kind == "realTime" and not _at_least(line, REAL_TIME_FROM):
        return (f"{named}: spark.trigger kind = \"realTime\" needs Spark {REAL_TIME_FROM}+ (real-time mode); "
                "leave spark.pyspark out (the project's PySpark runs it) or use processingTime")
    return None


def refusal(scenario) -> str | None:
    """Why `scenario`'s backend or query cannot run on its spark.pyspark line (a sentence naming the field and what
    is allowed), or None."""
    line = scenario.spark.pyspark
    if line is None:
        return None
    named = f"spark.pyspark = \"{line}\" (PySpark {get(line).pyspark})"
    if scenario.backend.python_data_source and not _at_least(line, PYTHON_STREAMING_SOURCE_FROM):
        return (f"{named}: backend.kind = {scenario.backend.kind!r} reads through the project's Python data source "
                "(format(\"eventhubs\")), whose streaming reader takes Spark's admission control "
                "(pyspark.sql.streaming.datasource: ReadLimit, SupportsTriggerAvailableNow), which PySpark "
                f"{get(line).pyspark} lacks; use backend.protocol = \"kafka\" (Spark's own Kafka source) or leave "
                "spark.pyspark out")
    needs = QUERIES_FROM.get(scenario.spark.query)
    if needs and not _at_least(line, needs[0]):
        lines = [v for v in LINES if _at_least(v, needs[0])]
        return (f"{named}: spark.query = {scenario.spark.query!r}: {needs[1]}; run it on "
                + (f"spark.pyspark = {' or '.join(repr(v) for v in lines)}, or " if lines else "")
                + "the project's PySpark (leave spark.pyspark out)")
    return None


# -- the virtualenv ----------------------------------------------------------------------------------------------
def venv_key(rt: Runtime, interpreter: str | None = None) -> str:
    """A hash of what goes into the runtime's virtualenv: its requirements and the interpreter it is made from
    (its version and where it lives: a virtualenv links to it)."""
    interpreter = interpreter or f"{sys.implementation.name} {sys.version} {Path(sys.base_prefix).resolve()}"
    h = hashlib.sha256()
    for part in (*rt.requirements, interpreter):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:12]


def venv_dir(rt: Runtime) -> Path:
    return cache_dir() / "pyspark" / f"{rt.pyspark}-{venv_key(rt)}"


def _python(home: Path) -> Path:
    return home / "bin" / "python"


def stamp(home: Path) -> dict | None:
    """The complete virtualenv's record (its interpreter, its PySpark's version and directory), or None while
    it is not complete."""
    try:
        data = json.loads((home / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and _python(home).exists() else None


def prepare(line: str, console=None, jar_sets: tuple[str, ...] = ()) -> Path:
    """The runtime's Python interpreter, its virtualenv made first when it is not complete (the first time, a
    minute or more: pip fetches and builds PySpark), and its builds of the project's artifact sets `jar_sets`
    fetched (harness.jvm.artifacts); in one console step when anything is made. SetupError says what failed and
    where pip's log is."""
    rt = get(line)
    home = venv_dir(rt)
    missing = [name for name in jar_sets if not artifacts.resolved(rt.jar_set(name))]
    if stamp(home) is not None and not missing:
        return _python(home)
    made = ([f"its virtualenv (pip installs {', '.join(rt.requirements)})"] if stamp(home) is None else []) + [
        f"{rt.jar_set(name)}'s jars" for name in missing]
    step = (console.step(f"PySpark {rt.pyspark} for spark.pyspark = \"{line}\", once: {' and '.join(made)}")
            if console is not None else nullcontext())
    with step:
        if stamp(home) is None:
            with artifacts.locked(f"pyspark-{home.name}"):
                if stamp(home) is None:  # a second caller finds it made by the first
                    _build(rt, home)
        for name in missing:
            jars(line, name)
    return _python(home)


def pyspark_home(line: str) -> Path:
    """The runtime's PySpark directory (its SPARK_HOME, with its Spark's jars), its virtualenv made if need be."""
    rt = get(line)
    prepare(line)
    return Path(stamp(venv_dir(rt))["pyspark_home"])


def jars(line: str, name: str, quiet: bool = True) -> list[Path]:
    """The jars of the runtime's own build of the project's artifact set `name`, less what its PySpark ships."""
    return artifacts.resolve(get(line).jar_set(name), quiet, spark_jars=pyspark_home(line) / "jars")


def harness_source(package: Path | None = None) -> Path:
    """Where a runtime's interpreter imports this harness from (first on its PYTHONPATH): the directory holding the
    `harness` package, a checkout's root. Not when that directory holds the project's own pyspark too (the harness
    installed into site-packages): there, a directory of the cache holding only a link to the package, so the
    runtime's own PySpark is the one it imports."""
    package = (package or Path(harness.__file__).parent).resolve()
    root = package.parent
    if not (root / "pyspark").exists():
        return root
    linked = cache_dir() / "pyspark" / f"harness-{hashlib.sha256(str(package).encode()).hexdigest()[:12]}"
    link = linked / "harness"
    if not link.is_symlink() or link.resolve() != package:
        linked.mkdir(parents=True, exist_ok=True)
        tmp = linked / f".harness-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)  # atomic: a run starting beside this one sees the old link or the new
    return linked


PROBE = ("import json, sys, pathlib, pyspark; print(json.dumps({'python': sys.executable, 'version': "
         "pyspark.__version__, 'pyspark_home': str(pathlib.Path(pyspark.__file__).resolve().parent)}))")


def _build(rt: Runtime, home: Path) -> None:
    """The virtualenv made in place: `-m venv` with this interpreter, pip installs the requirements, the built
    interpreter imports its PySpark and says which; the stamp last."""
    log = home.with_name(home.name + ".log")
    shutil.rmtree(home, ignore_errors=True)  # a build that died half-way: never used, started afresh
    home.parent.mkdir(parents=True, exist_ok=True)
    steps = [("creating the virtualenv", [sys.executable, "-m", "venv", str(home)], False),
             ("pip install", [str(_python(home)), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                              *rt.requirements], False),
             ("importing its pyspark", [str(_python(home)), "-I", "-c", PROBE], True)]
    with open(log, "w", encoding="utf-8") as f:
        for what, argv, read in steps:
            f.write(f"$ {' '.join(argv)}\n")
            f.flush()
            try:  # pip's output goes to the log as it comes (a tail of it is the error); the probe's is read
                proc = subprocess.run(argv, stdout=subprocess.PIPE if read else f,
                                      stderr=subprocess.STDOUT, text=True)
            except OSError as exc:
                proc = subprocess.CompletedProcess(argv, 127, f"{exc}\n")
            f.write(proc.stdout or "")
            f.flush()
            if proc.returncode != 0:
                shutil.rmtree(home, ignore_errors=True)
                tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:])
                raise SetupError(f"PySpark {rt.pyspark}'s virtualenv for spark.pyspark = {rt.line!r} ({home}): "
                                 f"{what} failed (exit {proc.returncode}):\n{tail}\nthe whole log: {log}")
            out = proc.stdout or ""
    record = json.loads(out.strip().splitlines()[-1])
    if record.get("version") != rt.pyspark:
        shutil.rmtree(home, ignore_errors=True)
        raise SetupError(f"PySpark {rt.pyspark}'s virtualenv ({home}) imported pyspark {record.get('version')}; "
                         f"the whole log: {log}")
    record.update(rt.as_job(), requirements=list(rt.requirements))
    (home / STAMP).write_text(json.dumps(record, indent=2) + "\n")
    log.unlink(missing_ok=True)
