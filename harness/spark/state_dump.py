"""The query's final state read where it lives, the checkpoint, with Spark's own state data source: run as a small
PySpark process once the query has stopped (`python -m harness.spark.state_dump <checkpoint> <out_dir> [batch]`;
a batch given: the state that batch committed, read while the query runs on, as at a change: harness.faults.change).

Why a process of its own and files: reading state needs a Spark session (`format("state-metadata")` lists the
stateful operators and their batch range, `format("statestore")` reads an operator's store at a batch), and
the judge must not need one: `harness check` on a copied run directory re-judges from what this wrote. So every
state row is written as it was read, in `state/` of the run directory:
- `state/meta.json`: the batch read (the checkpoint's last commit), the watermark that batch evicted with (its
  offset log's `batchWatermarkMs`), the state-metadata rows, one entry per store read (its file, rows, columns)
  and how long the reading took; `error` when it failed (the check is then unknown, never passed);
- `state/<operator>-<store>.parquet`: one row per state row, `partition_id` plus each other column as JSON text
  (keys and values are structs whose shape depends on the operator: a window, a session, a list element).
A transformWithState operator is read one state variable at a time (`stateVarName`), its timers with
`readRegisteredTimers`; any other operator's `default` store as is.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness.files import atomic
from harness.jvm import cds
from harness.files.paths import pyspark_home
from harness.spark.checkpoint import batch_ids, offset_metadata
from harness.spark.query import _jvm_classpath, keep_class_archive

META = "meta.json"
CONF = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1", "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC", "spark.sql.adaptive.enabled": "false"}


def batch_watermark_ms(checkpoint: Path, batch: int) -> int | None:
    """The watermark batch `batch` ran (and evicted state) with, from its offset log entry's metadata line."""
    meta = offset_metadata(checkpoint, batch)
    try:
        return int(meta.get("batchWatermarkMs", 0)) if meta else None
    except (TypeError, ValueError):
        return None


def stores(metadata_rows: list[dict]) -> list[tuple[int, str, dict]]:
    """(operator id, store label, reader options) for every store worth reading."""
    out = []
    for row in metadata_rows:
        op = int(row["operatorId"])
        props = json.loads(row.get("operatorProperties") or "{}") if row.get("operatorProperties") else {}
        variables = props.get("stateVariables")
        if variables is not None:  # transformWithState: one column family per state variable, timers apart
            for var in variables:
                name = var["stateName"]
                if var.get("stateVariableType") == "TimerState":
                    out.append((op, "timers", {"operatorId": str(op), "readRegisteredTimers": "true"}))
                else:
                    out.append((op, name, {"operatorId": str(op), "stateVarName": name}))
        else:
            store = row.get("stateStoreName") or "default"
            out.append((op, store, {"operatorId": str(op), "storeName": store}))
    return out


def stores_on_disk(checkpoint: Path) -> list[dict]:
    """The state-metadata rows of a checkpoint that has no operator metadata (`state/<op>/_metadata`, which Spark
    3.5 does not write: a query run on that line, harness.spark.runtimes): one per operator directory, for its
    default store, or for each named store its partition directories hold (a stream-stream join's)."""
    state = checkpoint / "state"
    rows = []
    for op in sorted((p for p in state.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)) \
            if state.is_dir() else []:
        first = op / "0"
        named = sorted(d.name for d in first.iterdir() if d.is_dir() and d.name != "_metadata") \
            if first.is_dir() else []
        rows += [{"operatorId": int(op.name), "stateStoreName": name} for name in named or ["default"]]
    return rows


def dump(checkpoint: Path, out_dir: Path, batch: int | None = None) -> dict:
    """The state at `batch` (default: the checkpoint's last commit)."""
    from pyspark.sql import SparkSession, functions as F

    started = time.time()
    meta: dict = {"checkpoint": str(checkpoint), "stores": []}
    commits = batch_ids(checkpoint / "commits")
    if not commits:
        raise ValueError(f"{checkpoint}/commits is empty: no batch was committed, there is no state to read")
    if batch is not None and batch not in commits:
        raise ValueError(f"batch {batch} is not in {checkpoint}/commits: its state was never committed")
    batch = commits[-1] if batch is None else batch
    meta.update(batch_id=batch, batch_watermark_ms=batch_watermark_ms(checkpoint, batch))
    builder = SparkSession.builder.master("local[2]").appName("harness-state-reader")
    # its own class archive (harness.jvm.cds): the JVM's start is most of this phase's time
    java_options, archive_dump = cds.options("spark-state-reader", [f"{pyspark_home() / 'jars'}/*"])
    for k, v in {**CONF, "spark.driver.extraJavaOptions": " ".join(java_options)}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    meta["jvm_up_s"] = round(time.time() - started, 3)
    try:
        spark.sparkContext.setLogLevel("WARN")
        rows = [r.asDict() for r in spark.read.format("state-metadata").load(str(checkpoint)).collect()]
        if not rows and (rows := stores_on_disk(checkpoint)):  # written by Spark 3.5: no operator metadata
            meta["operators_from"] = "the checkpoint's state directories (no operator metadata)"
        meta["operators"] = rows
        meta["metadata_s"] = round(time.time() - started - meta["jvm_up_s"], 3)
        for op, label, options in stores(rows):
            t = time.time()
            frame = (spark.read.format("statestore").options(batchId=str(batch), **options)
                     .load(str(checkpoint)))
            cols = [F.col(c) if c == "partition_id" else F.to_json(F.struct(F.col(c))).alias(c)
                    for c in frame.columns]
            pdf = frame.select(*cols).toPandas()
            name = f"{op}-{label.replace('$', '').replace('/', '_')}.parquet"
            pdf.to_parquet(out_dir / name, index=False)
            meta["stores"].append({"operator": op, "store": label, "file": name, "rows": int(len(pdf)),
                                   "columns": list(frame.columns), "options": options,
                                   "took_s": round(time.time() - t, 3)})
    finally:
        classpath = _jvm_classpath(spark) if archive_dump is not None else None
        spark.stop()
    meta["took_s"] = round(time.time() - started, 3)
    if classpath is not None:  # once per Spark install and JDK: after the reading, not timed with it
        keep_class_archive(archive_dump, classpath)
    return meta


def main(argv: list[str]) -> int:
    """`<checkpoint> <out_dir> [batch]`"""
    checkpoint, out_dir = Path(argv[0]), Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        meta = dump(checkpoint, out_dir, int(argv[2]) if len(argv) > 2 else None)
    except Exception as exc:  # noqa: BLE001 - written down: the state check says unknown, and why
        atomic.write_json(out_dir / META, {"error": f"{type(exc).__name__}: {exc}"[:4000]})
        return 1
    atomic.write_json(out_dir / META, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
