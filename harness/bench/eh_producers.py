"""`harness bench eh-producers`: what the Event Hubs producers cost, against a plain azure-eventhub send loop.

The azure-eventhub SDK speaks AMQP in pure Python: encoding each event (EventDataBatch.add sizes every message
by encoding it) and each transfer costs tens of microseconds of CPU per event, far more than librdkafka's. On one
machine that CPU is taken from the emulator and Spark, so the Event Hubs scenarios' footprint is high; the
question is how much of it is the SDK's (the floor any Python producer pays) and how much the harness adds.

For each send mode, its scenario's traffic (its rate, batch, wait, keys, record size): `eh-steady` by partition id
(many keys in a batch), `eh-skew` by partition key (a batch per run of one key: far more sends per event), each
against an emulator with one hub of 4 partitions, in mirrored rounds (plain, harness, harness, plain) so a change
in the machine's load weighs on both:
- the harness's producer process, exactly as a run starts it (harness.runner.producer_job): CPU per event of the
  whole process from its stats rows;
- a plain SDK loop (harness/bench/raw_eh_producer.py) sending the same events per wake-up, addressed the same way.
Rows: the harness's CPU per event against the plain loop's (goal <= 1.5), and the cores each takes at that rate.
A full (not `--quick`) bench keeps each mode's plain-loop figure in the cache (harness.records.calibration): every later
Event Hubs run over AMQP says in its footprint line what a plain loop sending its events would have taken.
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

from harness.files import atomic
from harness.records import calibration
from harness.backends.eventhubs.emulated import EmulatedEventHubs
from harness.bench import row
from harness.bench.producers import cpu_per_event
from harness.config import load_scenario
from harness.console import Console
from harness.runner import producer_job
from harness.supervisor import Supervisor
from harness.producers.fleet import ProducerFleet

# each send mode's traffic: by partition id (many keys per batch) and by partition key (a batch per key's run)
SCENARIOS = {"partition_id": "eh-steady", "partition_key": "eh-skew"}
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
    """CPU seconds per event of the plain SDK loop sending the same traffic (the same events per wake-up, the
    same keys, addressed the same way)."""
    rate = float(job["rate"]["eps"])
    bare = {"connection_string": emulator.connection_string(), "hub": job["stream"], "partitions": job["partitions"],
            "seconds": seconds, "size": _size(job["payload"]["size"]), "rate": rate,
            "batch": max(1, min(int(job["batch_size"]), int(rate * float(job["batch_wait_s"])) or 1)),
            "send": job["settings"]["send"], "keys": job["keys"], "seed": job["seed"]}
    child = sup.spawn("bare-eh-producer", [sys.executable, "-m", "harness.bench.raw_eh_producer", json.dumps(bare)],
                      log_path=work / "bare.err", stdout_pipe=True)
    stdout, _ = child.proc.communicate(timeout=seconds + 120)
    result = json.loads(stdout.decode().strip().splitlines()[-1])
    if result["delivered"] != result["sent"]:
        raise RuntimeError(f"the plain loop delivered {result['delivered']} of {result['sent']} events")
    return result["cpu_s"] / result["sent"] if result["sent"] else math.nan


def _size(spec: dict) -> int:
    """A payload size spec's typical size: fixed bytes, or the middle of a uniform range."""
    if spec.get("kind") == "uniform":
        return (int(spec["min_bytes"]) + int(spec["max_bytes"])) // 2
    return int(spec.get("bytes", 256))


def measure(send: str, seconds: float, quick: bool, console: Console) -> dict:
    """One send mode's rounds against one emulator: {"scenario", "eps", "harness_us", "bare_us", rounds}."""
    name = SCENARIOS[send]
    scenario, _, _ = load_scenario(name, [f"stream.name={HUB}"])
    if scenario.producers.rate.kind != "constant" or scenario.backend.send != send:
        raise ValueError(f"{name}: the bench needs a constant rate sent by {send}")
    got: dict[str, list[float]] = {"bare": [], "harness": []}
    with tempfile.TemporaryDirectory(prefix="bench-eh-producers-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        emulator = EmulatedEventHubs(HUB, scenario.stream.partitions, {"RetentionSeconds": 3600}, send=send)
        try:
            with console.step(f"starting the Event Hubs emulator ({name}'s traffic, by {send})"):
                emulator.start(work, sup)
                emulator.create_stream(HUB, scenario.stream.partitions, {})
            job = producer_job(scenario, emulator)
            for kind in (("bare", "harness") if quick else ("bare", "harness", "harness", "bare")):
                f = bare_round if kind == "bare" else harness_round
                got[kind].append(f(work, sup, emulator, job, seconds))
                console.info(f"  {send:>13} {kind:>7} at {job['rate']['eps']:,.0f}/s: "
                             f"{got[kind][-1] * 1e6:7.1f} us CPU/event")
        finally:
            emulator.stop()
    return {"scenario": name, "eps": float(scenario.producers.rate.eps),
            "harness_us": float(np.nanmean(got["harness"])) * 1e6, "bare_us": float(np.nanmean(got["bare"])) * 1e6,
            "rounds_us": {k: [x * 1e6 for x in v] for k, v in got.items()}}


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    seconds = 10.0 if quick else 20.0
    measured = {send: measure(send, seconds, quick, console) for send in SCENARIOS}
    rows = []
    for send, m in measured.items():
        h, b, eps = m["harness_us"], m["bare_us"], m["eps"]
        rows += [
            row(f"Event Hubs producer CPU per event by {send} at {eps:,.0f}/s ({m['scenario']}'s traffic)", h, "us",
                reference=b, reference_name="plain azure-eventhub send loop, same traffic",
                goal=f"<= {BARE_RATIO_AT_MOST}", ok=bool(h / b <= BARE_RATIO_AT_MOST) if b else None),
            row(f"Event Hubs producer cores by {send} at {eps:,.0f}/s", h * eps / 1e6, "cores",
                reference=b * eps / 1e6, reference_name="plain azure-eventhub send loop"),
        ]
        if not quick and b and not math.isnan(b):  # what every later run's footprint is read against
            scenario, _, _ = load_scenario(m["scenario"])
            calibration.save(calibration.eh_producers(send), {
                "client": f"azure-eventhub {azure_eventhub_version()}", "us_per_event": round(b, 1),
                "harness_us_per_event": round(h, 1), "measured_at": time.strftime("%Y-%m-%d", time.gmtime()),
                "traffic": f"{m['scenario']}: {eps:,.0f} events/s, {scenario.stream.partitions} partitions, sent by "
                           f"{send}", "by": "harness bench eh-producers"})
    result = {"rows": rows, "seconds": seconds, "quick": quick, "by_send": measured,
              "goals": {"bare_ratio_at_most": BARE_RATIO_AT_MOST}}
    if json_path:
        atomic.write_json(json_path, result)
    return result
