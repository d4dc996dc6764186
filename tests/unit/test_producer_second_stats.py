"""A producer's per-second delivery histograms: recorded in bulk, yet bucket for bucket what HdrHistogram's own
record_value makes of each value (the reference here), percentiles as its own get_value_at_percentile."""
import json
import time

import numpy as np

from harness.producers.records import MAX_US, SecondStats, new_histogram, record_many, value_at_percentile


def test_bulk_recording_equals_one_record_value_per_value():
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.integers(1, 5000, 3000), rng.lognormal(9, 2.5, 5000).astype(np.int64),
                             [0, -3, 1, 2047, 2048, 4095, 4096, MAX_US, MAX_US + 1]])
    bulk, one_by_one = new_histogram(), new_histogram()
    record_many(bulk, values[:4000])
    record_many(bulk, values[4000:])  # counts accumulate across calls
    for v in values.tolist():
        one_by_one.record_value(min(max(v, 1), MAX_US))
    assert list(bulk.counts) == list(one_by_one.counts)
    assert (bulk.total_count, bulk.min_value, bulk.max_value) == (len(values), 1, MAX_US)
    assert (one_by_one.total_count, one_by_one.min_value, one_by_one.max_value) == (len(values), 1, MAX_US)
    for p in (0, 0.1, 50, 90, 99, 99.9, 100):
        assert value_at_percentile(bulk, p) == one_by_one.get_value_at_percentile(p)
    assert bulk.encode() == one_by_one.encode()


def test_percentiles_of_hand_counted_values():
    h = new_histogram()
    record_many(h, [100] * 50 + [200] * 49 + [90_000])  # exact below 2048; 90,000 lands in a 64-wide bucket
    assert value_at_percentile(h, 50) == 100
    assert value_at_percentile(h, 99) == 200
    assert 90_000 <= value_at_percentile(h, 100) < 90_000 + 64
    assert value_at_percentile(new_histogram(), 50) == 0


def test_a_second_row_carries_its_deliveries(tmp_path):
    second = int(time.time()) - 3  # close() writes every second up to now
    stats = SecondStats(tmp_path / "stats-0.jsonl")
    stats.on_due(3, second + 0.2)
    stats.on_acks([0, 1, 1], [10, 20, 30], [1000, 3000, 2000], second + 0.5)
    stats.on_due(1, second + 1.1)  # the next second: the first one's row is written
    stats.close()
    first = json.loads((tmp_path / "stats-0.jsonl").read_text().splitlines()[0])
    assert (first["t"], first["due"], first["acked"]) == (second, 3, 3)
    cpu = [json.loads(line)["cpu_s"] for line in (tmp_path / "stats-0.jsonl").read_text().splitlines()]
    assert 0 < cpu[0] <= time.process_time() and cpu == sorted(cpu)  # this process's CPU so far, cumulative
    # 2000 is exact (below 2048); 3000 is in a bucket two wide, reported as its highest value
    assert first["delivery_us"] == {"p50": 2000, "p99": 3001, "max": 3001}
    assert dict(stats.partition_events) == {0: 1, 1: 2} and dict(stats.partition_bytes) == {0: 10, 1: 50}
    assert stats.total_delivery.get_total_count() == 3
