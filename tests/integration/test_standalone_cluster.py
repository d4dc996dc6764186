"""The `standalone` scenario end to end: the run starts a Spark standalone master and two workers from the
PySpark distribution, the query's executors run under the workers, the driver ships the harness's code to them,
and everything is gone afterwards. Checked from the run's own records: Spark's event log (which executor ran each
scan task), the workers' work directories (which executor each worker launched), the executors' own report of
where they imported the harness from, the resource samples (roles), and the processes left."""
import json
import uuid
from pathlib import Path

import pytest

from harness.files.paths import REPO
from harness.supervisor import processes_with_env
from harness.analysis.spark_tasks import read_event_logs

pytestmark = pytest.mark.integration


def launched_executors(run_dir: Path) -> dict[str, int]:
    """{executor id: worker index} from the workers' work directories (<work dir>/<app id>/<executor id>/)."""
    out = {}
    for worker in (run_dir / "spark-workers").iterdir():
        if worker.is_dir() and worker.name.isdigit():
            for executor in worker.glob("app-*/*"):
                if executor.is_dir():
                    out[executor.name] = int(worker.name)
    return out


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget
def test_standalone_scenario_runs_on_the_workers_with_the_shipped_code(harness_runner, tmp_path):
    token = uuid.uuid4().hex
    out = tmp_path / "standalone"
    run = harness_runner.run("standalone", out=out, env={"HARNESS_TEST_TOKEN": token}, timeout=600,
                             **{"producers.duration_s": 10,
                                "checks.sustained_not_required": "10 s: too short to judge keeping up"})
    run.assert_passed()
    result = json.loads((out / "result.json").read_text())
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["delivered_unique"] == c["acked"] == 20000

    # placement: every scan task ran on an executor a worker launched, and both workers' executors read
    workers = launched_executors(out)
    assert set(workers.values()) == {0, 1}, workers
    tasks = [t for t in read_event_logs(out) if not t["failed"]]
    assert tasks and {t["executor"] for t in tasks} <= set(workers), ({t["executor"] for t in tasks}, workers)
    assert {workers[t["executor"]] for t in tasks if t["records_read"]} == {0, 1}
    assert {t["host"] for t in tasks} == {"127.0.0.1"}
    assert "driver" not in result["placement"]["executors"] and len(result["placement"]["executors"]) == 2

    # the code: the executors imported the harness from the archive the driver shipped into their work
    # directories, not from the checkout (which the run's own PYTHONPATH names: the plugin puts it there)
    state = json.loads((out / "run_state.json").read_text())
    master_url = state["spark_cluster"]["master_url"]
    assert master_url.startswith("spark://127.0.0.1:")
    assert json.loads((out / "spark" / "job.json").read_text())["master"] == master_url
    shipped = [json.loads(line) for line in (out / "spark" / "shipped_code.jsonl").read_text().splitlines()]
    assert len(shipped) == 1 and "error" not in shipped[0] and shipped[0]["tasks"], shipped
    archive = Path(shipped[0]["py_files"][0]).name
    assert archive.startswith("spark_stream_harness-") and archive.endswith(".zip")
    work = str(out / "spark-workers")
    for task in shipped[0]["tasks"]:
        for key in ("harness", "eventhubs_offsets", "pyfiles"):
            assert task[key].startswith(work + "/") and f"/{archive}/harness/" in task[key], (key, task)
        assert task["cwd"].startswith(work + "/")
        assert str(REPO) not in task["pythonpath"].split(":"), task["pythonpath"]

    # the cluster's processes were sampled under their roles, and nothing of the run is left
    roles = {p["role"] for line in (out / "resources.jsonl").read_text().splitlines()
             for p in json.loads(line)["procs"]}
    assert {"spark-master", "spark-worker", "executor", "driver", "broker"} <= roles, roles
    assert processes_with_env("HARNESS_TEST_TOKEN", token) == []


def fault_details(result, kind):
    found = [f for f in result["faults"] if f["kind"] == kind]
    assert found and all(not f["errors"] and f["injected_at"] for f in found), result["faults"]
    return [f["detail"] for f in found]


@pytest.mark.slow
def test_executor_kills_on_the_standalone_cluster_are_replaced_by_the_worker(harness_runner, tmp_path):
    out = tmp_path / "executor-kill"
    run = harness_runner.run("standalone-executor-kill", out=out, timeout=900)
    run.assert_passed()
    result = json.loads((out / "result.json").read_text())
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0
    workers = launched_executors(out)
    details = fault_details(result, "executor_kill")
    assert len(details) == 2
    for d in details:
        before, after = set(d["inject_executors"]), set(d["heal_executors"])
        assert len(before) == len(after) == 2 and str(d["inject_pid"]) in before and str(d["inject_pid"]) not in after
        assert d["inject_executor_id"] in workers and d["heal_driver_log_lost_executor"] >= 1, d
    assert len(workers) == 4  # two at the start, one replacement per kill, each launched by a worker


@pytest.mark.slow
def test_a_killed_worker_comes_back_and_its_executor_with_it(harness_runner, tmp_path):
    out = tmp_path / "worker-kill"
    run = harness_runner.run("standalone-worker-kill", out=out, timeout=900)
    run.assert_passed()
    result = json.loads((out / "result.json").read_text())
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0
    [d] = fault_details(result, "worker_kill")
    killed = d["inject_worker"]
    assert d["inject_executors"] and d["heal_alive_workers"] == 2 and len(d["heal_executors"]) == 2
    assert not set(d["inject_executors"]) & set(d["heal_executors"])
    assert d["heal_driver_log_lost_executor"] >= 1
    state = json.loads((out / "run_state.json").read_text())
    assert state["spark_cluster"]["workers"][killed]["starts"] == 2
    # the restarted worker launched a new executor for the same application
    assert len(list((out / "spark-workers" / str(killed)).glob("app-*/*"))) == 2
