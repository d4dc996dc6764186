"""`harness bench kafka-query --quick` and `harness bench startup --quick` end to end (real broker, real Spark
driver, real `harness run`): minutes each, so slow."""
from __future__ import annotations

import json

import pytest

from harness.cli import main as cli_main

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_kafka_query_bench_on_and_off_read_the_whole_backlog(tmp_path):
    path = tmp_path / "kq.json"
    assert cli_main(["bench", "kafka-query", "--quick", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    # a warm-up not counted, then every mode in two rounds, the second reversed
    assert data["warm_up"]["mode"] == "on"
    assert [r["mode"] for r in data["runs"]] == ["on", "off", "no-listener", "no-event_log", "no-polling",
                                                 "no-polling", "no-event_log", "no-listener", "off", "on"]
    for r in data["runs"] + [data["warm_up"]]:
        assert r["rows"] == 200_000  # the backlog the bench produced, every row read once
        assert r["batches"] == 20  # maxOffsetsPerTrigger = backlog / 20: the same batches in every mode
        assert r["rows_per_s"] > 0
    headline, *items = data["rows"]
    on, off = sorted(data["on_rows_per_s"]), sorted(data["off_rows_per_s"])
    assert headline["ratio"] == pytest.approx((on[0] + on[1]) / (off[0] + off[1]))  # medians of two
    assert [r["reference_name"] for r in items] == ["all on but listener", "all on but event_log",
                                                    "all on but polling"]


def test_startup_bench_starts_the_driver_beside_the_broker_only_side_by_side(tmp_path):
    path = tmp_path / "startup.json"
    assert cli_main(["bench", "startup", "--quick", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    side, seq, no_cds, at_go = data["runs"]
    assert (side["mode"], seq["mode"], no_cds["mode"], at_go["mode"]) == ("side_by_side", "sequential", "no_cds",
                                                                          "producers_at_go")
    for r in (side, seq, no_cds):
        p = r["phases"]
        assert 0 < p["harness_up"] < p["broker_up"] <= p["stream_created"]
        assert p["driver_process"] < p["driver_jvm_up"] < p["driver_session_ready"] <= p["query_started"] <= p["first_batch_recorded"]
        assert p["first_batch_recorded"] < p["first_data_batch"]
    # sequential: the driver process only once the stream exists; side by side while the broker starts
    assert seq["phases"]["driver_process"] > seq["phases"]["stream_created"]
    assert side["phases"]["driver_process"] < side["phases"]["broker_up"]
    # the sweep's points: one broker for all of them, against one each; every point got its first data batch
    shared, fresh = data["sweeps"]
    assert shared["broker"] == {"shared": True, "why_not": None}
    assert fresh["broker"] == {"shared": False, "why_not": "HARNESS_SHARED_BROKER=0 in the environment"}
    for sweep in (shared, fresh):
        assert len(sweep["points"]) == 2 and all(p["first_data_batch"] > 0 for p in sweep["points"])
    # Spark alone: a bare PySpark process read the whole filled second (steady's 3,000 events) in its first
    # data batch, the run's first batch (the topic held them before it started)
    (alone,) = data["spark_alone"]
    assert 0 < alone["session_ready"] < alone["query_started"] < alone["first_data_batch"]
    assert (alone["batch_id"], alone["rows"]) == (0, 3000)
    names = [r["name"] for r in data["rows"]]
    assert "first data batch, s after launch (goal <= 10 s)" in names
    assert "Spark alone: first data batch processed, s after its launch" in names
    assert any(n.startswith("sweep of 2 points") for n in names)
