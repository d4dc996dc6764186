"""`harness bench eh-producers`: what the Event Hubs producers cost, against a plain azure-eventhub send loop.

The azure-eventhub SDK speaks AMQP in pure Python: encoding each event (EventDataBatch.add sizes every message
by encoding it) and each transfer costs tens of microseconds of CPU per event, far more than librdkafka's. On one
machine that CPU is taken from the emulator and Spark, so the Event Hubs scenarios' footprint is high; the
question is how much of it is the SDK's (the floor any Python producer pays) and how much the harness adds.

One emulator, one hub of 4 partitions, `eh-steady`'s traffic (its rate, batch, wait, record size, send mode),
in mirrored rounds (plain, harness, harness, plain) so a change in the machine's load weighs on both:
- the harness's producer process, exactly as a run starts it (harness.runner.producer_job): CPU per event of the
  whole process from its stats rows;
- a plain SDK loop (harness/bench/raw_eh_producer.py) sending the same events per wake-up.
Rows: the harness's CPU per event against the plain loop's (goal <= 1.5), and the cores each takes at that rate.
A full (not `--quick`) bench keeps the plain loop's figure in the cache (harness.calibration): every later Event
Hubs run over AMQP says in its footprint line what a plain loop sending its events would have taken.
"""
from __future__ import annotations

import json
import math
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from harness import atomic, calibration
from harness.backends.eventhubs.emulated import EmulatedEventHubs
from harness.bench import row
from harness.bench.producers import cpu_per_event
from harness.config import load_scenario
from harness.console import Console
from harness.runner import producer_job
from harness.supervisor import Supervisor
from producers.fleet import ProducerFleet

SCENARIO = "eh-steady"
HUB = "bench-producers"
BARE_RATIO_AT_MOST = 1.5


def azure_eventhub_version() -> str:
    from importlib.metadata import version

    return version("azure-eventhub")


def harness_round(work: Path, sup: Supervisor, emulator: EmulatedEventHubs, job: dict, seconds: float) -> float:
    """CPU seconds per event of one harness producer process sending the scenario's traffic."""
    out = work / f"harness-{uuid.uuid4().hex[:8]}"
    fleet = ProducerFleet(out, sup, job | {"processes": 1, "duration_s": seconds, "warmup_s": 0.0,
                                           "warmup_until": "fixed"})
    start = time.time() + 3.0
    fleet.start(start)
    fleet.wait(seconds + 120)
    if fleet.failures():
        raise RuntimeError("; ".join(fleet.failures()))
    return cpu_per_event(out, start, seconds)


def bare_round(work: Path, sup: Supervisor, emulator: EmulatedEventHubs, job: dict, seconds: float) -> float:
    """CPU seconds per event of the plain SDK loop sending the same traffic (the same events per wake-up)."""
    rate = float(job["rate"]["eps"])
    batch = max(1, min(int(job["batch_size"]), int(rate * float(job["batch_wait_s"])) or 1))
    size = int(job["payload"]["size"]["bytes"])
    child = sup.spawn("bare-eh-producer", [sys.executable, "-m", "harness.bench.raw_eh_producer",
                                           emulator.connection_string(), job["stream"], str(job["partitions"]),
                                           str(seconds), str(size), str(rate), str(batch)],
                      log_path=work / "bare.err", stdout_pipe=True)
    stdout, _ = child.proc.communicate(timeout=seconds + 120)
    result = json.loads(stdout.decode().strip().splitlines()[-1])
    if result["delivered"] != result["sent"]:
        raise RuntimeError(f"the plain loop delivered {result['delivered']} of {result['sent']} events")
    return result["cpu_s"] / result["sent"] if result["sent"] else math.nan


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    scenario, _, _ = load_scenario(SCENARIO, [f"stream.name={HUB}"])
    if scenario.producers.rate.kind != "constant":
        raise ValueError(f"{SCENARIO}: the bench needs a constant rate, got {scenario.producers.rate.kind}")
    seconds = 10.0 if quick else 20.0
    got: dict[str, list[float]] = {"bare": [], "harness": []}
    with tempfile.TemporaryDirectory(prefix="bench-eh-producers-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        emulator = EmulatedEventHubs(HUB, scenario.stream.partitions, {"RetentionSeconds": 3600},
                                     send=scenario.backend.send)
        try:
            with console.step("starting the Event Hubs emulator"):
                emulator.start(work, sup)
                emulator.create_stream(HUB, scenario.stream.partitions, {})
            job = producer_job(scenario, emulator)
            for kind in (("bare", "harness") if quick else ("bare", "harness", "harness", "bare")):
                f = bare_round if kind == "bare" else harness_round
                got[kind].append(f(work, sup, emulator, job, seconds))
                console.info(f"  {kind:>7} at {job['rate']['eps']:,.0f}/s: {got[kind][-1] * 1e6:7.1f} us CPU/event")
        finally:
            emulator.stop()
    h, b = float(np.nanmean(got["harness"])) * 1e6, float(np.nanmean(got["bare"])) * 1e6
    eps = float(scenario.producers.rate.eps)
    rows = [
        row(f"Event Hubs producer CPU per event at {eps:,.0f}/s ({SCENARIO}'s traffic)", h, "us", reference=b,
            reference_name="plain azure-eventhub send loop, same traffic", goal=f"<= {BARE_RATIO_AT_MOST}",
            ok=bool(h / b <= BARE_RATIO_AT_MOST) if b else None),
        row(f"Event Hubs producer cores at {eps:,.0f}/s", h * eps / 1e6, "cores", reference=b * eps / 1e6,
            reference_name="plain azure-eventhub send loop"),
    ]
    if not quick and b and not math.isnan(b):  # what every later run's footprint is read against
        calibration.save(calibration.EH_PRODUCERS, {
            "client": f"azure-eventhub {azure_eventhub_version()}", "us_per_event": round(b, 1),
            "harness_us_per_event": round(h, 1), "measured_at": time.strftime("%Y-%m-%d", time.gmtime()),
            "traffic": f"{SCENARIO}: {eps:,.0f} events/s of {scenario.producers.payload.size.bytes} B, "
                       f"{scenario.stream.partitions} partitions by partition id",
            "by": "harness bench eh-producers"})
    result = {"rows": rows, "scenario": SCENARIO, "seconds": seconds, "quick": quick,
              "us_per_event": {"harness": h, "bare": b},
              "rounds_us": {k: [x * 1e6 for x in v] for k, v in got.items()}, "goals": {"bare_ratio_at_most":
                                                                                      BARE_RATIO_AT_MOST}}
    if json_path:
        atomic.write_json(json_path, result)
    return result
