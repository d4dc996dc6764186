"""series.json: the run's figures over time, condensed once when the run is judged.

The report draws its time charts from this file, not from the raw ack logs, sink and event log, so rebuilding
the report of a long run takes a second. Every time is seconds since the traffic started (`t0`, epoch s), so
runs line up when compared. Per second: events produced (the producers' own count) and scheduled, events made
visible by the sink (commit time), and the latency of the events sent in that second. Also: the latency
distribution (percentile curve) of the measured window, lag per partition per sample, and the scan tasks.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.records.histsummary import Hist, LatencySummary, grouped_percentile
from harness.analysis.lag import lag_by_partition
from harness.analysis.resources import MB, cpu_intervals, disk_series, role_rss

# the percentile curve's levels: dense where tails live
LEVELS = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0)
SCHEMA = 1


class Produced(BaseModel):
    """What the producers sent, one row a second of their own count (columns of equal length)."""
    t: list[float] = Field(description="The second's start, seconds since t0.")
    sent: list[int] = Field(description="Events the producers sent in that second (their own count).")
    scheduled: list[float | None] = Field(description="Events the rate schedule asked for in that second; null "
                                                      "where the producers did not say.")
    failed: list[int] = Field(description="Sends that failed in that second (a delivery error, or refused).")


class Delivered(BaseModel):
    """The checker's view, per whole second since t0: latency of the events intended in that second (as
    HdrHistogram reports it, 3 significant digits) and events the sink made visible (commit time) in a second."""
    t: list[int] = Field(description="Seconds since t0 the events were intended in (the latency columns' axis).")
    latency_p50: list[float] = Field(description="Median end-to-end latency, ms, of the events intended then.")
    latency_p99: list[float] = Field(description="99th percentile end-to-end latency, ms.")
    latency_max: list[float] = Field(description="Largest end-to-end latency, ms.")
    visible_t: list[int] = Field(description="Seconds since t0 in which the sink committed events (the next "
                                             "column's axis; seconds without a commit are left out).")
    visible: list[int] = Field(description="Events the sink made visible in that second.")


class LagMatrix(BaseModel):
    """Lag per partition (rows) per sample (columns)."""
    t: list[float] = Field(description="Each sample's time, seconds since t0.")
    partitions: list[str] = Field(description="The partitions, the rows of `lag`, in numeric order.")
    lag: list[list[int]] = Field(description="Events behind the end of the partition, a row a partition, a column "
                                             "a sample.")


class Tasks(BaseModel):
    """The source's scan tasks that finished, one column each (equal length, a task an index)."""
    batch: list[int] = Field(description="The micro-batch the task belonged to.")
    executor: list[str] = Field(description="Where it ran: `driver` in local mode, else the executor's id.")
    partition: list[int | None] = Field(description="The stream partition it read; null when unknown.")
    launch_s: list[float] = Field(description="When it started, seconds since t0.")
    duration_ms: list[int] = Field(description="How long it ran, ms.")
    locality: list[str] = Field(description="Spark's locality level for it (PROCESS_LOCAL, NODE_LOCAL, ANY, ...).")
    records: list[int] = Field(description="Records it read.")


class RoleMemory(BaseModel):
    """One role's processes' resident memory summed, at each resource sample where the role had a process."""
    t: list[float] = Field(description="The sample's time, seconds since t0.")
    mb: list[float] = Field(description="RSS of the role's processes summed, MB (10^6 bytes).")


class CpuSteps(BaseModel):
    """CPU cores each role used between consecutive resource samples (CPU time over wall time), a step each."""
    t: list[float] = Field(description="Each interval's start, seconds since t0.")
    cores: dict[str, list[float]] = Field(description="Per role, the cores it used in each interval.")


class Resources(BaseModel):
    """The run's processes over time, per role (harness.samplers.resources' samples)."""
    rss: dict[str, RoleMemory] = Field(description="Resident memory per role.")
    cpu: CpuSteps = Field(description="CPU per role.")


class Disk(BaseModel):
    """The run directory's allocated bytes (what du counts) at each sample that walked it."""
    t: list[float] = Field(description="The sample's time, seconds since t0.")
    mb: list[float] = Field(description="The whole run directory, MB.")
    by_dir_mb: dict[str, list[float]] = Field(description="Per top-level entry (sink, checkpoint, services, ...), "
                                                          "MB at each sample (0 where it did not exist yet).")


class Series(BaseModel):
    """series.json: what the reports draw over time, condensed once when the run is judged. A run whose series
    could not be built has only `error`. (Every key may be absent, none is null: the file describes, the
    reports read what is there.)"""
    model_config = ConfigDict(populate_by_name=True)

    schema_version: int = Field(None, alias="schema", description="This file's layout version (SCHEMA).")
    t0: float = Field(None, description="When the traffic started, epoch seconds: every time here is seconds "
                                        "since it.")
    warmup_s: float = Field(None, description="The warm-up, seconds since t0: figures before it are kept out of "
                                              "latency and throughput.")
    produced: Produced = Field(None, description="The producers per second.")
    delivered: Delivered = Field(None, description="Latency and visibility per second.")
    percentiles: list[tuple[float, float]] = Field(
        None, description="The measured window's latency distribution: [percentile, ms] at fixed levels.")
    lag: LagMatrix = Field(None, description="Lag per partition over time.")
    tasks: Tasks = Field(None, description="The scan tasks.")
    resources: Resources = Field(None, description="Memory and CPU of the run's processes per role over time.")
    disk: Disk = Field(None, description="The run directory's size over time.")
    error: str = Field(None, description="Why the series could not be built (the run's verdict does not stand "
                                         "on them).")


def per_second_summary(per_second: dict) -> dict[str, list]:
    """p50 / p99 / max latency of the events intended in each whole second since t0, as HdrHistogram reports them
    (3 significant digits), from the checker's per-second buckets (harness.records.histsummary), and how many events
    were made visible (sink commit time) in each second."""
    if not per_second or not len(per_second["n"]):
        return {"t": [], "latency_p50": [], "latency_p99": [], "latency_max": [], "visible_t": [], "visible": []}
    s, b, n = (np.asarray(per_second[k], dtype=np.int64) for k in ("s", "bucket_us", "n"))
    t, p50 = grouped_percentile(s, b, n, 50.0)
    out = {"t": t.tolist(), "latency_p50": _round(p50 / 1000.0),
           "latency_p99": _round(grouped_percentile(s, b, n, 99.0)[1] / 1000.0),
           "latency_max": _round(grouped_percentile(s, b, n, 100.0)[1] / 1000.0)}
    return {**out, "visible_t": np.asarray(per_second["visible_s"]).tolist(),
            "visible": np.asarray(per_second["visible_n"]).tolist()}


def dense_seconds(seconds: list[int], counts: list[int]) -> tuple[list[int], list[int]]:
    """Per-second counts with the seconds that had none filled in as 0 (a sink commits once a batch: most seconds
    make nothing visible, and a line must not carry the last commit's count across them)."""
    if not seconds:
        return [], []
    at = dict(zip(seconds, counts))
    span = list(range(min(seconds), max(seconds) + 2))  # one 0 after the last commit ends its step
    return span, [at.get(t, 0) for t in span]


def percentile_curve_summary(hist: Hist) -> list[list[float]]:
    """The latency distribution at LEVELS: the value at each level as HdrHistogram reports it."""
    if not hist.total:
        return []
    return [[level, round(hist.value_at_ms(level), 2)] for level in LEVELS]


def produced_per_second(per_second: list[dict], t0: float) -> dict[str, list]:
    """The producers' per-second rows (sent, scheduled, failed), on the run's time axis."""
    rows = [r for r in per_second if "t" in r]
    return {"t": [round(r["t"] - t0, 3) for r in rows], "sent": [r.get("sent", 0) for r in rows],
            "scheduled": [round(r["expected"], 1) if r.get("expected") is not None else None for r in rows],
            "failed": [r.get("failed", 0) for r in rows]}


def lag_matrix(samples: list[dict], progress: list[dict], t0: float) -> dict[str, Any]:
    """Lag per partition (rows) per sample (columns)."""
    series = lag_by_partition(samples, progress)
    parts = sorted({p for _, lags in series for p in lags}, key=lambda p: (len(p), p))
    return {"t": [round(t - t0, 3) for t, _ in series], "partitions": parts,
            "lag": [[lags.get(p, 0) for _, lags in series] for p in parts]}


def task_rows(tasks: Iterable[dict], t0: float) -> dict[str, Any]:
    """The scan tasks, one column each: batch, executor, partition (None unknown), launch (s), duration (ms),
    locality, records read."""
    done = [t for t in tasks if not t.get("failed")]
    return {"batch": [t["batch"] for t in done], "executor": [t["executor"] for t in done],
            "partition": [t["partition"] for t in done],
            "launch_s": [round(t["launch_ms"] / 1000.0 - t0, 3) for t in done],
            "duration_ms": [t["finish_ms"] - t["launch_ms"] for t in done],
            "locality": [t["locality"] for t in done], "records": [t["records_read"] for t in done]}


def build_series(*, t0: float, warmup_s: float, latency: LatencySummary, per_second: list[dict],
                 progress: list[dict], lag_samples: list[dict], tasks: list[dict],
                 resource_samples: list[dict] = ()) -> dict[str, Any]:
    """`latency`: the checker's summary with t0's per-second buckets (Reconciler.reconcile(t0=...));
    `resource_samples`: harness.samplers.resources' samples (resources.jsonl)."""
    out = {"schema": SCHEMA, "t0": t0, "warmup_s": warmup_s,
           "produced": produced_per_second(per_second, t0),
           "delivered": per_second_summary(latency.per_second),
           "percentiles": percentile_curve_summary(latency.latency),
           "lag": lag_matrix(lag_samples, progress, t0),
           "tasks": task_rows(tasks, t0)}
    if resource_samples:
        base = t0 or min(x["t"] for x in resource_samples)  # no traffic: the samples' own start
        out["resources"] = resource_series(resource_samples, base)
        disk = disk_rows(resource_samples, base)
        if disk["t"]:
            out["disk"] = disk
    return out


def resource_series(samples: list[dict], t0: float) -> dict[str, Any]:
    """RSS per role at each sample, and the CPU cores per role between samples (harness.analysis.resources)."""
    rss = {role: {"t": [round(t - t0, 3) for t, _ in rows], "mb": [round(v / MB, 3) for _, v in rows]}
           for role, rows in role_rss(samples).items()}
    steps = cpu_intervals(samples)
    return {"rss": rss, "cpu": {"t": [round(start - t0, 3) for start, _, _ in steps],
                                "cores": {role: [round(cores.get(role, 0.0), 4) for _, _, cores in steps]
                                          for role in rss}}}


def disk_rows(samples: list[dict], t0: float) -> dict[str, Any]:
    rows = disk_series(samples)
    dirs = sorted({d for _, x in rows for d in x.get("by_dir") or {}})
    return {"t": [round(t - t0, 3) for t, _ in rows], "mb": [round(x["bytes"] / MB, 3) for _, x in rows],
            "by_dir_mb": {d: [round((x.get("by_dir") or {}).get(d, 0) / MB, 3) for _, x in rows] for d in dirs}}


def _round(values) -> list[float]:
    return [round(float(v), 2) for v in values]
