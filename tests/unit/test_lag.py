import json
import time

from harness.analysis.lag import lag_series, lag_summary
from harness.samplers.lag import LagSampler
from harness.supervisor import wait_until


def progress(batch, start_iso, duration_ms, ends):
    return {"batchId": batch, "timestamp": start_iso, "durationMs": {"triggerExecution": duration_ms},
            "sources": [{"endOffset": {"events": {str(p): o for p, o in ends.items()}}}]}


def test_lag_is_broker_end_minus_what_was_committed_at_that_moment():
    base = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    runs = [progress(0, "2027-01-15T08:00:00.000Z", 500, {0: 0, 1: 0}),
            progress(1, "2027-01-15T08:00:01.000Z", 1500, {0: 100, 1: 50})]  # commits at +2.5 s
    samples = [{"t": base + 0.2, "end": {"0": 0, "1": 0}},
               {"t": base + 1.0, "end": {"0": 100, "1": 50}},
               {"t": base + 2.0, "end": {"0": 200, "1": 60}},
               {"t": base + 3.0, "end": {"0": 200, "1": 60}}]
    series = lag_series(samples, runs)
    assert [x["lag"] for x in series] == [0, 150, 260, 110]
    assert lag_summary(series) == {"max": 260, "mean": 130.0, "final": 110, "samples": 4}


def test_no_samples():
    assert lag_summary([])["max"] == 0


def test_batches_cut_by_the_per_trigger_cap_are_counted_from_what_the_source_reported_available():
    from harness.analysis.progress import batch_stats

    def batch(i, rows, end, latest):
        return {"batchId": i, "numInputRows": rows, "durationMs": {"triggerExecution": 100},
                "sources": [{"endOffset": {"t": {"0": end}}, "latestOffset": {"t": {"0": latest}}}]}

    # a cap of 100: two batches end below the available offset (backlog 150, then 50), the last reads all
    stats = batch_stats([batch(0, 100, 100, 250), batch(1, 100, 200, 250), batch(2, 50, 250, 250),
                         batch(3, 0, 250, 250)])
    assert stats["rate_limited"] == {"batches": 2, "of": 3, "backlog_left_max": 150}


def test_the_sampler_takes_one_more_sample_when_stopped(tmp_path):
    """A query that catches up in its last batch, less than an interval before the run stops it, is seen back
    only by a sample taken at the stop: without it the fault before is 'never recovered'."""
    ends = iter([{0: 5}, {0: 9}])
    path = tmp_path / "lag.jsonl"
    sampler = LagSampler(path, lambda: next(ends), interval=60.0)
    sampler.start()
    # the first sample taken (however late its thread runs); the next is a minute away
    wait_until(lambda: path.exists() and path.read_text().count("\n") == 1, 30, 0.01, "the first sample")
    stopped_at = time.time()
    sampler.stop()
    assert not sampler.is_alive()
    rows = [json.loads(line) for line in (tmp_path / "lag.jsonl").read_text().splitlines()]
    assert [r["end"] for r in rows] == [{"0": 5}, {"0": 9}] and rows[0]["t"] < stopped_at <= rows[1]["t"]
