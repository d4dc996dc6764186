"""The team's tests: the job end to end through the harness (a real broker, the job in its own Spark driver, the
team's oracle judging the output), and the transformation alone on a few hand-written events."""
import time

from confluent_kafka import Producer

from harness.pytest_plugin import assert_passed
from harness.spark.events import from_kafka
from harness.producers.event import encode

from team_query.enrich import query


def test_enrich_scenario_passes(harness_run):
    # a 5 s smoke run: too short to tell start-up from a query that does not keep up, so it says so
    result = harness_run("scenarios/enrich.toml", producers={"duration_s": 5},
                         checks={"sustained_not_required": "a 5 s smoke run"})
    assert_passed(result)
    # 5 s at 1,000 events/s, every one acked and judged by the team's oracle
    assert result.counts.acked == 5000
    assert result.oracle["expected"] == 5000 and result.oracle["rows"] == 5000
    assert [c.name for c in result.checks if c.name.startswith("oracle_")] == ["oracle_enriched_exactly_once"]


def test_the_next_version_restarts_on_the_current_versions_checkpoint(harness_run):
    """This pull request's change (enrich -> enrich_v2) rolled out on a live checkpoint of the current job under
    traffic: the new version must start from it and every event come out exactly once across the change."""
    result = harness_run("scenarios/enrich-upgrade.toml",
                         checks={"sustained_not_required": "a 20 s rehearsal of a change"})
    assert_passed(result)
    (change,) = result.changes
    assert change["restarted"] and change["batches_after"] > 0
    assert change["changed"]["query"] == ["team_query.enrich:query", "team_query.enrich_v2:query"]
    assert result.oracle["ok"] and result.oracle["rows"] == result.counts.acked == 20_000


def test_enrich_tags_each_partition_with_its_region(harness_kafka_cluster, harness_spark_session):
    """Seven events on five partitions, read back by Spark's Kafka source and enriched; the regions below are
    written out by hand from the rule (partition p -> regions[p % 3])."""
    topic = f"enrich-unit-{time.time_ns()}"
    harness_kafka_cluster.create_stream(topic, 5, {})
    sends = [(0, 0), (0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (4, 6)]  # (partition, seq)
    producer = Producer({"bootstrap.servers": harness_kafka_cluster.bootstrap})
    for partition, seq in sends:
        producer.produce(topic, encode(1, seq, 1_700_000_000.0 + seq), partition=partition)
    assert producer.flush(30) == 0
    raw = (harness_spark_session.read.format("kafka")
           .option("kafka.bootstrap.servers", harness_kafka_cluster.bootstrap).option("subscribe", topic).load())
    rows = query(from_kafka(raw), {"regions": "eu,us,apac"}).collect()
    got = sorted((r["seq"], r["partition"], r["region"]) for r in rows)
    assert got == [(0, 0, "eu"), (1, 0, "eu"), (2, 1, "us"), (3, 2, "apac"), (4, 3, "eu"), (5, 4, "us"),
                   (6, 4, "us")]
