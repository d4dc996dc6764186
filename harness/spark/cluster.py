"""A Spark standalone cluster the run starts and stops itself: one master and N workers from the PySpark
distribution, on 127.0.0.1, so the same scenarios run on a real multi-process cluster (`spark.cluster =
"standalone"`).

The processes are Spark's own daemons (`$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master` and
`...deploy.worker.Worker`, SPARK_HOME being the pip-installed pyspark package), each started through the run's
supervisor, so each carries the run id (resource roles spark-master, spark-worker; the executors a worker
launches are its children, in its process group, and keep the role "executor") and none outlives the run, also on
Ctrl-C or a crash. Everything binds 127.0.0.1 on free ports; the workers' executors work under
`<run dir>/spark-workers/<i>/`, which is where the code the driver ships lands.

Ready means the master's own JSON API (`http://127.0.0.1:<webui>/json`, what its web UI serves) lists the workers
ALIVE. A worker is known by its index and keeps its ports, so a worker killed on purpose (harness.faults.
worker_kill) is started again where it was and registers anew.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness.loopback import HOST, free_port
from harness.supervisor import Child, Supervisor, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_MAIN = "CoarseGrainedExecutorBackend"
DAEMON_MEMORY = "256m"  # the master's and the workers' own heap (Spark's default is 1g each)
# no REST submission server (port 6066 by default, which a second run would find taken): drivers connect over RPC
MASTER_OPTS = "-Dspark.master.rest.enabled=false"


def spark_home() -> Path:
    """The pip-installed PySpark is a Spark distribution (bin/, jars/): its package directory is SPARK_HOME."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def master_command(home: Path, port: int, webui_port: int) -> list[str]:
    return [str(home / "bin" / "spark-class"), MASTER_CLASS, "--host", HOST, "--port", str(port),
            "--webui-port", str(webui_port)]


def worker_command(home: Path, master_url: str, *, port: int, webui_port: int, cores: int, memory_mb: int,
                   work_dir: Path) -> list[str]:
    return [str(home / "bin" / "spark-class"), WORKER_CLASS, master_url, "--host", HOST, "--port", str(port),
            "--cores", str(cores), "--memory", f"{memory_mb}m", "--webui-port", str(webui_port),
            "--work-dir", str(work_dir)]


def daemon_env(home: Path, base: dict | None = None) -> dict[str, str]:
    """The daemons' environment: this SPARK_HOME, loopback only, small daemon heaps; no PYTHONPATH, so the
    executors they launch (which inherit it) import the harness only from what the driver ships."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)
    env.update({"SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                "SPARK_MASTER_OPTS": MASTER_OPTS, "PYSPARK_PYTHON": sys.executable})
    return env


def alive_workers(state: dict) -> list[dict]:
    """The master's JSON: the workers it lists ALIVE (a worker it lost stays listed as DEAD)."""
    return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]


@dataclass
class Worker:
    index: int
    port: int
    webui_port: int
    work_dir: Path
    child: Child | None = None
    starts: int = 0


class StandaloneCluster:
    def __init__(self, run_dir: Path, supervisor: Supervisor, *, workers: int = 2, cores: int = 1,
                 memory_mb: int = 1024):
        self.dir = run_dir / "spark-workers"
        self.supervisor = supervisor
        self.cores, self.memory_mb = cores, memory_mb
        self.home = spark_home()
        self.port, self.webui_port = free_port(), free_port()
        self.workers = [Worker(i, free_port(), free_port(), self.dir / str(i)) for i in range(workers)]
        self.master: Child | None = None

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def state_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}/json"

    def state(self) -> dict:
        """The master's own JSON API; {} while it does not answer."""
        try:
            with urllib.request.urlopen(self.state_url, timeout=2) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return {}

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start_master(self, timeout: float = 90.0) -> None:
        """The master up and answering (drivers may connect from now on)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.master = self.supervisor.spawn(
            "spark-master", master_command(self.home, self.port, self.webui_port),
            log_path=self.dir / "master.log", env=self._env(), cwd=self.dir)
        self._wait(lambda: self.state().get("status") == "ALIVE", timeout, "the Spark master to answer",
                   self.master)

    def start_worker(self, worker: Worker) -> None:
        worker.work_dir.mkdir(parents=True, exist_ok=True)
        worker.starts += 1
        worker.child = self.supervisor.spawn(
            f"spark-worker-{worker.index}",
            worker_command(self.home, self.master_url, port=worker.port, webui_port=worker.webui_port,
                           cores=self.cores, memory_mb=self.memory_mb, work_dir=worker.work_dir),
            log_path=self.dir / f"worker-{worker.index}.log", env=self._env(), cwd=worker.work_dir)

    def _env(self) -> dict[str, str]:
        env = daemon_env(self.home)
        env["SPARK_LOCAL_DIRS"] = str(self.dir / "local")  # executors' block manager and shuffle files
        return env

    def driver_conf(self) -> dict[str, str]:
        """What a driver on this cluster needs (under the scenario's own spark.conf): an executor heap that fits
        the worker's memory (Spark's default, 1g, would not fit a smaller worker)."""
        return {"spark.executor.memory": f"{self.memory_mb}m"}

    def start_workers(self) -> None:
        for worker in self.workers:
            self.start_worker(worker)

    def wait_ready(self, timeout: float = 120.0) -> dict:
        """Until the master lists every worker ALIVE; returns its state."""
        n = len(self.workers)
        return self._wait(lambda: (s := self.state()) and len(alive_workers(s)) >= n and s, timeout,
                          f"{n} Spark workers ALIVE", self.master)

    def start(self, timeout: float = 120.0) -> None:
        self.start_master(timeout)
        self.start_workers()
        self.wait_ready(timeout)

    def stop(self) -> None:
        """Workers first (each takes its executors down), then the master."""
        for worker in self.workers:
            if worker.child is not None:
                self.supervisor.stop(worker.child, timeout=15)
        if self.master is not None:
            self.supervisor.stop(self.master, timeout=15)

    # -- faults -------------------------------------------------------------------------------------------------
    def kill_worker(self, index: int) -> int:
        """SIGKILL the worker's JVM alone (its executors see their worker go and exit on their own)."""
        worker = self.workers[index]
        assert worker.child is not None and worker.child.alive(), f"worker {index} is not running"
        pid = worker.child.pid
        os.kill(pid, signal.SIGKILL)
        worker.child.proc.wait(10)
        return pid

    def restart_worker(self, index: int, timeout: float = 120.0) -> dict:
        """The worker started again on its ports; returns the master's state once every worker is ALIVE."""
        worker = self.workers[index]
        if worker.child is not None:
            self.supervisor.stop(worker.child, timeout=5)  # its group: anything left of it
        self.start_worker(worker)
        return self.wait_ready(timeout)

    def executors(self, index: int | None = None) -> dict[int, str]:
        """{pid: Spark executor id} of the executor JVMs the workers (or worker `index`) run now."""
        import psutil

        out: dict[int, str] = {}
        for worker in self.workers if index is None else [self.workers[index]]:
            if worker.child is None or not worker.child.alive():
                continue
            try:
                procs = psutil.Process(worker.child.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    argv = proc.cmdline()
                    if any(a.endswith(EXECUTOR_MAIN) for a in argv) and proc.status() != psutil.STATUS_ZOMBIE:
                        out[proc.pid] = argv[argv.index("--executor-id") + 1] if "--executor-id" in argv else "?"
                except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                    continue
        return out

    def describe(self) -> dict:
        return {"master_url": self.master_url, "master_webui": self.state_url, "workers": [
            {"index": w.index, "port": w.port, "work_dir": str(w.work_dir), "starts": w.starts,
             "pid": w.child.pid if w.child else None} for w in self.workers]}

    def _wait(self, predicate, timeout: float, what: str, child: Child | None):
        return wait_until(predicate, timeout, 0.25, gone=lambda: None if child is None or child.alive() else RuntimeError(
            f"{child.name} exited (code {child.proc.returncode}) while waiting for {what}; see {child.log_path}"),
                          timeout_message=lambda: f"timed out after {timeout:.0f}s waiting for {what} (master state: "
                                                  f"{json.dumps(self.state())[:500]}); see {self.dir}")


# -- the run's view (harness.runner, the faults) ------------------------------------------------------------------
def start_cluster(ctx) -> StandaloneCluster:
    """The scenario's cluster: its master up now, its workers started (harness.runner waits for them once the
    service is up, so they come up side by side with the broker)."""
    spark = ctx.scenario.spark
    cluster = ctx.cluster = StandaloneCluster(ctx.run_dir, ctx.supervisor, workers=spark.workers,
                                             cores=spark.worker_cores, memory_mb=spark.worker_memory_mb)
    cluster.start_master()
    cluster.start_workers()
    ctx.state.spark_cluster = cluster.describe()
    return cluster


def spark_cluster(ctx) -> StandaloneCluster | None:
    return ctx.cluster


def code_to_ship(scenario, scenario_dir: str | None) -> tuple[str, ...]:
    """The archives a driver on a cluster master ships: the harness's packages, and the scenario's own query
    module when it lives next to the scenario file."""
    from harness.spark.pyfiles import harness_archive, query_module_archive

    archives = [harness_archive()]
    if scenario_dir:
        query = query_module_archive(scenario.spark.query, Path(scenario_dir))
        if query is not None:
            archives.append(query)
    return tuple(str(a) for a in archives)
