"""`harness bench checker`: the checker end to end on synthetic histories of growing size, against the pandas
engine it replaced, side by side in one run.

Each size is a real run directory's worth of history: producers' Arrow IPC ack files (`acks-<n>.arrows`, as the
producers write them), and a Parquet file sink with its `_spark_metadata` log (files' commit times set), with
losses, duplicates and failed sends planted at known places. Each engine runs in a subprocess of its own, from
reading the files to the verdict with its latency summary, so its peak RSS (getrusage of that process) is its own;
the counts it reports are checked against what was planted. The pandas engine (harness/bench/reference_checker.py,
today's checker before DuckDB) runs at the sizes it can afford. Synthetic data goes under a temporary directory
(`HARNESS_BENCH_TMP` to move it) and is deleted after each size.

The soak's live checks use the same engine incrementally (harness.soak.live): `live` feeds it a soak's traffic
(LIVE_EPS for LIVE_STEP_S between evaluations, as `check_every_s` does) and times each evaluation (new history
and sink in, `reconcile(settled_before_ms=...)` out) as the history grows: the engine must keep up, far inside the
interval, at any length of soak, or the live checks would need an engine of their own.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from harness.files import atomic
from harness.bench import row
from harness.records.history import ACK_SCHEMA

PRODUCERS = 4
PARTITIONS = 16
RATE_EPS = 50_000  # synthetic traffic: events per second of intended time
SINK_BATCH_S = 10  # one sink batch (one commit) per this much intended time
CHUNK = 1 << 20  # events generated at a time (bounded memory)
LOST_EVERY, DUP_EVERY, FAILED_EVERY = 100_003, 49_999, 200_003  # planted defects (event index multiples)
T0_MS = 1_700_000_000_000.0
GOAL_EPS = 1_000_000
REFERENCE_SIZES = (1_000_000,)
MEMORY_LIMIT, MEMORY_LIMIT_MB = "1GB", 1024
RSS_SLACK_MB = 512  # beyond DuckDB's memory_limit: the interpreter, pyarrow, DuckDB's catalog and result buffers
GROWTH_FROM, GROWTH_GOAL = 10_000_000, 1.2  # peak RSS from 10M events to the largest size: flat
LIVE_EPS, LIVE_STEP_S, LIVE_SETTLE_S = 5_000, 30.0, 120.0  # a soak's traffic, check_every_s and settle_s
LIVE_GOAL_S = LIVE_STEP_S / 10  # an evaluation may take a tenth of the interval between two


def planted(n: int) -> dict:
    """What the generator plants in n events, for the engines' counts to be checked against (a chunk at a time:
    the bench's own memory stays small beside what it measures)."""
    failed = lost = dup = 0
    for lo in range(0, n, CHUNK):
        idx = np.arange(lo, min(lo + CHUNK, n), dtype=np.int64)
        f = idx % FAILED_EVERY == FAILED_EVERY - 1
        m = (idx % LOST_EVERY == LOST_EVERY - 1) & ~f
        failed, lost = failed + int(f.sum()), lost + int(m.sum())
        dup += int(((idx % DUP_EVERY == DUP_EVERY - 1) & ~f & ~m).sum())
    return {"produced": n, "failed": failed, "lost": lost, "duplicates": dup, "delivered_unique": n - failed - lost}


def generate(directory: Path, n: int) -> None:
    """n events of PRODUCERS producers over PARTITIONS partitions at RATE_EPS, their acks in Arrow IPC streams
    and their sink rows in Parquet files, one sink batch per SINK_BATCH_S seconds, each file's rows in partition
    and offset order as Spark writes them, its log entry's mtime the batch's commit time."""
    producers, sink, meta = directory / "producers", directory / "sink", directory / "sink" / "_spark_metadata"
    for d in (producers, meta):
        d.mkdir(parents=True, exist_ok=True)
    writers = [ipc.new_stream(str(producers / f"acks-{p}.arrows"), ACK_SCHEMA) for p in range(PRODUCERS)]
    per_batch = RATE_EPS * SINK_BATCH_S
    rng = np.random.default_rng(1)
    try:
        for batch_id, lo in enumerate(range(0, n, per_batch)):
            hi = min(lo + per_batch, n)
            for c_lo in range(lo, hi, CHUNK):
                _ack_chunk(writers, rng, c_lo, min(c_lo + CHUNK, hi))
            commit_ms = _sink_batch(sink, batch_id, lo, hi, rng)
            entry = meta / str(batch_id)
            entry.write_text("v1\n" + json.dumps({"path": f"file://{sink / f'part-{batch_id:06d}.parquet'}",
                                                  "size": 0, "isDir": False, "modificationTime": 0,
                                                  "blockReplication": 1, "blockSize": 0, "action": "add"}) + "\n")
            os.utime(entry, (commit_ms / 1000.0, commit_ms / 1000.0))
    finally:
        for w in writers:
            w.close()


def _events(lo: int, hi: int) -> dict[str, np.ndarray]:
    idx = np.arange(lo, hi, dtype=np.int64)
    producer = (idx % PRODUCERS).astype(np.int32)
    partition = ((idx * 2654435761) % PARTITIONS).astype(np.int32)  # keyed: spread over partitions
    offset = _offsets(idx)
    return {"idx": idx, "producer": producer, "seq": idx // PRODUCERS, "partition": partition, "offset": offset,
            "intended_ms": T0_MS + idx * (1000.0 / RATE_EPS)}


def _offsets(idx: np.ndarray) -> np.ndarray:
    """Offset of each event in its partition: the events before it in that partition. An odd multiplier modulo
    a power of two maps every PARTITIONS consecutive indices onto all partitions once."""
    return idx // PARTITIONS


def _ack_chunk(writers, rng, lo: int, hi: int) -> None:
    e = _events(lo, hi)
    n = hi - lo
    latency_us = rng.integers(500, 20_000, n)
    ack_ms = e["intended_ms"] + rng.uniform(0.5, 3.0, n) + latency_us / 1000.0
    failed = e["idx"] % FAILED_EVERY == FAILED_EVERY - 1
    error = np.where(failed, "_MSG_TIMED_OUT", "")
    offset = np.where(failed, -1, e["offset"])
    for p, w in enumerate(writers):
        m = e["producer"] == p
        w.write_batch(pa.record_batch([
            pa.array(e["producer"][m]), pa.array(e["seq"][m]), pa.array(e["partition"][m]), pa.array(offset[m]),
            pa.array(e["intended_ms"][m]), pa.array(ack_ms[m]), pa.array(latency_us[m]), pa.array(error[m])],
            schema=ACK_SCHEMA))


def _sink_batch(sink: Path, batch_id: int, lo: int, hi: int, rng) -> float:
    e = _events(lo, hi)
    failed = e["idx"] % FAILED_EVERY == FAILED_EVERY - 1
    lost = (e["idx"] % LOST_EVERY == LOST_EVERY - 1) & ~failed
    keep = ~failed & ~lost
    dup = (e["idx"] % DUP_EVERY == DUP_EVERY - 1) & keep
    cols = {k: np.concatenate([e[k][keep], e[k][dup]]) for k in ("producer", "seq", "partition", "offset",
                                                                   "intended_ms")}
    order = np.lexsort((cols["offset"], cols["partition"]))
    pq.write_table(pa.table({
        "producer": pa.array(cols["producer"][order]), "seq": pa.array(cols["seq"][order]),
        "intended_ms": pa.array(cols["intended_ms"][order]), "partition": pa.array(cols["partition"][order]),
        "offset": pa.array(cols["offset"][order])}), sink / f"part-{batch_id:06d}.parquet",
        compression="snappy")
    return float(e["intended_ms"][-1]) + 1500.0 + float(rng.uniform(0, 500))


# --------------------------------------------------------------------------------------------- the engines
def check_new(directory: str) -> dict:
    """The checker as a run uses it (harness.reconcile.Reconciler): history and sink files in, verdict and
    latency summary out."""
    from harness.reconcile import Reconciler
    from harness.records.history import ack_batches

    d = Path(directory)
    t = time.perf_counter()
    with Reconciler(d / "state", memory_limit=MEMORY_LIMIT) as checker:
        checker.add_acks(ack_batches(d / "producers"))
        checker.add_sink(d / "sink")
        rec = checker.reconcile(measured_from_ms=T0_MS + 1000.0, t0=T0_MS / 1000.0)
        p99 = rec.latency.latency.percentiles()["p99"]
    return {"seconds": time.perf_counter() - t, "counts": rec.counts(), "p99": p99}


def check_old(directory: str) -> dict:
    """The pandas engine it replaced, on the same files (harness.bench.reference_checker)."""
    from harness.bench import reference_checker as ref
    from harness.records.history import load_acks
    from harness.records.placements import apply_placements, load_placements
    from harness.sinks.parquet.files import read_sink

    d = Path(directory)
    t = time.perf_counter()
    acks = apply_placements(load_acks(d / "producers"), load_placements(d / "placements"))
    rec = ref.reconcile(acks, read_sink(d / "sink"))
    measured = rec.delivered_intended_ms >= T0_MS + 1000.0
    p99 = ref.percentiles_ms(rec.latency_ms[measured])["p99"]
    return {"seconds": time.perf_counter() - t, "counts": rec.counts(), "p99": p99}



def measure_live(steps: int) -> dict:
    """Seconds per live evaluation as a soak's history grows by LIVE_EPS x LIVE_STEP_S events a step; the engine's
    counts checked against the truth (nothing lost, no duplicate; one step's events pending at every look)."""
    import pandas as pd

    from harness.reconcile import Expectations, Reconciler

    rng = np.random.default_rng(7)
    n, seconds, total, sink = int(LIVE_EPS * LIVE_STEP_S), [], 0, None
    with Reconciler() as engine:
        for step in range(steps):
            seq = np.arange(total, total + n, dtype=np.int64)
            t0 = T0_MS + step * LIVE_STEP_S * 1000.0
            intended = t0 + np.sort(rng.uniform(0, LIVE_STEP_S * 1000.0, n))
            part = (seq % PARTITIONS).astype(np.int32)
            off = seq // PARTITIONS
            acks = pa.record_batch({"producer": pa.array(np.zeros(n, np.int32)), "seq": pa.array(seq),
                                    "partition": pa.array(part), "offset": pa.array(off),
                                    "intended_ms": pa.array(intended), "ack_ms": pa.array(intended + 5.0),
                                    "latency_us": pa.array(np.full(n, 5000, np.int64)),
                                    "error": pa.array([""] * n)}, schema=ACK_SCHEMA)
            t = time.perf_counter()
            engine.add_acks([acks])
            if sink is not None:  # the sink is a step behind: the last step's events are in flight at every look
                engine.store.add_sink_frame(sink)
            rec = engine.reconcile(Expectations(), settled_before_ms=t0 + LIVE_STEP_S * 1000.0 - LIVE_SETTLE_S * 1000,
                                   latency=False)
            seconds.append(time.perf_counter() - t)
            sink = pd.DataFrame({"producer": 0, "seq": seq, "partition": part, "offset": off,
                                 "intended_ms": intended, "commit_ms": intended + 1500.0})
            total += n
            if rec.lost or rec.duplicates or rec.delivered_unique != total - n:
                raise RuntimeError(f"live step {step}: lost {rec.lost}, duplicates {rec.duplicates}, delivered "
                                   f"{rec.delivered_unique} of {total - n}")
    return {"steps": steps, "events": total, "seconds": seconds, "worst_s": max(seconds),
            "last_s": seconds[-1], "mean_s": sum(seconds) / len(seconds)}


def peak_rss_mb() -> float:
    """This process's own peak RSS: VmHWM, the high-water mark of its address space, which exec starts afresh.
    Not getrusage's ru_maxrss: Linux carries the parent's high-water mark over the vfork and exec that
    subprocess uses, so a child measured that way reported the bench's own peak (2 GB, generating 100M events)
    rather than the checker's."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource  # elsewhere (no procfs): an upper bound

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _child(engine: str, directory: str) -> None:
    out = (check_new if engine == "new" else check_old)(directory)
    out["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(out))


def _measure(engine: str, directory: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "harness.bench.checker", engine, str(directory)],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"the {engine} checker failed on {directory}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------- the bench
def run_bench(json_path: str | None = None, quick: bool = False) -> dict:
    sizes = [1_000_000] if quick else [1_000_000, 10_000_000, 100_000_000]
    root = Path(tempfile.mkdtemp(prefix="bench-checker-", dir=os.environ.get("HARNESS_BENCH_TMP")))
    details: dict = {"sizes": {}, "memory_limit": MEMORY_LIMIT, "producers": PRODUCERS, "partitions": PARTITIONS}
    rows: list[dict] = []
    try:
        for n in sizes:
            directory = root / f"n{n}"
            t = time.perf_counter()
            generate(directory, n)
            size = {"generate_s": round(time.perf_counter() - t, 1), "disk_mb": round(_du(directory) / 2**20),
                    "planted": planted(n)}
            size["new"] = _measure("new", directory)
            if n in REFERENCE_SIZES:
                size["old"] = _measure("old", directory)
            shutil.rmtree(directory, ignore_errors=True)
            details["sizes"][str(n)] = size
            _verify(size)
        details["live"] = live = measure_live(8 if quick else 60)
        rows = _rows(details["sizes"]) + [row(
            f"soak live evaluation, worst of {live['steps']} ({live['events'] / 1e6:g}M events, "
            f"{LIVE_EPS:,}/s, every {LIVE_STEP_S:g} s)", live["worst_s"], "s",
            goal=f"<= {LIVE_GOAL_S:g} s (a tenth of the interval)", ok=live["worst_s"] <= LIVE_GOAL_S)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out = {"rows": rows, **details}
    if json_path:
        atomic.write_json(json_path, out)
    return out


def _verify(size: dict) -> None:
    """Both engines must find exactly what was planted: a fast wrong checker is no result."""
    want = size["planted"]
    for engine in ("new", "old"):
        if engine in size:
            counts = size[engine]["counts"]
            got = {k: counts[k] for k in want}
            if got != want:
                raise RuntimeError(f"the {engine} checker counted {got}, the history holds {want}")
    if "old" in size and size["old"]["counts"] != size["new"]["counts"]:
        raise RuntimeError(f"the engines disagree: {size['new']['counts']} vs {size['old']['counts']}")


def _rows(sizes: dict) -> list[dict]:
    """Events/s per size (goal: GOAL_EPS) and peak RSS per size (goal: within a bound that does not depend on the
    size, DuckDB's memory_limit plus RSS_SLACK_MB for Python, Arrow and DuckDB's own state: 1.5 GB) and its growth from
    10M events to the largest size (flat: _growth), the pandas engine at the size it ran as the reference."""
    ref_n = next((n for n in sizes if "old" in sizes[n]), None)
    ref = sizes[ref_n]["old"] if ref_n else None
    ref_name = f"pandas checker ({int(ref_n) / 1e6:g}M)" if ref else None
    bound = MEMORY_LIMIT_MB + RSS_SLACK_MB
    out = []
    for n, size in sizes.items():
        eps = int(n) / size["new"]["seconds"]
        out.append(row(f"checker events/s ({int(n) / 1e6:g}M events)", eps, "events/s",
                       reference=int(ref_n) / ref["seconds"] if ref else None, reference_name=ref_name,
                       goal=f">= {GOAL_EPS:,}", ok=eps >= GOAL_EPS))
    for n, size in sizes.items():
        rss = size["new"]["peak_rss_mb"]
        out.append(row(f"checker peak RSS ({int(n) / 1e6:g}M events)", rss, "MB",
                       reference=ref["peak_rss_mb"] if ref else None, reference_name=ref_name,
                       goal=f"<= {bound:,} MB (1.5 GB) at any size", ok=rss <= bound))
    grown = _growth(sizes)
    if grown is not None:
        (lo, lo_rss), (hi, hi_rss) = grown
        ratio = hi_rss / lo_rss
        out.append(row(f"checker peak RSS growth ({lo / 1e6:g}M -> {hi / 1e6:g}M events)", hi_rss, "MB",
                       reference=lo_rss, reference_name=f"peak RSS at {lo / 1e6:g}M", ratio=ratio,
                       goal=f"flat: ratio <= {GROWTH_GOAL:g} for {hi // lo}x the events", ok=ratio <= GROWTH_GOAL))
    return out


def _growth(sizes: dict) -> tuple[tuple[int, float], tuple[int, float]] | None:
    """(size, peak RSS) at the smallest size of at least GROWTH_FROM events and at the largest, when they differ:
    memory bounded by a key range, not by the history, stays flat between them (a 1M history is below the
    engine's fixed costs, so it says nothing about the slope). None in quick mode (one size)."""
    ns = sorted(int(n) for n in sizes)
    lo = next((n for n in ns if n >= GROWTH_FROM), None)
    if lo is None or lo == ns[-1]:
        return None
    return (lo, sizes[str(lo)]["new"]["peak_rss_mb"]), (ns[-1], sizes[str(ns[-1])]["new"]["peak_rss_mb"])


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
