"""Producers started before the traffic (ProducerFleet.prepare / go, producers.process.wait_for_go): the runner's
go is one file, job.json with the start time, that every prepared process reads the same; a process that dies
before it fails the go, named with its log. The fleet side is driven by small real processes that follow the
file protocol (ready-<i>.json, then wait for job.json); the process side runs in a child interpreter (gevent
patches everything it imports)."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from harness.backends.kafka.spec import KafkaSpec
from harness.supervisor import Supervisor, wait_until
from harness.producers.fleet import PREPARED_JOB, ProducerFleet

ROOT = Path(__file__).resolve().parents[2]

# a stand-in producer: says it is ready after `delay` s, waits for job.json, writes down the start it read
FOLLOWER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    out, index, delay = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    time.sleep(delay)
    (out / f"ready-{index}.json").write_text(json.dumps({"pid": os.getpid(), "at": time.time()}))
    while not (out / "job.json").exists():
        time.sleep(0.02)
    (out / f"read-{index}.json").write_text(json.dumps(json.loads((out / "job.json").read_text())["start_at"]))
""")


def _fleet(tmp_path: Path, sup: Supervisor, delays: list[float], script: str = FOLLOWER) -> ProducerFleet:
    fleet = ProducerFleet(tmp_path, sup, {"processes": len(delays), "duration_s": 1})
    for i, delay in enumerate(delays):  # what prepare() spawns, standing in for producers.process
        fleet.children.append(sup.spawn(f"producer-{i}", [sys.executable, "-c", script, str(tmp_path), str(i),
                                                          str(delay)], log_path=tmp_path / f"producer-{i}.log"))
    return fleet


def test_go_waits_for_every_process_and_hands_all_the_same_start(tmp_path):
    with Supervisor(uuid.uuid4().hex) as sup:
        fleet = _fleet(tmp_path, sup, [0.0, 0.4])
        start_at = fleet.go(lead_s=0.25)
        ready_at = fleet.ready_at()
        for c in fleet.children:
            c.proc.wait(10)
    assert not (tmp_path / "job.json").with_suffix(".tmp").exists()
    assert json.loads((tmp_path / "job.json").read_text())["start_at"] == start_at
    assert [json.loads((tmp_path / f"read-{i}.json").read_text()) for i in (0, 1)] == [start_at, start_at]
    # the start is the lead after the last process was ready (as each recorded it; the one that slept 0.4 s is
    # usually that one, but on a busy machine either may be), not before
    ready = [json.loads((tmp_path / f"ready-{i}.json").read_text())["at"] for i in (0, 1)]
    assert ready_at == max(ready) and start_at >= ready_at + 0.25
    assert fleet.ready() == {0, 1} and [c.proc.returncode for c in fleet.children] == [0, 0]


def test_a_process_that_dies_before_the_go_fails_it_named_with_its_log(tmp_path):
    dies = "import sys; print('ImportError: no module named confluent_kafka', file=sys.stderr); sys.exit(3)"
    with Supervisor(uuid.uuid4().hex) as sup:
        fleet = _fleet(tmp_path, sup, [0.0], script=dies)
        with pytest.raises(RuntimeError) as err:
            fleet.go(ready_timeout_s=30)
    message = str(err.value)
    assert "producer-0 exited with 3 before the traffic's start" in message
    assert "ImportError: no module named confluent_kafka" in message and "producer-0.log" in message
    assert not (tmp_path / "job.json").exists()  # no go: the checker finds no producer record


def test_a_process_never_ready_times_out_saying_which_were(tmp_path):
    with Supervisor(uuid.uuid4().hex) as sup:
        fleet = _fleet(tmp_path, sup, [0.0, 30.0])
        wait_until(lambda: fleet.ready() == {0}, 30, 0.02, "the first process ready")  # a busy machine's start
        with pytest.raises(TimeoutError, match=r"not ready 1 s .*\(ready: \[0\]"):
            fleet.go(ready_timeout_s=1.0)


def test_prepare_starts_the_real_process_on_a_job_without_a_start_and_its_failure_fails_the_go(tmp_path):
    with Supervisor(uuid.uuid4().hex) as sup:
        fleet = ProducerFleet(tmp_path / "p", sup, {"processes": 1, "duration_s": 1})  # no batch_size: it dies
        fleet.prepare()
        prepared = json.loads((tmp_path / "p" / PREPARED_JOB).read_text())
        assert "start_at" not in prepared and prepared["go_file"] == str(tmp_path / "p" / "job.json")
        with pytest.raises(RuntimeError, match=r"producer-0 exited with 1 before the traffic's start: KeyError: "
                                               r"'batch_size' \(see .*producer-0.log\)"):
            fleet.go(ready_timeout_s=60)
        distributed = ProducerFleet(tmp_path / "d", sup, {"processes": 2, "locust_master": "127.0.0.1:1"})
        distributed.prepare()  # the master starts at the go, as before
        assert distributed.children == [] and not (tmp_path / "d" / PREPARED_JOB).exists()


# -- the process's side ------------------------------------------------------------------------------------------
PROCESS_SIDE = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from types import SimpleNamespace
    import gevent
    from harness.producers import process
    out = Path(sys.argv[1])
    go = out / "job.json"
    shared = SimpleNamespace(index=4, stopping=False)
    def later():
        gevent.sleep(0.2)
        ready = json.loads((out / "ready-4.json").read_text())
        go.write_text(json.dumps({"start_at": 1234.5, "ready_seen": ready["at"]}))
    gevent.spawn(later)
    got = process.wait_for_go(shared, go, poll_s=0.02)
    go.unlink()
    shared.stopping = False
    gevent.spawn_later(0.2, lambda: setattr(shared, "stopping", True))  # SIGTERM's stop_now
    stopped = process.wait_for_go(shared, go, poll_s=0.02)
    print(json.dumps({"got": got, "stopped": stopped}))
""")


def test_a_prepared_process_waits_for_the_go_and_takes_its_start_or_stops(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROCESS_SIDE, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"got": 1234.5, "stopped": None}
    assert json.loads((tmp_path / "ready-4.json").read_text())["pid"] > 0


def test_a_real_prepared_process_stopped_before_the_go_ends_cleanly_without_a_record(tmp_path):
    """SIGTERM while waiting (the run failed or was stopped before its traffic): the process exits 0 at once,
    sends nothing and writes no summary. Its client points at a port nobody listens on: connecting before the
    start fails, is said in its log, and the process is ready all the same (the first send would meet it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    job = {"backend": "kafka", "sender": KafkaSpec.model_construct().sender, "stream": "events", "partitions": 2,
           "settings": {"bootstrap.servers": f"127.0.0.1:{port}"}, "processes": 1, "users": 1, "batch_size": 10,
           "duration_s": 5, "max_backlog_s": 5,
           "seed": 1, "rate": {"kind": "constant", "eps": 100}, "keys": {"kind": "uniform", "count": 10},
           "payload": {"size": {"kind": "fixed", "bytes": 100}}, "connect_timeout_s": 0.5}
    with Supervisor(uuid.uuid4().hex) as sup:
        fleet = ProducerFleet(tmp_path, sup, job)
        fleet.prepare()
        wait_until(lambda: fleet.ready() == {0}, 60, 0.05, gone=lambda: None if fleet.children[0].alive()
                   else RuntimeError((tmp_path / "producer-0.log").read_text()))
        child = fleet.children[0]
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(10) == 0, (tmp_path / "producer-0.log").read_text()
    log = (tmp_path / "producer-0.log").read_text()
    assert "producer 0: connecting before the start failed: KafkaException" in log, log
    assert not (tmp_path / "summary-0.json").exists() and not (tmp_path / "job.json").exists()
    assert (tmp_path / "stats-0.jsonl").read_text() == ""
