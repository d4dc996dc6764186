"""A user-style foreachBatch job that collects each micro-batch to the driver (`batch_df.collect()`, as jobs that
write to a database row by row or through `toPandas()` do), so the driver's heap it needs grows with the batch:
the query whose first batch after an outage runs out of memory (fink-broker#819, hudi#4713), again at every
restart, since the restarted query re-runs the same planned batch (harness.faults.outage, scenario outage-oom).

Why it carries a payload: the harness's normalised events drop the record's value (harness.spark.events), so a
job that collected only them would hold ~100 bytes per event whatever the producers sent. A real job collects the
value it writes; here each row carries `payload`, a string as long as the record's encoded value (`bytes`), so
the heap a batch takes is what collecting the real records would take (`payload = false`: the ids only).

The sink: one Parquet file per batch id in the run's sink directory, written to a temporary name and renamed, a
batch id already there skipped: exactly-once by batch id although foreachBatch is at-least-once (a batch re-run
after a restart is written once). Its oracle is `events` (every acked event exactly once), and each row keeps
its batch id and the time its file was committed (`commit_ms`), so the checker measures latency from it.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

COLUMNS = ("producer", "seq", "intended_ms", "partition", "offset")
PARAMS = ("payload",)


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        return f"{unknown} not known to collect_to_driver; allowed: {', '.join(PARAMS)}"
    if not isinstance(params.get("payload", True), bool):
        return f"payload = {params['payload']!r}: true or false"
    return None


def query(events, params):
    from pyspark.sql import functions as F

    columns = [F.col(c) for c in COLUMNS]
    if params.get("payload", True):  # the record's value, as many bytes as it had (module docstring)
        columns.append(F.expr("repeat('x', bytes)").alias("payload"))
    return events.select(*columns)


def batch_file(sink_dir: str | Path, batch_id: int) -> Path:
    return Path(sink_dir) / f"batch-{batch_id:09d}.parquet"


def write(batch_df, batch_id: int, sink_dir: str, params: dict) -> None:
    """Collect the batch to the driver (the heap it needs grows with the batch), then write its ids once."""
    import pandas as pd

    target = batch_file(sink_dir, batch_id)
    rows = batch_df.collect()  # the whole micro-batch in the driver: where the out-of-memory happens
    if target.exists():  # written before a restart: exactly-once by batch id
        return
    frame = pd.DataFrame([tuple(r[c] for c in COLUMNS) for r in rows], columns=list(COLUMNS))
    del rows
    frame["batch_id"] = batch_id
    frame["commit_ms"] = time.time() * 1000.0  # visible once the rename below is done
    tmp = target.with_suffix(".tmp")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, target)


def read(sink_dir: str, params: dict):
    """Every row downstream sees, with its batch id and commit time."""
    import pandas as pd

    files = sorted(Path(sink_dir).glob("batch-*.parquet"))
    if not files:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in (*COLUMNS, "batch_id")}).assign(
            commit_ms=pd.Series(dtype="float64"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


query.oracle = "events"
query.check = check
query.foreach_batch = write
query.read_sink = read
