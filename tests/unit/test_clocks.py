"""Clock skew between producer machines: the NTP-style estimate on hand-made exchanges, the per-machine plan read
from gathered directories, the correction of the history, and negative latencies counted from the sink."""
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import clocks
from harness.clocks import Exchange, estimate
from harness.records.history import AckWriter


def test_estimate_takes_the_tightest_exchange_and_bounds_it_by_half_its_round_trip():
    # producer clock = reference + 2 s. First exchange: 30 ms round trip, the master answered 10 ms after the send
    # (ref 98.010 = producer 100.010): midpoint 100.015 - 98.010 = 2.005 s, bound 15 ms.
    # Second: 4 ms round trip, answered 1.5 ms after the send: midpoint 105.002 - 103.0015 = 2.0005 s, bound 2 ms.
    est = estimate([Exchange(100.000, 98.010, 100.030), Exchange(105.000, 103.0015, 105.004)])
    assert est.offset_ms == pytest.approx(2000.5)
    assert est.uncertainty_ms == pytest.approx(2.0)
    assert est.samples == 2
    assert est.drift_ms == pytest.approx(2000.5 - 2005.0)  # last tenth's best minus first tenth's best
    assert est.consistent  # 2.0005 lies in [2.0, 2.03] and in [1.9985, 2.0025]


def test_estimate_flags_exchanges_that_cannot_share_one_offset():
    # the second exchange's interval [3.0, 3.001] excludes the first's estimate (1.0005): the clock moved
    est = estimate([Exchange(10.0, 9.0, 10.001), Exchange(20.0, 17.0, 20.002)])
    assert est.offset_ms == pytest.approx(1000.5)
    assert not est.consistent


def test_estimate_without_exchanges_is_unmeasured():
    est = estimate([])
    assert est.offset_ms is None and est.uncertainty_ms is None and est.samples == 0


def _machine(directory, machine, producer, exchanges, intended_ms):
    directory.mkdir(parents=True)
    (directory / clocks.MACHINE_FILE).write_text(json.dumps({"machine": machine, "index": producer}))
    log = clocks.ClockLog(directory / f"clock-{producer}.jsonl")
    for e in exchanges:
        log.add(*e)
    writer = AckWriter(directory / f"acks-{producer}.arrows", producer)
    n = len(intended_ms)
    writer.append(np.arange(n), 0, np.arange(n), np.asarray(intended_ms, dtype=float),
                  np.asarray(intended_ms, dtype=float) + 5.0, np.full(n, 5000))
    writer.close()


def _sink(sink, commit_s, rows):
    """A one-batch Parquet file sink as Spark's file sink leaves it: the data file and its _spark_metadata entry,
    whose modification time is the batch's commit."""
    (sink / "_spark_metadata").mkdir(parents=True)
    path = sink / "part-0.parquet"
    pq.write_table(pa.table({"producer": pa.array([r[0] for r in rows], pa.int32()),
                             "seq": pa.array(range(len(rows)), pa.int64()),
                             "intended_ms": pa.array([r[1] for r in rows], pa.float64())}), path)
    log = sink / "_spark_metadata" / "0"
    log.write_text("v1\n" + json.dumps({"path": f"file://{path}", "action": "add"}) + "\n")
    os.utime(log, (commit_s, commit_s))


def test_plan_corrects_the_machine_beyond_the_threshold_and_counts_negative_latencies(tmp_path):
    producers = tmp_path / "producers"
    # machine a: in step with the reference (offset 0.5 ms ± 1 ms); machine b: 3 s ahead (± 1 ms)
    _machine(producers / "a-1", "host-a-1", 0, [(50.0, 49.9995, 50.002)], [1_000_000.0, 1_000_100.0])
    _machine(producers / "b-2", "host-b-2", 1, [(53.0, 50.0, 53.002)], [1_003_000.0, 1_003_400.0])
    plan = clocks.plan(producers, threshold_ms=10.0)
    by = {m.machine: m for m in plan.machines}
    assert by["host-a-1"].offset_ms == pytest.approx(1.5) and not by["host-a-1"].corrected
    assert by["host-b-2"].offset_ms == pytest.approx(3001.0) and by["host-b-2"].corrected
    assert by["host-b-2"].uncertainty_ms == pytest.approx(1.0) and by["host-b-2"].producers == [1]
    assert plan.shift_ms() == {1: pytest.approx(3001.0)}

    batches = list(clocks.corrected_batches(producers, plan))
    table = pa.Table.from_batches(batches).to_pydict()
    got = sorted(zip(table["producer"], table["intended_ms"], table["ack_ms"]))
    assert got == [(0, 1_000_000.0, 1_000_005.0), (0, 1_000_100.0, 1_000_105.0),
                   (1, pytest.approx(999_999.0), pytest.approx(1_000_004.0)),
                   (1, pytest.approx(1_000_399.0), pytest.approx(1_000_404.0))]

    # the batch committed at 1,000,200 ms on the reference clock: b's events look sent in its future (-2,800 and
    # -3,200 ms as sent); corrected by 3,001 ms they are 201 and -199 ms: the second is still negative
    _sink(tmp_path / "sink", 1_000.2, [(0, 1_000_000.0), (0, 1_000_100.0), (1, 1_003_000.0), (1, 1_003_400.0)])
    clocks.count_negative_latencies(tmp_path / "sink", plan)
    assert (by["host-a-1"].delivered, by["host-a-1"].negative_latencies) == (2, 0)
    assert (by["host-b-2"].delivered, by["host-b-2"].negative_latencies, by["host-b-2"].negative_after_correction) \
        == (2, 2, 1)
    section = clocks.section(plan)
    assert section["corrected"] == ["host-b-2"]
    assert not section["latency_judged"] and "host-b-2 (1 after correcting it" in section["latency_not_judged_reason"]


def test_an_unmeasured_machine_with_negative_latencies_leaves_latency_not_judged(tmp_path):
    producers = tmp_path / "producers"
    _machine(producers / "c-3", "host-c-3", 2, [], [2_000_500.0])
    plan = clocks.plan(producers)
    assert plan.machines[0].offset_ms is None and not plan.machines[0].corrected
    assert plan.shift_ms() == {}
    _sink(tmp_path / "sink", 2_000.0, [(2, 2_000_500.0)])
    clocks.count_negative_latencies(tmp_path / "sink", plan)
    section = clocks.section(plan)
    assert plan.machines[0].negative_latencies == 1
    assert not section["latency_judged"] and "never measured" in section["latency_not_judged_reason"]


def test_wall_clock_is_shifted_only_when_a_test_asks(monkeypatch):
    import time

    monkeypatch.delenv(clocks.TEST_OFFSET_ENV, raising=False)
    assert clocks.wall_clock() is time.time
    monkeypatch.setenv(clocks.TEST_OFFSET_ENV, "20")
    assert clocks.wall_clock()() - time.time() == pytest.approx(20.0, abs=0.5)


def test_one_producer_gathered_twice_is_refused_with_both_places(tmp_path):
    producers = tmp_path / "producers"
    _machine(producers / "a-1", "host-a-1", 0, [], [1.0])
    _machine(producers / "b-2", "host-b-2", 0, [], [1.0])
    with pytest.raises(ValueError, match=r"producer 0 has ack logs in both .*a-1 and .*b-2"):
        clocks.plan(producers)


def test_a_faults_own_history_at_the_top_is_the_runners_and_collides_with_no_worker(tmp_path):
    producers = tmp_path / "producers"
    _machine(producers / "a-1", "host-a-1", 0, [(50.0, 49.0, 50.002)], [1.0])
    writer = AckWriter(producers / "acks-fault-0.arrows", 10_000)  # what resend writes: producer 10,000
    writer.append(np.arange(1), 0, np.arange(1), np.ones(1), np.ones(1), np.zeros(1))
    writer.close()
    plan = clocks.plan(producers)
    by = {m.directory: m for m in plan.machines}
    assert by["."].producers == [] and by["."].offset_ms == 0.0 and not by["."].corrected
    assert by["a-1"].producers == [0] and by["a-1"].corrected


def test_per_second_rows_of_a_machine_ahead_are_merged_into_the_runs_seconds(tmp_path):
    from harness.producers.fleet import ProducerFleet

    def row(t, n):
        return json.dumps({"t": t, "due": n, "sent": n, "acked": n, "failed": 0, "buffer_full": 0, "errors": {}})

    for name, rows in (("a-1", [row(100, 5), row(101, 6)]), ("b-2", [row(400, 7), row(401, 8)])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "stats-0.jsonl").write_text("\n".join(rows) + "\n")
    fleet = ProducerFleet(tmp_path, None, {"processes": 2})
    merged = fleet.per_second({"b-2": 300})  # b's clock 300 s ahead: its second 400 is the run's 100
    assert [(r["t"], r["sent"]) for r in merged] == [(100, 12), (101, 14)]
    assert [(r["t"], r["sent"]) for r in fleet.per_second()] == [(100, 5), (101, 6), (400, 7), (401, 8)]
