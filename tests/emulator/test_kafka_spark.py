"""Spark's own Kafka source and sink (the Java client, through `format("kafka")`) against the emulator's Kafka
endpoint, with the options Microsoft's Spark tutorial ("event-hubs-kafka-spark-tutorial") gives:
`kafka.bootstrap.servers`, `kafka.security.protocol`, `kafka.sasl.mechanism` PLAIN and `kafka.sasl.jaas.config`
with user `$ConnectionString` and the connection string as the password.

Spark's driver asks its admin client for topic descriptions and offsets, its executors fetch; the sink produces.
Expected values come from the other real clients: what librdkafka's delivery reports and the SDK's sends put
where, and what librdkafka and the SDK read of what Spark wrote. Slow (a Spark session): `make test-slow`.
"""

from __future__ import annotations

import json

import pytest
from azure.eventhub import EventData

from emulator_helpers import collect, consumer, producer
from kafka_helpers import consume_assigned, produce

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(scope="module")
def kemu():
    hubs = tuple(HubConfig(n, c, ("$Default",)) for n, c in (("sp-read", 3), ("sp-stream", 2), ("sp-write", 2)))
    server = EmulatorServer(EmulatorConfig(hubs=hubs), tls_port=None, ws_port=None, wss_port=None, kafka_port=0,
                            kafka_tls_port=None).start()
    yield server
    server.stop()


def _options(kemu, topic: str) -> dict:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="$ConnectionString" '
            f'password="{kemu.connection_string()}";')
    return {"kafka.bootstrap.servers": f"127.0.0.1:{kemu.kafka_port}", "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": jaas, "subscribe": topic}


def test_batch_read_sees_kafka_and_amqp_events_at_their_positions(kemu, harness_spark_session):
    records = [dict(value=b"k%d" % i, key=b"key%d" % i, partition=i % 3, headers=[("h", b"%d" % i)])
               for i in range(30)]
    sent = produce(kemu, "sp-read", records)
    headers_sent = {r["value"]: r["headers"] for r in records}  # delivery reports carry no headers
    assert sent.errors() == []
    with producer(kemu, "sp-read") as p:
        p.send_batch([EventData(b"amqp-%d" % i) for i in range(5)], partition_id="1")
    amqp = [e for e in collect(consumer(kemu, "sp-read"), 35, starting_position="-1")
            if e.body_as_str().startswith("amqp-")]
    assert len(amqp) == 5
    df = (harness_spark_session.read.format("kafka").options(**_options(kemu, "sp-read"))
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").option("includeHeaders", "true")
          .load())
    rows = {(r.partition, r.offset): r for r in df.collect()}
    assert len(rows) == 35
    for d in sent:
        r = rows[(d[1], d[2])]
        assert (bytes(r.key), bytes(r.value), r.topic) == (d[3], d[4], "sp-read")
        assert [(h.key, bytes(h.value)) for h in r.headers] == headers_sent[d[4]]
    for e in amqp:
        assert bytes(rows[(1, e.sequence_number)].value) == e.body_as_str().encode()


def test_streaming_read_with_available_now(kemu, harness_spark_session, tmp_path):
    sent = produce(kemu, "sp-stream", [dict(value=b"s%d" % i, partition=i % 2) for i in range(40)])
    assert sent.errors() == []
    q = (harness_spark_session.readStream.format("kafka").options(**_options(kemu, "sp-stream"))
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "15").load()
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("memory").queryName("sp_stream").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        q.awaitTermination(180)
        assert q.exception() is None
        batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    finally:
        q.stop()
    rows = {(r.partition, r.offset): r.value for r in harness_spark_session.table("sp_stream").collect()}
    assert rows == {(d[1], d[2]): d[4].decode() for d in sent}
    assert len(batches) >= 3 and max(b["numInputRows"] for b in batches) <= 15  # maxOffsetsPerTrigger honoured
    end = batches[-1]["sources"][0]["endOffset"]
    end = (json.loads(end) if isinstance(end, str) else end)["sp-stream"]  # Spark gives the offsets as JSON
    assert {int(p): o for p, o in end.items()} == {p: max(d[2] for d in sent if d[1] == p) + 1 for p in (0, 1)}


def test_kafka_sink_writes_what_librdkafka_and_the_sdk_read(kemu, harness_spark_session):
    from pyspark.sql import Row

    rows = [Row(key=f"wk{i}", value=f"written by spark {i}", partition=i % 2) for i in range(20)]
    (harness_spark_session.createDataFrame(rows)
     .selectExpr("CAST(key AS BINARY) AS key", "CAST(value AS BINARY) AS value", "CAST(partition AS INT) AS partition",
                 "array(named_struct('key', 'origin', 'value', CAST('spark' AS BINARY))) AS headers")
     .write.format("kafka").options(**{k: v for k, v in _options(kemu, "sp-write").items() if k != "subscribe"})
     .option("topic", "sp-write").save())
    got = consume_assigned(kemu, "sp-write", {0: 0, 1: 0}, 20)
    assert sorted((m.partition(), m.key().decode(), m.value().decode()) for m in got) == \
        sorted((r.partition, r.key, r.value) for r in rows)
    assert {tuple(m.headers()) for m in got} == {(("origin", b"spark"),)}
    events = collect(consumer(kemu, "sp-write"), 20, starting_position="-1")
    assert sorted(e.body_as_str() for e in events) == sorted(r.value for r in rows)
    assert {e.properties[b"origin"] for e in events} == {b"spark"}
