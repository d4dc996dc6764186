"""TokenPacer on a simulated clock."""

import math
import random

import numpy as np
import pytest
from pydantic import TypeAdapter

from harness.producers.pacer import TokenPacer
from harness.producers.rates import make_rate
from harness.producers.spec import RateSpec

TA = TypeAdapter(RateSpec)
START = 1_700_000_000.0  # an epoch-like clock, as time.time() gives


def R(d):
    return make_rate(TA.validate_python(d))


def drain(pacer, ticks, limit=10**9):
    """Call due() at every tick; return all intended times (absolute)."""
    out = []
    for now in ticks:
        while True:
            got = pacer.due(now, limit)
            out.extend(got)
            if len(got) < limit:
                break
    return out


def random_ticks(t_end, seed, mean_gap=0.007):
    rnd = random.Random(seed)
    t, ticks = 0.0, []
    while t < t_end:
        t += rnd.expovariate(1 / mean_gap)
        ticks.append(START + min(t, t_end))
    return ticks


@pytest.mark.parametrize("share", [1.0, 0.25, 1 / 3])
def test_count_due_by_t_is_floor_of_cumulative_times_share(share):
    r = R({"kind": "ramp", "from_eps": 100, "to_eps": 3000, "duration_s": 2})
    p = TokenPacer(r, START, share=share, max_backlog_s=None)
    exact = 0
    ticks = random_ticks(3.0, 1)
    for now in ticks:
        p.due(now, 10**9)
        rel = now - START
        expected = math.floor(r.cumulative(rel) * share + 1e-9)
        # events due within the pacer's 1 us clock slack may already be handed out
        expected_late = math.floor(r.cumulative(rel + 1e-6) * share + 1e-9)
        assert expected <= p.issued <= expected_late <= expected + 1
        assert p.expected_by(now) == p.issued
        exact += p.issued == expected
    assert exact >= 0.99 * len(ticks)
    assert p.skipped == 0


def test_constant_rate_times_are_exact():
    r = R({"kind": "constant", "eps": 1000})
    p = TokenPacer(r, START, max_backlog_s=None)
    times = drain(p, random_ticks(2.0, 2))
    assert len(times) == 2000
    rel = np.array(times) - START
    assert np.max(np.abs(rel - np.arange(1, 2001) / 1000)) < 1e-6  # float epoch resolution ~2.4e-7


def test_share_spreads_events_per_process():
    r = R({"kind": "constant", "eps": 1000})
    p = TokenPacer(r, START, share=0.25, max_backlog_s=None)
    times = drain(p, [START + 1.0])
    assert len(times) == 250
    assert np.allclose(np.array(times) - START, np.arange(1, 251) / 250, atol=1e-6)


def test_times_do_not_depend_on_polling_cadence():
    spec = {"kind": "sum", "parts": [{"kind": "constant", "eps": 300},
                                     {"kind": "burst", "base_eps": 100, "period_s": 0.5, "duration_s": 0.05, "factor": 20}]}
    a = TokenPacer(R(spec), START, max_backlog_s=None)
    b = TokenPacer(R(spec), START, max_backlog_s=None)
    ta = drain(a, random_ticks(2.0, 3, mean_gap=0.003))
    tb = drain(b, [START + 2.0], limit=37)  # one late call, small batches
    assert len(ta) == len(tb) == math.floor(R(spec).cumulative(2.0))
    assert np.max(np.abs(np.array(ta) - np.array(tb))) < 1e-6


def test_burst_100ms_bins_are_exact():
    # 100 eps base, x10 for 200 ms every second: bins of 100 ms get 100,100,10,10,...
    r = R({"kind": "burst", "base_eps": 100, "period_s": 1, "duration_s": 0.2, "factor": 10})
    p = TokenPacer(r, START, max_backlog_s=None)
    times = np.array(drain(p, random_ticks(3.0, 4))) - START
    # an event due exactly on a bin edge belongs to the bin it closes
    bins = np.ceil(times * 10 - 1e-6).astype(int) - 1
    counts = np.bincount(bins, minlength=30)[:30]
    expected = np.tile([100, 100] + [10] * 8, 3)
    assert counts.tolist() == expected.tolist()


def test_sub_second_burst_within_5_percent_per_bin_with_share():
    r = R({"kind": "burst", "base_eps": 200, "period_s": 0.5, "duration_s": 0.05, "factor": 20})
    p = TokenPacer(r, START, share=0.5, max_backlog_s=None)
    times = np.array(drain(p, random_ticks(2.0, 5))) - START
    edges = np.arange(0, 2.0001, 0.05)
    counts, _ = np.histogram(times, bins=edges)
    expected = np.array([0.5 * (r.cumulative(b) - r.cumulative(a)) for a, b in zip(edges[:-1], edges[1:])])
    assert np.all(np.abs(counts - expected) <= np.maximum(1, 0.05 * expected))
    assert counts[0] == pytest.approx(100, abs=1) and counts[1] == pytest.approx(5, abs=1)


def test_backlog_cap_skips_and_counts():
    r = R({"kind": "constant", "eps": 1000})
    p = TokenPacer(r, START, max_backlog_s=1.0)
    got = p.due(START + 5.0, 10**9)
    assert p.skipped == 4000  # due before t=4 s: more than 1 s late
    assert p.issued == len(got) == 1000
    rel = np.array(got) - START
    assert rel.min() > 4.0 and rel.max() <= 5.0
    assert np.allclose(rel, 4.0 + np.arange(1, 1001) / 1000, atol=1e-6)
    assert p.issued + p.skipped == p.expected_by(START + 5.0)
    # keeps up afterwards without catching up on what was skipped
    got2 = p.due(START + 5.5, 10**9)
    assert len(got2) == 500 and p.skipped == 4000


def test_backlog_cap_applies_to_events_left_behind_by_limit():
    r = R({"kind": "constant", "eps": 1000})
    p = TokenPacer(r, START, max_backlog_s=0.5)
    assert len(p.due(START + 1.0, 100)) == 100
    assert p.skipped == 500  # due before 0.5 s
    assert p.pending(START + 1.0) == 400
    p.due(START + 2.0, 10**9)
    assert p.skipped == 1500 - 100  # everything due before 1.5 s that was not issued
    assert p.issued + p.skipped == 2000


def test_limit_caps_batch_and_rest_stays_pending():
    r = R({"kind": "constant", "eps": 100})
    p = TokenPacer(r, START, max_backlog_s=None)
    a = p.due(START + 1.0, 30)
    b = p.due(START + 1.0, 1000)
    assert len(a) == 30 and len(b) == 70
    assert a[-1] < b[0]
    assert p.due(START + 1.0, 1000) == []


def test_next_due_and_before_start():
    r = R({"kind": "constant", "eps": 10})
    p = TokenPacer(r, START)
    assert p.due(START - 1.0, 100) == []
    assert p.next_due() == pytest.approx(START + 0.1, abs=1e-6)
    assert p.due(START + 0.0999, 100) == []
    assert p.due(p.next_due(), 100) == [pytest.approx(START + 0.1, abs=1e-6)]
    assert p.next_due() == pytest.approx(START + 0.2, abs=1e-6)


def test_exhausted_shape_has_no_next_due():
    r = R({"kind": "ramp", "from_eps": 100, "to_eps": 0, "duration_s": 1})  # 50 events
    p = TokenPacer(r, START, max_backlog_s=None)
    assert not p.exhausted
    got = p.due(START + 10, 1000)
    assert len(got) == 50
    assert p.exhausted and p.next_due() is None
    assert max(got) <= START + 1.0 + 1e-6


def test_numeric_shape_times_within_a_microsecond():
    r = R({"kind": "sine", "mean_eps": 500, "amplitude_eps": 400, "period_s": 0.8})
    p = TokenPacer(r, START, share=0.5, max_backlog_s=None)
    times = np.array(drain(p, random_ticks(2.0, 6))) - START
    k = np.arange(1, times.size + 1)
    exact_after = r.cumulative_array(times + 1e-6) * 0.5
    exact_before = r.cumulative_array(times - 1e-6) * 0.5
    assert np.all(exact_after >= k - 1e-9) and np.all(exact_before <= k + 1e-9)
    assert np.all(np.diff(times) >= 0)


def test_due_array_matches_due():
    r = R({"kind": "constant", "eps": 50})
    p1, p2 = TokenPacer(r, START), TokenPacer(r, START)
    assert p1.due_array(START + 0.5, 100).tolist() == p2.due(START + 0.5, 100)


@pytest.mark.parametrize("kw", [{"share": 0}, {"share": 1.5}, {"max_backlog_s": 0}])
def test_invalid_arguments(kw):
    with pytest.raises(ValueError):
        TokenPacer(R({"kind": "constant", "eps": 1}), START, **kw)
