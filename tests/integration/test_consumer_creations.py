"""Kafka consumer creations per batch, counted from the TCP proxy's records (backend.proxy = true), for a query whose
ranges are one per partition and for one whose ranges minPartitions splits.

What Spark 4's Kafka source really does (checked by hand first, steady at 3,000 events/s, 8 partitions, local[2]):
its executors keep a pool of consumers per topic-partition (InternalKafkaConsumerPool) and borrow one per task,
so ranges split by minPartitions = 16 do not make consumers be created again batch after batch (Spark 2's cache
did); they make the pool hold as many consumers per partition as tasks read it at once: 16 instead of 8, all of
them created in the first batch that read rows, none after it. The expected figures come from the proxy's own
records (every connection of an executor consumer, the first one of each instance being its first request,
correlation id 0), compared with what result.json says.
"""
import json
from datetime import datetime

import pytest

from scenario_runs import run

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two runs: over the default suite's budget

PARTITIONS = 8  # scenarios/steady.toml


def from_the_proxy(out):
    """(instances created, of them after the first batch that read rows, distinct client.ids) of the executors'
    consumers, read straight from the proxy's connection records."""
    rows = [json.loads(line) for line in (out / "services" / "proxy" / "connections.jsonl").read_text().splitlines()]
    progress = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    first = next(p for p in progress if p["numInputRows"] > 0)
    first_end = (datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp()
                 + first["durationMs"]["triggerExecution"] / 1000.0)
    executors = [r for r in rows if r["role"] == "executor" and not r.get("refused")]
    assert executors and all(r["client_id"].startswith("consumer-spark-kafka-source-") for r in executors)
    firsts = [r for r in executors if r["correlation_id"] == 0]
    return len(firsts), sum(1 for r in firsts if r["t"] > first_end), len({r["client_id"] for r in executors})


@pytest.mark.parametrize("min_partitions", [None, 2 * PARTITIONS], ids=["one-range-per-partition", "split"])
def test_consumers_created_per_batch_through_the_proxy(harness_env, tmp_path, min_partitions):
    out = tmp_path / "run"
    overrides = ["producers.duration_s=15", "backend.proxy=true"]
    if min_partitions:
        overrides.append(f"spark.source_options.minPartitions={min_partitions}")
    proc, result = run(harness_env, out, "steady", *overrides)
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["backend_info"]["query_bootstrap"]  # the query bootstrapped at the proxy

    created, later, client_ids = from_the_proxy(out)
    c = result["consumers"]
    assert (c["created"], c["created_after_first_data_batch"], c["client_ids"]) == (created, later, client_ids)
    assert created == client_ids  # one executor JVM (local[2]): every instance has a client.id of its own
    assert sum(b["created"] for b in c["per_batch"].values()) + c["outside_batches"]["created"] == created
    assert c["per_batch"][str(c["first_data_batch"])]["created"] == c["created_in_first_data_batch"]
    if min_partitions is None:
        # one consumer per partition, created in the first batch that read rows and reused by every later batch
        assert created == PARTITIONS and later == 0 and c["created_in_first_data_batch"] == PARTITIONS
    else:
        # split ranges: the pool holds a consumer for each task reading a partition at the same time (2 task
        # slots: at most 2 per partition), created when first needed; reused afterwards
        assert PARTITIONS < created <= 2 * PARTITIONS
        assert later <= 2 * PARTITIONS - c["created_in_first_data_batch"]
    report = (out / "report.md").read_text()
    assert "## Kafka consumers created" in report and f"{created} executor consumers created" in report
