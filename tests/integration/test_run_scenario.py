"""`harness run` as a user runs it: a real scenario end to end, the result contract, and no orphans ever."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from harness.analysis.progress import parse_offsets

from harness.records.history import load_acks
from harness.supervisor import processes_with_env, wait_until
from report_pages import open_page, svg_text

pytestmark = pytest.mark.integration

RESULT_KEYS = {"scenario", "backend", "verdict", "checks", "counts", "throughput", "latency_ms", "batches",
               "duration_s"}


def start_run(harness_env, out, *overrides):
    token = uuid.uuid4().hex
    env = dict(harness_env, HARNESS_TEST_TOKEN=token)
    argv = [sys.executable, "-m", "harness", "run", "steady", "--out", str(out)]
    for o in overrides:
        argv += ["--set", o]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, token


def wait_for_event(out, event, proc, timeout=240):
    deadline = time.time() + timeout
    path = out / "timeline.jsonl"
    while time.time() < deadline:
        if path.exists() and any(json.loads(line)["event"] == event for line in path.read_text().splitlines()):
            return
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.3)
    raise AssertionError(f"no {event} within {timeout}s")


def assert_no_orphans(token, timeout=30):
    deadline = time.time() + timeout
    while processes_with_env("HARNESS_TEST_TOKEN", token):
        if time.time() > deadline:
            left = processes_with_env("HARNESS_TEST_TOKEN", token)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes left behind: {left}")
        time.sleep(0.5)


def steady_events(out) -> int:
    """The events steady_run's producers sent, from their own summaries."""
    return sum(json.loads(p.read_text())["sent"] for p in (out / "producers").glob("summary-*.json"))


def test_steady_passes_end_to_end(steady_run):
    """With its warm-up (until the query caught up with its start) before the 20 s measured window: the warm-up's
    events are checked like the others and kept out of the latency and throughput figures."""
    out, proc, token = steady_run
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert RESULT_KEYS <= set(result)
    assert result["verdict"] == "pass" and result["backend"] == "kafka"
    # the producers were told when the measured window starts (measure.json): the warm-up then 20 s, at 3,000/s
    measure = json.loads((out / "producers" / "measure.json").read_text())
    events = steady_events(out)
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and abs(events - 3000 * (measure["warmup_s"] + 20)) <= 1
    assert c["delivered_unique"] == c["acked"] == events
    # the warm-up's events are those the schedule put before the measured window at 3,000/s (the one on the
    # boundary either side), counted from the ack logs
    acks = load_acks(out / "producers")
    start_ms = float(json.loads((out / "producers" / "job.json").read_text())["start_at"]) * 1000.0
    assert measure["measure_at"] * 1000.0 == pytest.approx(start_ms + measure["warmup_s"] * 1000.0)
    # the producer started once the driver's session was ready (not taking CPU from its start), was ready before
    # the go, and its schedule counts from the go's start
    marks = {}
    for line in (out / "timeline.jsonl").read_text().splitlines():
        marks.setdefault(json.loads(line)["event"], json.loads(line))
    assert marks["backend_ready"]["t"] <= marks["producers_launched"]["t"] < marks["query_started"]["t"]
    assert marks["driver_session_ready"]["t"] <= marks["producers_launched"]["t"]
    assert marks["producers_ready"]["t"] * 1000.0 < start_ms == marks["warmup_start"]["at"] * 1000.0
    assert json.loads((out / "producers" / "summary-0.json").read_text())["start_at"] * 1000.0 == start_ms
    assert start_ms <= acks["intended_ms"].min() < start_ms + 1000.0
    warm = int((acks["intended_ms"] < measure["measure_at"] * 1000.0).sum())
    assert abs(warm - 3000 * measure["warmup_s"]) <= 1 and result["warmup"]["events_delivered"] == warm
    assert len(acks) == events
    assert result["warmup"]["latency_ms"]["max"] > 0
    assert set(result["latency_ms"]) == {"p50", "p90", "p99", "p999", "max"}
    assert 0 < result["latency_ms"]["p50"] <= result["latency_ms"]["p99"] <= result["latency_ms"]["max"]
    assert result["batches"] > 1 and result["throughput"]["process_rps"] > 0
    assert abs(result["throughput"]["produce_eps"] - 3000) < 1
    for name in ("scenario.json", "progress.jsonl", "report.md", "timeline.jsonl", "spark/driver.log",
                 "producers/acks-0.arrows", "services/kafka/node-1/server.log", "checkpoint/offsets/0"):
        assert (out / name).exists(), name
    progress = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert sum(p["numInputRows"] for p in progress) == events
    # where Spark read each partition (its event log), against the offsets Spark reported per batch: one scan
    # task per partition that had new records in the batch
    ranges = 0
    for p in progress:
        start, end = (parse_offsets(p["sources"][0][k]).get("events", {}) for k in ("startOffset", "endOffset"))
        ranges += sum(1 for part, o in end.items() if o > start.get(part, 0))
    placement = result["placement"]
    assert placement["tasks_reading"] == ranges and placement["executors"] == ["driver"]
    assert placement["partition_known"] == 1.0 and sorted(placement["partitions"], key=int) == list(map(str, range(8)))
    assert "Where Spark read the source" in (out / "report.md").read_text()
    assert "PASS" in (out / "report.md").read_text()
    # the proxy is opt-in (backend.proxy): without it the query connects straight and no consumers are counted
    assert not (out / "services" / "proxy").exists() and result["consumers"] == {}
    assert "query_bootstrap" not in result["backend_info"]
    assert_no_orphans(token, timeout=5)


# Ctrl-C is make test-slow's: SIGTERM takes the same path (test_run_stopped.py), a crash does not
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGKILL],
                         ids=["ctrl-c", "crash"])
def test_interrupted_or_crashed_run_leaves_no_process_behind(harness_env, tmp_path, sig):
    out = tmp_path / "run"
    proc, token = start_run(harness_env, out, "producers.duration_s=60")
    wait_for_event(out, "traffic_start", proc)
    wait_until(lambda: any('"acked": 0,' not in line for f in (out / "producers").glob("stats-*.jsonl")
                           for line in f.read_text().splitlines()), 120, what="the producers' first acks")
    assert len(processes_with_env("HARNESS_TEST_TOKEN", token)) >= 4  # runner, broker, Spark (+JVM), producer
    proc.send_signal(sig)
    stdout, _ = proc.communicate(timeout=120)
    assert_no_orphans(token)
    if sig == signal.SIGINT:
        assert proc.returncode == 130, stdout
        result = json.loads((out / "result.json").read_text())
        assert result["verdict"] == "unjudged" and result["checks"] == []  # stopped from outside: no verdict
        assert result["unjudged_reason"].startswith("interrupted (Ctrl-C)")
        assert result["counts"]["produced"] > 0  # what was recorded before the interrupt is kept


def test_bad_scenario_exits_2_before_starting_anything(harness_env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[producers]\nrate = { kind = "constant", eps = -1 }\nbogus = 1\n')
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(bad)], env=harness_env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{bad}: producers.rate.constant.eps" in proc.stderr
    assert f"{bad}: producers.bogus: unknown key; allowed:" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_list_shows_scenarios_with_descriptions(harness_env):
    proc = subprocess.run([sys.executable, "-m", "harness", "list", "steady"], env=dict(harness_env, COLUMNS="200"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert any(line.startswith("steady ") and " kafka " in line and " load " in line
               for line in proc.stdout.splitlines()), proc.stdout


def test_the_run_report_draws_every_figure_from_the_run(steady_run, browser):
    """report.html in Chromium: every figure drawn, nothing fetched, no error; the counts it draws are the ack
    logs' and the sink's."""
    out, proc, _ = steady_run
    assert proc.returncode == 0, proc.stdout[-3000:]
    figures, page = open_page(browser, out / "report.html", "steady-report")
    with page:
        assert list(figures) == ["fig-throughput", "fig-latency-time", "fig-latency-dist", "fig-lag", "fig-skew",
                                 "fig-phases", "fig-tasks", "fig-placement", "fig-resources", "fig-disk"]
        assert "broker" in svg_text(page, "fig-resources")  # every process of the run sampled, by role
        assert "PASS" in page.evaluate("document.querySelector('h1').textContent")
        assert "warm-up" in svg_text(page, "fig-throughput")
    assert figures["fig-skew"]["data_points"] == 8  # one bar a partition
    series = json.loads((out / "series.json").read_text())
    acks = load_acks(out / "producers")
    assert sum(series["produced"]["sent"]) == len(acks) == steady_events(out)
    result = json.loads((out / "result.json").read_text())
    assert sum(series["delivered"]["visible"]) == result["counts"]["sink_rows"] == steady_events(out)
    assert series["lag"]["partitions"] == [str(p) for p in range(8)]
    # rebuilt by `harness report` from the run directory alone, the same page
    before = (out / "report.html").read_text()
    rebuilt = subprocess.run([sys.executable, "-m", "harness", "report", str(out)], capture_output=True, text=True,
                             timeout=120)
    assert rebuilt.returncode == 0 and "report.html" in rebuilt.stdout, rebuilt.stderr
    assert (out / "report.html").read_text() == before
