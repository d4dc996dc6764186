"""Kafka consumer creations per batch (reports.consumers) from hand-made proxy records and progress records."""
from datetime import datetime, timezone

from harness.analysis.consumers import consumer_summary, creations
from harness.reports.consumers import consumers_section

T0 = 1_800_000_000.0
EXEC = "consumer-spark-kafka-source-0f-1-executor-"


def iso(t: float) -> str:
    return datetime.fromtimestamp(T0 + t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def batch(batch_id: int, start: float, end: float, rows: int) -> dict:
    return {"batchId": batch_id, "timestamp": iso(start), "numInputRows": rows,
            "durationMs": {"triggerExecution": int(round((end - start) * 1000))}}


def conn(n: int, t: float, client_id, role: str, correlation_id=None, **extra) -> dict:
    row = {"t": T0 + t, "conn": n, "broker": 0, "client_id": client_id, "role": role, "api_key": 18,
           "api_version": 3, **extra}
    if correlation_id is not None:
        row["correlation_id"] = correlation_id
    return row


PROGRESS = [batch(0, 0.0, 1.0, 0), batch(1, 2.0, 4.0, 500), batch(2, 5.0, 6.0, 300), batch(3, 6.5, 7.0, 300)]
CONNECTIONS = [
    conn(1, 0.2, "adminclient-1", "driver", 0), conn(2, 0.5, "adminclient-1", "driver", 2),
    # batch 1: two consumers, each a bootstrap connection (its first request, correlation id 0) and a broker one
    conn(3, 2.5, EXEC + "1", "executor", 0), conn(4, 2.6, EXEC + "1", "executor", 4),
    conn(6, 2.8, EXEC + "2", "executor", 4), conn(5, 2.7, EXEC + "2", "executor", 0),  # written out of order
    # between batches 1 and 2: a consumer of its own
    conn(7, 4.5, EXEC + "5", "executor", 0),
    # batch 2: another executor JVM numbering its consumers from 1 too: same client.id, a new instance
    conn(8, 5.5, EXEC + "1", "executor", 0),
    # batch 3: consumer 1 reconnecting (not a creation), a new consumer 3, a new consumer 4 refused on arrival
    conn(9, 6.6, EXEC + "1", "executor", 9), conn(10, 6.7, EXEC + "3", "executor", 0),
    conn(11, 6.8, EXEC + "4", "executor", 0, refused=True),
    conn(12, 6.9, None, "unidentified", None, error="no complete request header"),
]


def test_instances_are_new_client_ids_or_first_requests():
    made = creations(CONNECTIONS)
    assert [(round(c["t"] - T0, 1), c["client_id"].replace(EXEC, "exec-")) for c in made] == [
        (0.2, "adminclient-1"), (2.5, "exec-1"), (2.7, "exec-2"), (4.5, "exec-5"), (5.5, "exec-1"), (6.7, "exec-3"),
        (6.8, "exec-4")]


def test_per_batch_creations_connections_and_totals():
    s = consumer_summary(CONNECTIONS, PROGRESS)
    assert s["per_batch"] == {
        "0": {"rows": 0, "connections": 0, "client_ids": 0, "created": 0},
        "1": {"rows": 500, "connections": 4, "client_ids": 2, "created": 2},
        "2": {"rows": 300, "connections": 1, "client_ids": 0, "created": 1},
        "3": {"rows": 300, "connections": 2, "client_ids": 1, "created": 2}}
    assert s["outside_batches"] == {"connections": 1, "client_ids": 1, "created": 1}
    assert (s["created"], s["connections"], s["client_ids"], s["refused"]) == (7 - 1, 8, 4, 1)
    assert s["first_data_batch"] == 1 and s["created_in_first_data_batch"] == 2
    assert s["created_after_first_data_batch"] == 4 and s["batches_creating_after_first"] == 2
    assert s["all_roles"] == {"driver": {"connections": 2, "created": 1},
                              "executor": {"connections": 8, "created": 6},
                              "unidentified": {"connections": 1, "created": 0}}


def test_a_warm_pool_creates_nothing_after_the_first_data_batch():
    rows = [conn(1, 2.5, EXEC + "1", "executor", 0), conn(2, 2.6, EXEC + "1", "executor", 4)]
    s = consumer_summary(rows, PROGRESS)
    assert s["created"] == 1 and s["created_after_first_data_batch"] == 0 and s["batches_creating_after_first"] == 0


def test_records_without_correlation_ids_count_client_ids():
    rows = [{k: v for k, v in r.items() if k != "correlation_id"} for r in CONNECTIONS]
    s = consumer_summary(rows, PROGRESS)
    assert s["created"] == 5  # the second JVM's reuse of client.id executor-1 cannot be told apart
    assert s["per_batch"]["2"]["created"] == 0 and s["per_batch"]["3"]["created"] == 2


def test_a_batch_run_twice_after_a_restart_counts_under_its_id_and_the_first_data_batch_is_by_time():
    progress = [batch(0, 0.0, 1.0, 0), batch(1, 2.0, 3.0, 10), batch(1, 10.0, 11.0, 10)]
    rows = [conn(1, 2.5, EXEC + "1", "executor", 0), conn(2, 10.5, EXEC + "1", "executor", 0)]
    s = consumer_summary(rows, progress)
    assert s["per_batch"]["1"] == {"rows": 20, "connections": 2, "client_ids": 1, "created": 2}
    assert s["created_in_first_data_batch"] == 1 and s["created_after_first_data_batch"] == 1


def test_no_records_no_summary_and_no_data_batch():
    assert consumer_summary([], PROGRESS) == {}
    s = consumer_summary(CONNECTIONS[2:4], [batch(0, 2.0, 4.0, 0)])
    assert s["first_data_batch"] is None and s["created_after_first_data_batch"] == 0


def test_report_section_lists_the_batches_that_connected():
    text = "\n".join(consumers_section(consumer_summary(CONNECTIONS, PROGRESS)))
    assert "6 executor consumers created (8 connections, 4 distinct client.ids)" in text
    assert "**4 after it** (in 2 of the later batches)" in text
    assert "| 1 | 500 | 4 | 2 | 2 |" in text and "| outside any batch | - | 1 | 1 | 1 |" in text
    assert "1 other batches opened no executor connection." in text
    assert consumers_section({}) == []
