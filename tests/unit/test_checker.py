"""Checker arithmetic on synthetic histories: every way an event can go wrong is counted where it belongs."""
import numpy as np
import pandas as pd
import pytest

from harness.reconcile import Expectations, reconcile
from harness.checkers.events import event_checks as evaluate
from harness.records.histsummary import Hist
from harness.config import ChecksSpec
from harness.effects import LossRange


def acks(rows):
    df = pd.DataFrame(rows, columns=["producer", "seq", "partition", "offset", "intended_ms", "produce_ms",
                                     "ack_ms", "error"])
    return df.astype({"error": "string"})


def sink(rows):
    return pd.DataFrame(rows, columns=["producer", "seq", "partition", "offset", "intended_ms", "commit_ms"])


def ok(p, s, part, off, t=1000.0):
    return [p, s, part, off, t, t + 1, t + 5, ""]


def row(p, s, part, off, t=1000.0, commit=1500.0):
    return [p, s, part, off, t, commit]


def latencies(rec, which="latency"):
    """The delivered events' latencies (or publish delays) as the summary holds them: one value per event, each
    its HdrHistogram bucket's lowest equivalent (3 significant digits)."""
    hist = getattr(rec.latency, which)
    return np.repeat(hist.values_us / 1000.0, hist.counts).tolist()


def close(values):
    return pytest.approx(values, rel=1e-3, abs=1e-3)


def test_clean_run_counts_everything_once():
    a = acks([ok(0, i, i % 2, i // 2) for i in range(10)])
    s = sink([row(0, i, i % 2, i // 2, commit=1000.0 + 10 * i) for i in range(10)])
    r = reconcile(a, s)
    assert (r.produced, r.acked, r.delivered_unique, r.duplicates, r.lost) == (10, 10, 10, 0, 0)
    assert r.misplaced == 0 and r.order_violations == 0 and r.delivered_unacked == 0
    assert latencies(r) == close([10.0 * i for i in range(10)])


def test_loss_duplicates_and_failed_sends_are_separated():
    a = acks([ok(0, 0, 0, 0), ok(0, 1, 0, 1), ok(0, 2, 0, 2),
              [0, 3, 0, -1, 1000.0, 1001.0, 1002.0, "_MSG_TIMED_OUT"]])
    s = sink([row(0, 0, 0, 0), row(0, 0, 0, 0, commit=1600.0), row(0, 2, 0, 2)])
    r = reconcile(a, s)
    assert r.produced == 4 and r.acked == 3 and r.failed == 1
    assert r.delivered_unique == 2 and r.duplicates == 1 and r.lost == 1
    assert r.lost_by_partition == {0: 1}
    # the duplicate's later commit does not count for latency: first delivery only
    assert latencies(r) == close([500.0, 500.0])


def test_expected_loss_is_not_lost():
    a = acks([ok(0, i, 0, i) for i in range(5)])
    s = sink([row(0, i, 0, i) for i in (0, 1, 4)])
    r = reconcile(a, s, Expectations(loss=[LossRange(0, 2, 4)]))
    assert r.lost == 0 and r.expected_lost == 2 and r.delivered_unique == 3


def test_misplaced_order_and_unacked_deliveries():
    a = acks([ok(0, 0, 0, 0), ok(0, 1, 0, 1), ok(1, 0, 1, 0)])
    # seq 1 lands before seq 0 on partition 0; producer 1's event sits at the wrong offset; (2, 9) was never acked
    s = sink([row(0, 0, 0, 1), row(0, 1, 0, 0), row(1, 0, 1, 7), row(2, 9, 1, 8)])
    r = reconcile(a, s)
    assert r.order_violations == 1
    assert r.misplaced == 3
    assert r.delivered_unacked == 1
    assert r.lost == 0


def test_percentiles_use_hdr_with_microsecond_resolution():
    values = np.arange(1, 10001, dtype=float)  # 1..10000 ms
    p = Hist.from_ms(values).percentiles()
    assert p["p50"] == pytest.approx(5000, rel=1e-3)
    assert p["p99"] == pytest.approx(9900, rel=1e-3)
    assert p["max"] == pytest.approx(10000, rel=1e-3)
    assert Hist.from_ms(np.array([0.25])).percentiles()["max"] == pytest.approx(0.25, rel=1e-2)
    assert Hist.from_ms(np.array([])).percentiles()["p99"] == 0.0


def test_verdict_fails_on_loss_and_names_the_check():
    a = acks([ok(0, i, 0, i) for i in range(3)])
    r = reconcile(a, sink([row(0, 0, 0, 0)]))
    checks = {c.name: c for c in evaluate(r, ChecksSpec(), target_events=3, latency=r.latency.latency.percentiles(),
                                          drained=True, drain_detail="ok")}
    assert not checks["no_loss"].ok and "2 acked events never delivered" in checks["no_loss"].detail
    assert checks["no_duplicates"].ok and checks["produce_rate"].ok


def test_latency_limit_check():
    r = reconcile(acks([ok(0, 0, 0, 0)]), sink([row(0, 0, 0, 0, commit=3000.0)]))
    checks = {c.name: c for c in evaluate(r, ChecksSpec(latency_p99_ms=1000), target_events=1,
                                          latency=r.latency.latency.percentiles(), drained=True, drain_detail="")}
    assert not checks["latency_p99"].ok


# -- every rule of evaluate() can fail ---------------------------------------------------------------------------
def judged(rec, checks=None, *, target=None, drained=True, pacer_skipped=0, unacked_at_exit=0):
    checks = checks or ChecksSpec()
    out = evaluate(rec, checks, target_events=rec.produced if target is None else target,
                   latency=rec.latency.latency.percentiles(), drained=drained, drain_detail="detail",
                   pacer_skipped=pacer_skipped, unacked_at_exit=unacked_at_exit)
    return {c.name: c for c in out}


def clean_history(n=6):
    return acks([ok(0, i, i % 2, i // 2) for i in range(n)]), sink([row(0, i, i % 2, i // 2) for i in range(n)])


def failing(checks: dict) -> set[str]:
    return {name for name, c in checks.items() if c.status in ("fail", "unknown")}


def test_a_clean_history_passes_every_rule():
    a, s = clean_history()
    checks = judged(reconcile(a, s), ChecksSpec(latency_p99_ms=1000))
    assert not failing(checks)
    assert set(checks) == {"drained", "no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries", "acked",
                           "sends_resolved", "no_skipped_sends", "produce_rate", "order", "latency_p99"}


def test_drained_fails_when_the_query_did_not_catch_up():
    a, s = clean_history()
    assert failing(judged(reconcile(a, s), drained=False)) == {"drained"}


def test_no_duplicates_fails_beyond_the_allowance():
    a, s = clean_history()
    s = pd.concat([s, sink([row(0, 3, 1, 1, commit=1700.0)])], ignore_index=True)
    rec = reconcile(a, s)
    assert rec.duplicates == 1 and rec.delivered_unique == 6
    assert failing(judged(rec)) == {"no_duplicates"}
    assert not failing(judged(rec, ChecksSpec(max_duplicates=1)))


def test_no_loss_allows_max_lost():
    a, s = clean_history()
    rec = reconcile(a, s.iloc[:-1])
    assert failing(judged(rec)) == {"no_loss"}
    assert not failing(judged(rec, ChecksSpec(max_lost=1)))


def test_offsets_match_fails_on_a_row_at_another_offset():
    a, s = clean_history()
    s.loc[s["seq"] == 5, "offset"] = 9  # the last event of partition 1 (order kept: 9 > 1)
    rec = reconcile(a, s)
    assert rec.misplaced == 1
    assert failing(judged(rec)) == {"offsets_match"}


def test_offsets_match_fails_on_a_row_in_another_partition():
    a, s = clean_history()
    s.loc[s["seq"] == 5, "partition"] = 0  # acked on partition 1; after partition 0's events, so order holds
    s.loc[s["seq"] == 5, "offset"] = 9
    assert failing(judged(reconcile(a, s))) == {"offsets_match"}


def test_a_sink_row_nobody_acked_fails_the_run():
    a, s = clean_history()
    s = pd.concat([s, sink([row(3, 0, 0, 3)])], ignore_index=True)
    rec = reconcile(a, s)
    assert rec.delivered_unacked == 1 and rec.lost == 0
    assert failing(judged(rec)) == {"no_unacked_deliveries"}


def test_a_delivered_event_whose_send_failed_is_an_unacked_delivery():
    """The client reported a failure, yet the record reached the sink: the ack log is not the truth, a defect."""
    a, s = clean_history()
    a = acks(a.values.tolist()[:-1] + [[0, 5, 1, -1, 1000.0, 1001.0, 1005.0, "_MSG_TIMED_OUT"]])
    rec = reconcile(a, s)
    assert (rec.failed, rec.delivered_unacked, rec.lost) == (1, 1, 0)
    assert {"no_unacked_deliveries", "acked"} <= failing(judged(rec))


def test_acked_fails_on_failed_sends_outside_a_declared_window():
    a, s = clean_history()
    failed = [0, 6, 0, -1, 1000.0, 1001.0, 2000.0, "_MSG_TIMED_OUT"]
    a = acks(a.values.tolist() + [failed])
    rec = reconcile(a, s)
    assert failing(judged(rec)) == {"acked"}
    inside = reconcile(a, s, Expectations(failure_windows_ms=[(1500.0, 2500.0)]))
    assert inside.failed_expected == 1 and not failing(judged(inside))
    before = reconcile(a, s, Expectations(failure_windows_ms=[(2000.5, 2500.0)]))
    assert before.failed_expected == 0 and failing(judged(before)) == {"acked"}


def test_acked_fails_when_nothing_was_acked():
    rec = reconcile(acks([]), sink([]))
    assert "acked" in failing(judged(rec, target=0))


def test_sends_resolved_fails_on_events_neither_acked_nor_failed():
    a, s = clean_history()
    assert failing(judged(reconcile(a, s), unacked_at_exit=1)) == {"sends_resolved"}


def test_pacer_skips_fail_unless_allowed():
    a, s = clean_history()
    rec = reconcile(a, s)
    checks = judged(rec, pacer_skipped=4)
    assert failing(checks) == {"no_skipped_sends"} and "4 scheduled events skipped" in checks["no_skipped_sends"].detail
    assert not failing(judged(rec, ChecksSpec(max_pacer_skipped=4), pacer_skipped=4))


def test_latency_is_measured_from_the_intended_send_time():
    """Coordinated omission: an event sent 900 ms late (the producer fell behind) and made visible 100 ms after its
    send still took 1,000 ms end to end; the publish delay shows the producer's part."""
    a = acks([[0, 0, 0, 0, 1000.0, 1900.0, 1950.0, ""]])
    rec = reconcile(a, sink([row(0, 0, 0, 0, t=1000.0, commit=2000.0)]))
    assert latencies(rec) == close([1000.0]) and latencies(rec, "publish_delay") == close([900.0])
    assert failing(judged(rec, ChecksSpec(latency_p99_ms=500))) == {"latency_p99"}


def test_produce_rate_fails_below_the_ratio():
    a, s = clean_history()
    rec = reconcile(a, s)
    assert failing(judged(rec, target=7)) == {"produce_rate"}  # 6 / 7 < 0.95
    assert not failing(judged(rec, ChecksSpec(min_produce_ratio=0.85), target=7))


# -- order: real reorderings are caught, what is not a reordering is not blamed ------------------------------------
def test_a_non_idempotent_retry_reordering_fails_order():
    """Without idempotence, a batch whose first attempt failed can land after later batches that succeeded: seq 0
    and 1 retried and written after 2 and 3 on partition 0. The ack log reports those offsets, and so does the sink."""
    placed = {0: 2, 1: 3, 2: 0, 3: 1}
    a = acks([ok(0, s, 0, off) for s, off in placed.items()])
    rec = reconcile(a, sink([row(0, s, 0, off) for s, off in placed.items()]))
    assert rec.misplaced == 0 and rec.lost == 0 and rec.order_violations == 1
    assert failing(judged(rec)) == {"order"}
    assert not failing(judged(rec, ChecksSpec(require_order=False)))


def test_order_is_per_producer_and_partition():
    """Two producer processes interleave on one partition and one producer's events alternate over partitions:
    each producer's sequence rises along every partition's offsets, so nothing is out of order."""
    history = [(0, 0, 0, 0), (1, 0, 0, 1), (1, 1, 1, 0), (0, 1, 0, 2), (0, 2, 1, 1), (1, 2, 0, 3), (0, 3, 0, 4)]
    a = acks([ok(p, q, part, off) for p, q, part, off in history])
    s = sink([row(p, q, part, off, commit=1500.0 + 7 * (6 - i)) for i, (p, q, part, off) in enumerate(history)])
    rec = reconcile(a, s)
    assert rec.order_violations == 0 and not failing(judged(rec))


def test_order_restarts_with_a_new_generation_of_the_topic():
    """A recreated topic restarts offsets at 0: later events at lower offsets are no reordering across generations,
    but a reordering within the new generation still is."""
    a = acks([[0, 0, 0, 0, 1000.0, 1001.0, 1005.0, ""], [0, 1, 0, 1, 1000.0, 1001.0, 1005.0, ""],
              [0, 2, 0, 0, 3000.0, 3001.0, 3005.0, ""], [0, 3, 0, 1, 3000.0, 3001.0, 3005.0, ""]])
    s = sink([row(0, i, 0, off) for i, off in enumerate([0, 1, 0, 1])])
    assert reconcile(a, s).order_violations == 1  # undeclared: seq 2 at offset 0 after seq 1 at offset 1
    assert reconcile(a, s, Expectations(generations_ms=[2000.0])).order_violations == 0
    swapped = acks([[0, 0, 0, 0, 1000.0, 1001.0, 1005.0, ""], [0, 1, 0, 1, 1000.0, 1001.0, 1005.0, ""],
                    [0, 2, 0, 1, 3000.0, 3001.0, 3005.0, ""], [0, 3, 0, 0, 3000.0, 3001.0, 3005.0, ""]])
    s2 = sink([row(0, i, 0, off) for i, off in enumerate([0, 1, 1, 0])])
    assert reconcile(swapped, s2, Expectations(generations_ms=[2000.0])).order_violations == 1


# -- declared loss --------------------------------------------------------------------------------------------------
def test_a_loss_range_covers_only_its_generation():
    """acked_before_ms: the recreated topic's events at the same offsets, acked later, are not excused."""
    a = acks([[0, 0, 0, 0, 1000.0, 1001.0, 1005.0, ""], [0, 1, 0, 0, 3000.0, 3001.0, 3005.0, ""]])
    rec = reconcile(a, sink([]), Expectations(loss=[LossRange(0, 0, 1, acked_before_ms=2000.0)]))
    assert (rec.expected_lost, rec.lost) == (1, 1)
    assert rec.expected_lost_by_partition == {0: 1} and rec.lost_by_partition == {0: 1}


def test_unread_is_only_what_lies_beyond_the_committed_position():
    a = acks([ok(0, i, 0, i) for i in range(5)])
    rec = reconcile(a, sink([row(0, 0, 0, 0), row(0, 2, 0, 2)]), Expectations(read_up_to={0: 3}))
    # seq 1 (offset 1) was inside what the query committed and is missing: lost; offsets 3, 4 were never read
    assert (rec.unread, rec.lost, rec.delivered_unique) == (2, 1, 2)


def test_placements_fill_positions_sends_did_not_report(tmp_path):
    """Event Hubs acks carry no offset (and round-robin ones no partition): a fault's placement file supplies
    them, so a loss range in sequence numbers covers exactly the events the service removed."""
    from harness.records.placements import apply_placements, load_placements

    acks = pd.DataFrame({"producer": [0, 0, 0, 1], "seq": [0, 1, 2, 0], "partition": [2, 2, -1, 2],
                         "offset": [-1, -1, -1, -1]})
    (tmp_path / "fault-0.csv").write_text("producer,seq,partition,offset\n0,0,3,10\n0,2,1,7\n0,1,2,11\n5,5,")
    placed = apply_placements(acks, load_placements(tmp_path))
    # a named partition is kept (the check of the service's placement needs it); the torn last row is ignored
    assert placed[["partition", "offset"]].values.tolist() == [[2, 10], [2, 11], [1, 7], [2, -1]]
    assert apply_placements(acks, load_placements(tmp_path / "none")).equals(acks)
