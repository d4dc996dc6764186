"""Where a user's query module is imported from (harness.queries.query_home): next to the scenario file, else the
nearest directory above it holding the module's top-level package, as a repository lays out scenarios/ and its
code (what `harness init` writes); validated from any working directory."""
from __future__ import annotations

from harness.cli import main
from harness.queries import query_home

QUERY = "def build(events, params):\n    return events\n"
SCENARIO = ('name = "enrich"\n[producers]\nrate = { kind = "constant", eps = 100 }\n'
            '[spark]\nquery = "team_jobs_qh.enrich:build"\n')


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "team_jobs_qh").mkdir(parents=True)
    (repo / "team_jobs_qh" / "__init__.py").write_text("")
    (repo / "team_jobs_qh" / "enrich.py").write_text(QUERY)
    (repo / "scenarios").mkdir()
    (repo / "scenarios" / "enrich.toml").write_text(SCENARIO)
    return repo


def test_the_nearest_directory_holding_the_module_wins(tmp_path):
    repo = _repo(tmp_path)
    assert query_home("team_jobs_qh.enrich:build", repo / "scenarios") == repo.resolve()
    (repo / "scenarios" / "team_jobs_qh.py").write_text(QUERY)  # one next to the scenario comes first
    assert query_home("team_jobs_qh.enrich:build", repo / "scenarios") == (repo / "scenarios").resolve()
    assert query_home("absent_mod_qh:build", repo / "scenarios") == (repo / "scenarios").resolve()


def test_a_scenario_in_scenarios_validates_from_anywhere(tmp_path, monkeypatch, capsys):
    repo = _repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".")])
    assert main(["validate", str(repo / "scenarios" / "enrich.toml")]) == 0, capsys.readouterr().err
