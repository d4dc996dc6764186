"""The Event Hubs emulator's Kafka connection records (services/eventhubs/kafka-connections.jsonl, rows as
harness.emulator.kafka.server writes them: no role) read as the proxy's are: roles from the client.id, consumer
creations per batch. Expected values are counted by hand from the rows below."""
import json

from harness.analysis.consumers import connections_file, consumer_summary, read_connections
from harness.reports.consumers import consumers_section

EXEC = "consumer-spark-kafka-source-0f1e-123-executor-1"


def row(t, conn, client_id, correlation_id):
    return {"t": t, "conn": conn, "listener": "kafka_tls", "client_id": client_id, "api_key": 18,
            "api_version": 3, "correlation_id": correlation_id}


ROWS = [row(100.0, 1, "adminclient-1", 0), row(100.1, 2, "adminclient-1", 3),          # the driver's admin
        row(100.5, 3, "rdkafka", 0),                                                     # a producer
        row(101.0, 4, EXEC, 0), row(101.1, 5, EXEC, 2),                                  # bootstrap + broker 0
        row(111.0, 6, EXEC, 0)]                                                          # created again, batch 1
PROGRESS = [{"batchId": 0, "timestamp": "1970-01-01T00:01:40.900Z", "numInputRows": 10,
             "durationMs": {"triggerExecution": 1000}},
            {"batchId": 1, "timestamp": "1970-01-01T00:01:50.900Z", "numInputRows": 10,
             "durationMs": {"triggerExecution": 1000}}]


def write(run_dir, rel, rows):
    path = run_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_emulator_rows_get_roles_and_count_like_the_proxys(tmp_path):
    write(tmp_path, "services/eventhubs/kafka-connections.jsonl", ROWS)
    assert str(connections_file(tmp_path)) == "services/eventhubs/kafka-connections.jsonl"
    rows = read_connections(tmp_path)
    assert [r["role"] for r in rows] == ["driver", "driver", "other", "executor", "executor", "executor"]
    summary = consumer_summary(rows, PROGRESS)
    assert (summary["created"], summary["connections"], summary["client_ids"]) == (2, 3, 1)
    assert summary["created_in_first_data_batch"] == 1 and summary["created_after_first_data_batch"] == 1
    assert summary["all_roles"]["driver"] == {"connections": 2, "created": 1}
    assert summary["all_roles"]["other"] == {"connections": 1, "created": 1}


def test_the_proxys_records_win_and_none_means_no_records(tmp_path):
    assert connections_file(tmp_path) is None and read_connections(tmp_path) is None
    write(tmp_path, "services/eventhubs/kafka-connections.jsonl", ROWS)
    write(tmp_path, "services/proxy/connections.jsonl", [{**ROWS[3], "role": "executor"}])
    assert str(connections_file(tmp_path)) == "services/proxy/connections.jsonl"
    assert len(read_connections(tmp_path)) == 1


def test_report_names_the_records_and_says_unknown_not_zero():
    summary = consumer_summary([{**r, "role": role} for r, role in zip(ROWS, ["driver"] * 2 + ["other"]
                                                                         + ["executor"] * 3)], PROGRESS)
    text = "\n".join(consumers_section({**summary, "records": "services/eventhubs/kafka-connections.jsonl"}))
    assert "the Event Hubs emulator's Kafka connection records" in text and "2 executor consumers created" in text
    unknown = "\n".join(consumers_section({"created": None, "unknown": "Kafka consumers created: unknown (x)"}))
    assert "unknown" in unknown and " 0 " not in unknown
