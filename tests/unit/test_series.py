"""series.json's condensed time series, against hand-worked examples."""
import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

from harness.reconcile import reconcile
from harness.records.histsummary import Hist
from harness.analysis.series import (lag_matrix, per_second_summary, percentile_curve_summary, produced_per_second, task_rows)

T0 = 1_700_000_000.0


def _hdr(values_ms):
    """HdrHistogram itself, as the definition the summaries follow (1 us .. 1 h, 3 significant digits)."""
    hist = HdrHistogram(1, 3_600_000_000, 3)
    for v in values_ms:
        hist.record_value(int(round(v * 1000.0)))
    return hist


def test_latency_per_second_of_intended_time_and_visibility_per_second_of_commit():
    intended = np.array([0.1, 0.5, 1.2]) * 1000.0 + T0 * 1000.0
    latency = np.array([100.0, 300.0, 50.0])
    rec = reconcile(*_history(intended, latency), t0=T0)
    out = per_second_summary(rec.latency.per_second)
    second0, second1 = _hdr([100.0, 300.0]), _hdr([50.0])
    assert out["t"] == [0, 1]
    assert out["latency_p50"] == [round(second0.get_value_at_percentile(50) / 1000.0, 2),
                                  round(second1.get_value_at_percentile(50) / 1000.0, 2)]
    assert out["latency_p99"][0] == round(second0.get_value_at_percentile(99) / 1000.0, 2)
    assert out["latency_max"] == [round(second0.get_max_value() / 1000.0, 2),
                                  round(second1.get_max_value() / 1000.0, 2)]
    assert 299.9 < out["latency_max"][0] < 300.2  # 3 significant digits of 300 ms
    # visible at 0.2 s, 0.8 s (second 0) and 1.25 s (second 1)
    assert out["visible_t"] == [0, 1] and out["visible"] == [2, 1]


def _history(intended, latency):
    n = len(intended)
    acks = pd.DataFrame({"producer": 0, "seq": np.arange(n), "partition": 0, "offset": np.arange(n),
                         "intended_ms": intended, "produce_ms": intended, "ack_ms": intended + 1.0,
                         "error": ""}).astype({"error": "string"})
    sink = pd.DataFrame({"producer": 0, "seq": np.arange(n), "partition": 0, "offset": np.arange(n),
                         "intended_ms": intended, "commit_ms": intended + latency})
    return acks, sink


def test_no_delivered_events_gives_empty_series():
    out = per_second_summary({})
    assert out["t"] == [] and out["visible"] == []
    assert percentile_curve_summary(Hist()) == []


def test_percentile_curve_ends_at_the_slowest_event():
    values = np.arange(1, 1001, dtype=float)  # 1..1000 ms
    hist = _hdr(values)
    curve = dict((p, v) for p, v in percentile_curve_summary(Hist.from_ms(values)))
    assert curve[0.0] == 1.0 and curve[100.0] == round(hist.get_max_value() / 1000.0, 2)
    assert all(curve[p] == round(hist.get_value_at_percentile(p) / 1000.0, 2) for p in (10.0, 50.0, 99.9))
    assert 999.0 < curve[100.0] < 1001.0


def test_produced_rows_move_to_the_run_axis():
    rows = [{"t": T0 + 1, "sent": 10, "expected": 9.5, "failed": 0}, {"t": T0 + 2, "sent": 5, "failed": 1}]
    assert produced_per_second(rows, T0) == {"t": [1.0, 2.0], "sent": [10, 5], "scheduled": [9.5, None],
                                             "failed": [0, 1]}


def test_lag_per_partition_counts_what_the_last_commit_left():
    samples = [{"t": T0 + 1, "end": {"0": 10, "1": 4}}, {"t": T0 + 3, "end": {"0": 20, "1": 4}}]
    # one batch committed {0: 8, 1: 4} at 1.5 + 0.5 = 2.0 s (start + triggerExecution)
    progress = [{"timestamp": "2023-11-14T22:13:21.500Z", "durationMs": {"triggerExecution": 500},
                 "sources": [{"endOffset": {"events": {"0": 8, "1": 4}}}]}]
    out = lag_matrix(samples, progress, T0)
    assert out["t"] == [1.0, 3.0] and out["partitions"] == ["0", "1"]
    assert out["lag"] == [[10, 12], [4, 0]]


def test_task_rows_leave_out_failed_attempts():
    tasks = [{"batch": 1, "executor": "0", "partition": 3, "launch_ms": int(T0 * 1000) + 1500, "finish_ms":
              int(T0 * 1000) + 1700, "locality": "PROCESS_LOCAL", "records_read": 7, "failed": False},
             {"batch": 1, "executor": "1", "partition": 4, "launch_ms": 0, "finish_ms": 1, "locality": "ANY",
              "records_read": 0, "failed": True}]
    out = task_rows(tasks, T0)
    assert out == {"batch": [1], "executor": ["0"], "partition": [3], "launch_s": [1.5], "duration_ms": [200],
                   "locality": ["PROCESS_LOCAL"], "records": [7]}


def test_seconds_without_a_commit_count_zero():
    from harness.analysis.series import dense_seconds

    assert dense_seconds([3, 6], [10, 20]) == ([3, 4, 5, 6, 7], [10, 0, 0, 20, 0])
    assert dense_seconds([], []) == ([], [])
