"""`harness bench eh-source`: the project's Spark Event Hubs source against a plain SDK receive loop, reading the
same events from the same emulator in one run, and the source's fixed cost per batch.

- sdk_loop_rps: one SDK consumer per partition (`receive_batch`, each in its own thread, as a hand-written reader
  would do it) reading every event from the start; events / wall time until the last one arrived.
- source_rps: a Spark query (local[2], availableNow, the `noop` sink, so only reading is measured) reading the
  same events in one large batch, with the SDK loop's prefetch (eventhubs.prefetchCount = PREFETCH); events / that batch's triggerExecution. It runs after the small-batch query, so
  the session's start-up, the Python workers' start (interpreter, imports) and the first query planning are not in
  it, as a long-running query never pays them again; its receivers are new (its own consumer group), as the SDK
  loop's consumers are.
- batch_overhead_ms: the intercept of batch time against batch rows (least squares over every batch but the
  first of a query run with small batches, and the large batch): what a batch costs before it reads its first
  event. The small run's first batch is left out: it starts the Python workers (seconds), once per query.

`rows` (the suite's table, harness.bench), goals from issue 21: source_rps against sdk_loop_rps (ratio >= 1.0),
the batch overhead (< 500 ms, so a 1 s trigger can be held), and the cost per 1,000 events. The details say where
a batch's time goes (median of Spark's durationMs phases over the small batches: latestOffset is the driver's
hub and partition queries, addBatch the tasks).
"""
from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from harness.files import atomic
from harness.bench import row
from harness.backends.eventhubs.emulated import EmulatedEventHubs
from harness.console import Console
from harness.supervisor import Supervisor

HUB, PARTITIONS, SIZE = "bench", 4, 256
PREFETCH = 1000  # both readers fetch and hand over up to this many events at a time (the source: prefetchCount)
GOAL_RATIO = 1.0  # the source at least as fast as a plain SDK receive loop
GOAL_OVERHEAD_MS = 500.0  # a batch's fixed cost, so a 1 s trigger can be held
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def fill(conn: str, events: int) -> None:
    """`events` events of SIZE bytes, spread evenly over the partitions, in full batches."""
    from azure.eventhub import EventData, EventHubProducerClient

    from harness.backends.eventhubs.sender import fill_batch

    body = json.dumps({"p": 0, "s": 0, "t": 0.0, "pad": "x" * (SIZE - 40)}).encode()
    with EventHubProducerClient.from_connection_string(conn, eventhub_name=HUB) as producer:
        for p in range(PARTITIONS):
            left = events // PARTITIONS
            while left:
                batch = producer.create_batch(partition_id=str(p))
                n = fill_batch(batch, lambda _: EventData(body), left)
                producer.send_batch(batch)
                left -= n


def sdk_loop(conn: str, per_partition: int) -> float:
    from azure.eventhub import EventHubConsumerClient

    counts = [0] * PARTITIONS
    done = threading.Event()
    clients = [EventHubConsumerClient.from_connection_string(conn, consumer_group="$Default", eventhub_name=HUB)
               for _ in range(PARTITIONS)]

    def reader(p: int) -> None:
        def on_batch(_ctx, batch):
            counts[p] += len(batch)
            if sum(counts) >= per_partition * PARTITIONS:
                done.set()
        clients[p].receive_batch(on_batch, partition_id=str(p), starting_position="-1", max_batch_size=PREFETCH,
                                 max_wait_time=1.0, prefetch=PREFETCH)

    started = time.perf_counter()
    threads = [threading.Thread(target=reader, args=(p,), daemon=True) for p in range(PARTITIONS)]
    for t in threads:
        t.start()
    if not done.wait(600):
        raise RuntimeError(f"the SDK loop read {sum(counts)} of {per_partition * PARTITIONS} events in 600 s")
    elapsed = time.perf_counter() - started
    for c in clients:
        c.close()
    return sum(counts) / elapsed


def spark_session(work: Path):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from harness.backends.eventhubs.spark_source import register
    from harness.spark.process import BASE_CONF

    builder = SparkSession.builder.master("local[2]").appName("bench-eh-source")
    for k, v in dict(BASE_CONF, **{"spark.local.dir": str(work / "spark-tmp")}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def source_run(spark, conn: str, work: Path, max_events: int, group: str) -> list[dict]:
    """Spark's durationMs of every batch that read rows, with its row count under "rows". Each run reads as its
    own consumer group: the receivers a finished query leaves cached in the Python workers hold their partitions'
    epoch in theirs."""
    query = (spark.readStream.format("eventhubs")
             .option("eventhubs.connectionString", f"{conn};EntityPath={HUB}")
             .option("eventhubs.consumerGroup", group)
             .option("eventhubs.startingPosition", json.dumps({"offset": "-1", "seqNo": -1, "enqueuedTime": None,
                                                                "isInclusive": True}))
             .option("eventhubs.prefetchCount", PREFETCH)
             .option("maxEventsPerTrigger", max_events).load()
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(work / f"ckpt-{uuid.uuid4().hex[:6]}")).start())
    query.awaitTermination(900)
    if query.exception() is not None:
        raise RuntimeError(f"the source's query failed: {query.exception()}")
    return [dict({k: float(v) for k, v in p["durationMs"].items()}, rows=int(p["numInputRows"]))
            for p in query.recentProgress if p["numInputRows"]]


def phase_medians(batches: list[dict]) -> dict[str, float]:
    """The median of each of Spark's phases (PHASES) over `batches`, in ms; a phase no batch reported is left out."""
    return {k: float(np.median([b[k] for b in batches if k in b])) for k in PHASES if any(k in b for b in batches)}


def overhead_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(ms per event, intercept ms) of batch time against batch rows, least squares."""
    data = np.array(points, dtype=float)
    if len(data) < 2 or len(set(data[:, 0])) < 2:
        raise ValueError(f"the overhead fit needs batches of at least two sizes, got {len(data)} batches")
    slope, intercept = np.polyfit(data[:, 0], data[:, 1], 1)
    return float(slope), float(intercept)


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    events = 40_000 if quick else 200_000
    with tempfile.TemporaryDirectory(prefix="bench-eh-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        emulator = EmulatedEventHubs(HUB, PARTITIONS, {"MaxEventsPerPartition": events, "RetentionSeconds": 86400},
                                     consumer_groups=["large", "small"])
        try:
            with console.step("starting the Event Hubs emulator"):
                emulator.start(work, sup)
                emulator.create_stream(HUB, PARTITIONS, {})
            conn = emulator.connection_string()
            with console.step(f"sending {events:,} events of {SIZE} bytes"):
                fill(conn, events)
            with console.step("plain SDK receive loop"):
                sdk_rps = sdk_loop(conn, events // PARTITIONS)
            with console.step("starting Spark"):
                spark = spark_session(work)
            try:
                with console.step("the source, small batches"):
                    small = source_run(spark, conn, work, max(events // 40, 100), "small")
                with console.step("the source, one large batch"):
                    large = source_run(spark, conn, work, events, "large")
            finally:
                spark.stop()
        finally:
            emulator.stop()
    rows = sum(b["rows"] for b in large)
    source_rps = rows / (sum(b["triggerExecution"] for b in large) / 1000.0)
    fitted = small[1:] + large  # the small run's first batch starts the Python workers (see the module)
    slope, intercept = overhead_fit([(b["rows"], b["triggerExecution"]) for b in fitted])
    ratio = source_rps / sdk_rps if sdk_rps else math.nan
    phases = phase_medians(small[1:])
    result = {
        "source_rps": source_rps, "sdk_loop_rps": sdk_rps, "ratio": ratio,
        "batch_overhead_ms": intercept, "ms_per_1000_events": slope * 1000.0,
        "events": events, "partitions": PARTITIONS, "payload_bytes": SIZE, "quick": quick,
        "small_batch_phases_ms": phases,
        "batches": {"large": large, "small": small},
        "goals": {"ratio_at_least": GOAL_RATIO, "batch_overhead_ms_below": GOAL_OVERHEAD_MS},
    }
    result["rows"] = [
        row("source read rate", source_rps, "events/s", reference=sdk_rps, reference_name="plain SDK loop",
            goal=f">= {GOAL_RATIO}", ok=bool(sdk_rps) and ratio >= GOAL_RATIO),
        row("batch overhead", intercept, "ms", goal=f"< {GOAL_OVERHEAD_MS:.0f} ms",
            ok=intercept < GOAL_OVERHEAD_MS),
        row("batch time per 1,000 events", slope * 1000.0, "ms"),
    ]
    console.info(f"  source {source_rps:,.0f} ev/s vs SDK loop {sdk_rps:,.0f} ev/s: ratio {ratio:.2f} "
                 f"(goal >= {GOAL_RATIO}); batch overhead {intercept:,.0f} ms (goal < {GOAL_OVERHEAD_MS:.0f}); "
                 "small batches' median phases: " + ", ".join(f"{k} {v:,.0f} ms" for k, v in phases.items()))
    if json_path:
        atomic.write_json(json_path, result)
    return result
