"""`harness bench rtm`'s figures from its runs' records: where a real-time batch reads, which records waited
between reads, CPU per event, and the rows (goal judged on the p99), on hand-made records with hand-computed
answers."""
from datetime import datetime, timezone

import numpy as np
import pytest

from harness.bench import check_rows
from harness.analysis.cost import cpu_per_event
from harness.bench.rtm import GOAL_P99_MS, batch_starts, near_boundary, split_latency, summarise

T0 = 1_800_000_000.0


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_batch_boundaries_are_the_starts_of_every_batch_but_the_first():
    progress = [{"timestamp": iso(T0 + 5.5)}, {"timestamp": iso(T0)}, {"timestamp": iso(T0 + 10.75)}, {"batchId": 9}]
    assert batch_starts(progress) == [pytest.approx(T0 + 5.5), pytest.approx(T0 + 10.75)]


def test_records_within_near_s_of_a_boundary_are_near_it():
    t = np.array([T0 + 4.7, T0 + 4.8, T0 + 6.2, T0 + 6.3, T0 + 8.0])
    assert near_boundary(t, [T0 + 5.5], within_s=0.75).tolist() == [False, True, True, False, False]


def test_the_split_puts_the_stalled_records_tail_apart():
    boundaries = [T0 + 10.0]
    intended = np.concatenate([np.linspace(T0, T0 + 9.0, 90), np.linspace(T0 + 9.6, T0 + 10.4, 10)])
    latency = np.concatenate([np.full(90, 40.0), np.full(10, 450.0)])
    split = split_latency(latency, intended, boundaries)
    assert split["records"] == 100 and split["near_boundary"] == 10 and split["near_share"] == 0.1
    assert split["p99_away_ms"] == 40.0 and split["p99_near_ms"] == 450.0 and split["p50_away_ms"] == 40.0


def test_cpu_per_event_is_the_query_processes_cpu_over_the_events_offered_in_the_window():
    result = {"throughput": {"produce_eps": 1000.0},
              "footprint": {"window_s": 20.0, "ratio": 0.04, "by_role": {"driver-jvm": 6.0, "driver": 0.2,
                                                                          "broker": 4.0, "producer": 0.5}}}
    cpu = cpu_per_event(result)  # 20,000 events; query 6.2 CPU s, broker 4.0
    assert cpu["query_ms"] == pytest.approx(0.31) and cpu["broker_ms"] == pytest.approx(0.2)
    assert cpu["footprint"] == 0.04
    assert cpu_per_event({})["query_ms"] is None


def _run(mode, p50, p99, cpu=0.3):
    return {"mode": mode, "p50_ms": p50, "p99_ms": p99, "measured_p99_ms": 2 * p99,
            "cpu": {"query_ms": cpu, "broker_ms": 0.2, "footprint": 0.04},
            "where": {"near_share": 0.25, "p99_away_ms": 60.0, "p99_near_ms": 450.0} if mode == "realtime" else None,
            "publish_delay_p99_ms": 9.0}


def test_rows_set_real_time_against_micro_batches_and_judge_the_p99_goal():
    rows = summarise([_run("realtime", 35.0, 440.0), _run("microbatch", 700.0, 1400.0),
                      _run("microbatch", 720.0, 1300.0), _run("realtime", 30.0, 400.0)])
    check_rows({"rows": rows})
    by = {r["name"]: r for r in rows}
    p99 = by["latency p99, real-time mode (steady)"]
    assert p99["value"] == 420.0 and p99["reference"] == 1350.0 and p99["ok"] is False  # medians of two
    assert p99["goal"] == f"< {GOAL_P99_MS:g} ms"
    assert by["latency p50, real-time mode (steady)"]["ratio"] == pytest.approx(32.5 / 710.0)
    near = next(r for r in rows if r["name"].startswith("where: p99 of records sent within"))
    assert near["value"] == 450.0 and near["reference"] == 60.0
    fast = {r["name"]: r for r in summarise([_run("realtime", 20.0, 90.0), _run("microbatch", 700.0, 1400.0)])}
    assert fast["latency p99, real-time mode (steady)"]["ok"] is True


def test_recovery_is_the_mean_time_back_in_band_of_the_faults_recovered_from():
    from harness.analysis.cost import recovery_s

    result = {"recovery": [{"recovered": True, "time_to_recover_s": 20.0}, {"recovered": True, "time_to_recover_s": 13.0},
                           {"recovered": False, "time_to_recover_s": None}]}
    assert recovery_s(result) == 16.5 and recovery_s({}) is None
