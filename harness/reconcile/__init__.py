"""The reconciler: a pure function of the history (producers' ack logs), what the sink holds and what the faults
declared.

Every event handed to a producer client is accounted for: acked or failed; every acked event is delivered
exactly once, or is lost, or is an *expected* loss declared by a fault (records aged out, a deleted topic), or is
*unread* because the query stopped for good with the failure a fault declared (everything at or after the
position its last committed batch reached). Delivered rows must sit at the partition and offset their ack
reported, and per producer and partition they must appear in send order (a producer process sends in sequence
order and idempotent producers keep that order through retries, so a violation is the pipeline's doing). A sink
row whose event was never acked is a defect too.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa

from harness.reconcile.store import ReconcileStore
from harness.effects import DupRange, LossRange
from harness.records.histsummary import LatencySummary
from harness.sinks.parquet.files import local_path, batch_log


@dataclass
class Reconciliation:
    produced: int
    acked: int
    failed: int
    delivered_unique: int
    duplicates: int
    lost: int
    expected_lost: int
    delivered_unacked: int
    misplaced: int
    order_violations: int
    sink_rows: int
    lost_by_partition: dict[int, int] = field(default_factory=dict)
    failed_expected: int = 0
    unread: int = 0
    expected_lost_by_partition: dict[int, int] = field(default_factory=dict)
    pending: int = 0  # acked at or after settled_before_ms and not delivered yet: not judged (a soak's live check)
    # for attributing to faults (harness.analysis.recovery): declared losses per Expectations.loss index, the
    # undeclared lost events per ack second (epoch s), duplicate sink rows per commit time (ms, the bulk pass's)
    expected_lost_by_range: dict[int, int] = field(default_factory=dict)
    lost_by_ack_second: dict[int, int] = field(default_factory=dict)
    duplicate_commits: dict[float, int] = field(default_factory=dict)
    # duplicates whose input position a fault declared may be written twice (an at-least-once sink's re-run batch)
    expected_duplicates: int = 0
    latency: LatencySummary = field(default_factory=LatencySummary, repr=False)

    def counts(self) -> dict[str, int]:
        return {"produced": self.produced, "acked": self.acked, "delivered_unique": self.delivered_unique,
                "duplicates": self.duplicates, "lost": self.lost, "expected_lost": self.expected_lost,
                "unread": self.unread, "failed": self.failed, "failed_expected": self.failed_expected,
                "delivered_unacked": self.delivered_unacked, "misplaced": self.misplaced,
                "order_violations": self.order_violations, "sink_rows": self.sink_rows}


@dataclass
class Expectations:
    """What the faults declared, and where the query stopped for good."""

    loss: list[LossRange] = field(default_factory=list)
    failure_windows_ms: list[tuple[float, float]] = field(default_factory=list)  # sends may fail (ack time)
    read_up_to: dict[int, int] | None = None  # the query stopped (as declared): its committed end per partition
    generations_ms: list[float] = field(default_factory=list)  # a topic recreated at these times (offsets restart)
    duplicates: list[DupRange] = field(default_factory=list)  # input ranges whose events may be written twice


class Reconciler:
    """The checker over a history that grows: add what the producers and the sink wrote since the last call,
    reconcile whenever a verdict is wanted (a soak: every ~30 s; a run: once at the end). State lives in a
    DuckDB file (harness.reconcile.store) under `directory` (a temporary one when None), memory bounded by
    `memory_limit`; each reconcile works on what is new or still pending, not on the whole history."""

    def __init__(self, directory: Path | None = None, memory_limit: str = "1GB", threads: int = 2):
        self.store = ReconcileStore(directory, memory_limit=memory_limit, threads=threads)
        self._sink_batches: set[int] = set()

    def add_acks(self, batches: Iterable[pa.RecordBatch]) -> int:
        return self.store.add_acks(batches)

    def add_sink_tables(self, batch_id: int, commit_ms: float, tables: list[tuple[str, pa.Table]]) -> int:
        """One committed sink batch, its files read by the caller: (name, table) each."""
        self._sink_batches.add(int(batch_id))
        return self.store.add_sink_tables(commit_ms, tables)

    def add_sink(self, sink_dir: Path) -> int:
        """Every batch of the sink's log not added yet (harness.sinks.parquet.files.batch_log order)."""
        new = [(b, t, [local_path(f) for f in files]) for b, t, files in batch_log(sink_dir) if b not in self._sink_batches]
        self._sink_batches.update(b for b, _, _ in new)
        return self.store.add_sink_batches([(t, files) for _, t, files in new])

    def set_placements(self, placements: pd.DataFrame) -> None:
        self.store.set_placements(placements)

    def reconcile(self, expected: Expectations | None = None, settled_before_ms: float | None = None, *,
                  measured_from_ms: float | None = None, t0: float | None = None,
                  latency: bool = True) -> Reconciliation:
        """Today's verdict on everything added so far. With settled_before_ms, an ack at or after it whose event
        the sink has not shown yet is `pending` (in flight, not lost) and a first delivery committed at or after it
        whose ack is not in yet is not counted unacked (the producers flush their history in bulk). `latency`
        False leaves the latency summary out (a soak's live checks judge their own window)."""
        expected = expected or Expectations()
        store = self.store
        store.advance(expected.generations_ms, (measured_from_ms, t0), expected.duplicates)
        return Reconciliation(**_judge(store, expected, settled_before_ms),
                              latency=store.latency_summary(measured_from_ms, t0) if latency else LatencySummary())

    def ack_count(self, **kw) -> int:
        return self.store.ack_count(**kw)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Reconciler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _judge(store: ReconcileStore, expected: Expectations, settled_before_ms: float | None) -> dict:
    """The counts, from the store's state: see the module's rules."""
    con = store.con
    failed_expected = 0
    if expected.failure_windows_ms:
        con.register("_windows", pd.DataFrame(expected.failure_windows_ms, columns=["lo", "hi"], dtype="float64"))
        failed_expected = store.count("failed f", "f.is_error AND EXISTS (SELECT 1 FROM _windows w "
                                       "WHERE f.ack_ms >= w.lo AND f.ack_ms <= w.hi)")
        con.unregister("_windows")
    placed = """LEFT JOIN placements p USING (key)"""
    part = "CASE WHEN p.key IS NOT NULL AND a.partition < 0 THEN p.partition ELSE a.partition END"
    off = """CASE WHEN p.key IS NOT NULL AND a."offset" < 0 THEN p."offset" ELSE a."offset" END"""
    misplaced = store.misplaced_count(placed, part.replace("a.partition", "a.a_part"),
                                      off.replace('a."offset"', "a.a_off"))
    settled = "TRUE" if settled_before_ms is None else "ack_ms < ?::DOUBLE"
    sparams = [] if settled_before_ms is None else [float(settled_before_ms)]
    ranges = pd.DataFrame([(i, r.partition, r.start, r.end, r.acked_before_ms) for i, r in enumerate(expected.loss)],
                          columns=["idx", "partition", "lo", "hi", "before"]).astype(
        {"idx": "int64", "partition": "int64", "lo": "int64", "hi": "int64", "before": "float64"})
    reached = pd.DataFrame(list((expected.read_up_to or {}).items()), columns=["partition", "reached"],
                           dtype="int64")
    unread = 'm."offset" >= coalesce(u.reached, 0)' if expected.read_up_to is not None else "false"
    in_range = ('r.partition = m.partition AND m."offset" >= r.lo AND m."offset" < r.hi '
                'AND (r.before IS NULL OR m.ack_ms < r.before)')
    con.register("_ranges", ranges)
    con.register("_reached", reached)
    try:  # the acked events not delivered: expected (in a declared range), unread, or lost
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _missing AS SELECT m.partition, m."offset", m.ack_ms,
                EXISTS (SELECT 1 FROM _ranges r WHERE {in_range}) AS exp, {unread} AS unread
            FROM (SELECT {part} AS partition, {off} AS "offset", a.ack_ms FROM pending_acks a {placed}
                  WHERE {settled}) m LEFT JOIN _reached u USING (partition)""", sparams)
        rows = con.execute("""SELECT partition, count(*) FILTER (WHERE exp) AS expected,
                count(*) FILTER (WHERE NOT exp AND unread) AS unread, count(*) FILTER (WHERE NOT exp AND NOT unread)
            FROM _missing GROUP BY partition ORDER BY partition""").fetchall()
        by_range = con.execute(f"""SELECT r.idx, count(*) FROM _missing m JOIN _ranges r ON {in_range}
            GROUP BY r.idx""").fetchall()
        by_second = con.execute("""SELECT floor(ack_ms / 1000.0)::BIGINT AS s, count(*) FROM _missing
            WHERE NOT exp AND NOT unread GROUP BY s""").fetchall()
        con.execute("DROP TABLE _missing")
    finally:
        con.unregister("_ranges")
        con.unregister("_reached")
    delivered, first_pending = store.delivered_count(), store.count("pending_first")
    unacked_where = "TRUE" if settled_before_ms is None else "commit_ms < ?::DOUBLE"
    return dict(
        produced=store.produced, acked=store.acked, failed=store.produced - store.acked,
        delivered_unique=delivered, duplicates=store.sink_rows - delivered - first_pending,
        lost=sum(r[3] for r in rows), expected_lost=sum(r[1] for r in rows), unread=sum(r[2] for r in rows),
        delivered_unacked=store.count("pending_first", unacked_where, sparams), misplaced=misplaced,
        order_violations=int(con.execute("SELECT coalesce(sum(violations), 0) FROM order_groups").fetchall()[0][0]),
        sink_rows=store.sink_rows, failed_expected=failed_expected,
        lost_by_partition={int(r[0]): int(r[3]) for r in rows if r[3]},
        expected_lost_by_partition={int(r[0]): int(r[1]) for r in rows if r[1]},
        expected_lost_by_range={int(i): int(n) for i, n in by_range},
        lost_by_ack_second={int(t): int(n) for t, n in by_second},
        duplicate_commits=dict(store.duplicate_commits), expected_duplicates=store.expected_duplicates,
        pending=0 if settled_before_ms is None else store.count("pending_acks", "ack_ms >= ?::DOUBLE", sparams))


def reconcile(acks: pd.DataFrame, sink: pd.DataFrame, expected: Expectations | None = None, *,
              measured_from_ms: float | None = None, t0: float | None = None) -> Reconciliation:
    """The whole verdict on a history held in frames (tests, small tools): acks as harness.records.history.load_acks
    gives them (or with `produce_ms` instead of `latency_us`), sink rows in the sink log's order with
    `commit_ms`. The same engine as a run's (Reconciler), in a temporary store."""
    with Reconciler() as checker:
        checker.store.add_acks_frame(acks)
        checker.store.add_sink_frame(sink)
        return checker.reconcile(expected, measured_from_ms=measured_from_ms, t0=t0)
