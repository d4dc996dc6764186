"""Checker arithmetic on synthetic histories: every way an event can go wrong is counted where it belongs."""
import numpy as np
import pandas as pd
import pytest

from harness.checker import Expectations, evaluate, percentiles_ms, reconcile
from harness.config import ChecksSpec
from harness.faults import LossRange


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


def test_clean_run_counts_everything_once():
    a = acks([ok(0, i, i % 2, i // 2) for i in range(10)])
    s = sink([row(0, i, i % 2, i // 2, commit=1000.0 + 10 * i) for i in range(10)])
    r = reconcile(a, s)
    assert (r.produced, r.acked, r.delivered_unique, r.duplicates, r.lost) == (10, 10, 10, 0, 0)
    assert r.misplaced == 0 and r.order_violations == 0 and r.delivered_unacked == 0
    assert sorted(r.latency_ms.tolist()) == [10.0 * i for i in range(10)]


def test_loss_duplicates_and_failed_sends_are_separated():
    a = acks([ok(0, 0, 0, 0), ok(0, 1, 0, 1), ok(0, 2, 0, 2),
              [0, 3, 0, -1, 1000.0, 1001.0, 1002.0, "_MSG_TIMED_OUT"]])
    s = sink([row(0, 0, 0, 0), row(0, 0, 0, 0, commit=1600.0), row(0, 2, 0, 2)])
    r = reconcile(a, s)
    assert r.produced == 4 and r.acked == 3 and r.failed == 1
    assert r.delivered_unique == 2 and r.duplicates == 1 and r.lost == 1
    assert r.lost_by_partition == {0: 1}
    # the duplicate's later commit does not count for latency: first delivery only
    assert sorted(r.latency_ms.tolist()) == [500.0, 500.0]


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
    p = percentiles_ms(values)
    assert p["p50"] == pytest.approx(5000, rel=1e-3)
    assert p["p99"] == pytest.approx(9900, rel=1e-3)
    assert p["max"] == pytest.approx(10000, rel=1e-3)
    assert percentiles_ms(np.array([0.25]))["max"] == pytest.approx(0.25, rel=1e-2)
    assert percentiles_ms(np.array([]))["p99"] == 0.0


def test_verdict_fails_on_loss_and_names_the_check():
    a = acks([ok(0, i, 0, i) for i in range(3)])
    r = reconcile(a, sink([row(0, 0, 0, 0)]))
    checks = {c.name: c for c in evaluate(r, ChecksSpec(), target_events=3, latency=percentiles_ms(r.latency_ms),
                                          drained=True, drain_detail="ok")}
    assert not checks["no_loss"].ok and "2 acked events never delivered" in checks["no_loss"].detail
    assert checks["no_duplicates"].ok and checks["produce_rate"].ok


def test_latency_limit_check():
    r = reconcile(acks([ok(0, 0, 0, 0)]), sink([row(0, 0, 0, 0, commit=3000.0)]))
    checks = {c.name: c for c in evaluate(r, ChecksSpec(latency_p99_ms=1000), target_events=1,
                                          latency=percentiles_ms(r.latency_ms), drained=True, drain_detail="")}
    assert not checks["latency_p99"].ok
