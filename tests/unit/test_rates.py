"""Rate shapes: closed-form integrals vs numeric integration, exact inverses."""

import math

import numpy as np
import pytest
from pydantic import TypeAdapter

from harness.producers.rates import (
    INVERSE_TOL_S,
    PeriodicRate,
    PiecewiseLinear,
    SequenceOfPhases,
    SineWave,
    SumOfRates,
    make_rate,
)
from harness.producers.spec import RateSpec

TA = TypeAdapter(RateSpec)


def R(d, base_dir=None):
    return make_rate(TA.validate_python(d), base_dir)


SHAPES = {
    "constant": {"kind": "constant", "eps": 250},
    "steps": {"kind": "steps", "steps": [{"at_s": 1, "eps": 10}, {"at_s": 3, "eps": 0}, {"at_s": 4.5, "eps": 50}]},
    "burst": {"kind": "burst", "base_eps": 100, "period_s": 1, "duration_s": 0.2, "factor": 10},
    "burst_offset": {"kind": "burst", "base_eps": 40, "period_s": 0.7, "duration_s": 0.05, "factor": 20, "offset_s": 0.33},
    "pauses": {"kind": "burst", "base_eps": 80, "period_s": 2, "duration_s": 0.5, "factor": 0},
    "ramp_up": {"kind": "ramp", "from_eps": 10, "to_eps": 1000, "duration_s": 8},
    "ramp_down": {"kind": "ramp", "from_eps": 400, "to_eps": 0, "duration_s": 6},
    "sine": {"kind": "sine", "mean_eps": 100, "amplitude_eps": 100, "period_s": 3.7, "phase_s": 0.4},
    "spike": {"kind": "spike", "base_eps": 20, "at_s": 2, "duration_s": 0.25, "eps": 2000},
    "sum_pl": {"kind": "sum", "parts": [{"kind": "constant", "eps": 5}, {"kind": "ramp", "from_eps": 0, "to_eps": 50, "duration_s": 4}]},
    "sum_mixed": {
        "kind": "sum",
        "parts": [
            {"kind": "constant", "eps": 30},
            {"kind": "burst", "base_eps": 10, "period_s": 1, "duration_s": 0.1, "factor": 5},
            {"kind": "sine", "mean_eps": 20, "amplitude_eps": 15, "period_s": 2.5},
        ],
    },
    "sequence": {
        "kind": "sequence",
        "phases": [
            {"duration_s": 2, "rate": {"kind": "constant", "eps": 10}},
            {"duration_s": 3, "rate": {"kind": "sine", "mean_eps": 50, "amplitude_eps": 20, "period_s": 2}},
            {"duration_s": 1.5, "rate": {"kind": "ramp", "from_eps": 0, "to_eps": 100, "duration_s": 1}},
        ],
    },
    "sequence_repeat": {
        "kind": "sequence",
        "repeat": True,
        "phases": [
            {"duration_s": 1.5, "rate": {"kind": "constant", "eps": 10}},
            {"duration_s": 2, "rate": {"kind": "ramp", "from_eps": 0, "to_eps": 100, "duration_s": 2}},
        ],
    },
}


def numeric_integral(rate, t_end, n=400_001):
    ts = np.linspace(0.0, t_end, n)
    mids = 0.5 * (ts[1:] + ts[:-1])
    vals = rate.rate_array(mids) * np.diff(ts)
    return ts, np.concatenate([[0.0], np.cumsum(vals)])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_cumulative_matches_numeric_integration(name):
    r = R(SHAPES[name])
    ts, num = numeric_integral(r, 12.0)
    exact = r.cumulative_array(ts)
    # midpoint rule: only cells straddling a discontinuity err, by < jump * dt
    dt = ts[1] - ts[0]
    assert np.max(np.abs(exact - num)) < 2000 * dt * 20 + 1e-6
    assert np.max(np.abs(exact - num)) / max(1.0, exact[-1]) < 2e-3
    assert np.all(np.diff(exact) >= -1e-9), "cumulative must be non-decreasing"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_rate_never_negative(name):
    r = R(SHAPES[name])
    ts = np.linspace(-1, 30, 50_001)
    assert np.all(r.rate_array(ts) >= 0)
    assert np.all(r.rate_array(np.array([-5.0, -0.001])) == 0)
    assert r.cumulative(-3.0) == 0.0


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_inverse_is_smallest_time_reaching_n(name):
    r = R(SHAPES[name])
    top = r.cumulative(11.0)
    ns = np.linspace(0.5, top, 997)
    t = r.inverse_cumulative_array(ns)
    c = r.cumulative_array(t)
    rmax = float(np.max(r.rate_array(np.linspace(0, 12, 20001))))
    # reaches n (up to float rounding) ...
    assert np.all(c >= ns - 1e-7 * np.maximum(1, ns))
    # ... and is no later than the exact time by more than the tolerance
    before = r.cumulative_array(np.maximum(t - 2 * INVERSE_TOL_S, 0.0))
    assert np.all(before < ns + 1e-9)
    assert np.all(c - ns <= rmax * 2 * INVERSE_TOL_S + 1e-7 * np.maximum(1, ns))
    assert np.all(np.diff(t) >= 0)
    # scalar agrees with the array form
    for n in (ns[0], ns[500], ns[-1]):
        assert r.inverse_cumulative(float(n)) == pytest.approx(float(r.inverse_cumulative_array([n])[0]), abs=2e-7)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_scalar_and_array_agree(name):
    r = R(SHAPES[name])
    ts = [0.0, 0.05, 0.2, 0.99, 1.0, 2.0, 3.3, 7.77]
    assert r.rate_array(np.array(ts)).tolist() == pytest.approx([r.rate(t) for t in ts])
    assert r.cumulative_array(np.array(ts)).tolist() == pytest.approx([r.cumulative(t) for t in ts])


def test_constant_closed_form():
    r = R({"kind": "constant", "eps": 100})
    assert isinstance(r, PiecewiseLinear)
    assert r.cumulative(2.5) == 250.0
    assert r.inverse_cumulative(250) == 2.5
    assert r.inverse_cumulative(0) == 0.0
    assert r.total == math.inf
    assert R({"kind": "constant", "eps": 0}).inverse_cumulative(1) == math.inf


def test_steps_closed_form():
    r = R(SHAPES["steps"])  # 0 before 1 s, 10 on [1,3), 0 on [3,4.5), 50 after
    assert r.rate(0.5) == 0 and r.rate(1.0) == 10 and r.rate(2.999) == 10 and r.rate(3.0) == 0 and r.rate(4.5) == 50
    assert r.cumulative(1.0) == 0
    assert r.cumulative(3.0) == pytest.approx(20)
    assert r.cumulative(4.5) == pytest.approx(20)
    assert r.cumulative(5.5) == pytest.approx(70)
    assert r.inverse_cumulative(1) == pytest.approx(1.1)
    assert r.inverse_cumulative(20) == pytest.approx(3.0)  # earliest time with 20 done, not 4.5
    assert r.inverse_cumulative(20.5) == pytest.approx(4.51)


def test_ramp_closed_form_and_hold():
    r = R({"kind": "ramp", "from_eps": 0, "to_eps": 100, "duration_s": 10})
    assert r.cumulative(10) == pytest.approx(500)
    assert r.cumulative(12) == pytest.approx(700)
    assert r.rate(5) == pytest.approx(50) and r.rate(100) == 100
    assert r.inverse_cumulative(500) == pytest.approx(10)
    assert r.inverse_cumulative(125) == pytest.approx(5)  # 5 * t^2 = 125
    assert r.inverse_cumulative(600) == pytest.approx(11)


def test_ramp_to_zero_is_finite():
    r = R(SHAPES["ramp_down"])
    assert r.total == pytest.approx(1200)
    assert r.inverse_cumulative(1200) == pytest.approx(6)
    assert r.inverse_cumulative(1201) == math.inf
    assert r.cumulative(math.inf) == pytest.approx(1200)


def test_burst_exact_event_times():
    r = R(SHAPES["burst"])  # 1000 eps on [k, k+0.2), 100 eps otherwise
    assert r.cumulative(1.0) == pytest.approx(200 + 80)
    assert r.cumulative(10.0) == pytest.approx(2800)
    assert r.rate(3.1) == 1000 and r.rate(3.2) == 100 and r.rate(3.99) == 100
    ns = np.arange(1, 281)
    t = r.inverse_cumulative_array(ns)
    expected = np.where(ns <= 200, ns / 1000.0, 0.2 + (ns - 200) / 100.0)
    assert np.max(np.abs(t - expected)) < 1e-12
    # second period is the first shifted by one second
    t2 = r.inverse_cumulative_array(ns + 280)
    assert np.max(np.abs(t2 - (expected + 1.0))) < 1e-9


def test_burst_offset_and_sub_second_duration():
    r = R({"kind": "burst", "base_eps": 10, "period_s": 1, "duration_s": 0.05, "factor": 100, "offset_s": 0.5})
    assert r.rate(0.49) == 10 and r.rate(0.5) == 1000 and r.rate(0.549) == 1000 and r.rate(0.55) == 10
    assert r.cumulative(0.5) == pytest.approx(5)
    assert r.cumulative(0.55) == pytest.approx(55)
    assert r.cumulative(1.5) == pytest.approx(5 + 50 + 9.5)
    assert r.inverse_cumulative(30) == pytest.approx(0.5 + 25 / 1000)


def test_burst_with_zero_base_and_full_duty_cycle():
    assert R({"kind": "burst", "base_eps": 0, "period_s": 1, "duration_s": 0.1, "factor": 9}).total == 0
    full = R({"kind": "burst", "base_eps": 10, "period_s": 1, "duration_s": 1, "factor": 3})
    assert full.cumulative(2) == pytest.approx(60)


def test_pauses_flat_segments_use_earliest_time():
    r = R(SHAPES["pauses"])  # 0 eps on [2k, 2k+0.5), 80 eps on the rest
    assert r.inverse_cumulative(120) == pytest.approx(2.0)  # reached at end of the first active window
    assert r.inverse_cumulative(121) == pytest.approx(2.5 + 1 / 80)


def test_sine_closed_form():
    r = R({"kind": "sine", "mean_eps": 100, "amplitude_eps": 60, "period_s": 4, "phase_s": 0})
    assert isinstance(r, SineWave)
    assert r.cumulative(4) == pytest.approx(400)
    assert r.cumulative(2) == pytest.approx(200 + 60 * 4 / math.pi)  # first half above the mean
    assert r.rate(1) == pytest.approx(160)
    assert r.rate(3) == pytest.approx(40)
    assert r.cumulative(400.0) == pytest.approx(40000)


def test_spike_closed_form():
    r = R(SHAPES["spike"])
    assert r.cumulative(2) == pytest.approx(40)
    assert r.cumulative(2.25) == pytest.approx(540)
    assert r.cumulative(3.25) == pytest.approx(560)
    assert r.inverse_cumulative(41) == pytest.approx(2.0005)
    at0 = R({"kind": "spike", "base_eps": 1, "at_s": 0, "duration_s": 1, "eps": 10})
    assert at0.cumulative(2) == pytest.approx(11)


def test_sum_of_piecewise_linear_stays_exact():
    r = R(SHAPES["sum_pl"])
    assert isinstance(r, PiecewiseLinear)
    assert r.cumulative(4) == pytest.approx(20 + 100)
    assert r.cumulative(6) == pytest.approx(5 * 6 + 100 + 50 * 2)


def test_sum_mixed_is_numeric_but_accurate():
    r = R(SHAPES["sum_mixed"])
    assert isinstance(r, SumOfRates)
    parts = [R(p) for p in SHAPES["sum_mixed"]["parts"]]
    for t in (0.3, 1.05, 7.7):
        assert r.cumulative(t) == pytest.approx(sum(p.cumulative(t) for p in parts))
        assert r.rate(t) == pytest.approx(sum(p.rate(t) for p in parts))


def test_sequence_phases_and_end():
    r = R(SHAPES["sequence"])
    assert isinstance(r, SequenceOfPhases)
    assert r.cumulative(2) == pytest.approx(20)
    assert r.cumulative(5) == pytest.approx(20 + SineWave(50, 20, 2).cumulative(3))
    total = 20 + SineWave(50, 20, 2).cumulative(3) + 50 + 50
    assert r.total == pytest.approx(total)
    assert r.rate(6.6) == 0 and r.rate(100) == 0
    assert r.inverse_cumulative(total + 1) == math.inf
    assert r.inverse_cumulative(total) == pytest.approx(6.5, abs=1e-6)
    assert r.inverse_cumulative(10) == pytest.approx(1.0)


def test_sequence_repeat_is_periodic():
    r = R(SHAPES["sequence_repeat"])
    assert isinstance(r, PeriodicRate)
    per_cycle = 15 + 100
    assert r.cumulative(3.5) == pytest.approx(per_cycle)
    assert r.cumulative(3.5 * 4 + 1.0) == pytest.approx(4 * per_cycle + 10)
    assert r.inverse_cumulative(4 * per_cycle + 10) == pytest.approx(15.0)
    assert r.rate(3.5 * 2 + 1.5 + 1) == pytest.approx(50)


def test_open_last_phase_runs_forever():
    r = R({"kind": "sequence", "phases": [{"duration_s": 1, "rate": {"kind": "constant", "eps": 1}},
                                          {"rate": {"kind": "constant", "eps": 2}}]})
    assert r.total == math.inf
    assert r.cumulative(101) == pytest.approx(201)


def test_piecewise_linear_validation():
    with pytest.raises(ValueError):
        PiecewiseLinear([1.0], [1.0])
    with pytest.raises(ValueError):
        PiecewiseLinear([0.0, 1.0], [1.0, 1.0], [0.0, 1.0])  # sloped tail
    with pytest.raises(ValueError):
        PiecewiseLinear([0.0, 1.0], [1.0, 0.0], [-5.0, 0.0])  # goes negative
    with pytest.raises(ValueError):
        SineWave(1, 2, 1)


# ------------------------------------------------------------------ replay


def _write(tmp_path, text, name="r.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_replay_linear_with_header_comments_and_rebase(tmp_path):
    p = _write(tmp_path, "t,rate\n# recorded\n100,0\n\n102,100\n104,100\n")
    r = R({"kind": "replay", "csv": str(p)})
    assert r.rate(0) == 0 and r.rate(1) == pytest.approx(50) and r.rate(3) == 100
    assert r.cumulative(2) == pytest.approx(100)
    assert r.cumulative(4) == pytest.approx(300)
    assert r.cumulative(6) == pytest.approx(500)  # hold after the last row
    assert r.inverse_cumulative(25) == pytest.approx(1.0)


def test_replay_step_zero_after_and_scale(tmp_path):
    p = _write(tmp_path, "0,10\n1,30\n3,5\n")
    r = R({"kind": "replay", "csv": str(p), "interpolation": "step", "after": "zero", "scale": 2})
    assert r.rate(0.5) == 20 and r.rate(1) == 60 and r.rate(2.9) == 60 and r.rate(3) == 0
    assert r.total == pytest.approx(20 + 120)
    assert r.inverse_cumulative(141) == math.inf


def test_replay_relative_path_uses_base_dir(tmp_path):
    _write(tmp_path, "0,7\n", name="one.csv")
    r = R({"kind": "replay", "csv": "one.csv"}, base_dir=tmp_path)
    assert r.cumulative(3) == pytest.approx(21)


@pytest.mark.parametrize(
    "text,match",
    [
        ("0,1\n0,2\n", r"r\.csv:2: t must strictly increase"),
        ("0,1\n1,-2\n", r"r\.csv:2: rate must be >= 0"),
        ("0,1\n1,x\n", r"r\.csv:2: not numbers"),
        ("0\n", r"r\.csv:1: expected two columns"),
        ("t,rate\n", r"no data rows"),
        ("0,nan\n", r"r\.csv:1: values must be finite"),
    ],
)
def test_replay_errors_name_file_and_line(tmp_path, text, match):
    p = _write(tmp_path, text)
    with pytest.raises(ValueError, match=match):
        R({"kind": "replay", "csv": str(p)})


def test_warm_up_holds_the_starting_rate_then_runs_the_shape_on_its_own_clock():
    from harness.producers.rates import warmed_up

    ramp = make_rate(TypeAdapter(RateSpec).validate_python({"kind": "ramp", "from_eps": 100, "to_eps": 300,
                                                            "duration_s": 10}))
    warm = warmed_up(ramp, 5)
    # by hand: 5 s at 100/s, then the ramp from t = 5: 100 -> 300 over 10 s (area 100*10 + 200*10/2)
    assert warm.rate(2.0) == 100 and warm.rate(10.0) == pytest.approx(200)
    assert warm.cumulative(5.0) == pytest.approx(500) and warm.cumulative(15.0) == pytest.approx(2500)
    assert warmed_up(ramp, 0) is ramp


def test_a_batch_inverse_is_each_events_own_inverse_exactly():
    """The one-segment fast path of a batch gives, bit for bit, what each event's inverse alone gives (the
    general path), on a constant rate, slopes up and down, and a step where a batch crosses segments."""
    shapes = [PiecewiseLinear([0.0], [5000.0]),
              PiecewiseLinear([0.0, 2.0, 5.0], [100.0, 3000.0, 50.0], [50.0, -900.0, 0.0]),
              PiecewiseLinear([0.0, 1.0, 1.5], [0.0, 20000.0, 2000.0])]
    rng = np.random.default_rng(3)
    for shape in shapes:
        for _ in range(300):
            n = rng.uniform(0, 30000) + np.cumsum(rng.uniform(0.01, 3, size=int(rng.integers(2, 200))))
            alone = np.concatenate([shape.inverse_cumulative_array(n[i : i + 1]) for i in range(len(n))])
            assert np.array_equal(shape.inverse_cumulative_array(n), alone)


def test_one_float_cumulative_is_the_array_formulas_value():
    """PiecewiseLinear.cumulative(t) in plain Python against cumulative_array (the reference), bit for bit."""
    shapes = [PiecewiseLinear([0.0], [5000.0]),
              PiecewiseLinear([0.0, 2.0, 5.0], [100.0, 3000.0, 50.0], [50.0, -900.0, 0.0]),
              PiecewiseLinear([0.0, 1.0, 1.5], [0.0, 20000.0, 2000.0])]
    ts = np.concatenate([np.random.default_rng(5).uniform(-1, 40, 3000), [0.0, 1.0, 1.5, 2.0, 5.0, -0.0, math.inf]])
    for shape in shapes:
        assert [shape.cumulative(t) for t in ts.tolist()] == shape.cumulative_array(ts).tolist()
