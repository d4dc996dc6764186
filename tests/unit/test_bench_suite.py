"""The benchmark suite's registry, JSON shape, table and exit codes (harness.bench), with fake benches."""
from __future__ import annotations

import io
import json

import pytest
from rich.console import Console as RichConsole

import harness.bench as bench
from harness.cli import main as cli_main
from harness.console import Console


def _fake_row(name, value, ref):
    return {"name": name, "value": value, "unit": "events/s", "reference": ref, "reference_name": "plain loop",
            "ratio": value / ref, "goal": ">= 0.6", "ok": value / ref >= 0.6}


def _fakes(calls: list, failing: set[str] = frozenset()):
    def runner(name):
        def run(json_path, quick=False):
            calls.append((name, json_path, quick))
            if name in failing:
                raise RuntimeError(f"{name} broke")
            return {"rows": [_fake_row(f"{name} rate", 50.0, 100.0)], "detail": name}
        return run
    return runner


def _console():
    c = Console(quiet=True)
    c.rich = RichConsole(file=io.StringIO(), width=200, highlight=False)
    return c


def test_all_runs_every_bench_in_the_fixed_order():
    assert list(bench.BENCHES) == ["producers", "footprint", "kafka-query", "emulator", "eh-source", "eh-producers",
                                   "checker", "startup", "rtm", "kafka-hostile"]
    calls: list = []
    results, ok = bench.run_benches(list(bench.BENCHES), quick=True, console=_console(), runner=_fakes(calls))
    assert ok is True
    assert [c[0] for c in calls] == list(bench.BENCHES)
    assert all(c[1] is None and c[2] is True for c in calls)  # the suite writes the JSON, not each bench
    assert list(results) == list(bench.BENCHES)
    assert results["emulator"]["detail"] == "emulator"


def test_one_failing_bench_is_recorded_and_the_others_still_run():
    calls: list = []
    results, ok = bench.run_benches(list(bench.BENCHES), console=_console(), runner=_fakes(calls, {"emulator"}))
    assert ok is False
    assert len(calls) == len(bench.BENCHES)
    assert results["emulator"]["error"] == "RuntimeError: emulator broke"
    assert results["emulator"]["rows"] == []
    assert results["startup"]["rows"][0]["name"] == "startup rate"


def test_a_result_without_the_row_shape_is_a_failed_bench():
    def runner(name):
        return lambda json_path, quick=False: {"rows": [{"name": "x", "value": 1.0}]}
    results, ok = bench.run_benches(["startup"], console=_console(), runner=runner)
    assert ok is False
    assert "lacks unit, reference, reference_name, ratio, goal, ok" in results["startup"]["error"]


def test_row_computes_the_ratio_against_the_reference():
    r = bench.row("rows/s", 950.0, "rows/s", reference=1000.0, reference_name="off", goal=">= 0.95", ok=True)
    assert r["ratio"] == pytest.approx(0.95)
    assert set(r) == set(bench.ROW_KEYS)
    assert bench.row("overhead", 12.0, "ms")["ratio"] is None


def test_table_shows_rows_goals_and_failures():
    results = {"producers": {"rows": [_fake_row("efficiency", 40.0, 100.0)]},
               "checker": {"error": "ImportError: no checker yet", "rows": []}}
    out = RichConsole(file=io.StringIO(), width=250)
    out.print(bench.table(results))
    text = out.file.getvalue()
    assert "efficiency" in text and "100 (plain loop)" in text and "0.400" in text and "NO" in text
    assert "failed" in text and "ImportError: no checker yet" in text


def test_fmt():
    assert bench.fmt(12345.6) == "12,346" and bench.fmt(100.0) == "100" and bench.fmt(42.25) == "42.2"
    assert bench.fmt(0.953) == "0.953"
    assert bench.fmt(2.5) == "2.50"
    assert bench.fmt(None) == "-" and bench.fmt(float("nan")) == "-"


@pytest.mark.parametrize("what", ["all", "startup"])
def test_cli_json_shape_and_exit_code(tmp_path, monkeypatch, capsys, what):
    calls: list = []
    monkeypatch.setattr(bench, "resolve", _fakes(calls, {"checker"}))
    path = tmp_path / "bench.json"
    code = cli_main(["bench", what, "--json", str(path), "--quick"])
    data = json.loads(path.read_text())
    if what == "all":
        assert code == 1  # the checker raised
        assert list(data) == ["producers", "footprint", "kafka-query", "emulator", "eh-source", "eh-producers",
                              "checker", "startup", "rtm", "kafka-hostile"]
        assert data["checker"]["error"] == "RuntimeError: checker broke"
        assert data["producers"]["rows"][0]["ratio"] == 0.5
    else:
        assert code == 0
        assert data == {"rows": [_fake_row("startup rate", 50.0, 100.0)], "detail": "startup"}
    assert "harness bench" in capsys.readouterr().out  # the table's title


def test_cli_rejects_an_unknown_bench(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "nonsense"])
    assert exc.value.code == 2
