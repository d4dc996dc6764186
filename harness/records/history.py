"""The producers' history on disk: one ack row per event handed to a client (Jepsen's history, the checker's
only source of truth about what was sent).

Columnar, written in bulk: each producer process appends Arrow record batches to an Arrow IPC *stream* file
(`acks-<process>.arrows`), one batch per flush, so per-event Python work stays out of the producer's hot path and
the checker reads columns without parsing. A producer killed mid-write leaves at most a torn last batch; readers
take every complete batch before it, never a partial row. Run directories written before this format hold
`acks-<process>.csv` (same columns); the readers here accept both.

Writing: `AckWriter(path, producer)` takes whole columns per delivery batch (numpy arrays, or scalars that
apply to the whole batch), buffers them and writes one record batch per flush: at least every `flush_s` (the
producer's service loop calls `maybe_flush`) and at close. A killed producer loses at most its unflushed tail.

Columns: `error` is empty for an acked event, else the error's class; `partition`/`offset` are -1 where the
client reported none (Event Hubs sends report no offset; round-robin sends no partition); `latency_us` is the
client's produce-call-to-report time, so the produce call happened at `ack_ms - latency_us / 1000`.
"""
from __future__ import annotations

import io
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc

if TYPE_CHECKING:  # a producer process imports this module: pandas would add ~0.6 s to its start
    import pandas as pd

ACK_SCHEMA = pa.schema([
    ("producer", pa.int32()), ("seq", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("intended_ms", pa.float64()), ("ack_ms", pa.float64()), ("latency_us", pa.int64()), ("error", pa.string()),
])
ACK_COLUMNS = tuple(ACK_SCHEMA.names)
ACK_GLOB, LEGACY_GLOB = "acks-*.arrows", "acks-*.csv"


_NUMERIC = (("seq", np.int64), ("partition", np.int32), ("offset", np.int64), ("intended_ms", np.float64),
            ("ack_ms", np.float64), ("latency_us", np.int64))


class AckWriter:
    """One producer process's history (`acks-<process>.arrows`), written in bulk.

    `append` takes a delivery batch as columns; nothing is formatted per event. Rows are buffered and written as
    one Arrow record batch per flush (`maybe_flush` at least every `flush_s`, `flush`, `close`), each batch
    followed by a flush of the file, so a reader (or a killed writer) sees whole batches only."""

    def __init__(self, path: Path, producer: int, flush_s: float = 1.0):
        self.path = Path(path)
        self.producer = int(producer)
        self.flush_s = float(flush_s)
        self.rows_written = 0
        self._file = open(self.path, "wb")
        self._writer = ipc.new_stream(self._file, ACK_SCHEMA)
        self._file.flush()
        # Rows wait in one growing array per column, copied in as they come: a flush costs the same whatever the
        # number of appends (a producer appends every few milliseconds; a Python step per append at flush time
        # was tens of milliseconds of stall once a second).
        self._columns = [np.empty(1024, dtype=dtype) for _, dtype in _NUMERIC]
        self._errors: list[tuple[int, int, str | Sequence]] = []  # (first row, rows, error) where not acked
        self._buffered = 0
        self._flushed_at = time.monotonic()

    def append(self, seq, partition, offset, intended_ms, ack_ms, latency_us, error: str | Sequence | None = None) -> None:
        """One delivery batch. `seq`, `intended_ms` and `latency_us` have a value per event; `partition`,
        `offset`, `ack_ms` and `error` are each either that or one value for the whole batch. `error` None or ""
        means acked; a string is every event's error class; a sequence gives each event's ("" or None: acked)."""
        n = len(seq)
        if not n:
            return
        columns = []
        for value, (name, dtype) in zip((seq, partition, offset, intended_ms, ack_ms, latency_us), _NUMERIC):
            column = np.asarray(value, dtype=dtype)
            if column.ndim > 1 or (column.ndim == 1 and len(column) != n):
                raise ValueError(f"{name}: {column.shape} values for {n} events")
            columns.append(column)
        if not (error is None or isinstance(error, str)) and len(error) != n:
            raise ValueError(f"error: {len(error)} values for {n} events")
        at, end = self._buffered, self._buffered + n
        if end > len(self._columns[0]):
            size = max(end, 2 * len(self._columns[0]))
            grown = [np.empty(size, dtype=c.dtype) for c in self._columns]
            for old, new in zip(self._columns, grown):
                new[:at] = old[:at]
            self._columns = grown
        for buffer, column in zip(self._columns, columns):
            buffer[at:end] = column  # a scalar fills the batch's rows
        if error:
            self._errors.append((at, n, error))
        self._buffered = end
        self.maybe_flush()

    def maybe_flush(self) -> None:
        if self._buffered and time.monotonic() - self._flushed_at >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        self._flushed_at = time.monotonic()
        if not self._buffered:
            return
        n, errors = self._buffered, self._errors
        self._buffered, self._errors = 0, []
        # views of the buffers: the batch is serialised into the file before anything overwrites them
        columns = [_numeric_array(np.full(n, self.producer, dtype=np.int32))]
        columns += [_numeric_array(buffer[:n]) for buffer in self._columns]
        columns.append(_errors(errors, n))
        self._writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=ACK_SCHEMA))
        self._file.flush()
        self.rows_written += n

    def close(self) -> None:
        self.flush()
        self._writer.close()
        self._file.close()


def _numeric_array(column: np.ndarray) -> pa.Array:
    """A numpy column as an Arrow array over the same buffer. Not `pa.array`: its first call imports pandas
    (pyarrow looks for a pandas Series), which stalled a producer for a second or more at its first flush, in the
    middle of its traffic."""
    column = np.ascontiguousarray(column)
    return pa.Array.from_buffers(pa.from_numpy_dtype(column.dtype), len(column), [None, pa.py_buffer(column)])


def _string_array(offsets: np.ndarray, data: bytes) -> pa.Array:
    return pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))


def _errors(errors: list[tuple], n: int) -> pa.Array:
    """The error column: all empty (the usual case) without a Python object per row; else each event's class
    ("" where acked), built from its bytes and offsets (no `pa.array`, see `_numeric_array`)."""
    if not errors:
        return _string_array(np.zeros(n + 1, dtype=np.int32), b"")
    names: list[bytes] = [b""] * n
    for at, count, error in errors:
        if isinstance(error, str):
            names[at : at + count] = [error.encode()] * count
        else:
            names[at : at + count] = [(e or "").encode() for e in error]
    lengths = np.fromiter(map(len, names), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return _string_array(offsets, b"".join(names))


def ack_files(producer_dir: Path) -> list[Path]:
    producer_dir = Path(producer_dir)
    return sorted(producer_dir.glob(ACK_GLOB)) + sorted(producer_dir.glob(LEGACY_GLOB))


def _stream_batches(path: Path, mapped: bool = True) -> Iterator[pa.RecordBatch]:
    """Every complete batch of one IPC stream file; a torn tail (a killed writer) ends the file quietly. Mapped:
    batches skipped cost nothing, but every page read stays in the process's RSS until the file is done."""
    try:
        source = pa.memory_map(str(path), "r") if mapped else pa.OSFile(str(path), "r")
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


def complete_lines(path: Path) -> bytes:
    """A CSV file up to its last full line: a process killed mid-write leaves a torn last row, never a lie."""
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def _csv_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """A legacy CSV ack log (header and rows) up to its last full line."""
    data = complete_lines(path)
    if data.count(b"\n") < 2:
        return
    table = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
        column_types=ACK_SCHEMA, strings_can_be_null=False, quoted_strings_can_be_null=False))
    yield from table.select(ACK_COLUMNS).cast(ACK_SCHEMA).to_batches()


def file_batches(path: Path, mapped: bool = True) -> Iterator[pa.RecordBatch]:
    """One history file's complete batches, whichever its format (a file still being appended to reads up to its
    last complete batch)."""
    return _stream_batches(path, mapped) if path.suffix == ".arrows" else _csv_batches(path)


def ack_batches(producer_dir: Path) -> Iterator[pa.RecordBatch]:
    """The whole history as record batches with ACK_SCHEMA, file by file (bounded memory: read, not mapped, so a
    file of a long run's history never sits in RSS whole)."""
    for path in ack_files(producer_dir):
        yield from file_batches(path, mapped=False)


def load_acks(producer_dir: Path) -> pd.DataFrame:
    """The history as one pandas frame (small runs, reports, tests), with `produce_ms` derived."""
    table = pa.Table.from_batches(list(ack_batches(producer_dir)), schema=ACK_SCHEMA)
    acks = table.to_pandas()
    acks["error"] = acks["error"].astype("string")
    acks["produce_ms"] = acks["ack_ms"] - acks["latency_us"] / 1000.0
    return acks


def torn_tail(path: Path) -> dict | None:
    """What the readers above leave out of one history file, said rather than skipped silently (result.json
    `unreadable`): a torn last batch of an IPC stream or a torn last CSV row (a producer killed mid-write).
    {"file", "count" (1), "detail"}, or None when the file reads to its end. Memory-mapped: batches are walked,
    not read, so a long run's history costs only its metadata pages."""
    path = Path(path)
    if path.suffix != ".arrows":
        data = path.read_bytes()
        torn = len(data) - (data.rfind(b"\n") + 1)
        return None if not torn else {"file": path.name, "count": 1, "detail": f"a torn last row ({torn} bytes "
                                      "after the last full line, as by a process stopped mid-write); left out"}
    batches = 0
    try:
        with pa.memory_map(str(path), "r") as source:
            if source.size() == 0:
                return None
            reader = ipc.open_stream(source)
            while True:
                try:
                    reader.read_next_batch()
                except StopIteration:
                    return None
                batches += 1
    except (pa.ArrowInvalid, OSError) as exc:
        return {"file": path.name, "count": 1,
                "detail": f"unreadable after {batches} complete batches ({type(exc).__name__}: {str(exc)[:200]}): "
                          "a torn last batch, as by a process stopped mid-write; its acks left out"}
