"""The harness's CPU against the system under test's (harness.analysis.resources.footprint) from hand-made
resources.jsonl samples whose CPU seconds per role are worked out by hand here, and how the report words it."""
import json

import pytest

from harness.analysis.resources import HARNESS_ROLES, SUT_ROLES, footprint, run_footprint
from harness.text.wording import footprint_line
from harness.samplers.resources import ROLES
from harness.reports.resources import footprint_html, footprint_markdown, resources_markdown


def proc(pid, role, cpu, created=0.0):
    return {"pid": pid, "create_time": created, "role": role, "rss_bytes": 10**8, "cpu_s": cpu, "fds": 10,
            "threads": 5}


# three samples 10 s apart; cumulative CPU: broker +10/interval, driver-jvm +5, executor +1, producer +0.5,
# runner +0.1, a shell ("other") +1
SAMPLES = [
    {"t": 100.0, "procs": [proc(1, "broker", 0.0), proc(2, "driver-jvm", 0.0), proc(3, "executor", 0.0),
                           proc(4, "producer", 0.0), proc(5, "runner", 0.0), proc(6, "other", 0.0)]},
    {"t": 110.0, "procs": [proc(1, "broker", 10.0), proc(2, "driver-jvm", 5.0), proc(3, "executor", 1.0),
                           proc(4, "producer", 0.5), proc(5, "runner", 0.1), proc(6, "other", 1.0)]},
    {"t": 120.0, "procs": [proc(1, "broker", 20.0), proc(2, "driver-jvm", 10.0), proc(3, "executor", 2.0),
                           proc(4, "producer", 1.0), proc(5, "runner", 0.2), proc(6, "other", 2.0)]},
]


def test_ratio_of_known_cpu_seconds_per_role_over_the_whole_span():
    f = footprint(SAMPLES, 100.0, 120.0)
    assert f["harness_cpu_s"] == pytest.approx(1.2)  # producer 1.0 + runner 0.2
    assert f["sut_cpu_s"] == pytest.approx(32.0)  # broker 20 + driver-jvm 10 + executor 2
    assert f["ratio"] == pytest.approx(1.2 / 32.0, rel=1e-4) and f["ok"] is True  # 3.75% < 5%
    assert f["window_s"] == pytest.approx(20.0)
    assert f["by_role"] == pytest.approx({"broker": 20.0, "driver-jvm": 10.0, "executor": 2.0, "producer": 1.0,
                                          "runner": 0.2, "other": 2.0})
    # a role in neither table is in neither sum, and named
    assert f["unclassified"] == {"other": 2.0} and "other 2.0 CPU s" in f["detail"]
    assert "3.8% of the CPU of what it measured" in footprint_line(f)


def test_an_interval_straddling_the_window_is_left_out():
    f = footprint(SAMPLES, 105.0, 120.0)  # [100, 110] also holds what happened before the window
    assert f["window_s"] == pytest.approx(10.0) and (f["covered_from_t"], f["covered_to_t"]) == (110.0, 120.0)
    assert f["harness_cpu_s"] == pytest.approx(0.6) and f["sut_cpu_s"] == pytest.approx(16.0)


def test_a_window_shorter_than_an_interval_counts_the_share_of_each_interval_inside_it():
    f = footprint(SAMPLES, 105.0, 112.5)  # 5 s of the first interval, 2.5 s of the second
    assert f["window_s"] == pytest.approx(7.5)
    assert f["harness_cpu_s"] == pytest.approx(0.6 * 0.75)  # 0.06 CPU s/s for 7.5 s
    assert f["sut_cpu_s"] == pytest.approx(1.6 * 7.5)


def test_a_process_born_within_an_interval_counts_all_its_cpu():
    samples = [SAMPLES[0], dict(SAMPLES[1], procs=SAMPLES[1]["procs"] + [proc(7, "netproxy", 0.4, created=105.0)])]
    f = footprint(samples)
    assert f["by_role"]["netproxy"] == pytest.approx(0.4)
    assert f["harness_cpu_s"] == pytest.approx(0.5 + 0.1 + 0.4)


def test_over_the_goal_is_said_to_distort_the_measurement():
    heavy = [{"t": s["t"], "procs": [dict(p, cpu_s=p["cpu_s"] * (20 if p["role"] == "producer" else 1))
                                     for p in s["procs"]]} for s in SAMPLES]
    f = footprint(heavy, 100.0, 120.0)
    assert f["harness_cpu_s"] == pytest.approx(20.2) and f["ratio"] == pytest.approx(20.2 / 32.0, rel=1e-4)
    assert f["ok"] is False and "measurement distorted" in f["detail"]
    assert "Measurement distorted" in footprint_html(f)
    assert "**Measurement distorted.**" in "\n".join(footprint_markdown(f))


@pytest.mark.parametrize("samples, window, why", [
    ([], (100.0, 120.0), "no resource samples"),
    (SAMPLES, (200.0, 260.0), "do not cover the traffic window"),
    ([{"t": 1.0, "procs": [proc(4, "producer", 0.0)]}, {"t": 2.0, "procs": [proc(4, "producer", 1.0)]}], (None, None),
     "no CPU of the system under test"),
])
def test_without_samples_the_ratio_is_unknown_never_zero(samples, window, why):
    f = footprint(samples, *window)
    assert f["ratio"] is None and f["ok"] is None and why in f["detail"] and "unknown" in f["detail"]
    assert "unknown" in footprint_line(f)


def test_every_role_the_sampler_names_is_on_one_side_only():
    named = {role for role, _ in ROLES} | {"runner"}
    assert not set(HARNESS_ROLES) & set(SUT_ROLES)
    assert named - set(HARNESS_ROLES) - set(SUT_ROLES) == set()  # "other" is the only one on neither side


def test_a_run_directory_is_judged_over_its_traffic_ended_early_by_the_timeline(tmp_path):
    (tmp_path / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    (tmp_path / "timeline.jsonl").write_text(json.dumps({"t": 110.0, "event": "traffic_end"}) + "\n")
    f = run_footprint(tmp_path, 100.0, 120.0)
    assert f["to_t"] == 110.0 and f["window_s"] == pytest.approx(10.0)
    assert f["harness_cpu_s"] == pytest.approx(0.6) and f["sut_cpu_s"] == pytest.approx(16.0)
    unsampled = tmp_path / "none"
    unsampled.mkdir()
    assert run_footprint(unsampled, 100.0, 120.0)["ratio"] is None


def test_a_query_that_reads_after_its_traffic_is_measured_through_its_drain(tmp_path):
    """availableNow/once: the traffic (100-110 s) goes first and the query drains it after; the window runs on to
    the last batch's end (`through`, 120 s), past the timeline's traffic_end, so the harness's share is taken over
    what such a run measures: 1.2 CPU s (producer 1.0 + runner 0.2) against 32.0 over 20 s."""
    (tmp_path / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    (tmp_path / "timeline.jsonl").write_text(json.dumps({"t": 110.0, "event": "traffic_end"}) + "\n")
    f = run_footprint(tmp_path, 100.0, 110.0, through=120.0)
    assert f["to_t"] == 120.0 and f["window_s"] == pytest.approx(20.0)
    assert f["harness_cpu_s"] == pytest.approx(1.2) and f["sut_cpu_s"] == pytest.approx(32.0)
    assert run_footprint(tmp_path, 100.0, 120.0, through=105.0)["to_t"] == 110.0  # never shortens the traffic's


def test_the_report_states_the_footprint_in_words():
    f = footprint(SAMPLES, 100.0, 120.0)
    md = "\n".join(resources_markdown({}, f))
    assert "## Resources" in md and "the harness used 3.8% of the CPU of what it measured" in md
    assert "Measurement distorted" not in md
    html = footprint_html(dict(f, detail="a <b> & c"))
    assert "&lt;b&gt; &amp; c" in html and "Measurement distorted" not in html


def _run_with_stats(tmp_path, sent_per_second: int):
    (tmp_path / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    (tmp_path / "producers").mkdir()
    rows = [{"t": t, "sent": sent_per_second} for t in range(95, 125)]  # only 100..119 lie inside the samples
    (tmp_path / "producers" / "stats-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_producers_cpu_per_event_and_a_client_floor_read_against_what_was_measured(tmp_path):
    _run_with_stats(tmp_path, 500)  # 20 s x 500 = 10,000 events while the producer spent 1.0 CPU s: 100 us each
    plain = run_footprint(tmp_path, 100.0, 120.0)
    assert plain["producer_us_per_event"] == pytest.approx(100.0) and "client_floor" not in plain
    unmeasured = run_footprint(tmp_path, 100.0, 120.0, client="azure-eventhub")
    assert "spent 100 us of CPU per event sent, most of it azure-eventhub's own (`harness bench eh-producers`" in (
        unmeasured["detail"])
    floor = {"us_per_event": 80.0, "measured_at": "2026-11-28", "by": "harness bench eh-producers"}
    f = run_footprint(tmp_path, 100.0, 120.0, client="azure-eventhub", floor=floor)
    # 10,000 events x 80 us = 0.8 CPU s against the system under test's 32 CPU s
    assert f["client_floor"]["ratio"] == pytest.approx(0.025)
    assert ("a plain azure-eventhub send loop 80 us (harness bench eh-producers, 2026-11-28): those events sent "
            "that way would have taken 2.5%, the floor this client sets") in f["detail"]


def test_the_part_librdkafkas_own_threads_used_is_named_and_when_it_alone_breaks_the_goal_said_so(tmp_path):
    """broker-kill's producers took 75% of what they measured: librdkafka's broker threads spinning while a broker
    did not answer. The stats rows carry those threads' CPU (`client_cpu_s`, cumulative); the footprint names it."""
    spin = [{"t": t, "procs": [proc(1, "broker", 1.0 * k * 10), proc(2, "driver-jvm", 0.5 * k * 10),
                               proc(3, "executor", 0.1 * k * 10), proc(4, "producer", 0.3 * k * 10),
                               proc(5, "runner", 0.01 * k * 10)]} for k, t in enumerate((100.0, 110.0, 120.0))]
    (tmp_path / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in spin))
    (tmp_path / "producers").mkdir()
    rows = [{"t": t, "sent": 100, "client_cpu_s": 0.25 * (t - 95)} for t in range(95, 125)]
    (tmp_path / "producers" / "stats-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    f = run_footprint(tmp_path, 100.0, 120.0)
    # 20 s: system under test 20 + 10 + 2 = 32 CPU s; harness: producer 6 + runner 0.2; librdkafka 20 x 0.25 = 5
    assert f["sut_cpu_s"] == pytest.approx(32.0) and f["harness_cpu_s"] == pytest.approx(6.2)
    assert not f["ok"] and f["producer_client_cpu_s"] == pytest.approx(5.0)
    assert "of the producers' 6.0 CPU s, librdkafka's own threads used 5.0 (83%)" in f["detail"]
    assert "without them the harness would have used 3.8%; librdkafka's broker threads spin" in f["detail"]  # 1.2/32
    # a client that spun little: named, not offered as the reason
    rows = [{"t": t, "sent": 100, "client_cpu_s": 0.01 * (t - 95)} for t in range(95, 125)]
    (tmp_path / "producers" / "stats-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    f = run_footprint(tmp_path, 100.0, 120.0)
    assert "librdkafka's own threads used 0.2 (3%): without them the harness would have used 18.8%" in f["detail"]
    assert "spin" not in f["detail"]  # (6.2 - 0.2) / 32: the harness's own code was over the goal
    # stats rows from before the client's threads were counted: nothing said
    rows = [{"t": t, "sent": 100} for t in range(95, 125)]
    (tmp_path / "producers" / "stats-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "librdkafka" not in run_footprint(tmp_path, 100.0, 120.0)["detail"]
