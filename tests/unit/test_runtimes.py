"""The older PySpark lines a query may run on (spark.pyspark, harness.spark.runtimes), without building one: what
the scenario model refuses on each line and why, the artifact sets each line stands in for the project's (its
pom's connector built for its own Spark and Scala), the jars left out against the runtime's own Spark, the
virtualenv's key and its stamp, the query process's job and command with a runtime, and the Spark 3.5 error class
in a failed query's text. A real virtualenv and a run on each line: tests/integration/test_pyspark_lines.py."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from test_config import MINIMAL, write

from harness.config import ConfigError, load_scenario
from harness.jvm import artifacts
from harness.jvm.artifacts import CLASSPATHS, HERE, PROJECT_CLASSPATHS, SPARK_KAFKA, SPARK_SETS, SetupError
from harness.records import environment
from harness.spark import runtimes
from harness.spark.process import SparkQueryProcess
from harness.spark.query import error_text
from harness.spark.runtimes import LINES, RUNTIMES, Runtime


def load(tmp_path, text=MINIMAL, overrides=()):
    return load_scenario(write(tmp_path, text), list(overrides))[0]


def refused(tmp_path, overrides, text=MINIMAL) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_scenario(path, list(overrides))
    msg = str(err.value)
    assert path in msg, msg
    return msg


# -- the scenario model ------------------------------------------------------------------------------------------
def test_unset_is_the_projects_own(tmp_path):
    assert load(tmp_path).spark.pyspark is None


@pytest.mark.parametrize("given", ["3.5", '"3.5"', "4.0", '"4.0"'])
def test_a_line_given_quoted_or_as_toml_reads_it_is_the_same_line(tmp_path, given):
    """`--set spark.pyspark=3.5` and `pyspark = 3.5` are TOML floats: the line, not a refusal."""
    assert load(tmp_path, overrides=[f"spark.pyspark={given}"]).spark.pyspark == given.strip('"')


@pytest.mark.parametrize("given", ["3.4", '"4.2"', '"4"', "3"])
def test_a_line_not_offered_names_the_field_and_the_lines(tmp_path, given):
    msg = refused(tmp_path, [f"spark.pyspark={given}"])
    assert "spark.pyspark" in msg and "allowed: '3.5', '4.0'" in msg and "or '4.3'" in msg, msg


@pytest.mark.parametrize("given", ['"4.3"', "4.3"])
def test_the_projects_own_line_is_the_project(tmp_path, given):
    """A change back to the project's Spark (harness.faults.change) names its line: the same as unset."""
    from importlib.metadata import version

    assert version("pyspark").startswith("4.3.")  # what the project installs (constraints.txt)
    assert load(tmp_path, overrides=[f"spark.pyspark={given}"]).spark.pyspark is None


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize("overrides,field", [
    (['spark.master="local-cluster[2,1,1024]"'], "spark.master = 'local-cluster[2,1,1024]'"),
    (['spark.master="spark://h:7077"'], "spark.master = 'spark://h:7077'"),
    (["spark.master=yarn"], "spark.master = 'yarn'"),
    (["spark.cluster=standalone"], 'spark.cluster = "standalone"'),
])
def test_a_cluster_is_refused_on_every_line(tmp_path, line, overrides, field):
    msg = refused(tmp_path, [f"spark.pyspark={line}", *overrides])
    assert f'spark.pyspark = "{line}"' in msg and field in msg and 'local mode only (master = "local[N]")' in msg, msg


@pytest.mark.parametrize("master", ["local", "local[1]", "local[2]", "local[*]", "local[2,3]"])
def test_local_masters_run_on_a_line(tmp_path, master):
    assert load(tmp_path, overrides=["spark.pyspark=3.5", f'spark.master="{master}"']).spark.master == master


@pytest.mark.parametrize("line", LINES)
def test_real_time_mode_needs_a_newer_spark(tmp_path, line):
    msg = refused(tmp_path, [f"spark.pyspark={line}", 'spark.trigger.kind="realTime"',
                             'spark.trigger.interval="5 seconds"', 'spark.sink="kafka"', 'spark.output_mode="update"'])
    assert 'spark.trigger kind = "realTime" needs Spark 4.1+' in msg, msg
    assert load(tmp_path, overrides=['spark.trigger.kind="realTime"', 'spark.trigger.interval="5 seconds"',
                                     'spark.sink="kafka"', 'spark.output_mode="update"', "stream.partitions=2"]
                ).spark.pyspark is None


EVENT_HUBS = MINIMAL + '[backend]\nkind = "eventhubs"\n'


@pytest.mark.parametrize("line", LINES)
def test_the_event_hubs_python_source_is_refused_and_its_kafka_endpoint_runs(tmp_path, line):
    msg = refused(tmp_path, [f"spark.pyspark={line}"], text=EVENT_HUBS)
    assert "backend.kind = 'eventhubs'" in msg and "pyspark.sql.streaming.datasource" in msg, msg
    assert f"PySpark {RUNTIMES[line].pyspark} lacks" in msg and 'backend.protocol = "kafka"' in msg, msg
    kafka_path = load(tmp_path, EVENT_HUBS, [f"spark.pyspark={line}", 'backend.protocol="kafka"'])
    assert kafka_path.spark.pyspark == line and not kafka_path.backend.python_data_source


def test_transform_with_state_needs_4_0(tmp_path):
    msg = refused(tmp_path, ["spark.pyspark=3.5", 'spark.query="sessions"'])
    assert "spark.query = 'sessions'" in msg and "transformWithStateInPandas" in msg, msg
    assert "spark.pyspark = '4.0'" in msg, msg
    assert load(tmp_path, overrides=["spark.pyspark=4.0", 'spark.query="sessions"']).spark.query == "sessions"


@pytest.mark.parametrize("line", LINES)
def test_what_each_line_runs_loads(tmp_path, line):
    """The Kafka sink (asynchronous progress tracking is Spark 3.4+), dedup (dropDuplicatesWithinWatermark is
    3.5+), windowed counts and RocksDB state: no refusal."""
    for overrides in (['spark.sink="kafka"', "spark.sink_options.asyncProgressTrackingEnabled=true"],
                      ['spark.query="dedup"'], ['spark.query="windowed_count"', 'spark.state_store="rocksdb"']):
        assert load(tmp_path, overrides=[f"spark.pyspark={line}", *overrides]).spark.pyspark == line


# -- the artifact sets -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line", LINES)
def test_each_line_has_its_own_build_of_every_spark_set(line):
    """Every set a backend may ask for on a Spark driver (the project's Spark sets) maps to the line's own: a
    registered set whose pom names Spark's connector for the line's Scala and release (another Spark's jar on
    its classpath would fail at the first batch)."""
    rt = RUNTIMES[line]
    for name in (s for s in SPARK_SETS if s in PROJECT_CLASSPATHS):
        own = rt.jar_set(name)
        assert own != name and own in CLASSPATHS and own in SPARK_SETS and own not in PROJECT_CLASSPATHS
        pom = (HERE / own / "pom.xml").read_text()
        version = re.search(r"<spark\.kafka\.version>([^<]+)<", pom).group(1)
        assert f"spark-sql-kafka-0-10_{rt.scala}</artifactId>" in pom and version == rt.pyspark, own
    with pytest.raises(SetupError, match="no build of the artifact set 'kafka-broker'"):
        rt.jar_set("kafka-broker")


def test_setup_fetches_only_the_projects_sets(monkeypatch):
    asked = []
    monkeypatch.setattr(artifacts, "resolve", lambda name, quiet=True, spark_jars=None: asked.append(name) or [])
    artifacts.setup_all()
    assert asked == list(PROJECT_CLASSPATHS)


def test_jars_a_spark_ships_are_left_out_against_that_spark(tmp_path, monkeypatch):
    """A runtime's set is filtered against the runtime's own jars/, not the project's PySpark's: what one Spark
    ships the other may lack (commons-pool2 here), and a jar dropped wrongly fails at the first batch."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    name = runtimes.get("3.5").jar_set(SPARK_KAFKA)
    cp = artifacts.classpath_dir(name)
    cp.mkdir(parents=True)
    for jar in ("commons-pool2-2.11.1.jar", "kafka-clients-3.4.1.jar", "scala-library-2.12.18.jar",
                "spark-sql-kafka-0-10_2.12-3.5.7.jar"):
        (cp / jar).write_text("")
    (cp / ".complete").write_text("ok\n")
    older, newer = tmp_path / "spark35" / "jars", tmp_path / "spark43" / "jars"
    for where, jars in ((older, ["scala-library-2.12.18.jar", "spark-core_2.12-3.5.7.jar"]),
                        (newer, ["scala-library-2.13.16.jar", "commons-pool2-2.12.0.jar"])):
        where.mkdir(parents=True)
        for jar in jars:
            (where / jar).write_text("")
    assert [j.name for j in artifacts.resolve(name, spark_jars=older)] == [
        "commons-pool2-2.11.1.jar", "kafka-clients-3.4.1.jar", "spark-sql-kafka-0-10_2.12-3.5.7.jar"]
    assert "commons-pool2-2.11.1.jar" not in [j.name for j in artifacts.resolve(name, spark_jars=newer)]
    monkeypatch.setattr(runtimes, "pyspark_home", lambda line: older.parent)
    assert [j.name for j in runtimes.jars("3.5", SPARK_KAFKA)] == [
        "commons-pool2-2.11.1.jar", "kafka-clients-3.4.1.jar", "spark-sql-kafka-0-10_2.12-3.5.7.jar"]


# -- the virtualenv ----------------------------------------------------------------------------------------------
def test_the_key_is_what_goes_in():
    rt = RUNTIMES["3.5"]
    key = runtimes.venv_key(rt)
    assert re.fullmatch(r"[0-9a-f]{12}", key) and runtimes.venv_key(rt) == key
    assert runtimes.venv_key(Runtime("3.5", "3.5.7", "2.12", rt.jar_sets, (*rt.requirements, "numpy<2"))) != key
    assert runtimes.venv_key(rt, interpreter="cpython 3.12.1 /opt/python") != key
    assert runtimes.venv_key(RUNTIMES["4.0"]) != key


def test_the_virtualenv_lives_in_the_cache_by_version_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    rt = RUNTIMES["4.0"]
    assert runtimes.venv_dir(rt) == tmp_path / "pyspark" / f"4.0.1-{runtimes.venv_key(rt)}"


def _complete(home: Path, line: str) -> None:
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "bin" / "python").write_text("")
    (home / runtimes.STAMP).write_text(json.dumps({"pyspark_home": str(home / "pyspark"), "version": line}))


def test_a_complete_virtualenv_is_used_and_a_half_built_one_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    home = runtimes.venv_dir(RUNTIMES["3.5"])
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "python").write_text("")  # pip died half-way: no stamp
    built = []

    def build(rt, where):
        built.append(where)
        _complete(where, rt.pyspark)

    monkeypatch.setattr(runtimes, "_build", build)
    assert runtimes.prepare("3.5") == home / "bin" / "python" and built == [home]
    assert runtimes.prepare("3.5") == home / "bin" / "python" and built == [home]  # the stamp: not again
    assert runtimes.pyspark_home("3.5") == home / "pyspark"


def test_a_failed_build_says_what_failed_and_keeps_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(runtimes.sys, "executable", "/bin/false")  # `-m venv` fails
    with pytest.raises(SetupError) as err:
        runtimes.prepare("3.5")
    home = runtimes.venv_dir(RUNTIMES["3.5"])
    log = home.with_name(home.name + ".log")
    assert "creating the virtualenv failed (exit 1)" in str(err.value) and str(log) in str(err.value)
    assert log.read_text().startswith("$ /bin/false -m venv") and not home.exists()


def test_the_harness_is_imported_from_its_own_source(tmp_path, monkeypatch):
    """A checkout: its root (the same code as this interpreter's). Installed beside the project's pyspark
    (site-packages): a link to the package only, or the runtime would import the project's PySpark."""
    import harness

    assert runtimes.harness_source() == Path(harness.__file__).resolve().parent.parent
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    site = tmp_path / "site-packages"
    (site / "harness").mkdir(parents=True)
    (site / "pyspark").mkdir()
    linked = runtimes.harness_source(site / "harness")
    assert linked.parent == tmp_path / "cache" / "pyspark" and sorted(p.name for p in linked.iterdir()) == ["harness"]
    assert (linked / "harness").resolve() == (site / "harness").resolve()
    assert runtimes.harness_source(site / "harness") == linked  # again: the same link


# -- the query process -------------------------------------------------------------------------------------------
class Spawned:
    def __init__(self):
        self.calls = []

    def spawn(self, name, argv, **kw):
        self.calls.append((argv, kw["env"]))


def _process(tmp_path, monkeypatch, runtime):
    python = tmp_path / "venv" / "bin" / "python"
    monkeypatch.setattr(runtimes, "prepare", lambda line, console=None, jar_sets=(): python)
    monkeypatch.setattr(runtimes, "jars", lambda line, name, quiet=True: [tmp_path / f"{line}-{name}.jar"])
    sup = Spawned()
    q = SparkQueryProcess(tmp_path / "run", sup, source=None, master="local[2]", conf={},
                          trigger={"kind": "processingTime", "interval": "1 second"}, jars=(SPARK_KAFKA,),
                          python_path=["/scenario/dir"], runtime=runtime)
    return q, sup, python


def test_a_runtime_drives_the_query_process(tmp_path, monkeypatch):
    q, sup, python = _process(tmp_path, monkeypatch, "3.5")
    assert q.jar_names == (SPARK_KAFKA,)  # what the source asked for: the project's name
    assert q.job["conf"]["spark.jars"] == str(tmp_path / f"3.5-{SPARK_KAFKA}.jar")
    assert q.job["runtime"] == {"line": "3.5", "pyspark": "3.5.7", "scala": "2.12",
                                "jar_sets": {SPARK_KAFKA: "spark-kafka-3.5"}}
    assert "cds_dump" not in q.job and "SharedArchiveFile" not in q.job["conf"].get("spark.driver.extraJavaOptions", "")
    q.start(await_source=True)
    (argv, env), = sup.calls
    assert argv[:3] == [str(python), "-m", "harness.spark.query"]
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == str(python)
    assert env["PYTHONPATH"].split(":")[:2] == [str(runtimes.harness_source()), "/scenario/dir"]
    assert json.loads((q.spark_dir / "job.json").read_text())["runtime"]["pyspark"] == "3.5.7"


def test_without_a_runtime_nothing_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "resolve", lambda name, quiet=True, spark_jars=None: [])
    import harness.spark.process as process

    monkeypatch.setattr(process, "resolve", lambda name: [tmp_path / "project.jar"])
    q, sup, _ = _process(tmp_path, monkeypatch, None)
    assert "runtime" not in q.job and q.job["conf"]["spark.jars"] == str(tmp_path / "project.jar")
    q.start(await_source=True)
    (argv, env), = sup.calls
    assert argv[0] == sys.executable and env["PYSPARK_PYTHON"] == sys.executable
    assert env["PYTHONPATH"].split(":")[0] == "/scenario/dir"


class JvmThrowable:
    """A py4j view of a JVM exception: Spark 3.5's SparkThrowable has getErrorClass, no getCondition."""

    def __init__(self, cause=None, **methods):
        self.cause, self.methods = cause, methods

    def __getattr__(self, name):
        if name in self.methods:
            return lambda: self.methods[name]
        raise RuntimeError(f"py4j: method {name} does not exist")

    def getCause(self):
        return self.cause


class Failed(Exception):
    pass


@pytest.mark.parametrize("method", ["getErrorClass", "getCondition"])
def test_the_error_class_leads_a_failed_querys_text_on_3_5_and_4(method):
    exc = Failed("Some data may have been lost")
    exc._origin = JvmThrowable(JvmThrowable(**{method: "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED"}))
    assert error_text(exc) == "[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost"


def test_environment_says_which_pyspark_ran(monkeypatch):
    import pyspark

    monkeypatch.setattr(environment, "java_version", lambda java="java": "openjdk 17")
    env = environment.describe({}, RUNTIMES["3.5"].as_job())
    assert env["pyspark"] == f"3.5.7 (spark.pyspark = \"3.5\"; the harness's own: {pyspark.__version__})"
    assert environment.describe({})["pyspark"] == pyspark.__version__


def test_a_3_5_checkpoint_s_stores_are_found_in_its_state_directories(tmp_path):
    """Spark 3.5 writes no operator metadata (state/<op>/_metadata), so `state-metadata` lists nothing: the state
    reader (harness.spark.state_dump) takes the operators from the state directories, a join's named stores
    included, or a stateful query run on 3.5 would leave its state check unknown."""
    from harness.spark.state_dump import stores, stores_on_disk

    state = tmp_path / "checkpoint" / "state"
    (state / "0" / "0" / "_metadata").mkdir(parents=True)
    (state / "0" / "0" / "1.delta").write_text("")
    for store in ("left-keyToNumValues", "right-keyToNumValues"):
        (state / "2" / "0" / store).mkdir(parents=True)
    (state / "_metadata").mkdir()  # not an operator
    rows = stores_on_disk(tmp_path / "checkpoint")
    assert rows == [{"operatorId": 0, "stateStoreName": "default"},
                    {"operatorId": 2, "stateStoreName": "left-keyToNumValues"},
                    {"operatorId": 2, "stateStoreName": "right-keyToNumValues"}]
    assert stores(rows)[0] == (0, "default", {"operatorId": "0", "storeName": "default"})
    assert stores_on_disk(tmp_path / "nothing") == []
