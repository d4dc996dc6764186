"""The runner's side of load generation: start N producer processes on one schedule and collect what they did.

With `locust_master` in the job ("HOST:PORT", the scenario's producers.locust_master) the processes are locust
workers on other machines (producers/locustfile.py): the fleet starts only the locust master here, which hands
the workers the job and the start time and waits for `processes` of them. Their files land in one subdirectory per
machine (`<out_dir>/<host>-<id>/`, gathered there by hand when the machines do not share this file system), so
everything that reads the fleet's files looks in subdirectories too.

A run's local processes start early (`prepare`, once the service is up, while the Spark query starts): each does
its whole start-up (imports, locust, its client created and connected, the topic's metadata fetched), says so
(`ready-<i>.json`) and waits; `go` then writes job.json with the traffic's start time, the one file every process
waits for. Why: started at the go, the processes' own start-up (~1.5 s on two cores) stood between the query's
starting offsets and the first event. job.json appears only at the go, so a run that failed before it has no
producer record (the checker reads none).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from harness.files import atomic
from harness.supervisor import Child, Supervisor, log_lines, wait_until
from harness.producers.records import histogram_summary, merge_histograms, merge_partition_counts

WORKER_SUMMARY_WAIT_S = 20.0  # workers collect their last acks after the master stops them
MASTER_MARGIN_S = 3.0  # the master's run time beyond the traffic: the workers' last batch is sent by then
START_LEAD_S = 1.5  # `start`: processes started now are sending by then (their own start-up)
GO_LEAD_S = 0.25  # `go`: ready processes see job.json (polled every 20 ms) and spawn their users by then
READY_TIMEOUT_S = 60.0  # `go`: how long a prepared process may still take to be ready
PREPARED_JOB = "prepared-job.json"  # the job without its start time, for processes started before the go
MEASURE_FILE = "measure.json"  # the measured window's start, written when a caught_up warm-up ends
MEASURE_POLL_S = 0.2  # how often a process in a caught_up warm-up looks for it


class ProducerFleet:
    def __init__(self, out_dir: Path, supervisor: Supervisor | None, job: dict):
        self.out_dir = out_dir
        self.supervisor = supervisor
        self.job = dict(job, out_dir=str(out_dir))
        self.children: list[Child] = []
        self._live: dict[Path, tuple[int, tuple[int, int, int]]] = {}  # stats file -> (bytes read, its totals)
        out_dir.mkdir(parents=True, exist_ok=True)

    @classmethod
    def read(cls, out_dir: Path) -> "ProducerFleet | None":
        """The record a finished fleet left in its directory (job.json and what the processes wrote), for the
        checker; None when the producers never started."""
        job = out_dir / "job.json"
        if not job.exists():
            return None
        return cls(out_dir, None, json.loads(job.read_text()))

    def start(self, start_at: float) -> None:
        """Start the processes now with the traffic starting at `start_at` (they must be up by then)."""
        self.job["start_at"] = start_at
        job_path = self.out_dir / "job.json"
        job_path.write_text(json.dumps(self.job, indent=2))
        assert self.supervisor is not None
        if self.job.get("locust_master"):
            self._start_master(job_path, start_at)
            return
        self._spawn(job_path)

    def prepare(self) -> None:
        """Start the local processes without a start time: they get ready and wait for `go`. A distributed fleet
        (a locust master) starts at the go, as before: its workers take the job and the start from the master."""
        if self.job.get("locust_master"):
            return
        prepared = self.out_dir / PREPARED_JOB
        atomic.write_json(prepared, dict(self.job, go_file=str(self.out_dir / "job.json")))
        self._spawn(prepared)

    def go(self, lead_s: float = GO_LEAD_S, ready_timeout_s: float = READY_TIMEOUT_S) -> float:
        """The traffic's start time, `lead_s` from now, once every prepared process is ready (a fleet not
        prepared starts now, START_LEAD_S ahead): job.json with it, written atomically, is what the processes
        wait for. A process that exited while getting ready fails this, named with its log."""
        if not self.children:
            start_at = time.time() + START_LEAD_S
            self.start(start_at)
            return start_at

        def gone() -> Exception | None:
            dead = [c for c in self.children if not c.alive()]
            return RuntimeError("the producers did not start: " + "; ".join(
                f"{c.name} exited with {c.proc.returncode} before the traffic's start"
                + "".join(f": {line.strip()}" for line in log_lines(c.log_path)[-1:]) + f" (see {c.log_path})"
                for c in dead)) if dead else None

        wait_until(lambda: len(self.ready()) == len(self.children) and all(c.alive() for c in self.children),
                   ready_timeout_s, 0.02, gone=gone,
                   timeout_message=lambda: f"the producers were not ready {ready_timeout_s:.0f} s after the "
                                           f"traffic was due (ready: {sorted(self.ready())}; see their logs in "
                                           f"{self.out_dir})")
        start_at = time.time() + lead_s
        self.job["start_at"] = start_at
        atomic.write_json(self.out_dir / "job.json", self.job)
        return start_at

    @property
    def adaptive_warmup(self) -> bool:
        """The warm-up lasts until the runner says the query caught up (measure.json), at most warmup_max_s."""
        return self.job.get("warmup_until") == "caught_up"

    def start_measuring(self, measure_at: float, record: dict) -> None:
        """End a caught_up warm-up: the measured window (duration_s) starts at `measure_at` (epoch s, a moment
        ahead: every process polls for it), `record` saying why (harness.analysis.warmup)."""
        start = float(self.job["start_at"])
        atomic.write_json(self.out_dir / MEASURE_FILE, {**record, "measure_at": measure_at,
                                                        "warmup_s": round(measure_at - start, 6)})

    def warmup_s(self) -> float:
        """The warm-up this fleet's traffic had (seconds from its start to the measured window): warmup_s, or
        for a caught_up warm-up what measure.json says (a run stopped before it ended: warmup_max_s, the longest
        the processes would have waited)."""
        if not self.adaptive_warmup:
            return float(self.job.get("warmup_s") or 0.0)
        record = self.measure_record()
        return float(record["warmup_s"]) if record else float(self.job["warmup_max_s"])

    def measure_record(self) -> dict | None:
        try:
            return json.loads((self.out_dir / MEASURE_FILE).read_text())
        except (OSError, ValueError):
            return None

    def ready(self) -> set[int]:
        """The prepared processes that said they are ready (`ready-<index>.json`, written atomically)."""
        return {int(p.stem.split("-", 1)[1]) for p in self.out_dir.glob("ready-*.json")}

    def ready_at(self) -> float | None:
        """When the last prepared process was ready (epoch s); None when none was prepared."""
        times = [float(json.loads(p.read_text())["at"]) for p in self.out_dir.glob("ready-*.json")]
        return max(times) if times else None

    def _spawn(self, job_path: Path) -> None:
        for i in range(int(self.job["processes"])):
            self.children.append(self.supervisor.spawn(
                f"producer-{i}", [sys.executable, "-m", "harness.producers.process", str(job_path), str(i)],
                log_path=self.out_dir / f"producer-{i}.log"))

    def _start_master(self, job_path: Path, start_at: float) -> None:
        """The locust master, supervised like any producer: it runs until the traffic's end plus a margin for the
        last acks, then tells the workers to stop (they collect their acks and write their summaries)."""
        host, _, port = str(self.job["locust_master"]).rpartition(":")
        run_time = max(0.0, start_at - time.time()) + float(self.job.get("warmup_s") or 0) + \
            float(self.job["duration_s"]) + MASTER_MARGIN_S
        locustfile = str(Path(__file__).resolve().parent / "locustfile.py")
        self.children.append(self.supervisor.spawn(
            "locust-master", [sys.executable, "-m", "locust", "-f", locustfile, "--master", "--headless",
                              "--master-bind-host", host or "*", "--master-bind-port", port,
                              "--expect-workers", str(int(self.job["processes"])),
                              "-u", str(int(self.job["processes"]) * int(self.job["users"])), "-r", "1000",
                              "-t", f"{int(run_time + 0.999)}s", "--stop-timeout", "0", "--only-summary"],
            log_path=self.out_dir / "locust-master.log", env=dict(os.environ, HARNESS_PRODUCER_JOB=str(job_path))))

    def running(self) -> bool:
        return any(c.alive() for c in self.children)

    def failures(self) -> list[str]:
        return [f"{c.name} exited with {c.proc.returncode} (see {c.log_path})"
                for c in self.children if not c.alive() and c.proc.returncode != 0]

    def stop(self) -> None:
        for c in self.children:
            self.supervisor.stop(c, timeout=10)

    def wait_for_summaries(self, timeout: float) -> None:
        """Distributed: after the master stopped, the workers' summaries when they share this file system (a
        worker elsewhere writes its own; then this waits `timeout` and the files are gathered later)."""
        deadline = time.monotonic() + timeout
        while len(self.summaries()) < int(self.job["processes"]) and time.monotonic() < deadline:
            time.sleep(0.2)

    def live(self) -> dict[str, int]:
        """Totals so far from the per-second stats lines (flushed once a second). Each file is read on from where
        the last call stopped (whole lines only): the runner asks twice a second, and re-reading every file whole
        grew with the run (a two-hour soak's 7,200 lines a file, parsed each time)."""
        for f in self.out_dir.rglob("stats-*.jsonl"):
            offset, totals = self._live.get(f, (0, (0, 0, 0)))
            try:
                with open(f, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1  # a line still being written waits for the next call
            sent, acked, failed = totals
            for line in data[:end].splitlines():
                try:
                    row = json.loads(line)
                    sent, acked, failed = sent + row["sent"], acked + row["acked"], failed + row["failed"]
                except (ValueError, KeyError, TypeError):
                    continue
            self._live[f] = (offset + end, (sent, acked, failed))
        return {k: sum(t[1][i] for t in self._live.values()) for i, k in enumerate(("sent", "acked", "failed"))}

    def summaries(self) -> list[dict]:
        """Every producer's summary, at the top (this machine's processes) or in a machine's subdirectory."""
        out = {}
        for path in sorted(self.out_dir.rglob("summary-*.json")):
            try:
                summary = json.loads(path.read_text())
            except ValueError:
                continue
            out[int(summary["producer"])] = summary
        return [out[i] for i in sorted(out)]

    def per_second(self, shift_s: dict[str, int] | None = None) -> list[dict]:
        """All processes' per-second rows merged by second (delivery histograms merged exactly). `shift_s`: per
        machine directory (relative to out_dir) the whole seconds its clock runs ahead of the run's (harness.clocks),
        taken off its rows' seconds so every machine's second t is the same second."""
        merged: dict[int, dict] = {}
        hists: dict[int, list[str]] = {}
        for f in sorted(self.out_dir.rglob("stats-*.jsonl")):
            shift = (shift_s or {}).get(str(f.parent.relative_to(self.out_dir)), 0)
            for line in f.read_text().splitlines():
                try:
                    row = json.loads(line)
                    row["t"] -= shift
                except (ValueError, KeyError, TypeError):  # a torn last line of a killed process
                    continue
                m = merged.setdefault(row["t"], {"t": row["t"], "due": 0, "sent": 0, "acked": 0, "failed": 0,
                                                 "buffer_full": 0, "errors": {}})
                for k in ("due", "sent", "acked", "failed", "buffer_full"):
                    m[k] += row[k]
                for k, v in row["errors"].items():
                    m["errors"][k] = m["errors"].get(k, 0) + v
                if row.get("delivery_hist"):
                    hists.setdefault(row["t"], []).append(row["delivery_hist"])
        for t, encoded in hists.items():
            merged[t]["delivery_us"] = histogram_summary(merge_histograms(encoded))
        return [merged[t] for t in sorted(merged)]

    def merged_summary(self) -> dict:
        summaries = self.summaries()
        events, nbytes = merge_partition_counts(summaries)
        errors: dict[str, int] = {}
        for s in summaries:
            for k, v in s["errors"].items():
                errors[k] = errors.get(k, 0) + v
        return {
            "processes": int(self.job["processes"]), "reported": len(summaries),
            "sent": sum(s["sent"] for s in summaries), "acked": sum(s["acked"] for s in summaries),
            "failed": sum(s["failed"] for s in summaries), "errors": errors,
            "pacer_skipped": sum(s["pacer_skipped"] for s in summaries),
            "unacked_at_exit": sum(s["unacked_at_exit"] for s in summaries),
            "partition_events": events, "partition_bytes": nbytes,
            "delivery_us": histogram_summary(merge_histograms([s.get("delivery_hist") for s in summaries])),
        }

    def wait(self, timeout: float, tick=None) -> None:
        def done() -> bool:
            if not self.running():
                return True
            if tick:
                tick()
            return False

        wait_until(done, timeout, 0.5, timeout_message=lambda: f"producers still running after {timeout:.0f}s")
        if self.job.get("locust_master"):
            self.wait_for_summaries(WORKER_SUMMARY_WAIT_S)
