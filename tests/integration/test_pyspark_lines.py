"""The query under test on an older PySpark line (spark.pyspark, harness.spark.runtimes), end to end as a user runs
it: `harness run steady --set spark.pyspark=LINE`, the line's virtualenv made in the cache if it is not there yet
(a minute or more the first time; `harness setup --pyspark LINE` makes it ahead). The run must pass, and its
directory must show that the older Spark ran, each from a different witness: the job the harness wrote (its
`runtime`, the line's own Kafka connector on spark.jars), the driver's own log line (Spark's version as its JVM
reports it, the virtualenv's interpreter), Spark's event log ("Spark Version", written by Spark itself) and
environment.json. Then a stateful query on 3.5 with a driver kill, its final state judged; and `sessions` on 4.0:
transformWithStateInPandas, the reason 4.0's virtualenv holds pandas, pyarrow and protobuf, with its oracle and
its state read back by the project's own Spark."""
import json
import re

import pytest

from harness.spark import runtimes
from scenario_runs import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def spark_versions(out) -> set[str]:
    """"Spark Version" of every event log the driver wrote (SparkListenerLogStart): Spark's own word."""
    found = set()
    for path in (out / "spark" / "events").rglob("*"):
        if path.is_file() and not path.name.startswith("appstatus"):
            found |= set(re.findall(r'"Spark Version":"([^"]+)"', path.read_text(errors="replace")))
    return found


def assert_ran_on(out, line: str) -> None:
    rt = runtimes.get(line)
    job = json.loads((out / "spark" / "job.json").read_text())
    assert job["runtime"] == rt.as_job() and "cds_dump" not in job
    own = rt.jar_set("spark-kafka")
    jars = job["conf"]["spark.jars"].split(",")
    assert jars and all(f"/jvm/{own}-" in j for j in jars), jars
    assert any(f"spark-sql-kafka-0-10_{rt.scala}-{rt.pyspark}.jar" in j for j in jars), jars
    said = re.search(r"harness: the query runs on Spark (\S+) \(pyspark (\S+) in (\S+)\), Python \S+ \((\S+)\)",
                     (out / "spark" / "driver.log").read_text(errors="replace"))
    assert said, (out / "spark" / "driver.log").read_text(errors="replace")[-3000:]
    assert said.group(1) == said.group(2) == rt.pyspark
    python = str(runtimes.prepare(line))
    assert said.group(4) == python and said.group(3).startswith(str(runtimes.venv_dir(rt)))
    assert spark_versions(out) == {rt.pyspark}
    env = json.loads((out / "environment.json").read_text())
    assert env["pyspark"].startswith(f"{rt.pyspark} (spark.pyspark = \"{line}\"")


@pytest.mark.parametrize("line", runtimes.LINES)
def test_steady_passes_on_an_older_pyspark_line(harness_env, tmp_path, line):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "steady", f"spark.pyspark={line}", "producers.duration_s=15", timeout=1200)
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + proc.stdout[-3000:])
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["delivered_unique"] == c["acked"] > 0
    assert_ran_on(out, line)


def test_a_stateful_query_on_3_5_survives_a_driver_kill_and_its_state_is_judged(harness_env, tmp_path):
    """windowed_count with stateful's driver kill: the restarted driver is the line's too, and the final state,
    read by the project's own Spark from a checkpoint 3.5 wrote (no operator metadata), matches the history."""
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "stateful", "spark.pyspark=3.5", "producers.duration_s=20", timeout=1200)
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + proc.stdout[-3000:])
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["state_matches"]["ok"] and checks["query_recovered"]["ok"]
    assert json.loads((out / "state" / "meta.json").read_text())["stores"]
    assert_ran_on(out, "3.5")


def test_sessions_run_on_4_0(harness_env, tmp_path):
    out = tmp_path / "run"
    proc, result = run(harness_env, out, "sessions", "spark.pyspark=4.0", "producers.duration_s=20", timeout=1200)
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + proc.stdout[-3000:])
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["oracle_sessions"]["ok"] and checks["state_matches"]["ok"]
    assert_ran_on(out, "4.0")
