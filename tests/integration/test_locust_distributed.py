"""Locust's distributed mode runs the same paced producer: two workers split the rate exactly, each in a machine
directory of its own (host name + a run-unique id) with its clock exchanges against the master."""
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import pyarrow as pa

from harness import clocks
from harness.backends.kafka.spec import KafkaSpec

KAFKA_SENDER = KafkaSpec.model_construct().sender  # the runner writes the backend's sender into the job

pytestmark = pytest.mark.integration
LOCUSTFILE = str(Path(__file__).resolve().parents[2] / "producers" / "locustfile.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_master_and_two_workers_produce_the_schedule(kafka, tmp_path):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_stream(topic, 4, {})
    out = tmp_path / "producers"
    job = {"backend": "kafka", "sender": KAFKA_SENDER, "stream": topic, "partitions": 4,
           "settings": kafka.producer_settings(),
           "processes": 2, "users": 2, "batch_size": 100, "duration_s": 4.0, "max_backlog_s": 10.0, "seed": 3,
           "rate": {"kind": "constant", "eps": 1000}, "keys": {"kind": "uniform", "count": 100},
           "payload": {"size": {"kind": "fixed", "bytes": 100}}, "out_dir": str(out)}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, HARNESS_PRODUCER_JOB=str(tmp_path / "job.json"))
    locust = [sys.executable, "-m", "locust", "-f", LOCUSTFILE]
    port = free_port()
    master = subprocess.Popen(locust + ["--master", "--headless", "--master-bind-host", "127.0.0.1",
                                        "--master-bind-port", str(port), "--expect-workers", "2", "-u", "2",
                                        "-r", "100", "-t", "9s", "--only-summary"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [subprocess.Popen(locust + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        master.wait(timeout=120)
        for w in workers:
            w.wait(timeout=60)
    finally:
        for p in [master, *workers]:
            if p.poll() is None:
                p.kill()
    acks = pa.Table.from_batches(list(clocks.corrected_batches(out))).to_pandas()
    assert sorted(acks.groupby("producer").size().to_dict().items()) == [(0, 2000), (1, 2000)], master.stdout.read()
    assert (acks["error"] == "").all()
    machines = sorted(d for d in out.iterdir() if d.is_dir())
    assert len(machines) == 2 and all((d / "machine.json").is_file() for d in machines)
    summaries = sorted((json.loads(p.read_text()) for p in out.glob("*/summary-*.json")), key=lambda s: s["producer"])
    assert [s["acked"] for s in summaries] == [2000, 2000]
    plan = clocks.plan(out)  # same host, same clock: each offset within its own exchange's bound
    assert all(m.samples >= 1 and abs(m.offset_ms) <= m.uncertainty_ms + 1.0 for m in plan.machines), plan
