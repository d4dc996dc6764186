"""The soak's figures (harness.bench.kafka_hostile._figures) from made-up samples whose answers are counted by
hand: which round trips fall in the attack, the halves the memory is compared over, the goals."""

from __future__ import annotations

from harness.bench.kafka_hostile import _figures, _RoundTrips


def _trips(samples, failures=0):
    t = _RoundTrips()
    t.samples = list(samples)
    t.failures = failures
    return t


MARKS = {"quiet": 0.0, "attack": 10.0, "after": 130.0, "end": 140.0}


def _rss(first_half_peak, second_half_peak):
    """Before 100 MB; the attack's first half (10-70 s) peaks at `first_half_peak`, the second (70-130 s) at
    `second_half_peak`; after it 105 MB."""
    rows = [(t, 100.0) for t in range(0, 10)]
    rows += [(t, first_half_peak if t == 40 else 110.0) for t in range(10, 70)]
    rows += [(t, second_half_peak if t == 100 else 110.0) for t in range(70, 130)]
    rows += [(t, 105.0) for t in range(130, 140)]
    return [(float(t), v) for t, v in rows]


def test_round_trips_are_judged_over_the_attack_only():
    kafka = _trips([(5.0, 2000.0), (20.0, 40.0), (129.0, 900.0), (135.0, 5000.0)])  # 5 s and 135 s: outside
    amqp = _trips([(2.0, 10.0), (50.0, 30.0)])
    r = _figures(kafka, amqp, _rss(150.0, 160.0), MARKS, {"bomb": 3})
    rows = {row["name"]: row for row in r["rows"]}
    longest = rows["librdkafka producer: longest round trip under attack"]
    assert (longest["value"], longest["reference"], longest["ok"]) == (900.0, 2000.0, True)
    assert rows["azure-eventhub producer: longest round trip under attack"]["value"] == 30.0
    assert r["minutes"][0]["kafka_max_ms"] == 40.0 and r["minutes"][1]["kafka_max_ms"] == 900.0
    assert len(r["minutes"]) == 2 and r["attacks"] == {"bomb": 3}


def test_a_round_trip_of_a_second_or_a_failure_misses_the_goal():
    r = _figures(_trips([(20.0, 1000.0)]), _trips([(20.0, 5.0)], failures=1), _rss(150.0, 150.0), MARKS, {})
    rows = {row["name"]: row for row in r["rows"]}
    assert rows["librdkafka producer: longest round trip under attack"]["ok"] is False
    assert rows["azure-eventhub producer: failed round trips"]["ok"] is False
    assert rows["librdkafka producer: failed round trips"]["ok"] is True


def test_memory_that_keeps_growing_is_not_flat():
    flat = _figures(_trips([(20.0, 5.0)]), _trips([(20.0, 5.0)]), _rss(150.0, 182.0), MARKS, {})
    grew = _figures(_trips([(20.0, 5.0)]), _trips([(20.0, 5.0)]), _rss(150.0, 182.5), MARKS, {})
    assert [r["ok"] for r in flat["rows"] if r["name"].startswith("emulator RSS, second")] == [True]
    assert [r["ok"] for r in grew["rows"] if r["name"].startswith("emulator RSS, second")] == [False]
    assert flat["rss_mb"] == {"before": 100.0, "first_half_max": 150.0, "second_half_max": 182.0, "after": 105.0}
