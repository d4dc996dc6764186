"""A user's foreachBatch job: each micro-batch upserted into a table keyed by event id (a SQLite database in the
run's sink directory), exactly-once by design although foreachBatch itself is at-least-once.

Spark hands a batch to foreachBatch and records it done (commits/<id> in the checkpoint) only after the function
returns. A driver that dies in between leaves the batch planned but uncommitted, and its successor hands the same
batch id with the same rows over again. The table is written in one transaction per batch that also records the
batch id (table `batches`); a batch id already there is skipped (its `redelivered` count goes up instead). Each
upsert of a row bumps its `version`, as a table with row versions or a change feed counts changes, so a batch
written twice shows as version 2: exactly-once means version 1 for every event.

Params:
- `skip_applied` (default true): skip a batch id the table already has. false is the same job without the check,
  the writer the oracle must catch under the same kills.

The scenario kills the driver with `driver_kill`'s `after_sink_write`: right after this writer returns for a
batch and before Spark commits it, the moment the batch-id check exists for.

The harness's contract for a query that owns its sink (harness.queries): `query.foreach_batch` writes, and
`query.read_sink` reads the table back for the oracle (upsert_oracle:each_event_once) and, with a commit time per
row, for the checker's end-to-end latency.
"""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pandas as pd

TABLE = "events.sqlite"
COLUMNS = ["producer", "seq", "intended_ms", "partition", "offset"]
SCHEMA = """
CREATE TABLE IF NOT EXISTS events (producer INTEGER NOT NULL, seq INTEGER NOT NULL, intended_ms REAL,
    partition INTEGER, "offset" INTEGER, batch_id INTEGER NOT NULL, committed_ms REAL NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (producer, seq));
CREATE TABLE IF NOT EXISTS batches (batch_id INTEGER PRIMARY KEY, rows INTEGER NOT NULL, committed_ms REAL NOT NULL,
    redelivered INTEGER NOT NULL DEFAULT 0);
"""
UPSERT = """INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (producer, seq) DO UPDATE SET
    version = version + 1, intended_ms = excluded.intended_ms, partition = excluded.partition,
    "offset" = excluded."offset", batch_id = excluded.batch_id, committed_ms = excluded.committed_ms"""
PARAMS = {"skip_applied": True}


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        return f"{unknown} not known to upsert_job; allowed: {', '.join(PARAMS)}"
    if not isinstance(params.get("skip_applied", True), bool):
        return f"skip_applied = {params['skip_applied']!r}: true or false"
    return None


def query(events, params):
    return events.select(*COLUMNS)


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=60, isolation_level=None)  # transactions are explicit below
    con.executescript(SCHEMA)
    return con


def apply_batch(path: Path, batch_id: int, rows: list[tuple], skip_applied: bool = True) -> str:
    """Upsert one batch's rows (producer, seq, intended_ms, partition, offset) and record its id, in one
    transaction: "applied", or "skipped" when the table already has this batch id and `skip_applied`."""
    con = _connect(path)
    try:
        con.execute("BEGIN IMMEDIATE")
        if skip_applied and con.execute("SELECT 1 FROM batches WHERE batch_id = ?", (batch_id,)).fetchone():
            con.execute("UPDATE batches SET redelivered = redelivered + 1 WHERE batch_id = ?", (batch_id,))
            con.execute("COMMIT")
            return "skipped"
        committed_ms = time.time() * 1000.0  # the rows become visible when this transaction commits, just below
        con.executemany(UPSERT, [(*row, batch_id, committed_ms) for row in rows])
        con.execute("""INSERT INTO batches VALUES (?, ?, ?, 0) ON CONFLICT (batch_id) DO UPDATE SET
            redelivered = redelivered + 1, rows = excluded.rows, committed_ms = excluded.committed_ms""",
                    (batch_id, len(rows), committed_ms))
        con.execute("COMMIT")
        return "applied"
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    finally:
        con.close()


def write_batch(batch_df, batch_id: int, sink_dir: str, params: dict) -> None:
    """foreachBatch's function (on the driver): the batch's rows collected, upserted by apply_batch."""
    rows = [tuple(r) for r in batch_df.select(*COLUMNS).collect()]
    apply_batch(Path(sink_dir) / TABLE, batch_id, rows, skip_applied=bool(params.get("skip_applied", True)))


def read_table(sink_dir, params: dict | None = None) -> pd.DataFrame:
    """The table as downstream sees it: one row per event id with its batch, commit time (`commit_ms`), version,
    and how often its batch was handed over again after it was written (`batch_redelivered`)."""
    path = Path(sink_dir) / TABLE
    if not path.exists():
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in
                             COLUMNS + ["batch_id", "commit_ms", "version", "batch_redelivered"]})
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return pd.read_sql_query("""SELECT e.producer, e.seq, e.intended_ms, e.partition, e."offset", e.batch_id,
                e.committed_ms AS commit_ms, e.version, b.redelivered AS batch_redelivered
            FROM events e LEFT JOIN batches b USING (batch_id) ORDER BY e.committed_ms""", con)
    finally:
        con.close()


query.oracle = "upsert_oracle:each_event_once"
query.check = check
query.foreach_batch = write_batch
query.read_sink = read_table
