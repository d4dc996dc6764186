"""One producer process: locust (as a library, headless) drives paced users that send batches of events.

The runner starts `processes` of these (`python -m harness.producers.process JOB INDEX`), each with 1/N of the rate.
All users of a process share one token pacer, so the achieved rate follows the rate function exactly whatever
the number of users; one greenlet services the sender (the Kafka sender's reports arrive on a thread of its own).
Locust's request events carry one entry per second of sending (its events, the time their sends took), so its own
stats and hooks work as usual.

A user wakes when a whole batch is due or the first event due has waited `batch_wait_s` (the scenario's
producers.batch_wait_ms), never per event: at a moderate rate a wake-up per event cost the process ~40x the CPU
of the event itself (120 us an event at 3,000/s against 2.4 flat out), CPU taken from the system under test on a
shared machine. Intended times stay exact (latency is measured from them, the wait included). What a wake-up does
is kept small: between two batches the system under test runs and leaves the caches cold, so each distinct step
costs tens of microseconds whatever its size (a batch's intended times, keys and encoded values are prepared a
quarter of a second ahead, in bulk: producers.ahead).

A process sends in sequence order: taking a batch's sequence numbers and handing its events to the client is one
step under a lock. Without it, a user that yields on a full client queue lets another user send later sequence
numbers first, and the checker's per-partition order rule would blame the pipeline for the producer's doing. A
batch, once its numbers are taken, is also sent whole even when locust stops the user in the middle of it.

A run starts its processes before the traffic's start is known (a job with `go_file`, ProducerFleet.prepare): each
does all its start-up, connects its client, says it is ready and waits for the go file, whose start time is then
every process's; the schedule (the pacer's intended times) counts from it. Started at the go instead, a process's
own start-up (~1.5 s) delayed the first event by as much.
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from gevent import monkey

monkey.patch_all()

import gevent  # noqa: E402
from gevent.lock import Semaphore  # noqa: E402
from locust import User, constant, events, task  # noqa: E402
from locust.env import Environment  # noqa: E402

from harness.files import atomic  # noqa: E402
from harness.producers.ahead import EventsAhead  # noqa: E402
from harness.producers.fleet import MEASURE_FILE, MEASURE_POLL_S  # noqa: E402
from harness.producers.keys import make_key_chooser  # noqa: E402
from harness.producers.pacer import TokenPacer  # noqa: E402
from harness.producers.payloads import PayloadSource  # noqa: E402
from harness.producers.rates import make_rate, warmed_up  # noqa: E402
from harness.records.history import AckWriter  # noqa: E402
from harness.producers.records import SecondStats  # noqa: E402
from harness.producers.sender import Sender  # noqa: E402
from harness.producers.spec import KeysSpec, PayloadSpec, RateSpec  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402


BATCH_WAIT_S = 0.05  # the scenario's producers.batch_wait_ms, for a job that does not say
GO_POLL_S = 0.02  # a prepared process looks for the runner's go this often
REQUEST_EVERY_S = 1.0  # locust's request events: one per second of sending (PacedProducer)
CONNECT_TIMEOUT_S = 5.0  # a prepared process's client connecting and fetching the stream's metadata, at most


def make_sender(job: dict, acks: AckWriter, stats: SecondStats) -> Sender:
    """The backend's sender (harness.producers.sender's contract): its `module:Class` comes with the job, written
    by the runner from the backend's spec, so the producers never look a backend up (a backend's sender imports
    from here, never the other way)."""
    from harness.secrets import expand_all

    if not job.get("sender"):
        raise ValueError("the producer job names no sender (`sender`: module:Class, from the backend's spec)")
    module, _, name = job["sender"].partition(":")
    job = dict(job, settings=expand_all(job.get("settings") or {}))  # secrets come as ${VAR} (harness.secrets)
    return getattr(importlib.import_module(module), name).from_job(job, acks, stats)


class Shared:
    """State every user of this process shares: the pacer, the key chooser, the sender, the sequence."""

    def __init__(self, job: dict, index: int):
        out = Path(job["out_dir"])
        out.mkdir(parents=True, exist_ok=True)
        self.job = job
        self.index = index
        self.poller = None
        self.stopping = False  # SIGTERM came (before the start: the process ends without sending)
        self.batch_size = int(job["batch_size"])
        # how long the first event due may wait for the rest of its batch (pacer.wake_at); librdkafka lingers
        # on its own (linger.ms) before sending anyway
        self.batch_wait_s = float(job.get("batch_wait_s", BATCH_WAIT_S))
        self.base_rate = make_rate(TypeAdapter(RateSpec).validate_python(job["rate"]))
        # a caught_up warm-up lasts until the runner's measure.json, at most warmup_max_s: until then the longest
        self.warmup_s = float(job["warmup_max_s"] if self.adaptive_warmup else job.get("warmup_s") or 0.0)
        self.rate = warmed_up(self.base_rate, self.warmup_s)
        self.pacer: TokenPacer | None = None  # made at the start (`begin`): its intended times count from it
        if job.get("start_at") is not None:
            self.begin(float(job["start_at"]))
        seed = int(job["seed"]) * 1009 + index
        self.keys = make_key_chooser(TypeAdapter(KeysSpec).validate_python(job["keys"]), job["partitions"], seed,
                                     backend=job.get("placement") or job["backend"])
        self.payloads = PayloadSource(TypeAdapter(PayloadSpec).validate_python(job["payload"]), seed)
        self.ahead = EventsAhead(index, self.keys, self.payloads)
        self.acks = AckWriter(out / f"acks-{index}.arrows", index)
        self.stats = SecondStats(out / f"stats-{index}.jsonl")
        self.sender = make_sender(job, self.acks, self.stats)
        self.seq = 0
        self.sent_bytes = 0
        self.done = False
        self.lock = Semaphore()  # one batch at a time: events reach the client in sequence order

    @property
    def adaptive_warmup(self) -> bool:
        return self.job.get("warmup_until") == "caught_up"

    def begin(self, start_at: float) -> None:
        """The traffic's start (the same instant for every process): the schedule and its end count from it."""
        job = self.job
        self.start = start_at
        self.planned_end = self.end = start_at + self.warmup_s + float(job["duration_s"])
        self.pacer = TokenPacer(self.rate, start_at, share=1.0 / job["processes"], max_backlog_s=job["max_backlog_s"])

    def measure_from(self, measure_at: float) -> None:
        """A caught_up warm-up ends at `measure_at` (the runner's measure.json, written ahead of it): the rate's own
        clock and the measured duration_s start then. Until `measure_at` the schedule is the warm-up's constant
        rate either way, so the pacer goes on from the events it took."""
        self.warmup_s = max(0.0, measure_at - self.start)
        self.rate = warmed_up(self.base_rate, self.warmup_s)
        if self.pacer is not None:
            self.pacer.set_rate(self.rate)
        if not self.stopping:
            self.planned_end = self.end = measure_at + float(self.job["duration_s"])

    def stop_now(self) -> None:
        """SIGTERM (the runner stopping early): the traffic ends now; acks are still collected, logs written."""
        self.stopping = True
        if self.pacer is not None:
            self.end = min(self.end, time.time())

    def send_due(self) -> int:
        """Send the events due now (at most one batch); returns how many, 0 when nothing is due."""
        with self.lock:
            return self._send_due()

    def _send_due(self) -> int:
        """One batch, its events prepared ahead in bulk (producers.ahead) and handed to the client in one call:
        the only per-event Python work left is the client's own produce() calls."""
        now = time.time()
        first, due = self.pacer.take(min(now, self.end - 1e-9), self.batch_size)
        n = len(due)
        if not n:
            return 0
        self.stats.on_due(n, now)
        seq0 = self.seq
        self.seq += n
        # partitions None: the client (or the service) places keys
        values, keys, partitions, nbytes = self.ahead.batch(first, seq0, due, self.pacer.ahead())
        headers = self.payloads.headers() if self.payloads.has_headers else None
        self.sent_bytes += nbytes
        try:
            self.sender.send_many(values, keys, partitions, headers)
        finally:  # a GreenletExit comes after the whole batch was handed over
            self.stats.on_sent(n, time.time())
        # Delivery reports after every batch, as a plain client loop polls: a busy process never lets them pile up
        # (a large backlog of reports is far costlier to serve than the same reports a batch at a time).
        self.sender.service()
        return n


SHARED: Shared | None = None


class PacedProducer(User):
    """Sends whatever the shared pacer says is due, a batch at a time; between batches sleeps until a whole batch
    is due or the oldest event due has waited `batch_wait_s` (TokenPacer.wake_at), not until the next single
    event. One task runs the whole traffic: a task per batch cost another hub switch and locust's own bookkeeping
    each time, on every wake-up of a moderate rate. For the same reason locust hears of the sends once a second
    (one request: the events sent, and the time their sends took), not once a batch."""

    wait_time = constant(0)

    @task
    def send_batches(self) -> None:
        shared = SHARED
        assert shared is not None
        sent, spent, report_at = 0, 0.0, time.time() + REQUEST_EVERY_S
        try:
            while not shared.done:
                nxt, now = shared.pacer.wake_at(shared.batch_size, shared.batch_wait_s), time.time()
                if nxt is None or nxt > now:  # not due yet (or nothing left): look again then, at most 0.05 s on
                    gevent.sleep(0.05 if nxt is None else min(nxt - now, 0.05))
                    continue
                t0 = time.perf_counter()
                sent += shared.send_due()  # 0 when another user sent it meanwhile
                spent += time.perf_counter() - t0
                if sent and now >= report_at:
                    self._report(shared, sent, spent)
                    sent, spent, report_at = 0, 0.0, now + REQUEST_EVERY_S
                nxt = shared.pacer.wake_at(shared.batch_size, shared.batch_wait_s)
                if nxt is not None and nxt <= time.time():  # behind (flat out): the process's other greenlets
                    gevent.sleep(0)  # (its end, the reports, the other users) run between two batches
        finally:  # also when stopped (GreenletExit): what was sent since the last report
            if sent:
                self._report(shared, sent, spent)
        gevent.sleep(0.05)

    def _report(self, shared: Shared, sent: int, spent_s: float) -> None:
        self.environment.events.request.fire(request_type="produce", name=shared.sender.name,
                                             response_time=spent_s * 1000, response_length=sent, exception=None,
                                             context={})


def _service_loop(shared: Shared) -> None:
    """The sender's service as often as it asks (`service_every_s`: a sender whose reports arrive on their own
    thread needs it far less often than one this loop polls, and every wake-up of the hub costs CPU)."""
    every = float(getattr(shared.sender, "service_every_s", 0.001))
    while True:
        shared.sender.service()
        shared.acks.maybe_flush()  # the history reaches the disk at least once a second
        gevent.sleep(every)


def finish(shared: Shared, env: Environment) -> dict:
    """After the users stopped: collect outstanding acks (purge what never comes), close the logs, write the
    summary. Used by `run` and by the locustfile (distributed mode)."""
    stopped_early = shared.end < shared.planned_end
    deadline = time.time() + (5.0 if stopped_early else float(shared.job.get("ack_timeout_s", 60)))
    while shared.sender.outstanding() and time.time() < deadline:
        gevent.sleep(0.01)
    unacked = shared.sender.outstanding()
    if unacked:
        shared.sender.abandon()
        for _ in range(200):
            shared.sender.service()
            gevent.sleep(0.01)
    if shared.poller is not None:
        shared.poller.kill()
    shared.sender.service()  # the reports of the last poll
    shared.sender.close()
    shared.stats.close()
    shared.acks.close()
    summary = {
        "producer": shared.index, "sent": shared.seq, "sent_bytes": shared.sent_bytes,
        "acked": sum(shared.stats.partition_events.values()),
        "failed": sum(shared.stats.errors_total.values()), "errors": dict(shared.stats.errors_total),
        "unacked_at_exit": unacked, "pacer_skipped": shared.pacer.skipped, "start_at": shared.start,
        "stopped_early": stopped_early, "end_at": shared.end, "finished_at": time.time(),
        "partition_events": dict(shared.stats.partition_events),
        "partition_bytes": dict(shared.stats.partition_bytes),
        "delivery_hist": shared.stats.delivery_encoded(),
        "locust": {"requests": env.stats.total.num_requests, "failures": env.stats.total.num_failures},
    }
    out = Path(shared.job["out_dir"]) / f"summary-{shared.index}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=2))
    tmp.replace(out)
    return summary


def connect(shared: Shared, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """The client connected and the stream's metadata fetched before the traffic, when the sender can
    (`connect(timeout_s)`, optional in the contract): otherwise the first batch waits for both. A failure here is
    left to the first send, which reports it as usual."""
    warm = getattr(shared.sender, "connect", None)
    if warm is None:
        return
    try:
        warm(timeout_s)
    except Exception as exc:  # noqa: BLE001 - the first send meets it again and records it per event
        print(f"producer {shared.index}: connecting before the start failed: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


def wait_for_go(shared: Shared, go_file: Path, poll_s: float = GO_POLL_S) -> float | None:
    """Ready (`ready-<index>.json` beside the go file, saying when) and waiting for the runner's go: `go_file`
    (job.json, written atomically) with the traffic's start time, polled every `poll_s` (a cheap read; the hub
    sleeps between). None when stopped (SIGTERM) first."""
    atomic.write_json(go_file.parent / f"ready-{shared.index}.json", {"pid": os.getpid(), "at": time.time()})
    while not shared.stopping:
        try:
            return float(json.loads(go_file.read_text())["start_at"])
        except FileNotFoundError:
            gevent.sleep(poll_s)
    return None


def await_measure(shared: Shared, measure_file: Path, poll_s: float = MEASURE_POLL_S) -> None:
    """A caught_up warm-up: wait for the runner's measure.json (written atomically, a moment before the time it
    names) and move the schedule's measured window to it."""
    while not shared.stopping and not shared.done:
        try:
            shared.measure_from(float(json.loads(measure_file.read_text())["measure_at"]))
            return
        except FileNotFoundError:
            gevent.sleep(poll_s)


def close_unstarted(shared: Shared) -> None:
    """Stopped before the go: nothing was sent; the client and the files closed, no summary (no traffic ran)."""
    if shared.poller is not None:
        shared.poller.kill()
    shared.sender.close()
    shared.stats.close()
    shared.acks.close()


def run(job_path: Path, index: int) -> int:
    global SHARED
    job = json.loads(job_path.read_text())
    shared = SHARED = Shared(job, index)
    # SIGTERM (the runner stopping early) ends the traffic now but still collects acks and writes the logs.
    gevent.signal_handler(signal.SIGTERM, shared.stop_now)
    env = Environment(user_classes=[PacedProducer], events=events)
    runner = env.create_local_runner()
    shared.poller = gevent.spawn(_service_loop, shared)
    if job.get("go_file"):  # started before the traffic's start time was known (ProducerFleet.prepare)
        connect(shared, float(job.get("connect_timeout_s", CONNECT_TIMEOUT_S)))
    # Everything made so far (modules, locust, pydantic) lives as long as the process: out of the collector's
    # sight, so no full collection walks it in the middle of the traffic.
    gc.collect()
    gc.freeze()
    if job.get("go_file"):
        start_at = wait_for_go(shared, Path(job["go_file"]))
        if start_at is None:
            close_unstarted(shared)
            return 0
        shared.begin(start_at)
    if shared.adaptive_warmup:
        gevent.spawn(await_measure, shared, Path(job["out_dir"]) / MEASURE_FILE)
    gevent.sleep(max(0.0, shared.start - time.time() - 0.2))  # users up just before the first event is due
    runner.start(int(job["users"]), spawn_rate=100)  # all users within a fraction of a second
    while time.time() < shared.end:
        gevent.sleep(min(0.2, max(0.0, shared.end - time.time())))
    # Whatever the pacer still owes up to `end` is sent before users stop (a last partial batch); the lock is held
    # while they stop, so none is in the middle of a batch.
    with shared.lock:
        while shared._send_due():
            pass
        shared.done = True
        runner.quit()
    finish(shared, env)
    return 0


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), int(sys.argv[2])))
