"""The Kafka sink's output topic, read completely into the run directory once the query has stopped, and read
back from there by the checker (as harness.sinks.parquet.files reads the file sink).

A run directory judges its own files (`harness check DIR` on a copy, long after the broker is gone), so the run
reads the output topic to its end offsets while the broker still runs and writes what it read to
`sink/kafka-output.parquet` (atomically, once), with `sink/kafka-output.json` beside it: the topic, the start and
end offsets read up to, the record count and the timestamp type the records carried. Each row is one record: the
columns of the query's output row as the value's JSON carried them (for an events query: `producer`, `seq`,
`intended_ms`, the event's INPUT `partition` and `offset`, ...), then the record's own position
(`out_partition`, `out_offset`) and `commit_ms`, the broker's append time (the topic is created with
`message.timestamp.type=LogAppendTime`): when the record became visible downstream, per record, to the
millisecond. The checker takes that as the end of each event's end-to-end latency.
"""
from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, TopicPartition

from harness.files import atomic
from harness.backends.kafka.admin import client_config

OUTPUT_FILE, META_FILE = "kafka-output.parquet", "kafka-output.json"
CHUNK = 100_000  # records parsed and written at a time: memory bounded by a chunk, not the topic
IDLE_TIMEOUT_S = 60.0  # no record for this long while some partition is short of its end: the read fails


def record_output(backend, topic: str, sink_dir: Path) -> dict:
    """Read `topic` from its start to its end offsets (taken now: the query has stopped writing) into
    `sink_dir`/kafka-output.parquet; returns what kafka-output.json says."""
    sink_dir.mkdir(parents=True, exist_ok=True)
    ends = backend.end_offsets(topic)
    starts = backend.start_offsets(topic)
    consumer = Consumer({**backend_client(backend), "group.id": "harness-sink-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": False})
    tmp = sink_dir / f".{OUTPUT_FILE}.tmp"
    writer: pq.ParquetWriter | None = None
    schema: pa.Schema | None = None
    count, log_append = 0, 0
    try:
        wanted = {p: (starts.get(p, 0), end) for p, end in ends.items() if end > starts.get(p, 0)}
        consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in wanted.items()])
        remaining = set(wanted)
        chunk: dict[str, list] = {"value": [], "out_partition": [], "out_offset": [], "commit_ms": []}
        last = time.monotonic()
        while remaining:
            messages = consumer.consume(10_000, timeout=1.0)
            if not messages and time.monotonic() - last > IDLE_TIMEOUT_S:
                raise RuntimeError(f"reading the output topic {topic}: nothing arrived for {IDLE_TIMEOUT_S:g}s with "
                                   f"partitions {sorted(remaining)} short of their end offsets {ends}")
            for m in messages:
                if m.error():
                    raise KafkaException(m.error())
                p, o = m.partition(), m.offset()
                if p not in remaining or o >= wanted[p][1]:
                    continue
                last = time.monotonic()
                kind, stamp = m.timestamp()
                log_append += kind == TIMESTAMP_LOG_APPEND_TIME
                chunk["value"].append(m.value() or b"{}")
                chunk["out_partition"].append(p)
                chunk["out_offset"].append(o)
                chunk["commit_ms"].append(float(stamp))
                if o >= wanted[p][1] - 1:
                    remaining.discard(p)
            if len(chunk["value"]) >= CHUNK or (not remaining and chunk["value"]):
                table = _parse(chunk, schema)
                schema = table.schema
                if writer is None:
                    writer = pq.ParquetWriter(str(tmp), schema)
                writer.write_table(table)
                count += table.num_rows
                chunk = {k: [] for k in chunk}
        if writer is None:  # an empty topic: an empty file with the position columns
            writer = pq.ParquetWriter(str(tmp), _parse({k: [] for k in chunk}, None).schema)
        writer.close()
        writer = None
        os.replace(tmp, sink_dir / OUTPUT_FILE)
    finally:
        consumer.close()
        if writer is not None:
            writer.close()
        tmp.unlink(missing_ok=True)
    meta = {"topic": topic, "start_offsets": {str(p): o for p, o in starts.items()},
            "end_offsets": {str(p): o for p, o in ends.items()}, "records": count,
            "timestamp_type": "LogAppendTime" if log_append == count else
            f"CreateTime for {count - log_append} of {count} records (commit_ms is then the producer's clock)",
            "read_at": time.time()}
    atomic.write_json(sink_dir / META_FILE, meta)
    return meta


def backend_client(backend) -> dict:
    """The run's client settings for a consumer of this process (the backend's, with their secrets' values)."""
    return client_config(backend.bootstrap, backend.client_security())


def _parse(chunk: dict[str, list], schema: pa.Schema | None) -> pa.Table:
    """The values' JSON as columns (the first chunk's types for every later chunk), then the record's position."""
    positions = pa.table({"out_partition": pa.array(chunk["out_partition"], pa.int32()),
                          "out_offset": pa.array(chunk["out_offset"], pa.int64()),
                          "commit_ms": pa.array(chunk["commit_ms"], pa.float64())})
    if not chunk["value"]:
        values = pa.table({}) if schema is None else schema.empty_table().drop_columns(
            [c for c in positions.column_names if c in schema.names])
        if values.num_columns == 0:
            return positions
        return pa.Table.from_arrays([*values.columns, *positions.columns],
                                    names=[*values.column_names, *positions.column_names])
    explicit = None if schema is None else pa.schema([f for f in schema if f.name not in positions.column_names])
    values = pj.read_json(io.BytesIO(b"\n".join(chunk["value"]) + b"\n"), parse_options=pj.ParseOptions(
        explicit_schema=explicit, unexpected_field_behavior="ignore" if explicit is not None else "infer"))
    return pa.Table.from_arrays([*values.columns, *positions.columns],
                                names=[*values.column_names, *positions.column_names])


def read_output(sink_dir: Path) -> pd.DataFrame:
    """What the run read from the output topic, one row per record, in the order of the records' append time."""
    path = sink_dir / OUTPUT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the run reads the Kafka sink's output topic into it when the "
                                "query has stopped (a run stopped before that has none)")
    frame = pq.read_table(path).to_pandas()
    return frame.sort_values(["commit_ms", "out_partition", "out_offset"], kind="stable").reset_index(drop=True)
