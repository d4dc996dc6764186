"""Bad input to the emulator's command line and Config.json: exit 2 with the option or file and field named, before
anything listens; and `harness emulator serve` and `python -m harness.emulator` take the same options."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from harness import cli
from harness.emulator import ConfigError, load_config
from harness.emulator.options import parser as emulator_parser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOOD = {"UserConfig": {"NamespaceConfig": [{"Type": "EventHub", "Name": "ns", "Entities": [
    {"Name": "eh1", "PartitionCount": "2", "ConsumerGroups": [{"Name": "cg1"}]}]}]}}


def _serve(capsys, *args) -> tuple[int, str]:
    code = cli.main(["emulator", "serve", "--no-tls", "--no-websockets", *args])
    return code, capsys.readouterr().err


def _write(tmp_path, content, name="Config.json") -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("flag", ["--port", "--control-port", "--tls-port", "--ws-port", "--wss-port"])
def test_port_out_of_range_is_exit_2(capsys, flag):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["emulator", "serve", flag, "70000"])
    assert exit_info.value.code == 2
    assert f"argument {flag}: must be a port number 0..65535 (0 = any free port), got 70000" in capsys.readouterr().err


def test_port_in_use_names_port_and_holder(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _serve(capsys, "--port", str(port))
        assert code == 2
        assert f"--port {port}: cannot listen on 127.0.0.1:{port}: the port is already in use" in err
        assert f"by pid {os.getpid()}" in err  # psutil finds this very process holding it
        code, err = _serve(capsys, "--control-port", str(port))
        assert code == 2 and f"--control-port {port}: cannot listen on 127.0.0.1:{port}" in err


def test_same_port_for_two_listeners_is_refused_before_listening(capsys):
    code = cli.main(["emulator", "serve", "--port", "45671", "--tls-port", "45671"])
    err = capsys.readouterr().err
    assert code == 2 and "--tls-port 45671: the same port as --port" in err


@pytest.mark.parametrize("content,expected", [
    (b"\xff\xfe{\x00}\x00", "not UTF-8 text (byte 0xff at offset 0)"),
    ("{not json", "not valid JSON at line 1 column 2"),
    ([1, 2], "(top level): must be a JSON object, got list"),
    ({"Emulator": {}}, "UserConfig: is required (a JSON object)"),
    ({"UserConfig": {"NamespaceConfig": {}}}, "UserConfig.NamespaceConfig: must be a JSON array, got dict"),
    ({**GOOD, "Emulator": {"MaxConection": 5}},
     "Emulator.MaxConection: unknown field; did you mean 'MaxConnections'?"),
    ({**GOOD, "Emulator": {"AcceptAnyCredential": "yes"}}, "Emulator.AcceptAnyCredential: must be true or false"),
    ({**GOOD, "Emulator": {"IdleTimeoutSeconds": -1}}, "Emulator.IdleTimeoutSeconds: must be 0"),
    ({**GOOD, "Emulator": {"MaxConnections": 0}}, "Emulator.MaxConnections: must be an integer between 1 and"),
    ({**GOOD, "Emulator": {"MaxFrameSizeBytes": 100}}, "Emulator.MaxFrameSizeBytes: must be an integer between 512"),
    ({**GOOD, "Emulator": {"MaxIncompleteFrameBytes": 10}}, "Emulator.MaxIncompleteFrameBytes: must be an integer"),
    ({"UserConfig": {"NamespaceConfig": [{"Entities": [{"Name": "eh1", "PartitionCount": 1, "RetentionSecond": 5}]}]}},
     "UserConfig.NamespaceConfig[0].Entities[0].RetentionSecond: unknown field; did you mean 'RetentionSeconds'"),
])
def test_bad_config_file_is_exit_2_naming_file_and_field(tmp_path, capsys, content, expected):
    path = _write(tmp_path, content)
    code, err = _serve(capsys, "--config", path)
    assert code == 2
    assert err.startswith(f"error: {path}: ") and expected in err, err
    assert "Traceback" not in err


def test_unreadable_config_is_exit_2(tmp_path, capsys):
    code, err = _serve(capsys, "--config", str(tmp_path))  # a directory: unreadable as a file, even for root
    assert code == 2 and f"{tmp_path}: cannot read config file: Is a directory" in err
    code, err = _serve(capsys, "--config", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read config file: No such file or directory" in err


def test_config_limits_and_bom_are_read(tmp_path):
    data = {**GOOD, "Emulator": {"AcceptAnyCredential": True, "MaxConnections": 7, "IdleTimeoutSeconds": 0,
                                 "MaxFrameSizeBytes": 65536, "MaxIncompleteFrameBytes": 1 << 20}}
    cfg = load_config(_write(tmp_path, b"\xef\xbb\xbf" + json.dumps(data).encode()))  # Windows editors' BOM
    assert (cfg.accept_any_credential, cfg.max_connections, cfg.idle_timeout_s, cfg.max_frame_size,
            cfg.max_incomplete_frame_bytes) == (True, 7, 0.0, 65536, 1 << 20)
    with pytest.raises(ConfigError):
        load_config(_write(tmp_path, {**GOOD, "Emulator": {"AcceptAnyCredential": 1}}))


def test_both_entry_points_take_the_same_options():
    sub = next(a for a in cli.parser()._actions if getattr(a, "choices", None) and "emulator" in a.choices)
    serve = next(a for a in sub.choices["emulator"]._actions if getattr(a, "choices", None)).choices["serve"]
    ours = set(emulator_parser()._option_string_actions)
    assert set(serve._option_string_actions) == ours
    assert {"--tls-port", "--ws-port", "--wss-port", "--cert-dir", "--accept-any-credential"} <= ours


def test_harness_emulator_serve_listens_on_the_chosen_ports(tmp_path):
    ports = []
    for _ in range(4):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    amqp, tls, ws, wss = ports
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "emulator", "serve", "--port", str(amqp), "--tls-port", str(tls),
         "--ws-port", str(ws), "--wss-port", str(wss), "--cert-dir", str(tmp_path / "tls")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        lines = dict(proc.stdout.readline().strip().split("=", 1) for _ in range(6))
        assert f"Endpoint=sb://127.0.0.1:{amqp};" in lines["connection_string"]
        assert (lines["tls_port"], lines["ws_port"], lines["wss_port"]) == (str(tls), str(ws), str(wss))
        key = dict(p.split("=", 1) for p in lines["connection_string"].split(";"))["SharedAccessKey"]
        assert key == "SAS_KEY_VALUE"  # Microsoft's emulator's well-known key, unless --generate-key
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    assert "credentials: SAS tokens must be signed with key 'RootManageSharedAccessKey'" in proc.stderr.read()


def test_open_file_limit_is_raised_towards_max_connections(tmp_path):
    """With `ulimit -n 512`, 5,000 connections (the default cap) would fail in accept() before reaching the
    emulator's own refusal: serve raises its soft limit (up to the hard one) and says so when it cannot."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    expected = 5000 + 256 if hard == resource.RLIM_INFINITY else min(5000 + 256, hard)
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.emulator", "--no-tls", "--no-websockets"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard)))
    try:
        proc.stdout.readline()
        limits = open(f"/proc/{proc.pid}/limits").read()
        soft = next(line.split()[3] for line in limits.splitlines() if line.startswith("Max open files"))
        assert int(soft) == expected
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    warned = "warning: Emulator.MaxConnections is 5000 but this process may open only" in proc.stderr.read()
    assert warned == (expected < 5000 + 256)  # a hard limit below what is needed is said, not hidden


def _refused(connection_string: str) -> bool:
    """Whether the real SDK's first call with this connection string fails to authenticate (else it is served)."""
    from azure.eventhub import EventHubProducerClient
    from azure.eventhub.exceptions import AuthenticationError

    with EventHubProducerClient.from_connection_string(connection_string, retry_total=0) as p:
        try:
            assert p.get_eventhub_properties()["eventhub_name"] == "eh1"
        except AuthenticationError:
            return True
    return False


def test_key_from_the_environment_is_checked_and_never_printed(tmp_path):
    """--key-env: the caller's key signs (a wrong one is refused by the real SDK), and no printed line holds it."""
    key = "a2V5LWZyb20tdGhlLWVudmlyb25tZW50LTEyMzQ1Njc4OTA="
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(GOOD), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "emulator", "serve", "--no-tls", "--no-websockets", "--config",
         str(config), "--key-env", "MY_EMULATOR_KEY"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONUNBUFFERED="1", MY_EMULATOR_KEY=key))
    try:
        shown = proc.stdout.readline().strip().split("=", 1)[1]
        assert "SharedAccessKey=${MY_EMULATOR_KEY}" in shown and key not in shown
        real = shown.replace("${MY_EMULATOR_KEY}", key).rstrip(";") + ";EntityPath=eh1"
        assert not _refused(real)
        forged = shown.replace("${MY_EMULATOR_KEY}", "d3Jvbmcta2V5").rstrip(";") + ";EntityPath=eh1"
        assert _refused(forged)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    out = proc.stdout.read() + proc.stderr.read()
    assert key not in out and "its value is in ${MY_EMULATOR_KEY}" in out


def test_key_env_naming_an_unset_variable_is_exit_2(capsys):
    code, err = _serve(capsys, "--key-env", "SURELY_NOT_SET_ANYWHERE_42")
    assert code == 2 and "--key-env SURELY_NOT_SET_ANYWHERE_42: that environment variable is not set" in err


def test_microsofts_documented_connection_string_works_and_a_generated_key_is_only_made_when_asked(tmp_path):
    """Issue 31 item 9: the connection string of Microsoft's emulator documentation and samples connects (its
    well-known key is the default, still checked: another key is refused); `--generate-key` makes a random one."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(GOOD), encoding="utf-8")
    for extra in ([], ["--generate-key"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness", "emulator", "serve", "--no-tls", "--no-websockets", "--config",
             str(config), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            shown = proc.stdout.readline().strip().split("=", 1)[1]
            port = shown.split("sb://127.0.0.1:", 1)[1].split(";", 1)[0]
            documented = (f"Endpoint=sb://localhost:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
                          "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;EntityPath=eh1")
            forged = documented.replace("SAS_KEY_VALUE", "d3Jvbmcta2V5")
            key = dict(p.split("=", 1) for p in shown.rstrip(";").split(";"))["SharedAccessKey"]
            if extra:
                assert key != "SAS_KEY_VALUE" and len(key) == 44 and _refused(documented)  # 32 random bytes
            else:
                assert key == "SAS_KEY_VALUE" and not _refused(documented)
            assert _refused(forged)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0


def test_generate_key_with_key_env_is_exit_2(capsys):
    code, err = _serve(capsys, "--generate-key", "--key-env", "X")
    assert code == 2 and "--generate-key and --key-env: one or the other" in err
