"""`harness bench verdicts` (harness.bench.verdicts, verdict_row, agreement, busy) without a real run: rows read
from synthetic result.json files, the agreement lines and the goal, the table, and the command's own machinery
(modes in turn, the busy process, the cold mode's deletions, Ctrl-C) with a stand-in for `harness run`. Every
expected string is written out by hand. A real run: tests/integration/test_bench_verdicts_end_to_end.py."""
from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from rich.console import Console as RichConsole

from harness.bench import verdicts
from harness.bench.agreement import Mode, count_line, goal, mode_agreement
from harness.bench.busy import BusyCores
from harness.bench.verdict_row import cells, first_clause, make_row, read_result
from harness.cli import main as cli_main
from harness.console import Console
from harness.jvm import cds
from harness.supervisor import Supervisor, processes_with_env, wait_until

CAUSE = ("the machine was busy (other processes 1.02 cores and steal: 51.0% of its 2 cores over 20 s of traffic, "
         "over the 10% bound, checks.max_busy_share)")


def _sustained(status: str, detail: str, **extra) -> dict:
    return {"name": "sustained", "ok": {"pass": True, "fail": False}.get(status), "detail": detail, "status": status,
            "criteria": [{"name": "lag_growth", "status": status, "value": -15.2, "limit": 150.0},
                         {"name": "processed_rate", "status": "pass", "value": 3022.0, "limit": 2850.0}],
            "thresholds": {"trigger_interval_ms": 1000.0, "z": 2.0}, **extra}


def _passed(name: str) -> dict:
    return {"name": name, "ok": True, "detail": f"{name} fine", "status": "pass"}


def steady_pass() -> dict:
    """What a passing steady's result.json holds of the fields the bench reads (the README's run, rounded)."""
    return {"verdict": "pass", "unjudged_reason": None,
            "checks": [_passed("no_loss"), {"name": "latency_p99", "ok": None, "detail": "not set",
                                            "status": "not required"},
                       _sustained("pass", "kept up: lag_growth: lag fell 15 ± 11 events/s"),
                       {"name": "headroom", "ok": True, "detail": "batch p50 623 ms <= the 1,000 ms trigger",
                        "status": "not required", "trigger_interval_ms": 1000.0}],
            "sustain": {"lag": {"slope_eps": -15.2, "slope_se_eps": 5.5}, "offered_eps": 3000.0,
                        "processed_eps": 3022.0, "batch_p50_ms": 623.0},
            "footprint": {"ratio": 0.054, "ok": False}, "machine": {"other_share": 0.031, "busy": False},
            "startup": {"first_data_batch_from_run_start_s": 13.14}}


def overloaded_fail() -> dict:
    r = steady_pass()
    r["verdict"] = "fail"
    r["checks"][2] = _sustained("fail", "lag_growth: lag grew 2,912 ± 80 events/s; processed_rate: processed 3,001 "
                                        "events/s = 50.0% of the offered 6,000/s (need 95%)")
    r["checks"].append({"name": "produce_rate", "ok": None, "detail": "unknown: no producer stats; and more",
                        "status": "unknown"})
    r["sustain"] = {"lag": {"slope_eps": 2912.4, "slope_se_eps": 40.0}, "offered_eps": 6000.0,
                    "processed_eps": 3001.0, "batch_p50_ms": 410.0}
    return r


def busy_unjudged() -> dict:
    r = steady_pass()
    r["verdict"] = "unjudged"
    r["unjudged_reason"] = f"{CAUSE}: sustained unjudged"
    r["checks"][2] = _sustained("unjudged", f"unjudged: {CAUSE}; as measured it fails: lag_growth: lag grew 400 ± 90 "
                                            "events/s", unjudged=CAUSE, judged_as="fail")
    r["machine"] = {"other_share": 0.51, "busy": True}
    return r


def row_of(result: dict | None, tmp_path: Path, name: str = "01-quiet", mode: str = "quiet",
           exit_code: int | None = 0) -> dict:
    run_dir = tmp_path / name
    run_dir.mkdir()
    if result is not None:
        (run_dir / "result.json").write_text(json.dumps(result))
    return make_row(name, mode, run_dir, exit_code, read_result(run_dir))


# --- one run's row, from its result.json ---------------------------------------------------------------------------

def test_a_passing_run_shows_the_figures_its_verdict_rests_on(tmp_path):
    assert cells(row_of(steady_pass(), tmp_path)) == [
        "01-quiet", "quiet", "pass", "", "-15 ± 11 (limit 150)", "3,022 / 3,000 (101%)", "623 / 1,000 ms", "5.4%",
        "3%", "13.1 s"]


def test_a_failed_run_names_its_failed_and_unknown_checks_with_their_first_clause(tmp_path):
    row = row_of(overloaded_fail(), tmp_path, exit_code=1)
    assert row["class"] == "fail"
    assert [(d["name"], d["status"]) for d in row["deciding"]] == [("sustained", "fail"), ("produce_rate", "unknown")]
    assert cells(row)[2:7] == [
        "fail", "sustained (fail): lag_growth: lag grew 2,912 ± 80 events/s; produce_rate (unknown): unknown: no "
                "producer stats", "+2,912 ± 80 (limit 150)", "3,001 / 6,000 (50%)", "410 / 1,000 ms"]


def test_a_run_set_aside_for_a_busy_machine_is_unjudged_busy_and_says_what_it_measured(tmp_path):
    row = row_of(busy_unjudged(), tmp_path, name="01-busy", mode="busy 1", exit_code=3)
    assert row["class"] == "unjudged (busy)"
    c = cells(row)
    assert c[2:4] == ["unjudged (busy)", "sustained (unjudged): as measured it fails: lag_growth: lag grew 400 ± 90 "
                                         "events/s"]
    assert c[8] == "51% (busy)"


def test_unjudged_for_anything_besides_the_busy_machine_is_plain_unjudged(tmp_path):
    both = busy_unjudged()
    both["checks"].append({"name": "no_loss", "ok": None, "detail": "unknown: sink unreadable", "status": "unknown"})
    assert row_of(both, tmp_path, name="a")["class"] == "unjudged"
    stopped = {"verdict": "unjudged", "unjudged_reason": "stopped by SIGTERM; the rest", "checks": []}
    row = row_of(stopped, tmp_path, name="b")
    assert (row["class"], cells(row)[3]) == ("unjudged", "stopped by SIGTERM")


def test_fields_result_json_lacks_are_dashes_and_a_missing_result_says_so(tmp_path):
    bare = row_of({"verdict": "pass"}, tmp_path, name="a")
    assert cells(bare)[2:] == ["pass", "", "-", "-", "-", "-", "-", "-"]
    gone = row_of(None, tmp_path, name="b", exit_code=1)
    assert cells(gone)[2:5] == ["no result", "no result.json (exit 1)", "-"]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "result.json").write_text("{torn")
    assert make_row("c", "quiet", tmp_path / "c", None, read_result(tmp_path / "c"))["class"] == "no result"


def test_a_first_clause_stops_at_the_first_semicolon_and_at_its_length():
    assert first_clause("lag grew 5 events/s; processed 95%") == "lag grew 5 events/s"
    assert first_clause("abcdefghij", limit=6) == "abcde…"


# --- agreement and the goal ----------------------------------------------------------------------------------------

def _rows(mode: str, *classes: str, failed: str = "sustained") -> list[dict]:
    return [{"run": f"{i + 1:02d}-{mode.split()[0]}", "mode": mode, "class": c,
             "deciding": [{"name": failed, "status": "fail", "detail": ""}] if c == "fail" else []}
            for i, c in enumerate(classes)]


QUIET, BUSY, COLD = Mode("quiet"), Mode("busy", 1), Mode("cold")


def test_agreement_lines_count_each_class_naming_pass_and_fail_always():
    assert count_line("quiet", ["pass"] * 5) == "quiet: 5/5 pass"
    assert count_line("busy 1", ["pass"] * 4 + ["unjudged (busy)"]) == "busy 1: 4 pass, 1 unjudged (busy), 0 fail"
    assert count_line("cold", ["fail", "no result", "pass"]) == "cold: 1 pass, 1 no result, 1 fail"
    assert count_line("cold", []) == "cold: no run"


def _goal(expect, *groups):
    rows = [r for _, r in groups]
    rows = [x for r in rows for x in r]
    return goal([mode_agreement(m, rows) for m, _ in groups], rows, expect)


def test_expect_pass_counts_unjudged_busy_with_pass_in_the_busy_mode_only():
    met = _goal("pass", (QUIET, _rows("quiet", *["pass"] * 5)),
                (BUSY, _rows("busy 1", *["pass"] * 4, "unjudged (busy)")), (COLD, _rows("cold", "pass", "pass")))
    assert met == {"met": True, "expect": "pass",
                   "why": "every mode agrees as pass (busy 1: pass or unjudged (busy))"}
    busy_fail = _goal("pass", (QUIET, _rows("quiet", "pass")), (BUSY, _rows("busy 1", "pass", "fail")))
    assert busy_fail["why"] == "busy 1: 1 pass, 1 fail: the runs do not agree" and not busy_fail["met"]
    not_quiet = _goal("pass", (QUIET, _rows("quiet", "pass", "unjudged (busy)")), (BUSY, _rows("busy 1", "pass")))
    assert not_quiet["why"] == "quiet: 1 pass, 1 unjudged (busy), 0 fail: the runs do not agree"


def test_expect_fail_wants_every_run_failed_on_keeping_up():
    met = _goal("fail", (QUIET, _rows("quiet", "fail", "fail")), (BUSY, _rows("busy 1", "fail", "fail")))
    assert met["met"] and met["why"] == "every run failed on keeping up (sustained), in every mode"
    other = _goal("fail", (QUIET, _rows("quiet", "fail", failed="no_loss")), (BUSY, _rows("busy 1", "fail")))
    assert other == {"met": False, "expect": "fail",
                     "why": "01-quiet failed, but not a keeping-up check (sustained)"}
    set_aside = _goal("fail", (QUIET, _rows("quiet", "fail")), (BUSY, _rows("busy 1", "fail", "unjudged (busy)")))
    assert not set_aside["met"] and set_aside["why"].startswith("busy 1: 0 pass, 1 unjudged (busy), 1 fail:")
    wrong = _goal("fail", (QUIET, _rows("quiet", "pass")), (BUSY, _rows("busy 1", "pass")))
    assert wrong["why"] == "quiet agrees as pass, expected fail; busy 1 agrees as pass, expected fail"


def test_without_expect_every_mode_must_agree_on_the_same_class():
    assert _goal(None, (QUIET, _rows("quiet", "fail")), (BUSY, _rows("busy 1", "fail")))["met"]
    split = _goal(None, (QUIET, _rows("quiet", "pass")), (BUSY, _rows("busy 1", "fail")))
    assert split == {"met": False, "expect": None, "why": "the modes disagree: quiet pass, busy 1 fail"}
    unjudged = _goal(None, (QUIET, _rows("quiet", "unjudged", "unjudged")), (BUSY, _rows("busy 1", "pass")))
    assert not unjudged["met"] and unjudged["why"] == "quiet: 2/2 unjudged: the runs do not agree"


# --- the table -----------------------------------------------------------------------------------------------------

def test_bench_md_has_the_table_a_line_per_mode_and_the_goal(tmp_path):
    rows = [row_of(steady_pass(), tmp_path), row_of(busy_unjudged(), tmp_path, name="01-busy", mode="busy 1")]
    summary = {"scenario": "steady", "command": "harness bench verdicts steady --runs 1 --busy-cores 1",
               "runs_per_mode": 1, "busy_cores": 1, "cold": False, "expect": "pass", "runs": rows}
    md = verdicts.markdown(verdicts.summarise(summary, [QUIET, BUSY])).splitlines()
    assert md[0] == "# steady: do its verdicts hold? (goal met)"
    head = md.index("| run | mode | verdict | decided by | lag slope /s (± band; limit) | processed / offered /s | "
                    "batch p50 / trigger | footprint | machine (others' CPU) | first data batch | run directory |")
    assert md[head + 2:head + 4] == [
        "| 01-quiet | quiet | pass |   | -15 ± 11 (limit 150) | 3,022 / 3,000 (101%) | 623 / 1,000 ms | 5.4% | 3% | "
        "13.1 s | 01-quiet |",
        "| 01-busy | busy 1 | unjudged (busy) | sustained (unjudged): as measured it fails: lag_growth: lag grew 400 ± "
        "90 events/s | -15 ± 11 (limit 150) | 3,022 / 3,000 (101%) | 623 / 1,000 ms | 5.4% | 51% (busy) | 13.1 s | "
        "01-busy |"]
    assert md[head + 5:head + 7] == ["- quiet: 1/1 pass", "- busy 1: 1/1 unjudged (busy)"]
    assert md[-1] == "Goal (--expect pass): met: every mode agrees as pass (busy 1: pass or unjudged (busy))."


def test_the_printed_table_has_every_column():
    out = io.StringIO()
    RichConsole(file=out, width=250).print(verdicts.table([], "steady"))
    header = out.getvalue()
    for col in ("run", "mode", "verdict", "decided by", "lag slope", "processed / offered", "batch p50 / trigger",
                "footprint", "machine", "first data batch"):
        assert col in header


# --- the command, with a stand-in for `harness run` ----------------------------------------------------------------

FAKE_RUN = """
import json, os, signal, sys, time
run_dir, verdict, interrupt = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
os.makedirs(run_dir, exist_ok=True)
if interrupt:
    os.kill(os.getppid(), signal.SIGINT)  # Ctrl-C in the bench's terminal
    time.sleep(30)
time.sleep(0.3)
with open(os.path.join(run_dir, "result.json"), "w") as f:
    json.dump({"verdict": verdict, "checks": [], "machine": {"other_share": float(os.environ.get("OTHER", 0))}}, f)
"""


@pytest.fixture
def fake_runs(monkeypatch, tmp_path):
    """`harness run` replaced by FAKE_RUN: verdicts[run name] (default pass); `interrupt_in`: the run that presses
    Ctrl-C. The class archives under tmp (the cache itself stays: it holds the setting names scenarios are
    checked against, a minute to build again)."""
    monkeypatch.setattr(cds, "archives_dir", lambda: tmp_path / "cache" / "cds")
    plan: dict = {"verdicts": {}, "interrupt_in": None}

    def argv(scenario, overrides, run_dir):
        name = run_dir.name
        return [sys.executable, "-c", FAKE_RUN, str(run_dir), plan["verdicts"].get(name, "pass"),
                "1" if plan["interrupt_in"] == name else "0"]

    monkeypatch.setattr(verdicts, "run_argv", argv)
    return plan


def _console() -> Console:
    c = Console(quiet=True)
    c.rich = RichConsole(file=io.StringIO(), width=250, highlight=False)
    return c


def test_the_modes_take_turns_and_bench_json_keeps_every_run(fake_runs, tmp_path):
    fake_runs["verdicts"] = {"02-busy": "fail"}
    console = _console()
    code = verdicts.main("steady", ["producers.duration_s=5"], runs=2, busy_cores=1, expect="pass",
                         out=tmp_path / "bench", console=console)
    summary = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert code == 1 and not summary["goal"]["met"]
    assert [(r["run"], r["mode"], r["class"]) for r in summary["runs"]] == [
        ("01-quiet", "quiet", "pass"), ("01-busy", "busy 1", "pass"), ("02-quiet", "quiet", "pass"),
        ("02-busy", "busy 1", "fail")]
    assert [a["line"] for a in summary["agreement"]] == ["quiet: 2/2 pass", "busy 1: 1 pass, 1 fail"]
    assert summary["command"] == ("harness bench verdicts steady --runs 2 --busy-cores 1 --expect pass "
                                  "--set producers.duration_s=5")
    busy = [r["busy"] for r in summary["runs"] if r["mode"] == "busy 1"]
    assert all(b["cores"] == 1 and b["cpu_s"] > 0 for b in busy), busy  # the spinner ran while the run ran
    assert "busy" not in summary["runs"][0]
    printed = console.rich.file.getvalue()
    assert "quiet: 2/2 pass" in printed and "goal (--expect pass): not met: busy 1: 1 pass, 1 fail" in printed
    assert (tmp_path / "bench" / "bench.md").read_text().startswith("# steady: do its verdicts hold? (goal not met)")


def test_cold_deletes_the_class_archives_and_nothing_else(fake_runs, tmp_path):
    cds_dir = tmp_path / "cache" / "cds"
    cds_dir.mkdir(parents=True)
    for name in ("spark-driver-0123456789abcdef.jsa", "kafka-broker-fedcba9876543210.jsa",
                 "spark-driver-0123456789abcdef.jsa.999.abcd1234.dumping", "notes.txt"):
        (cds_dir / name).write_text("x")
    (tmp_path / "cache" / "kafka-format").mkdir()
    (tmp_path / "cache" / "kafka-format" / "bootstrap.checkpoint").write_text("x")
    code = verdicts.main("steady", runs=1, busy_cores=1, cold=True, out=tmp_path / "bench", console=_console())
    summary = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert code == 0 and [r["mode"] for r in summary["runs"]] == ["cold", "quiet", "busy 1"]
    assert summary["runs"][0]["archives_deleted"] == ["kafka-broker-fedcba9876543210.jsa",
                                                      "spark-driver-0123456789abcdef.jsa"]
    assert sorted(p.name for p in cds_dir.iterdir()) == ["notes.txt",
                                                         "spark-driver-0123456789abcdef.jsa.999.abcd1234.dumping"]
    assert (tmp_path / "cache" / "kafka-format" / "bootstrap.checkpoint").exists()
    # the stand-in makes no archive again: the warm runs after it say they start cold
    assert summary["runs"][1]["archives_at_start"] == 0
    assert "cold (the JVMs' class archives (*.jsa under <cache>/cds/) deleted" in (tmp_path / "bench" /
                                                                                 "bench.md").read_text()


def test_ctrl_c_during_a_busy_run_stops_it_and_the_busy_process_and_keeps_what_ran(fake_runs, tmp_path, monkeypatch):
    token = uuid.uuid4().hex
    monkeypatch.setenv("BENCH_VERDICTS_TEST", token)  # inherited by the busy process and its spinners
    fake_runs["interrupt_in"] = "01-busy"
    code = verdicts.main("steady", runs=2, busy_cores=1, out=tmp_path / "bench", console=_console())
    summary = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert code == 130 and summary["interrupted"]
    assert [r["run"] for r in summary["runs"]] == ["01-quiet"]
    assert processes_with_env("BENCH_VERDICTS_TEST", token) == []
    assert "Interrupted" in (tmp_path / "bench" / "bench.md").read_text()


def test_a_busy_process_killed_outright_takes_its_spinners_with_it(tmp_path, monkeypatch):
    token = uuid.uuid4().hex
    monkeypatch.setenv("BENCH_BUSY_TEST", token)
    with Supervisor(uuid.uuid4().hex) as sup:
        with BusyCores(sup, 2, tmp_path / "busy.log") as busy:
            assert len(processes_with_env("BENCH_BUSY_TEST", token)) == 3  # the busy process and 2 spinners
            os.kill(busy.child.pid, signal.SIGKILL)
            wait_until(lambda: not processes_with_env("BENCH_BUSY_TEST", token), 10, 0.1, "spinners gone")
    assert busy.report == {}  # killed: it said nothing


def test_a_busy_process_reports_the_cpu_its_spinners_spent(tmp_path):
    with Supervisor(uuid.uuid4().hex) as sup:
        with BusyCores(sup, 1, tmp_path / "busy.log") as busy:
            time.sleep(1.0)
    assert busy.report["cores"] == 1 and 0.1 < busy.report["cpu_s"] <= busy.report["wall_s"] + 0.1, busy.report


# --- bad input -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["bench", "verdicts", "steady", "--runs", "0"], "--runs 0: runs per mode, 1 to 64"),
    (["bench", "verdicts", "steady", "--busy-cores", "0"], "--busy-cores 0: cores to keep busy, 1 to"),
    (["bench", "verdicts"], "harness bench verdicts: name the scenario"),
    (["bench", "verdicts", "steady", "--quick"], "--quick: not for `harness bench verdicts`"),
    (["bench", "startup", "--runs", "2"], "--runs: only for `harness bench verdicts SCENARIO`"),
    (["bench", "all", "steady"], "SCENARIO: only for `harness bench verdicts SCENARIO`"),
    (["bench", "verdicts", "stedy"], "no scenario named 'stedy'"),
    (["bench", "verdicts", "steady", "--set", "producers.duration_ss=5"], "producers.duration_ss"),
    (["bench", "verdicts", "skew-tuning"], "skew-tuning: has a [sweep] table"),
])
def test_bad_input_is_refused_before_anything_runs(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RUNS", str(tmp_path / "runs"))
    assert cli_main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_cold_with_the_archives_off_is_refused(capsys, monkeypatch):
    monkeypatch.setenv("HARNESS_CDS", "0")
    assert cli_main(["bench", "verdicts", "steady", "--cold"]) == 2
    assert "--cold: the class archives are off (HARNESS_CDS=0)" in capsys.readouterr().err
