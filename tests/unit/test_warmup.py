"""When a caught_up warm-up ends (harness.analysis.warmup): on lag samples and batch records made by hand, the lag
worked out here from the offsets written down, the band from the rule (2 x rate x cadence)."""
from __future__ import annotations

from datetime import datetime, timezone

from harness.analysis.warmup import decide, whole_periods
from harness.producers.pacer import TokenPacer
from harness.producers.rates import PiecewiseLinear, warmed_up

T0 = 1_800_000_000.0  # the traffic's start
RATE = 1000.0  # events/s, one partition
BAND = 2 * RATE * 1.0  # 2 x rate x a 1 s cadence (1 s trigger, batches under it)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def batch(start: float, ms: float, end_offset: int, rows: int = 1) -> dict:
    return {"timestamp": iso(start), "numInputRows": rows, "durationMs": {"triggerExecution": ms},
            "sources": [{"endOffset": {"events": {"0": end_offset}}}]}


def samples(until: float) -> list[dict]:
    """The broker's end offset once a second: RATE events a second from T0."""
    return [{"t": T0 + s, "end": {"0": int(RATE * s)}} for s in range(0, int(until - T0) + 1)]


def call(lag, progress, now, **kw):
    args = dict(start=T0, now=now, rate_eps=RATE, trigger_interval_ms=1000.0, band_intervals=2.0, max_s=120.0)
    return decide(lag, progress, **{**args, **kw})


def test_not_before_a_batch_with_data_however_small_the_lag():
    # lag 0..3,000 over the first 3 s: inside a 2,000 band at first, but no batch has read anything yet
    assert call(samples(T0 + 1), [], T0 + 1.5) is None
    assert call(samples(T0 + 3), [batch(T0 + 0.5, 200, 0, rows=0)], T0 + 3.2) is None


def test_caught_up_once_the_lag_stays_in_the_band_for_two_cadences_after_the_first_data_batch():
    # a cold first batch starts at 10 s, reads 10,000 events and commits at 14 s; then a batch starts every second
    # at s, reads up to s x 1,000 and commits at s + 0.5: lag at a whole second s is 1,000 (what came since the
    # last commit read up to s - 1), except at 14 s: 14,000 - 10,000 = 4,000 (the first commit's backlog)
    progress = [batch(T0 + 10.0, 4000, 10_000)] + [batch(T0 + s, 500, int(RATE * s)) for s in range(14, 30)]
    # at 16 s the last two cadences hold the samples at 14, 15, 16 s: 4,000 is over the 2,000 band
    assert call(samples(T0 + 16.0), progress, T0 + 16.0) is None
    # at 17 s: 15, 16, 17 s, each 1,000 behind
    end = call(samples(T0 + 17.0), progress, T0 + 17.0)
    assert end is not None and end.ended == "caught_up"
    assert end.band == BAND and end.cadence_s == 1.0 and end.lag == 1000
    assert "17.0 s after the traffic began" in end.reason


def test_the_cadence_follows_batches_that_overrun_the_trigger():
    # 3 s batches on a 1 s trigger: cadence 3 s, band 2 x 1,000 x 3 = 6,000
    progress = [batch(T0 + s, 3000, int(RATE * s)) for s in (5, 8, 11, 14, 17, 20)]
    end = call(samples(T0 + 23.0), progress, T0 + 23.0)
    assert end is not None and end.ended == "caught_up" and end.cadence_s == 3.0 and end.band == 6000.0


def test_a_query_that_falls_further_behind_ends_the_warm_up_early():
    # batches read only 400 events/s of the 1,000 offered: lag grows 600/s after the first commit at 5 s
    progress = [batch(T0 + s, 900, int(400 * s)) for s in range(4, 60)]
    assert call(samples(T0 + 15.0), progress, T0 + 15.0) is None  # 10 s after the first commit: too soon
    end = call(samples(T0 + 21.0), progress, T0 + 21.0)
    assert end is not None and end.ended == "not_catching_up"
    assert "grew 600" in end.reason  # (1,000 - 400) events/s, fitted on the samples right after each commit


def test_a_query_that_catches_up_slowly_is_waited_for_up_to_the_maximum():
    # lag falls 100 events/s from a 20,000 backlog: not growing, not in the band before 120 s
    def lag_at(t):
        return max(0, 20_000 - 100 * t)
    progress = [batch(T0 + s, 900, int(RATE * (s + 0.9) - lag_at(s + 0.9))) for s in range(1, 200)]
    assert call(samples(T0 + 60.0), progress, T0 + 60.0) is None
    end = call(samples(T0 + 120.0), progress, T0 + 120.0)
    assert end is not None and end.ended == "max" and "120 s (producers.warmup_max_s)" in end.reason


def test_the_least_warm_up_is_kept():
    progress = [batch(T0 + 10.0, 4000, 10_000)] + [batch(T0 + s, 500, int(RATE * s)) for s in range(14, 40)]
    assert call(samples(T0 + 20.0), progress, T0 + 20.0, min_s=25.0) is None
    assert call(samples(T0 + 25.0), progress, T0 + 25.0, min_s=25.0).ended == "caught_up"


def test_moving_the_warm_ups_end_ahead_of_time_keeps_the_events_taken():
    """The producers learn when a caught_up warm-up ends a moment before it does (measure.json): the schedule
    up to then is the same, so the pacer goes on from what it took; the rate's own shape starts at the new end."""
    base = PiecewiseLinear([0.0, 10.0], [100.0, 300.0], [20.0, 0.0])  # a ramp from 100 to 300 events/s over 10 s
    pacer = TokenPacer(warmed_up(base, 120.0), 0.0, max_backlog_s=None)  # until told: the longest warm-up
    first = pacer.due(20.0, 10_000)
    assert len(first) == 2000  # 20 s at the warm-up's constant 100/s
    pacer.set_rate(warmed_up(base, 21.0))  # the measured window starts at 21 s
    rest = pacer.due(31.0, 100_000)
    # from 20 s: 1 s more at 100/s, then the ramp's first 10 s: 100 + (100 + 300) / 2 x 10 = 2,100 events
    assert len(rest) == 2100 and rest[0] > first[-1]


def test_a_query_that_keeps_up_a_few_seconds_behind_has_caught_up_once_its_lag_stops_falling():
    # every batch starts each second s, reads up to (s - 2) x 1,000 and commits at s + 0.5: the lag at a whole
    # second is 3,000 (2 s behind plus the second since the last commit), over the 2,000 band, and flat
    progress = [batch(T0 + 5.0, 1500, 3000)] + [batch(T0 + s, 500, int(RATE * (s - 2))) for s in range(7, 60)]
    # 19 s after the first commit (6.5 s): under the 20 s window (10 cadences of 1 s, at least 20 s)
    assert call(samples(T0 + 25.5), progress, T0 + 25.5) is None
    end = call(samples(T0 + 27.0), progress, T0 + 27.0)
    assert end is not None and end.ended == "caught_up" and end.lag == 3000 and end.band == BAND
    # the 21 samples from 7 to 27 s: 4,000 at 7 s (the first commit's backlog), 3,000 after: least squares
    # slope = (7 - 17) x 4,000 + 3,000 x 10 over 770 = -13 events/s; within 5% of 1,000 with its error
    assert "its lag stopped falling, -13 ± " in end.reason and "over the last 20 s" in end.reason


def test_a_noisy_lag_that_merely_cannot_show_a_fall_is_not_caught_up():
    # batches every 2 s on a 1 s trigger's cadence floor: lag samples alternate 1,000 and 5,000 behind (a 4,000
    # sawtooth) around a flat level over a 2,000 band: the fit's error, 2 x SE, is far over 50 events/s
    progress = [batch(T0 + 5.0, 1000, 0)] + [batch(T0 + s, 900, int(RATE * (s - 0.5) - (4000 if s % 4 else 0)))
                                              for s in range(6, 60, 2)]
    end = call(samples(T0 + 30.0), progress, T0 + 30.0)
    assert end is None or end.ended != "caught_up", end


def _first_decision(lag, progress, **kw):
    for tenth in range(150, 590):  # every 0.1 s from 15 s to 59 s, as the runner asks about once a second
        end = call(lag, progress, T0 + tenth / 10, trigger_interval_ms=3000.0, **kw)
        if end is not None:
            return end
    return None


def test_a_periodic_rate_is_judged_at_its_mean_over_whole_periods_so_a_burst_is_not_read_as_falling_behind():
    """eh-burst: 600 events/s with a 1 s burst at 4,800/s every 8 s (from 4 s), read by a query that keeps up
    (a 3 s trigger, each 2 s batch reading all that was there when it started). Judged at the rate of its start
    (600/s, so a 3,600-event band) over windows ending anywhere in a period, the warm-up decided "not catching
    up"; judged at its mean (1,125/s) over whole periods (3 x 8 s), it caught up."""
    from harness.runner import rate_shape
    from harness.producers.rates import make_rate
    from harness.producers.spec import BurstRate

    spec = BurstRate.model_validate({"kind": "burst", "base_eps": 600, "period_s": 8, "duration_s": 1,
                                     "factor": 8, "offset_s": 4})
    assert rate_shape(spec) == (600 * 7 / 8 + 4800 / 8, 8.0)  # 1,125 events/s, every 8 s
    fn = make_rate(spec)
    lag = [{"t": T0 + s / 2, "end": {"0": int(fn.cumulative(s / 2))}} for s in range(0, 2 * 60)]
    progress = [batch(T0 + s, 2000, int(fn.cumulative(s)), rows=100) for s in range(3, 60, 3)]
    assert _first_decision(lag, progress, rate_eps=600.0).ended == "not_catching_up"
    assert _first_decision(lag, progress, rate_eps=1125.0, period_s=8.0).ended == "caught_up"
    assert whole_periods(18.0, 8.0) == 24.0 and whole_periods(30.0, 8.0) == 32.0 and whole_periods(18.0, None) == 18.0
