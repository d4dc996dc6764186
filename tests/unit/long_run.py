"""A long run's directory, made by hand (no Spark, no broker): `batches` one-second micro-batches with their
progress rows, series.json (per second, lag per sample, scan tasks, resources, disk), resources.jsonl and
result.json, with one planted extreme of each kind, so a test knows, from the input alone, which values the
report must still draw."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness.analysis.series import disk_rows, resource_series

T0 = 1_800_000_000.0
PARTITIONS = 8
SLOW_BATCH_MS, FAST_BATCH_MS = 98_765, 3  # one slow batch, one fast one, everything else 400..900 ms
LAG_SPIKE = 987_654  # one lag sample on one partition, everything else < 5,000
LATENCY_SPIKE_MS, LATENCY_DIP_MS = 54_321.0, 0.25  # one second's max latency and one second's p50
SLOW_TASK_MS = 77_777  # one task
RSS_SPIKE_BYTES = 3_210_000_000  # one sample of the driver's RSS


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def make(run_dir: Path, batches: int, seed: int = 5) -> dict:
    """Writes the run; returns where the extremes were planted."""
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    n = batches
    slow, fast = n * 2 // 3, n // 3  # batch ids of the planted extremes
    total = rng.integers(400, 900, n)
    total[slow], total[fast] = SLOW_BATCH_MS, FAST_BATCH_MS
    with open(run_dir / "progress.jsonl", "w") as f:
        for b in range(n):
            add = int(total[b] * 0.8)
            rest = int(total[b]) - add
            f.write(json.dumps({"name": "query_under_test", "timestamp": _iso(T0 + b), "batchId": b,
                                "numInputRows": 3000, "durationMs": {
                                    "addBatch": add, "latestOffset": rest // 2, "walCommit": rest - rest // 2,
                                    "triggerExecution": int(total[b])}}) + "\n")
    secs = list(range(n))
    p50 = np.round(rng.uniform(200, 400, n), 2)
    p50[n // 5] = LATENCY_DIP_MS
    mx = np.round(p50 * 3, 2)
    mx[n // 2] = LATENCY_SPIKE_MS
    lag = rng.integers(0, 5000, (PARTITIONS, n))
    lag[3, n * 3 // 4] = LAG_SPIKE
    t_batch, t_part = np.divmod(np.arange(n * PARTITIONS), PARTITIONS)
    duration = rng.integers(50, 300, n * PARTITIONS)
    slow_task = n // 4 * PARTITIONS + 5
    duration[slow_task] = SLOW_TASK_MS
    series = {"schema": 1, "t0": T0, "warmup_s": 10.0,
              "produced": {"t": secs, "sent": [3000] * n, "scheduled": [3000.0] * n, "failed": [0] * n},
              "delivered": {"t": secs, "latency_p50": p50.tolist(), "latency_p99": np.round(p50 * 2, 2).tolist(),
                            "latency_max": mx.tolist(), "visible_t": secs, "visible": [3000] * n},
              "percentiles": [[0.0, 1.0], [50.0, 300.0], [99.0, 800.0], [100.0, LATENCY_SPIKE_MS]],
              "lag": {"t": secs, "partitions": [str(p) for p in range(PARTITIONS)], "lag": lag.tolist()},
              "tasks": {"batch": t_batch.tolist(), "executor": [str(1 + p % 2) for p in t_part.tolist()],
                        "partition": t_part.tolist(), "launch_s": (t_batch + 0.1).tolist(),
                        "duration_ms": duration.tolist(), "locality": ["PROCESS_LOCAL"] * (n * PARTITIONS),
                        "records": [375] * (n * PARTITIONS)}}
    samples, every = [], 5
    spike_at = (n // every) // 2
    for i in range(n // every):
        procs = [{"pid": 100 + k, "create_time": T0 - 10, "role": role, "name": role, "fds": 10, "threads": 5,
                  "rss_bytes": RSS_SPIKE_BYTES if (role == "driver" and i == spike_at) else 500_000_000 + k,
                  "anon_bytes": 400_000_000, "cpu_s": round(i * every * 0.3 * (k + 1), 2)}
                 for k, role in enumerate(("broker", "driver", "driver-jvm", "executor", "producer", "runner"))]
        samples.append({"t": T0 + i * every, "procs": procs, "cost_ms": 2.0,
                        "disk": {"bytes": 1000 * i, "by_dir": {"sink": 600 * i, "checkpoint": 400 * i}}})
    (run_dir / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    # the processes and the disk over time, as the measuring step condenses the samples into series.json
    series["resources"], series["disk"] = resource_series(samples, T0), disk_rows(samples, T0)
    (run_dir / "series.json").write_text(json.dumps(series))
    per_batch = {str(b): {"created": (PARTITIONS if b in (0, slow) else 0)} for b in range(n)}
    result = {"scenario": "soak", "backend": "kafka", "verdict": "pass", "checks": [], "batches": n,
              "counts": {"produced": 3000 * n, "acked": 3000 * n, "delivered_unique": 3000 * n, "sink_rows": 3000 * n},
              "latency_ms": {"p50": 300.0, "p99": 800.0, "max": LATENCY_SPIKE_MS},
              "throughput": {"target_eps": 3000, "produce_eps": 3000, "process_rps": 3500},
              "producers": {"partition_events": {str(p): 3000 * n // PARTITIONS for p in range(PARTITIONS)}},
              "placement": {"same_executor_as_last_batch": 1.0, "task_ms": {"median_max_over_median": 1.5}},
              "consumers": {"per_batch": per_batch}, "traffic_s": n, "duration_s": n + 20}
    (run_dir / "result.json").write_text(json.dumps(result))
    (run_dir / "scenario.json").write_text(json.dumps({"spark": {"trigger": {"interval": "1 second"}}}))
    return {"slow_batch": slow, "fast_batch": fast, "slow_task": int(slow_task), "spike_sample": spike_at * every}
