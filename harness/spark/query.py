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

from harness.spark.checkpoint import committed

EXIT_DRAINED, EXIT_DRAIN_TIMEOUT, EXIT_QUERY_FAILED = 0, 3, 4


def _write_status(path: Path, **fields) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(fields, at=time.time()), default=str))  # lastProgress holds UUIDs
    os.replace(tmp, path)


def build_session(job: dict):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(job["master"]).appName(job["app_name"])
    for key, value in job["conf"].items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def end_offsets(progress: dict | None) -> dict[str, dict[str, int]]:
    """{stream: {partition: offset}} a progress record's sources ended at."""
    ends: dict[str, dict[str, int]] = {}
    for source in (progress or {}).get("sources", []):
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
    return ends


def reached(ends: dict[str, dict[str, int]], targets: dict[str, dict[str, int]]) -> bool:
    return all(ends.get(stream, {}).get(str(p), -1) >= int(off)
               for stream, parts in targets.items() for p, off in parts.items())


def error_text(exc, query=None) -> str:
    """The query's exception as text, led by the Spark error conditions of its JVM cause chain, deepest first
    ('[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may ...'): the Kafka source's exceptions carry their
    condition but leave it out of their message, and PySpark shows only the message."""
    conditions: list[str] = []
    try:  # PySpark keeps no JVM object for the query's exception: take it from the query itself
        cause = query._jsq.exception().get() if query is not None else getattr(exc, "_origin", None)
    except Exception:  # noqa: BLE001
        cause = None
    for _ in range(20):
        if cause is None:
            break
        try:
            condition = cause.getCondition()
        except Exception:  # noqa: BLE001 - not a SparkThrowable (or the JVM is gone)
            condition = None
        if condition and condition not in conditions:
            conditions.append(condition)
        try:
            cause = cause.getCause()
        except Exception:  # noqa: BLE001
            break
    text = str(exc)
    return "".join(f"[{c}] " for c in reversed(conditions) if f"[{c}]" not in text) + text


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
            self.idle = False  # onQueryIdle came after the last progress
            # where each partition's last batch ended, starting where the checkpoint's last commit ended (a
            # restarted query may have nothing left to read)
            self.ends: dict[str, dict[str, int]] = committed(Path(job["checkpoint"]))

        def caught_up(self, progress: dict | None) -> bool:
            """Listener events are asynchronous: stop only once the last batch's progress is on disk. A query idle
            for a while reports a no-data lastProgress for the next batch id, which listeners never get as progress
            (onQueryIdle instead): that one has nothing to wait for."""
            return (progress is None or self.last_batch >= progress.get("batchId", -1)
                    or (self.idle and not progress.get("numInputRows")))

        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            self.out.write(event.progress.json.replace("\n", " ") + "\n")
            self.out.flush()
            self.last_batch = max(self.last_batch, event.progress.batchId)
            self.idle = False
            for stream, parts in end_offsets(json.loads(event.progress.json)).items():
                mine = self.ends.setdefault(stream, {})
                for p, off in parts.items():
                    mine[p] = off  # where the last batch ended: a recreated topic restarts its offsets

        def onQueryIdle(self, event):
            self.idle = True

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
    from harness.queries import resolve
    from harness.spark.events import load

    for path in job.get("data_sources", []):
        spark.dataSource.register(load(path))
    df = spark.readStream.format(job["format"]).options(**job["options"]).load()
    out = resolve(job["query"]).function(load(job["normalise"])(df), dict(job.get("query_params") or {}))
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
    settled = False  # the batches owed after the last data (processAllAvailable) have run
    drain = control / "drain.json"
    while True:
        if query.exception() is not None or not query.isActive:
            exc = query.exception()
            if exc is None:  # once / availableNow finished on their own: did they read up to the target?
                for _ in range(40):  # the listener is asynchronous: let the last progress arrive
                    if recorder.caught_up(query.lastProgress):
                        break
                    time.sleep(0.25)
                target = json.loads(drain.read_text())["end_offsets"] if drain.exists() else {}
                state = "drained" if reached(recorder.ends, target) else "finished"
                _write_status(status, state=state, id=str(query.id), ends=recorder.ends)
                return EXIT_DRAINED
            _write_status(status, state="failed", error=error_text(exc, query)[:20000])
            return EXIT_QUERY_FAILED
        if (control / "stop").exists():
            query.stop()
            _write_status(status, state="stopped")
            return EXIT_DRAINED
        if drain.exists():
            spec = json.loads(drain.read_text())
            if drain_deadline is None:
                drain_deadline = time.monotonic() + float(spec["timeout_s"])
            last = query.lastProgress
            if reached(recorder.ends, spec["end_offsets"]) and recorder.caught_up(last):
                if not settled:
                    # everything is read; a stateful query may still owe a batch without new data (its watermark
                    # moved: windows to close, state to evict). Let it run, and its progress be recorded.
                    settled = True
                    try:
                        query.processAllAvailable()
                    except Exception:  # noqa: BLE001 - the query failed: the first branch records it
                        pass
                    continue
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
