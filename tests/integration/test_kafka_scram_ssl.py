"""SASL_SSL with SCRAM proven against the real broker: the embedded broker's TLS listener with a certificate the harness
makes and SCRAM users created through the broker's admin API.

- `harness run sasl-scram-ssl` (shortened): the producers (confluent-kafka), the harness's admin and lag clients and
  Spark's Kafka source (the Java client: ScramLoginModule, PEM truststore) all log in over TLS, verifying the
  generated CA, as the restricted user `app`; the run passes and no password is written in the run directory.
- `harness kafka up --security-protocol SASL_SSL --sasl-mechanism SCRAM-SHA-256 --user admin --password-env VAR`:
  the settings it prints work as pasted, while the real broker refuses a PLAINTEXT client and a wrong password,
  and a client without the CA fails the TLS handshake (checked as well by Python's own TLS stack, independent of
  librdkafka); `status` names the password's variable, never the password; `down` stops it.
"""
import json
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ScramMechanism

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "app": "app-secret"}  # as in scenarios/sasl-scram-ssl.toml


def _files_containing(root: Path, needles: list[bytes]) -> list[str]:
    return [f"{path.relative_to(root)}: {n.decode()}" for path in root.rglob("*") if path.is_file()
            for n in needles if n in path.read_bytes()]


def test_scram_sasl_ssl_scenario_passes_end_to_end_and_writes_no_password(harness_env, tmp_path):
    out = tmp_path / "scram"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "sasl-scram-ssl", "--out", str(out),
                           "--set", "producers.duration_s=10",
                           "--set", 'checks.sustained_not_required="10 s: too short to judge keeping up"'],
                          env=harness_env, capture_output=True, text=True, timeout=600)
    assert (out / "result.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + proc.stdout[-3000:])
    assert result["counts"]["acked"] > 10 * 1500 * 0.9 and result["counts"]["lost"] == 0
    # the one address handed out is the SASL_SSL listener, with SCRAM-SHA-512 and the harness's certificate
    state = json.loads((out / "run_state.json").read_text())["backend"]
    assert state["sasl"] == "SCRAM-SHA-512" and state["security_protocol"] == "SASL_SSL"
    ca = out / "services/kafka/tls/ca.pem"
    assert state["ca"] == str(ca) and ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
    properties = (out / "services/kafka/node-1/server.properties").read_text().splitlines()
    assert any(line.startswith("listener.security.protocol.map=") and line.endswith(",CLIENT:SASL_SSL")
               for line in properties)
    assert "sasl.enabled.mechanisms=SCRAM-SHA-512" in properties
    assert "ssl.keystore.password=${env:HARNESS_KAFKA_TLS_PASSWORD}" in properties  # the keystore's: env, no file
    assert any(line.startswith("advertised.listeners=") and f"CLIENT://{state['bootstrap']}" in line
               for line in properties)
    # the producers and Spark were given TLS + SCRAM settings verifying that CA, their secret as a reference
    job = json.loads((out / "producers/job.json").read_text())["settings"]
    assert job["bootstrap.servers"] == state["bootstrap"]
    assert (job["security.protocol"], job["sasl.mechanism"], job["sasl.username"]) == ("SASL_SSL", "SCRAM-SHA-512",
                                                                                      "app")
    assert job["ssl.ca.location"] == str(ca) and job["sasl.password"].startswith("${HARNESS_SECRET_")
    source = json.loads((out / "control/source.json").read_text())["options"]
    assert source["kafka.bootstrap.servers"] == state["bootstrap"]
    assert source["kafka.security.protocol"] == "SASL_SSL" and source["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    jaas = source["kafka.sasl.jaas.config"]  # in clear with the password as a reference, or sealed whole
    assert jaas.startswith("${HARNESS_SEALED_") or jaas.startswith(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="${'), jaas
    assert (source["kafka.ssl.truststore.type"], source["kafka.ssl.truststore.location"]) == ("PEM", str(ca))
    server_log = (out / "services/kafka/node-1/server.log").read_text()
    assert "Failed authentication" not in server_log
    assert _files_containing(out, [p.encode() for p in PASSWORDS.values()]) == []


def harness(env, *args, timeout=180):
    return subprocess.run([sys.executable, "-m", "harness", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _settings(stdout: str) -> dict[str, str]:
    """The librdkafka lines `kafka up` prints (key=value, not the Spark `kafka.*` ones, not comments)."""
    pairs = [line.split("=", 1) for line in stdout.splitlines() if "=" in line and not line.startswith(("#", "kafka."))
             and not line.startswith(("logs:", "running:"))]
    return dict(pairs)


def _refusal(settings: dict) -> tuple[str, list[str]]:
    """What the real broker does with a client of these settings: its metadata request's error and the errors
    librdkafka reported while trying (error_cb)."""
    errors: list[str] = []
    admin = AdminClient({**settings, "error_cb": lambda e: errors.append(e.str()), "log_level": 0,
                         "reconnect.backoff.max.ms": 200})
    try:
        admin.list_topics(timeout=3)
    except KafkaException as exc:
        admin.poll(0.5)
        return exc.args[0].str(), errors
    return "connected", errors


@pytest.mark.slow  # `make test-slow`: make test runs a scenario over SCRAM and TLS through the same set-up (above)
def test_kafka_up_with_scram_over_tls_refuses_what_it_must(harness_env, tmp_path):
    password = "pw-" + str(time.time_ns())
    env = dict(harness_env, KAFKASEC_TEST_PASSWORD=password)
    up = harness(env, "kafka", "up", "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-256",
                 "--user", "admin", "--password-env", "KAFKASEC_TEST_PASSWORD")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert password not in up.stdout + up.stderr
        settings = _settings(up.stdout)
        assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.mechanism"] == "SCRAM-SHA-256"
        assert settings["sasl.username"] == "admin" and settings["sasl.password"] == "${KAFKASEC_TEST_PASSWORD}"
        host, port = settings["bootstrap.servers"].rsplit(":", 1)
        assert host == "127.0.0.1"
        ca = settings["ssl.ca.location"]
        # pasted with the variable's value: the broker lets the user in, and holds its SCRAM-SHA-256 credential
        good = dict(settings, **{"sasl.password": password})
        admin = AdminClient(good)
        assert len(admin.list_topics(timeout=20).brokers) == 1
        described = admin.describe_user_scram_credentials(["admin"], request_timeout=20)["admin"].result()
        assert [i.mechanism for i in described.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_256]
        # Python's TLS stack: the certificate verifies against the printed CA, for 127.0.0.1; without it, it fails
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ssl.create_default_context(cafile=ca).wrap_socket(raw, server_hostname=host) as tls:
                assert ("IP Address", "127.0.0.1") in tls.getpeercert()["subjectAltName"]
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with pytest.raises(ssl.SSLCertVerificationError):
                ssl.create_default_context().wrap_socket(raw, server_hostname=host)
        # librdkafka: no CA -> the handshake fails; a wrong password -> SCRAM authentication fails; PLAINTEXT and
        # SASL without TLS -> the broker never answers a Kafka request on this listener
        no_ca = {k: v for k, v in good.items() if k != "ssl.ca.location"}
        error, errors = _refusal(no_ca)
        assert error != "connected" and any("certificate verify failed" in e for e in errors), (error, errors)
        error, errors = _refusal(dict(good, **{"sasl.password": password + "-wrong"}))
        assert error != "connected" and any("Authentication failed" in e for e in errors), (error, errors)
        for protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
            plain = {"bootstrap.servers": settings["bootstrap.servers"], "security.protocol": protocol}
            if protocol == "SASL_PLAINTEXT":
                plain.update({k: v for k, v in good.items() if k.startswith("sasl.")})
            error, errors = _refusal(plain)
            assert error != "connected", (protocol, error, errors)
        # status prints the same settings and names the variable; nothing the broker wrote holds the password
        status = harness(env, "kafka", "status")
        assert status.returncode == 0 and "sasl.password=${KAFKASEC_TEST_PASSWORD}" in status.stdout
        assert password not in status.stdout
        home = Path(harness_env["HARNESS_RUNS"]) / "standalone-kafka"
        assert _files_containing(home, [password.encode()]) == []
        # a second `up` asking for another listener is refused while this one runs
        other = harness(env, "kafka", "up")
        assert other.returncode == 2 and other.stderr.strip() == (
            "error: a standalone broker is already running with SASL_SSL SCRAM-SHA-256 as admin, not PLAINTEXT: "
            "stop it first (harness kafka down)")
    finally:
        down = harness(env, "kafka", "down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert harness(env, "kafka", "status").returncode == 1
