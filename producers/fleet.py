"""The runner's side of load generation: start N producer processes on one schedule and collect what they did."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness.supervisor import Child, Supervisor
from producers.records import histogram_summary, merge_histograms, merge_partition_counts


class ProducerFleet:
    def __init__(self, out_dir: Path, supervisor: Supervisor | None, job: dict):
        self.out_dir = out_dir
        self.supervisor = supervisor
        self.job = dict(job, out_dir=str(out_dir))
        self.children: list[Child] = []
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
        self.job["start_at"] = start_at
        job_path = self.out_dir / "job.json"
        job_path.write_text(json.dumps(self.job, indent=2))
        assert self.supervisor is not None
        for i in range(int(self.job["processes"])):
            self.children.append(self.supervisor.spawn(
                f"producer-{i}", [sys.executable, "-m", "producers.process", str(job_path), str(i)],
                log_path=self.out_dir / f"producer-{i}.log"))

    def running(self) -> bool:
        return any(c.alive() for c in self.children)

    def failures(self) -> list[str]:
        return [f"{c.name} exited with {c.proc.returncode} (see {c.log_path})"
                for c in self.children if not c.alive() and c.proc.returncode != 0]

    def stop(self) -> None:
        for c in self.children:
            self.supervisor.stop(c, timeout=10)

    def live(self) -> dict[str, int]:
        """Totals so far from the per-second stats lines (flushed once a second)."""
        sent = acked = failed = 0
        for f in self.out_dir.glob("stats-*.jsonl"):
            try:
                for line in f.read_text().splitlines():
                    row = json.loads(line)
                    sent += row["sent"]
                    acked += row["acked"]
                    failed += row["failed"]
            except (OSError, ValueError):
                continue
        return {"sent": sent, "acked": acked, "failed": failed}

    def summaries(self) -> list[dict]:
        out = []
        for i in range(int(self.job["processes"])):
            path = self.out_dir / f"summary-{i}.json"
            if path.exists():
                out.append(json.loads(path.read_text()))
        return out

    def per_second(self) -> list[dict]:
        """All processes' per-second rows merged by second (delivery histograms merged exactly)."""
        merged: dict[int, dict] = {}
        hists: dict[int, list[str]] = {}
        for f in sorted(self.out_dir.glob("stats-*.jsonl")):
            for line in f.read_text().splitlines():
                try:
                    row = json.loads(line)
                except ValueError:  # a torn last line of a killed process
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
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise TimeoutError(f"producers still running after {timeout:.0f}s")
            if tick:
                tick()
            time.sleep(0.5)
