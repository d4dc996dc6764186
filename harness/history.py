"""The producers' history on disk: one ack row per event handed to a client (Jepsen's history, the checker's
only source of truth about what was sent).

Columnar, written in bulk: each producer process appends Arrow record batches to an Arrow IPC *stream* file
(`acks-<process>.arrows`), one batch per flush, so per-event Python work stays out of the producer's hot path and
the checker reads columns without parsing. A producer killed mid-write leaves at most a torn last batch; readers
take every complete batch before it, never a partial row. Run directories written before this format hold
`acks-<process>.csv` (same columns); the readers here accept both.

Columns: `error` is empty for an acked event, else the error's class; `partition`/`offset` are -1 where the
client reported none (Event Hubs sends report no offset; round-robin sends no partition); `latency_us` is the
client's produce-call-to-report time, so the produce call happened at `ack_ms - latency_us / 1000`.
"""
from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc

ACK_SCHEMA = pa.schema([
    ("producer", pa.int32()), ("seq", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("intended_ms", pa.float64()), ("ack_ms", pa.float64()), ("latency_us", pa.int64()), ("error", pa.string()),
])
ACK_COLUMNS = tuple(ACK_SCHEMA.names)
ACK_GLOB, LEGACY_GLOB = "acks-*.arrows", "acks-*.csv"


def ack_files(producer_dir: Path) -> list[Path]:
    producer_dir = Path(producer_dir)
    return sorted(producer_dir.glob(ACK_GLOB)) + sorted(producer_dir.glob(LEGACY_GLOB))


def _stream_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Every complete batch of one IPC stream file; a torn tail (a killed writer) ends the file quietly."""
    try:
        source = pa.memory_map(str(path), "r")
        reader = ipc.open_stream(source)
    except (pa.ArrowInvalid, OSError):
        return  # empty or torn before the schema: no complete batch
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, OSError):
            return
        yield batch.cast(ACK_SCHEMA) if batch.schema != ACK_SCHEMA else batch


def _csv_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """A legacy CSV ack log up to its last full line (a torn last row is never a lie)."""
    data = path.read_bytes()
    data = data[: data.rfind(b"\n") + 1]
    if data.count(b"\n") < 2:
        return
    table = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
        column_types=ACK_SCHEMA, strings_can_be_null=False, quoted_strings_can_be_null=False))
    yield from table.select(ACK_COLUMNS).cast(ACK_SCHEMA).to_batches()


def ack_batches(producer_dir: Path) -> Iterator[pa.RecordBatch]:
    """The whole history as record batches with ACK_SCHEMA, file by file (bounded memory)."""
    for path in ack_files(producer_dir):
        yield from (_stream_batches(path) if path.suffix == ".arrows" else _csv_batches(path))


def load_acks(producer_dir: Path) -> pd.DataFrame:
    """The history as one pandas frame (small runs, reports, tests), with `produce_ms` derived."""
    table = pa.Table.from_batches(list(ack_batches(producer_dir)), schema=ACK_SCHEMA)
    acks = table.to_pandas()
    acks["error"] = acks["error"].astype("string")
    acks["produce_ms"] = acks["ack_ms"] - acks["latency_us"] / 1000.0
    return acks
