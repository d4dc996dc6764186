"""Clock skew between producer machines and the run's reference clock (the host of the locust master, which is the
host of the runner and of the Spark driver: the sink's commit times are read on its clock).

Why: latency is the sink's commit time (reference clock) minus an event's intended send time (its producer's
clock). A producer machine whose clock runs 200 ms ahead makes every one of its events look 200 ms faster, and one
running a few seconds ahead makes latencies negative. So each producer measures its offset against the master,
NTP-style, over locust's own message channel: it stamps t0 (its clock), the master answers with its time tm, the
answer arrives at t1. The master stamped tm at some instant between t0 and t1, so the offset (producer minus
reference) lies in [t0 - tm, t1 - tm]: the midpoint, with the half round trip as the bound of its error. The
exchanges go to a sidecar next to the producer's ack log (`clock-<index>.jsonl`), at start and periodically.

`harness check` (and every judge) reads the sidecars: per machine the offset, its uncertainty and its drift over
the run. When an offset is beyond the threshold the machine's intended and ack times are corrected by it before
the checker sees them (result.json says so); a machine without measurements cannot be corrected, and its negative
latencies (counted from the sink, never clipped silently) mark latency as not judged.
"""
from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.records.history import ACK_SCHEMA, file_batches

CLOCK_GLOB = "clock-*.jsonl"
MACHINE_FILE = "machine.json"
DEFAULT_THRESHOLD_MS = 10.0  # below this a correction would move latencies by less than its own uncertainty here
TEST_OFFSET_ENV = "HARNESS_TEST_CLOCK_OFFSET_S"  # tests only: this process's wall clock shifted by this many seconds


def wall_clock():
    """time.time, shifted by HARNESS_TEST_CLOCK_OFFSET_S when a test sets it (a producer machine whose clock is
    off, without touching the machine's clock)."""
    shift = float(os.environ.get(TEST_OFFSET_ENV) or 0.0)
    if not shift:
        return time.time
    real = time.time
    return lambda: real() + shift


def machine_id(run_unique: str | None = None) -> str:
    """Host name plus a run-unique id: gathered producer directories never collide, even two workers per host."""
    host = "".join(c if c.isalnum() or c in "-." else "-" for c in socket.gethostname()) or "host"
    return f"{host}-{run_unique or uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------ the estimate
@dataclass
class Exchange:
    """One NTP-style exchange: t0 sent and t1 received on the producer's clock, tm the reference's answer (s)."""

    t0: float
    tm: float
    t1: float

    @property
    def rtt(self) -> float:
        return self.t1 - self.t0

    @property
    def offset(self) -> float:
        return (self.t0 + self.t1) / 2.0 - self.tm


@dataclass
class SkewEstimate:
    offset_ms: float | None  # producer clock minus reference clock
    uncertainty_ms: float | None  # the true offset is within offset ± this (half the round trip)
    samples: int
    drift_ms: float = 0.0  # last estimate minus first (each from the best exchange of its tenth of the samples)
    consistent: bool = True  # every exchange's interval contains the estimate (no drift, no asymmetric path)


def estimate(exchanges: list[Exchange]) -> SkewEstimate:
    """The offset from the exchange with the smallest round trip (its bound is the tightest); the bound is that
    half round trip. Drift: the best exchange of the first tenth against that of the last tenth."""
    good = [e for e in exchanges if e.rtt >= 0]
    if not good:
        return SkewEstimate(None, None, 0)
    best = min(good, key=lambda e: e.rtt)
    off, half = best.offset, best.rtt / 2.0
    tenth = max(1, len(good) // 10)
    first = min(good[:tenth], key=lambda e: e.rtt)
    last = min(good[-tenth:], key=lambda e: e.rtt)
    consistent = all(e.t0 - e.tm - 1e-6 <= off <= e.t1 - e.tm + 1e-6 for e in good)
    return SkewEstimate(off * 1000.0, half * 1000.0, len(good), (last.offset - first.offset) * 1000.0, consistent)


# ----------------------------------------------------------------------------------------- the producer's side
class ClockLog:
    """The producer's sidecar: one JSON line per exchange (`clock-<index>.jsonl`), flushed at once."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.exchanges: list[Exchange] = []

    def add(self, t0: float, tm: float, t1: float) -> None:
        self.exchanges.append(Exchange(t0, tm, t1))
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t0": t0, "tm": tm, "t1": t1}) + "\n")

    def offset_s(self) -> float:
        """The best estimate so far (0 before any exchange): what the producer uses to start on the master's time."""
        est = estimate(self.exchanges)
        return (est.offset_ms or 0.0) / 1000.0


def read_exchanges(path: Path) -> list[Exchange]:
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            out.append(Exchange(float(row["t0"]), float(row["tm"]), float(row["t1"])))
        except (ValueError, KeyError, TypeError):  # a torn last line of a killed producer
            continue
    return out


# ------------------------------------------------------------------------------------------- the checker's side
@dataclass
class MachineClock:
    machine: str
    directory: str  # relative to the producers' directory ("." for files at its top)
    producers: list[int]
    offset_ms: float | None
    uncertainty_ms: float | None
    samples: int
    drift_ms: float = 0.0
    consistent: bool = True
    corrected: bool = False
    negative_latencies: int = 0  # delivered events committed before their (uncorrected) intended time
    negative_after_correction: int = 0
    delivered: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ClockPlan:
    threshold_ms: float
    machines: list[MachineClock] = field(default_factory=list)

    def shift_ms(self) -> dict[int, float]:
        """Per producer index: what to subtract from its times (the offset of a corrected machine)."""
        return {p: m.offset_ms for m in self.machines if m.corrected and m.offset_ms for p in m.producers}

    @property
    def measured(self) -> bool:
        return any(m.samples for m in self.machines)


def _producer_index(path: Path) -> int | None:
    """A producer process's index from `acks-<index>.arrows`; None for other histories (a fault's own writes,
    `acks-fault-<k>.arrows`, whose rows carry producer indexes of their own and are on the run's clock)."""
    stem = path.name.split(".")[0]
    tail = stem.removeprefix("acks-")
    return int(tail) if tail.isdigit() else None


def plan(producer_dir: Path, threshold_ms: float = DEFAULT_THRESHOLD_MS) -> ClockPlan:
    """Every directory under producer_dir holding ack logs is a machine (its machine.json names it; the top
    directory is the runner's own host, offset 0 by definition unless it has sidecars). A machine is corrected when
    its offset exceeds the threshold and its own uncertainty."""
    producer_dir = Path(producer_dir)
    out = ClockPlan(threshold_ms)
    dirs = sorted({p.parent for p in producer_dir.rglob("acks-*.arrows")} |
                  {p.parent for p in producer_dir.rglob("acks-*.csv")})
    seen: dict[int, Path] = {}
    for d in dirs:
        producers = sorted({i for p in list(d.glob("acks-*.arrows")) + list(d.glob("acks-*.csv"))
                            if (i := _producer_index(p)) is not None})
        for i in producers:
            if i in seen:
                raise ValueError(f"producer {i} has ack logs in both {seen[i]} and {d}: two runs' producers "
                                 f"gathered into one directory (each locust worker index is one producer)")
            seen[i] = d
        name = d.name if d != producer_dir else "runner"
        meta = d / MACHINE_FILE
        if meta.is_file():
            try:
                name = json.loads(meta.read_text(encoding="utf-8")).get("machine", name)
            except ValueError:
                pass
        exchanges = [e for f in sorted(d.glob(CLOCK_GLOB)) for e in read_exchanges(f)]
        est = estimate(exchanges)
        if not exchanges and d == producer_dir:  # the runner's own processes: the reference clock itself
            est = SkewEstimate(0.0, 0.0, 0)
        m = MachineClock(name, str(d.relative_to(producer_dir)), producers, est.offset_ms, est.uncertainty_ms,
                         est.samples, round(est.drift_ms, 3), est.consistent)
        m.corrected = (m.offset_ms is not None and abs(m.offset_ms) > threshold_ms
                       and abs(m.offset_ms) > (m.uncertainty_ms or 0.0))
        out.machines.append(m)
    return out


def ack_files(producer_dir: Path) -> list[Path]:
    """Every ack log under producer_dir, subdirectories gathered from producer machines included."""
    producer_dir = Path(producer_dir)
    return sorted(producer_dir.rglob("acks-*.arrows")) + sorted(producer_dir.rglob("acks-*.csv"))


def corrected_batches(producer_dir: Path, clock_plan: ClockPlan | None = None) -> Iterator[pa.RecordBatch]:
    """The whole history (every machine's files) as ACK_SCHEMA batches, each corrected machine's intended and ack
    times moved onto the reference clock (minus its offset). Read file by file, bounded memory."""
    shifts = clock_plan.shift_ms() if clock_plan else {}
    for path in ack_files(producer_dir):
        for batch in file_batches(path, mapped=False):
            if shifts and batch.num_rows:
                batch = _shift(batch, shifts)
            yield batch


def acks_frame(producer_dir: Path, clock_plan: ClockPlan | None = None):
    """The whole history in one pandas frame, as history.load_acks gives it (with `produce_ms`), on the reference
    clock: for oracles, which take the history whole."""
    acks = pa.Table.from_batches(list(corrected_batches(producer_dir, clock_plan)), schema=ACK_SCHEMA).to_pandas()
    acks["error"] = acks["error"].astype("string")
    acks["produce_ms"] = acks["ack_ms"] - acks["latency_us"] / 1000.0
    return acks


def _shift(batch: pa.RecordBatch, shifts: dict[int, float]) -> pa.RecordBatch:
    producer = batch.column("producer").to_numpy(zero_copy_only=False)
    delta = np.zeros(len(producer), dtype=np.float64)
    for p, ms in shifts.items():
        delta[producer == p] = ms
    if not delta.any():
        return batch
    cols = {name: batch.column(name) for name in ACK_SCHEMA.names}
    for name in ("intended_ms", "ack_ms"):
        cols[name] = pc.subtract(cols[name], pa.array(delta))
    return pa.RecordBatch.from_arrays([cols[n] for n in ACK_SCHEMA.names], schema=ACK_SCHEMA)


def count_negative_latencies(sink_dir: Path, clock_plan: ClockPlan) -> None:
    """Per machine, the delivered rows whose sink commit came before their intended time: as sent, and after the
    machine's correction. Read from the sink's own rows (producer, intended_ms) and its log's commit times, a
    file at a time, independent of the checker (whose histogram floors latency at 1 µs)."""
    from harness.sinks.parquet.files import local_path, batch_log
    import pyarrow.parquet as pq

    owner = {p: m for m in clock_plan.machines for p in m.producers}
    shifts = clock_plan.shift_ms()
    for _, commit_ms, files in batch_log(Path(sink_dir)):
        for f in files:
            try:
                t = pq.read_table(local_path(f), columns=["producer", "intended_ms"])
            except (OSError, pa.ArrowInvalid, KeyError):
                continue
            producer = t.column("producer").to_numpy(zero_copy_only=False)
            intended = t.column("intended_ms").to_numpy(zero_copy_only=False).astype(np.float64)
            for p in np.unique(producer).tolist():
                m = owner.get(int(p))
                if m is None:
                    continue
                mine = intended[producer == p]
                m.delivered += len(mine)
                m.negative_latencies += int((commit_ms - mine < 0).sum())
                m.negative_after_correction += int((commit_ms - (mine - shifts.get(int(p), 0.0)) < 0).sum())


def section(clock_plan: ClockPlan) -> dict:
    """result.json producers.clocks: what was measured, what was corrected, and whether latency can be judged."""
    machines = [m.as_dict() for m in clock_plan.machines]
    corrected = [m.machine for m in clock_plan.machines if m.corrected]
    unmeasured_negative = [m.machine for m in clock_plan.machines
                           if m.offset_ms is None and m.negative_latencies]
    residual = [m.machine for m in clock_plan.machines if m.negative_after_correction]
    judged = not unmeasured_negative and not residual
    reason = None
    if unmeasured_negative:
        reason = (f"negative latencies from {', '.join(unmeasured_negative)} whose clock offset was never measured: "
                  f"their clock runs ahead of the reference; latency not judged")
    elif residual:
        parts = []
        for m in clock_plan.machines:
            if not m.negative_after_correction:
                continue
            if m.corrected:
                parts.append(f"{m.machine} ({m.negative_after_correction} after correcting it by its measured offset"
                             f": the clock moved beyond its uncertainty during the run)")
            else:
                parts.append(f"{m.machine} ({m.negative_after_correction}; its offset {m.offset_ms:+.1f} ms was not "
                             f"corrected, threshold {clock_plan.threshold_ms:g} ms)")
        reason = f"negative latencies from {'; '.join(parts)}; latency not judged"
    return {"threshold_ms": clock_plan.threshold_ms, "machines": machines,
            "corrected": corrected, "latency_judged": judged, "latency_not_judged_reason": reason,
            "note": (f"intended and ack times of {', '.join(corrected)} moved onto the reference clock by their "
                     f"measured offsets before checking" if corrected else "no correction applied")}
