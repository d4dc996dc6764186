"""Config parsing (Microsoft's Config.json shape), partition log unit behaviour, control API and serve_forever."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest
from azure.eventhub import EventData

from emulator_helpers import producer

from harness.emulator.config import ConfigError, default_config, load_config
from harness.emulator.hub import PartitionLog
from harness.emulator.config import HubConfig

MS_SAMPLE = {
    "UserConfig": {
        "NamespaceConfig": [{
            "Type": "EventHub", "Name": "emulatorNs1",
            "Entities": [{"Name": "eh1", "PartitionCount": "2", "ConsumerGroups": [{"Name": "cg1"}]}],
        }],
        "LoggingConfig": {"Type": "File"},
    }
}


def _write(tmp_path, data) -> str:
    path = tmp_path / "Config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_default_config():
    cfg = default_config()
    (hub,) = cfg.hubs
    assert (hub.name, hub.partition_count, hub.consumer_groups) == ("eh1", 4, ("$Default", "cg1"))
    assert load_config(None) == cfg


def test_microsoft_sample_shape(tmp_path):
    cfg = load_config(_write(tmp_path, MS_SAMPLE))
    assert cfg.namespace == "emulatorNs1"
    hub = cfg.hub("eh1")
    assert hub.partition_count == 2 and hub.consumer_groups == ("$Default", "cg1")


def test_int_partition_count_and_extensions(tmp_path):
    data = json.loads(json.dumps(MS_SAMPLE))
    ent = data["UserConfig"]["NamespaceConfig"][0]["Entities"][0]
    ent.update(PartitionCount=3, RetentionSeconds=30, MaxEventsPerPartition=50)
    data["Emulator"] = {"SharedAccessKeys": [{"Name": "k", "Key": "v"}]}
    cfg = load_config(_write(tmp_path, data))
    assert cfg.hub("eh1").partition_count == 3
    assert cfg.hub("eh1").retention_s == 30 and cfg.hub("eh1").max_events_per_partition == 50
    assert cfg.sas_keys == {"k": "v"}


@pytest.mark.parametrize("mutate,field", [
    (lambda e: e.update(PartitionCount="abc"), "Entities[0].PartitionCount"),
    (lambda e: e.update(PartitionCount=0), "Entities[0].PartitionCount"),
    (lambda e: e.pop("PartitionCount"), "Entities[0].PartitionCount"),
    (lambda e: e.update(Name="bad name!"), "Entities[0].Name"),
    (lambda e: e.update(ConsumerGroups=[{"Name": ""}]), "ConsumerGroups[0].Name"),
    (lambda e: e.update(MessageRetentionInHours=-1), "Entities[0].MessageRetentionInHours"),
])
def test_bad_config_names_file_and_field(tmp_path, mutate, field):
    data = json.loads(json.dumps(MS_SAMPLE))
    mutate(data["UserConfig"]["NamespaceConfig"][0]["Entities"][0])
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert path in str(info.value) and field in str(info.value)


def test_unreadable_and_invalid_json(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.json"))
    path = _write(tmp_path, "{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)
    with pytest.raises(ConfigError, match="UserConfig"):
        load_config(_write(tmp_path, {"Nope": 1}))


def test_partition_log_positions_and_bounds():
    body = b"\x00\x53\x75\xa0\x01x"
    log = PartitionLog("h", "0", HubConfig("h", 1, max_events_per_partition=5))
    for t in range(8):
        log.append([body], when_ms=1000 + t)
    assert (log.begin_seq, log.next_seq, log.count) == (3, 8, 5)
    size = log.offsets[-1] - log.offsets[-2]
    assert log.start_index("seq", 5, True) - log.head == 2
    assert log.start_index("seq", 0, True) == log.head  # aged out -> oldest retained
    assert log.start_index("offset", log.offsets[log.head + 1], False) == log.head + 2
    assert log.start_index("time", 1005, True) == log.head + 2
    assert log.start_index("latest", None, False) == len(log.payloads)
    assert size > len(body)
    log.append([body], when_ms=10)  # clock went backwards: enqueued time stays monotonic
    assert log.times[-1] == 1007


def _http(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_control_api(emu):
    base = emu.control_url
    hub = "control"
    with producer(emu, hub) as p:
        p.send_batch([EventData(str(i)) for i in range(4)], partition_id="0")
    status, snap = _http(f"{base}/status")
    assert status == 200 and snap["hubs"][hub]["partitions"]["0"]["retained_events"] == 4
    assert _http(f"{base}/hubs/{hub}/age-out", {"partition": "0", "up_to_seq": 1}) == (200, {"ok": True, "dropped": 2})
    assert _http(f"{base}/throttle", {"on": True, "mode": "reject"})[0] == 200
    assert emu.snapshot()["throttle"] == "reject"
    assert _http(f"{base}/throttle", {"on": False}) == (200, {"ok": True})
    assert _http(f"{base}/latency", {"ms": 5})[0] == 200 and emu.snapshot()["latency_ms"] == 5
    assert _http(f"{base}/latency", {"ms": 0})[0] == 200
    assert _http(f"{base}/hubs/{hub}/partitions/1/steal", {})[1] == {"ok": True, "stolen": 0}
    assert _http(f"{base}/drop-connections", {})[0] == 200
    assert _http(f"{base}/hubs/{hub}/delete", {}) == (200, {"ok": True, "deleted": True})
    assert hub not in emu.snapshot()["hubs"]
    status, body = _http(f"{base}/hubs/{hub}/recreate", {"partition_count": 3})
    assert status == 200 and body["hub"]["partition_count"] == 3
    assert _http(f"{base}/hubs/nosuch/age-out", {"up_to_seq": 1})[0] == 404
    assert _http(f"{base}/throttle", {"on": True, "mode": "explode"})[0] == 400
    assert _http(f"{base}/latency", {})[0] == 400
    assert _http(f"{base}/nothing", {})[0] == 404


def _key_of(conn: str) -> tuple[str, str]:
    fields = dict(part.split("=", 1) for part in conn.split(";") if part)
    return fields["SharedAccessKeyName"], fields["SharedAccessKey"]


def _serve(args, n_lines):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "harness.emulator", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    lines = [proc.stdout.readline().strip() for _ in range(n_lines)]
    return proc, lines


def test_serve_forever_process(tmp_path):
    cfg = _write(tmp_path, MS_SAMPLE)
    proc, lines = _serve(["--port", "0", "--config", cfg], 6)
    try:
        assert lines[0].startswith("connection_string=Endpoint=sb://127.0.0.1:")
        assert lines[0].endswith("UseDevelopmentEmulator=true")
        assert lines[1].startswith("control=http://127.0.0.1:")
        info = dict(line.split("=", 1) for line in lines[2:])
        assert sorted(info) == ["ca_file", "tls_port", "ws_port", "wss_port"]
        assert all(info[k].isdigit() for k in ("tls_port", "ws_port", "wss_port")) and os.path.isfile(info["ca_file"])
        conn = lines[0].split("=", 1)[1]
        from azure.core.credentials import AzureNamedKeyCredential
        from azure.eventhub import EventHubProducerClient, TransportType

        with EventHubProducerClient.from_connection_string(conn, eventhub_name="eh1", retry_total=0) as p:
            assert p.get_partition_ids() == ["0", "1"]
        with EventHubProducerClient(  # what a client given a host name and a credential needs
            fully_qualified_namespace="localhost", eventhub_name="eh1", retry_total=0,
            credential=AzureNamedKeyCredential(*_key_of(conn)),  # the key the emulator made and printed
            custom_endpoint_address=f"sb://127.0.0.1:{info['tls_port']}", transport_type=TransportType.Amqp,
            connection_verify=info["ca_file"],
        ) as p:
            assert p.get_partition_ids() == ["0", "1"]
        status, snap = _http(lines[1].split("=", 1)[1] + "/status")
        assert status == 200 and "eh1" in snap["hubs"]
        assert snap["endpoints"]["amqps_port"] == int(info["tls_port"])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert not os.path.exists(info["ca_file"])  # the temporary certificate directory goes with the process


def test_serve_without_tls_or_websockets(tmp_path):
    proc, lines = _serve(["--config", _write(tmp_path, MS_SAMPLE), "--no-tls", "--no-websockets"], 6)
    try:
        assert lines[2:] == ["tls_port=none", "ws_port=none", "wss_port=none", "ca_file=none"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_serve_bad_config_exits_with_message(tmp_path):
    bad = json.loads(json.dumps(MS_SAMPLE))
    bad["UserConfig"]["NamespaceConfig"][0]["Entities"][0]["PartitionCount"] = "many"
    cfg = _write(tmp_path, bad)
    res = subprocess.run([sys.executable, "-m", "harness.emulator", "--config", cfg], capture_output=True, text=True,
                         timeout=30, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert res.returncode == 2
    assert cfg in res.stderr and "PartitionCount" in res.stderr
    from harness.emulator.serve import serve_forever

    with pytest.raises(ConfigError):
        serve_forever(config_path=cfg)

