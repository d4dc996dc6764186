"""`harness bench eh-source`: the project's Spark Event Hubs source against a plain SDK receive loop, reading the
same events from the same emulator in one run, and the source's fixed cost per batch.

- sdk_loop_rps: one SDK consumer per partition (`receive_batch`, each in its own thread, as a hand-written reader
  would do it) reading every event from the start; events / wall time until the last one arrived.
- source_rps: a Spark query (local[2], availableNow, the `noop` sink, so only reading is measured) reading the
  same events; events / the sum of its batches' triggerExecution (session start-up and query planning of the
  first batch excluded, as a long-running query never pays them again).
- batch_overhead_ms: the intercept of batch time against batch rows (least squares over every batch of a query
  run with small batches and one run with large ones): what a batch costs before it reads its first event.

`rows` (the suite's table, harness.bench): source_rps against sdk_loop_rps (goal: ratio >= 0.8), the batch
overhead and the cost per 1,000 events.
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

from harness import atomic
from harness.bench import row
from harness.backends.eventhubs.emulated import EmulatedEventHubs
from harness.console import Console
from harness.supervisor import Supervisor

HUB, PARTITIONS, SIZE = "bench", 4, 256
GOAL_RATIO = 0.8


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
        clients[p].receive_batch(on_batch, partition_id=str(p), starting_position="-1", max_batch_size=1000,
                                 max_wait_time=1.0, prefetch=1000)

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


def source_run(spark, conn: str, work: Path, max_events: int, group: str) -> list[tuple[int, float]]:
    """(rows, triggerExecution ms) of every batch that read rows. Each run reads as its own consumer group: the
    receivers a finished query leaves cached in the Python workers hold their partitions' epoch in theirs."""
    query = (spark.readStream.format("eventhubs")
             .option("eventhubs.connectionString", f"{conn};EntityPath={HUB}")
             .option("eventhubs.consumerGroup", group)
             .option("eventhubs.startingPosition", json.dumps({"offset": "-1", "seqNo": -1, "enqueuedTime": None,
                                                                "isInclusive": True}))
             .option("maxEventsPerTrigger", max_events).load()
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(work / f"ckpt-{uuid.uuid4().hex[:6]}")).start())
    query.awaitTermination(900)
    if query.exception() is not None:
        raise RuntimeError(f"the source's query failed: {query.exception()}")
    return [(p["numInputRows"], float(p["durationMs"]["triggerExecution"])) for p in query.recentProgress
            if p["numInputRows"]]


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
                with console.step("the source, large batches"):
                    large = source_run(spark, conn, work, events, "large")
                with console.step("the source, small batches"):
                    small = source_run(spark, conn, work, max(events // 40, 100), "small")
            finally:
                spark.stop()
        finally:
            emulator.stop()
    rows = sum(r for r, _ in large)
    source_rps = rows / (sum(ms for _, ms in large) / 1000.0)
    points = np.array(large + small, dtype=float)
    slope, intercept = np.polyfit(points[:, 0], points[:, 1], 1)
    result = {
        "source_rps": source_rps, "sdk_loop_rps": sdk_rps, "ratio": source_rps / sdk_rps if sdk_rps else math.nan,
        "batch_overhead_ms": float(intercept), "ms_per_1000_events": float(slope) * 1000.0,
        "events": events, "partitions": PARTITIONS, "payload_bytes": SIZE, "quick": quick,
        "batches": {"large": large, "small": small}, "goals": {"ratio_at_least": GOAL_RATIO},
    }
    result["rows"] = [
        row("source read rate", source_rps, "events/s", reference=sdk_rps, reference_name="plain SDK loop",
            goal=f">= {GOAL_RATIO}", ok=bool(sdk_rps) and source_rps / sdk_rps >= GOAL_RATIO),
        row("batch overhead", float(intercept), "ms"),
        row("batch time per 1,000 events", float(slope) * 1000.0, "ms"),
    ]
    console.info(f"  source {source_rps:,.0f} ev/s vs SDK loop {sdk_rps:,.0f} ev/s: ratio {result['ratio']:.2f} "
                 f"(goal >= {GOAL_RATIO}); batch overhead {intercept:,.0f} ms")
    if json_path:
        atomic.write_json(json_path, result)
    return result
