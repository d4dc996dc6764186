"""Checks evaluated while a soak runs, so a night that has already failed says so at once (and can stop).

Every `check_every_s` the live checker hands what is new to the run's one reconciliation engine
(harness.reconcile.Reconciler, the same rules as the final verdict): ack batches appended to the producers'
history and the sink's newly committed batches; the engine keeps the state in DuckDB and reconciles only what is
pending or new, so each evaluation costs what arrived since the last one, not the history. Its own state is only
the last window's commit and ack times.

The checks (pass, fail or unknown with the reason when the moment cannot say):
- `no_loss`: acked events overdue (not delivered `settle_s` after their ack), beyond the faults' declared loss:
  the engine's `reconcile(settled_before_ms=now - settle_s)`;
- `no_duplicates`: events delivered twice so far (the engine's count);
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
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.check import Check
from harness.reconcile import Expectations, Reconciler, Reconciliation
from harness.config import Scenario
from harness.effects import Effect
from harness.faults.nemesis import recorded_faults
from harness.records.history import ack_files, file_batches
from harness.files.jsonl import append_jsonl
from harness.records.placements import load_placements
from harness.sinks import EVENT_ID_COLUMNS
from harness.sinks.parquet.files import batch_log, local_path


class HistoryTail:
    """The record batches of the producers' history not read yet (complete batches only; files grow as we go)."""

    def __init__(self, producer_dir: Path):
        self.dir = producer_dir
        self.rows_read: dict[Path, int] = {}

    def new_batches(self) -> list[pa.RecordBatch]:
        out = []
        for path in ack_files(self.dir):
            skip = self.rows_read.get(path, 0)
            seen = 0
            for batch in file_batches(path):
                n = batch.num_rows
                if seen + n > skip:
                    out.append(batch.slice(max(0, skip - seen)))
                seen += n
            self.rows_read[path] = max(skip, seen)
        return out


class SinkTail:
    """The sink's batches committed since the last look: (batch id, commit ms, files), in the log's order."""

    def __init__(self, sink: Path):
        self.sink = sink
        self.batches_read: set[int] = set()

    def new_batches(self) -> list[tuple[int, float, list[str]]]:
        new = [(b, t, files) for b, t, files in batch_log(self.sink) if b not in self.batches_read]
        self.batches_read.update(b for b, _, _ in new)
        return new


class LiveChecker:
    """The engine fed a bit at a time, and the window's times; `evaluate(now)` reconciles and reads them."""

    def __init__(self, scenario: Scenario, run_dir: Path, traffic_start: float | None = None,
                 store_dir: Path | None = None):
        self.scenario, self.run_dir, self.traffic_start = scenario, run_dir, traffic_start
        self.spec = scenario.soak
        assert self.spec is not None
        self.limit_p99 = self.spec.latency_p99_ms or scenario.checks.latency_p99_ms
        self.history, self.sink = HistoryTail(run_dir / "producers"), SinkTail(run_dir / "sink")
        self.engine = Reconciler(store_dir)  # a temporary directory when None, removed by close()
        self.last: Reconciliation | None = None
        self.ack_times: list[np.ndarray] = []  # acked events' ack times, for the window's throughput
        self.commits: list[tuple[np.ndarray, np.ndarray]] = []  # (commit_ms, latency_ms) per sink lot
        self.evaluations = 0

    def ingest(self) -> None:
        for batch_id, commit_ms, files in self.sink.new_batches():
            # each file read once: the engine's event columns and the events' intended times for the latency
            tables = [(path, pq.read_table(local_path(path), columns=[*EVENT_ID_COLUMNS, "intended_ms"]))
                      for path in files]
            self.engine.add_sink_tables(batch_id, commit_ms, tables)
            for _, table in tables:
                intended = table.column("intended_ms").to_numpy()
                self.commits.append((np.full(len(intended), commit_ms), commit_ms - intended))
        batches = self.history.new_batches()
        self.engine.add_acks(batches)
        for batch in batches:
            ok = pc.equal(batch.column("error"), "").to_numpy(zero_copy_only=False)
            if ok.any():
                self.ack_times.append(batch.column("ack_ms").to_numpy(zero_copy_only=False)[ok].astype("float64"))

    def evaluate(self, now_ms: float, query_state: str = "running") -> list[Check]:
        spec = self.spec
        faults = recorded_faults(self.run_dir)
        effects = [Effect.from_dict(f.get("effect") or {}) for f in faults if f.get("injected_at")]
        self.engine.set_placements(load_placements(self.run_dir / "placements"))
        self.last = rec = self.engine.reconcile(
            Expectations(loss=[r for e in effects for r in e.loss],
                         generations_ms=[e.new_generation_ms for e in effects if e.new_generation_ms is not None]),
            settled_before_ms=now_ms - spec.settle_s * 1000.0, latency=False)
        lo = now_ms - spec.window_s * 1000.0
        disturbed = [f"fault {f['kind']}" for f in faults if f.get("inject_started_at") and _overlaps(
            f["inject_started_at"] * 1000.0, ((f.get("healed_at") or now_ms / 1000.0) + spec.recovery_s) * 1000.0,
            lo, now_ms)]
        if self.traffic_start is not None and lo < (self.traffic_start + spec.recovery_s) * 1000.0:
            disturbed.append("the traffic's start")  # the query meets its first events: a warm-up, not a verdict
        allowed_dup = self.scenario.checks.max_duplicates
        out = [self._loss(rec, query_state), Check(
            "no_duplicates", rec.duplicates <= allowed_dup,
            f"{rec.duplicates} duplicate deliveries so far (allowed {allowed_dup})")]
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
        out.append(self._alive(now_ms, query_state))
        self._forget_before(lo)
        self.evaluations += 1
        return out

    def _loss(self, rec: Reconciliation, query_state: str) -> Check:
        if query_state == "failed_as_declared":
            return Check("no_loss", None, "not judged: the query stopped with the failure a fault declared")
        allowed = self.scenario.checks.max_lost
        return Check("no_loss", rec.lost <= allowed,
                     f"{rec.lost} acked events not delivered {self.spec.settle_s:g} s after their ack (allowed "
                     f"{allowed}; {rec.expected_lost} more in the faults' declared loss; {rec.pending} acked more "
                     f"recently, in flight)")

    def close(self) -> None:
        self.engine.close()

    def _alive(self, now_ms: float, query_state: str) -> Check:
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

    def close(self) -> None:
        """After the last evaluation: the engine's store goes."""
        self.checker.close()
