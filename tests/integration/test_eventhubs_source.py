"""format("eventhubs"): real Spark, the real azure-eventhub SDK and the project's emulator.

Events are sent with the SDK's producer; what Spark reads is compared with what a plain SDK receive returns (the
independent source), with counts worked out by hand, and with what the emulator's age_out dropped.
"""
import glob
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import timezone

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig
from harness.supervisor import wait_until

pytestmark = pytest.mark.integration

FROM_START = json.dumps({"offset": "-1", "seqNo": -1, "enqueuedTime": None, "isInclusive": True})


HUBS = (HubConfig("reuse", 1), HubConfig("once", 4, ("$Default", "check")), HubConfig("strict", 1),
        HubConfig("lenient", 1), HubConfig("aged", 1), HubConfig("leak", 2), HubConfig("reborn", 1),
        HubConfig("prefetched", 1))


@pytest.fixture(scope="module")
def emulator():
    with EmulatorServer(EmulatorConfig(hubs=HUBS)).start() as emu:
        yield emu


@pytest.fixture(scope="module")
def spark(spark):
    """The shared session of conftest.py (one driver JVM per test process: jars cannot be added to a running one,
    so a session of this module's own would leave Spark's Kafka source out for the modules after it), with the
    source registered. In the default file order no earlier module has run a query on it, so this module's first
    query meets no idle Python worker (see the reuse test)."""
    from harness.backends.eventhubs.spark_source import register

    register(spark)
    return spark


def send(conn: str, hub: str, partition: str | None = None, count: int = 0, key: str | None = None,
         prefix: str = "e", properties: dict | None = None) -> None:
    producer = EventHubProducerClient.from_connection_string(conn, eventhub_name=hub)
    with producer:
        batch = producer.create_batch(partition_id=partition) if key is None else \
            producer.create_batch(partition_key=key)
        for i in range(count):
            event = EventData(f"{prefix}-{partition or key}-{i}")
            if properties is not None:
                event.properties = dict(properties, i=i)
            batch.add(event)
        producer.send_batch(batch)


def sdk_events(conn: str, hub: str, counts: dict[str, int], group: str = "check") -> dict[str, list]:
    """Every event of each partition, from a plain SDK receive from the start of the stream (in a consumer group
    of its own: the query's exclusive receivers hold $Default)."""
    got: dict[str, list] = {p: [] for p in counts}
    clients = []
    for p in counts:  # one receive per partition (receive() over many partitions crawls)
        client = EventHubConsumerClient.from_connection_string(conn, group, eventhub_name=hub,
                                                               load_balancing_interval=0.5)
        threading.Thread(target=client.receive_batch, daemon=True, kwargs=dict(
            on_event_batch=lambda ctx, events: got[ctx.partition_id].extend(events), partition_id=p,
            starting_position="-1", max_batch_size=300)).start()
        clients.append(client)
    deadline = time.time() + 30
    while time.time() < deadline and any(len(got[p]) < n for p, n in counts.items()):
        time.sleep(0.1)
    for client in clients:
        client.close()
    assert {p: len(v) for p, v in got.items()} == counts
    return got


def stream(spark, conn: str, hub: str, **options):
    reader = spark.readStream.format("eventhubs").option("eventhubs.connectionString",
                                                          conn + f";EntityPath={hub}")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def task_records(metrics_dir) -> list[dict]:
    out = []
    for path in glob.glob(os.path.join(str(metrics_dir), "tasks-*.jsonl")):
        with open(path, encoding="utf-8") as f:
            out.extend(json.loads(line) for line in f if line.strip())
    return sorted(out, key=lambda r: (r["started_ms"], r["partition"]))


# ------------------------------------------------------------------------------------------------ Spark
@pytest.mark.slow  # `make test-slow` (nightly): 22 s; eh-receiver-cache and eh-epoch-steal run it in the catalogue
def test_receiver_is_reused_across_batches_and_the_query_reads_on_after_steals(spark, emulator, tmp_path):
    """The module's first query: a fresh session has no idle Python worker and a one-partition hub needs one task
    per batch, so every batch runs in the same worker and must find its receiver where the last batch left it.
    Then a competing higher-epoch reader takes the partition twice: between batches and gone at once (the next
    task finds its cached receiver stolen), and staying 2 s (the next task is refused and retries until it
    leaves). The query reads every event once."""
    conn = emulator.connection_string()
    send(conn, "reuse", "0", 20)
    df = stream(spark, conn, "reuse", **{"eventhubs.startingPosition": FROM_START, "maxEventsPerTrigger": 10,
                                         "harness.metricsPath": str(tmp_path / "m")})
    q = df.writeStream.format("memory").queryName("reuse").option("checkpointLocation", str(tmp_path / "ck")).start()
    try:
        q.processAllAvailable()
        reuse = task_records(tmp_path / "m")
        assert emulator.steal("reuse", "0") == 1  # the cached receiver, idle between batches
        send(conn, "reuse", "0", 10, prefix="second")
        q.processAllAvailable()
        assert emulator.steal("reuse", "0", hold_s=2) == 1
        send(conn, "reuse", "0", 10, prefix="third")
        q.processAllAvailable()
    finally:
        q.stop()
    assert [r.sequenceNumber for r in spark.sql("select sequenceNumber from reuse order by 1").collect()] == \
        list(range(40))
    assert [(r["start"], r["end"], r["rows"]) for r in reuse] == [(0, 10, 10), (10, 20, 10)]
    assert len({r["pid"] for r in reuse}) == 1, "expected one Python worker: needs this module's fresh session"
    # created once per partition in the worker, then reused
    assert [(r["created"], r["reused"], r["mismatch"], r["stolen"]) for r in reuse] == [(1, 0, 0, 0), (0, 1, 0, 0)]
    assert reuse[0]["executor"] == "driver"  # local mode: the Python worker's JVM is the driver
    assert reuse[1]["threads"] <= reuse[0]["threads"]  # reuse adds no threads
    records = task_records(tmp_path / "m")
    assert all(r["error"] is None and r["lost_ranges"] == [] for r in records)
    between, held = records[2:]
    assert (between["start"], between["end"], between["rows"], between["stolen"]) == (20, 30, 10, 1)
    assert (held["start"], held["end"], held["rows"]) == (30, 40, 10) and held["stolen"] >= 1


def test_read_once_in_order_with_connector_values_capped_batches_and_exact_rerun(spark, emulator, tmp_path):
    """Capped batches split by backlog; every event once, in order, with the values a plain SDK receive sees;
    then a restart from the checkpoint after the driver 'died' before committing the last batch (its commit and
    the file sink's log entry removed): Spark re-runs that batch, which must read exactly the same events."""
    hub, conn = "once", emulator.connection_string()
    sizes = {"0": 10, "1": 20, "2": 30, "3": 40}
    for p, n in sizes.items():
        send(conn, hub, p, n, properties={"kind": "plain", "weight": 1.5, "flag": True})
    options = {"eventhubs.startingPosition": FROM_START, "maxEventsPerTrigger": 60,
               "harness.metricsPath": str(tmp_path / "m")}
    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")
    df = stream(spark, conn, hub, **options)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("body", "binary"), ("partition", "string"), ("offset", "string"), ("sequenceNumber", "bigint"),
        ("enqueuedTime", "timestamp"), ("publisher", "string"), ("partitionKey", "string"),
        ("properties", "map<string,string>"), ("systemProperties", "map<string,string>")]

    def run(source):
        q = source.writeStream.format("parquet").option("path", sink).option("checkpointLocation", ck).start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()
        return [p for p in q.recentProgress if p["numInputRows"]]

    batches = run(df)
    # 100 events, cap 60 split by backlog 10:20:30:40 -> 6/12/18/24, then the other 40 (4/8/12/16)
    assert [p["numInputRows"] for p in batches] == [60, 40]
    assert [json.loads(p["sources"][0]["endOffset"])[hub] for p in batches] == [
        {"0": 6, "1": 12, "2": 18, "3": 24}, {"0": 10, "1": 20, "2": 30, "3": 40}]
    first_run = task_records(tmp_path / "m")
    # one receiver per partition in the executor, whichever of the Python workers (two, local[2]) runs a task: the
    # second batch's tasks all reuse them, in their own worker or through the partition's owner (handoff.py)
    assert sum(r["created"] for r in first_run) == 4
    assert [(r["created"], r["reused"], r["mismatch"]) for r in first_run if r["start"] > 0] == [(0, 1, 0)] * 4
    assert all(r["served_by"] in (None, *{q["pid"] for q in first_run}) and r["served_by"] != r["pid"]
               for r in first_run)
    last = max(int(n) for n in os.listdir(os.path.join(ck, "commits")) if n.isdigit())
    for log in (os.path.join(ck, "commits"), os.path.join(sink, "_spark_metadata")):
        for name in (str(last), f".{last}.crc"):
            if os.path.exists(os.path.join(log, name)):
                os.remove(os.path.join(log, name))
    send(conn, hub, key="user-7", count=5, prefix="k")  # keyed events: the service picks the partition
    send(conn, hub, key="user-8", count=5, prefix="k")
    batches = run(stream(spark, conn, hub, **options))
    assert [p["numInputRows"] for p in batches] == [40, 10]  # the re-run batch, then the keyed events

    rerun = task_records(tmp_path / "m")[len(first_run):]
    originals = {(r["partition"], r["start"]): (r["end"], r["rows"]) for r in first_run}
    replayed = [r for r in rerun if (r["partition"], r["start"]) in originals]
    assert sorted((r["partition"], r["start"], r["end"], r["rows"]) for r in replayed) == \
        [("0", 6, 10, 4), ("1", 12, 20, 8), ("2", 18, 30, 12), ("3", 24, 40, 16)]
    assert all(r["error"] is None for r in task_records(tmp_path / "m"))

    rows = spark.read.parquet(sink).collect()
    assert len(rows) == 110
    by_partition: dict[str, list] = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append(r)
    expected = sdk_events(conn, hub, {p: len(by_partition.get(p, [])) for p in sizes})
    assert sum(len(v) for v in expected.values()) == 110
    for p, events in expected.items():
        got = sorted(by_partition.get(p, []), key=lambda r: r.sequenceNumber)
        assert [r.sequenceNumber for r in got] == [e.sequence_number for e in events]  # once each, in order
        for r, e in zip(got, events):
            assert bytes(r.body) == b"".join(e.body)
            assert r.offset == str(e.offset)
            assert r.enqueuedTime.replace(tzinfo=timezone.utc).timestamp() == pytest.approx(
                e.enqueued_time.timestamp(), abs=1e-3)
            key = e.partition_key.decode() if e.partition_key is not None else None
            assert r.partitionKey == key and r.publisher is None
            # the connector's rule: string values as they are, anything else as JSON
            want = {k.decode(): (v.decode() if isinstance(v, bytes) else json.dumps(v))
                    for k, v in (e.properties or {}).items()}
            assert dict(r.properties) == want
            system = {k.decode(): (v.decode() if isinstance(v, bytes) else json.dumps(v))
                      for k, v in e.system_properties.items()
                      if k not in (b"x-opt-offset", b"x-opt-sequence-number", b"x-opt-enqueued-time")}
            assert dict(r.systemProperties) == system
    assert sum(1 for r in rows if r.partitionKey is not None) == 10


@pytest.mark.slow  # `make test-slow` (nightly): 17 s; eh-ageout and eh-ageout-lenient judge both settings' loss exactly
def test_fail_on_data_loss_true_fails_clearly_and_false_reports_the_lost_range_exactly(spark, emulator, tmp_path):
    """Two queries (one Spark session), each on its own hub: events 10..14 age out before either query read them.
    failOnDataLoss=true fails naming the partition and the numbers; false goes on and its task reports exactly the
    range age_out took from it. Each query reads with availableNow, so none runs between the second sends and the
    age-out (a running query could read 10..14 first, and then nothing would be lost)."""
    conn = emulator.connection_string()
    options = {"strict": {}, "lenient": {"failOnDataLoss": "false", "harness.metricsPath": str(tmp_path / "m")}}

    def read_all(hub: str):  # into a file sink: a query restarted from its checkpoint appends to it
        return (stream(spark, conn, hub, **{"eventhubs.startingPosition": FROM_START, **options[hub]})
                .writeStream.format("parquet").option("path", str(tmp_path / f"out-{hub}"))
                .option("checkpointLocation", str(tmp_path / f"ck-{hub}")).trigger(availableNow=True).start())

    for hub in ("strict", "lenient"):
        send(conn, hub, "0", 10)
        read_all(hub).awaitTermination(120)
    dropped = {}
    for hub in ("strict", "lenient"):
        # take the partition from a receiver the source keeps cached (as a higher epoch would), so nothing
        # prefetches the next events before they age out: the next task must open a new receiver at 10
        emulator.steal(hub, "0")
        send(conn, hub, "0", 10, prefix="second")
        dropped[hub] = emulator.age_out(hub, "0", up_to_seq=14)
    lenient = read_all("lenient")
    assert lenient.awaitTermination(120) is not False and lenient.exception() is None
    seqs = [r.sequenceNumber for r in spark.read.parquet(str(tmp_path / "out-lenient")).collect()]
    strict = read_all("strict")
    with pytest.raises(Exception) as err:
        strict.awaitTermination(120)
    text = str(err.value)
    assert "failOnDataLoss" in text and "Partition 0" in text
    assert "starting sequence number 10" in text and "earliest retained sequence number 15" in text

    assert dropped == {"strict": 15, "lenient": 15}  # age_out dropped 0..14, of which the queries had read 0..9
    lost = (10, 15)
    assert sorted(seqs) == [s for s in range(20) if not lost[0] <= s < lost[1]]
    with_loss = [r for r in task_records(tmp_path / "m") if r["lost_ranges"]]
    assert len(with_loss) == 1
    assert with_loss[0]["lost_ranges"] == [["0", *lost]]
    assert with_loss[0]["expired_ranges"] == [list(lost)] and with_loss[0]["expired_skipped"] == 5
    assert (with_loss[0]["start"], with_loss[0]["end"], with_loss[0]["rows"]) == (10, 20, 5)


def test_unknown_option_is_an_error_naming_it(spark, emulator):
    with pytest.raises(Exception) as err:
        stream(spark, emulator.connection_string(), "strict", **{"eventhubs.startingPositon": FROM_START})
    text = str(err.value)
    assert "unknown option 'eventhubs.startingpositon'" in text and "eventhubs.startingPosition" in text


# ------------------------------------------------------------------------------------------------ executor side
def test_fresh_receiver_reports_exactly_what_aged_out_and_steals_are_survived(emulator, tmp_path):
    from harness.backends.eventhubs.spark_source import receivers
    from harness.backends.eventhubs.spark_source.offsets import Range
    from harness.backends.eventhubs.spark_source.options import parse_options

    hub = "aged"
    conn = emulator.connection_string(hub)
    send(emulator.connection_string(), hub, "0", 40)
    assert emulator.age_out(hub, "0", up_to_seq=7) == 8
    options = parse_options({"eventhubs.connectionString": conn, "failOnDataLoss": "false",
                             "harness.metricsPath": str(tmp_path / "m")})
    try:
        batches = list(receivers.read_range(options, Range("0", 5, 20)))
        assert [s for b in batches for s in b.column("sequenceNumber").to_pylist()] == list(range(8, 20))
        # a steal while the partition is idle: the next read notices and reopens where it stands
        assert emulator.steal(hub, "0") == 1
        deadline = time.time() + 10
        while time.time() < deadline and not all(r["stolen"] for r in receivers.cached_state()):
            time.sleep(0.05)
        batches = list(receivers.read_range(options, Range("0", 20, 40)))
        assert [s for b in batches for s in b.column("sequenceNumber").to_pylist()] == list(range(20, 40))
        strict = parse_options({"eventhubs.connectionString": conn, "harness.metricsPath": str(tmp_path / "m")})
        with pytest.raises(Exception, match="failOnDataLoss"):
            list(receivers.read_range(strict, Range("0", 0, 10)))

        # a steal in the middle of a read, while the task waits for 50..59: it reopens at 50 and reads on
        send(emulator.connection_string(), hub, "0", 10)
        got = []
        for b in receivers.read_range(options, Range("0", 40, 60)):
            if not got:
                assert emulator.steal(hub, "0") == 1
                threading.Timer(0.3, send, (emulator.connection_string(), hub, "0", 10)).start()
            got += b.column("sequenceNumber").to_pylist()
        assert got == list(range(40, 60))

        # a higher-epoch owner that stays: the task fails within eventhubs.operationTimeout, naming the refusal
        assert emulator.steal(hub, "0", hold_s=15) == 1
        send(emulator.connection_string(), hub, "0", 5)
        held = parse_options({"eventhubs.connectionString": conn, "eventhubs.operationTimeout": "PT2S",
                              "eventhubs.receiverTimeout": "PT1S", "harness.metricsPath": str(tmp_path / "m")})
        began = time.monotonic()
        with pytest.raises(TimeoutError, match="higher epoch") as err:
            list(receivers.read_range(held, Range("0", 60, 65)))
        assert time.monotonic() - began < 6
        assert "eventhubs.operationTimeout is 2 s" in str(err.value) and "last with: None" not in str(err.value)
    finally:
        receivers.close_all()
    first, second, failed, mid_read, refused = task_records(tmp_path / "m")
    assert first["lost_ranges"] == [["0", 5, 8]] and first["expired_skipped"] == 3 and first["rows"] == 12
    assert second["rows"] == 20 and second["stolen"] == 1 and second["created"] == 1 and second["reused"] == 0
    assert "failOnDataLoss" in failed["error"] and failed["rows"] == 0
    assert (mid_read["rows"], mid_read["stolen"], mid_read["failed"], mid_read["error"]) == (20, 1, 0, None)
    assert refused["stolen"] >= 1 and refused["rows"] == 0 and "higher epoch" in refused["error"]


def test_events_fetched_before_they_aged_out_stay_out_of_a_batch_planned_past_them(emulator, tmp_path):
    """A cached receiver prefetches ahead of its reader; events it holds may age out before the next batch is
    planned. The plan leaves them out of maxEventsPerTrigger's budget (Range.retained_from), so the task must not
    deliver them from its buffer: it reports them lost, exactly, and still reuses the receiver."""
    from harness.backends.eventhubs.spark_source import receivers
    from harness.backends.eventhubs.spark_source.offsets import PartitionBounds, Range, plan_batch_end, plan_ranges
    from harness.backends.eventhubs.spark_source.options import parse_options

    hub = "prefetched"
    send(emulator.connection_string(), hub, "0", 40)
    options = parse_options({"eventhubs.connectionString": emulator.connection_string(hub),
                             "failOnDataLoss": "false", "harness.metricsPath": str(tmp_path / "m")})
    try:
        assert sum(b.num_rows for b in receivers.read_range(options, Range("0", 0, 5))) == 5
        deadline = time.time() + 10  # the receiver fetches on past its reader (prefetch)
        while time.time() < deadline and not receivers.cached_state()[0]["buffered"]:
            time.sleep(0.05)
        assert receivers.cached_state()[0]["buffered"]
        assert emulator.age_out(hub, "0", up_to_seq=24) == 25
        # the driver's plan, from what the hub now reports: 25..39 retained, budget 5 -> [25, 30) of [5, 30)
        plan = plan_batch_end({"0": 5}, {"0": PartitionBounds("0", 25, 40)}, 5, False, hub)
        (rng,) = plan_ranges({"0": 5}, plan.end, False, hub, retained_from=plan.retained_from)
        assert (rng.start, rng.end, rng.retained_from) == (5, 30, 25)
        got = [s for b in receivers.read_range(options, rng) for s in b.column("sequenceNumber").to_pylist()]
        assert got == list(range(25, 30))
    finally:
        receivers.close_all()
    _, record = task_records(tmp_path / "m")
    assert record["lost_ranges"] == [["0", 5, 25]] and record["expired_skipped"] == 20 and record["rows"] == 5
    assert record["reused"] == 1 and record["created"] == 0


def test_no_thread_or_connection_leak_and_a_worker_exit_closes_its_connections(emulator):
    from harness.backends.eventhubs.spark_source import receivers
    from harness.backends.eventhubs.spark_source.offsets import Range
    from harness.backends.eventhubs.spark_source.options import parse_options

    hub = "leak"
    conn = emulator.connection_string(hub)
    for p in "01":
        send(emulator.connection_string(), hub, p, 5)
    def ours():  # threads of this test process minus the emulator's own (its loop and asyncio executor)
        return {t.name for t in threading.enumerate()
                if t.ident not in baseline and not t.name.startswith(("asyncio_", "eventhubs-emulator"))}

    baseline = {t.ident for t in threading.enumerate()}
    options = parse_options({"eventhubs.connectionString": conn})
    for p in "01":
        for s in range(2):  # a mismatch every time: a new receiver each read
            assert sum(b.num_rows for b in receivers.read_range(options, Range(p, s, 5))) == 5 - s
    assert receivers.cached_receivers() == 2
    deadline = time.time() + 10  # replaced receivers let go of their links
    while time.time() < deadline and emulator.snapshot()["hubs"][hub]["receivers"] != 2:
        time.sleep(0.1)
    assert emulator.snapshot()["hubs"][hub]["receivers"] == 2
    receivers.close_all()
    deadline = time.time() + 15
    while time.time() < deadline and (ours() or emulator.snapshot()["hubs"][hub]["receivers"]):
        time.sleep(0.2)
    assert ours() == set()
    assert emulator.snapshot()["hubs"][hub]["receivers"] == 0

    # a Python worker ends with os._exit (no atexit): the kernel closes its sockets, the service sees it go
    code = ("import os, time; from harness.backends.eventhubs.spark_source import read_partition; "
            f"n = sum(b.num_rows for b in read_partition({{'eventhubs.connectionString': {conn!r}}}, 0, 0, 5)); "
            "print(n, flush=True); time.sleep(1); os._exit(0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["5"], out.stderr
    deadline = time.time() + 10
    while time.time() < deadline and emulator.snapshot()["hubs"][hub]["receivers"]:
        time.sleep(0.2)
    assert emulator.snapshot()["hubs"][hub]["receivers"] == 0


def test_recreated_hub_is_data_loss_on_the_driver_and_on_the_executor(emulator, tmp_path, monkeypatch):
    """The driver's planning (the stream reader's own methods, called directly) and an executor read of a range
    the recreated hub can no longer complete."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from harness.backends.eventhubs.spark_source import receivers
    from harness.backends.eventhubs.spark_source.offsets import EventHubsDataLossError, Range
    from harness.backends.eventhubs.spark_source.options import parse_options
    from harness.backends.eventhubs.spark_source.source import EventHubsStreamReader

    monkeypatch.setattr(receivers, "STALL_CHECK_S", 0.3)  # ask about a stalled range sooner (time only)
    conn = emulator.connection_string("reborn")
    send(emulator.connection_string(), "reborn", "0", 8)
    lenient = EventHubsStreamReader(parse_options({"eventhubs.connectionString": conn, "failOnDataLoss": "false",
                                                   "eventhubs.startingPosition": FROM_START}))
    strict = EventHubsStreamReader(parse_options({"eventhubs.connectionString": conn,
                                                  "eventhubs.startingPosition": FROM_START}))
    start = lenient.initialOffset()
    assert start == {"reborn": {"0": 0}}
    end = lenient.latestOffset(start, ReadAllAvailable())
    assert end == strict.latestOffset(start, ReadAllAvailable()) == {"reborn": {"0": 8}}
    emulator.recreate_hub("reborn")
    send(emulator.connection_string(), "reborn", "0", 3, prefix="new")
    with pytest.raises(EventHubsDataLossError, match="failOnDataLoss"):
        strict.latestOffset(end, ReadAllAvailable())
    after = lenient.latestOffset(end, ReadAllAvailable())
    assert after == {"reborn": {"0": 3}}  # below the start: the new hub's [0, 3)
    [part] = lenient.partitions(end, after)
    assert (part.range.start, part.range.end, part.range.reset_from) == (0, 3, 8)

    # a range planned on the old hub ([5, 8)) that the new one (3 events) can never complete
    options = parse_options({"eventhubs.connectionString": conn, "failOnDataLoss": "false",
                             "harness.metricsPath": str(tmp_path / "m")})
    try:
        assert list(receivers.read_range(options, Range("0", 5, 8))) == []

        # recreated between planning and reading, and the new hub already holds the planned numbers: the task
        # must not read the new hub's events as the old ones. The old hub had 8 events; the query planned 0..4,
        # read nothing, and the driver saw the old hub end at 8: all 8 are reported lost, the new hub read once.
        emulator.recreate_hub("reborn")
        send(emulator.connection_string(), "reborn", "0", 8, prefix="old")
        reader = EventHubsStreamReader(parse_options({"eventhubs.connectionString": conn, "failOnDataLoss": "false",
                                                      "eventhubs.startingPosition": FROM_START}))
        start = reader.initialOffset()
        planned = reader.latestOffset(start, ReadMaxRows(5))
        assert planned == {"reborn": {"0": 5}}
        [old_range] = [part.range for part in reader.partitions(start, planned)]
        emulator.recreate_hub("reborn")
        send(emulator.connection_string(), "reborn", "0", 10, prefix="new")
        with pytest.raises(EventHubsDataLossError, match="recreated after this batch was planned"):
            list(receivers.read_range(parse_options({"eventhubs.connectionString": conn}), old_range))
        assert list(receivers.read_range(options, old_range)) == []
        got = []
        offset = planned
        for n in range(2):  # the reset batch (new hub's 0..3, below the start 5), then the rest
            after = reader.latestOffset(offset, ReadAllAvailable())
            if n == 0:  # enqueued after planning: the receiver gets them with the range, past its end
                time.sleep(0.01)
                send(emulator.connection_string(), "reborn", "0", 2, prefix="late")
            for part in reader.partitions(offset, after):
                got += [bytes(b) for batch in receivers.read_range(options, part.range)
                        for b in batch.column("body").to_pylist()]
            offset = after
        assert offset == {"reborn": {"0": 12}}
    finally:
        receivers.close_all()
    assert got == [f"new-0-{i}".encode() for i in range(10)] + [b"late-0-0", b"late-0-1"]
    records = task_records(tmp_path / "m")
    assert [(r["start"], r["end"], r["rows"], r["lost_ranges"], r["error"]) for r in records] == [
        (5, 8, 0, [["0", 5, 8]], None),
        (0, 5, 0, [["0", 0, 5]], None),  # the old hub's 0..4, planned but recreated before the read
        (0, 4, 4, [["0", 5, 8]], None),  # the reset batch answers for the old hub's 5..7, never planned
        (4, 12, 8, [], None)]
    assert records[2]["reset_from"] == 5


def test_management_calls_keep_one_connection_and_answer_with_the_hubs_state_of_the_moment():
    """The source's hub and partition queries (management.py) go over one kept connection, yet every answer is the
    service's at that moment, equal to a plain SDK client's (the independent source): events sent after a query
    show in the next one; a dropped connection is answered by the SDK's own path, then kept again; a deleted hub
    raises the plain client's error. An emulator of its own: dropping connections must not touch other tests."""
    from harness.backends.eventhubs.spark_source.management import PersistentManagementClient

    hub = "mgmt"
    with EmulatorServer(EmulatorConfig(hubs=(HubConfig(hub, 2),))).start() as emu:
        conn = emu.connection_string(hub)
        kept = PersistentManagementClient.from_connection_string(conn, "$Default", retry_total=0)
        plain = EventHubConsumerClient.from_connection_string(conn, "$Default", retry_total=0)

        def agree() -> None:  # 3 management calls on each client
            assert kept.get_eventhub_properties() == plain.get_eventhub_properties()
            for p in "01":
                assert kept.get_partition_properties(p) == plain.get_partition_properties(p)

        try:
            agree()
            send(emu.connection_string(), hub, "0", 3)
            assert kept.get_partition_properties("0")["last_enqueued_sequence_number"] == 2  # not a stale answer
            agree()
            assert (kept.kept_requests, kept.fallback_requests) == (7, 0)
            # the kept one stays; the plain client's, one per call, and the sender's close (seen a moment later)
            wait_until(lambda: emu.snapshot()["connections"] == 1, 5, 0.05, "one connection left")
            assert emu.drop_connections() == 1
            send(emu.connection_string(), hub, "1", 2)
            assert kept.get_partition_properties("1")["last_enqueued_sequence_number"] == 1
            assert (kept.kept_requests, kept.fallback_requests) == (7, 1)  # the SDK's path answered that one
            agree()
            assert (kept.kept_requests, kept.fallback_requests) == (10, 1)  # and the connection is kept again
            assert emu.delete_hub(hub)
            with pytest.raises(Exception) as plain_error:
                plain.get_partition_properties("0")
            with pytest.raises(type(plain_error.value)) as kept_error:
                kept.get_partition_properties("0")
            def text(exc):  # the service's tracking id and timestamp differ from one answer to the next
                return re.sub(r"TrackingId:[^,]*|Timestamp:\S*", "", str(exc))

            assert text(kept_error.value) == text(plain_error.value)
        finally:
            kept.close()
            plain.close()
        wait_until(lambda: emu.snapshot()["connections"] == 0, 5, 0.05, "close() letting go of the kept connection")
