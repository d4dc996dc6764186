"""Locust's distributed mode (a master and workers, on several machines) for more traffic than one machine makes.

The harness normally starts its own producer processes; this file lets locust's own master/worker machinery run
the very same paced user instead. Every worker takes 1/`processes` of the rate and writes its ack log, stats and
summary under `out_dir`, named by its worker index, exactly as the harness's own processes do:

    export HARNESS_PRODUCER_JOB=job.json      # the job file the harness writes (<run>/producers/job.json)
    locust -f producers/locustfile.py --master --headless --expect-workers 2 -u 4 -r 100 -t 75s
    locust -f producers/locustfile.py --worker --master-host MASTER      # on each of the 2 worker machines

`processes` in the job must equal the number of workers and `-u` is the total of users (users per worker =
-u / workers). Traffic runs from `start_at` (epoch seconds; a past or missing value means one second after the
test starts) for `duration_s`; make `-t` a little longer so acks are collected. Copy every worker's `out_dir`
into one run directory for the checker. `HARNESS_PRODUCER_OUT` overrides `out_dir` on a worker.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import gevent
from locust import events
from locust.runners import MasterRunner

from producers import process
from producers.process import PacedProducer  # noqa: F401  (the user class locust runs)


@events.test_start.add_listener
def _start(environment, **_kwargs) -> None:
    if isinstance(environment.runner, MasterRunner):
        return
    job = json.loads(Path(os.environ["HARNESS_PRODUCER_JOB"]).read_text())
    if os.environ.get("HARNESS_PRODUCER_OUT"):
        job["out_dir"] = os.environ["HARNESS_PRODUCER_OUT"]
    if float(job.get("start_at") or 0) < time.time():
        job["start_at"] = time.time() + 1.0
    shared = process.SHARED = process.Shared(job, int(environment.runner.worker_index))
    shared.poller = gevent.spawn(process._service_loop, shared)


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
