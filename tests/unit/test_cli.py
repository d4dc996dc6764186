"""CLI contract: bad input exits 2 with the file and field named, for scenarios and emulator configs alike."""
import json
import subprocess
import sys


def harness(*args, env=None):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_bad_emulator_config_exits_2_naming_the_field(tmp_path):
    cfg = tmp_path / "Config.json"
    cfg.write_text(json.dumps({"UserConfig": {"NamespaceConfig": [{"Entities": [
        {"Name": "hub", "PartitionCount": "many"}]}]}}))
    proc = harness("emulator", "serve", "--config", str(cfg))
    assert proc.returncode == 2
    assert f"{cfg}: UserConfig.NamespaceConfig[0].Entities[0].PartitionCount" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_validate_shows_the_resolved_scenario():
    proc = harness("validate", "steady", "--show", "--set", "producers.rate.eps=10")
    assert proc.returncode == 0, proc.stderr
    resolved = json.loads(proc.stdout.split("\n", 1)[1])
    assert resolved["producers"]["rate"] == {"kind": "constant", "eps": 10.0}


def test_unknown_scenario_exits_2():
    proc = harness("run", "no-such-scenario")
    assert proc.returncode == 2 and "known:" in proc.stderr


def test_report_rebuilds_report_md_from_result_json_and_refuses_a_non_run_directory(tmp_path):
    from harness.records.result import RunResult

    result = RunResult(scenario="steady", backend="kafka", verdict="fail",
                       checks=[{"name": "no_loss", "ok": False, "detail": "3 acked events never delivered"}])
    (tmp_path / "result.json").write_text(json.dumps(result.as_dict()))
    proc = harness("report", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "report.md").read_text()
    assert "steady on kafka: **FAIL**" in text and "3 acked events never delivered" in text

    (tmp_path / "result.json").write_text("{not json")
    proc = harness("report", str(tmp_path))
    assert proc.returncode == 2 and f"{tmp_path / 'result.json'}: not readable JSON" in proc.stderr
    proc = harness("report", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "neither result.json nor sweep.json" in proc.stderr


def test_list_names_an_unreadable_scenario_file_instead_of_a_traceback(tmp_path, monkeypatch, capsys):
    from harness import cli

    (tmp_path / "good.toml").write_text('name = "good"\ndescription = "fine"\n[producers]\n'
                                        'rate = { kind = "constant", eps = 100 }\n', encoding="utf-8")
    (tmp_path / "latin.toml").write_bytes('description = "caf\xe9"\n'.encode("latin-1"))
    monkeypatch.setattr(cli, "SCENARIOS_DIR", tmp_path)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "good" in out and "fine" in out
    assert "latin" in out and "does not load: UnicodeDecodeError" in out
