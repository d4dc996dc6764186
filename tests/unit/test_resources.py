"""Resource sampling (harness.samplers.resources) on real processes, and its figures and leak verdicts
(reports.resources) on synthetic samples whose slopes and sums are worked out by hand here."""
import json
import re
import os
import statistics
import subprocess
import sys
import time
import uuid

import pytest

from harness.samplers.resources import ProcessFinder, ResourceSampler, disk_usage, role_of
from harness.supervisor import Supervisor, wait_until
from harness.analysis.resources import cpu_intervals, leaks, roles_summary, slope_per_s, summarize, disk_summary
from harness.reports.resources import resources_markdown

MB = 1e6


def proc(pid, created, role, rss, cpu=0.0, fds=10, threads=5):
    return {"pid": pid, "create_time": created, "role": role, "rss_bytes": int(rss), "cpu_s": cpu, "fds": fds,
            "threads": threads}


def sample(t, *procs, disk=None):
    s = {"t": t, "procs": list(procs), "cost_ms": 1.0}
    if disk is not None:
        s["disk"] = disk
    return s


# -- roles ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmdline, role", [
    (["java", "-Xmx512m", "-cp", "/c/kafka_2.13-4.1.0.jar:/c/spark-core.jar", "kafka.Kafka", "/r/server.properties"],
     "broker"),
    (["java", "-cp", "/s/jars/*", "-Xmx1g", "org.apache.spark.deploy.SparkSubmit", "--conf",
      "spark.master=local[2]", "pyspark-shell"], "driver-jvm"),
    (["java", "-cp", "/s/jars/*", "org.apache.spark.executor.CoarseGrainedExecutorBackend", "--driver-url",
      "spark://CoarseGrainedScheduler@127.0.0.1:4242", "--executor-id", "0"], "executor"),
    (["/w/.venv/bin/python", "-m", "pyspark.daemon"], "python-worker"),
    (["/w/.venv/bin/python", "-m", "harness.spark.query", "/r/spark/job.json"], "driver"),
    (["/w/.venv/bin/python", "-m", "harness.producers.process", "/r/producers/job.json", "0"], "producer"),
    (["/w/.venv/bin/python", "-m", "locust", "-f", "producers/locustfile.py", "--worker"], "producer"),
    (["/w/.venv/bin/python", "-m", "harness.emulator", "--port", "0"], "emulator"),
    (["/w/.venv/bin/python", "-m", "harness.netproxy", "--dir", "/r/services/proxy"], "netproxy"),
    (["bash", "/s/bin/spark-class", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"], "launcher"),
    (["/usr/lib/jvm/bin/java", "-Xmx128m", "-cp", "/s/jars/*", "org.apache.spark.launcher.Main",
      "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"], "launcher"),
    (["/bin/sh", "-c", "uname -r"], "other"),
])
def test_roles_come_from_the_command_line(cmdline, role):
    assert role_of(cmdline) == role


# -- the sampler on real processes ---------------------------------------------------------------------------------
# a process with known figures: N bytes touched, 3 more threads, 5 more open files, ~0.5 s of CPU burnt
HOLD = """
import sys, threading, time
b = bytearray(int(sys.argv[1])); b[::4096] = b'x' * len(b[::4096])
files = [open(sys.executable, 'rb') for _ in range(5)]
for _ in range(3):
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
end = time.process_time() + 0.5
while time.process_time() < end:
    pass
print('ready', flush=True)
time.sleep(120)
"""


def test_the_sampler_finds_the_runs_processes_by_environment_and_tells_restarts_apart(tmp_path):
    run_id = f"unit-{uuid.uuid4().hex}"
    stranger = subprocess.Popen(["sleep", "60"])  # not of the run: no HARNESS_RUN_ID
    try:
        with Supervisor(run_id) as sup:
            spawned_at = time.time()
            holder = sup.spawn("holder", [sys.executable, "-c", HOLD, str(80_000_000)], stdout_pipe=True)
            spawned_by = time.time()  # Popen returns once the child has exec'd: it was forked in between
            assert holder.proc.stdout.readline().strip() == b"ready"
            sleepers = [sup.spawn(f"sleep-{i}", ["sleep", "60"]) for i in range(19)]
            sampler = ResourceSampler(tmp_path / "resources.jsonl", run_id, tmp_path)
            newborn = sup.spawn("newborn", ["sleep", "60"])
            young = sampler.sample()  # a single-threaded process under a second old is a spawn in passing
            assert newborn.pid not in {r["pid"] for r in young["procs"]} and young["transient"] >= 1
            time.sleep(1.0)
            sup.stop(newborn)
            first = sampler.sample()
            by_pid = {r["pid"]: r for r in first["procs"]}
            assert stranger.pid not in by_pid
            assert {holder.pid, os.getpid(), *(s.pid for s in sleepers)} == set(by_pid)
            assert by_pid[os.getpid()]["role"] == "runner"
            assert by_pid[holder.pid]["role"] == "other"
            assert by_pid[holder.pid]["name"] == os.path.basename(sys.executable)[:15]  # the kernel's comm
            assert by_pid[holder.pid]["rss_bytes"] > 80_000_000  # the 80 MB it touched are resident
            assert by_pid[holder.pid]["threads"] == 4  # main + 3
            assert by_pid[holder.pid]["fds"] == 3 + 5  # stdin, stdout, stderr + its files
            assert 0.5 <= by_pid[holder.pid]["cpu_s"] < 1.5
            # to a clock tick (10 ms), not to the second /proc/stat's btime would give
            assert spawned_at - 0.02 <= by_pid[holder.pid]["create_time"] <= spawned_by + 0.02
            # 21 processes: what one sample costs, without the disk walk (the first sample walked). In CPU time
            # (this thread's): on a loaded machine a sample also waits for a core, which costs the run nothing
            costs = []
            for _ in range(5):
                cpu = time.thread_time()
                sampler.sample()
                costs.append((time.thread_time() - cpu) * 1000)
            assert statistics.median(costs) < 50, costs
            sup.stop(holder)
            again = sup.spawn("holder", [sys.executable, "-c", HOLD, str(1_000_000)], stdout_pipe=True)
            assert again.proc.stdout.readline().strip() == b"ready"
            later = sampler.sample()
            keys = {(r["pid"], r["create_time"]) for r in later["procs"]}
            assert (holder.pid, by_pid[holder.pid]["create_time"]) not in keys
            assert any(pid == again.pid for pid, _ in keys)
    finally:
        stranger.kill()
        stranger.wait()


def test_a_process_that_execs_into_another_program_changes_role(tmp_path):
    run_id = f"unit-{uuid.uuid4().hex}"
    with Supervisor(run_id) as sup:
        go = tmp_path / "go"
        # the wrapper's own command line must not name the role: the program and its argument come from variables
        env = dict(os.environ, PY=sys.executable, ARG="harness.producers.process", GO=str(go))
        child = sup.spawn("wrapper", ["bash", "-c", 'while [ ! -e "$GO" ]; do sleep 0.05; done; '
                                                    'exec "$PY" -c "import time; time.sleep(60)" "$ARG"'], env=env)
        sampler = ResourceSampler(tmp_path / "resources.jsonl", run_id, tmp_path)
        time.sleep(1.0)  # no longer a spawn in passing
        before = {r["pid"]: r["role"] for r in sampler.sample()["procs"]}
        assert before[child.pid] == "other"  # bash
        go.touch()
        wait_until(lambda: {r["pid"]: r["role"] for r in sampler.sample()["procs"]}.get(child.pid) == "producer",
                   10, what="the exec'd role")


def test_the_thread_appends_one_line_per_sample_until_stopped(tmp_path):
    (tmp_path / "sink").mkdir()
    (tmp_path / "sink" / "part-0.parquet").write_bytes(b"x" * 100_000)
    sampler = ResourceSampler(tmp_path / "resources.jsonl", f"none-{uuid.uuid4().hex}", tmp_path, interval_s=0.1)
    sampler.start()
    wait_until(lambda: (tmp_path / "resources.jsonl").exists()
               and len((tmp_path / "resources.jsonl").read_text().splitlines()) >= 3, 10, what="three samples")
    sampler.stop()
    assert not sampler.is_alive()
    rows = [json.loads(x) for x in (tmp_path / "resources.jsonl").read_text().splitlines()]
    assert all([r["role"] for r in row["procs"]] == ["runner"] for row in rows)
    assert rows[0]["disk"]["by_dir"]["sink"] >= 100_000
    assert sampler.errors == []


def test_disk_usage_counts_what_du_counts(tmp_path):
    for d, sizes in {"sink": [100_000, 5, 70_000], "checkpoint/offsets": [300, 4096], "logs": []}.items():
        (tmp_path / d).mkdir(parents=True)
        for i, n in enumerate(sizes):
            (tmp_path / d / f"f{i}").write_bytes(os.urandom(n))
    (tmp_path / "progress.jsonl").write_bytes(b"{}\n" * 5000)
    with open(tmp_path / "sparse", "wb") as f:  # a preallocated index file: large, nearly nothing allocated
        f.truncate(10_000_000)
    (tmp_path / "sink" / "link").symlink_to("/usr")  # not followed

    def du(*paths):  # the independent figure: GNU du, apparent size off, symlinks not followed
        out = subprocess.run(["du", "-s", "-B1", "-c", *map(str, paths)], capture_output=True, text=True, check=True)
        return int(out.stdout.splitlines()[-1].split()[0])

    got = disk_usage(tmp_path)
    # du counts the directories' own blocks too; the sampler counts files only (a directory is a few KB)
    for d in ("sink", "checkpoint", "logs"):
        dirs = [p for p in (tmp_path / d).rglob("*") if p.is_dir() and not p.is_symlink()] + [tmp_path / d]
        files_only = du(tmp_path / d) - sum(os.stat(p).st_blocks * 512 for p in dirs)
        files_only -= os.lstat(tmp_path / "sink" / "link").st_blocks * 512 if d == "sink" else 0
        assert got["by_dir"][d] == files_only, d
    assert got["by_dir"]["(files)"] == du(tmp_path / "progress.jsonl", tmp_path / "sparse")
    assert got["bytes"] == sum(got["by_dir"].values())
    assert got["by_dir"]["(files)"] < 1_000_000  # the 10 MB sparse file counts what it uses


def test_only_new_pids_have_their_environment_read(monkeypatch):
    import harness.samplers.resources as res

    read = []
    real = res._has_env
    monkeypatch.setattr(res, "_has_env", lambda pid, needle: read.append(pid) or real(pid, needle))
    finder = ProcessFinder(f"none-{uuid.uuid4().hex}")
    finder.find()
    first = len(read)
    assert first > 5  # every process of the machine once
    read.clear()
    child = subprocess.Popen(["sleep", "30"])
    try:
        finder.find()
        assert child.pid in read and len(read) < first
    finally:
        child.kill()
        child.wait()


# -- figures -------------------------------------------------------------------------------------------------------
def test_slope_is_the_least_squares_slope():
    # t̄ = 1.5, ȳ = 1.5; Σ(t-t̄)(y-ȳ) = 2.25 - 0.25 - 0.25 + 2.25 = 4; Σ(t-t̄)² = 5
    assert slope_per_s([(0, 0), (1, 2), (2, 1), (3, 3)]) == pytest.approx(0.8)
    assert slope_per_s([(5, 7), (9, 7), (20, 7)]) == 0.0


def test_cpu_is_cpu_time_deltas_over_wall_time_by_role():
    samples = [sample(100, proc(1, 50, "broker", 1, cpu=5), proc(2, 60, "executor", 1, cpu=3)),
               # the executor died; a producer was born at 104 and used 2 s since
               sample(110, proc(1, 50, "broker", 1, cpu=15), proc(3, 104, "producer", 1, cpu=2)),
               sample(120, proc(1, 50, "broker", 1, cpu=20), proc(3, 104, "producer", 1, cpu=4))]
    assert cpu_intervals(samples) == [(100, 110, {"broker": 1.0, "producer": 0.2}),
                                      (110, 120, {"broker": 0.5, "producer": 0.2})]
    roles = roles_summary(samples)
    assert roles["broker"]["cores_mean"] == 0.75 and roles["broker"]["cores_peak"] == 1.0
    assert roles["broker"]["cpu_s"] == 20
    assert roles["producer"]["cores_mean"] == 0.2 and roles["producer"]["cpu_s"] == 4
    assert roles["executor"]["cores_mean"] == 0.0 and roles["executor"]["cpu_s"] == 3


def test_role_rss_sums_its_processes_at_each_sample():
    samples = [sample(0, proc(1, 0, "producer", 100 * MB, fds=20), proc(2, 0, "producer", 200 * MB, threads=9)),
               sample(5, proc(1, 0, "producer", 150 * MB, fds=31), proc(2, 0, "producer", 250 * MB)),
               sample(10, proc(1, 0, "producer", 150 * MB))]
    r = roles_summary(samples)["producer"]
    assert r["processes"] == 2
    assert r["rss_peak_bytes"] == 400 * MB
    assert r["rss_mean_bytes"] == round((300 + 400 + 150) * MB / 3)
    assert r["rss_peak_process_bytes"] == 250 * MB
    assert r["fds_max"] == 31 and r["threads_max"] == 9


def test_disk_peak_final_and_per_directory():
    samples = [sample(0, disk={"bytes": 100, "by_dir": {"sink": 60, "logs": 40}}), sample(10),
               sample(20, disk={"bytes": 300, "by_dir": {"sink": 250, "logs": 50}}),
               sample(30, disk={"bytes": 200, "by_dir": {"sink": 150, "checkpoint": 50}})]
    assert disk_summary(samples) == {"samples": 3, "peak_bytes": 300, "peak_at": 20, "final_bytes": 200,
                                     "by_dir_peak": {"checkpoint": 50, "logs": 50, "sink": 250},
                                     "by_dir_final": {"sink": 150, "checkpoint": 50}}


# -- leaks ---------------------------------------------------------------------------------------------------------
def test_a_flat_process_is_ok_and_a_linear_grower_is_measured_exactly():
    t0 = 1000.0
    samples = [sample(t0 + 60 * k, proc(10, t0, "broker", 500 * MB + (k % 2) * 1000),
                      proc(11, t0, "producer", 200 * MB + 100 * MB * (60 * k) / 3600))
               for k in range(21)]  # 0 … 1200 s; the producer grows 100 MB/h exactly
    out = leaks(samples, after_s=120, max_growth_mb_per_h=50, min_span_s=300)
    broker, producer = out["processes"]
    assert (broker["role"], producer["role"]) == ("broker", "producer")
    # after the warm-up: samples at 120 … 1200 s, 19 of them
    assert broker["samples"] == 19 and broker["span_s"] == 1080
    assert broker["verdict"] == "ok" and abs(broker["growth_mb_per_h"]) < 0.01
    assert producer["verdict"] == "leak" and producer["growth_mb_per_h"] == pytest.approx(100.0)
    assert producer["rss_first_mb"] == 203.3  # 200 MB + 100 MB/h × 120 s, to 0.1 MB
    assert out["ok"] is False and out["leaking"] == 1 and out["judged"] == 2
    assert "producer pid 11 +100.0 MB/h" in out["detail"]
    # the role total of a single process is that process's slope
    assert out["roles"]["producer"]["growth_mb_per_h"] == pytest.approx(100.0)


def test_a_noisy_slope_against_the_threshold():
    # RSS +0, +20, +10, +30 MB at 0, 900, 1800, 2700 s: slope 0.8 × 10 MB per 900 s = 32 MB/h (hand-computed above)
    samples = [sample(900 * k, proc(7, 0, "driver-jvm", 300 * MB + d * MB)) for k, d in enumerate((0, 20, 10, 30))]
    over = leaks(samples, after_s=0, max_growth_mb_per_h=30, min_span_s=600)
    assert over["processes"][0]["growth_mb_per_h"] == pytest.approx(32.0)
    assert over["processes"][0]["verdict"] == "leak"
    within = leaks(samples, after_s=0, max_growth_mb_per_h=40, min_span_s=600)
    assert within["processes"][0]["verdict"] == "ok" and within["ok"] is True


def test_a_restarted_process_is_a_new_process_with_its_own_warm_up():
    # the driver (pid 20) is killed at 1500 s; a new one gets the same pid at 1510 and grows while it warms up
    # (1510 … 1630 s), then stays flat
    samples = []
    for k in range(0, 51):
        t = 60.0 * k
        if t <= 1500:
            samples.append(sample(t, proc(20, 0.0, "driver", 400 * MB)))
        else:
            rss = 100 * MB + min(t - 1510, 120) / 120 * 300 * MB
            samples.append(sample(t, proc(20, 1510.0, "driver", rss)))
    out = leaks(samples, after_s=120, max_growth_mb_per_h=20, min_span_s=300)
    first, second = out["processes"]
    assert (first["create_time"], second["create_time"]) == (0.0, 1510.0)
    assert first["verdict"] == "ok" and first["growth_mb_per_h"] == 0
    # its warm-up ends at 1630: samples at 1680 … 3000 s, all at 400 MB
    assert second["samples"] == 23 and second["rss_first_mb"] == 400.0 and second["verdict"] == "ok"
    assert second["growth_mb_per_h"] == 0
    assert out["ok"] is True and out["judged"] == 2


def test_a_process_watched_too_briefly_is_not_judged_and_says_so():
    samples = [sample(60.0 * k, proc(1, 0.0, "broker", 300 * MB),
                      *([proc(99, 590.0, "python-worker", (10 + 50 * k) * MB)] if 10 <= k <= 14 else []))
               for k in range(20)]
    out = leaks(samples, after_s=60, max_growth_mb_per_h=50, min_span_s=300)
    worker = next(r for r in out["processes"] if r["role"] == "python-worker")
    # born at 590 s, warm until 650 s: samples at 660, 720, 780, 840 (4 samples, 180 s) < 300 s
    assert worker["verdict"] == "not judged" and worker["samples"] == 4 and worker["span_s"] == 180
    assert "4 sample(s) over 180 s" in worker["detail"] and worker["growth_mb_per_h"] is None
    assert out["ok"] is True and out["not_judged"] == 1 and out["judged"] == 1
    nothing = leaks(samples[:3], after_s=60, max_growth_mb_per_h=50, min_span_s=300)
    assert nothing["judged"] == 0 and "no process watched long enough" in nothing["detail"]


def test_the_summary_and_its_markdown():
    samples = [sample(60.0 * k, proc(1, 0.0, "broker", 300 * MB, cpu=6.0 * k),
                      proc(2, 0.0, "producer", (100 + 10 * k) * MB, cpu=3.0 * k),
                      disk={"bytes": 1_000_000 * (k + 1), "by_dir": {"sink": 1_000_000 * (k + 1)}})
               for k in range(11)]
    samples[3]["disk_ms"], samples[4]["disk_ms"], samples[4]["transient"] = 4.0, 8.0, 2
    s = summarize(samples, after_s=0, max_growth_mb_per_h=100, min_span_s=300)
    assert s["samples"] == 11 and s["interval_s"] == 60 and s["cost_ms"] == {"mean": 1.0, "max": 1.0}
    assert s["disk_walk_ms"] == {"count": 2, "mean": 6.0, "max": 8.0} and s["transient"] == 2
    assert s["roles"]["broker"]["cores_mean"] == 0.1 and s["roles"]["producer"]["cores_mean"] == 0.05
    assert s["disk"]["peak_bytes"] == 11_000_000
    # the producer: +10 MB a minute = 600 MB/h
    assert s["leaks"]["processes"][1]["growth_mb_per_h"] == pytest.approx(600.0)
    text = "\n".join(resources_markdown(s))
    assert "## Resources" in text and "### Leaks: **LEAK**" in text
    assert "of which walking the run directory 6.0 ms on average over 2 walks" in text
    assert "2 sighting(s) of single-threaded processes under a second old" in text
    assert "| producer | 2 | 11 | 600 | 100 MB | 200 MB | +600.0 | **LEAK** |" in text
    assert "| broker | 1 | 300 MB | 300 MB | 300 MB | 60.0 | 0.10 | 0.10 | 10 | 5 |" in text
    assert "| sink | 11 MB | 11 MB |" in text
    assert resources_markdown({}) == [] and summarize([]) == {}


# -- rendering -----------------------------------------------------------------------------------------------------
def _run_dir(tmp_path, samples, result_extra=None):
    """A run directory as the measuring step leaves it: the samples summarized into result.json, condensed into
    series.json (harness.analysis.series), and kept in resources.jsonl."""
    from harness.analysis.series import disk_rows, resource_series

    result = {"scenario": "soak", "backend": "kafka", "verdict": "pass", "checks": [], "counts": {"produced": 1},
              **({"resources": summarize(samples)} if samples else {}), **(result_extra or {})}
    (tmp_path / "result.json").write_text(json.dumps(result))
    series = {"t0": 1000.0, **({"resources": resource_series(samples, 1000.0), "disk": disk_rows(samples, 1000.0)}
                               if samples else {})}
    (tmp_path / "series.json").write_text(json.dumps(series))
    (tmp_path / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return tmp_path


SAMPLES = [sample(990.0 + 10 * k, proc(1, 900.0, "broker", 400 * MB, cpu=2.0 * k),
                  proc(2, 900.0, "driver", (200 + k) * MB, cpu=1.0 * k),
                  *([proc(3, 1000.0, "producer", 80 * MB, cpu=0.5 * k)] if k >= 1 else []),
                  disk=({"bytes": (k + 1) * 3 * MB, "by_dir": {"sink": (k + 1) * 2 * MB, "checkpoint": (k + 1) * MB}}
                        if k % 2 == 0 else None))
           for k in range(7)]  # 990 … 1050 s, disk walked at 4 of them


def test_report_html_draws_rss_cpu_and_disk_per_role_when_the_run_was_sampled(tmp_path):
    from harness.reports.html import build_html, disk_chart, load_run, resources_chart

    run = load_run(_run_dir(tmp_path, SAMPLES))
    c = resources_chart(run, [(20.0, 30.0, "broker #1")])
    # RSS: broker 7 + driver 7 + producer 6 points; cores: 6 intervals for each of the three roles
    assert c.id == "fig-resources" and c.points == 7 + 7 + 6 + 3 * 6
    assert [line.get_label() for line in c.axes[0].get_legend().get_lines()] == ["broker", "driver", "producer"]
    broker = c.axes[0].get_lines()[0]
    assert list(broker.get_xdata()) == [-10.0, 0.0, 10.0, 20.0, 30.0, 40.0, 50.0]  # seconds since traffic started
    assert list(broker.get_ydata()) == [400.0] * 7
    # the broker used 2 CPU s per 10 s: 0.2 cores
    assert set(c.axes[1].get_lines()[0].get_ydata()) == {0.2}
    d = disk_chart(run, [])
    assert d.id == "fig-disk" and d.points == 4 * 2  # four walks, two directories
    page = build_html(tmp_path)
    for fig in ("fig-resources", "fig-disk"):
        assert len(re.findall(rf'<g id="data-{fig}-\d+"', page)) >= 2, fig
    assert "<h2>Resources</h2>" in page and "Leaks: ok." in page


def test_report_html_leaves_resources_out_when_the_run_was_not_sampled(tmp_path):
    from harness.reports.html import build_html

    _run_dir(tmp_path, [])
    (tmp_path / "resources.jsonl").unlink()
    page = build_html(tmp_path)
    assert "fig-resources" not in page and "fig-disk" not in page and "<h2>Resources</h2>" not in page


def test_report_md_has_the_resources_section_from_the_result(tmp_path):
    from harness.reports.report import build_report

    result = {"scenario": "soak", "backend": "kafka", "verdict": "pass", "duration_s": 60, "batches": 3,
              "checks": [], "counts": {"produced": 1}, "latency_ms": {"p50": 1.0},
              "throughput": {"produce_eps": 1.0, "target_eps": 1.0, "process_rps": 1.0}}
    _run_dir(tmp_path, SAMPLES)
    text = build_report({**result, "resources": summarize(SAMPLES)}, tmp_path)
    assert "## Resources" in text and "| broker | 1 | 400 MB | 400 MB | 400 MB | 12.0 | 0.20 | 0.20 | 10 | 5 |" in text
    stored = summarize(SAMPLES)
    stored["roles"]["broker"]["processes"] = 3  # the renderer draws the measured figures, never its own
    assert "| broker | 3 |" in build_report({**result, "resources": stored}, tmp_path)
    assert "## Resources" not in build_report(result, tmp_path)  # nothing measured: no section


def test_anonymous_memory_is_told_apart_from_file_pages_mapped_in(tmp_path):
    """A process that reads a 64 MB file through mmap has it in RSS, not in anonymous memory; one that fills a
    64 MB buffer has it in both. Leaks are judged on the anonymous part."""
    from harness.samplers.resources import ProcReader

    data = tmp_path / "history.bin"
    data.write_bytes(os.urandom(1 << 20) * 64)
    mapper = ("import mmap, sys, time\nf = open(sys.argv[1], 'rb')\nm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
              "s = sum(m[i] for i in range(0, len(m), 4096))\nprint('ready', flush=True)\ntime.sleep(60)\n")
    filler = "import time\nb = bytearray(64 << 20)\nb[::4096] = b'x' * len(b[::4096])\nprint('ready', flush=True)\ntime.sleep(60)\n"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(data)], stdout=subprocess.PIPE, text=True)
             for code in (mapper, filler)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        reader = ProcReader(None)
        mapped, filled = (reader.record(p.pid) for p in procs)
        assert mapped["rss_bytes"] - mapped["anon_bytes"] >= 60 << 20 and mapped["anon_bytes"] < 40 << 20
        assert filled["anon_bytes"] >= 64 << 20
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_leaks_are_judged_on_anonymous_memory_when_it_was_sampled():
    grow_file_pages = [sample(60.0 * i, {**proc(7, 0.0, "runner", 100 * MB + i * 10 * MB), "anon_bytes": int(80 * MB)})
                       for i in range(20)]
    verdict = leaks(grow_file_pages, after_s=0, max_growth_mb_per_h=100, min_span_s=300, t0=0.0)
    assert verdict["ok"] and verdict["processes"][0]["growth_mb_per_h"] == 0.0  # RSS +600 MB/h, all of it files
