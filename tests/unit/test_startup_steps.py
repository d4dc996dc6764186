"""harness.analysis.startup: the start-up step by step from a run's timeline and progress, with hand-computed
times (a timeline as the runner and the driver write it, progress records as Spark writes them)."""
from datetime import datetime, timezone

from harness.analysis.startup import describe, startup_steps

T0 = 1_800_000_000.0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _batch(n: int, start: float, rows: int, took_ms: int, add_ms: int) -> dict:
    return {"batchId": n, "timestamp": _iso(T0 + start), "numInputRows": rows,
            "durationMs": {"triggerExecution": took_ms, "addBatch": add_ms}}


TIMELINE = [
    {"t": T0, "event": "run_started"},
    {"t": T0 + 0.1, "event": "driver_launched"},
    {"t": T0 + 4.0, "event": "backend_started"},
    {"t": T0 + 4.5, "event": "backend_ready"},
    {"t": T0 + 0.3, "event": "driver_process"},  # the driver's marks are copied later, with their own times
    {"t": T0 + 3.0, "event": "driver_jvm_up"},
    {"t": T0 + 6.5, "event": "driver_session_ready"},
    {"t": T0 + 7.5, "event": "driver_query_started"},
    {"t": T0 + 10.0, "event": "query_started"},
    {"t": T0 + 10.1, "event": "traffic_start", "at": T0 + 11.5},
    {"t": T0 + 30.0, "event": "driver_jvm_up"},  # a restart marks again: the first one counts
]
PROGRESS = [_batch(0, 7.6, 0, 2000, 1200), _batch(1, 12.0, 1500, 3500, 3000)] + [
    _batch(i, 12.0 + 2 * i, 3000, 1000 + 10 * i, 800) for i in range(2, 12)]


def test_each_step_is_timed_from_the_start_and_from_the_step_before_it():
    got = startup_steps(TIMELINE, PROGRESS)
    steps = {s["key"]: (s["at_s"], s["took_s"]) for s in got["steps"]}
    assert steps == {
        "backend_started": (4.0, 4.0), "backend_ready": (4.5, 0.5),
        "driver_process": (0.3, 0.3), "driver_jvm_up": (3.0, 2.7), "driver_session_ready": (6.5, 3.5),
        "driver_query_started": (7.5, 1.0),
        "offsets_fixed": (10.0, 2.5),  # the runner's mark: it lets the producers start
        "first_batch": (9.6, 2.1),  # 7.6 + 2.0, after the query started (the broker was ready before)
        "producers_start": (11.5, 1.5), "first_data_batch_start": (12.0, 0.5), "first_data_batch": (15.5, 3.5)}
    gap = got["first_data_gap"]
    assert gap["first_batch_to_first_data_s"] == 5.9 and gap["producer_lead_s"] == 1.9
    assert gap["trigger_wait_s"] == 0.5 and gap["first_data_batch_s"] == 3.5 and gap["first_data_batch_add_s"] == 3.0
    assert gap["first_data_batch_rows"] == 1500
    # data batches 1..11; the first five left out: batches 6..11 took 1060..1110 ms, median 1.085 s
    assert gap["later_batch_p50_s"] == 1.085


def test_the_report_says_where_the_gap_went():
    lines = describe(startup_steps(TIMELINE, PROGRESS))
    assert "Spark session ready 6.5 (+3.5)" in lines[0] and "broker up 4.0 (+4.0)" in lines[0]
    assert "first batch with data committed 15.5 (+3.5)" in lines[1]
    assert "first batch committed (no data) 9.6 (+2.1), starting offsets fixed (the runner saw it) 10.0 (+2.5)" \
        in lines[1]  # in the order they happened
    assert lines[2].startswith("Why the first batch with data came 5.9 s after the first batch: the producers "
                               "started 1.9 s after it (once the query's starting offsets were fixed")
    assert "took 3.5 s (1,500 rows; writing them 3.0 s) against a median 1.1 s" in lines[2]


def test_a_catch_up_query_has_no_gap_to_explain_and_a_run_without_marks_nothing():
    catch_up = [_batch(0, 40.0, 90000, 9000, 8000)]
    got = startup_steps(TIMELINE, catch_up)
    assert "first_batch" not in {s["key"] for s in got["steps"]}
    assert got["first_data_gap"]["first_batch_to_first_data_s"] is None
    assert startup_steps([], PROGRESS) == {} and describe({}) == []


def test_producers_started_beside_the_query_are_timed_on_their_own_path():
    timeline = TIMELINE[:4] + [{"t": T0 + 4.6, "event": "producers_launched"},
                               {"t": T0 + 6.4, "event": "producers_ready"}] + TIMELINE[4:]
    got = startup_steps(timeline, PROGRESS)
    steps = {s["key"]: (s["at_s"], s["took_s"]) for s in got["steps"]}
    # launched 0.1 s after the stream was made (4.5), ready 1.8 s after launch; the driver's path is unchanged
    assert steps["producers_launched"] == (4.6, 0.1) and steps["producers_ready"] == (6.4, 1.8)
    assert steps["driver_session_ready"] == (6.5, 3.5) and steps["offsets_fixed"] == (10.0, 2.5)
    lines = describe(got)
    assert "beside it, broker up 4.0 (+4.0), stream created 4.5 (+0.5), producer processes started 4.6 (+0.1), " \
           "producers ready (client connected, waiting for the go) 6.4 (+1.8)." in lines[0]
    assert "their processes started once the driver's session was ready and waited, ready, for that moment" in lines[2]
    assert "own start-up" in describe(startup_steps(TIMELINE, PROGRESS))[2]  # an older run: started at the go
