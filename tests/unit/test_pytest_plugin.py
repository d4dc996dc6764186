"""The pytest plugin's pure parts: keyword overrides as `--set` texts (read back by the real scenario loader),
the failure message, and where a relative scenario path is found."""
import os
import tomllib
from pathlib import Path

import pytest

from harness.config import load_scenario, parse_override
from harness.pytest_plugin import HarnessRun, HarnessRunner, assert_passed, override_args, replace, toml_value
from harness.records.result import RunResult


@pytest.mark.parametrize("value", [True, False, 0, -7, 2.5, 1e-3, "plain", 'q"uo\\te\n', "", [1, "a", [2.0]],
                                   {"a.b": 1, "c": {"d": "e"}}])
def test_toml_value_reads_back_as_the_same_value(value):
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


def test_toml_value_refuses_what_toml_cannot_hold():
    with pytest.raises(TypeError, match="not a TOML value"):
        toml_value(object())


def test_override_forms_give_the_same_set_texts():
    dotted = override_args({"producers.duration_s": 10, "spark.conf": {"spark.sql.shuffle.partitions": 8}})
    keyword = override_args({"producers__duration_s": 10, "spark__conf": {"spark.sql.shuffle.partitions": 8}})
    nested = override_args({"producers": {"duration_s": 10}, "spark": {"conf": {"spark.sql.shuffle.partitions": 8}}})
    assert dotted == keyword == nested == ["producers.duration_s=10", 'spark.conf.spark.sql.shuffle.partitions=8']
    assert [parse_override(t) for t in dotted] == [(["producers", "duration_s"], 10),
                                                   (["spark", "conf", "spark", "sql", "shuffle", "partitions"], 8)]


def test_overrides_resolve_through_the_scenario_loader():
    """Merged tables keep the file's other keys; a replaced table holds only what was given; an option name
    with dots stays one option."""
    sets = override_args({"producers": {"duration_s": 7, "rate": replace(kind="steps", steps=[{"at_s": 0, "eps": 50},
                                                                                              {"at_s": 2, "eps": 90}])},
                          "spark": {"conf": {"spark.sql.shuffle.partitions": 3}, "trigger": {"interval": "2 seconds"}},
                          "checks.latency_p99_ms": 1500})
    scenario, _, _ = load_scenario("steady", sets)
    assert scenario.producers.duration_s == 7 and scenario.producers.batch_size == 2000  # 2000: steady.toml's
    assert scenario.producers.rate.kind == "steps"
    assert [(s.at_s, s.eps) for s in scenario.producers.rate.steps] == [(0, 50), (2, 90)]
    assert scenario.spark.conf["spark.sql.shuffle.partitions"] == 3
    assert scenario.spark.trigger.kind == "processingTime" and scenario.spark.trigger.interval == "2 seconds"
    assert scenario.checks.latency_p99_ms == 1500


def test_merging_a_rate_of_another_kind_is_refused_by_the_loader_and_replace_is_the_way():
    from harness.config import ConfigError

    with pytest.raises(ConfigError, match="producers.rate"):
        load_scenario("steady", override_args({"producers": {"rate": {"kind": "steps", "steps": [{"at_s": 0,
                                                                                                   "eps": 5}]}}}))
    with pytest.raises(ValueError, match="empty table"):
        override_args({"producers": {}})


def failing_result(tmp_path) -> RunResult:
    return RunResult.model_validate({
        "scenario": "steady", "backend": "kafka", "verdict": "fail", "run_dir": str(tmp_path / "run"),
        "checks": [{"name": "completed", "ok": True, "detail": "run completed"},
                   {"name": "no_loss", "ok": False, "detail": "3 acked events never delivered"},
                   {"name": "latency_p99", "ok": False, "detail": "p99 4,000 ms > 1,000 ms"}]})


def test_assert_passed_names_each_failed_check_the_verdict_and_the_report(tmp_path):
    with pytest.raises(pytest.fail.Exception) as info:
        assert_passed(failing_result(tmp_path))
    text = str(info.value)
    assert "verdict FAIL" in text and "failed checks (2 of 3):" in text
    assert "  - no_loss: 3 acked events never delivered" in text
    assert "  - latency_p99: p99 4,000 ms > 1,000 ms" in text and "completed" not in text
    assert f"report: {tmp_path / 'run' / 'report.html'} ({tmp_path / 'run' / 'report.md'})" in text
    assert not info.value.pytrace  # the message is the whole story: no traceback into the plugin


def test_assert_passed_is_silent_on_a_pass_and_the_method_is_the_same(tmp_path):
    passed = HarnessRun.model_validate({"scenario": "s", "backend": "kafka", "verdict": "pass",
                                        "checks": [{"name": "no_loss", "ok": True, "detail": "ok"}]})
    assert_passed(passed)
    passed.assert_passed()
    failed = HarnessRun.model_validate(failing_result(tmp_path).as_dict())
    assert "exit_code" not in failed.as_dict()  # the plugin's extras are not part of result.json
    with pytest.raises(pytest.fail.Exception, match="no_loss: 3 acked"):
        failed.assert_passed()


def test_a_relative_scenario_path_is_found_from_the_test_directory_or_the_rootdir(tmp_path, monkeypatch):
    root, tests = tmp_path / "proj", tmp_path / "proj" / "tests"
    (root / "scenarios").mkdir(parents=True)
    tests.mkdir()
    (root / "scenarios" / "mine.toml").write_text("name = 'mine'\n")
    (tests / "local.toml").write_text("name = 'local'\n")
    monkeypatch.chdir(tmp_path)
    runner = HarnessRunner(None, tmp_path / "runs", [root], [root])
    assert runner.scenario_arg("scenarios/mine.toml") == str(root / "scenarios" / "mine.toml")
    assert runner.scenario_arg("local.toml", [tests]) == str(tests / "local.toml")
    assert runner.scenario_arg(Path("scenarios") / "mine.toml") == str(root / "scenarios" / "mine.toml")
    assert runner.scenario_arg("steady") == "steady"  # a name: the harness's scenarios/
    assert runner.scenario_arg("nowhere.toml") == "nowhere.toml"  # the runner says: no such scenario file
    assert runner.scenario_arg(str(root / "x.toml")) == str(root / "x.toml") and os.path.isabs(str(root))


def test_bad_input_raises_the_runners_message_before_anything_starts(tmp_path):
    """The real `python -m harness run` refuses the file (exit 2); the test sees ConfigError with its message."""
    from harness.config import ConfigError
    from harness.supervisor import Supervisor

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[producers]\nrate = { kind = "constant", eps = 100 }\nbogus = 1\n')
    sup = Supervisor("plugin-unit")
    try:
        runner = HarnessRunner(sup, tmp_path / "runs", [tmp_path], [tmp_path])
        with pytest.raises(ConfigError, match=rf"{bad}: producers.bogus: unknown key; allowed:"):
            runner.run(bad, **{"producers.duration_s": 5})
        assert not sup.children  # the runner process was reaped
        assert not (tmp_path / "runs" / "01-bad" / "services").exists()  # nothing was started
    finally:
        sup.stop_all()
