"""`harness bench footprint`: what the harness's own processes cost the machine they share with what they measure.

On one machine every CPU second the harness spends is taken from the broker and Spark, and shows up as their
latency. Three figures, each beside its reference in the same invocation:

- the harness's producer process sending `steady`'s traffic (its rate, batch, wait, keys, record size, client
  settings) against a bare confluent-kafka loop sending the same traffic to the same broker
  (harness/bench/raw_producer.py paced: one wake-up per batch, nothing else), in mirrored rounds (bare, harness,
  harness, bare) so a change in the machine's load weighs on both; CPU per event of the whole process, all threads;
- the same producer's CPU per event at that rate against its CPU per event flat out (where every wake-up carries a
  full batch): what the moderate rate still costs per event;
- the harness/system-under-test CPU ratio of a real short `harness run steady` (its result.json `footprint`),
  run after the bench's own broker stopped.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from harness.files import atomic
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.bench import row
from harness.bench.producers import Bench, cpu_per_event
from harness.config import load_scenario
from harness.console import Console
from harness.supervisor import Supervisor

SCENARIO = "steady"
BARE_RATIO_AT_MOST = 1.5  # the harness's producer against a bare loop of the same traffic, CPU per event
FLAT_OUT_RATIO_AT_MOST = 10.0  # CPU per event at steady's rate against flat out (a batch per wake-up either way)


def steady_traffic() -> dict:
    """steady's producer settings as a bench job's (one process: the bench compares one process with one loop)."""
    scenario, _, _ = load_scenario(SCENARIO)
    p = scenario.producers
    if p.rate.kind != "constant":
        raise ValueError(f"{SCENARIO}: the footprint bench needs a constant rate, got {p.rate.kind}")
    return {"eps": float(p.rate.eps) / p.processes, "batch": p.batch_size, "batch_wait_s": p.batch_wait_ms / 1000.0,
            "users": p.users, "keys": p.keys.model_dump(mode="json"), "payload": p.payload.model_dump(mode="json"),
            "size": int(p.payload.size.bytes), "client": dict(p.client)}


def harness_round(bench: Bench, traffic: dict, seconds: float) -> float:
    """CPU seconds per event of one harness producer process sending the traffic (its stats rows' CPU)."""
    _, start = bench.fleet({"kind": "constant", "eps": traffic["eps"]}, 1, seconds, users=traffic["users"],
                           batch=traffic["batch"], batch_wait_s=traffic["batch_wait_s"], keys=traffic["keys"],
                           payload=traffic["payload"],
                           settings=dict(bench.kafka.producer_settings(), **traffic["client"]))
    return cpu_per_event(bench.last_dir, start, seconds)


def bare_round(bench: Bench, traffic: dict, seconds: float) -> float:
    """CPU seconds per event of the bare loop sending the same traffic: its batch is what the harness's sends
    carry (a whole batch, or what is due within the wait)."""
    topic = f"bench-bare-{uuid.uuid4().hex[:8]}"
    bench.kafka.create_stream(topic, 8, {})
    batch = max(1, min(traffic["batch"], int(traffic["eps"] * traffic["batch_wait_s"]) or 1))
    settings = dict(bench.kafka.producer_settings(), **traffic["client"])
    child = bench.sup.spawn("bare-producer", [sys.executable, "-m", "harness.bench.raw_producer",
                                              json.dumps(settings), topic, str(seconds), str(traffic["size"]),
                                              str(traffic["eps"]), str(batch)],
                            log_path=bench.work / "bare.err", stdout_pipe=True)
    stdout, _ = child.proc.communicate(timeout=seconds + 120)
    result = json.loads(stdout.decode().strip().splitlines()[-1])
    if result["delivered"] != result["sent"]:
        raise RuntimeError(f"the bare loop delivered {result['delivered']} of {result['sent']} events")
    return result["cpu_s"] / result["sent"] if result["sent"] else math.nan


def steady_run(work: Path, seconds: float, console: Console) -> dict:
    """A real `harness run steady` of `seconds` of traffic, in its own process; its result.json's footprint."""
    out = work / "steady-run"
    with console.step(f"harness run {SCENARIO} ({seconds:g} s of traffic)"):
        proc = subprocess.run([sys.executable, "-m", "harness", "run", SCENARIO, "--out", str(out), "--replace",
                               "--set", f"producers.duration_s={seconds:g}", "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=seconds + 600)
    result_path = out / "result.json"
    if not result_path.exists():
        raise RuntimeError(f"harness run {SCENARIO} wrote no result.json (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-500:]}")
    result = json.loads(result_path.read_text())
    roles = (result.get("resources") or {}).get("roles") or {}
    return {"verdict": result.get("verdict"), "exit_code": proc.returncode, "footprint": result.get("footprint") or {},
            "cores_mean": {r: v.get("cores_mean") for r, v in roles.items()}}


def rows(eff: dict, flat_us: float, run: dict) -> list[dict]:
    h, b = eff["harness_us"], eff["bare_us"]
    foot = run["footprint"]
    ratio = foot.get("ratio")
    return [
        row(f"producer CPU per event at {eff['eps']:,.0f}/s ({SCENARIO}'s traffic)", h, "us", reference=b,
            reference_name="bare confluent-kafka loop, same traffic", goal=f"<= {BARE_RATIO_AT_MOST}",
            ok=bool(h / b <= BARE_RATIO_AT_MOST) if b else None),
        row(f"producer CPU per event at {eff['eps']:,.0f}/s against flat out", h, "us", reference=flat_us,
            reference_name="the same producer flat out", goal=f"<= {FLAT_OUT_RATIO_AT_MOST:g}",
            ok=bool(h / flat_us <= FLAT_OUT_RATIO_AT_MOST) if flat_us else None),
        row(f"harness CPU / system under test CPU (harness run {SCENARIO})", ratio, "fraction",
            reference=foot.get("sut_cpu_s"), reference_name="system under test CPU s", ratio=ratio,
            goal=f"< {foot.get('goal', 0.05)}", ok=foot.get("ok")),
    ]


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    traffic = steady_traffic()
    seconds = 10.0 if quick else 20.0
    run_s = 20.0 if quick else 30.0
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as tmp:
        work = Path(tmp)
        with Supervisor(uuid.uuid4().hex) as sup:
            kafka = EmbeddedKafka(nodes=1, heap_mb=1024)
            with console.step("starting Kafka"):
                kafka.start(work, sup)
            bench = Bench(work, sup, kafka, console)
            try:
                harness_cpu, bare_cpu = [], []
                for kind in (("bare", "harness") if quick else ("bare", "harness", "harness", "bare")):
                    if kind == "bare":
                        bare_cpu.append(bare_round(bench, traffic, seconds))
                    else:
                        harness_cpu.append(harness_round(bench, traffic, seconds))
                    got = (bare_cpu if kind == "bare" else harness_cpu)[-1]
                    console.info(f"  {kind:>7} at {traffic['eps']:,.0f}/s: {got * 1e6:6.2f} us CPU/event")
                bench.max_rate(1, 6.0 if quick else 10.0)
                flat = bench.last_cpu_per_event
                console.info(f"  harness flat out: {flat * 1e6:6.2f} us CPU/event")
            finally:
                kafka.stop()
        run = steady_run(work, run_s, console)
        console.info(f"  harness run {SCENARIO}: {run['footprint'].get('detail')}")
    eff = {"eps": traffic["eps"], "harness_us": float(np.nanmean(harness_cpu)) * 1e6,
           "bare_us": float(np.nanmean(bare_cpu)) * 1e6,
           "rounds_us": {"harness": [x * 1e6 for x in harness_cpu], "bare": [x * 1e6 for x in bare_cpu]}}
    result = {"rows": rows(eff, flat * 1e6, run), "traffic": traffic, "seconds": seconds, "quick": quick,
              "producer_cpu": eff, "flat_out_us": flat * 1e6, "steady_run": run,
              "goals": {"bare_ratio_at_most": BARE_RATIO_AT_MOST, "flat_out_ratio_at_most": FLAT_OUT_RATIO_AT_MOST}}
    if json_path:
        atomic.write_json(json_path, result)
    return result
