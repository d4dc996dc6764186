"""The queries under test against real Spark and a real broker: the windowed count's window assignment against
exact arithmetic, the `stateful` scenario (driver killed mid-batch) judged by its oracle and re-checked here from
the raw ack logs and Parquet files, `dedup` under an upstream that really re-sends, and a user's own query module
next to its scenario file. Expected values come from the ack logs' text, the broker and Spark's own files, never
from harness.oracles."""
import io
import json
import subprocess
import sys
from collections import Counter
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.records.history import load_acks
from harness.oracles import window_counts
from harness.queries import resolve
from harness.spark.events import from_kafka
from harness.producers.event import encode
from harness.backends.kafka.sender import event_fields

from scenario_runs import run

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "user_queries"
T0_S = 1_795_000_000  # a multiple of every window used below, in seconds


def run_scenario(harness_env, out: Path, name: str, *overrides: str, timeout: int = 1500):
    return run(harness_env, out, name, *overrides, timeout=timeout)


def exact_window(intended_text: str, window_ms: int) -> int:
    """The window start an event belongs to, from its intended time as the producer wrote it (decimal text)."""
    instant = int(Decimal(intended_text).to_integral_value(rounding=ROUND_FLOOR))
    return instant - instant % window_ms


def ack_texts(run_dir: Path) -> list[tuple[str, str]]:
    """(intended_ms text, error) of every row of the ack logs (3 decimals: the float is the nearest to that text)."""
    acks = load_acks(run_dir / "producers")
    return [(f"{t:.3f}", e) for t, e in zip(acks["intended_ms"].tolist(), acks["error"].tolist())]


def sink_rows(run_dir: Path) -> pd.DataFrame:
    """Every row of the Parquet files the sink's own log lists, read with pyarrow."""
    files = []
    logs = [p for p in (run_dir / "sink" / "_spark_metadata").iterdir() if p.name.split(".")[0].isdigit()]
    for log in sorted(logs, key=lambda p: int(p.name.split(".")[0])):
        for line in log.read_text().splitlines()[1:]:
            files.append(json.loads(line)["path"].removeprefix("file://"))
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True) if files else pd.DataFrame()


# -- no Spark run --------------------------------------------------------------------------------------------------
def test_unknown_query_exits_2_naming_spark_query(harness_env, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "stateful", "--out", str(tmp_path / "r"),
                           "--set", "spark.query=windowd_count"], env=harness_env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "stateful.toml: spark.query: unknown query 'windowd_count'" in proc.stderr
    assert "allowed: passthrough, windowed_count, dedup, sessions, collect_to_driver or 'package.module:function'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()


def test_unimportable_user_query_and_bad_params_exit_2(harness_env, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text((FIXTURES / "scenario.toml").read_text())
    proc = subprocess.run([sys.executable, "-m", "harness", "validate", str(scenario)], env=harness_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "spark.query: cannot import 'my_job:build'" in proc.stderr, proc.stderr
    (tmp_path / "my_job.py").write_text((FIXTURES / "my_job.py").read_text())  # next to the scenario: found
    proc = subprocess.run([sys.executable, "-m", "harness", "validate", str(scenario)], env=harness_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "harness", "validate", "stateful", "--set",
                           'spark.query_params.window="10s"'], env=harness_env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "spark.query_params: window: unknown unit 's'" in proc.stderr, proc.stderr


# -- the resend fault against the real broker ---------------------------------------------------------------------
def test_resend_puts_exact_copies_after_the_originals(kafka):
    """The dedup scenario's duplicates: read back from the broker with a plain consumer, every copy has its
    original's key and value, on the same partition, at a later offset; the fault's record says how many."""
    import time
    import uuid
    from types import SimpleNamespace

    from confluent_kafka import Consumer, Producer, TopicPartition

    from harness.backends.kafka.admin import client_config
    from harness.faults import FAULTS

    topic = f"resend-{uuid.uuid4().hex[:8]}"
    kafka.create_stream(topic, 3, {})
    producer = Producer(kafka.producer_settings())
    for i in range(90):
        producer.produce(topic, encode(0, i, T0_S + i / 10), f"k{i % 7}".encode(), i % 3)
    assert producer.flush(30) == 0
    fault = FAULTS["resend"](FAULTS["resend"].Options(kind="resend", at_s=0, records=10, partitions=[0, 2]))
    detail = fault.inject(SimpleNamespace(backend=kafka, stream=topic))
    assert detail["resent"] == 20 and detail["originals"] == {"0": [20, 30], "2": [20, 30]}
    assert detail["copies"] == {"0": [30, 40], "2": [30, 40]}
    assert not fault.effect.loss and fault.effect.failure is None

    consumer = Consumer(dict(client_config(kafka.bootstrap), **{"group.id": f"g-{uuid.uuid4().hex}"}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    records, deadline = [], time.time() + 60
    while len(records) < 110 and time.time() < deadline:
        records += [(m.partition(), m.offset(), m.key(), m.value()) for m in consumer.consume(500, timeout=1)]
    consumer.close()
    assert len(records) == 110 and kafka.end_offsets(topic) == {0: 40, 1: 30, 2: 40}
    by_pos = {(p, o): (k, v) for p, o, k, v in records}
    for p in (0, 2):
        for o in range(20, 30):
            assert by_pos[(p, o + 10)] == by_pos[(p, o)]  # same key and value, 10 offsets later


# -- real Spark, batch ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("window_ms", [10_000, 7_000])
def test_window_assignment_at_boundaries_matches_exact_arithmetic(spark, window_ms):
    """Events on, just before and just after window boundaries, encoded by the real producer encoder, through the
    real normalisation and the windowed_count query in Spark; each window's count against exact decimal arithmetic
    on the intended time's text (what the ack log holds), and the oracle's verdict on Spark's output."""
    from pyspark.sql import functions as F

    deltas_us = [0, 1, -1, 999, -999, 1000, -1000, 500, 250_000]
    values, texts = [], []
    seq = 0
    for k in range(1, 6):
        boundary_us = (T0_S * 1000 + k * window_ms) * 1000
        for d in deltas_us:
            value = encode(0, seq, (boundary_us + d) / 1_000_000)
            values.append((bytearray(value), seq % 3, seq, 1_795_000_000_000_000 + seq))
            texts.append(event_fields(value)[1])
            seq += 1
    boundary_texts = {f"{T0_S * 1000 + k * window_ms}.000" for k in range(1, 6)}
    assert boundary_texts <= set(texts)  # the encoder really wrote events exactly on the boundaries
    assert {f"{T0_S * 1000 + window_ms - 1}.999"} <= set(texts)  # and 1 us before one

    kafka_rows = spark.createDataFrame(values, "value BINARY, partition INT, offset LONG, ts_us LONG").select(
        "value", "partition", "offset", F.timestamp_micros("ts_us").alias("timestamp"),
        F.lit(None).cast("binary").alias("key"))  # Spark's Kafka source has a key column (null when unkeyed)
    params = {"window": f"{window_ms} milliseconds", "watermark": "5 seconds"}
    out = resolve("windowed_count").function(from_kafka(kafka_rows), params).toPandas()

    expected = Counter(exact_window(t, window_ms) for t in texts)
    got = {int(r.window_start_ms): int(r["count"]) for _, r in out.iterrows()}
    assert got == dict(expected)
    assert all(out["window_end_ms"] - out["window_start_ms"] == window_ms)

    acks = pd.read_csv(io.StringIO("intended_ms\n" + "\n".join(texts) + "\n"), dtype={"intended_ms": "float64"})
    verdict = window_counts(acks, out, window_ms, watermark_ms=max(expected) + window_ms)
    assert verdict["ok"] and verdict["windows_emitted"] == len(expected), verdict["detail"]


# -- real runs ----------------------------------------------------------------------------------------------------
@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget (crash-recovery stays in it)
def test_stateful_windowed_count_survives_a_driver_kill(harness_env, tmp_path):
    out = tmp_path / "stateful"
    proc, result = run_scenario(harness_env, out, "stateful", "producers.duration_s=20",
                                'checks.sustained_not_required="shortened to 20 s to test the kill"')
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["query"]["oracle"] == "window_counts" and result["query"]["kills"] == 1
    assert result["query"]["restarts"] == 1
    kills = [f["detail"] for f in result["faults"] if f["kind"] == "driver_kill"]
    assert len(kills) == 1 and kills[0]["inject_mid_batch"], kills
    # the batch the kill cut was run again after the restart and reported once
    progress = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [p["batchId"] for p in progress].count(kills[0]["inject_batch"]) == 1

    # the final counts, re-derived here from the raw ack logs and the sink's Parquet files
    window_ms = 5000
    texts = [t for t, err in ack_texts(out) if err == ""]
    truth = Counter(exact_window(t, window_ms) for t in texts)
    rows = sink_rows(out)
    starts = rows["window_start_ms"].astype("int64").tolist()
    assert len(starts) == len(set(starts))  # each window written once
    for start, count in zip(starts, rows["count"]):
        assert truth[start] == count, start
    oracle = result["oracle"]
    watermark = oracle["final_watermark_ms"]
    closed = {w for w in truth if w + window_ms <= watermark}
    assert closed == set(starts) and len(closed) >= 2
    assert oracle["ok"] and oracle["windows_emitted"] == len(starts)
    assert oracle["events_in_emitted_windows"] == sum(truth[w] for w in closed)
    assert oracle["events_acked"] == len(texts) == result["counts"]["acked"]
    # the watermark the oracle judged against is the one Spark itself reported last
    assert oracle["final_watermark"] == max(p["eventTime"]["watermark"] for p in progress if p.get("eventTime"))
    assert result["counts"]["lost"] == 0
    assert "## Oracle (window_counts): ok" in (out / "report.md").read_text()


@pytest.mark.slow
def test_dedup_drops_every_copy_an_upstream_resent(harness_env, tmp_path):
    out = tmp_path / "dedup"
    proc, result = run_scenario(harness_env, out, "dedup")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    resent = sum(f["detail"]["inject_resent"] for f in result["faults"] if f["kind"] == "resend")
    assert resent == 3 * 8 * 200
    # the copies are really in the topic: the broker holds acked + resent records
    assert sum(result["end_offsets"].values()) == result["counts"]["acked"] + resent
    c = result["counts"]
    assert c["duplicates"] == 0 and c["lost"] == 0 and c["delivered_unique"] == c["acked"] == c["sink_rows"]
    # and Spark itself says it dropped exactly that many as duplicates, none as late
    (state,) = result["batch_stats"]["state_operators"].values()
    assert state["dropped_duplicates"] == resent and state["dropped_by_watermark"] == 0


@pytest.mark.slow
def test_resent_copies_are_duplicates_for_a_query_that_does_not_dedup(harness_env, tmp_path):
    """The control: the same input through passthrough fails on exactly the copies the upstream re-sent."""
    out = tmp_path / "control"
    proc, result = run_scenario(harness_env, out, "dedup", "spark.query=passthrough", "spark.query_params={}")
    resent = sum(f["detail"]["inject_resent"] for f in result["faults"] if f["kind"] == "resend")
    assert proc.returncode == 1 and result["verdict"] == "fail"
    assert result["counts"]["duplicates"] == resent > 0
    failed = {c["name"] for c in result["checks"] if not c["ok"]}
    assert failed == {"no_duplicates"}, result["checks"]


@pytest.mark.slow
def test_a_users_query_module_next_to_its_scenario(harness_env, tmp_path):
    out = tmp_path / "user"
    proc, result = run_scenario(harness_env, out, str(FIXTURES / "scenario.toml"))
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["query"]["name"] == "my_job:build" and result["query"]["oracle"] == "my_job:sampled_exactly"
    acks = load_acks(out / "producers")
    acked = acks[acks["error"] == ""]["seq"].astype(int)
    rows = sink_rows(out)
    assert len(rows) == int((acked % 3 == 0).sum()) == result["oracle"]["expected"] > 0
    assert sorted(rows["seq"]) == sorted(acked[acked % 3 == 0])
    assert (rows["tag"] == "r" + (rows["seq"] % 7).astype(str)).all()  # the module's UDF ran in the workers
    assert any(c["name"] == "oracle_sampled_exactly" and c["ok"] for c in result["checks"])
