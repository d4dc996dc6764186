from reports.lag import lag_series, lag_summary


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
