"""`harness bench verdicts --all` (harness.bench.catalogue, margins) without a real run: margins computed by hand
from synthetic checks, and the catalogue's machinery (parts, resume, a sweep, flags, Ctrl-C-free exit codes) with a
stand-in for `harness run` that writes the result.json or sweep.json a test asks for."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console as RichConsole

from harness.bench import catalogue
from harness.bench.margins import margins, smallest
from harness.cli import main as cli_main
from harness.console import Console


def _sustained(lag: dict, rate: dict, status: str = "pass") -> dict:
    return {"name": "sustained", "status": status, "ok": status == "pass", "detail": "...",
            "thresholds": {"trigger_interval_ms": 1000.0, "z": 2.0},
            "criteria": [{"name": "lag_growth", "status": status, **lag},
                         {"name": "processed_rate", "status": "pass", **rate}]}


STEADY_LAG = {"value": -15.2, "limit": 150.0, "slope_se_eps": 5.5, "end_lag": 4167.0, "end_lag_max": 6000.0}


def test_margins_are_the_share_of_each_allowance_left_unused():
    result = {"checks": [
        {"name": "no_loss", "status": "pass", "ok": True},  # an exact count: no margin
        _sustained(STEADY_LAG, {"value": 2880.0, "limit": 2850.0, "offered_eps": 3000.0}),
        {"name": "latency_p99", "status": "pass", "ok": True, "value": 800.0, "limit": 1000.0},
        {"name": "headroom", "status": "not required", "ok": True, "value": 990.0, "limit": 1000.0},
        {"name": "query_recovered", "status": "pass", "ok": True, "value": 45.0, "limit": 60.0}]}
    got = {m["check"]: round(m["margin"], 4) for m in margins(result)}
    # lag: slope high end -15.2 + 2 x 5.5 = -4.2 against 150: (150 + 4.2) / 150; end lag (6000 - 4167) / 6000 is
    # smaller, and either passing keeps the check passing, so the larger counts
    assert got == {"sustained.lag_growth": 1.028, "sustained.processed_rate": 0.2, "latency_p99": 0.2,
                   "query_recovered": 0.25}
    assert smallest(margins(result))["check"] == "sustained.processed_rate"  # 0.2, listed before latency's 0.2


def test_a_lag_that_crossed_both_ceilings_has_a_negative_margin_and_a_real_time_gap_counts():
    lag = {"value": 180.0, "limit": 150.0, "slope_se_eps": 10.0, "end_lag": 9000.0, "end_lag_max": 6000.0}
    result = {"checks": [_sustained(lag, {"value": 2700.0, "limit": 2850.0, "offered_eps": 3000.0}, "fail")]}
    result["checks"][0]["criteria"].append({"name": "batch_duration", "status": "pass", "value": 150.0,
                                            "limit": 1000.0})
    got = {m["check"]: round(m["margin"], 4) for m in margins(result)}
    # slope high end 200 against 150: -1/3; end lag 9,000 against 6,000: -0.5; processed 2,700: (2700-2850)/150
    assert got == {"sustained.lag_growth": -0.3333, "sustained.processed_rate": -1.0,
                   "sustained.batch_duration": 0.85}


def test_sustained_not_required_and_runs_without_checks_have_no_margin():
    not_required = _sustained(STEADY_LAG, {"value": 100.0, "limit": 2850.0, "offered_eps": 3000.0})
    not_required["status"] = "not required"
    assert margins({"checks": [not_required]}) == [] and margins(None) == [] and smallest([]) is None


FAKE_RUN = r"""
import json, os, sys
argv = sys.argv[1:]
run_dir = argv[argv.index("--out") + 1]
plan = json.loads(os.environ["FAKE_PLAN"])
name = argv[argv.index("run") + 1]
os.makedirs(run_dir, exist_ok=True)
with open(os.path.join(os.path.dirname(run_dir), "argv.jsonl"), "a") as f:
    f.write(json.dumps(argv) + "\n")
what = plan.get(name, {"verdict": "pass", "processed": 3000.0})
def result(verdict, processed):
    return {"verdict": verdict, "checks": [{"name": "sustained", "status": verdict, "ok": verdict == "pass",
            "detail": "kept up" if verdict == "pass" else "processed_rate: processed too little",
            "thresholds": {"z": 2.0}, "criteria": [{"name": "processed_rate", "status": verdict,
            "value": processed, "limit": 2850.0, "offered_eps": 3000.0}]}],
            "sustain": {"offered_eps": 3000.0, "processed_eps": processed}, "footprint": {"ratio": 0.04}}
if "points" in what:
    runs = []
    for i, (verdict, processed) in enumerate(what["points"]):
        sub = f"{i:02d}-point"
        os.makedirs(os.path.join(run_dir, sub), exist_ok=True)
        json.dump(result(verdict, processed), open(os.path.join(run_dir, sub, "result.json"), "w"))
        runs.append({"run_dir": sub, "verdict": verdict, "failed_checks": [] if verdict == "pass" else ["sustained"]})
    json.dump({"verdict": what["sweep"], "runs": runs, "recommended": {"run_dir": "00-point"}},
              open(os.path.join(run_dir, "sweep.json"), "w"))
else:
    json.dump(result(what["verdict"], what["processed"]), open(os.path.join(run_dir, "result.json"), "w"))
"""


@pytest.fixture
def fake_runs(monkeypatch):
    """`harness run` replaced by FAKE_RUN; the plan says per scenario what it writes."""
    plan: dict = {}
    monkeypatch.setattr(catalogue, "run_argv", lambda scenario, run_dir, replace: [
        sys.executable, "-c", FAKE_RUN, "run", scenario, "--out", str(run_dir)] + (["--replace"] if replace else []))

    def set_plan(p: dict) -> None:
        plan.clear()
        plan.update(p)
        monkeypatch.setenv("FAKE_PLAN", json.dumps(plan))
    set_plan({})
    return set_plan


def _console() -> Console:
    c = Console(quiet=True)
    c.rich = RichConsole(file=io.StringIO(), width=300, highlight=False)
    return c


def _cat(path: Path) -> dict:
    return json.loads((path / "catalogue.json").read_text())


def test_a_catalogue_in_parts_resumes_and_flags_what_did_not_hold_or_is_narrow(fake_runs, tmp_path):
    out = tmp_path / "cat"
    fake_runs({"steady": {"verdict": "pass", "processed": 3000.0},
               "burst": {"verdict": "fail", "processed": 2700.0},
               "skew": {"verdict": "pass", "processed": 2860.0},  # 10/150 of the allowance left: 6.7%
               "skew-tuning": {"sweep": "pass", "points": [["pass", 2990.0], ["fail", 2000.0]]}})
    assert catalogue.main(only=["steady", "burst"], out=out, console=_console()) == 1
    first = _cat(out)
    assert [(r["scenario"], r["class"]) for r in first["runs"]] == [("burst", "fail"), ("steady", "pass")]
    # the second part into the same catalogue: only what it lacks runs
    code = catalogue.main(only=["steady", "skew", "skew-tuning"], out=out, resume=True, console=_console())
    cat = _cat(out)
    assert code == 1
    assert [(r["scenario"], r["round"]) for r in cat["runs"]] == [("burst", 1), ("steady", 1), ("skew-tuning", 1),
                                                                  ("skew", 1)]  # scenarios/ sorted by file name
    by = {s["scenario"]: s for s in cat["scenarios"]}
    assert by["steady"]["held"] and not by["steady"]["flagged"]
    assert by["burst"]["flagged"] and by["burst"]["flags"] == ["not pass in every run: fail"]
    assert by["skew"]["held"] and by["skew"]["flagged"]
    assert by["skew"]["flags"] == ["margin sustained.processed_rate 7% within 10% of its threshold"]
    sweep = by["skew-tuning"]
    assert sweep["held"] and not sweep["flagged"] and sweep["kind"] == "sweep"
    # the sweep's margin is its passing combination's: (2990 - 2850) / 150
    assert sweep["smallest"]["check"] == "00-point: sustained.processed_rate"
    assert round(sweep["smallest"]["margin"], 4) == 0.9333
    sweep_row = next(r for r in cat["runs"] if r["scenario"] == "skew-tuning")
    assert sweep_row["deciding"] == [{"name": "01-point", "status": "fail", "detail": "sustained"}]
    md = (out / "catalogue.md").read_text()
    assert md.startswith("# The scenario catalogue: 4 scenarios, 2 flagged")
    assert "- burst: not pass in every run: fail" in md and "| skew-tuning | kafka | sweep | 1 | 1/1 pass |" in md
    assert cat["commands"] == ["harness bench verdicts --all --runs 1 --only steady,burst",
                               "harness bench verdicts --all --runs 1 --only steady,skew,skew-tuning --resume"]


def test_a_run_cut_off_is_run_again_into_its_emptied_directory(fake_runs, tmp_path):
    out = tmp_path / "cat"
    assert catalogue.main(only=["steady"], out=out, console=_console()) == 0
    cat = _cat(out)
    cat["runs"] = []  # as if the run had been cut off before its row was written: its directory is there
    (out / "catalogue.json").write_text(json.dumps(cat))
    assert catalogue.main(only=["steady"], out=out, resume=True, console=_console()) == 0
    argvs = [json.loads(line) for line in (out / "steady" / "argv.jsonl").read_text().splitlines()]
    assert [a[-1] for a in argvs] == [str(out / "steady" / "01"), "--replace"]
    assert len(_cat(out)["runs"]) == 1


@pytest.mark.parametrize("argv, message", [
    (["bench", "verdicts", "--all", "--cold"], "--cold: not with --all"),
    (["bench", "verdicts", "steady", "--all"], "SCENARIO: not with --all"),
    (["bench", "verdicts", "--all", "--backend", "pulsar"], "--backend pulsar: one of kafka, eventhubs"),
    (["bench", "verdicts", "--all", "--kind", "chaos"], "--kind chaos: one of load, faults, sweep"),
    (["bench", "verdicts", "--all", "--only", "stedy"], "--only stedy: not shipped scenarios"),
    (["bench", "verdicts", "--all", "--resume"], "--resume: give the catalogue's directory with --out"),
    (["bench", "verdicts", "--all", "--kind", "sweep", "--only", "steady"],
     "no shipped scenario matches --kind sweep --only steady"),
    (["bench", "verdicts", "steady", "--backend", "kafka"], "--backend: only with `harness bench verdicts --all`"),
])
def test_bad_catalogue_input_is_refused_before_anything_runs(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RUNS", str(tmp_path / "runs"))
    assert cli_main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_resume_of_a_directory_without_a_catalogue_is_refused(tmp_path, capsys):
    (tmp_path / "other").mkdir()
    assert cli_main(["bench", "verdicts", "--all", "--resume", "--out", str(tmp_path / "other")]) == 2
    assert "holds no readable catalogue.json" in capsys.readouterr().err


def test_a_sweep_is_as_close_to_flipping_as_its_closest_combination_either_side(fake_runs, tmp_path):
    """A combination that misses its goal by a hair (processed 2,840 against the 2,850 floor) could as well have
    been unknown, and an unknown combination makes the sweep unjudged: the sweep is flagged although it passed."""
    fake_runs({"rtm-vs-microbatch": {"sweep": "pass", "points": [["pass", 2990.0], ["fail", 2840.0]]}})
    assert catalogue.main(only=["rtm-vs-microbatch"], out=tmp_path / "cat", console=_console()) == 1
    s = _cat(tmp_path / "cat")["scenarios"][0]
    assert s["held"] and s["flagged"] and s["smallest"]["check"] == "01-point: sustained.processed_rate"
    assert s["flags"] == ["margin 01-point: sustained.processed_rate -7% within 10% of its threshold"]
