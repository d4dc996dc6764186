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
