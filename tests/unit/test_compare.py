"""harness compare: changes judged against each run's own noise (worked out by hand here), thresholds for CI."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from reference_windows import latency_windows
from harness.reports.compare import CompareError, compare, parse_thresholds


def make_run(path, p99_windows, batch_rows_ms, lost=0, verdict="pass"):
    """A run directory as the harness leaves it: result.json (p99 = mean of its windows' p99 for the sake of
    the test), and progress.jsonl with one line per batch (rows, triggerExecution ms)."""
    path.mkdir(parents=True)
    rows = sum(r for r, _ in batch_rows_ms)
    busy = sum(ms for _, ms in batch_rows_ms) / 1000.0
    result = {"verdict": verdict, "counts": {"lost": lost, "duplicates": 0},
              "throughput": {"process_rps": rows / busy, "produce_eps": 1000.0},
              "latency_ms": {"p50": 100.0, "p90": 150.0, "p99": float(np.mean(p99_windows)), "max": 500.0},
              "latency_windows": [{"from_ms": i, "n": 100, "p50": 100.0, "p90": 150.0, "p99": v, "max": 500.0}
                                  for i, v in enumerate(p99_windows)]}
    (path / "result.json").write_text(json.dumps(result))
    (path / "progress.jsonl").write_text("".join(
        json.dumps({"batchId": i, "numInputRows": r, "durationMs": {"triggerExecution": ms}}) + "\n"
        for i, (r, ms) in enumerate(batch_rows_ms)))
    return path


def test_changes_are_judged_against_the_noise_the_runs_show(tmp_path):
    base = make_run(tmp_path / "a", [100, 110, 90, 100], [(1000, 1000), (1000, 1000), (1000, 1000)])
    slower = make_run(tmp_path / "b", [200, 220, 180, 200], [(1000, 1000), (1000, 1000), (1000, 1000)])
    noisy = make_run(tmp_path / "c", [20, 190, 95, 115], [(1000, 1000), (1000, 1000), (1000, 1000)], lost=2)
    steadier = make_run(tmp_path / "d", [80, 130, 95, 115], [(1000, 1000), (1000, 1000), (1000, 1000)])
    summary = compare([base, slower, noisy, steadier])
    b, c, d = (r["changes"] for r in summary["runs"])
    # p99 noise by hand: windows' standard errors (std with ddof=1 over sqrt(4)) combined, doubled, + 1% of 100
    se_a = np.std([100, 110, 90, 100], ddof=1) / 2
    se_b = np.std([200, 220, 180, 200], ddof=1) / 2
    assert b["p99"]["noise"] == pytest.approx(2 * math.hypot(se_a, se_b) + 1.0)
    assert (b["p99"]["delta"], b["p99"]["verdict"]) == (100.0, "worse")
    # mean 105 both: +5 inside 2 * hypot(5.77, 10.8) + 1 = 25.5 is the same; inside 2 * hypot(5.77, 35.3) + 1
    # = 72.6, a band of 73% of the baseline, it cannot be told (a change hidden in that much noise is not "same")
    se_c, se_d = np.std([20, 190, 95, 115], ddof=1) / 2, np.std([80, 130, 95, 115], ddof=1) / 2
    assert (d["p99"]["delta"], d["p99"]["verdict"]) == (5.0, "same")
    assert d["p99"]["noise"] == pytest.approx(2 * math.hypot(se_a, se_d) + 1.0)
    assert (c["p99"]["delta"], c["p99"]["verdict"]) == (5.0, "cannot tell")
    assert c["p99"]["noise"] == pytest.approx(2 * math.hypot(se_a, se_c) + 1.0) and c["p99"]["noise"] > 50.0
    # identical batches: zero spread, so only the 1% floor; equal throughput is the same
    assert b["process_rps"]["verdict"] == "same" and b["process_rps"]["noise"] == pytest.approx(10.0)
    assert c["lost"]["verdict"] == "worse" and c["lost"]["noise_basis"] == "exact"
    # produce_eps has no samples in these runs: no band; within the 1% every band has it is the same
    assert b["produce_eps"]["verdict"] == "same" and b["produce_eps"]["noise"] is None
    assert "need 3 each" in b["produce_eps"]["noise_basis"]


def repeat_set(path, runs):
    """A directory as `harness run --repeat N` leaves it: repeat.json naming its runs r1..rN."""
    path.mkdir(parents=True)
    for i, (windows, batches) in enumerate(runs, 1):
        make_run(path / f"r{i}", windows, batches)
    (path / "repeat.json").write_text(json.dumps({"runs": [{"run_dir": f"r{i}"} for i in range(1, len(runs) + 1)]}))
    return path


def test_a_40_percent_drop_with_tight_repeats_is_worse_and_noise_comes_from_the_repeats(tmp_path):
    """Each run's own batches vary wildly (their spread alone would hide anything), but three repeats agree to
    within 2%: the repeats are the noise, and a 40% drop in processing rate is worse."""
    wild = [(1000, 500), (1000, 2000), (1000, 1000)]

    def reps(scale):
        return [([100, 100, 100], [(int(r * scale * f), ms) for r, ms in wild]) for f in (0.99, 1.0, 1.01)]

    base, slower = repeat_set(tmp_path / "a", reps(1.0)), repeat_set(tmp_path / "b", reps(0.6))
    ch = compare([base, slower])["runs"][0]["changes"]["process_rps"]
    assert ch["verdict"] == "worse" and ch["change"] == pytest.approx(-0.4, abs=0.01)
    assert ch["noise_basis"].startswith("repeats (n=3, 3)")
    means = [np.mean([sum(r for r, _ in b) / sum(ms for _, ms in b) * 1000 for _, b in reps(x)]) for x in (1.0, 0.6)]
    assert ch["base"] == pytest.approx(means[0]) and ch["value"] == pytest.approx(means[1])


def test_a_change_hidden_in_noise_or_with_too_few_samples_cannot_be_told(tmp_path):
    base = make_run(tmp_path / "a", [100, 110], [(1000, 1000), (1000, 1000)])  # two windows: below the minimum
    run = make_run(tmp_path / "b", [130, 140], [(1000, 1000), (1000, 1000)])
    ch = compare([base, run])["runs"][0]["changes"]["p99"]
    assert ch["verdict"] == "cannot tell" and ch["noise"] is None
    md = subprocess.run([sys.executable, "-m", "harness", "compare", str(base), str(run)], capture_output=True,
                        text=True, timeout=60).stdout
    assert "no band: steady windows: 2 and 2 samples, need 3 each, **cannot tell**" in md


def test_thresholds_fail_the_comparison_for_ci(tmp_path):
    base = make_run(tmp_path / "a", [100, 110, 90, 100], [(1000, 1000), (1000, 1000)])
    run = make_run(tmp_path / "b", [118, 128, 108, 118], [(800, 1000), (800, 1000)])  # p99 +18%, rps -20%
    assert compare([run], baseline=base, fail_on="p99=+20%")["failures"] == []
    failures = compare([run], baseline=base, fail_on="p99=+15%,process_rps=-10%")["failures"]
    assert len(failures) == 2 and "p99 moved +18.0 (+18.0%)" in failures[0]
    assert compare([run], baseline=base, fail_on="process_rps=-250")["failures"] == []  # -200 rows/s
    with pytest.raises(CompareError, match="figures: process_rps"):
        parse_thresholds("p98=+20%")


def test_compare_cli_exit_codes_and_files(tmp_path):
    base = make_run(tmp_path / "a", [100, 110, 90, 100], [(1000, 1000), (1000, 1000)])
    run = make_run(tmp_path / "b", [200, 220, 180, 200], [(1000, 1000), (1000, 1000)])

    def harness(*args):
        return subprocess.run([sys.executable, "-m", "harness", "compare", *map(str, args)], capture_output=True,
                              text=True, timeout=60)

    ok = harness(base, run, "--out", tmp_path / "cmp")
    assert ok.returncode == 0 and "**worse**" in ok.stdout
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["runs"][0]["changes"]["p99"]["verdict"] \
        == "worse"
    assert harness(run, "--baseline", base, "--fail-on", "p99=+20%").returncode == 1
    bad = harness(tmp_path / "nowhere", base)
    assert bad.returncode == 2 and "no result.json" in bad.stderr


def test_latency_windows_split_the_window_by_intended_time():
    intended = np.arange(1000, dtype=float)  # one event per ms
    latency = np.where(intended < 500, 10.0, 30.0)
    windows = latency_windows(latency, intended, windows=2)
    assert [(w["n"], w["p50"]) for w in windows] == [(500, 10.0), (500, 30.0)]
    assert latency_windows(latency[:15], intended[:15], windows=2) == []  # too few events to split


def test_consumer_and_receiver_creations_are_compared_as_exact_counts(tmp_path):
    runs = []
    for name, consumers, receivers in (("a", 8, 4), ("b", 16, 4), ("c", None, 2)):
        path = make_run(tmp_path / name, [100, 110, 90, 100], [(1000, 1000), (1000, 1000)])
        result = json.loads((path / "result.json").read_text())
        result["source"] = {"totals": {"created": receivers}}
        if consumers is not None:
            result["consumers"] = {"created": consumers}
        (path / "result.json").write_text(json.dumps(result))
        runs.append(path)
    b, c = (r["changes"] for r in compare(runs)["runs"])
    assert (b["consumers_created"]["delta"], b["consumers_created"]["verdict"]) == (8.0, "worse")
    assert b["consumers_created"]["noise_basis"] == "exact" and b["receivers_created"]["verdict"] == "same"
    assert c["consumers_created"]["verdict"] == "n/a"  # no proxy: not counted, not compared
    assert (c["receivers_created"]["delta"], c["receivers_created"]["verdict"]) == (-2.0, "better")


def recorded_run(tmp_path, name, label=None):
    """A recorded run directory (tests/fixtures/runs) with the result.json it was judged with."""
    import shutil
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
    path = tmp_path / (label or name)
    shutil.copytree(fixtures / name, path)
    shutil.copy(fixtures / f"{name}.result.json", path / "result.json")
    return path


def test_a_comparison_opens_with_the_settings_that_differ_and_warns_beyond_the_overrides(tmp_path):
    from harness.reports.compare import compare_markdown

    steady, again = recorded_run(tmp_path, "steady"), recorded_run(tmp_path, "steady", "steady-again")
    same = compare([steady, again])
    assert same["settings"] == {"differ": {}, "unintended": [], "scenarios": [], "warning": None}
    assert "The runs' resolved scenarios are the same." in compare_markdown(same)
    # the crash-recovery run: another scenario, with faults and a longer traffic its overrides gave
    crash = recorded_run(tmp_path, "crash-recovery")
    summary = compare([steady, crash])
    differ = summary["settings"]["differ"]
    assert differ["producers.duration_s"] == [6.0, 16.0] and differ["name"] == ["steady", "crash-recovery"]
    assert "producers.duration_s" not in summary["settings"]["unintended"]  # both runs' overrides set it
    assert "faults" in summary["settings"]["unintended"] and summary["settings"]["scenarios"] == [
        "crash-recovery", "steady"]
    md = compare_markdown(summary)
    assert md.index("## Settings") < md.index("| figure |")
    assert "**Warning:** the runs are of different scenarios (crash-recovery, steady); they differ in settings " \
           "none of their overrides set: " in md and "| `producers.duration_s` | 6.0 | 16.0 |" in md


def test_a_different_offered_rate_is_a_setting_not_a_better_run(tmp_path):
    base = make_run(tmp_path / "a", [100, 110, 90, 100], [(1000, 1000), (1000, 1000)])
    faster = make_run(tmp_path / "b", [100, 110, 90, 100], [(1000, 1000), (1000, 1000)])
    for path, target, produced in ((base, 1000.0, 1000.0), (faster, 4000.0, 3990.0)):
        result = json.loads((path / "result.json").read_text())
        result["throughput"].update(target_eps=target, produce_eps=produced)
        (path / "result.json").write_text(json.dumps(result))
    (change,) = [r["changes"]["produce_eps"] for r in compare([base, faster])["runs"]]
    assert change["verdict"] == "setting" and change["delta"] == 2990.0
