"""TokenPacer.wake_at on a simulated clock: a sender that sleeps until a batch is due (or its first event has
waited long enough) still sends exactly the schedule: every event once, at its exact intended time, the count
in any window what the rate says. Expected times are n / rate, worked out by hand."""
import numpy as np
import pytest
from pydantic import TypeAdapter

from harness.producers.pacer import TokenPacer
from harness.producers.rates import make_rate
from harness.producers.spec import RateSpec

START = 1_700_000_000.0


def pacer(rate: dict, max_backlog_s=1.0) -> TokenPacer:
    return TokenPacer(make_rate(TypeAdapter(RateSpec).validate_python(rate)), START, max_backlog_s=max_backlog_s)


def run_batches(p: TokenPacer, batch: int, wait: float, end: float) -> list[tuple[float, np.ndarray]]:
    """The producer's loop: sleep until wake_at, take what is due (at most a batch). Returns (wake, times)."""
    out = []
    while (wake := p.wake_at(batch, wait)) is not None and wake < end:
        out.append((wake, p.due_array(wake, batch)))
    return out


def test_wakes_when_a_whole_batch_is_due_or_the_first_event_waited_long_enough():
    p = pacer({"kind": "constant", "eps": 1000})
    # event n is due at n / 1000 s: the 20th at 0.020, the 1st at 0.001
    assert p.wake_at(20, 0.05) == pytest.approx(START + 0.020, abs=1e-9)
    assert p.wake_at(200, 0.05) == pytest.approx(START + 0.001 + 0.05, abs=1e-9)  # 200th at 0.2: too long
    assert p.wake_at(200, 0.0) == pytest.approx(START + 0.001, abs=1e-9)  # no wait: as soon as one is due


def test_a_finite_shape_wakes_for_its_last_events_and_then_never():
    p = pacer({"kind": "steps", "steps": [{"at_s": 0, "eps": 1000}, {"at_s": 0.01, "eps": 0}]})  # 10 events
    assert p.wake_at(200, 1.0) == pytest.approx(START + 0.010, abs=1e-9)  # the 10th, not 1 s later
    assert len(p.due_array(START + 0.010, 200)) == 10
    assert p.wake_at(200, 1.0) is None


@pytest.mark.parametrize("eps, batch, wait", [(3000, 200, 0.05), (3000, 10, 0.05), (50, 200, 0.05),
                                              (20000, 500, 0.01)])
def test_batched_sends_keep_the_exact_schedule(eps, batch, wait):
    p = pacer({"kind": "constant", "eps": eps})
    seconds = 5.0
    batches = run_batches(p, batch, wait, START + seconds)
    times = np.concatenate([t for _, t in batches]) - START
    n = len(times)
    assert n == pytest.approx(eps * seconds, abs=batch)  # what was due by the last wake
    assert np.allclose(times, np.arange(1, n + 1) / eps, atol=2e-6)  # each event once, at its intended time
    assert p.skipped == 0
    # the count in each whole second is the rate's
    per_second = np.histogram(times, bins=np.arange(0, 5) + 1e-7)[0]  # event n at n/eps: (k, k+1] holds eps
    assert (per_second == eps).all()
    for wake, t in batches:  # never before it was due, never more than `wait` after the first of its batch
        assert len(t) <= batch and t[-1] <= wake + 1e-6 and wake - t[0] <= wait + 1e-6
    # the batches are as large as the wait allows (not one or two events each)
    assert np.mean([len(t) for _, t in batches]) >= min(batch, eps * wait) * 0.9
