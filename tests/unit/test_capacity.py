"""`harness capacity`: the ramp-and-bisect search against synthetic systems whose capacity is known (it lands within
its resolution, in a bounded number of trials, names the failing trial's limiting factor, and calls a producer
limit a lower bound), each criterion's judgement on real result.json figures, the lag-growth fit, and the
command around it with the pipeline stood in for (overrides, directories, capacity.json after every trial,
exit codes, bad input)."""
import dataclasses
import html
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.commands import capacity as cap
from harness.analysis.sustain import sustain_figures
from harness.commands.capacity import Limits, criterion, TrialOutcome, judge_trial, search
from harness.cli import main
from harness.config import load_scenario
from harness.runner import RunOutcome
from test_config import MINIMAL, write
from test_sustained import figures, iso, synthetic_run

# ------------------------------------------------------------------------------------------------ synthetic systems


def system(capacity: float, producer_max: float = math.inf, fail_factor: str = "lag_growth"):
    """A system that sustains every rate up to `capacity`; above it the lag grows (or `fail_factor` fails); the
    producers cannot offer more than `producer_max`. Records the rates it was asked."""
    asked = []

    def trial(rate: float) -> TrialOutcome:
        asked.append(rate)
        offered = min(rate, producer_max)
        crit = [criterion("producer_rate", offered >= rate * 0.98, offered, rate, f"offered {offered:,.0f}"),
                criterion("lag_growth", True, 0.0, 0.05 * rate, "flat"),
                criterion("processed_rate", True, rate, 0.95 * rate, "processed all"),
                criterion("latency_p99", True, 1500.0, 5000.0, "p99 1,500 ms <= 5,000 ms"),
                criterion("checks", True, None, None, "all passed")]
        if offered > capacity:
            crit = [dataclasses.replace(c, ok=False, detail=f"{fail_factor} over at {offered:,.0f}")
                    if c.name == fail_factor else c for c in crit]
        verdict = "sustained" if all(c.ok is not False for c in crit) else "failed"
        return TrialOutcome(rate, verdict, crit)

    return trial, asked


def resolution(lo: float) -> float:
    return max(cap.RESOLUTION * lo, cap.MIN_STEP_EPS)


@settings(max_examples=200, deadline=None)
@given(true_capacity=st.floats(3000, 300_000), start=st.sampled_from([500, 1000, 3000]))
def test_the_search_lands_within_its_resolution_of_the_true_capacity(true_capacity, start):
    trial, asked = system(true_capacity)
    res = search(trial, start, max_trials=40)
    lo, hi = res.capacity_eps, res.next_eps
    assert res.verdict == "pass" and not res.lower_bound and res.resolution_reached
    assert lo <= true_capacity < hi  # sustained below, failed above
    assert true_capacity - lo <= resolution(lo) and hi - lo <= resolution(lo)
    # bounded: the ramp's doublings, plus the bisection of [lo, 2 lo] down to 10% (at most 4 halvings + 1)
    ramp = math.floor(math.log2(true_capacity / start)) + 2
    assert len(asked) <= ramp + 5
    assert len(set(asked)) == len(asked)  # no rate tried twice
    assert res.limiting_factor == "lag growth"


def test_a_known_capacity_step_by_step():
    trial, asked = system(12_345)
    res = search(trial, 1000)
    assert asked == [1000, 2000, 4000, 8000, 16000, 12000, 14000, 13000]  # 13,000 - 12,000 <= 10% of 12,000
    assert (res.capacity_eps, res.next_eps, res.stop_reason) == (12000, 13000, "resolution")
    assert res.line() == "capacity: 12,000 events/s (next step 13,000 failed: lag growth, lag_growth over at 13,000)"


def test_the_limiting_factor_is_the_one_of_the_failing_trial_nearest_above():
    """Far above capacity only the latency fails; just above it only the lag grows: the nearest failure is named."""
    def trial(rate):
        lag_ok, lat_ok = not 10_000 < rate <= 15_000, rate <= 15_000
        crit = [criterion("producer_rate", True, rate, rate, ""),
                criterion("lag_growth", lag_ok, 0.0, 0.0, "lag grew"), criterion("latency_p99", lat_ok, 0, 0, "p99")]
        return TrialOutcome(rate, "sustained" if lag_ok and lat_ok else "failed", crit)

    res = search(trial, 5000)
    assert [t.limiting_factor for t in res.trials][:3] == [None, None, "latency limit"]
    assert res.capacity_eps == 10_000 and res.limiting_factor == "lag growth" and not res.lower_bound


def test_several_failing_criteria_name_the_first_in_order_and_list_the_rest():
    t = TrialOutcome(9000, "failed", [criterion("producer_rate", True, 9000, 9000, "ok"),
                                      criterion("processed_rate", False, 7200, 8550, "processed 7,200 events/s"),
                                      criterion("latency_p99", False, 7000, 5000, "p99 7,000 ms > 5,000 ms")])
    assert t.limiting_factor == "processing rate under the offered"
    assert t.detail == "processed 7,200 events/s; also latency limit: p99 7,000 ms > 5,000 ms"


def test_a_headroom_no_scenario_asked_for_never_fails_a_trial():
    room = dataclasses.replace(criterion("headroom", False, 1350, 1000, "no headroom: batch p50 1,350 ms > ..."),
                               required=False)
    kept_up = [criterion("producer_rate", True, 9000, 9000, "ok"), criterion("lag_growth", True, 0, 450, "flat"), room]
    assert cap.failing(kept_up) == [] and TrialOutcome(9000, "sustained", kept_up).limiting_factor is None
    assert cap.failing(kept_up[:2] + [dataclasses.replace(room, required=True)])[0].name == "headroom"


def test_a_producer_limit_makes_the_capacity_a_lower_bound():
    trial, asked = system(50_000, producer_max=7_000)
    res = search(trial, 1000)
    assert res.limiting_factor == "producer limit" and res.lower_bound and res.verdict == "pass"
    assert res.capacity_eps <= 7_000 < res.next_eps and 7_000 - res.capacity_eps <= resolution(res.capacity_eps)
    assert res.line().startswith("capacity: at least 7,000 events/s (a lower bound: next step 7,500 failed: "
                                 "producer limit, offered 7,000)")
    assert "a lower bound" in res.line() and "producer limit" in res.line()


def test_the_query_failing_below_the_producer_limit_is_not_a_lower_bound():
    trial, _ = system(5_000, producer_max=7_000)
    res = search(trial, 1000)
    assert res.limiting_factor == "lag growth" and not res.lower_bound


def test_a_failing_start_rate_steps_down_then_bisects():
    trial, asked = system(500)
    res = search(trial, 1000)
    assert asked[:2] == [1000, 500] and res.capacity_eps <= 500 < res.next_eps
    assert res.next_eps - res.capacity_eps <= resolution(res.capacity_eps) and res.verdict == "pass"


def test_nothing_sustained_down_to_the_floor_means_no_capacity():
    trial, asked = system(50)  # below the 100 events/s step
    res = search(trial, 1000)
    assert asked == [1000, 500, 250, 125] and res.capacity_eps is None and res.verdict == "fail"
    assert res.stop_reason == "start_failed"
    assert res.line().startswith("capacity: none found, every rate down to 125 events/s failed (lag growth")


def test_trials_run_out_before_anything_fails():
    trial, asked = system(1e9)
    res = search(trial, 1000, max_trials=3)
    assert asked == [1000, 2000, 4000] and res.capacity_eps == 4000 and res.lower_bound
    assert res.limiting_factor == cap.TRIAL_LIMIT and res.stop_reason == "max_trials"
    assert res.line() == ("capacity: at least 4,000 events/s (a lower bound: every trial up to 4,000 events/s was "
                          "sustained; the search stopped (max trials reached) before a rate failed)")


def test_trials_run_out_during_the_bisection():
    trial, asked = system(12_345)
    res = search(trial, 1000, max_trials=6)
    assert asked == [1000, 2000, 4000, 8000, 16000, 12000]
    assert res.capacity_eps == 12000 and res.next_eps == 16000 and not res.resolution_reached
    assert not res.lower_bound and "--max-trials reached" in res.bounded_by


def test_an_interrupted_search_keeps_its_trials_and_is_unjudged():
    inner, _ = system(12_345)
    seen = []

    def trial(rate):
        if rate == 4000:
            return TrialOutcome(rate, "unjudged", exit_code=130, note="interrupted")
        return inner(rate)

    res = search(trial, 1000, after_trial=seen.append)
    assert res.interrupted and res.verdict == "unjudged" and [t.rate for t in res.trials] == [1000, 2000, 4000]
    assert res.capacity_eps == 2000 and res.line() == ("capacity: unjudged, interrupted after 3 trials "
                                                       "(2,000 events/s sustained so far)")
    assert [len(s.trials) for s in seen] == [1, 2, 3]


# ------------------------------------------------------------------------------------------------ judging real runs
T_WINDOW = 1795393148.7972336  # traffic_start of the run below


def real_failed_result() -> dict:
    """From a real run on this project's 2-core machine, trimmed to what capacity reads: `harness run steady` at a
    constant 6,000 events/s, 8 s warm-up, 20 s window, while other work loaded the machine: the first batch
    with data took 27 s, so the window saw one 161,421-row batch of 18 s."""
    return {
        "schema_version": 2, "scenario": "steady", "backend": "kafka", "verdict": "pass", "unjudged_reason": None,
        "checks": [{"name": "drained", "ok": True, "detail": "query reached end offsets {0: 24042, ...}"},
                   {"name": "no_loss", "ok": True, "detail": "0 acked events never delivered (allowed 0; ...)"},
                   {"name": "no_duplicates", "ok": True, "detail": "0 duplicate deliveries (allowed 0)"},
                   {"name": "no_skipped_sends", "ok": True, "detail": "0 scheduled events skipped by the pacer"},
                   {"name": "produce_rate", "ok": True, "detail": "168000 produced of 168000 scheduled (1.0000, "
                                                                  "need >= 0.95)"},
                   {"name": "order", "ok": True, "detail": "0 out-of-order events per producer and partition"}],
        "counts": {"produced": 168000, "acked": 168000, "delivered_unique": 168000, "duplicates": 0, "lost": 0,
                   "expected_lost": 0, "unread": 0, "failed": 0, "failed_expected": 0, "delivered_unacked": 0,
                   "misplaced": 0, "order_violations": 0, "sink_rows": 168000, "pacer_skipped": 0,
                   "unacked_at_exit": 0},
        "throughput": {"produce_eps": 6000.05, "process_rps": 8927.658868425418, "target_eps": 6000.0},
        "latency_ms": {"p50": 28229.631, "p90": 36241.407, "p99": 38043.647, "p999": 38207.487, "max": 38240.255},
        "batches": 3,
        "batch_stats": {"count": 1, "with_data": 1, "input_rows": 161421, "process_rps": 8927.658868425418,
                        "duration_ms": {"addBatch": {"p50": 17435.0, "p99": 17435.0, "max": 17435.0},
                                        "triggerExecution": {"p50": 18081.0, "p99": 18081.0, "max": 18081.0}},
                        "known_backlog_rows": {"max": 0, "final": 0},
                        "rate_limited": {"batches": 0, "of": 1, "backlog_left_max": 0},
                        "rows_per_batch": {"p50": 161421.0, "max": 161421.0}},
        "lag_events": {"max": 165365, "mean": 105091.32, "final": 0, "samples": 50},
        "duration_s": 111.136, "traffic_s": 20.0,
        "warmup": {"s": 8.0, "measured_from": T_WINDOW, "events_delivered": 47999},
        "sustain": real_sustain(),
    }


# the same run's lag (harness.analysis.lag.lag_series), seconds after the first sample at T_WINDOW - 9.39
REAL_LAG = [(0.0, 0), (1.0, 0), (2.0, 0), (3.0, 8860), (4.0, 14538), (5.0, 20966), (6.0, 26830), (7.0, 33877),
            (8.0, 38864), (9.0, 44953), (10.0, 50844), (11.0, 56733), (12.0, 63052), (13.0, 68894), (14.0, 75721),
            (15.0, 80962), (16.0, 85064), (17.1, 92716), (18.1, 98998), (19.1, 104514), (20.1, 111287),
            (21.1, 117458), (22.1, 123656), (23.1, 128997), (24.1, 135246), (25.1, 141432), (26.1, 147562),
            (27.1, 152587), (28.1, 159012), (29.1, 165365), (30.1, 161421), (31.1, 161421), (32.1, 161421)]


def real_sustain() -> dict:
    """The run's `sustained` figures over its window's second half (harness.analysis.sustain): the lag samples
    as the broker's end offsets (nothing committed during the window), the one batch in it."""
    t0 = T_WINDOW - 9.39
    samples = [{"t": t0 + dt, "end": {"0": lag}} for dt, lag in REAL_LAG]
    batch = {"batchId": 1, "timestamp": iso(T_WINDOW + 12.0), "numInputRows": 161421,
             "durationMs": {"triggerExecution": 18081}, "sources": [{"endOffset": '{"events": {"0": 161421}}'}]}
    return sustain_figures(samples, [batch], T_WINDOW + 10.0, T_WINDOW + 20.0)


def sustained_result() -> dict:
    """The same shape with the figures of a trial that kept up: 1 s batches taking 420 ms, p99 1.9 s."""
    r = real_failed_result()
    r["batch_stats"]["duration_ms"]["triggerExecution"] = {"p50": 420.0, "p99": 900.0, "max": 1100.0}
    r["batch_stats"]["count"] = r["batch_stats"]["with_data"] = 20
    r["latency_ms"] = {"p50": 980.0, "p90": 1500.0, "p99": 1900.0, "p999": 2100.0, "max": 2300.0}
    r["sustain"] = figures(*synthetic_run(rate=6000.0, batch_s=0.42))  # 1 s batches taking 420 ms
    return r


LIMITS = Limits(trigger_interval_ms=1000.0)


def by_name(criteria):
    return {c.name: c for c in criteria}


def test_the_real_overloaded_run_fails_on_its_latency_when_one_batch_hides_its_lag_trend():
    c = by_name(judge_trial(6000, real_failed_result(), LIMITS))
    assert list(c) == list(cap.CRITERIA)
    assert c["producer_rate"].ok and c["checks"].ok
    # the lag rose at about R all through the second half (no commit in it), but one 18 s batch spans more than
    # that half: the lag's trend cannot be told from its sawtooth, nor a processed rate from no commit
    lag_c = c["lag_growth"]
    assert 5500 < lag_c.value < 6500 and lag_c.figures["cadence_s"] == 18.081 and lag_c.ok is None
    assert c["processed_rate"].ok is None and c["processed_rate"].detail.startswith("unknown: 0 commits")
    # the 18 s batch is no headroom, recorded; no scenario asked for headroom, so it does not fail the trial
    assert c["headroom"].status == "not required" and c["headroom"].value == 18081.0
    assert c["headroom"].detail.startswith("no headroom: batch p50 18,081 ms > the 1,000 ms trigger")
    # what fails it is what such a batch does to every event: 38 s of latency
    assert c["latency_p99"].ok is False and c["latency_p99"].detail == "p99 38,044 ms > 5,000 ms"
    t = TrialOutcome(6000, "failed", list(c.values()))
    assert t.limiting_factor == "latency limit" and [x.name for x in t.failing] == ["latency_p99"]


def test_a_trial_that_kept_up_is_sustained():
    criteria = judge_trial(6000, sustained_result(), LIMITS)
    assert all(c.ok for c in criteria), [c for c in criteria if not c.ok]


def test_a_trial_behind_the_offered_rate_fails_on_its_lag_growth_the_runs_own_definition():
    r = sustained_result()
    r["sustain"] = figures(*synthetic_run(rate=6000.0, capacity=4800.0, batch_s=0.1))
    c = by_name(judge_trial(6000, r, LIMITS))
    assert c["lag_growth"].ok is False and c["processed_rate"].ok is False
    t = TrialOutcome(6000, "failed", list(c.values()))
    assert t.limiting_factor == "lag growth" and [x.name for x in t.failing] == ["lag_growth", "processed_rate"]


def test_a_trial_whose_batches_overrun_the_trigger_with_a_flat_lag_is_sustained():
    """Batches of 1,350 ms on a 1 s trigger that read all there is each time: Spark starts each at the end of the
    last, the lag stays flat and all of the offered rate is processed; what it lacks is headroom."""
    r = sustained_result()
    r["sustain"] = figures(*synthetic_run(rate=6000.0, batch_s=1.35))
    c = by_name(judge_trial(6000, r, LIMITS))
    assert c["lag_growth"].ok and c["processed_rate"].ok and c["headroom"].ok is False
    assert cap.failing(list(c.values())) == []


@pytest.mark.parametrize("produce_eps,skipped,ok", [(6000.05, 0, True), (5890.0, 0, True), (5870.0, 0, False),
                                                     (6130.0, 0, False), (6000.0, 12, False)])
def test_producer_rate_within_2_percent_and_no_pacer_skips(produce_eps, skipped, ok):
    r = sustained_result()
    r["throughput"]["produce_eps"], r["counts"]["pacer_skipped"] = produce_eps, skipped
    c = by_name(judge_trial(6000, r, LIMITS))["producer_rate"]
    assert c.ok is ok and c.figures["pacer_skipped"] == skipped
    if not ok:
        t = TrialOutcome(6000, "failed", judge_trial(6000, r, LIMITS))
        assert t.limiting_factor == "producer limit"


def test_headroom_against_the_trigger_is_recorded_and_a_criterion_only_with_min_headroom():
    r = sustained_result()
    r["sustain"]["batch_p50_ms"] = 1350.0
    c = by_name(judge_trial(6000, r, LIMITS))["headroom"]
    assert c.ok is False and c.status == "not required" and c.limit == 1000.0
    assert c.detail == ("no headroom: batch p50 1,350 ms > the 1,000 ms trigger: a burst will fall behind "
                        "(30 batches; not required without checks.min_headroom)")
    assert by_name(judge_trial(6000, r, Limits(trigger_interval_ms=2000.0)))["headroom"].ok
    zero = by_name(judge_trial(6000, r, Limits(trigger_interval_ms=0.0)))["headroom"]
    assert zero.status == "not required" and "back to back" in zero.detail
    # required: 20% of a 2 s trigger idle is a p50 of at most 1,600 ms; 1,350 ms leaves 32.5%
    need = by_name(judge_trial(6000, r, Limits(trigger_interval_ms=2000.0, min_headroom=0.2)))["headroom"]
    assert (need.status, need.value, need.limit) == ("pass", 1350.0, 1600.0)
    assert need.figures["idle_fraction"] == pytest.approx(0.325)
    tight = judge_trial(6000, r, Limits(trigger_interval_ms=2000.0, min_headroom=0.4))  # at most 1,200 ms
    assert by_name(tight)["headroom"].status == "fail"
    assert TrialOutcome(6000, "failed", tight).limiting_factor == "no headroom"


def test_the_runs_own_required_headroom_is_not_counted_again_as_a_failed_check():
    r = sustained_result()
    r["sustain"]["batch_p50_ms"] = 1350.0
    r["verdict"] = "fail"
    r["checks"].append({"name": "headroom", "ok": False, "status": "fail", "detail": "no headroom: ..."})
    limits = Limits(trigger_interval_ms=1000.0, min_headroom=0.0)
    c = by_name(judge_trial(6000, r, limits))
    assert c["checks"].ok is True and c["headroom"].status == "fail"
    assert [x.name for x in cap.failing(list(c.values()))] == ["headroom"]
    r["checks"][1] = {"name": "no_loss", "ok": False, "detail": "3 acked events never delivered (allowed 0)"}
    c = by_name(judge_trial(6000, r, limits))["checks"]
    assert c.ok is False and c.detail.startswith("failed no_loss (3 acked events never delivered")


def test_latency_against_the_limit():
    r = sustained_result()
    assert by_name(judge_trial(6000, r, Limits(1000.0, latency_p99_ms=2000.0)))["latency_p99"].ok
    c = by_name(judge_trial(6000, r, Limits(1000.0, latency_p99_ms=1500.0)))["latency_p99"]
    assert c.ok is False and c.detail == "p99 1,900 ms > 1,500 ms"


def test_failed_checks_fail_the_checks_criterion_and_an_unjudged_run_leaves_the_trial_unjudged():
    r = sustained_result()
    r["verdict"] = "fail"
    r["checks"][1] = {"name": "no_loss", "ok": False, "detail": "3 acked events never delivered (allowed 0)"}
    c = by_name(judge_trial(6000, r, LIMITS))["checks"]
    assert c.ok is False and c.detail.startswith("failed no_loss (3 acked events never delivered")
    assert cap.trial_verdict(judge_trial(6000, r, LIMITS), None) == ("failed", "")
    r["verdict"], r["unjudged_reason"] = "unjudged", "reading the sink failed: boom"
    c = by_name(judge_trial(6000, r, LIMITS))["checks"]
    assert c.ok is None and "could not be judged: reading the sink failed" in c.detail
    assert cap.trial_verdict(judge_trial(6000, r, LIMITS), None) == ("unjudged", c.detail)


def test_lag_growth_needs_a_rising_slope_and_a_large_lag_at_the_end():
    def lag(values, seconds=20):
        return {"judged_s": float(seconds), "samples": seconds + 1, "offered_eps": 6000.0, "batch_p50_ms": 400.0,
                "lag": {"slope_eps": values[0], "slope_se_eps": values[1], "end_lag": values[2], "max_lag": values[2]}}
    # rising 400/s (> 5% of 6,000 = 300) but still under 2 intervals of traffic (12,000) at the end: not growth
    assert by_name(judge_trial(6000, {**sustained_result(), "sustain": lag((400, 5, 8000))}, LIMITS))["lag_growth"].ok
    c = by_name(judge_trial(6000, {**sustained_result(), "sustain": lag((800, 5, 21000))}, LIMITS))["lag_growth"]
    assert c.ok is False and c.figures["end_lag_max"] == 12000
    # batches of 3 s (over the 1 s trigger): the query commits every 3 s, so 21,000 behind is within 2 x 3 s of R
    slow = lag((800, 5, 21000))
    slow["batch_p50_ms"] = 3000.0
    c = by_name(judge_trial(6000, {**sustained_result(), "sustain": slow}, LIMITS))["lag_growth"]
    assert c.ok and c.figures["end_lag_max"] == 36000


# ------------------------------------------------------------------------------------------------ the command
TRIGGER_1S = '[spark]\ntrigger = { kind = "processingTime", interval = "1 second" }\n'


def overloaded(rate: float) -> dict:
    """The sustained figures of a query that processes 80% of `rate` in 1.5 s batches (its lag grows by a fifth of
    the rate each second: 6 s of traffic behind at the end of a 30 s window)."""
    return {"judged_s": 30.0, "samples": 31, "offered_eps": rate, "processed_eps": 0.8 * rate, "commits": 20,
            "batch_p50_ms": 1500.0, "batches": 20,
            "lag": {"slope_eps": 0.2 * rate, "slope_se_eps": 0.01 * rate, "end_lag": 6.0 * rate, "max_lag": 6.0 * rate}}


def fake_pipeline(monkeypatch, true_capacity: float, interrupt_at: float | None = None,
                  p50_ms_per_eps: float | None = None):
    """Stand in for harness.runner.run_one: an ordinary scenario per trial (checked), a result that keeps up below
    `true_capacity` (its batch p50 `p50_ms_per_eps` x the rate when given) and falls behind above it."""
    asked = []
    monkeypatch.setenv("HARNESS_SHARED_BROKER", "0")  # no broker started for the fake trials

    def fake_run(name, overrides, out, console, backend=None):
        scenario, _, _ = load_scenario(name, overrides)
        rate = scenario.producers.rate.eps
        asked.append((overrides, out.name, rate, scenario.producers.duration_s, scenario.producers.warmup_s))
        if rate == interrupt_at:
            raise KeyboardInterrupt
        out.mkdir(parents=True, exist_ok=True)
        r = sustained_result()
        r["throughput"]["produce_eps"] = rate
        if rate > true_capacity:
            r["sustain"] = overloaded(rate)
        elif p50_ms_per_eps is not None:
            r["sustain"]["batch_p50_ms"] = p50_ms_per_eps * rate
        (out / "result.json").write_text(json.dumps(r))
        return RunOutcome(out, r, 0)

    monkeypatch.setattr("harness.runner.run_one", fake_run)
    return asked


def test_the_command_runs_ordinary_trials_and_writes_capacity_json(tmp_path, monkeypatch, capsys):
    asked = fake_pipeline(monkeypatch, 4_321)
    path = write(tmp_path, MINIMAL + TRIGGER_1S)
    out = tmp_path / "cap"
    code = main(["capacity", path, "--set", "stream.partitions=4", "--out", str(out), "--trial-s", "7",
                 "--start-eps", "1000", "--quiet"])
    assert code == 0
    assert asked[0][0] == ["stream.partitions=4", 'producers.rate={kind="constant", eps=1000}',
                           "producers.duration_s=7", f"producers.warmup_s={cap.DEFAULT_WARMUP_S:g}",
                           'producers.warmup_until="fixed"', cap.TRIAL_DECLARES]
    assert [a[1] for a in asked] == ["00-eps=1000", "01-eps=2000", "02-eps=4000", "03-eps=8000", "04-eps=6000",
                                     "05-eps=5000", "06-eps=4500", "07-eps=4200"]
    assert {a[3] for a in asked} == {7.0} and {a[4] for a in asked} == {cap.DEFAULT_WARMUP_S}
    saved = json.loads((out / "capacity.json").read_text())
    assert saved["verdict"] == "pass" and saved["capacity_eps"] == 4200 and saved["next_eps"] == 4500
    assert saved["limiting_factor"] == "lag growth" and saved["lower_bound"] is False
    trial = saved["trials"][3]
    assert trial["rate_eps"] == 8000 and trial["run_dir"] == "03-eps=8000"
    assert set(trial["criteria"]) == set(cap.CRITERIA) and trial["criteria"]["producer_rate"]["value"] == 8000
    assert trial["criteria"]["headroom"]["status"] == "not required"
    md = (out / "capacity.md").read_text()
    # at 4,500/s: slope 900 ± 2 x 45, 27,000 behind against 2 x 4,500 x the 1.5 s cadence; 3,600 processed
    assert ("**capacity: 4,200 events/s (next step 4,500 failed: lag growth, lag grew 900 ± 90 events/s (+20.0% of "
            "the offered 4,500/s, limit 5%), 27,000 events (6.0 s) behind at the end (limit 13,500))**") in md
    assert "also processing rate under the offered: processed 3,600 events/s = 80.0% of the offered 4,500/s" in md
    # the 1,500 ms batches are no headroom, a figure without a cross: no scenario asked for headroom
    assert "| 3 | 8,000 | failed | 8,000 | 0 | 1,500 | 1,600 ✗ | 48,000 | 6,400 ✗ | 1,900 | pass | lag growth |" in md
    assert capsys.readouterr().out.strip().splitlines()[-1] == saved["summary"]
    page = (out / "capacity.html").read_text()
    assert html.escape(saved["summary"]) in page  # the answer first
    assert page.count('class="chart"') == 4  # p99, batch p50, lag slope, processed against the offered rate


def test_the_scenario_latency_limit_is_kept_and_a_rate_above_capacity_fails_on_its_lag(tmp_path, monkeypatch,
                                                                                          capsys):
    fake_pipeline(monkeypatch, 2_500)
    path = write(tmp_path, MINIMAL + TRIGGER_1S + '[checks]\nlatency_p99_ms = 3000\n')
    out = tmp_path / "cap"
    assert main(["capacity", path, "--out", str(out), "--trial-s", "5", "--quiet"]) == 0
    saved = json.loads((out / "capacity.json").read_text())
    assert saved["settings"]["start_eps"] == 100  # the scenario's own constant rate
    assert saved["thresholds"]["sustained"]["trigger_interval_ms"] == 1000.0
    assert saved["thresholds"]["latency_p99"] == {"max_ms": 3000.0, "from": "checks.latency_p99_ms"}
    assert saved["capacity_eps"] <= 2500 < saved["next_eps"]
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("capacity: 2,") and "failed: lag growth, lag grew " in line


def test_batches_over_the_trigger_bound_the_capacity_only_with_min_headroom(tmp_path, monkeypatch, capsys):
    """A query that keeps up at every rate, its batch p50 0.2 ms per event/s (800 ms at 4,000/s). Without
    checks.min_headroom nothing bounds it; with 0.2, 20% of the 1 s trigger must stay idle: p50 <= 800 ms, so the
    capacity is 4,000/s (1,000, 2,000, 4,000 pass; 8,000, 6,000, 5,000, 4,500 and 4,200, the midpoint 4,250 to a
    step of 100, fail; 4,200 - 4,000 is within 10%)."""
    asked = fake_pipeline(monkeypatch, math.inf, p50_ms_per_eps=0.2)
    path = write(tmp_path, MINIMAL + TRIGGER_1S)
    assert main(["capacity", path, "--out", str(tmp_path / "free"), "--start-eps", "1000", "--max-trials", "4",
                 "--quiet"]) == 0
    free = json.loads((tmp_path / "free" / "capacity.json").read_text())
    assert [t["verdict"] for t in free["trials"]] == ["sustained"] * 4 and free["lower_bound"]
    assert free["trials"][3]["criteria"]["headroom"]["ok"] is False  # 1,600 ms: recorded, not failing
    asked.clear()
    path = write(tmp_path, MINIMAL + TRIGGER_1S + "[checks]\nmin_headroom = 0.2\n")
    assert main(["capacity", path, "--out", str(tmp_path / "room"), "--start-eps", "1000", "--quiet"]) == 0
    room = json.loads((tmp_path / "room" / "capacity.json").read_text())
    assert [a[2] for a in asked] == [1000, 2000, 4000, 8000, 6000, 5000, 4500, 4200]
    assert (room["capacity_eps"], room["next_eps"], room["limiting_factor"]) == (4000, 4200, "no headroom")
    assert room["thresholds"]["headroom"] == {"required": True, "min_idle_fraction": 0.2, "batch_p50_max_ms": 800.0}
    assert room["trials"][-1]["detail"] == ("too little headroom: batch p50 840 ms leaves 16% of the 1,000 ms "
                                            "trigger idle, need 20% idle (p50 <= 800 ms) (30 batches)")
    assert "batch p50 <= 800 ms, 20% of the trigger left idle (checks.min_headroom)" in \
        (tmp_path / "room" / "capacity.md").read_text()


def test_the_start_rate_failing_exits_1(tmp_path, monkeypatch, capsys):
    fake_pipeline(monkeypatch, 50)
    path = write(tmp_path, MINIMAL + TRIGGER_1S)
    assert main(["capacity", path, "--out", str(tmp_path / "c"), "--quiet"]) == 1
    assert "every rate down to 100 events/s failed" in capsys.readouterr().out


def test_ctrl_c_keeps_what_was_measured_unjudged(tmp_path, monkeypatch):
    asked = fake_pipeline(monkeypatch, 10_000, interrupt_at=4000)
    path = write(tmp_path, MINIMAL)
    out = tmp_path / "cap"
    assert main(["capacity", path, "--out", str(out), "--start-eps", "1000", "--quiet"]) == 130
    saved = json.loads((out / "capacity.json").read_text())
    assert len(asked) == 3 and saved["verdict"] == "unjudged" and saved["capacity_eps"] == 2000
    assert [t["verdict"] for t in saved["trials"]] == ["sustained", "sustained", "unjudged"]


def test_capacity_json_is_rewritten_after_every_trial(tmp_path, monkeypatch):
    seen = []
    inner = fake_pipeline(monkeypatch, 3_000)
    import harness.runner as runner
    real_fake = runner.run_one

    def spy(name, overrides, out, console, backend=None):
        cap_json = out.parent / "capacity.json"
        seen.append(len(json.loads(cap_json.read_text())["trials"]) if cap_json.exists() else 0)
        return real_fake(name, overrides, out, console, backend)

    monkeypatch.setattr("harness.runner.run_one", spy)
    path = write(tmp_path, MINIMAL + TRIGGER_1S)
    main(["capacity", path, "--out", str(tmp_path / "cap"), "--start-eps", "1000", "--quiet"])
    assert seen == list(range(len(inner)))


@pytest.mark.parametrize("argv,message", [
    (["--trial-s", "0"], "--trial-s 0.0: must be a positive number"),
    (["--max-trials", "0"], "--max-trials 0: must be a positive integer"),
    (["--start-eps", "-5"], "--start-eps -5.0: must be a positive number"),
    (["--latency-p99-ms", "0"], "--latency-p99-ms 0.0"),
    (["--set", "stream.partitions=0"], "stream.partitions"),
    (["--set", "producers.batch_size=many"], "producers.batch_size"),
    (["--set", 'spark.trigger={kind="availableNow"}'], "spark.trigger.kind = 'availableNow'"),
    (["--set", 'spark.trigger.interval="soon"'], "spark.trigger.interval"),
])
def test_bad_input_exits_2_naming_the_field_before_any_trial(tmp_path, monkeypatch, capsys, argv, message):
    asked = fake_pipeline(monkeypatch, 1000)
    path = write(tmp_path, MINIMAL)
    assert main(["capacity", path, "--out", str(tmp_path / "cap"), "--quiet"] + argv) == 2
    assert message in capsys.readouterr().err
    assert asked == [] and not (tmp_path / "cap").exists()


def test_the_default_latency_limit_leaves_room_for_a_long_trigger(tmp_path):
    five = write(tmp_path, MINIMAL + '[spark]\ntrigger = { kind = "processingTime", interval = "5 seconds" }\n')
    limits = cap.plan(five, [], latency_p99_ms=None, trial_s=10, max_trials=3, start_eps=None)["limits"]
    assert (limits.latency_p99_ms, limits.trigger_interval_ms) == (15000.0, 5000.0)
    assert limits.latency_from == "default: 3 x the trigger interval"
    given = cap.plan(five, [], latency_p99_ms=2500, trial_s=10, max_trials=3, start_eps=None)["limits"]
    assert (given.latency_p99_ms, given.latency_from) == (2500.0, "--latency-p99-ms")
    (tmp_path / "one").mkdir()
    one = write(tmp_path / "one", MINIMAL + TRIGGER_1S)
    assert cap.plan(one, [], latency_p99_ms=None, trial_s=10, max_trials=3, start_eps=None)["limits"].latency_p99_ms \
        == cap.DEFAULT_LATENCY_P99_MS
