"""The CPU that processes outside the run took while it measured (harness.analysis.resources.machine), from
hand-made resources.jsonl samples with /proc/stat counters whose figures are worked out by hand here; the sampler's
reading of /proc/stat; and how the console's footprint line and the report word it."""
import json
import os
import time

import pytest

from harness.analysis.resources import machine, run_machine
from harness.samplers.resources import ResourceSampler, machine_cpu
from harness.text.wording import machine_line
from harness.reports.resources import machine_html, resources_markdown


def proc(pid, role, cpu, created=50.0):
    return {"pid": pid, "create_time": created, "role": role, "rss_bytes": 10**8, "cpu_s": cpu, "fds": 10,
            "threads": 5}


def stat(user, system, steal, nice=10.0, irq=1.0, softirq=2.0, idle=5000.0, cores=2):
    return {"user": user, "nice": nice, "system": system, "idle": idle, "iowait": 5.0, "irq": irq,
            "softirq": softirq, "steal": steal, "cores": cores}


# Four samples 10 s apart on 2 cores (by hand, per interval):
# [100, 110]: machine busy user +12, nice +0.5, system +3, irq +0.2, softirq +0.3 = 16.0 s; steal +0.5;
#             the run: runner +1, broker +6, a producer born at 105 with 2.0 = 9.0 s; others 16 - 9 = 7.0 s
# [110, 120]: the producer ended in it: left out (its last CPU is not seen)
# [120, 130]: busy user +10, system +2 = 12.0 s; steal 0; the run: runner +0.5, broker +5 = 5.5; others 6.5 s
SAMPLES = [
    {"t": 100.0, "procs": [proc(1, "runner", 10.0), proc(2, "broker", 100.0)],
     "stat": stat(1000.0, 200.0, 3.0)},
    {"t": 110.0, "procs": [proc(1, "runner", 11.0), proc(2, "broker", 106.0), proc(3, "producer", 2.0, 105.0)],
     "stat": stat(1012.0, 203.0, 3.5, nice=10.5, irq=1.2, softirq=2.3)},
    {"t": 120.0, "procs": [proc(1, "runner", 12.0), proc(2, "broker", 110.0)],
     "stat": stat(1020.0, 205.0, 4.5, nice=10.5, irq=1.2, softirq=2.3)},
    {"t": 130.0, "procs": [proc(1, "runner", 12.5), proc(2, "broker", 115.0)],
     "stat": stat(1030.0, 207.0, 4.5, nice=10.5, irq=1.2, softirq=2.3)},
]


def test_other_processes_cpu_is_the_machines_busy_time_less_the_runs_own_and_steal_apart():
    m = machine(SAMPLES, 100.0, 130.0, 0.10)
    assert m["window_s"] == pytest.approx(20.0) and m["left_out_s"] == pytest.approx(10.0) and m["cores"] == 2
    assert m["machine_cpu_s"] == pytest.approx(28.0)  # 16 + 12
    assert m["run_cpu_s"] == pytest.approx(14.5)  # 9 + 5.5
    assert m["other_cpu_s"] == pytest.approx(13.5) and m["steal_cpu_s"] == pytest.approx(0.5)
    assert m["other_cores"] == pytest.approx(13.5 / 20) and m["run_cores"] == pytest.approx(14.5 / 20)
    assert m["other_share"] == pytest.approx(13.5 / 40) and m["steal_share"] == pytest.approx(0.5 / 40)
    assert m["busy_share"] == pytest.approx(14.0 / 40) and m["busy"] is True
    assert "0.68 cores (33.8% of the machine's 2 cores)" in m["detail"]
    assert "10 s left out" in m["detail"] and "the machine was busy (35.0% > 10%)" in m["detail"]


def test_the_bound_decides_busy():
    assert machine(SAMPLES, 100.0, 130.0, 0.35)["busy"] is False  # 35.0% is not above 35%
    assert "within the 35% bound" in machine(SAMPLES, 100.0, 130.0, 0.35)["detail"]
    assert machine(SAMPLES, 100.0, 130.0, 0.34)["busy"] is True


def test_a_window_inside_one_interval_takes_its_share():
    m = machine(SAMPLES, 105.0, 108.0, 0.10)  # 3 s of [100, 110]: 0.3 of its 16 s busy, 9 s run, 0.5 s steal
    assert m["window_s"] == pytest.approx(3.0) and m["left_out_s"] == 0
    assert m["machine_cpu_s"] == pytest.approx(4.8) and m["run_cpu_s"] == pytest.approx(2.7)
    assert m["other_cpu_s"] == pytest.approx(2.1) and m["steal_cpu_s"] == pytest.approx(0.15)
    assert m["busy_share"] == pytest.approx((2.1 + 0.15) / 6.0)


def test_an_idle_neighbourhood_is_not_busy_and_never_below_zero():
    quiet = [dict(s, stat=stat(1000.0 + i, 200.0, 3.0)) for i, s in enumerate(SAMPLES[:2])]  # busy +1 s, run 9 s
    m = machine(quiet, 100.0, 110.0, 0.10)
    assert m["other_cpu_s"] == 0.0 and m["busy_share"] == pytest.approx(0.0) and m["busy"] is False


def test_without_proc_stat_counters_the_machine_is_unknown_never_quiet():
    bare = [{k: v for k, v in s.items() if k != "stat"} for s in SAMPLES]
    m = machine(bare, 100.0, 130.0, 0.10)
    assert m["busy"] is None and "unknown" in m["detail"] and "/proc/stat" in m["detail"]
    m = machine(SAMPLES[1:3], 110.0, 120.0, 0.10)  # its only interval saw the producer end
    assert m["busy"] is None and "saw a process of the run end" in m["detail"]


def test_a_run_directory_is_judged_over_its_traffic_ended_early(tmp_path):
    (tmp_path / "resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    (tmp_path / "timeline.jsonl").write_text(json.dumps({"event": "traffic_end", "t": 110.0}) + "\n")
    m = run_machine(tmp_path, 100.0, 130.0, 0.10)  # the traffic stopped at 110: [100, 110] only
    assert m["to_t"] == 110.0 and m["window_s"] == pytest.approx(10.0)
    assert m["other_cpu_s"] == pytest.approx(7.0) and m["busy_share"] == pytest.approx(7.5 / 20)


def test_proc_stat_is_read_in_seconds_with_its_cpus(tmp_path):
    path = tmp_path / "stat"
    path.write_text("cpu  4705 356 584 3699176 23060 0 277 15 20 0\n"
                    "cpu0 2000 100 300 1800000 10000 0 100 5 10 0\ncpu1 2705 256 284 1899176 13060 0 177 10 10 0\n"
                    "intr 1234 0 0\nctxt 5678\nbtime 1700000000\n")
    tick = os.sysconf("SC_CLK_TCK")
    got = machine_cpu(str(path))
    assert got == pytest.approx({"user": 4705 / tick, "nice": 356 / tick, "system": 584 / tick,
                                 "idle": 3699176 / tick, "iowait": 23060 / tick, "irq": 0.0, "softirq": 277 / tick,
                                 "steal": 15 / tick, "cores": 2}, abs=0.006)
    assert machine_cpu(str(tmp_path / "none")) is None


def test_every_sample_carries_the_machines_counters(tmp_path):
    """The real /proc/stat: counters that only grow, and the sampler writes them into every row."""
    sampler = ResourceSampler(tmp_path / "resources.jsonl", "no-such-run", tmp_path)
    first = sampler.sample()["stat"]
    sum(i * i for i in range(300_000))  # some CPU between the two
    time.sleep(0.05)
    second = sampler.sample()["stat"]
    assert first["cores"] >= 1 and second["cores"] == first["cores"]
    assert all(second[k] >= first[k] for k in first)
    assert second["user"] + second["system"] > first["user"] + first["system"]


def test_the_console_and_the_report_say_it_beside_the_footprint():
    m = machine(SAMPLES, 100.0, 130.0, 0.10)
    line = machine_line(m)
    assert line.startswith("machine: other processes took 0.68 cores") and "unjudged, not failed" in line
    assert "The machine was busy." in machine_html(m)
    md = "\n".join(resources_markdown({}, {"detail": "the harness used 1.0% of the CPU"}, m))
    assert "footprint: the harness used 1.0%" in md and "**The machine was busy.** machine: other processes" in md
    quiet = machine(SAMPLES, 100.0, 130.0, 0.5)
    assert "unjudged" not in machine_line(quiet) and "busy." not in machine_html(quiet)
