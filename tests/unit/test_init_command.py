"""`harness init` (issue 32): what it writes into a team's repository, that the scenario it writes loads as the
harness loads scenarios, that the workflows are YAML GitHub can read with every placeholder filled, and that
nothing is overwritten without --force. (The generated test is run end to end from an installed wheel in
tests/integration/test_wheel_install.py.)"""
from __future__ import annotations

import sys

import pytest
import yaml

from harness.cli import main
from harness.config import load_scenario


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_an_empty_repository_gets_a_query_its_scenario_a_test_and_two_workflows(tmp_path, capsys, monkeypatch):
    assert main(["init", str(tmp_path), "--query", "jobs.billing.enrich:build"]) == 0
    assert _files(tmp_path) == [".github/workflows/streaming-harness-nightly.yml",
                                ".github/workflows/streaming-harness.yml", "jobs/__init__.py",
                                "jobs/billing/__init__.py", "jobs/billing/enrich.py", "pytest.ini",
                                "scenarios/enrich.toml", "tests/test_enrich_harness.py"]
    out = capsys.readouterr().out
    assert "wrote scenarios/enrich.toml: the starter scenario" in out and "set HARNESS_INSTALL" in out
    monkeypatch.syspath_prepend(str(tmp_path))  # the repository's root, as its pytest.ini puts it on the path
    monkeypatch.chdir(tmp_path)
    scenario, _, _ = load_scenario("scenarios/enrich.toml")
    assert scenario.name == "enrich" and scenario.spark.query == "jobs.billing.enrich:build"
    compile((tmp_path / "tests/test_enrich_harness.py").read_text(), "test", "exec")
    pr = yaml.safe_load((tmp_path / ".github/workflows/streaming-harness.yml").read_text())
    nightly = yaml.safe_load((tmp_path / ".github/workflows/streaming-harness-nightly.yml").read_text())
    assert pr["jobs"]["harness"]["env"]["HARNESS_INSTALL"] == "spark-stream-harness[plots]"
    runs = " ".join(step.get("run", "") for step in pr["jobs"]["harness"]["steps"])
    assert "harness setup" in runs and "pytest tests/test_enrich_harness.py" in runs
    night = " ".join(step.get("run", "") for step in nightly["jobs"]["nightly"]["steps"])
    assert "harness soak scenarios/enrich.toml" in night and "--baseline harness-baseline" in night
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert pr["jobs"]["harness"]["steps"][1]["with"]["python-version"] == python
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert "@@" not in path.read_text(), path


def test_an_existing_query_module_and_pytest_configuration_are_left_alone(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'team'\n")
    (tmp_path / "etl").mkdir()
    (tmp_path / "etl" / "job.py").write_text("def query(events, params):\n    return events\n")
    assert main(["init", str(tmp_path), "--query", "etl.job:query", "--name", "nightly-etl"]) == 0
    assert "etl/__init__.py" not in _files(tmp_path) and "pytest.ini" not in _files(tmp_path)
    assert (tmp_path / "etl" / "job.py").read_text().endswith("return events\n")
    assert (tmp_path / "scenarios" / "nightly-etl.toml").is_file()
    assert (tmp_path / "tests" / "test_nightly-etl_harness.py").is_file()


def test_nothing_is_overwritten_without_force(tmp_path, capsys):
    assert main(["init", str(tmp_path)]) == 0
    (tmp_path / "scenarios" / "query.toml").write_text("# the team's edits\n")
    capsys.readouterr()
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "scenarios/query.toml" in err and "already exist; nothing written (--force replaces them)" in err
    assert (tmp_path / "scenarios" / "query.toml").read_text() == "# the team's edits\n"
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "scenarios" / "query.toml").read_text().startswith("# query:")


@pytest.mark.parametrize("args, says", [
    (["--query", "jobs.enrich"], "--query 'jobs.enrich': package.module:function"),
    (["--query", "jobs.class:build"], "--query 'jobs.class:build': package.module:function"),
    (["--name", "my job"], "--name 'my job': 1-64 letters"),
    (["--install", 'x"; rm -rf ~'], "--install"),
])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, capsys, args, says):
    assert main(["init", str(tmp_path / "repo"), *args]) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "repo").exists()
