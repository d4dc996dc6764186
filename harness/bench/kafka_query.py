"""`harness bench kafka-query`: what the harness's instrumentation costs the Kafka query under test.

One embedded broker holds a backlog produced before anything is measured (so the producers are not in the
measurement). The query process (harness.spark.query, the harness's own `passthrough` query to the Parquet sink,
local[2]) reads the whole backlog with availableNow and a fixed maxOffsetsPerTrigger, so every run does the same
batches of the same work, alternately with the instrumentation on and off (on, off, on, off ...) to spread the
machine's drift over both.

What the harness adds to a user's query, and what `off` removes (an internal flag of the query process,
`instrumentation`, not a scenario option):
- the streaming query listener appending every progress record to progress.jsonl (a Python callback per batch
  through py4j on the driver) and keeping the partitions' end offsets;
- Spark's event log (spark.eventLog.*), from which the report reads where each task ran (placement, task
  metrics);
- the status file and the drain loop polling the query (exception, isActive, lastProgress) four times a second.
Kept in both (part of the query's work, not of the observation): the projection of Kafka rows to the event
columns (the JSON parse every user's query does on its payload) and the `passthrough` query's batch_ms column.

Rows/s = rows / the span of the query's batches, from the progress Spark keeps itself (the same reading in both
modes; the JVM start and the session are outside it). Goal: ratio on/off >= 0.95 (the harness costs under 5%).
"""
from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path

from harness import atomic
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.bench import row
from harness.console import Console
from harness.spark.process import SparkQueryProcess
from harness.supervisor import Supervisor

TOPIC, PARTITIONS, SIZE = "bench-query", 8, 256
GOAL_RATIO = 0.95


def fill(bootstrap: str, events: int) -> None:
    """`events` harness events of SIZE bytes (the producers' own encoding), keyed round robin, acks=all."""
    from confluent_kafka import Producer

    from producers.event import encode_many, pad_lengths

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": "lz4", "acks": "all", "queue.buffering.max.messages": 1_000_000})
    failed = []

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(err)

    step, now = 10_000, time.time()
    for seq0 in range(0, events, step):
        n = min(step, events - seq0)
        pads = ["x" * k for k in pad_lengths(0, seq0, [SIZE] * n)]
        for i, value in enumerate(encode_many(0, seq0, [now] * n, pads)):
            while True:
                try:
                    producer.produce(TOPIC, value, partition=(seq0 + i) % PARTITIONS, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) or failed:
        raise RuntimeError(f"the backlog was not produced: {len(failed)} failed, {len(producer)} outstanding")


def query_run(work: Path, sup: Supervisor, kafka: EmbeddedKafka, instrumentation: bool, cap: int, n: int) -> dict:
    """One availableNow run over the whole backlog in a fresh run directory; its throughput record."""
    run_dir = work / f"{n:02d}-{'on' if instrumentation else 'off'}"
    source = kafka.spark_source(TOPIC, {"startingOffsets": "earliest", "maxOffsetsPerTrigger": str(cap),
                                        "failOnDataLoss": "true"})
    q = SparkQueryProcess(run_dir, sup, source=source, master="local[2]", trigger={"kind": "availableNow"},
                          conf={"spark.sql.streaming.numRecentProgressUpdates": "10000"},
                          instrumentation=instrumentation)
    q.start()
    code = q.wait_exit(900)
    status = q.status()
    if code != 0 or "throughput" not in status:
        q.stop(hard=True)
        raise RuntimeError(f"the query ({'on' if instrumentation else 'off'}) ended with exit {code}, state "
                           f"{status.get('state')!r}: {str(status.get('error'))[:300]} (see {run_dir}/spark)")
    t = status["throughput"]
    return {"instrumentation": instrumentation, "rows": t["rows"], "batches": t["batches"],
            "seconds": t["seconds"], "rows_per_s": t["rows"] / t["seconds"] if t["seconds"] else 0.0}


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    events = 200_000 if quick else 600_000
    pairs = 1 if quick else 2
    cap = events // 20  # 20 equal batches: the same work on and off, well within Spark's recent progress
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-kafka-query-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        kafka = EmbeddedKafka(nodes=1, heap_mb=1024)
        try:
            with console.step("starting Kafka"):
                kafka.start(work, sup)
                kafka.create_stream(TOPIC, PARTITIONS, {})
            with console.step(f"producing a backlog of {events:,} events of {SIZE} bytes"):
                fill(kafka.bootstrap, events)
            for i in range(pairs * 2):
                on = i % 2 == 0
                with console.step(f"query {i + 1}/{pairs * 2}, instrumentation {'on' if on else 'off'}"):
                    r = query_run(work, sup, kafka, on, cap, i)
                if r["rows"] != events:
                    raise RuntimeError(f"run {i + 1} read {r['rows']:,} rows of the {events:,} in the backlog")
                runs.append(r)
                console.info(f"  {r['rows_per_s']:,.0f} rows/s over {r['batches']} batches")
        finally:
            kafka.close_clients()
            sup.stop_all()
            kafka.stop()
    on = [r["rows_per_s"] for r in runs if r["instrumentation"]]
    off = [r["rows_per_s"] for r in runs if not r["instrumentation"]]
    on_rps, off_rps = statistics.median(on), statistics.median(off)
    ratio = on_rps / off_rps if off_rps else 0.0
    result = {
        "rows": [row("query rows/s, instrumentation on", on_rps, "rows/s", reference=off_rps,
                     reference_name="instrumentation off", goal=f">= {GOAL_RATIO}", ok=ratio >= GOAL_RATIO)],
        "on_rows_per_s": on, "off_rows_per_s": off, "runs": runs, "events": events, "partitions": PARTITIONS,
        "payload_bytes": SIZE, "max_offsets_per_trigger": cap, "master": "local[2]", "quick": quick,
        "statistic": "median of the runs each way",
    }
    console.info(f"  instrumentation on {on_rps:,.0f} rows/s vs off {off_rps:,.0f} rows/s: ratio {ratio:.3f} "
                 f"(goal >= {GOAL_RATIO})")
    if json_path:
        atomic.write_json(json_path, result)
    return result
