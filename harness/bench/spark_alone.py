"""Spark alone: the floor under `harness bench startup`'s figures. A bare PySpark process, none of the harness's
driver machinery (no marks, listener, status, drain loop, source hand-over), reads a topic that already holds
events on a broker that is already up, through the same query, source options, sink and Spark settings (class
archive included) as the harness's own run; its time from launch to the end of its first data batch is what
Spark itself needs on this machine, before any harness could start anything beside it.

Run by the bench as `python -m harness.bench.spark_alone JOB LAUNCHED OUT` (JOB: the driver's job.json with the
source's keys in it; LAUNCHED: the epoch seconds the bench took just before starting this process); writes to
OUT, in seconds since LAUNCHED: session ready, query started, first data batch (its progress: start timestamp +
triggerExecution), and that batch's id, rows and durations.
"""
from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

from harness.queries import resolve
from harness.spark.events import load

TIMEOUT_S = 180.0


def main(job_path: str, launched: float) -> dict:
    from pyspark.sql import SparkSession

    job = json.loads(Path(job_path).read_text())
    builder = SparkSession.builder.master(job["master"]).appName("spark-alone")
    for key, value in job["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    session_ready = time.time()
    df = spark.readStream.format(job["format"]).options(**job["options"]).load()
    out = resolve(job["query"]).function(load(job["normalise"])(df), dict(job.get("query_params") or {}))
    query = (out.writeStream.format(job["sink"]).option("path", job["sink_path"])
             .option("checkpointLocation", job["checkpoint"])
             .trigger(processingTime=job["trigger"]["interval"]).start())
    query_started = time.time()
    deadline = time.monotonic() + TIMEOUT_S
    first = None
    while first is None and time.monotonic() < deadline:
        first = next((p for p in query.recentProgress if p["numInputRows"] > 0), None)
        time.sleep(0.02)
    query.stop()
    spark.stop()
    if first is None:
        raise TimeoutError(f"no data batch within {TIMEOUT_S:.0f} s of the query's start")
    end = (datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp()
           + first["durationMs"]["triggerExecution"] / 1000.0)
    return {"session_ready": session_ready - launched, "query_started": query_started - launched,
            "first_data_batch": end - launched, "batch_id": first["batchId"], "rows": first["numInputRows"],
            "durations_ms": first["durationMs"]}


if __name__ == "__main__":
    Path(sys.argv[3]).write_text(json.dumps(main(sys.argv[1], float(sys.argv[2]))))
