"""The [spark] section's cluster settings, the standalone cluster's command lines and environment, and the
archive of the harness's code shipped to executors (harness.spark.cluster, harness.spark.pyfiles)."""
import zipfile
from pathlib import Path

import pytest

from harness.config import ConfigError, Scenario, load_scenario
from harness.faults.executor_kill import expected_executors
from harness.samplers.resources import role_of
from harness.spark import cluster as cl
from harness.spark import pyfiles

STEADY = Path(__file__).resolve().parents[2] / "scenarios" / "steady.toml"


def refused(*overrides):
    with pytest.raises(ConfigError) as err:
        load_scenario("steady", list(overrides))
    return str(err.value)


# -- config ------------------------------------------------------------------------------------------------------
def test_a_master_that_is_neither_local_nor_a_cluster_url_is_refused_with_what_is_allowed():
    assert refused('spark.master="spark://host"') == (  # a --set's error names the --set (harness.config)
        f"--set 'spark.master=\"spark://host\"' (on {STEADY}): spark.master: not a master this harness can run on; allowed: local[N] | local[N,F] | "
        "local-cluster[N,C,M] | spark://host:port[,host:port...] | yarn | k8s://https://host:port, N and C from 1 "
        "(got 'spark://host')")


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "spark://m1.example:7077,m2.example:7077", "yarn",
                                    "k8s://https://api.example:6443", "local[4]", "local-cluster[2,1,1024]"])
def test_cluster_urls_and_local_masters_are_accepted(master):
    scenario, _, _ = load_scenario("steady", [f'spark.master="{master}"'])
    assert scenario.spark.master == master and scenario.spark.cluster == "none"


def test_standalone_with_a_master_of_its_own_is_refused():
    assert refused('spark.cluster="standalone"', 'spark.master="local-cluster[2,1,1024]"') == (
        f"--set 'spark.master=\"local-cluster[2,1,1024]\"' (on {STEADY}): spark: master = 'local-cluster[2,1,1024]' with cluster = \"standalone\": the run starts its own "
        "master and connects the query to it; leave master out")


def test_worker_settings_without_a_cluster_of_the_run_are_refused():
    assert refused("spark.worker_memory_mb=2048") == (
        f"--set 'spark.worker_memory_mb=2048' (on {STEADY}): spark: worker_memory_mb is for the run's own cluster: set cluster = \"standalone\" "
        "(or leave worker_memory_mb out)")


def test_unknown_cluster_kind_and_too_small_workers_name_the_field():
    assert refused('spark.cluster="yarn"') == (
        f"--set 'spark.cluster=\"yarn\"' (on {STEADY}): spark.cluster: Input should be 'none' or 'standalone' (got 'yarn')")
    assert "spark.worker_memory_mb" in refused('spark.cluster="standalone"', "spark.worker_memory_mb=100")


def test_a_resolved_standalone_scenario_validates_again():
    """scenario.json keeps every field (a replay validates it again): defaults given back must pass."""
    scenario, _, _ = load_scenario("standalone")
    again = Scenario.model_validate(scenario.model_dump(mode="json"))
    assert again.spark.standalone and again.spark.workers == 2
    plain, _, _ = load_scenario("steady")
    assert Scenario.model_validate(plain.model_dump(mode="json")).spark.cluster == "none"


def test_executor_kill_accepts_the_standalone_cluster_and_counts_one_executor_per_worker():
    scenario, _, _ = load_scenario("standalone-executor-kill")
    assert expected_executors(scenario) == 2
    more, _, _ = load_scenario("standalone", ["spark.workers=3", "spark.worker_cores=4",
                                              'spark.conf.spark.executor.cores="2"'])
    assert expected_executors(more) == 6  # 3 workers x (4 cores / 2 per executor)


def test_worker_kill_needs_the_run_s_own_cluster_and_a_worker_it_has(tmp_path):
    text = STEADY.read_text() + '\n[[faults]]\nkind = "worker_kill"\nat_s = 5\n'
    path = tmp_path / "wk.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path))
    assert str(err.value) == (f"{path}: faults.0 (worker_kill): needs spark.cluster = \"standalone\" (the run's "
                              "own workers to kill); got spark.master = 'local[2]'")
    path.write_text(text.replace('at_s = 5', 'at_s = 5\nworker = 2'))
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path), ['spark.cluster="standalone"'])
    assert str(err.value).endswith("faults.0 (worker_kill): worker = 2 but the cluster has 2 workers (0-based)")
    scenario, _, _ = load_scenario(str(path), ['spark.cluster="standalone"', "spark.workers=3"])
    assert scenario.faults[0].worker == 2


# -- the cluster's processes ---------------------------------------------------------------------------------------
def test_master_and_worker_command_lines():
    home = Path("/sp")
    assert cl.master_command(home, 7077, 8080) == [
        "/sp/bin/spark-class", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "7077",
        "--webui-port", "8080"]
    assert cl.worker_command(home, "spark://127.0.0.1:7077", port=4001, webui_port=4002, cores=1, memory_mb=1024,
                             work_dir=Path("/r/spark-workers/0")) == [
        "/sp/bin/spark-class", "org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:7077", "--host",
        "127.0.0.1", "--port", "4001", "--cores", "1", "--memory", "1024m", "--webui-port", "4002", "--work-dir",
        "/r/spark-workers/0"]


def test_spark_home_is_the_pyspark_distribution():
    home = cl.spark_home()
    assert (home / "bin" / "spark-class").is_file() and any((home / "jars").glob("spark-core_*.jar"))


def test_daemons_get_loopback_and_no_pythonpath():
    env = cl.daemon_env(Path("/sp"), {"PYTHONPATH": "/work/main", "PATH": "/usr/bin"})
    assert "PYTHONPATH" not in env and env["PATH"] == "/usr/bin"
    assert env["SPARK_HOME"] == "/sp" and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_MASTER_OPTS"] == "-Dspark.master.rest.enabled=false"


def test_alive_workers_reads_the_master_json():
    state = {"status": "ALIVE", "workers": [{"id": "w1", "state": "ALIVE"}, {"id": "w0", "state": "DEAD"},
                                            {"id": "w2", "state": "ALIVE"}]}
    assert [w["id"] for w in cl.alive_workers(state)] == ["w1", "w2"]
    assert cl.alive_workers({}) == []


@pytest.mark.parametrize("cmdline, role", [
    (["/usr/lib/jvm/bin/java", "-cp", "/sp/conf/:/sp/jars/*", "-Xmx256m", "org.apache.spark.deploy.master.Master",
      "--host", "127.0.0.1", "--port", "7077"], "spark-master"),
    (["/usr/lib/jvm/bin/java", "-cp", "/sp/conf/:/sp/jars/*", "-Xmx256m", "org.apache.spark.deploy.worker.Worker",
      "spark://127.0.0.1:7077", "--work-dir", "/r/spark-workers/0"], "spark-worker"),
    (["bash", "/sp/bin/spark-class", "org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:7077"], "launcher"),
    (["/usr/lib/jvm/bin/java", "-cp", "/sp/jars/*", "-Xmx1024M", "-Dspark.driver.port=40000",
      "org.apache.spark.executor.CoarseGrainedExecutorBackend", "--driver-url", "spark://x", "--executor-id", "0",
      "--worker-url", "spark://Worker@127.0.0.1:4001"], "executor"),
])
def test_cluster_roles(cmdline, role):
    assert role_of(cmdline) == role


# -- the shipped code ----------------------------------------------------------------------------------------------
def make_tree(root: Path) -> None:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("X = 1\n")
    (root / "pkg" / "sub" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "mod.py").write_text("Y = 2\n")
    (root / "pkg" / "data.xml").write_text("<a/>")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (root / "pkg" / "notes.txt").write_text("not shipped")


def test_archive_holds_the_package_files_and_is_reused_until_a_file_changes(tmp_path):
    make_tree(tmp_path / "src")
    files = pyfiles.package_files(tmp_path / "src", ("pkg",))
    assert [name for name, _ in files] == ["pkg/__init__.py", "pkg/data.xml", "pkg/sub/__init__.py",
                                           "pkg/sub/mod.py"]
    first = pyfiles.build_archive(files, tmp_path / "cache")
    assert zipfile.ZipFile(first).namelist() == [name for name, _ in files]
    mtime = first.stat().st_mtime_ns
    again = pyfiles.build_archive(pyfiles.package_files(tmp_path / "src", ("pkg",)), tmp_path / "cache")
    assert again == first and again.stat().st_mtime_ns == mtime  # the same source state: the same archive
    (tmp_path / "src" / "pkg" / "sub" / "mod.py").write_text("Y = 3\n")
    changed = pyfiles.build_archive(pyfiles.package_files(tmp_path / "src", ("pkg",)), tmp_path / "cache")
    assert changed != first and changed.name.startswith(pyfiles.ARCHIVE_PREFIX)
    assert zipfile.ZipFile(changed).read("pkg/sub/mod.py") == b"Y = 3\n"


def test_python_imports_from_the_archive(tmp_path):
    import subprocess
    import sys

    make_tree(tmp_path / "src")
    archive = pyfiles.build_archive(pyfiles.package_files(tmp_path / "src", ("pkg",)), tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(archive)!r}); "
                          "import pkg.sub.mod as m; print(m.Y, m.__file__)"],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout.split()
    assert out == ["2", f"{archive}/pkg/sub/mod.py"]


def test_the_harness_archive_has_the_installed_packages():
    names = set(zipfile.ZipFile(pyfiles.harness_archive()).namelist())
    assert {"harness/__init__.py", "harness/backends/eventhubs/spark_source/source.py", "harness/spark/pyfiles.py",
            "harness/producers/__init__.py", "harness/reports/html.py", "harness/jvm/spark-kafka/pom.xml"} <= names
    assert {n.split("/", 1)[0] for n in names} == {"harness"}
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


def test_a_scenario_query_module_next_to_the_scenario_ships(tmp_path):
    (tmp_path / "myjob.py").write_text("def query(df, params):\n    return df\n")
    archive = pyfiles.query_module_archive("myjob:query", tmp_path)
    assert archive is not None and zipfile.ZipFile(archive).namelist() == ["myjob.py"]
    (tmp_path / "teamjob").mkdir()
    (tmp_path / "teamjob" / "__init__.py").write_text("")
    (tmp_path / "teamjob" / "jobs.py").write_text("def q(df, p):\n    return df\n")
    archive = pyfiles.query_module_archive("teamjob.jobs:q", tmp_path)
    assert zipfile.ZipFile(archive).namelist() == ["teamjob/__init__.py", "teamjob/jobs.py"]
    assert pyfiles.query_module_archive("passthrough", tmp_path) is None
    assert pyfiles.query_module_archive("elsewhere:q", tmp_path) is None
