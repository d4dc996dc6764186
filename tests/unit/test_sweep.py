"""[sweep]: keys as dotted paths however TOML nested them, every combination checked before anything runs, one
ordinary run per combination, and a sweep.json that keeps what was measured if the sweep stops early."""
import json

import pytest

from harness.config import ConfigError, load_scenario, parse_override
from harness.console import Console
from harness import runner
from harness.runner import RunOutcome
from harness.commands import sweep
from test_config import MINIMAL, write


def test_option_names_keep_their_dots_in_overrides():
    s, _, _ = load_scenario("eh-steady", ["spark.source_options.eventhubs.prefetchCount=10",
                                          "spark.conf.spark.sql.shuffle.partitions=8"])
    assert s.spark.source_options["eventhubs.prefetchCount"] == 10
    assert s.spark.conf["spark.sql.shuffle.partitions"] == 8
    s, _, _ = load_scenario("steady", ["producers.client.linger.ms=5"])  # librdkafka's name (Kafka's producers)
    assert s.producers.client["linger.ms"] == 5


def test_sweep_keys_are_dotted_paths_whether_toml_nested_them_or_not(tmp_path):
    text = MINIMAL + """
[sweep]
spark.source_options.maxOffsetsPerTrigger = [1000, 5000]
"spark.master" = ["local[1]", "local[2]"]
spark.source_options."failOnDataLoss" = [true]
"""
    s, _, _ = load_scenario(write(tmp_path, text))
    assert s.sweep == {"spark.source_options.maxOffsetsPerTrigger": [1000, 5000],
                       "spark.master": ["local[1]", "local[2]"], "spark.source_options.failOnDataLoss": [True]}
    combos = sweep.combinations(s.sweep)
    assert len(combos) == 4 and combos[1] == {"spark.source_options.maxOffsetsPerTrigger": 1000,
                                              "spark.master": "local[2]", "spark.source_options.failOnDataLoss": True}
    # each value goes back through --set unchanged
    for key, value in combos[3].items():
        assert parse_override(sweep.override_text(key, value)) == (key.split("."), value)


@pytest.mark.parametrize("body,match", [
    ('spark.master = []', "sweep.spark.master: an empty list"),
    ('spark.master = ["local[1]", "local[1]"]', "listed twice"),
    ('a = [1, 2, 3, 4]\nb = [1, 2, 3, 4]\nc = [1, 2, 3, 4, 5]', "80 combinations; at most 64"),
])
def test_bad_sweeps_are_refused(tmp_path, body, match):
    with pytest.raises(ConfigError, match=match):
        load_scenario(write(tmp_path, MINIMAL + "[sweep]\n" + body + "\n"))


def _fake_runs(monkeypatch, verdicts):
    """Stand in for the pipeline (the runs themselves are tested end to end elsewhere): record what each run
    was asked, answer with the next verdict."""
    asked = []
    monkeypatch.setenv("HARNESS_SHARED_BROKER", "0")  # no broker started for the fake runs

    def fake_run(scenario, path, overrides, out, console, backend=None):
        asked.append((scenario, overrides, out))  # the combination as the sweep loaded it, once
        verdict = verdicts[len(asked) - 1]
        code = {"pass": 0, "fail": 1, "interrupted": 130}[verdict]
        result = {"verdict": "unjudged" if code == 130 else verdict, "checks": [
            {"name": "no_loss", "ok": verdict == "pass", "detail": ""}],
            "throughput": {"process_rps": 100.0 * len(asked)}, "latency_ms": {"p50": 10.0, "p99": 20.0},
            "batches": 3, "source": {"totals": {"created": 2, "reused": 5, "mismatch": 1}}}
        return RunOutcome(out, result, code)

    monkeypatch.setattr("harness.runner.run_loaded", fake_run)
    return asked


def test_a_sweep_runs_every_combination_and_compares_them(tmp_path, monkeypatch):
    path = write(tmp_path, MINIMAL + '[sweep]\n"spark.source_options.maxOffsetsPerTrigger" = [10, 20]\n')
    asked = _fake_runs(monkeypatch, ["pass", "fail"])
    scenario, _, _ = load_scenario(path)
    outcome = sweep.run_sweep(scenario, path, ["producers.duration_s=5"], tmp_path / "out", Console(quiet=True))
    assert [a[1] for a in asked] == [
        ["producers.duration_s=5", "spark.source_options.maxOffsetsPerTrigger=10"],
        ["producers.duration_s=5", "spark.source_options.maxOffsetsPerTrigger=20"]]
    assert [a[2].name for a in asked] == ["00-maxOffsetsPerTrigger=10", "01-maxOffsetsPerTrigger=20"]
    assert [a[0].spark.source_options["maxOffsetsPerTrigger"] for a in asked] == [10, 20]
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert outcome.exit_code == 1 and saved["verdict"] == "fail" and saved["planned"] == 2
    assert [(r["values"], r["verdict"], r["process_rps"], r["receivers_reused"]) for r in saved["runs"]] == [
        ({"spark.source_options.maxOffsetsPerTrigger": 10}, "pass", 100.0, 5),
        ({"spark.source_options.maxOffsetsPerTrigger": 20}, "fail", 200.0, 5)]
    md = (tmp_path / "out" / "sweep.md").read_text()
    assert "| 10 | pass | 100 |" in md and "01-maxOffsetsPerTrigger=20: failed no_loss" in md


def test_an_interrupted_sweep_keeps_its_runs_and_is_unjudged(tmp_path, monkeypatch):
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [1, 2, 3]\n')
    asked = _fake_runs(monkeypatch, ["pass", "interrupted", "pass"])
    scenario, _, _ = load_scenario(path)
    outcome = sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert len(asked) == 2 and outcome.exit_code == 130
    assert saved["verdict"] == "unjudged" and len(saved["runs"]) == 2


def test_a_bad_combination_is_refused_before_any_run(tmp_path, monkeypatch):
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [2, 0]\n')
    asked = _fake_runs(monkeypatch, ["pass", "pass"])
    scenario, _, _ = load_scenario(path)
    with pytest.raises(ConfigError, match="stream.partitions"):
        sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    assert asked == [] and not (tmp_path / "out").exists()


def test_the_sweep_table_shows_kafka_consumers_created():
    """With backend.proxy the runs count Kafka consumer creations (result.json consumers): the sweep shows them."""
    row = sweep.figures({"verdict": "pass", "consumers": {"created": 16, "created_after_first_data_batch": 3}})
    assert row["consumers_created"] == 16 and row["consumers_created_later"] == 3
    md = sweep.sweep_markdown({"scenario": "s", "verdict": "pass", "keys": ["minPartitions"], "planned": 1,
                               "runs": [{"values": {"minPartitions": 16}, "run_dir": "00", **row}]})
    assert "| minPartitions | verdict | consumers created | after 1st batch |" in md and "| 16 | pass | 16 | 3 |" in md


def test_one_run_of_a_sweep_scenario_runs_it_once_as_written(tmp_path, monkeypatch):
    """The pipeline never expands a [sweep] (that is the sweep command's): run_one hands it one scenario with the
    overrides applied and no sweep left, and records the overrides as given."""
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [1, 2]\n')
    handed = []
    monkeypatch.setattr("harness.runner.run_scenario", lambda scenario, p, overrides, out, console, backend=None:
                        handed.append((scenario, overrides)) or RunOutcome(out, {}, 0))
    runner.run_one(path, ["stream.partitions=3"], tmp_path / "out", Console(quiet=True))
    (scenario, overrides), = handed
    assert scenario.sweep == {} and scenario.stream.partitions == 3 and overrides == ["stream.partitions=3"]


def _checked(verdict, failed=(), p99=20.0, rps=100.0):
    return {"verdict": verdict, "checks": [{"name": n, "ok": False, "detail": ""} for n in failed],
            "throughput": {"process_rps": rps}, "latency_ms": {"p50": 10.0, "p99": p99}}


def _answers(monkeypatch, results):
    asked = []
    monkeypatch.setenv("HARNESS_SHARED_BROKER", "0")  # no broker started for the fake runs

    def fake_run(scenario, path, overrides, out, console, backend=None):
        asked.append(overrides)
        out.mkdir(parents=True, exist_ok=True)
        result = results[len(asked) - 1]
        (out / "result.json").write_text(json.dumps(result))
        return RunOutcome(out, result, 0 if result["verdict"] == "pass" else 1)

    monkeypatch.setattr("harness.runner.run_loaded", fake_run)
    return asked


def test_a_sweep_ends_with_the_setting_that_met_the_goal_at_the_lowest_p99(tmp_path, monkeypatch):
    """2,000 did not keep up (a finding, not a failure of the sweep); of the two that passed, 20,000 has the lower
    p99."""
    path = write(tmp_path, MINIMAL + '[sweep]\n"spark.source_options.maxOffsetsPerTrigger" = [2000, 20000, 50000]\n')
    _answers(monkeypatch, [_checked("fail", ["sustained"], p99=30_000.0), _checked("pass", p99=1800.0),
                           _checked("pass", p99=2100.0, rps=900.0)])
    scenario, _, _ = load_scenario(path)
    outcome = sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    rec = saved["recommended"]
    assert outcome.exit_code == 0 and saved["verdict"] == "pass"
    assert rec["values"] == {"spark.source_options.maxOffsetsPerTrigger": 20000} and rec["latency_p99_ms"] == 1800
    assert rec["met_goal"] == ["01-maxOffsetsPerTrigger=20000", "02-maxOffsetsPerTrigger=50000"]
    assert rec["missed_goal"] == {"00-maxOffsetsPerTrigger=2000": ["sustained"]}
    md = (tmp_path / "out" / "sweep.md").read_text()
    assert "**recommended: spark.source_options.maxOffsetsPerTrigger=20,000 (p99 1,800 ms" in md
    assert "failed sustained (the goal only: not recommended)" in md


def test_a_sweep_with_a_run_that_lost_events_fails_even_with_an_answer(tmp_path, monkeypatch):
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [1, 2]\n')
    _answers(monkeypatch, [_checked("pass"), _checked("fail", ["no_loss"])])
    scenario, _, _ = load_scenario(path)
    assert sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True)).exit_code == 1
    none = sweep.recommend([{"values": {}, "run_dir": "00", "verdict": "fail", "failed_checks": ["sustained"],
                             "latency_p99_ms": 5.0}])
    assert none is None and sweep.sweep_verdict([], None) == "fail"


def test_sweep_repeat_runs_each_combination_n_times_and_takes_their_means(tmp_path, monkeypatch):
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [1, 2]\nrepeat = 3\n')
    asked = _answers(monkeypatch, [_checked("pass", p99=p) for p in (100.0, 110.0, 120.0, 300.0, 310.0, 320.0)])
    scenario, _, _ = load_scenario(path)
    assert scenario.sweep == {"stream.partitions": [1, 2]} and scenario.sweep_repeat == 3
    sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    assert len(asked) == 6 and asked[2] == ["stream.partitions=1"]
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert [r["latency_p99_ms"] for r in saved["runs"]] == [110.0, 310.0] and saved["runs"][0]["repeats"] == 3
    reps = json.loads((tmp_path / "out" / "00-partitions=1" / "repeat.json").read_text())
    assert [r["run_dir"] for r in reps["runs"]] == ["r1", "r2", "r3"] and reps["noise"]["p99"]["sd"] == 10.0
    # compare takes each repeat set as one configuration, the spread across its repeats as the noise
    from harness.reports.compare import compare
    ch = compare([tmp_path / "out"])["runs"][0]["changes"]["p99"]
    assert ch["verdict"] == "worse" and ch["noise_basis"].startswith("repeats (n=3, 3)")


@pytest.mark.parametrize("body,match", [('"stream.partitions" = [1, 2]\nrepeat = [3]', "sweep.repeat"),
                                        ('"stream.partitions" = [1, 2]\nrepeat = 40', "2 combinations x 40 repeats")])
def test_bad_repeats_are_refused(tmp_path, body, match):
    with pytest.raises(ConfigError, match=match):
        load_scenario(write(tmp_path, MINIMAL + "[sweep]\n" + body + "\n"))


def test_harness_run_repeat_runs_the_scenario_n_times_into_one_directory(tmp_path, monkeypatch, capsys):
    from harness.cli import main

    path = write(tmp_path, MINIMAL)
    asked = _answers(monkeypatch, [_checked("pass", p99=p) for p in (100.0, 120.0, 110.0)])
    assert main(["run", path, "--repeat", "3", "--out", str(tmp_path / "reps"), "--quiet"]) == 0
    assert len(asked) == 3
    saved = json.loads((tmp_path / "reps" / "repeat.json").read_text())
    assert saved["verdict"] == "pass" and saved["noise"]["p99"]["mean"] == 110.0 and saved["noise"]["p99"]["sd"] == 10.0
    assert main(["run", path, "--repeat", "0", "--out", str(tmp_path / "none")]) == 2
    assert "--repeat 0: how many times to run the scenario, 1 to 64" in capsys.readouterr().err


def test_a_sweep_loads_each_combination_once_and_runs_it_as_loaded(tmp_path, monkeypatch):
    """A scenario is loaded and validated once and passed as a value: the sweep's own load of each combination (all
    before the first run) is the only one; the runs, repeats included, get the loaded scenario."""
    path = write(tmp_path, MINIMAL + '[sweep]\nrepeat = 2\n"stream.partitions" = [1, 2]\n')
    loads = []
    real = sweep.load_scenario

    def counting(name, overrides=None):
        loads.append(list(overrides or []))
        return real(name, overrides)

    monkeypatch.setattr(sweep, "load_scenario", counting)
    monkeypatch.setattr("harness.config.load_scenario", lambda *a, **k: pytest.fail("loaded again"))
    asked = _fake_runs(monkeypatch, ["pass"] * 4)
    scenario, _, _ = load_scenario(path)
    sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    assert loads == [["stream.partitions=1"], ["stream.partitions=2"]]
    assert [a[0].stream.partitions for a in asked] == [1, 1, 2, 2]
