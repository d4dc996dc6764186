"""`harness bench producers`: rate accuracy, burst shape, efficiency against a plain client, and scaling.

Everything runs in one invocation against one embedded broker, so the ratios compare like with like on this
(noisy, 2-core) machine. Achieved rates are measured from the ack logs' produce-call times, not from the pacer's
schedule, so a producer that falls behind shows it. Efficiency is one producer process flat out against a plain
confluent-kafka loop (harness/bench/raw_producer.py) with the same client settings, payload size and keys, in
mirrored rounds (plain, harness, harness, plain), beside the CPU each spends per event (all its threads), the
figure least moved by whatever else the machine runs.
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
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.records.history import load_acks
from harness.console import Console
from harness.supervisor import Supervisor
from harness.producers.fleet import ProducerFleet
from harness.producers.rates import make_rate
from harness.producers.spec import BurstRate

SIZE = 256
FLAT_OUT = 2_000_000.0  # a target no process reaches: what it sends is its maximum sustained rate
ACCURACY_WITHIN, BURST_ERROR_BELOW, EFFICIENCY_AT_LEAST = 0.01, 0.05, 0.6


def rows(accuracy: list[dict], burst: dict, eff: dict, two: float) -> list[dict]:
    """The table: one row per measured figure, each against what it was measured beside."""
    harness_eps, raw_eps, ratio = eff["harness_eps"], eff["raw_eps"], eff["ratio"]
    out = [{"name": f"rate accuracy at {a['target_eps']:,.0f}/s", "value": a["achieved_eps"], "unit": "events/s",
            "reference": a["target_eps"], "reference_name": "target rate", "ratio": a["ratio"],
            "goal": f"within {ACCURACY_WITHIN:.0%}", "ok": abs(a["ratio"] - 1.0) <= ACCURACY_WITHIN}
           for a in accuracy]
    out.append({"name": "burst: largest error of a 100 ms bin in bursts", "value": burst["burst_bins_max_error"],
                "unit": "fraction", "reference": None, "reference_name": None, "ratio": None,
                "goal": f"< {BURST_ERROR_BELOW}", "ok": burst["burst_bins_max_error"] < BURST_ERROR_BELOW})
    out.append({"name": "producer efficiency (1 process, flat out)", "value": harness_eps, "unit": "events/s",
                "reference": raw_eps, "reference_name": "plain confluent-kafka loop", "ratio": ratio,
                "goal": f">= {EFFICIENCY_AT_LEAST}", "ok": bool(ratio >= EFFICIENCY_AT_LEAST)})
    cpu = eff["cpu_us_per_event"]
    out.append({"name": "producer CPU per event (1 process, flat out)", "value": cpu["harness"], "unit": "us",
                "reference": cpu["raw"], "reference_name": "plain confluent-kafka loop",
                "ratio": eff["cpu_ratio"], "goal": None, "ok": None})
    out.append({"name": "scaling: 2 processes, flat out", "value": two, "unit": "events/s", "reference": harness_eps,
                "reference_name": "1 process", "ratio": two / harness_eps if harness_eps else None, "goal": None,
                "ok": None})
    return out


class Bench:
    def __init__(self, work: Path, sup: Supervisor, kafka: EmbeddedKafka, console: Console):
        self.work, self.sup, self.kafka, self.console = work, sup, kafka, console

    def fleet(self, rate: dict, processes: int, seconds: float, users: int = 2, batch: int = 500,
              max_backlog_s: float = 1.0, **job):
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        self.kafka.create_stream(topic, 8, {})
        out = self.work / topic
        job = {"backend": "kafka", "stream": topic, "partitions": 8, "settings": self.kafka.producer_settings(),
               "processes": processes, "users": users, "batch_size": batch, "duration_s": seconds,
               "max_backlog_s": max_backlog_s, "seed": 1, "rate": rate, "keys": {"kind": "uniform", "count": 1000},
               "payload": {"size": {"kind": "fixed", "bytes": SIZE}, "content": "compressible"},
               "ack_timeout_s": 60, **job}
        fleet = ProducerFleet(out, self.sup, job)
        start = time.time() + 2.0
        fleet.start(start)
        fleet.wait(seconds + 120)
        if fleet.failures():
            raise RuntimeError("; ".join(fleet.failures()))
        acks = load_acks(out)
        self.last_dir = out
        return acks, start

    @staticmethod
    def sent_in_window(acks, start: float, seconds: float) -> int:
        t = acks["produce_ms"].to_numpy() / 1000.0
        return int(((t >= start) & (t < start + seconds)).sum())

    def accuracy(self, target: float, seconds: float) -> dict:
        acks, start = self.fleet({"kind": "constant", "eps": target}, 1, seconds)
        achieved = self.sent_in_window(acks, start, seconds) / seconds
        row = {"target_eps": target, "achieved_eps": achieved, "ratio": achieved / target,
               "acked": int((acks["error"] == "").sum()), "processes": 1}
        self.console.info(f"  accuracy {target:>8,.0f}/s: achieved {achieved:>10,.1f}/s  ratio {row['ratio']:.4f}")
        return row

    def burst(self, seconds: float) -> dict:
        spec = {"kind": "burst", "base_eps": 2000, "period_s": 10, "duration_s": 1, "factor": 10, "offset_s": 2}
        # 100 ms bins of send times: a batch may wait at most 10 ms here; the default wait (producers.batch_wait_ms,
        # 50 ms) is half such a bin: the shape is then exact per second, and each event's latency counts its wait
        acks, start = self.fleet(spec, 1, seconds, users=2, batch=100, batch_wait_s=0.01)
        rate = make_rate(BurstRate.model_validate(spec))
        t = np.sort(acks["produce_ms"].to_numpy() / 1000.0 - start)
        edges = np.arange(0.0, seconds + 1e-9, 0.1)
        actual, _ = np.histogram(t, bins=edges)
        expected = np.array([rate.cumulative(b) - rate.cumulative(a) for a, b in zip(edges[:-1], edges[1:])])
        err = np.abs(actual - expected) / expected
        in_burst = np.array([rate.rate(a + 0.05) > 2000 for a in edges[:-1]])
        out = {"bins": len(edges) - 1, "max_error": float(err.max()), "burst_bins_max_error": float(err[in_burst].max()),
               "p99_error": float(np.percentile(err, 99))}
        self.console.info(f"  burst 100 ms bins: max error {out['max_error']:.4f} (in bursts "
                          f"{out['burst_bins_max_error']:.4f})")
        return out

    def max_rate(self, processes: int, seconds: float) -> float:
        # Flat out the pacer owes far more than is sent; a short backlog cap keeps what it still owes at the end
        # (sent after the window, not measured) to a twentieth of a second of the target.
        acks, start = self.fleet({"kind": "constant", "eps": FLAT_OUT}, processes, seconds, users=2, batch=1000,
                                 max_backlog_s=0.05)
        self.last_cpu_per_event = cpu_per_event(self.last_dir, start, seconds)
        return self.sent_in_window(acks, start, seconds) / seconds

    def raw_rate(self, seconds: float) -> float:
        topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
        self.kafka.create_stream(topic, 8, {})
        child = self.sup.spawn("raw-producer", [sys.executable, "-m", "harness.bench.raw_producer",
                                                json.dumps({"bootstrap.servers": self.kafka.bootstrap}), topic,
                                                str(seconds), str(SIZE)],
                               log_path=self.work / "raw.err", stdout_pipe=True)
        stdout, _ = child.proc.communicate(timeout=seconds + 120)
        result = json.loads(stdout.decode().strip().splitlines()[-1])
        self.last_cpu_per_event = result["cpu_s"] / result["sent"] if result["sent"] else math.nan
        return result["delivered"] / result["seconds"]

    def efficiency(self, seconds: float, rounds: int = 2) -> dict:
        """Flat-out rates, harness and plain loop, in mirrored rounds (plain, harness, harness, plain, ...) so a
        change in the machine's load in the middle weighs on both alike; and CPU per event of each (all of the
        process's threads), which the load of other processes hardly moves."""
        harness, raw, harness_cpu, raw_cpu = [], [], [], []
        for r in range(rounds):
            for kind in (("raw", "harness") if r % 2 == 0 else ("harness", "raw")):
                if kind == "raw":
                    raw.append(self.raw_rate(seconds))
                    raw_cpu.append(self.last_cpu_per_event)
                else:
                    harness.append(self.max_rate(1, seconds))
                    harness_cpu.append(self.last_cpu_per_event)
                self.console.info(f"  efficiency round {r + 1}: {kind:>7} {(raw if kind == 'raw' else harness)[-1]:>9,.0f}/s"
                                  f"  {(raw_cpu if kind == 'raw' else harness_cpu)[-1] * 1e6:6.2f} us CPU/event")
        harness_eps, raw_eps = float(np.mean(harness)), float(np.mean(raw))
        cpu_h, cpu_r = float(np.nanmean(harness_cpu)), float(np.nanmean(raw_cpu))
        return {"harness_eps": harness_eps, "raw_eps": raw_eps, "ratio": harness_eps / raw_eps if raw_eps else math.nan,
                "rounds": {"harness_eps": harness, "raw_eps": raw},
                "cpu_us_per_event": {"harness": cpu_h * 1e6, "raw": cpu_r * 1e6},
                "cpu_ratio": cpu_r / cpu_h if cpu_h else math.nan}


def cpu_per_event(producer_dir: Path, start: float, seconds: float) -> float:
    """CPU seconds per event sent of producer 0 over the whole seconds of the window, from its stats rows (each
    carries the process's cumulative CPU when written, just after its second ended)."""
    rows = {}
    for line in (producer_dir / "stats-0.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["t"]] = row
    first, last = math.ceil(start), math.floor(start + seconds) - 1
    if first - 1 not in rows or last not in rows or "cpu_s" not in rows[last]:
        return math.nan
    sent = sum(rows[t]["sent"] for t in range(first, last + 1) if t in rows)
    return (rows[last]["cpu_s"] - rows[first - 1]["cpu_s"]) / sent if sent else math.nan


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    seconds = 8.0 if quick else 30.0
    short = 6.0 if quick else 15.0
    with tempfile.TemporaryDirectory(prefix="bench-producers-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        kafka = EmbeddedKafka(nodes=1, heap_mb=1024)
        with console.step("starting Kafka"):
            kafka.start(work, sup)
        bench = Bench(work, sup, kafka, console)
        try:
            accuracy = [bench.accuracy(t, seconds) for t in (5000.0, 20000.0, 50000.0)]
            burst = bench.burst(20.0)
            eff = bench.efficiency(short / 2 if quick else short / 1.5)
            harness_eps, raw_eps = eff["harness_eps"], eff["raw_eps"]
            console.info(f"  efficiency: harness {harness_eps:,.0f}/s vs plain confluent-kafka {raw_eps:,.0f}/s; "
                         f"CPU per event {eff['cpu_us_per_event']['harness']:.2f} us vs "
                         f"{eff['cpu_us_per_event']['raw']:.2f} us")
            two = bench.max_rate(2, short)
            console.info(f"  scaling: 1 process {harness_eps:,.0f}/s, 2 processes {two:,.0f}/s")
        finally:
            kafka.stop()
    result = {
        "rows": rows(accuracy, burst, eff, two),
        "accuracy": accuracy,
        "burst_bin_max_error": burst["burst_bins_max_error"],
        "burst": burst,
        "efficiency": eff,
        "scaling": {"1": harness_eps, "2": two},
        "payload_bytes": SIZE, "seconds": seconds, "quick": quick,
        "goals": {"accuracy_ratio_within": ACCURACY_WITHIN, "burst_bin_error_below": BURST_ERROR_BELOW,
                  "efficiency_at_least": EFFICIENCY_AT_LEAST},
    }
    if json_path:
        atomic.write_json(json_path, result)
    return result
