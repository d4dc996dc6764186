"""The Spark query under test, run as its own process (its own driver JVM) so faults can kill it like production.

Started by `harness.spark.process.SparkQueryProcess` with a job file; runs until told to drain (the runner writes
`control/drain.json` with the end offsets the producers left) and the committed progress has reached them, or
until told to stop. Every StreamingQueryProgress is appended to progress.jsonl as it happens.

Exit codes: 0 drained, 3 drain deadline passed, 4 the query failed (its exception is in status.json).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

EXIT_DRAINED, EXIT_DRAIN_TIMEOUT, EXIT_QUERY_FAILED = 0, 3, 4


def _write_status(path: Path, **fields) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(fields, at=time.time())))
    os.replace(tmp, path)


def build_session(job: dict):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(job["master"]).appName(job["app_name"])
    for key, value in job["conf"].items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def project(df, backend: str):
    """The default query: parse the harness's event payload and keep what the checker needs."""
    from pyspark.sql import functions as F

    parsed = F.from_json(F.col("value").cast("string"), "p INT, s LONG, t DOUBLE")
    if backend == "kafka":
        return df.select(
            parsed.alias("e"), F.col("partition"), F.col("offset"), F.col("timestamp"),
            F.length("value").alias("bytes"),
        ).select(
            F.col("e.p").alias("producer"), F.col("e.s").alias("seq"), F.col("e.t").alias("intended_ms"),
            "partition", "offset", (F.col("timestamp").cast("double") * 1000).alias("broker_ms"), "bytes",
            (F.unix_micros(F.current_timestamp()) / 1000).alias("batch_ms"),
        )
    raise ValueError(f"unknown backend {backend!r}")


def _reached(progress: dict | None, targets: dict[str, dict[str, int]]) -> bool:
    if not progress:
        return False
    ends: dict[str, dict[str, int]] = {}
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict):
            for stream, parts in end.items():
                if isinstance(parts, dict):
                    ends.setdefault(stream, {}).update({str(k): int(v) for k, v in parts.items()})
    return all(ends.get(stream, {}).get(str(p), -1) >= int(off)
               for stream, parts in targets.items() for p, off in parts.items())


def run(job_path: Path) -> int:
    job = json.loads(job_path.read_text())
    run_dir = Path(job["run_dir"])
    status = run_dir / "spark" / "status.json"
    control = run_dir / "control"
    progress_path = run_dir / "progress.jsonl"

    spark = build_session(job)
    spark.sparkContext.setLogLevel(job.get("log_level", "WARN"))

    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressRecorder(StreamingQueryListener):
        def __init__(self):
            self.out = open(progress_path, "a", encoding="utf-8")
            self.last_batch = -1

        def caught_up(self, progress: dict | None) -> bool:
            """Listener events are asynchronous: stop only once the last batch's progress is on disk."""
            return progress is None or self.last_batch >= progress.get("batchId", -1)

        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            self.out.write(event.progress.json.replace("\n", " ") + "\n")
            self.out.flush()
            self.last_batch = max(self.last_batch, event.progress.batchId)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            self.out.flush()

    recorder = ProgressRecorder()
    spark.streams.addListener(recorder)
    try:
        return _run_query(spark, job, status, control, recorder)
    finally:
        spark.streams.removeListener(recorder)
        spark.stop()


def _run_query(spark, job: dict, status: Path, control: Path, recorder) -> int:
    df = spark.readStream.format(job["format"]).options(**job["options"]).load()
    out = project(df, job["backend"])
    writer = (out.writeStream.format(job["sink"]).outputMode(job["output_mode"]).queryName(job["query_name"])
              .option("checkpointLocation", job["checkpoint"]).option("path", job["sink_path"]))
    trigger = job["trigger"]
    if trigger["kind"] == "processingTime":
        writer = writer.trigger(processingTime=trigger["interval"])
    elif trigger["kind"] == "availableNow":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(once=True)
    query = writer.start()
    _write_status(status, state="started", id=str(query.id), run_id=str(query.runId), pid=os.getpid())

    drain_deadline = None
    while True:
        if query.exception() is not None or not query.isActive:
            exc = query.exception()
            if exc is None:  # once / availableNow finished on their own
                _write_status(status, state="finished", id=str(query.id))
                return EXIT_DRAINED
            _write_status(status, state="failed", error=str(exc)[:20000])
            return EXIT_QUERY_FAILED
        if (control / "stop").exists():
            query.stop()
            _write_status(status, state="stopped")
            return EXIT_DRAINED
        drain = control / "drain.json"
        if drain.exists():
            spec = json.loads(drain.read_text())
            if drain_deadline is None:
                drain_deadline = time.monotonic() + float(spec["timeout_s"])
            last = query.lastProgress
            if _reached(last, spec["end_offsets"]) and recorder.caught_up(last):
                query.stop()
                _write_status(status, state="drained")
                return EXIT_DRAINED
            if time.monotonic() > drain_deadline:
                query.stop()
                _write_status(status, state="drain_timeout", last_progress=query.lastProgress)
                return EXIT_DRAIN_TIMEOUT
        time.sleep(0.25)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
