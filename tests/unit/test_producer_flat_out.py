"""A producer process asked for far more than it can send (the producer bench's flat out: it is behind at every
batch and skips what is older than its backlog) still ends at its end time with its summary: its users send
batch after batch without sleeping, and must let the process's other greenlets (the one watching the end, the
reports) run between two batches. The process is real (`python -m harness.producers.process`), its sender a counting
stand-in, so the test needs no broker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

COUNTING_SENDER = textwrap.dedent("""
    class CountingSender:
        name = "counting"
        service_every_s = 0.2

        def __init__(self, acks, stats):
            self.acks, self.stats, self.handed = acks, stats, 0

        @classmethod
        def from_job(cls, job, acks, stats):
            return cls(acks, stats)

        def send_many(self, values, keys, partitions, headers=None):
            self.handed += len(values)

        def service(self):
            pass

        def outstanding(self):
            return 0

        def abandon(self):
            pass

        def close(self):
            pass
""")


def test_a_producer_far_behind_its_rate_ends_on_time_with_its_summary(tmp_path):
    (tmp_path / "counting_sender.py").write_text(COUNTING_SENDER)
    out = tmp_path / "producers"
    start = time.time() + 1.0
    job = {"backend": "kafka", "sender": "counting_sender:CountingSender", "stream": "events", "partitions": 8,
           "settings": {}, "processes": 1, "users": 2, "batch_size": 1000, "batch_wait_s": 0.05, "duration_s": 2,
           "max_backlog_s": 0.05, "seed": 1, "rate": {"kind": "constant", "eps": 2_000_000},
           "keys": {"kind": "uniform", "count": 1000}, "payload": {"size": {"kind": "fixed", "bytes": 256}},
           "out_dir": str(out), "start_at": start}
    job_path = tmp_path / "job.json"
    job_path.write_text(json.dumps(job))
    done = subprocess.run([sys.executable, "-m", "harness.producers.process", str(job_path), "0"], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=f"{tmp_path}:{ROOT}", PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary-0.json").read_text())
    assert summary["finished_at"] < start + 2 + 30  # its end, then its last batches: not minutes later
    assert summary["sent"] > 10_000 and summary["pacer_skipped"] > 0  # flat out: behind, skipping the stale
    assert summary["sent"] + summary["pacer_skipped"] <= 2_000_000 * 2 + 1000
