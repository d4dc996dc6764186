"""Event Hubs through its Kafka endpoint end to end: the emulator serving Kafka over SASL_SSL, librdkafka producers
signing in with `$ConnectionString`, Spark's own Kafka source (the Java client) reading the hub as a topic, the
verdict. Every ehk-* scenario and eh-parity at full length also run in `make test-slow` (test_scenarios_slow)."""
import json
import re
import subprocess
import sys

import pytest

from scenario_runs import run

pytestmark = pytest.mark.integration


def checks(result: dict) -> dict:
    return {c["name"]: c for c in result["checks"]}


def secret_values(run_dir) -> set[bytes]:
    """Every connection string key and JAAS password written anywhere in the run directory."""
    found = set()
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found |= set(re.findall(rb"SharedAccessKey=([^;\"'\s\\]*)", data))
            found |= set(re.findall(rb"password=\\?\"([^\"\\]*)", data))
    return found


@pytest.mark.slow  # `make test-slow`: `make test` has Apache Kafka's own Java clients on the endpoint (tests/emulator)
def test_ehk_steady_reads_every_event_once_through_the_kafka_endpoint(harness_env, tmp_path):
    """The real clients on both sides: what librdkafka's acks say (partition, offset) is where Spark's Kafka
    source found each event, and the drain reached the ends the SDK reads over AMQP (offsets = sequence numbers)."""
    # the scenario's own 30 s: at 20 s on a loaded 2-core machine the lag slope's error (a few samples after the
    # first batch's consumer start-up) left `sustained` "cannot tell" once in a fresh-clone CI
    proc, result = run(harness_env, tmp_path / "run", "ehk-steady")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    c, by_name = result["counts"], checks(result)
    assert c["produced"] == c["acked"] == c["delivered_unique"] > 0
    assert c["lost"] == c["duplicates"] == c["misplaced"] == 0
    assert by_name["offsets_match"]["ok"] and by_name["drained"]["ok"] and by_name["order"]["ok"]
    assert result["backend_info"]["protocol"] == "kafka" and result["backend_info"]["kafka_tls_port"] not in ("", "none")
    # consumers created, from the emulator's own connection records: Spark's Kafka source reads on executors, each
    # executor JVM (local[2]: the one JVM) creating its pooled consumers, client.id `consumer-spark-kafka-source-
    # ...-executor-N`, each opening a bootstrap connection and one to the broker
    consumers = result["consumers"]
    assert consumers["records"] == "services/eventhubs/kafka-connections.jsonl", consumers
    assert consumers["created"] >= 1 and consumers["connections"] >= consumers["created"], consumers
    assert "## Kafka consumers created (the Event Hubs emulator's" in (tmp_path / "run" / "report.md").read_text()
    # the connection string is the SASL password: no file of the run holds its key
    values = secret_values(tmp_path / "run")
    assert all(v in (b"***", b"") or re.fullmatch(rb"\$\{[A-Za-z0-9_]+\}", v) for v in values), values


@pytest.mark.slow
def test_eh_parity_puts_both_protocols_side_by_side(harness_env, tmp_path):
    proc = run_sweep(harness_env, tmp_path / "sweep")
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert proc.returncode == 0 and sweep["verdict"] == "pass", proc.stdout[-5000:]
    rows = {r["values"]["backend.protocol"]: r for r in sweep["runs"]}
    assert set(rows) == {"amqp", "kafka"} and all(r["verdict"] == "pass" for r in rows.values())
    assert rows["amqp"]["receivers_created"] and rows["kafka"]["receivers_created"] is None
    # Kafka: consumers created, from the emulator's connection records; each of the two executor JVMs keeps its own
    # consumer pool, and both ran tasks (below), so at least one each
    assert rows["kafka"]["consumers_created"] >= 2 and rows["amqp"]["consumers_created"] is None
    for row in rows.values():  # placement on the two executors, from Spark's own event log
        assert len(row["tasks_per_executor"]) == 2 and row["same_executor_as_last_batch"] is not None
    text = (tmp_path / "sweep" / "sweep.md").read_text()
    assert "| amqp | pass |" in text and "| kafka | pass |" in text and "tasks per executor" in text


def run_sweep(harness_env, out, *overrides):
    argv = [sys.executable, "-m", "harness", "run", "eh-parity", "--out", str(out)]
    for o in overrides:
        argv += ["--set", o]
    return subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=1800)
