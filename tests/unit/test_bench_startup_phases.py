"""harness bench startup's reading of a run: milestones from timeline.jsonl and progress.jsonl, medians, rows."""
from __future__ import annotations

import pytest

from harness.bench.startup import first_data_batch_end, phases, spark_alone_rows, summarise

LAUNCH = 1_000.0


def _timeline(**events):
    return [{"t": LAUNCH + s, "event": e} for e, s in events.items()]


def test_phases_are_seconds_since_the_launch_first_mark_wins():
    timeline = _timeline(run_started=1.5, driver_launched=1.6, driver_process=2.1, driver_jvm_up=4.0, backend_started=6.0,
                         backend_ready=6.5, driver_session_ready=7.0, driver_query_started=8.0, query_started=9.0)
    timeline.append({"t": LAUNCH + 30.0, "event": "driver_jvm_up"})  # a restart marks again: not start-up
    # 1970-01-01T00:16:50Z = 1010 s; the first batch with rows ran 750 ms
    progress = [{"timestamp": "1970-01-01T00:16:49.000Z", "numInputRows": 0, "durationMs": {"triggerExecution": 80}},
                {"timestamp": "1970-01-01T00:16:50.000Z", "numInputRows": 3000,
                 "durationMs": {"triggerExecution": 750}}]
    got = phases(LAUNCH, timeline, progress)
    assert got == pytest.approx({"harness_up": 1.5, "driver_process": 2.1, "driver_jvm_up": 4.0, "driver_session_ready": 7.0,
                                 "broker_up": 6.0, "stream_created": 6.5, "query_started": 8.0,
                                 "first_batch_recorded": 9.0, "first_data_batch": 10.75})


def test_the_traffic_start_is_when_it_starts_not_when_it_was_written():
    timeline = _timeline(run_started=1.0, producers_ready=5.0, query_started=9.0)
    timeline.append({"t": LAUNCH + 9.02, "event": "traffic_start", "at": LAUNCH + 9.27})
    got = phases(LAUNCH, timeline, [])
    assert got == pytest.approx({"harness_up": 1.0, "producers_ready": 5.0, "first_batch_recorded": 9.0,
                                 "traffic_start": 9.27})


def test_no_data_batch_yet():
    assert first_data_batch_end([{"timestamp": "1970-01-01T00:00:01Z", "numInputRows": 0}]) is None
    assert "first_data_batch" not in phases(LAUNCH, _timeline(run_started=1.0), [])


def test_summary_medians_and_rows():
    runs = [{"mode": "side_by_side", "phases": {"query_started": 10.0, "first_data_batch": 14.0}},
            {"mode": "side_by_side", "phases": {"query_started": 12.0, "first_data_batch": 16.0}},
            {"mode": "sequential", "phases": {"query_started": 15.0, "first_data_batch": 19.0}},
            {"mode": "sequential", "phases": {"query_started": 17.0, "first_data_batch": 23.0}}]
    rows, medians = summarise(runs)
    assert medians["side_by_side"]["first_data_batch"] == 15.0 and medians["sequential"]["first_data_batch"] == 21.0
    by_name = {r["name"]: r for r in rows}
    first = by_name["first data batch processed, s after launch"]
    assert (first["value"], first["reference"], first["ok"]) == (15.0, 21.0, True)
    assert first["ratio"] == pytest.approx(15.0 / 21.0)
    assert by_name["saving to the first data batch"]["value"] == 6.0
    assert by_name["query started (writeStream.start), s after launch"]["goal"] is None
    assert not any(r["name"].startswith("broker up") for r in rows)  # never reached: no row


def test_the_producer_lead_is_from_the_offsets_fixed_against_producers_started_at_the_go():
    runs = [{"mode": "side_by_side", "phases": {"first_batch_recorded": 9.0, "traffic_start": 9.3,
                                                "first_data_batch": 11.8}},
            {"mode": "sequential", "phases": {"first_batch_recorded": 12.0, "first_data_batch": 15.0}},
            {"mode": "producers_at_go", "phases": {"first_batch_recorded": 10.0, "traffic_start": 11.5,
                                                   "first_data_batch": 14.4}}]
    by_name = {r["name"]: r for r in summarise(runs)[0]}
    traffic = by_name["traffic starts, s after the starting offsets were fixed (producers started early)"]
    first = by_name["first data batch processed, s after the starting offsets were fixed (producers started early)"]
    assert (traffic["value"], traffic["reference"], traffic["ok"]) == pytest.approx((0.3, 1.5, True))
    assert (first["value"], first["reference"], first["ok"]) == pytest.approx((2.8, 4.4, True))
    assert first["reference_name"] == "producers started at the go"


def test_spark_alone_is_the_floor_and_the_harness_part_is_what_is_above_it():
    alone = [{"session_ready": 5.0, "query_started": 6.0, "first_data_batch": 9.0},
             {"session_ready": 7.0, "query_started": 8.0, "first_data_batch": 11.0},
             {"session_ready": 6.0, "query_started": 7.5, "first_data_batch": 12.5}]
    by_name = {r["name"]: r for r in spark_alone_rows({"first_data_batch": 12.0}, alone)}
    assert by_name["Spark alone: session ready, s after its launch"]["value"] == 6.0
    assert by_name["Spark alone: query started, s after its launch"]["value"] == 7.5
    against = by_name["first data batch: harness run against Spark alone (broker up, topic filled beforehand)"]
    assert (against["value"], against["reference"]) == (12.0, 11.0)
    assert by_name["the harness's own part of the start-up (its first data batch minus Spark alone's)"]["value"] == 1.0
    assert len(spark_alone_rows({"first_data_batch": None}, alone)) == 3  # no harness figure: the floor alone
