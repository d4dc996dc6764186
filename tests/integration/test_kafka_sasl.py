"""Secured Kafka end to end: the embedded broker with a SASL/PLAIN listener and an ACL authorizer (StandardAuthorizer).

- `harness run sasl` (shortened, the query behind the TCP proxy): producers, the harness's admin and Spark's source
  all authenticate over SASL listeners, the admin principal may apply DeleteRecords, the run passes, and no password
  is written anywhere in the run directory.
- mode = "external" pointed at a SASL broker this test starts itself, as the restricted user `app`, with a
  topic_delete fault: refused with exit 2 before any traffic (nothing produced, the topic not deleted), the message
  naming the fault, the operation, the request and the principal. What the broker holds is read back with a client
  of the test's own.
"""
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "app": "app-secret"}  # as in scenarios/sasl.toml


def _files_containing(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path.relative_to(root)}: {n.decode()}" for n in needles if n in data]
    return hits


@pytest.mark.slow  # `make test-slow`: `make test` runs SASL end to end over SASL_SSL with SCRAM (test_kafka_scram_ssl)
def test_sasl_scenario_passes_over_the_sasl_listener_and_writes_no_password(harness_env, tmp_path):
    out = tmp_path / "sasl"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "sasl", "--out", str(out),
                           "--set", "producers.duration_s=16", "--set", "backend.proxy=true",
                           "--set", 'checks.sustained_not_required="16 s: too short to judge keeping up"'],
                          env=harness_env, capture_output=True, text=True, timeout=600)
    assert (out / "result.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + proc.stdout[-3000:])
    assert result["counts"]["acked"] > 16 * 1500 * 0.9 and result["counts"]["lost"] == 0
    # the permitted admin fault was applied: the broker's log start offsets moved
    faults = [json.loads(line) for line in (out / "faults.jsonl").read_text().splitlines()]
    inject = next(f for f in faults if f["action"] == "inject")
    before, after = inject["detail"]["log_start_before"], inject["detail"]["log_start_after"]
    assert any(after[p] > before[p] for p in after), inject
    # the clients really went through the SASL listener: it is the only address handed out, Spark got the Java
    # client's settings (its secret as a reference), and the broker saw no failed authentication
    state = json.loads((out / "run_state.json").read_text())["backend"]
    assert state["sasl"] == "PLAIN" and state["users"] == ["admin", "app"]
    properties = (out / "services/kafka/node-1/server.properties").read_text()
    client_port = next(line for line in properties.splitlines() if line.startswith("advertised.listeners="))
    assert f"CLIENT://{state['bootstrap']}" in client_port
    job = json.loads((out / "producers/job.json").read_text())
    assert job["settings"]["bootstrap.servers"] == state["bootstrap"]
    assert job["settings"]["security.protocol"] == "SASL_PLAINTEXT"
    assert job["settings"]["sasl.password"].startswith("${HARNESS_SECRET_")
    source = json.loads((out / "control/source.json").read_text())["options"]
    assert source["kafka.security.protocol"] == "SASL_PLAINTEXT" and source["kafka.sasl.mechanism"] == "PLAIN"
    assert source["kafka.sasl.jaas.config"].startswith(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="${HARNESS_SECRET_')
    # the query went through the proxy (backend.proxy = true), whose listener speaks SASL as well
    assert source["kafka.bootstrap.servers"] == state["query_bootstrap"] != state["bootstrap"]
    assert "QUERY:SASL_PLAINTEXT" in properties
    connections = (out / "services/proxy/connections.jsonl").read_text().splitlines()
    assert connections, "no connection went through the proxy"
    assert "Failed authentication" not in (out / "services/kafka/node-1/server.log").read_text()
    assert _files_containing(out, [p.encode() for p in PASSWORDS.values()]) == []


@pytest.fixture()
def sasl_broker(tmp_path):
    """An embedded SASL/PLAIN broker of the test's own, standing in for a user's secured cluster."""
    from harness.backends.kafka.embedded import EmbeddedKafka
    from harness.supervisor import Supervisor

    with Supervisor(uuid.uuid4().hex) as sup:
        broker = EmbeddedKafka(sasl="PLAIN", users=PASSWORDS, super_users=["admin"])
        broker.set_client({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                           "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
        broker.start(tmp_path / "broker", sup)
        try:
            yield broker
        finally:
            broker.stop()


def test_external_cluster_refuses_a_fault_the_principal_may_not_apply_before_any_traffic(harness_env, tmp_path,
                                                                                         sasl_broker):
    scenario = tmp_path / "external.toml"
    scenario.write_text(f"""
name = "external-restricted"
[backend]
mode = "external"
bootstrap_servers = "{sasl_broker.bootstrap}"
[backend.client]
"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "PLAIN"
"sasl.username" = "app"
"sasl.password" = "${{APP_PASSWORD}}"
[stream]
name = "restricted"
partitions = 2
[producers]
duration_s = 10
rate = {{ kind = "constant", eps = 500 }}
[producers.client]
"message.timeout.ms" = 20000
[[faults]]
kind = "topic_delete"
at_s = 5
""")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out)],
                          env=dict(harness_env, APP_PASSWORD=PASSWORDS["app"]), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.strip() == (
        "error: refused before any traffic: faults.0 (topic_delete) needs DELETE on topic 'restricted' "
        "(DeleteTopics), which User:app is not allowed (grant the ACLs, or run the fault with a principal that "
        "has them)")
    # nothing sent, nothing applied: no producer ran, no fault was recorded, the topic is there and empty
    assert not list(out.glob("producers/acks-*")) and not (out / "result.json").exists()
    assert not (out / "faults.jsonl").exists() or not (out / "faults.jsonl").read_text().strip()
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
    md = admin.list_topics("restricted", timeout=10).topics["restricted"]
    assert sorted(md.partitions) == [0, 1]
    request = {TopicPartition("restricted", p): OffsetSpec.latest() for p in md.partitions}
    assert {tp.partition: f.result().offset for tp, f in admin.list_offsets(request).items()} == {0: 0, 1: 0}
    assert _files_containing(out, [p.encode() for p in PASSWORDS.values()]) == []
