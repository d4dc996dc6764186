"""The DuckDB checker engine against the pandas checker it replaced (harness/bench/reference_checker.py, copied verbatim):
random histories with every defect the checker counts, fed whole or in increments with reconciles in between,
must give identical counts and identical HdrHistogram percentiles."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from hdrh.histogram import HdrHistogram
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.bench import reference_checker as ref
from reference_windows import latency_windows
from harness.reconcile import Expectations, Reconciler, reconcile
from harness.records.placements import apply_placements
from harness.reconcile.store import bucket_sql
from harness.effects import LossRange
from harness.records.histsummary import Hist, bucket_us
from harness.records.history import ACK_SCHEMA, ack_batches, load_acks
from harness.sinks.parquet.files import read_sink

ACK_COLS = ["producer", "seq", "partition", "offset", "intended_ms", "produce_ms", "ack_ms", "error"]
SINK_COLS = ["producer", "seq", "partition", "offset", "intended_ms", "commit_ms"]


@st.composite
def histories(draw):
    """Acks (some failed, some without offset or partition), a sink in batches (losses, duplicates committed
    later, earlier or in the same batch, misplaced and reordered rows, rows nobody acked), placements, and what
    faults declared (loss ranges, failure windows, read_up_to, generations)."""
    n = draw(st.integers(0, 30))
    parts = draw(st.integers(1, 3))
    next_off = [0] * parts
    acks, events = [], []
    for i in range(n):
        producer = draw(st.integers(0, 2))
        seq = i  # unique per producer too
        part = draw(st.integers(0, parts - 1))
        off = next_off[part]
        next_off[part] += 1
        intended = 1000.0 + draw(st.integers(0, 40)) * 50.0 + draw(st.sampled_from([0.0, 0.25, 0.5, 0.0004]))
        produce = intended + draw(st.integers(0, 300)) / 7.0
        ack = produce + draw(st.integers(0, 200)) / 3.0
        error = draw(st.sampled_from(["", "", "", "", "", "_MSG_TIMED_OUT"]))
        shown_part = -1 if draw(st.integers(0, 9)) == 0 else part
        shown_off = -1 if error or draw(st.integers(0, 6)) == 0 else off
        acks.append([producer, seq, shown_part, shown_off, intended, produce, ack, error])
        events.append((producer, seq, part, off, intended))
    batches = draw(st.integers(1, 6))
    commits = [2000.0 + 100.0 * b + draw(st.sampled_from([0.0, 0.0, -150.0, 33.3])) for b in range(batches)]
    per_batch: list[list[list]] = [[] for _ in range(batches)]
    for producer, seq, part, off, intended in events:
        fate = draw(st.sampled_from(["once"] * 3 + ["lost", "dup", "dup", "misplaced", "swap"]))
        if fate == "lost":
            continue
        b = draw(st.integers(0, batches - 1))
        at_part, at_off = part, off
        if fate == "misplaced":
            at_part, at_off = draw(st.sampled_from([(part, off + 100), ((part + 1) % (parts + 1), off)]))
        if fate == "swap":  # reordered: anywhere in its partition
            at_off = draw(st.integers(0, max(next_off[part] - 1, 0)))
        per_batch[b].append([producer, seq, at_part, at_off, intended])
        if fate == "dup":
            again = draw(st.integers(0, batches - 1))
            at_part, at_off = draw(st.sampled_from([(part, off), (part, off + 1), ((part + 1) % parts, off)]))
            per_batch[again].append([producer, seq, at_part, at_off, intended])
    for _ in range(draw(st.integers(0, 2))):  # rows nobody acked
        per_batch[draw(st.integers(0, batches - 1))].append([5, draw(st.integers(0, 5)), 0, 99, 1000.0])
    for rows in per_batch:
        order = draw(st.permutations(range(len(rows))))
        rows[:] = [rows[k] for k in order]
    placements = [[p, s, part, off] for p, s, part, off, _ in events if draw(st.integers(0, 3)) == 0]
    expected = Expectations(
        loss=[LossRange(draw(st.integers(0, parts - 1)), lo := draw(st.integers(0, 10)), lo + draw(st.integers(0, 8)),
                        draw(st.sampled_from([None, None, 1500.0, 2500.0])))
              for _ in range(draw(st.integers(0, 2)))],
        failure_windows_ms=[(lo := 1000.0 + draw(st.integers(0, 30)) * 50.0, lo + draw(st.integers(0, 800)))
                            for _ in range(draw(st.integers(0, 2)))],
        read_up_to=draw(st.one_of(st.none(), st.dictionaries(st.integers(0, parts - 1), st.integers(0, 12)))),
        generations_ms=sorted(draw(st.lists(st.sampled_from([1400.0, 1800.0, 2200.0]), max_size=2, unique=True))),
    )
    measured_from = draw(st.sampled_from([None, 1500.0, 1800.25]))
    return acks, per_batch, commits, placements, expected, measured_from


def frames(acks, per_batch, commits):
    a = pd.DataFrame(acks, columns=ACK_COLS).astype({"error": "string"})
    rows = [r + [commits[b]] for b, batch in enumerate(per_batch) for r in batch]
    s = pd.DataFrame(rows, columns=SINK_COLS).astype({"producer": "int64", "seq": "int64", "partition": "int64",
                                                      "offset": "int64", "intended_ms": "float64",
                                                      "commit_ms": "float64"})
    return a, s


def placements_frame(placements):
    return pd.DataFrame(placements, columns=["producer", "seq", "partition", "offset"], dtype="int64")


def assert_same(rec, want, measured_from=None):
    assert rec.counts() == want.counts()
    assert rec.lost_by_partition == want.lost_by_partition
    assert rec.expected_lost_by_partition == want.expected_lost_by_partition
    measured = (np.ones(len(want.latency_ms), dtype=bool) if measured_from is None
                else want.delivered_intended_ms >= measured_from)
    assert rec.latency.latency.percentiles() == ref.percentiles_ms(want.latency_ms[measured])
    assert rec.latency.publish_delay.percentiles() == ref.percentiles_ms(want.publish_delay_ms[measured])
    if measured_from is not None:
        assert rec.latency.warmup_delivered == int((~measured).sum())
        assert rec.latency.warmup_latency.percentiles() == ref.percentiles_ms(want.latency_ms[~measured])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_the_engine_gives_the_reference_verdict(history):
    acks, per_batch, commits, placements, expected, measured_from = history
    a, s = frames(acks, per_batch, commits)
    pl = placements_frame(placements)
    want = ref.reconcile(apply_placements(a, pl), s, expected)
    with Reconciler(threads=1) as checker:  # a few rows: one thread is faster, same verdict
        checker.store.add_acks_frame(a)
        checker.store.add_sink_frame(s)
        checker.set_placements(pl)
        assert_same(checker.reconcile(expected, measured_from_ms=measured_from), want, measured_from)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.data())
def test_incremental_reconciles_give_the_reference_verdict_at_every_step(history, data):
    """Acks and sink batches arrive in pieces with reconciles in between (now and then under other generations,
    which re-sorts the order state): the state carried across them (pending sides, first deliveries, order
    tails) gives at every step the verdict a single pass over what has arrived so far gives."""
    acks, per_batch, commits, placements, expected, measured_from = history
    a, s = frames(acks, per_batch, commits)
    pl = placements_frame(placements)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(a)), max_size=3)))
    pieces = [a.iloc[lo:hi] for lo, hi in zip([0] + cuts, cuts + [len(a)])]
    seen_acks, seen_sink = a.iloc[0:0], s.iloc[0:0]
    with Reconciler(threads=1) as checker:  # a few rows: one thread is faster, same verdict
        checker.set_placements(pl)
        for b, batch in enumerate(per_batch + [[]]):
            if pieces and (b == len(per_batch) or data.draw(st.booleans())):
                for piece in (pieces if b == len(per_batch) else pieces[:1]):
                    checker.store.add_acks_frame(piece)
                    seen_acks = pd.concat([seen_acks, piece], ignore_index=True)
                pieces = [] if b == len(per_batch) else pieces[1:]
            rows = pd.DataFrame([r + [commits[b]] for r in batch], columns=SINK_COLS).astype(s.dtypes.to_dict())
            checker.store.add_sink_frame(rows)
            seen_sink = pd.concat([seen_sink, rows], ignore_index=True)
            if b == len(per_batch) or data.draw(st.booleans()):
                now = expected if b == len(per_batch) or data.draw(st.integers(0, 3)) else Expectations(
                    loss=expected.loss, failure_windows_ms=expected.failure_windows_ms,
                    read_up_to=expected.read_up_to, generations_ms=[1600.0])
                want = ref.reconcile(apply_placements(seen_acks, pl), seen_sink, now)
                assert_same(checker.reconcile(now, measured_from_ms=measured_from), want, measured_from)


def test_windows_and_seconds_match_the_arrays_they_replace():
    """Per-window and per-second figures split the events exactly as the array versions did, each split's
    percentiles those of an HdrHistogram of its events."""
    rng = np.random.default_rng(7)
    n = 500
    intended = 1_700_000_000_000.0 + np.sort(rng.uniform(0, 20_000, n))
    latency = rng.lognormal(5, 1, n)
    a = pd.DataFrame({"producer": 0, "seq": np.arange(n), "partition": 0, "offset": np.arange(n),
                      "intended_ms": intended, "produce_ms": intended + 1.0, "ack_ms": intended + 2.0,
                      "error": ""}).astype({"error": "string"})
    s = pd.DataFrame({"producer": 0, "seq": np.arange(n), "partition": 0, "offset": np.arange(n),
                      "intended_ms": intended, "commit_ms": intended + latency})
    want = ref.reconcile(a, s)
    measured_from = 1_700_000_003_000.5
    rec = reconcile(a, s, measured_from_ms=measured_from, t0=1_700_000_000.0)
    m = want.delivered_intended_ms >= measured_from
    old = latency_windows(want.latency_ms[m], want.delivered_intended_ms[m])
    assert [(w["from_ms"], w["n"]) for w in rec.latency.windows] == [(w["from_ms"], w["n"]) for w in old]
    edges = [w["from_ms"] for w in old] + [float(want.delivered_intended_ms[m].max()) + 1]
    for w, lo, hi in zip(rec.latency.windows, edges, edges[1:]):
        inside = (want.delivered_intended_ms[m] >= lo) & (want.delivered_intended_ms[m] < hi)
        p = ref.percentiles_ms(want.latency_ms[m][inside])
        assert (w["p50"], w["p90"], w["p99"], w["max"]) == (p["p50"], p["p90"], p["p99"], p["max"])
    sec = rec.latency.per_second
    seconds = np.floor(want.delivered_intended_ms / 1000.0 - 1_700_000_000.0).astype(int)
    assert sorted(set(sec["s"].tolist())) == sorted(set(seconds.tolist()))
    for t in set(seconds.tolist()):
        got = sec["n"][sec["s"] == t].sum()
        assert got == (seconds == t).sum()


def test_the_bucket_is_hdrhistograms_lowest_equivalent_value():
    """SQL and numpy bucket values agree with HdrHistogram itself, around every power of two up to an hour."""
    hist = HdrHistogram(1, 3_600_000_000, 3)
    us = sorted({max(1, (1 << k) + d) for k in range(33) for d in (-3, -1, 0, 1, 5)} | {3_600_000_000, 1234567})
    us = [u for u in us if u <= 3_600_000_000]
    want = [hist.get_lowest_equivalent_value(u) for u in us]
    ms = np.array(us, dtype=float) / 1000.0
    assert bucket_us(ms).tolist() == want
    import duckdb

    con = duckdb.connect()
    con.register("v", pd.DataFrame({"ms": ms}))
    assert [r[0] for r in con.execute(f"SELECT {bucket_sql('ms')} FROM v").fetchall()] == want


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-5.0, 4_000_000_000.0 / 1000.0 * 1.2, allow_nan=False), max_size=300))
def test_histogram_percentiles_are_hdrhistograms(values):
    assert Hist.from_ms(np.array(values)).percentiles() == ref.percentiles_ms(np.array(values))


def test_settled_before_keeps_recent_acks_and_deliveries_unjudged():
    """An ack at or after the settle time whose event is not in the sink yet is pending, not lost; a delivery
    committed at or after it whose ack is not flushed yet is not unacked."""
    a = pd.DataFrame([[0, i, 0, i, 1000.0, 1001.0, ack, ""] for i, ack in enumerate([1005.0, 5000.0, 6000.0])],
                     columns=ACK_COLS).astype({"error": "string"})
    s = pd.DataFrame([[0, 0, 0, 0, 1000.0, 1500.0], [1, 0, 0, 9, 1000.0, 1600.0], [1, 1, 0, 10, 1000.0, 7000.0]],
                     columns=SINK_COLS)
    with Reconciler() as checker:
        checker.store.add_acks_frame(a)
        checker.store.add_sink_frame(s)
        live = checker.reconcile(settled_before_ms=5500.0)
        assert (live.lost, live.pending, live.delivered_unacked) == (1, 1, 1)
        final = checker.reconcile()
        assert (final.lost, final.pending, final.delivered_unacked) == (2, 0, 2)


def _write_history(directory, rows, per_file=2):
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=ACK_SCHEMA)
    with ipc.new_stream(str(directory / "acks-0.arrows"), ACK_SCHEMA) as writer:
        for batch in table.to_batches(max_chunksize=per_file):
            writer.write_batch(batch)


def _write_sink_batch(sink, batch_id, rows):
    (sink / "_spark_metadata").mkdir(parents=True, exist_ok=True)
    path = sink / f"part-{batch_id}.parquet"
    pq.write_table(pa.table({"producer": pa.array([r[0] for r in rows], pa.int32()),
                             "seq": pa.array([r[1] for r in rows], pa.int64()),
                             "intended_ms": pa.array([r[2] for r in rows], pa.float64()),
                             "partition": pa.array([r[3] for r in rows], pa.int32()),
                             "offset": pa.array([r[4] for r in rows], pa.int64())}), path)
    (sink / "_spark_metadata" / str(batch_id)).write_text(
        "v1\n" + json.dumps({"path": f"file://{path}", "size": 1, "isDir": False, "modificationTime": 0,
                             "blockReplication": 1, "blockSize": 1, "action": "add"}) + "\n")


def test_a_run_directory_read_as_it_grows(tmp_path):
    """Arrow history files and a Parquet sink with its _spark_metadata log, added batch by batch as a soak does,
    against the reference on the same files read whole."""
    rows = [{"producer": 0, "seq": i, "partition": i % 2, "offset": i // 2, "intended_ms": 1000.0 + i,
             "ack_ms": 1010.0 + i, "latency_us": 3000 + i, "error": "" if i != 4 else "_MSG_TIMED_OUT"}
            for i in range(8)]
    _write_history(tmp_path / "producers", rows)
    sink = tmp_path / "sink"
    with Reconciler(tmp_path / "state") as checker:
        checker.add_acks(ack_batches(tmp_path / "producers"))
        _write_sink_batch(sink, 0, [(0, i, 1000.0 + i, i % 2, i // 2) for i in (0, 1, 2)])
        assert checker.add_sink(sink) == 3
        assert checker.reconcile().lost == 4  # 3, 5, 6, 7 not yet shown (4 failed)
        _write_sink_batch(sink, 1, [(0, i, 1000.0 + i, i % 2, i // 2) for i in (2, 3, 5, 6)])
        assert checker.add_sink(sink) == 4  # batch 0 is not read again
        rec = checker.reconcile()
    want = ref.reconcile(load_acks(tmp_path / "producers"), read_sink(sink))
    assert rec.counts() == want.counts() and rec.lost_by_partition == want.lost_by_partition == {1: 1}
    assert rec.latency.latency.percentiles() == ref.percentiles_ms(want.latency_ms)
    assert rec.latency.publish_delay.percentiles() == ref.percentiles_ms(want.publish_delay_ms)


def _acks(rows):
    return pd.DataFrame([[0, s, 0, off, 1000.0, 1001.0, 1005.0, ""] for s, off in rows],
                        columns=ACK_COLS).astype({"error": "string"})


def _sink(rows, commit):
    return pd.DataFrame([[0, s, 0, off, 1000.0, commit] for s, off in rows], columns=SINK_COLS)


def test_a_delivery_landing_before_a_groups_tail_resorts_the_group():
    """Seq 5 at offset 0 and seq 6 at offset 3 are in order; seq 1 arriving later at offset 1 sits after seq 5:
    one violation (appending it after the tail alone would see seq 1 before seq 6 and count none)."""
    with Reconciler() as checker:
        checker.store.add_acks_frame(_acks([(1, 1), (5, 0), (6, 3)]))
        checker.store.add_sink_frame(_sink([(5, 0), (6, 3)], 2000.0))
        assert checker.reconcile().order_violations == 0
        checker.store.add_sink_frame(_sink([(1, 1)], 2100.0))
        assert checker.reconcile().order_violations == 1


def test_a_duplicate_committed_earlier_becomes_the_first_delivery():
    """A later batch whose commit time is earlier (a clock step) holds the first delivery: its position and
    commit time are the ones judged, the other row the duplicate."""
    with Reconciler() as checker:
        checker.store.add_acks_frame(_acks([(0, 0)]))
        checker.store.add_sink_frame(_sink([(0, 0)], 2000.0))
        first = checker.reconcile()
        assert (first.misplaced, first.duplicates, first.latency.latency.percentiles()["max"]) == (0, 0, pytest.approx(1000.0, rel=1e-3))
        checker.store.add_sink_frame(_sink([(0, 5)], 1900.0))
        rec = checker.reconcile()
        assert (rec.misplaced, rec.duplicates, rec.delivered_unique) == (1, 1, 1)
        assert rec.latency.latency.percentiles()["max"] == pytest.approx(900.0, rel=1e-3)


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(histories(), st.data())
def test_key_ranges_of_a_few_rows_give_the_same_verdicts(monkeypatch, history, data):
    """Large histories are joined, grouped and re-sorted a key range (and a partition) at a time: with ranges
    of two rows every path through the ranges is taken."""
    import harness.reconcile.store

    monkeypatch.setattr(harness.reconcile.store, "RANGE_ROWS", 2)
    test_incremental_reconciles_give_the_reference_verdict_at_every_step.hypothesis.inner_test(history, data)


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(histories(), st.data())
def test_a_bulk_pass_over_many_runs_and_ranges_gives_the_reference_verdict(monkeypatch, history, data):
    """The first reconcile is one pass over sorted runs on disk, a few key ranges at a time on two threads: with
    runs of four rows, ranges of three and the acks in any order (producers' files interleaved), every path
    through runs, ranges, order tails across ranges and re-sorted groups is taken."""
    import harness.reconcile.store

    monkeypatch.setattr(harness.reconcile.store, "CHUNK_ROWS", 4)
    monkeypatch.setattr(harness.reconcile.store, "RANGE_ROWS", 3)
    acks, per_batch, commits, placements, expected, measured_from = history
    acks = [acks[i] for i in data.draw(st.permutations(range(len(acks))))]
    a, s = frames(acks, per_batch, commits)
    pl = placements_frame(placements)
    want = ref.reconcile(apply_placements(a, pl), s, expected)
    with Reconciler(threads=2) as checker:
        for lo in range(0, len(a), 5):  # ack batches as a producer flushes them
            checker.store.add_acks_frame(a.iloc[lo:lo + 5])
        start = 0
        for batch in per_batch:  # frames() lists the sink rows batch by batch
            checker.store.add_sink_frame(s.iloc[start:start + len(batch)])
            start += len(batch)
        checker.set_placements(pl)
        assert_same(checker.reconcile(expected, measured_from_ms=measured_from), want, measured_from)


@pytest.mark.parametrize("chunk_rows,range_rows", [(1, 2), (2, 3), (3, 5), (100, 100)])
def test_a_bulk_pass_counts_order_within_and_across_its_ranges(monkeypatch, chunk_rows, range_rows):
    """Hand-made: seq 2 shown before seq 1 in its partition (one violation, inside whichever range holds both),
    producer 1's seq 4 at an offset below seq 3's and its seq 6 delivered again earlier by a clock step at offset
    99 (the earlier commit counts: misplaced, and out of order), producer 0's seq 5 delivered twice in one batch (the
    first row counts: in place); two producers' histories interleaved."""
    import harness.reconcile.store

    monkeypatch.setattr(harness.reconcile.store, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(harness.reconcile.store, "RANGE_ROWS", range_rows)
    a = pd.DataFrame([[p, s, 0, 10 * p + s, 1000.0 + s, 1001.0 + s, 1002.0 + s, ""] for s in range(8) for p in (0, 1)],
                     columns=ACK_COLS).astype({"error": "string"})
    rows = [[p, s, 0, 10 * p + s, 1000.0 + s] for p in (0, 1) for s in range(8)]
    rows[1][3], rows[2][3] = 2, 1  # producer 0: seq 1 at offset 2, seq 2 at offset 1
    rows[8 + 4][3] = 12  # producer 1: seq 4 at offset 12, below seq 3's 13
    s = pd.DataFrame([r + [2000.0] for r in rows] + [[0, 5, 0, 9, 1005.0, 2000.0], [1, 6, 0, 99, 1006.0, 1500.0]],
                     columns=SINK_COLS)
    want = ref.reconcile(a, s)
    # misplaced: producer 0's seq 1 and 2, producer 1's seq 4 and 6; order: producer 0 reads seq 0, 2, 1 (one),
    # producer 1 reads 0, 1, 2, 4, 3 (offset 12 holds 2 then 4, ack order), 5, 7, 6 (two)
    assert (want.order_violations, want.misplaced, want.duplicates) == (3, 4, 2)
    with Reconciler(threads=2) as checker:
        checker.store.add_acks_frame(a)
        checker.store.add_sink_frame(s.iloc[:16])
        checker.store.add_sink_frame(s.iloc[16:])
        assert_same(checker.reconcile(), want)


def test_latency_spans_when_the_first_and_last_acked_events_were_never_delivered():
    """A bulk pass counts the latency spans on the acks' extent of intended time; the first and the last acked
    events lost, the delivered events' extent is narrower and the spans are counted again on it: the same spans
    as the reference's events give."""
    n = 400
    intended = 1_700_000_000_000.0 + np.arange(n) * 37.5
    latency = 100.0 + (np.arange(n) * 7919 % 1000)
    a = pd.DataFrame({"producer": 0, "seq": np.arange(n), "partition": 0, "offset": np.arange(n),
                      "intended_ms": intended, "produce_ms": intended + 1.0, "ack_ms": intended + 2.0,
                      "error": ""}).astype({"error": "string"})
    shown = np.arange(1, n - 1)
    s = pd.DataFrame({"producer": 0, "seq": shown, "partition": 0, "offset": shown, "intended_ms": intended[shown],
                      "commit_ms": intended[shown] + latency[shown]})
    want = ref.reconcile(a, s)
    rec = reconcile(a, s, t0=1_700_000_000.0)
    old = latency_windows(want.latency_ms, want.delivered_intended_ms)
    assert old[0]["from_ms"] == intended[1]  # the delivered events' extent, not the acks'
    assert [(w["from_ms"], w["n"]) for w in rec.latency.windows] == [(w["from_ms"], w["n"]) for w in old]
    edges = [w["from_ms"] for w in old] + [float(intended[n - 2]) + 1]
    for w, lo, hi in zip(rec.latency.windows, edges, edges[1:]):
        inside = (want.delivered_intended_ms >= lo) & (want.delivered_intended_ms < hi)
        p = ref.percentiles_ms(want.latency_ms[inside])
        assert (w["p50"], w["p90"], w["p99"], w["max"]) == (p["p50"], p["p90"], p["p99"], p["max"])


def test_a_batch_of_several_files_keeps_the_sink_logs_order(tmp_path):
    """One sink batch of three files (read on two threads): a key written in the first and the third file, in one
    commit, is first delivered by the first file's row (the sink log's order), so the event is in place and the
    other row a duplicate; batches after it keep their own rows."""
    rows = [{"producer": 0, "seq": i, "partition": 0, "offset": i, "intended_ms": 1000.0 + i, "ack_ms": 1010.0 + i,
             "latency_us": 3000, "error": ""} for i in range(6)]
    _write_history(tmp_path / "producers", rows)
    sink = tmp_path / "sink"
    (sink / "_spark_metadata").mkdir(parents=True)
    parts = [[(0, 0, 1000.0, 0, 0), (0, 1, 1001.0, 0, 1)], [(0, 2, 1002.0, 0, 2)], [(0, 0, 1000.0, 0, 7)]]
    entries = []
    for k, part in enumerate(parts):
        path = sink / f"part-0-{k}.parquet"
        pq.write_table(pa.table({"producer": pa.array([r[0] for r in part], pa.int32()),
                                 "seq": pa.array([r[1] for r in part], pa.int64()),
                                 "intended_ms": pa.array([r[2] for r in part], pa.float64()),
                                 "partition": pa.array([r[3] for r in part], pa.int32()),
                                 "offset": pa.array([r[4] for r in part], pa.int64())}), path)
        entries.append(json.dumps({"path": f"file://{path}", "size": 1, "isDir": False, "modificationTime": 0,
                                   "blockReplication": 1, "blockSize": 1, "action": "add"}))
    (sink / "_spark_metadata" / "0").write_text("v1\n" + "\n".join(entries) + "\n")
    _write_sink_batch(sink, 1, [(0, i, 1000.0 + i, 0, i) for i in (3, 4, 5)])
    with Reconciler(tmp_path / "state", threads=2) as checker:
        checker.add_acks(ack_batches(tmp_path / "producers"))
        assert checker.add_sink(sink) == 7
        rec = checker.reconcile()
    want = ref.reconcile(load_acks(tmp_path / "producers"), read_sink(sink))
    assert rec.counts() == want.counts()
    assert (rec.misplaced, rec.duplicates, rec.delivered_unique, rec.lost) == (0, 1, 6, 0)
