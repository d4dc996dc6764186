"""`harness bench kafka-query`: what the harness's instrumentation costs the Kafka query under test.

One embedded broker holds a backlog produced before anything is measured (so the producers are not in the
measurement). The query process (harness.spark.query, the harness's own `passthrough` query to the Parquet sink,
local[2]) reads the whole backlog with availableNow and a fixed maxOffsetsPerTrigger, so every run does the same
batches of the same work. After one warm-up run (not counted: the broker's page cache and JIT are cold for the
first reader), every mode runs once per round, every other round in reverse order, so the machine's drift weighs
on every mode alike.

What the harness adds to a user's query, each item of which a mode can remove alone (`instrumentation_off`, an
internal flag of the query process, not a scenario option):
- `listener`: the streaming query listener appending every progress record to progress.jsonl and keeping the
  partitions' end offsets (a py4j callback per batch on the driver);
- `event_log`: Spark's event log (spark.eventLog.*), from which the report reads where each task ran (placement,
  task metrics);
- `polling`: the drain loop polling the query (isActive, the control files) four times a second.
Modes: `on` (all), `off` (none), `no-<item>` (all but that item). Kept in every mode (part of the query's work, not
of the observation): the projection of Kafka rows to the event columns and the `passthrough` query's batch_ms
column, and the status file (written at start and end only; it carries the throughput).

Rows/s = rows / the span of the query's batches, from the progress Spark keeps itself (the same reading in every
mode; the JVM start and the session are outside it); each mode's figure is the median of its runs. The headline
row: on against off, goal ratio >= 0.95 (the harness costs under 5%). One detail row per item: on against all on
but that item (that item's cost; noisy on a shared 2-core machine, where a few percent is within the noise).
"""
from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path

from harness.files import atomic
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.bench import row
from harness.console import Console
from harness.spark.process import INSTRUMENTATION, SparkQueryProcess
from harness.supervisor import Supervisor

TOPIC, PARTITIONS, SIZE = "bench-query", 8, 256
GOAL_RATIO = 0.95


def fill(bootstrap: str, events: int, topic: str = TOPIC, partitions: int = PARTITIONS, size: int = SIZE,
         settings: dict | None = None) -> None:
    """`events` harness events of `size` bytes (the producers' own encoding), spread over `partitions` round robin,
    acks=all, at one intended time; every one acked or an error. `settings`: client settings over these."""
    from confluent_kafka import Producer

    from harness.producers.event import encode_many, pad_lengths

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": "lz4", "acks": "all", "queue.buffering.max.messages": 1_000_000,
                         **(settings or {})})
    failed = []

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(err)

    step, now = 10_000, time.time()
    for seq0 in range(0, events, step):
        n = min(step, events - seq0)
        pads = ["x" * k for k in pad_lengths(0, seq0, [size] * n)]
        for i, value in enumerate(encode_many(0, seq0, [now] * n, pads)):
            while True:
                try:
                    producer.produce(topic, value, partition=(seq0 + i) % partitions, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) or failed:
        raise RuntimeError(f"the backlog was not produced: {len(failed)} failed, {len(producer)} outstanding")


# The modes each run: everything on, everything off (the headline pair), then one item off at a time (its cost).
ALL_ON, ALL_OFF = "on", "off"


def modes() -> list[str]:
    return [ALL_ON, ALL_OFF] + [f"no-{item}" for item in INSTRUMENTATION]


def items_off(mode: str) -> tuple[str, ...]:
    if mode == ALL_ON:
        return ()
    if mode == ALL_OFF:
        return INSTRUMENTATION
    return (mode.removeprefix("no-"),)


def query_run(work: Path, sup: Supervisor, kafka: EmbeddedKafka, mode: str, cap: int, n: int) -> dict:
    """One availableNow run over the whole backlog in a fresh run directory; its throughput record."""
    run_dir = work / f"{n:02d}-{mode}"
    source = kafka.spark_source(TOPIC, {"startingOffsets": "earliest", "maxOffsetsPerTrigger": str(cap),
                                        "failOnDataLoss": "true"})
    q = SparkQueryProcess(run_dir, sup, source=source, master="local[2]", trigger={"kind": "availableNow"},
                          conf={"spark.sql.streaming.numRecentProgressUpdates": "10000"},
                          instrumentation_off=items_off(mode))
    q.start()
    code = q.wait_exit(900)
    status = q.status()
    if code != 0 or "throughput" not in status:
        q.stop(hard=True)
        raise RuntimeError(f"the query ({mode}) ended with exit {code}, state "
                           f"{status.get('state')!r}: {str(status.get('error'))[:300]} (see {run_dir}/spark)")
    t = status["throughput"]
    return {"mode": mode, "instrumentation": mode == ALL_ON, "off": list(items_off(mode)), "rows": t["rows"],
            "batches": t["batches"], "seconds": t["seconds"],
            "rows_per_s": t["rows"] / t["seconds"] if t["seconds"] else 0.0}


def schedule(rounds: int) -> list[str]:
    """The modes in rounds, every other round in reverse order (on off a b c | c b a off on ...): a drift over the
    bench (the broker's page cache and JIT warming, another process's load) weighs on every mode alike."""
    order = modes()
    return [m for r in range(rounds) for m in (order if r % 2 == 0 else order[::-1])]


def run_bench(json_path: str | None = None, quick: bool = False, console: Console | None = None) -> dict:
    console = console or Console()
    events = 200_000 if quick else 600_000
    rounds = 2
    cap = events // 20  # 20 equal batches: the same work in every mode, well within Spark's recent progress
    runs: list[dict] = []
    plan = schedule(rounds)
    with tempfile.TemporaryDirectory(prefix="bench-kafka-query-") as tmp, Supervisor(uuid.uuid4().hex) as sup:
        work = Path(tmp)
        kafka = EmbeddedKafka(nodes=1, heap_mb=1024)
        try:
            with console.step("starting Kafka"):
                kafka.start(work, sup)
                kafka.create_stream(TOPIC, PARTITIONS, {})
            with console.step(f"producing a backlog of {events:,} events of {SIZE} bytes"):
                fill(kafka.bootstrap, events)
            with console.step("warm-up query (instrumentation on, not counted)"):
                warm = query_run(work, sup, kafka, ALL_ON, cap, 0)
            console.info(f"  warm-up {warm['rows_per_s']:,.0f} rows/s")
            for i, mode in enumerate(plan, start=1):
                with console.step(f"query {i}/{len(plan)}, instrumentation {mode}"):
                    r = query_run(work, sup, kafka, mode, cap, i)
                if r["rows"] != events:
                    raise RuntimeError(f"run {i} read {r['rows']:,} rows of the {events:,} in the backlog")
                runs.append(r)
                console.info(f"  {r['rows_per_s']:,.0f} rows/s over {r['batches']} batches")
        finally:
            kafka.close_clients()
            sup.stop_all()
            kafka.stop()
    by_mode = {m: [r["rows_per_s"] for r in runs if r["mode"] == m] for m in modes()}
    median = {m: statistics.median(v) for m, v in by_mode.items()}
    on_rps, off_rps = median[ALL_ON], median[ALL_OFF]
    ratio = on_rps / off_rps if off_rps else 0.0
    rows = [row("query rows/s, instrumentation on", on_rps, "rows/s", reference=off_rps,
                reference_name="instrumentation off", goal=f">= {GOAL_RATIO}", ok=ratio >= GOAL_RATIO)]
    for item in INSTRUMENTATION:  # what each item costs: all on against all on but that item
        rows.append(row(f"query rows/s, instrumentation on ({item}'s cost)", on_rps, "rows/s",
                        reference=median[f"no-{item}"], reference_name=f"all on but {item}"))
    result = {
        "rows": rows, "on_rows_per_s": by_mode[ALL_ON], "off_rows_per_s": by_mode[ALL_OFF],
        "rows_per_s_by_mode": by_mode, "median_rows_per_s": median, "runs": runs, "warm_up": warm,
        # the best run of each mode too: another process's load only ever slows a run down, so with few runs the
        # best is the steadier figure (the rows keep the median)
        "best_rows_per_s": {m: max(v) for m, v in by_mode.items()},
        "events": events, "partitions": PARTITIONS, "payload_bytes": SIZE, "max_offsets_per_trigger": cap,
        "master": "local[2]", "quick": quick, "rounds": rounds,
        "statistic": "median of the runs of each mode, after one warm-up run not counted",
    }
    console.info(f"  instrumentation on {on_rps:,.0f} rows/s vs off {off_rps:,.0f} rows/s: ratio {ratio:.3f} "
                 f"(goal >= {GOAL_RATIO})")
    best = {m: max(v) for m, v in by_mode.items()}
    console.info(f"  best runs: on {best[ALL_ON]:,.0f} rows/s vs off {best[ALL_OFF]:,.0f} rows/s: ratio "
                 f"{best[ALL_ON] / best[ALL_OFF] if best[ALL_OFF] else 0:.3f}")
    for item in INSTRUMENTATION:
        without = median[f"no-{item}"]
        console.info(f"  all on but {item}: {without:,.0f} rows/s (on / that {on_rps / without if without else 0:.3f})")
    if json_path:
        atomic.write_json(json_path, result)
    return result
