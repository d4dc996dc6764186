"""Locust's distributed mode (a master and workers, on several machines) for more traffic than one machine makes.

The harness starts the master itself when the scenario names one (`producers.locust_master = "HOST:PORT"`, see the
README's "Producers on several machines"); each producer machine runs a plain locust worker with this file:

    locust -f producers/locustfile.py --worker --master-host MASTER --master-port PORT

A worker needs nothing else: the master hands it the job (the harness's producers/job.json) and the start time
over locust's message channel. Every worker takes 1/`processes` of the rate (its locust worker index is its
producer index, unique across machines) and writes its ack log, stats, summary and clock sidecar into
`<out_dir>/<machine id>/` (host name + a run-unique id: directories gathered from several machines never
collide). `HARNESS_PRODUCER_OUT` moves `out_dir` on a worker (default: the job's, the master's run directory,
which is right when the worker shares the master's file system).

Clocks: at start and every CLOCK_EVERY_S a worker asks the master for its time (NTP-style, harness.clocks), and
starts its traffic at the job's start time read on the master's clock. Its ack log keeps its own clock's times;
`harness check` corrects them by the measured offset.

Without the harness (a master started by hand), `HARNESS_PRODUCER_JOB=job.json` on the master names the job.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import gevent
from gevent.event import Event
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from harness import clocks
from harness.files import atomic

if os.environ.get(clocks.TEST_OFFSET_ENV):  # tests only: this worker's clock is off by that much
    time.time = clocks.wall_clock()

from harness.producers import process  # noqa: E402
from harness.producers.process import PacedProducer  # noqa: E402,F401  (the user class locust runs)

CLOCK_EVERY_S = 5.0
FIRST_EXCHANGES = 8  # before the start: the best of these bounds the start's alignment
START_LEAD_S = 2.0  # a start time already past on the master: this far ahead of its test start


class _Worker:
    """A worker's state before and during the traffic: the job from the master, its clock log."""

    def __init__(self):
        self.job: dict | None = None
        self.got_job = Event()
        self.clock: clocks.ClockLog | None = None
        self.pending: list[float] = []
        self.machine = clocks.machine_id()
        self.sync_loop = None
        self.start_at: float | None = None  # the traffic's start on the master's clock (its harness_start message)


WORKER = _Worker()


def _master_job() -> dict:
    """The job as a worker needs it: a worker on another machine lacks the master's environment, so the settings'
    secret references (harness.secrets) travel expanded, over the master's own connection, never into a file."""
    from harness.secrets import expand_all

    job = json.loads(Path(os.environ["HARNESS_PRODUCER_JOB"]).read_text())
    return dict(job, settings=expand_all(job.get("settings") or {}))


@events.init.add_listener
def _init(environment, **_kwargs) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        def on_ping(environment, msg, **_kw):  # answered at once, in the master's message loop
            data = {"t0": msg.data["t0"], "tm": time.time()}
            if msg.data.get("want_job"):
                data["job"] = _master_job()
            environment.runner.send_message("harness_clock_pong", data, client_id=msg.node_id)

        runner.register_message("harness_clock_ping", on_ping)
    elif isinstance(runner, WorkerRunner):
        runner.register_message("harness_clock_pong", _on_pong)
        runner.register_message("harness_start", _on_start)
        WORKER.sync_loop = gevent.spawn(_sync_loop, runner)


def _on_pong(environment, msg, **_kw) -> None:
    t1 = time.time()
    if "job" in msg.data and WORKER.job is None:
        WORKER.job = msg.data["job"]
        WORKER.got_job.set()
    if WORKER.clock is not None:
        WORKER.clock.add(float(msg.data["t0"]), float(msg.data["tm"]), t1)
    else:  # before the job (and so the out dir) is known: kept until then
        WORKER.pending.append((float(msg.data["t0"]), float(msg.data["tm"]), t1))


def _on_start(environment, msg, **_kw) -> None:
    WORKER.start_at = float(msg.data["start_at"])


def _ping(runner) -> None:
    runner.send_message("harness_clock_ping", {"t0": time.time(), "want_job": WORKER.job is None})


def _sync_loop(runner) -> None:
    """A few exchanges as soon as the worker is connected, then one every CLOCK_EVERY_S for the whole run."""
    runner.connection_event.wait()
    for _ in range(FIRST_EXCHANGES):
        _ping(runner)
        gevent.sleep(0.1)
    while True:
        gevent.sleep(CLOCK_EVERY_S)
        _ping(runner)


def _open_clock_log(out: Path, index: int) -> None:
    WORKER.clock = clocks.ClockLog(out / f"clock-{index}.jsonl")
    for t0, tm, t1 in WORKER.pending:
        WORKER.clock.add(t0, tm, t1)
    WORKER.pending = []


@events.test_start.add_listener
def _start(environment, **_kwargs) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):  # fires before the spawn messages: every worker gets the start first
        start_at = float(_master_job().get("start_at") or 0)
        if start_at < time.time() + 0.5:
            start_at = time.time() + START_LEAD_S
            _rewrite_start(start_at)
        runner.send_message("harness_start", {"start_at": start_at})
        return
    if os.environ.get("HARNESS_PRODUCER_JOB"):
        job = json.loads(Path(os.environ["HARNESS_PRODUCER_JOB"]).read_text())
    else:
        if WORKER.job is None:
            raise RuntimeError("the master never sent the job (is HARNESS_PRODUCER_JOB set on the master?)")
        job = dict(WORKER.job)
    index = int(runner.worker_index)
    out = Path(os.environ.get("HARNESS_PRODUCER_OUT") or job["out_dir"]) / WORKER.machine
    out.mkdir(parents=True, exist_ok=True)
    (out / clocks.MACHINE_FILE).write_text(json.dumps({"machine": WORKER.machine, "index": index,
                                                       "pid": os.getpid()}))
    _open_clock_log(out, index)
    offset = WORKER.clock.offset_s()  # this clock minus the master's
    start_master = float(WORKER.start_at or job.get("start_at") or 0)
    if start_master < time.time() - offset:  # past on the master's clock: one second from now
        start_master = time.time() - offset + 1.0
    job["start_at"] = start_master + offset  # the same instant, read on this machine's clock
    job["out_dir"] = str(out)
    shared = process.SHARED = process.Shared(job, index)
    shared.poller = gevent.spawn(process._service_loop, shared)


def _rewrite_start(start_at: float) -> None:
    """The master's start moved (workers connected late): job.json says when the traffic really started."""
    path = Path(os.environ["HARNESS_PRODUCER_JOB"])
    job = json.loads(path.read_text())
    job["start_at"] = start_at
    atomic.write_json(path, job)


@events.test_stop.add_listener
def _stop(environment, **_kwargs) -> None:
    shared = process.SHARED
    if shared is None or isinstance(environment.runner, MasterRunner):
        return
    while shared.send_due():  # what the pacer still owes up to the end
        pass
    shared.done = True
    process.finish(shared, environment)
    process.SHARED = None
