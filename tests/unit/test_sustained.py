"""Keeping up, steady state and recovery on synthetic runs whose answer is known by construction: a broker whose
end offsets grow at the offered rate, a query that commits what was there at each batch's start (or less, when it
cannot keep up), lag sampled once a second as harness.samplers.lag samples it. The figures
(harness.analysis.sustain, .steady, .recovery) and the criteria (harness.checkers.sustained, shared with
`harness capacity`) are judged against what the construction makes true.
"""
import json
import math
import random
from datetime import datetime, timezone

import numpy as np
import pytest

from harness.analysis.recovery import fault_recovery
from harness.analysis.steady import BLOCK_S, mser_truncation, steady_window
from harness.analysis.sustain import fit, judged_intervals, sustain_figures
from harness.check import Check, verdict_of
from harness.checkers.sustained import Thresholds, criteria, headroom_check, sustained_check

T0 = 1_800_000_000.0
TH = Thresholds(trigger_interval_ms=1000.0)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def synthetic_run(*, rate=6000.0, seconds=40, trigger_s=1.0, batch_s=0.4, capacity=math.inf, partitions=4,
                  down=None, seed=1):
    """(lag samples, progress) of a query reading a stream offered at `rate` events/s from T0: a batch every
    `trigger_s` (or back to back when it takes longer) reads what the broker holds at its start, at most
    `capacity` x the time since its previous start, and takes `batch_s` plus its rows at `capacity`; while
    `down` = (from, to) (s after T0) the query is down and the next batch starts at `to`. Lag is sampled every
    second with a little jitter, as the sampler's thread does."""
    rnd = random.Random(seed)

    def end(t):
        return rate * max(0.0, t - T0)

    progress, committed, t, last_start, batch = [], 0.0, T0, T0, 0
    while t < T0 + seconds:
        if down and T0 + down[0] <= t < T0 + down[1]:
            t = T0 + down[1]
        avail = end(t)
        take = min(avail - committed, capacity * (t - last_start) if math.isfinite(capacity) else math.inf)
        new = committed + max(0.0, take)
        duration = batch_s + (take / capacity if math.isfinite(capacity) else 0.0)
        per = new / partitions
        progress.append({"batchId": batch, "timestamp": iso(t), "numInputRows": int(new - committed),
                         "durationMs": {"triggerExecution": int(duration * 1000)},
                         "sources": [{"endOffset": json.dumps({"events": {str(p): int(per) for p in
                                                                          range(partitions)}})}]})
        committed, last_start, batch = new, t, batch + 1
        t = max(t + trigger_s, t + duration)
    samples = [{"t": T0 + s + rnd.uniform(0.0, 0.05),
                "end": {str(p): int(end(T0 + s) / partitions) for p in range(partitions)}}
               for s in range(seconds + 1)]
    return samples, progress


def figures(samples, progress, start=10.0, end=40.0, excluded=()):
    return sustain_figures(samples, progress, T0 + start, T0 + end, [(T0 + a, T0 + b) for a, b in excluded])


def by_name(checks):
    return {c.name: c for c in checks}


# ---------------------------------------------------------------------------------------------- keeping up
def test_a_query_that_keeps_up_passes_every_criterion():
    f = figures(*synthetic_run())
    c = by_name(criteria(f, TH))
    assert all(x.ok for x in c.values()), c
    assert abs(f["offered_eps"] - 6000) < 60 and abs(f["processed_eps"] - 6000) < 120
    # the sawtooth (lag rises by R over each 1 s batch and drops at its commit) is not growth
    assert abs(f["lag"]["slope_eps"]) < 0.05 * 6000 and f["lag"]["slope_se_eps"] < 0.05 * 6000
    assert sustained_check(f, TH, None).ok is True
    # 400 ms batches of a 1 s trigger leave 60% of it idle
    room = headroom_check(f, TH, None)
    assert room.ok is True and room.value == 400.0 and room.figures["idle_fraction"] == pytest.approx(0.6)


def test_a_query_at_80_percent_of_the_offered_rate_fails_with_its_lag_slope():
    f = figures(*synthetic_run(capacity=4800.0))
    c = by_name(criteria(f, TH))
    # it falls behind (the 0.4 s a batch costs on top of 4,800/s: about 1,800 events/s): the slope says so,
    # beyond its uncertainty, and it is what offered minus processed says
    assert c["lag_growth"].ok is False
    assert abs(c["lag_growth"].value - (f["offered_eps"] - f["processed_eps"])) < 0.05 * 6000
    assert c["lag_growth"].value - 2 * c["lag_growth"].figures["slope_se_eps"] > 0.05 * 6000
    assert c["processed_rate"].ok is False and c["processed_rate"].value < 0.95 * f["offered_eps"]
    assert set(c) == {"lag_growth", "processed_rate"}  # a batch's length is the headroom, not keeping up
    check = sustained_check(f, TH, None)
    assert check.ok is False and "lag_growth: lag grew" in check.detail and verdict_of([check]) == "fail"
    # each batch reads a second of traffic at 4,800/s, over 1 s: no headroom either (listed, not required)
    room = headroom_check(f, TH, None)
    assert room.ok is False and room.detail.startswith("no headroom: batch p50 ") and room.status == "not required"


def test_a_rate_limited_query_fails_on_its_processing_rate_though_its_batches_are_quick():
    """maxOffsetsPerTrigger below the offered rate: quick batches that each read too little."""
    samples, progress = synthetic_run(capacity=5000.0, batch_s=0.1)
    for p in progress:  # quick batches: only the cap limits them
        p["durationMs"]["triggerExecution"] = 150
    f = figures(samples, progress)
    c = by_name(criteria(f, TH))
    assert headroom_check(f, TH, None).ok is True and headroom_check(f, TH, None).value == 150.0
    assert c["processed_rate"].ok is False and c["lag_growth"].ok is False


def test_a_draining_backlog_is_not_growth():
    samples, progress = synthetic_run()
    for s in samples:  # 100,000 behind at 10 s, draining by 2,000/s
        extra = max(0.0, 100_000 - 2000 * max(0.0, s["t"] - T0 - 10))
        s["end"] = {p: v + int(extra / 4) for p, v in s["end"].items()}
    lag = by_name(criteria(figures(samples, progress), TH))["lag_growth"]
    assert lag.ok is True and lag.value < 0


def test_too_short_a_window_is_unknown_never_a_pass():
    samples, progress = synthetic_run(trigger_s=5.0)
    f = figures(samples, progress, start=30.0, end=38.0)  # 8 s: under 3 cadences of 5 s
    c = by_name(criteria(f, Thresholds(trigger_interval_ms=5000.0)))
    assert c["lag_growth"].ok is None and "under 3 batch cadences" in c["lag_growth"].detail
    few = figures(samples, progress, start=37.0, end=39.0)
    assert by_name(criteria(few, TH))["lag_growth"].ok is None
    # never a pass, and not a failure either: the run is unjudged (harness.check.verdict_of)
    assert sustained_check(few, TH, None).ok is None and verdict_of([sustained_check(few, TH, None)]) == "unjudged"


def test_a_slope_whose_uncertainty_straddles_the_limit_cannot_be_told():
    f = {"judged_s": 30.0, "samples": 30, "offered_eps": 6000.0, "processed_eps": 6000.0, "batch_p50_ms": 400.0,
         "batches": 30, "lag": {"slope_eps": 330.0, "slope_se_eps": 100.0, "end_lag": 50_000.0, "max_lag": 50_000.0}}
    c = by_name(criteria(f, TH))["lag_growth"]
    assert c.ok is None and c.detail.startswith("cannot tell: lag grew 330 ± 200 events/s")


def test_a_backlog_scenario_lists_the_check_as_not_required_with_its_figures():
    f = figures(*synthetic_run(capacity=4800.0))
    check = sustained_check(f, TH, "catch-up reads a backlog made before the query starts")
    assert check.status == "not required" and check.ok is False and verdict_of([check]) == "pass"
    assert check.detail.startswith("not required (catch-up reads a backlog") and check.figures["criteria"]


def test_a_zero_second_trigger_is_judged_on_keeping_up_alone_and_has_no_headroom_to_measure():
    f = figures(*synthetic_run(trigger_s=0.0, batch_s=0.5))
    c = by_name(criteria(f, Thresholds(0.0)))
    assert set(c) == {"lag_growth", "processed_rate"} and all(x.ok for x in c.values()), c
    room = headroom_check(f, Thresholds(0.0), None)
    assert room.status == "not required" and "back to back" in room.detail


def test_a_single_overrunning_batch_has_no_headroom_but_a_single_quick_one_cannot_pass():
    assert headroom_check({"batch_p50_ms": 18_081.0, "batches": 1}, TH, 0.0).ok is False
    few = headroom_check({"batch_p50_ms": 400.0, "batches": 2}, TH, 0.0)
    assert few.ok is None and few.detail.startswith("unknown: 2 batches with data in the judged window (need 3")


def test_faults_spans_are_left_out_and_the_rest_still_judged():
    samples, progress = synthetic_run(down=(15.0, 22.0))
    with_fault = figures(samples, progress, excluded=[(15.0, 26.0)])
    assert with_fault["judged_s"] == pytest.approx(19.0) and sustained_check(with_fault, TH, None).ok is True
    assert judged_intervals(0, 10, [(2, 3), (5, 12)]) == [(0, 2), (3, 5)]


def test_least_squares_matches_numpy():
    rnd = np.random.default_rng(3)
    t = np.arange(50.0)
    v = 7.0 + 3.5 * t + rnd.normal(0, 2.0, 50)
    got = fit(list(zip(t.tolist(), v.tolist())))
    slope, intercept = np.polyfit(t, v, 1)
    resid = v - (intercept + slope * t)
    se = math.sqrt(resid @ resid / 48 / ((t - t.mean()) @ (t - t.mean())))
    assert got["slope"] == pytest.approx(slope) and got["se"] == pytest.approx(se)


# ---------------------------------------------------------------------------------------------- steady state
def cold_start(seconds=60, transient=15, level=1500.0, seed=5):
    """Per-second p99s: a cold start decaying from 9 s to the steady level over `transient` seconds, noise after."""
    rnd = random.Random(seed)
    return [level + (9000.0 - level) * max(0.0, 1 - s / transient) ** 2 + rnd.gauss(0, 60) for s in range(seconds)]


def test_mser5_cuts_the_cold_start_and_no_more():
    cut = mser_truncation(cold_start())
    assert cut % BLOCK_S == 0 and 10 <= cut <= 20


def test_mser5_leaves_a_steady_series_whole():
    rnd = random.Random(2)
    assert mser_truncation([1500 + rnd.gauss(0, 60) for _ in range(60)]) <= 5


def test_mser5_never_cuts_more_than_half_nor_past_the_first_fault():
    rising = [float(s) for s in range(60)]  # never steady: MSER's own bound, half the window
    assert mser_truncation(rising) <= 30
    assert mser_truncation(cold_start(), max_index=5) <= 5


def test_too_short_a_window_finds_no_steady_state():
    assert mser_truncation(cold_start(19)) is None


def per_second(p99s):
    """The checker's per-second buckets with one event per second at that second's p99 (exact enough)."""
    from harness.records.histsummary import bucket_us
    return {"s": np.arange(len(p99s)), "bucket_us": bucket_us(np.asarray(p99s)), "n": np.ones(len(p99s), int)}


def test_the_steady_window_is_reported_with_its_method():
    w = steady_window(per_second(cold_start()), 0.0, 60.0)
    assert w["detected"] and 10 <= w["from_s"] <= 20 and "MSER-5" in w["method"]
    short = steady_window(per_second(cold_start(12)), 0.0, 12.0)
    assert not short["detected"] and short["from_s"] == 0.0 and "needs at least 20" in short["reason"]


# ---------------------------------------------------------------------------------------------- recovery
def test_a_driver_kill_recovers_when_the_lag_is_back_in_its_band():
    """Down from 15 s to 22 s: the backlog is 7 s of traffic; the first batch after the restart reads it all."""
    samples, progress = synthetic_run(down=(15.0, 22.0))
    from harness.analysis.lag import lag_series
    lag = [(s["t"], s["lag"]) for s in lag_series(samples, progress)]
    fault = {"fault": 0, "n": 0, "kind": "driver_kill", "injected_at": T0 + 15.0, "healed_at": T0 + 21.0}
    r = fault_recovery(fault, lag, progress, t0=T0, traffic_end=T0 + 40, run_end=T0 + 45, offered_eps=6000.0,
                       cadence_s=1.0, duplicate_commits_s={T0 + 22.5: 7, T0 + 30: 1}, lost_acked_s={T0 + 16: 3},
                       expected_lost=0)
    assert r["first_data_batch_after_s"] == pytest.approx(7.4, abs=0.05)  # the restart at 22 s + 0.4 s batch
    assert r["recovered"] and 7.4 <= r["time_to_recover_s"] <= 9.1
    assert 40_000 <= r["backlog_peak_events"] <= 48_000 and r["drain_eps"] > 6000
    assert r["duplicates"] == 7 and r["lost"] == 3 and r["batches"] >= 1 and r["after_traffic"] is False


def test_a_fault_that_never_recovers_says_so():
    samples, progress = synthetic_run(capacity=4800.0)
    from harness.analysis.lag import lag_series
    lag = [(s["t"], s["lag"]) for s in lag_series(samples, progress)]
    fault = {"fault": 0, "n": 0, "kind": "network", "injected_at": T0 + 20.0, "healed_at": T0 + 22.0}
    # batches of about 4 s: the troughs of the rising sawtooth dip under the pre-fault peak, its peaks never do
    r = fault_recovery(fault, lag, progress, t0=T0, traffic_end=T0 + 40, run_end=T0 + 40, offered_eps=6000.0,
                       cadence_s=4.0)
    assert r["recovered"] is False and r["time_to_recover_s"] is None and r["drain_eps"] is None


def test_checks_listed_as_not_required_never_decide_the_verdict():
    assert verdict_of([Check("a", True, ""), Check("latency_p99", None, "not set", required=False)]) == "pass"
    assert Check("latency_p99", None, "not set", required=False).as_dict()["status"] == "not required"


def test_an_output_without_per_event_latency_finds_its_steady_state_in_its_lag_every_5_s():
    """Event Hubs samples lag about every 1.8 s: 17 samples over 30 s are blocks of 3 samples (about 5 s), so a
    30 s window still has the four blocks MSER-5 needs; the cold start's backlog is cut."""
    rnd = random.Random(4)
    lag = [(1.8 * i, (20_000.0 if i < 3 else 2_000.0) + rnd.gauss(0, 100)) for i in range(17)]
    w = steady_window({}, 0.0, 30.0, lag=lag)
    assert w["detected"] and w["block_observations"] == 3 and w["from_s"] == pytest.approx(5.4)
    assert w["series"].startswith("consumer lag samples")


def test_the_mean_lag_is_averaged_over_time_whatever_the_samples_phase():
    """1 s samples of a 1 s trigger's sawtooth land at one point of it: the samples' mean depends on that phase,
    the lag averaged over time does not (here: 6,000/s, commits 0.4 s after each batch start, so the lag averages
    6,000 x (0.4 + 1.0 / 2) = 5,400 events)."""
    from harness.analysis.lag import lag_on_grid, lag_series

    samples, progress = synthetic_run()
    shifted = [{**s, "t": s["t"] + 0.5} for s in samples[:-1]]  # the same broker, sampled half a second later
    for s, base in zip(shifted, samples):
        s["end"] = {p: int(v + 6000 * 0.5 / 4) for p, v in base["end"].items()}
    means = []
    for sm in (samples, shifted):
        grid = [v for t, v in lag_on_grid(sm, progress, T0 + 10, T0 + 38)]
        naive = [s["lag"] for s in lag_series(sm, progress) if T0 + 10 <= s["t"] <= T0 + 38]
        means.append((sum(grid) / len(grid), sum(naive) / len(naive)))
    (grid_a, naive_a), (grid_b, naive_b) = means
    assert abs(naive_a - naive_b) > 2000  # the samples' mean moves with their phase
    assert grid_a == pytest.approx(5400, rel=0.05) and grid_b == pytest.approx(5400, rel=0.05)


def test_a_fault_during_an_earlier_ones_catch_up_must_come_back_to_the_band_from_before_both():
    """Two driver kills 8 s apart at 1,000 events/s, a 1 s cadence: before the first the lag peaks at 1,000; the
    first restarted query commits an empty batch and then catches up slowly, the second kill comes while it is
    still 8,000 behind. Coming back to 8,000 is no recovery: the second must reach 1,000 again, after its own
    restarted query's first data batch (a lag within the first's backlog at its empty first batch is not one)."""
    from datetime import datetime, timezone

    from harness.analysis.recovery import recoveries

    def batch(start, secs, rows):
        iso = datetime.fromtimestamp(T0 + start, timezone.utc).isoformat().replace("+00:00", "Z")
        return {"timestamp": iso, "numInputRows": rows, "batchId": int(start),
                "durationMs": {"triggerExecution": int(secs * 1000)}}

    progress = [batch(s, 0.5, 1000) for s in range(0, 10)] + [batch(14.0, 0.3, 0)] + [batch(19.0, 0.3, 0)] + \
        [batch(s, 0.8, 3000) for s in range(22, 40)]
    lag = [{"t": T0 + s, "lag": v} for s, v in
           [(s, 1000.0) for s in range(0, 10)] + [(s, 1000.0 * (s - 9)) for s in range(10, 23)]
           + [(s, max(900.0, 13000.0 - 2000.0 * (s - 22))) for s in range(23, 41)]]
    faults = [{"fault": 0, "n": 0, "kind": "driver_kill", "injected_at": T0 + 10.0},
              {"fault": 0, "n": 1, "kind": "driver_kill", "injected_at": T0 + 18.0}]
    first, second = recoveries(faults, lag, progress, t0=T0, traffic_end=T0 + 40, run_end=T0 + 41,
                               offered_eps=1000.0, cadence_s=1.0)
    assert first["band_from"] is None and first["pre_fault_band_events"] == 1000.0
    assert second["band_from"] == "driver_kill #0" and second["pre_fault_band_events"] == 1000.0
    # back at 1,000 (within 13,000 - 2,000 x (s - 22) <= 1,000 -> s = 28) for both, not at the empty batch
    assert first["recovered_s"] == second["recovered_s"] == 28.0
    assert second["time_to_recover_s"] == 10.0 >= second["first_data_batch_after_s"]
    assert first["overlapped_by"] == ["driver_kill #1"]
