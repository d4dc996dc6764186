"""What every process of a run costs, sampled while it runs: RSS, CPU, open files, threads, and the run's disk.

A soak is judged on its resources as much as on its events: a broker, driver or producer whose RSS keeps growing
fails a night even when no event was lost. The sampler is a daemon thread in the runner (like harness.samplers.lag's
LagSampler) appending one JSON line per sample to resources.jsonl; reports.resources turns the file into figures
and leak verdicts.

Which processes: every process the harness starts carries HARNESS_RUN_ID=<run id> in its environment
(harness.supervisor), and so do their descendants (the driver's JVM, executors, Spark's Python workers), plus the
runner itself. Reading every process's environment each sample would cost a scan of /proc; a pid is examined
once, when it first appears, and kept while it lives (a pid cannot be reused while its process still exists).
A process is known by (pid, create_time): a driver killed and restarted is a new process.

Its role comes from its command line, read again when the process's name changes (a forked child that execs
into something else, as Spark's launch scripts do, changes role).

The machine as a whole: each sample also carries /proc/stat's CPU counters (`stat`: seconds of user, nice,
system, idle, iowait, irq, softirq and steal time over all CPUs since boot, and the number of CPUs), so the CPU
that processes outside the run took while it measured (harness.analysis.resources.machine) can be computed from
the run directory alone, again after it is moved or copied.

Disk is what `du` counts (allocated blocks: Kafka's preallocated sparse index files count what they use), for
the whole run directory and per top-level entry. Walking a sink of many files costs more than sampling twenty
processes, so the walk is spaced out to stay under ~1% of the sampler's wall time; samples without it have no
"disk" key. Each line carries its own cost (`cost_ms`), so the report states what the sampling cost.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

ENV_NAME = "HARNESS_RUN_ID"
TOP_FILES = "(files)"  # the run directory's own files (progress.jsonl, lag.jsonl, …) in the disk breakdown
DISK_BUDGET_SHARE = 0.01  # the disk walk may take at most this share of wall time
# a single-threaded process younger than this is a spawn in passing (Hadoop's chmod, a JVM's child between clone
# and exec, which shares the JVM's memory and would count it twice); left out, and counted as `transient`
TRANSIENT_S = 1.0

# (role, substrings of the command line, any of which names it); the first match wins, so JVMs whose class path
# mentions other names are placed by their main class, which comes first here
ROLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("broker", ("kafka.Kafka",)),
    ("executor", ("CoarseGrainedExecutorBackend",)),
    # spark-submit's scripts and the JVM that builds the driver's command line: they name SparkSubmit in their
    # arguments but live a second (the script then execs into the driver's JVM, and its role changes)
    ("launcher", ("org.apache.spark.launcher.Main", "bin/spark-submit", "bin/spark-class")),
    # a standalone cluster the run starts (harness.spark.cluster): its JVMs once spark-class has exec'd into them
    ("spark-master", ("org.apache.spark.deploy.master.Master",)),
    ("spark-worker", ("org.apache.spark.deploy.worker.Worker",)),
    ("driver-jvm", ("org.apache.spark.deploy.SparkSubmit",)),
    # Spark's Python workers: `python -m pyspark.daemon` and its forks, or another `-m pyspark.…` worker module
    ("python-worker", ("-m pyspark.", "pyspark/daemon.py", "pyspark/worker.py")),
    ("driver", ("harness.spark.query",)),
    ("emulator", ("harness.emulator",)),
    ("netproxy", ("harness.netproxy",)),
    ("producer", ("producers.process", "locust")),
)


def role_of(cmdline: list[str]) -> str:
    """The role a command line plays in a run ('other' for anything not recognised: a shell, a tool)."""
    text = " ".join(cmdline)
    for role, needles in ROLES:
        if any(n in text for n in needles):
            return role
    return "other"


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:  # gone, or not ours
        return False


def boot_time() -> float:
    """When the kernel booted, in epoch seconds to 10 ms: /proc/stat's btime (what psutil uses) is whole seconds,
    which would put every process's start up to a second off the sampler's clock."""
    with open("/proc/uptime", encoding="ascii") as f:
        return time.time() - float(f.read().split()[0])


# /proc/stat's columns after "cpu", in order (guest and guest_nice, which follow, are already inside user and nice)
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_cpu(path: str = "/proc/stat") -> dict | None:
    """The machine's CPU counters (STAT_FIELDS, seconds over all CPUs since boot) and its number of CPUs (the
    `cpuN` lines: those online), from /proc/stat; None where there is none (not Linux)."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    total = next((line.split()[1:] for line in lines if line.startswith("cpu ")), None)
    if total is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    out: dict = {name: round(int(v) / tick, 2) for name, v in zip(STAT_FIELDS, total)}
    out["cores"] = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return out


def _pids() -> set[int]:
    return {int(n) for n in os.listdir("/proc") if n.isdigit()}


class ProcessFinder:
    """The live processes of one run: the runner plus every process whose environment has HARNESS_RUN_ID=run_id.
    Only pids not seen in the previous call have their environment read."""

    def __init__(self, run_id: str, include_self: bool = True):
        self.needle = f"{ENV_NAME}={run_id}".encode()
        self.me = os.getpid() if include_self else None
        self._seen: set[int] = set()
        self._ours: set[int] = set()

    def find(self) -> list[int]:
        now = _pids()
        self._ours = {pid for pid in self._ours if pid in now}
        self._ours |= {pid for pid in now - self._seen if pid == self.me or _has_env(pid, self.needle)}
        self._seen = now
        return sorted(self._ours)


class ProcReader:
    """One process's figures straight from /proc (reads of /proc/PID/stat and statm and a listing of its fds: several
    times cheaper than psutil's separate reads, which matters at every sample of every process). The command line
    is read again only when the process's name (comm) changes, which is what an exec does."""

    def __init__(self, runner_pid: int | None):
        self.runner_pid = runner_pid
        self.tick = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.boot = boot_time()
        self._roles: dict[int, tuple[str, str]] = {}  # pid -> (comm, role)

    def record(self, pid: int) -> dict | None:
        """pid, create_time, role, name (the kernel's comm), rss_bytes, anon_bytes, cpu_s (user + system, cumulative), fds,
        threads; None when the process is gone or a zombie."""
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{pid}/statm", "rb") as f:  # stat's rss field lags (per-CPU counters); statm's not
                resident, shared = (int(x) for x in f.read().split()[1:3])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            self._roles.pop(pid, None)
            return None
        head, _, rest = stat.rpartition(b")")
        fields = rest.split()
        if fields[0] in (b"Z", b"X"):
            return None
        comm = head.partition(b"(")[2].decode(errors="replace")
        return {"pid": pid, "create_time": round(self.boot + int(fields[19]) / self.tick, 2),
                "role": self._role(pid, comm), "name": comm, "rss_bytes": resident * self.page,
                # anonymous memory (heap, stacks): RSS without file pages mapped in (a history file read through
                # mmap is RSS too, but the kernel takes it back at will): what a leak grows
                "anon_bytes": (resident - shared) * self.page,
                "cpu_s": round((int(fields[11]) + int(fields[12])) / self.tick, 3), "fds": fds,
                "threads": int(fields[17])}

    def _role(self, pid: int, comm: str) -> str:
        if pid == self.runner_pid:
            return "runner"
        known = self._roles.get(pid)
        if known is None or known[0] != comm:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace").split("\0")
            except OSError:
                cmdline = [comm]
            known = self._roles[pid] = (comm, role_of(cmdline))
        return known[1]

    def forget_except(self, pids: set[int]) -> None:
        for pid in [p for p in self._roles if p not in pids]:
            del self._roles[pid]


def disk_usage(run_dir: Path) -> dict:
    """Allocated bytes under run_dir (what `du` counts; symlinks not followed), in all and per top-level entry
    (top-level files together under TOP_FILES)."""
    by_entry: dict[str, int] = {}
    try:
        top = list(os.scandir(run_dir))
    except OSError:
        return {"bytes": 0, "by_dir": {}}
    for entry in top:
        try:
            if entry.is_dir(follow_symlinks=False):
                by_entry[entry.name] = _tree_bytes(entry.path)
            else:
                by_entry[TOP_FILES] = by_entry.get(TOP_FILES, 0) + entry.stat(follow_symlinks=False).st_blocks * 512
        except OSError:  # removed while we looked
            continue
    return {"bytes": sum(by_entry.values()), "by_dir": dict(sorted(by_entry.items()))}


def _tree_bytes(path: str) -> int:
    total, stack = 0, [path]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    total += e.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    return total


class ResourceSampler(threading.Thread):
    """Appends {"t", "cost_ms", "procs": [...], "stat": {...} (machine_cpu), and when there are "disk": {"bytes",
    "by_dir"}, "disk_ms", "transient"} to `path` every `interval_s` until stopped. `sample()` takes one sample
    without the thread."""

    def __init__(self, path: Path, run_id: str, run_dir: Path, interval_s: float = 5.0):
        super().__init__(name="resource-sampler", daemon=True)
        self.path, self.run_dir, self.interval_s = Path(path), Path(run_dir), interval_s
        self.finder = ProcessFinder(run_id)
        self.reader = ProcReader(self.finder.me)
        self._stop_event = threading.Event()
        self._next_disk = 0.0
        self.errors: list[str] = []

    def sample(self) -> dict:
        t = time.time()
        start = time.perf_counter()
        pids = self.finder.find()
        self.reader.forget_except(set(pids))
        procs = [r for pid in pids if (r := self.reader.record(pid)) is not None]
        kept = [r for r in procs if not (r["threads"] == 1 and t - r["create_time"] < TRANSIENT_S
                                         and r["role"] != "runner")]
        row: dict = {"t": round(t, 3), "procs": kept}
        stat = machine_cpu()  # right after the processes: the two readings a few ms apart at most
        if stat is not None:
            row["stat"] = stat
        if len(kept) < len(procs):
            row["transient"] = len(procs) - len(kept)
        if time.monotonic() >= self._next_disk:
            d0 = time.perf_counter()
            row["disk"] = disk_usage(self.run_dir)
            walk = time.perf_counter() - d0
            row["disk_ms"] = round(walk * 1000, 2)
            self._next_disk = time.monotonic() + walk / DISK_BUDGET_SHARE
        row["cost_ms"] = round((time.perf_counter() - start) * 1000, 2)
        return row

    def run(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            while not self._stop_event.is_set():
                t = time.time()
                try:
                    f.write(json.dumps(self.sample()) + "\n")
                    f.flush()
                except Exception as exc:  # noqa: BLE001 - a sampler must never take the run down
                    if len(self.errors) < 20:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
                self._stop_event.wait(max(0.0, self.interval_s - (time.time() - t)))

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=15)
