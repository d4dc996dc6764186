"""Secrets never written (issue 20): a distinct secret planted in every option table of a short Kafka scenario, run
end to end with `harness run`; not one of them may appear in any file of the run directory (every kind, binary
included, Spark's event log and the brokers' logs too) or in what the run printed, and the run still passes: the
processes got the real values.

The embedded broker has a SASL/PLAIN listener with two accounts, so two of the secrets are proved to reach their
process by being used: backend.client's password (the producers and the harness's admin log in as `admin`) and
the JAAS line in spark.source_options (Spark's source logs in as `app` with it, overriding the one the harness
derives). The others are real names the software knows but harmless here: librdkafka ignores a key password
without TLS, the broker a truststore password on listeners without TLS, Hadoop S3 and Azure keys nobody uses. Kafka
has no topic config that is a secret, so stream.config holds none (its values go through the same rules:
tests/unit/test_secrets.py).
"""
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _secrets() -> dict[str, str]:
    tag = uuid.uuid4().hex[:10]
    return {table: f"{table.replace('.', '-')}-{tag}-S3cr3t" for table in (
        "spark.source_options", "spark.conf", "producers.client", "backend.client", "backend.broker", "set")}


def _scenario(path: Path, secret: dict[str, str]) -> None:
    path.write_text(f"""
name = "secrets-planted"
description = "a secret in every option table"
[backend]
kind = "kafka"
mode = "embedded"
sasl = "PLAIN"
[backend.users]
admin = "{secret['backend.client']}"
app = "{secret['spark.source_options']}"
[backend.client]
"sasl.username" = "admin"
"sasl.password" = "{secret['backend.client']}"
[backend.broker]
"ssl.truststore.password" = "{secret['backend.broker']}"
[stream]
name = "events"
partitions = 2
[producers]
duration_s = 6
rate = {{ kind = "constant", eps = 500 }}
[producers.client]
"linger.ms" = 5
"ssl.key.password" = "{secret['producers.client']}"
[spark]
trigger = {{ kind = "processingTime", interval = "1 second" }}
[spark.source_options]
startingOffsets = "earliest"
"kafka.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="{secret['spark.source_options']}";'
[spark.conf]
"spark.hadoop.fs.s3a.secret.key" = "{secret['spark.conf']}"
[checks]
max_lost = 0
max_duplicates = 0
sustained_not_required = "6 s: too short to judge keeping up"
""")


def _hits(root: Path, needles: dict[str, str]) -> list[str]:
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            out += [f"{path.relative_to(root)}: the {table} secret" for table, n in needles.items()
                    if n.encode() in data]
    return out


def test_a_secret_in_every_option_table_is_written_nowhere_and_the_run_passes(harness_env, tmp_path):
    secret = _secrets()
    scenario = tmp_path / "planted.toml"
    _scenario(scenario, secret)
    out = tmp_path / "run"
    azure = "spark.conf.spark.hadoop.fs.azure.account.key.planted.blob.core.windows.net"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out),
                           "--set", f"{azure}={secret['set']}"],
                          env=harness_env, capture_output=True, text=True, timeout=300)
    printed = proc.stdout + proc.stderr
    assert (out / "result.json").exists(), printed[-5000:]
    result = json.loads((out / "result.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result["checks"] if not c["ok"]], indent=1) + printed[-3000:])
    assert result["counts"]["acked"] > 6 * 500 * 0.9 and result["counts"]["lost"] == 0

    assert _hits(out, secret) == []
    assert [table for table, s in secret.items() if s in printed] == []

    # what is written instead: the record shows *** where the secret was, the child's files carry references
    resolved = json.loads((out / "scenario.json").read_text())
    assert resolved["resolved"]["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] == "***"
    assert resolved["resolved"]["producers"]["client"]["ssl.key.password"] == "***"
    assert resolved["resolved"]["backend"]["client"]["sasl.password"] == "***"
    assert resolved["resolved"]["spark"]["source_options"]["kafka.sasl.jaas.config"] == "***"
    assert resolved["overrides"] == [f"{azure}=***"]
    job = json.loads((out / "spark/job.json").read_text())
    assert job["conf"]["spark.hadoop.fs.s3a.secret.key"].startswith("${HARNESS_SECRET_")
    assert "secret" in job["conf"]["spark.redaction.regex"] and "jaas" in job["conf"]["spark.redaction.regex"]
    source = json.loads((out / "control/source.json").read_text())["options"]  # handed over after the driver
    assert source["kafka.sasl.jaas.config"].startswith("${HARNESS_SEALED_")  # started: sealed with its key
    producers = json.loads((out / "producers/job.json").read_text())["settings"]
    assert producers["sasl.password"].startswith("${HARNESS_SECRET_")  # backend.client's, as admin
    assert producers["ssl.key.password"].startswith("${HARNESS_SECRET_")
    properties = (out / "services/kafka/node-1/server.properties").read_text()
    assert "ssl.truststore.password=${env:HARNESS_SECRET_" in properties
    # Spark logged in with the planted JAAS line, as app (the broker authorised that principal)
    assert "Failed authentication" not in (out / "services/kafka/node-1/server.log").read_text()
    # Spark's event log recorded the conf, redacted by Spark itself
    events = b"".join(p.read_bytes() for p in (out / "spark/events").rglob("*") if p.is_file())
    assert b"spark.hadoop.fs.s3a.secret.key" in events and b"*********(redacted)" in events
