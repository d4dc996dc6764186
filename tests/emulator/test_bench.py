"""A small run of the emulator benchmark (the full one is ``harness bench emulator``)."""

from __future__ import annotations

import json

import pytest

from harness.bench.emulator import run_bench


@pytest.mark.slow  # `make test-slow`: a benchmark's smoke run, kept out of `make test`'s time budget
def test_run_bench_small(tmp_path):
    path = tmp_path / "bench.json"
    result = run_bench(str(path), quick=True, producers=2, events_per_producer=3000, batch_size=500)
    assert json.loads(path.read_text()) == result
    for key in ("send_eps", "receive_eps", "emulator_cpu_s_per_1k", "clients_cpu_s_per_1k"):
        assert isinstance(result[key], float) and result[key] > 0, key
    assert result["producer_processes"] == 2
    assert result["events_sent"] == 6000 and result["events_received"] == 6002
    # the emulator must be cheap next to the pure-python SDK clients
    assert result["emulator_cpu_s_per_1k"] < 0.5 * result["clients_cpu_s_per_1k"]
    cpu = result["rows"][2]  # the suite's row: the same two figures, measured side by side
    assert cpu["value"] == result["emulator_cpu_s_per_1k"] and cpu["reference"] == result["clients_cpu_s_per_1k"]
    assert cpu["ok"] is True
    # the Kafka endpoint's phases: librdkafka clients moved every event (plus each producer's warm-up record)
    for key in ("kafka_send_eps", "kafka_receive_eps", "kafka_emulator_cpu_s_per_1k", "kafka_clients_cpu_s_per_1k"):
        assert isinstance(result[key], float) and result[key] > 0, key
    assert result["kafka_events_sent"] == 6000 and result["kafka_events_received"] == 6002
    kcpu = result["rows"][5]
    assert kcpu["value"] == result["kafka_emulator_cpu_s_per_1k"]
    assert kcpu["reference"] == result["kafka_clients_cpu_s_per_1k"]
    assert kcpu["ok"] is (result["kafka_emulator_to_clients_cpu_ratio"] <= 0.5)


@pytest.mark.slow  # `make test-slow`: the soak's short form (the full one is `harness bench kafka-hostile`)
def test_kafka_hostile_soak_short(tmp_path):
    """Every attack kind strikes while a librdkafka and an azure-eventhub producer keep their round trips under a
    second with no failure, and the emulator's memory holds flat across the attack."""
    from harness.bench.kafka_hostile import ATTACKS
    from harness.bench.kafka_hostile import run_bench as soak

    path = tmp_path / "soak.json"
    result = soak(str(path), attack_s=40, quiet_s=5)
    assert json.loads(path.read_text()) == result
    assert set(result["attacks"]) == set(ATTACKS) and all(n > 0 for n in result["attacks"].values()), \
        result["attacks"]
    failed = [r["name"] for r in result["rows"] if r["ok"] is False]
    assert failed == [], (failed, result["rows"])
