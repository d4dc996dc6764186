"""Checks evaluated while a soak runs, so a night that has already failed says so at once (and can stop).

Every `check_every_s` the live checker reads only what is new: ack batches appended to the producers' history
and sink files of newly committed batches. It keeps one flag per event handed out (a byte per sequence number, per
producer: the duplicates judge needs the whole past) and the acked events not yet delivered; so each evaluation
costs what arrived since the last one, not the history.

The checks, each `ok`, `detail` and `judged` (False with the reason when the moment cannot say):
- `no_loss`: acked events overdue (not delivered `settle_s` after their ack), beyond the faults' declared loss;
- `no_duplicates`: events delivered twice so far;
- `latency_p99`: p99 of events committed in the last `window_s` (when a limit is set);
- `throughput`: events delivered / acked in the last `window_s`;
  both not judged while a window overlaps a fault or the `recovery_s` after its heal or after the
  traffic's start;
- `query_alive`: a batch reported within `stall_s` (progress.jsonl), unless a fault declared the query down.
The final verdict (harness.soak.checks) holds every evaluation against the run: one failure fails the soak.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from harness.config import Scenario
from harness.check import Check
from harness.effects import Effect
from harness.faults.nemesis import recorded_faults
from harness.history import ack_files, file_batches
from harness.jsonl import append_jsonl
from harness.sink import local_path, batch_log

SEQ_BITS = 40  # key = producer << 40 | seq: a producer's sequence stays below 2**40


class Delivered:
    """One flag per (producer, seq): delivered yet. Grows with the highest sequence number, a byte per event."""

    def __init__(self) -> None:
        self.flags: dict[int, np.ndarray] = {}

    def _ensure(self, producer: int, top: int) -> np.ndarray:
        flags = self.flags.get(producer)
        if flags is None or len(flags) <= top:
            grown = np.zeros(max(top + 1, 2 * (0 if flags is None else len(flags)), 1024), dtype=bool)
            if flags is not None:
                grown[: len(flags)] = flags
            self.flags[producer] = flags = grown
        return flags

    def add(self, producers: np.ndarray, seqs: np.ndarray) -> int:
        """Mark these deliveries; returns how many were duplicates (already delivered, or twice in this lot)."""
        duplicates = 0
        for producer in np.unique(producers):
            seq = seqs[producers == producer]
            flags = self._ensure(int(producer), int(seq.max()))
            unique = np.unique(seq)
            duplicates += len(seq) - len(unique) + int(flags[unique].sum())
            flags[unique] = True
        return duplicates

    def contains(self, producers: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        out = np.zeros(len(seqs), dtype=bool)
        for producer in np.unique(producers):
            flags = self.flags.get(int(producer))
            if flags is None:
                continue
            which = producers == producer
            seq = seqs[which]
            inside = seq < len(flags)
            hit = np.zeros(len(seq), dtype=bool)
            hit[inside] = flags[seq[inside]]
            out[which] = hit
        return out


class HistoryTail:
    """The rows of the producers' history not read yet (complete batches only; files are appended as we go)."""

    def __init__(self, producer_dir: Path):
        self.dir = producer_dir
        self.rows_read: dict[Path, int] = {}

    def new_rows(self) -> dict[str, np.ndarray]:
        cols = {c: [] for c in ("producer", "seq", "partition", "offset", "ack_ms", "error")}
        for path in ack_files(self.dir):
            skip = self.rows_read.get(path, 0)
            seen = 0
            for batch in file_batches(path):
                n = batch.num_rows
                if seen + n > skip:
                    part = batch.slice(max(0, skip - seen))
                    for c in cols:
                        col = part.column(c)
                        cols[c].append(np.asarray(col.to_pylist(), dtype=object) if c == "error"
                                       else col.to_numpy(zero_copy_only=False))
                seen += n
            self.rows_read[path] = max(skip, seen)
        return {c: (np.concatenate(v) if v else np.array([], dtype=object if c == "error" else "float64"))
                for c, v in cols.items()}


class SinkTail:
    """Rows of sink batches committed since the last look: (producer, seq, intended_ms, commit_ms)."""

    def __init__(self, sink: Path):
        self.sink = sink
        self.files_read: set[str] = set()

    def new_rows(self) -> dict[str, np.ndarray]:
        out = {c: [] for c in ("producer", "seq", "intended_ms", "commit_ms")}
        for _batch_id, commit_ms, files in batch_log(self.sink):
            for path in files:
                if path in self.files_read:
                    continue
                self.files_read.add(path)
                table = pq.read_table(local_path(path), columns=["producer", "seq", "intended_ms"])
                for c in ("producer", "seq", "intended_ms"):
                    out[c].append(table.column(c).to_numpy(zero_copy_only=False))
                out["commit_ms"].append(np.full(table.num_rows, commit_ms))
        return {c: (np.concatenate(v) if v else np.array([], dtype="float64")) for c, v in out.items()}


class LiveChecker:
    """The state the live checks need, fed a bit at a time; `evaluate(now)` is a pure read of it."""

    def __init__(self, scenario: Scenario, run_dir: Path, traffic_start: float | None = None):
        self.scenario, self.run_dir, self.traffic_start = scenario, run_dir, traffic_start
        self.spec = scenario.soak
        assert self.spec is not None
        self.limit_p99 = self.spec.latency_p99_ms or scenario.checks.latency_p99_ms
        self.acks, self.sink = HistoryTail(run_dir / "producers"), SinkTail(run_dir / "sink")
        self.delivered = Delivered()
        self.duplicates = 0
        self.pending = {c: np.array([], dtype="int64") for c in ("producer", "seq", "partition", "offset")}
        self.pending["ack_ms"] = np.array([], dtype="float64")
        self.ack_times: list[np.ndarray] = []  # acked events' ack times, for the window's throughput
        self.commits: list[tuple[np.ndarray, np.ndarray]] = []  # (commit_ms, latency_ms) per sink lot
        self.evaluations = 0

    def ingest(self) -> None:
        sink = self.sink.new_rows()
        if len(sink["seq"]):
            producers, seqs = sink["producer"].astype("int64"), sink["seq"].astype("int64")
            self.duplicates += self.delivered.add(producers, seqs)
            self.commits.append((sink["commit_ms"], sink["commit_ms"] - sink["intended_ms"]))
        acks = self.acks.new_rows()
        ok = acks["error"] == "" if len(acks["error"]) else np.array([], dtype=bool)
        if ok.any():
            self.ack_times.append(acks["ack_ms"][ok].astype("float64"))
            for c in ("producer", "seq", "partition", "offset", "ack_ms"):
                self.pending[c] = np.concatenate([self.pending[c], acks[c][ok].astype(self.pending[c].dtype)])
        hit = self.delivered.contains(self.pending["producer"], self.pending["seq"])
        if hit.any():
            self.pending = {c: v[~hit] for c, v in self.pending.items()}

    def evaluate(self, now_ms: float, query_state: str = "running") -> list[Check]:
        spec = self.spec
        faults = recorded_faults(self.run_dir)
        effects = [Effect.from_dict(f.get("effect") or {}) for f in faults if f.get("injected_at")]
        lo = now_ms - spec.window_s * 1000.0
        disturbed = [f"fault {f['kind']}" for f in faults if f.get("inject_started_at") and _overlaps(
            f["inject_started_at"] * 1000.0, ((f.get("healed_at") or now_ms / 1000.0) + spec.recovery_s) * 1000.0,
            lo, now_ms)]
        if self.traffic_start is not None and lo < (self.traffic_start + spec.recovery_s) * 1000.0:
            disturbed.append("the traffic's start")  # the query meets its first events: a warm-up, not a verdict
        out = [self._loss(now_ms, effects, query_state), Check(
            "no_duplicates", self.duplicates <= self.scenario.checks.max_duplicates,
            f"{self.duplicates} duplicate deliveries so far (allowed {self.scenario.checks.max_duplicates})")]
        commit_ms = np.concatenate([c for c, _ in self.commits]) if self.commits else np.array([])
        latency = np.concatenate([lat for _, lat in self.commits]) if self.commits else np.array([])
        in_window = (commit_ms > lo) & (commit_ms <= now_ms)
        acked_in_window = sum(int(((t > lo) & (t <= now_ms)).sum()) for t in self.ack_times)
        why_not = f"not judged: {', '.join(sorted(set(disturbed)))} in the window" if disturbed else ""
        if self.limit_p99 is not None:
            p99 = float(np.percentile(latency[in_window], 99)) if in_window.any() else None
            out.append(Check("latency_p99", None if disturbed or p99 is None else p99 <= self.limit_p99,
                             why_not or (f"p99 {p99:,.0f} ms over the last {spec.window_s:g} s (limit "
                                             f"{self.limit_p99:,.0f} ms)" if p99 is not None else
                                             "not judged: nothing committed in the window")))
        delivered_in_window = int(in_window.sum())
        ratio = delivered_in_window / acked_in_window if acked_in_window else None
        out.append(Check("throughput", None if disturbed or ratio is None else ratio >= spec.min_throughput_ratio,
                         why_not or (f"{delivered_in_window:,} delivered / {acked_in_window:,} acked in the "
                                         f"last {spec.window_s:g} s = {ratio:.2f} (need >= "
                                         f"{spec.min_throughput_ratio:g})" if ratio is not None else
                                         "not judged: nothing acked in the window")))
        out.append(self._alive(now_ms, effects, query_state))
        self._forget_before(now_ms - spec.window_s * 1000.0)
        self.evaluations += 1
        return out

    def _loss(self, now_ms: float, effects: list[Effect], query_state: str) -> Check:
        if query_state == "failed_as_declared":
            return Check("no_loss", None, "not judged: the query stopped with the failure a fault declared")
        p = self.pending
        overdue = p["ack_ms"] < now_ms - self.spec.settle_s * 1000.0
        expected = np.zeros(len(overdue), dtype=bool)
        for r in (r for e in effects for r in e.loss):
            m = (p["partition"] == r.partition) & (p["offset"] >= r.start) & (p["offset"] < r.end)
            if r.acked_before_ms is not None:
                m &= p["ack_ms"] < r.acked_before_ms
            expected |= m
        n = int((overdue & ~expected).sum())
        allowed = self.scenario.checks.max_lost
        return Check("no_loss", n <= allowed,
                     f"{n} acked events not delivered {self.spec.settle_s:g} s after their ack (allowed {allowed};"
                     f" {int((overdue & expected).sum())} more in the faults' declared loss; "
                     f"{len(overdue) - int(overdue.sum())} acked more recently, in flight)")

    def _alive(self, now_ms: float, effects: list[Effect], query_state: str) -> Check:
        if query_state in ("failed_as_declared", "restarting"):
            return Check("query_alive", None, f"not judged: the query is {query_state.replace('_', ' ')}")
        try:
            age = now_ms / 1000.0 - (self.run_dir / "progress.jsonl").stat().st_mtime
        except OSError:
            age = None
        if age is None:
            return Check("query_alive", None, "not judged: no batch reported yet")
        return Check("query_alive", age <= self.spec.stall_s,
                     f"last batch reported {age:,.0f} s ago (stall limit {self.spec.stall_s:g} s)")

    def _forget_before(self, lo_ms: float) -> None:
        """Only the window is needed again for latency and throughput."""
        self.commits = [(c[c > lo_ms], lat[c > lo_ms]) for c, lat in self.commits if (c > lo_ms).any()]
        self.ack_times = [t[t > lo_ms] for t in self.ack_times if (t > lo_ms).any()]


def _overlaps(a0: float, a1: float, b0: float, b1: float) -> bool:
    return a0 < b1 and b0 < a1


class LiveMonitor(threading.Thread):
    """Runs the live checks on a schedule: live_checks.jsonl gets one line per evaluation; a check's first
    failure is said on the console at once; with fail_fast the first failure sets `failed` for the runner."""

    def __init__(self, scenario: Scenario, run_dir: Path, console, query_state=lambda: "running",
                 traffic_start: float | None = None):
        super().__init__(name="soak-live-checks", daemon=True)
        self.checker = LiveChecker(scenario, run_dir, traffic_start)
        self.path, self.console, self.query_state = run_dir / "live_checks.jsonl", console, query_state
        self.every = scenario.soak.check_every_s  # type: ignore[union-attr]
        self.halt = threading.Event()
        self.failed: str | None = None  # the first failure (fail_fast stops the run on it)
        self.said: set[str] = set()  # checks whose failure was said on the console
        self.error: str | None = None
        self.t0 = time.time()

    def run(self) -> None:
        while not self.halt.wait(self.every):
            self.evaluate_now()

    def evaluate_now(self) -> list[Check]:
        try:
            self.checker.ingest()
            now = time.time()
            checks = self.checker.evaluate(now * 1000.0, self.query_state())
        except Exception as exc:  # noqa: BLE001 - the soak's verdict says its live checks could not run
            self.error = f"{type(exc).__name__}: {exc}"
            append_jsonl(self.path, {"t": time.time(), "error": self.error})
            return []
        append_jsonl(self.path, {"t": now, "checks": [c.as_dict() for c in checks]})
        for c in checks:
            if c.ok is False and c.name not in self.said:
                self.said.add(c.name)
                what = f"{c.name} at +{now - self.t0:,.0f} s: {c.detail}"
                self.failed = self.failed or what
                self.console.warn(f"live check failed: {what}")
        return checks

    def stop(self) -> None:
        self.halt.set()
        if self.is_alive():
            self.join(timeout=60)
