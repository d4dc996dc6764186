"""The oracles of examples/jobs/ (a user's dedup job, stream-stream join and foreachBatch upsert) on hand-made
histories and outputs whose right verdict is worked out by hand in each test: a missing pair, a duplicate, a late
event, a batch written twice. Also the query contract's hooks they rely on: a query owning its sink must bring
both its writer and its reader, and a four-parameter oracle gets the run's facts."""
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.files.jsonl import append_jsonl
from harness.oracles import RunFacts, run_oracle
from harness.queries import QueryError, resolve

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"
for name in ("dedup", "join", "upsert"):
    sys.path.insert(0, str(JOBS / name))

import dedup_oracle  # noqa: E402
import join_oracle  # noqa: E402
import upsert_job  # noqa: E402
import upsert_oracle  # noqa: E402


def acks(rows: list[tuple]) -> pd.DataFrame:
    """Acked events (producer, seq, partition, offset, intended_ms), as the harness hands them to an oracle."""
    return pd.DataFrame(rows, columns=["producer", "seq", "partition", "offset", "intended_ms"]).assign(error="")


# -- dedup: every acked id exactly once --------------------------------------------------------------------------
DEDUP_ACKS = acks([(0, 0, 1, 10, 1000.0), (0, 1, 2, 20, 1001.0), (1, 0, 1, 11, 1000.5)])


def dedup_sink(rows):
    return pd.DataFrame(rows, columns=["producer", "seq", "offset"]).assign(partition=1, batch_id=0)


def test_dedup_each_acked_id_once_passes():
    out = dedup_oracle.each_id_once(DEDUP_ACKS, dedup_sink([(0, 0, 10), (0, 1, 20), (1, 0, 11)]), {})
    assert out["ok"], out["detail"]
    assert (out["acked"], out["rows"], out["copies_kept"]) == (3, 3, 0)


def test_dedup_a_copy_that_got_through_fails():
    # the resend fault's copy of (0, 1) at offset 95 came out beside its original
    out = dedup_oracle.each_id_once(DEDUP_ACKS, dedup_sink([(0, 0, 10), (0, 1, 20), (0, 1, 95), (1, 0, 11)]), {})
    assert not out["ok"]
    assert (out["ids_twice"], out["extra_rows"], out["twice_examples"]) == (1, 1, [[0, 1]])


def test_dedup_a_late_event_dropped_is_missing():
    # (1, 0) came later than the watermark and Spark dropped it: an acked id without a row
    out = dedup_oracle.each_id_once(DEDUP_ACKS, dedup_sink([(0, 0, 10), (0, 1, 20)]), {})
    assert not out["ok"] and out["missing"] == 1 and out["missing_examples"] == [[1, 0]]


def test_dedup_a_row_never_acked_fails_and_a_kept_copy_is_counted_not_failed():
    out = dedup_oracle.each_id_once(DEDUP_ACKS, dedup_sink([(0, 0, 10), (0, 1, 20), (1, 0, 11), (2, 0, 5)]), {})
    assert not out["ok"] and out["not_acked"] == 1
    out = dedup_oracle.each_id_once(DEDUP_ACKS, dedup_sink([(0, 0, 10), (0, 1, 96), (1, 0, 11)]), {})
    assert out["ok"] and out["copies_kept"] == 1


# -- the join: pairs within the bound once, unpaired orders once the watermark passed them ------------------------
# producer 0, bound 4 ms, final watermark 3000 ms. Worked out by hand:
#   order 0 @1000.0, payment 1 @1003.7 (t 1003, gap 3): paired
#   order 2 @1010.2, payment 3 @1015.0 (gap 5 > 4): unpaired; 1010 + 4 + 1 < 3000: must be out, empty payment
#   order 4 @1020.9, payment 5 never acked: unpaired, due
#   order 6 @1030.0, payment 7 @1034.999 (t 1034, gap 4 = bound): paired
#   order 8 @2996.0, payment 9 @3003.0 (gap 7): unpaired; 2996 + 4 + 1 >= 3000: still open, not judged
JOIN_ACKS = acks([(0, 0, 0, 0, 1000.0), (0, 1, 1, 0, 1003.7), (0, 2, 0, 1, 1010.2), (0, 3, 0, 2, 1015.0),
                  (0, 4, 1, 1, 1020.9), (0, 6, 0, 3, 1030.0), (0, 7, 1, 2, 1034.999), (0, 8, 0, 4, 2996.0),
                  (0, 9, 1, 3, 3003.0)])
JOIN_RIGHT = [(0, 0, 1), (0, 2, None), (0, 4, None), (0, 6, 7)]


def join(rows, mark=3000):
    sink = pd.DataFrame(rows, columns=["producer", "order_seq", "payment_seq"]).assign(batch_id=0)
    return join_oracle.pairs_once(JOIN_ACKS, sink, {"bound_ms": 4}, RunFacts(Path("."), [], mark))


def test_join_every_pair_and_every_passed_unpaired_order_once_passes():
    out = join(JOIN_RIGHT)
    assert out["ok"], out["detail"]
    assert (out["orders"], out["orders_paired"], out["pairs_out"], out["unpaired_out"], out["open"]) == (5, 2, 2, 2, 1)


def test_join_a_missing_pair_fails():
    out = join([r for r in JOIN_RIGHT if r[1] != 6])
    assert not out["ok"] and out["pairs_missing"] == 1


def test_join_a_pair_emitted_twice_fails():
    out = join(JOIN_RIGHT + [(0, 0, 1)])
    assert not out["ok"] and out["orders_twice"] == 1


def test_join_a_late_payment_paired_anyway_fails():
    # payment 3 came 5 ms after its order, past the 4 ms bound: what a join without its time-range condition emits
    out = join([(0, 0, 1), (0, 2, 3), (0, 4, None), (0, 6, 7)])
    assert not out["ok"] and out["wrong"] == 1 and out["wrong_examples"] == [[0.0, 2.0, 3.0, 3.0]]


def test_join_a_paired_order_emitted_without_its_payment_fails():
    out = join([(0, 0, None), (0, 2, None), (0, 4, None), (0, 6, 7)])
    assert not out["ok"] and out["wrong"] == 1


def test_join_an_unpaired_order_is_owed_only_once_the_watermark_passed_it():
    # order 4 (t 1020) is owed once the watermark is past 1020 + 4 + 1 = 1025; order 2 (t 1010) past 1015
    without_4 = [r for r in JOIN_RIGHT if r[1] != 4]
    assert not join(without_4)["ok"]  # watermark 3000
    at_1025 = join(without_4, mark=1025)
    assert at_1025["ok"], at_1025["detail"]
    assert at_1025["open"] == 2  # orders 4 and 8
    at_1026 = join(without_4, mark=1026)
    assert not at_1026["ok"] and at_1026["unpaired_missing"] == 1


def test_join_nothing_out_fails():
    assert not join([])["ok"]


# -- the foreachBatch upsert: the writer itself, replayed as Spark replays a batch after a kill ------------------
UPSERT_ACKS = acks([(0, 0, 0, 0, 1000.0), (0, 1, 1, 0, 1001.0), (0, 2, 0, 1, 1002.0), (1, 0, 1, 1, 1000.5)])
BATCH_0 = [(0, 0, 1000.0, 0, 0), (0, 1, 1001.0, 1, 0)]
BATCH_1 = [(0, 2, 1002.0, 0, 1), (1, 0, 1000.5, 1, 1)]


def test_upsert_a_batch_handed_over_again_is_skipped_and_each_event_is_once(tmp_path):
    table = tmp_path / upsert_job.TABLE
    assert upsert_job.apply_batch(table, 0, BATCH_0) == "applied"
    assert upsert_job.apply_batch(table, 1, BATCH_1) == "applied"
    assert upsert_job.apply_batch(table, 1, BATCH_1) == "skipped"  # the driver died before Spark's commit
    rows = upsert_job.read_table(tmp_path)
    assert len(rows) == 4 and set(rows["version"]) == {1}
    assert rows["commit_ms"].notna().all()  # what the checker measures latency from
    out = upsert_oracle.each_event_once(UPSERT_ACKS, rows, {})
    assert out["ok"], out["detail"]
    assert (out["batches"], out["batches_redelivered"], out["rows_in_redelivered_batches"]) == (2, 1, 2)


def test_upsert_a_writer_without_the_batch_check_writes_a_replayed_batch_twice(tmp_path):
    table = tmp_path / upsert_job.TABLE
    upsert_job.apply_batch(table, 0, BATCH_0, skip_applied=False)
    upsert_job.apply_batch(table, 1, BATCH_1, skip_applied=False)
    upsert_job.apply_batch(table, 1, BATCH_1, skip_applied=False)
    out = upsert_oracle.each_event_once(UPSERT_ACKS, upsert_job.read_table(tmp_path), {})
    assert not out["ok"]
    assert (out["written_more_than_once"], out["max_version"], out["rows"]) == (2, 2, 4)
    assert sorted(out["rewritten_examples"]) == [[0, 2, 2], [1, 0, 2]]


def test_upsert_a_missing_event_and_a_misplaced_one_fail(tmp_path):
    table = tmp_path / upsert_job.TABLE
    upsert_job.apply_batch(table, 0, BATCH_0)
    upsert_job.apply_batch(table, 1, [(0, 2, 1002.0, 0, 7)])  # (0, 2) at offset 7, its ack says 1; (1, 0) lost
    out = upsert_oracle.each_event_once(UPSERT_ACKS, upsert_job.read_table(tmp_path), {})
    assert not out["ok"] and (out["missing"], out["misplaced"]) == (1, 1)


def test_upsert_an_empty_or_absent_table_fails(tmp_path):
    out = upsert_oracle.each_event_once(UPSERT_ACKS, upsert_job.read_table(tmp_path), {})
    assert not out["ok"] and out["missing"] == 4


# -- the contract's hooks ---------------------------------------------------------------------------------------
def test_a_query_owning_its_sink_needs_writer_and_reader(monkeypatch, tmp_path):
    (tmp_path / "half_sink.py").write_text(
        "def q(events, params):\n    return events\n"
        "def w(df, batch_id, sink_dir, params):\n    pass\n"
        "q.foreach_batch = w\n"
        "def r(events, params):\n    return events\n"
        "r.foreach_batch = w\nr.read_sink = 'table.sqlite'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(QueryError, match="needs both foreach_batch and read_sink as functions"):
        resolve("half_sink:q")
    with pytest.raises(QueryError, match="read_sink = 'table.sqlite'"):
        resolve("half_sink:r")
    own = resolve("upsert_job:query")
    assert own.foreach_batch is upsert_job.write_batch and own.read_sink is upsert_job.read_table
    assert resolve("dedup").foreach_batch is None and resolve("dedup").read_sink is None


def test_a_four_parameter_oracle_gets_the_final_watermark(tmp_path):
    for batch, mark in ((0, None), (1, "2026-01-01T00:00:02.000Z"), (2, "2026-01-01T00:00:03.000Z")):
        append_jsonl(tmp_path / "progress.jsonl", {"batchId": batch, **({"eventTime": {"watermark": mark}}
                                                                        if mark else {})})
    sink = pd.DataFrame({"producer": [0, 0], "order_seq": [0, 2], "payment_seq": [1.0, None]})
    out = run_oracle("join_oracle:pairs_once", JOIN_ACKS, tmp_path, {"bound_ms": 4}, sink=sink)
    assert out["final_watermark_ms"] == 1_767_225_603_000  # 2026-01-01T00:00:03Z, by hand: 20454 days * 86400 + 3
    out = run_oracle("dedup_oracle:each_id_once", DEDUP_ACKS, tmp_path, {},
                     sink=dedup_sink([(0, 0, 10), (0, 1, 20), (1, 0, 11)]))
    assert out["ok"]


def test_the_verdict_reads_an_own_sink_through_its_reader_and_hands_the_checker_its_rows(tmp_path):
    from types import SimpleNamespace

    from harness.reconcile import Reconciler
    from harness.analysis.runview import read_own_sink as _read_own_sink

    (tmp_path / "sink").mkdir()
    upsert_job.apply_batch(tmp_path / "sink" / upsert_job.TABLE, 0, BATCH_0)
    upsert_job.apply_batch(tmp_path / "sink" / upsert_job.TABLE, 1, BATCH_1)
    scenario = SimpleNamespace(spark=SimpleNamespace(query="upsert_job:query", query_params={}))
    with Reconciler() as checker:
        frame = _read_own_sink(resolve("upsert_job:query"), tmp_path, scenario, checker)
        assert len(frame) == 4 and checker.store.sink_rows == 4  # with a commit time each: latency measurable
