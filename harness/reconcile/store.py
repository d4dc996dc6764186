"""The reconciler's engine: an out-of-core, incremental reconciliation of the producers' history with the sink, in
bounded memory (DuckDB's memory_limit plus one key range of numpy arrays), so hours of traffic fit.

New history is staged on disk in sorted runs (harness.reconcile.bulk), not inserted anywhere. A store's first reconcile
(a run's verdict: the only one) is one bulk pass over them in numpy, a key range at a time: first deliveries,
matches, the order state, the latency counts; what stays unmatched goes to DuckDB's *pending* tables. Later
reconciles (a soak's, every ~30 s) work incrementally in DuckDB: the first of them replays the staged history
through the incremental path (so its tables hold everything: a one-off cost the size of the history so far, at
DuckDB's few microseconds an event), after which each ack and each first delivery waits
in a pending table until its other half arrives, then both move to `delivered` (one row per event delivered); each
reconcile joins only what is pending and what arrived since the last one. What stays whole-history is cheap:
column scans of `delivered` (misplaced rows, the latency histograms, in numpy:
harness.records.histsummary.summarize) and the per-(producer, partition, generation) order state, which keeps a tail
row per group and only re-sorts a group
when a new delivery lands before its tail.

The verdict is the same as the pandas reference (harness/bench/reference_checker.py, the checker before it) on the
same history; see harness.reconcile.reconcile for the rules. One assumption, true of every history the producers
write: (producer, seq) identifies one event (one ack row each), with 0 <= producer < 2^20 and 0 <= seq < 2^43
(packed into one BIGINT key, seq-major, so a reconcile's new keys fall in a narrow key range).
"""
from __future__ import annotations

import shutil
import tempfile
from collections import deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import harness.reconcile.bulk as bulk
from harness.reconcile.bulk import Runs
from harness.sinks import EVENT_ID_COLUMNS

from harness.records.histsummary import (LatencyCounts, LatencySummary, bucket_index, bucket_index_ms, measured_extent,
                                 summarize, window_edges)

PRODUCER_BITS = 20
MAX_SEQ = 1 << 43
CHUNK_ROWS = 1 << 21  # rows of a staged run (bounded memory while ingesting)
RANGE_ROWS = 2_000_000  # rows joined or grouped at a time: one key range each, so memory is bounded at any size
MASK = (1 << PRODUCER_BITS) - 1

_SCHEMA = """
CREATE TABLE pending_acks(key BIGINT, arid BIGINT, producer INTEGER, seq BIGINT, partition INTEGER, "offset" BIGINT,
                          intended_ms DOUBLE, ack_ms DOUBLE, pub_b BIGINT);
CREATE TABLE failed(producer INTEGER, intended_ms DOUBLE, ack_ms DOUBLE, is_error BOOLEAN);
CREATE TABLE sink_new(key BIGINT, partition BIGINT, "offset" BIGINT, commit_ms DOUBLE, rid BIGINT);
CREATE TABLE pending_first(key BIGINT, partition BIGINT, "offset" BIGINT, commit_ms DOUBLE, rid BIGINT);
CREATE TABLE delivered(key BIGINT, arid BIGINT, producer INTEGER, seq BIGINT, a_part INTEGER, a_off BIGINT,
                       s_part BIGINT, s_off BIGINT, intended_ms DOUBLE, ack_ms DOUBLE,
                       commit_ms DOUBLE, gen INTEGER, lat_b BIGINT, pub_b BIGINT);
CREATE TABLE order_groups(producer INTEGER, part BIGINT, gen INTEGER, violations BIGINT, tail_off BIGINT,
                          tail_arid BIGINT, tail_seq BIGINT);
CREATE TABLE placements(key BIGINT, partition BIGINT, "offset" BIGINT);
CREATE TABLE unplaced(key BIGINT, a_part INTEGER, a_off BIGINT, s_part BIGINT, s_off BIGINT);
"""

# the microsecond value (harness.records.histsummary: rint, clipped to [1 us, 1 h]) and its HdrHistogram bucket
# (3 significant digits: the lowest value equivalent to it in HdrHistogram(1, 3_600_000_000, 3), whose sub-buckets
# are 2048 wide)
_US = "least(greatest(round_even(({x}) * 1000::DOUBLE, 0), 1), 3600000000)::BIGINT"
_BUCKET = "(({v} >> greatest(0, floor(log2({v}))::INTEGER - 10)) << greatest(0, floor(log2({v}))::INTEGER - 10))"


def bucket_sql(ms_expr: str) -> str:
    """SQL for the HdrHistogram bucket (lowest equivalent microsecond value) of a millisecond expression."""
    return _BUCKET.format(v=f"({_US.format(x=ms_expr)})")


class ReconcileStore:
    """The incremental checker's state in one DuckDB database file under `directory` (or, without one, in
    memory, spilling to a temporary directory removed by close()), and the history staged since the last
    reconcile under `directory`/stage. add_acks / add_sink_batches / add_sink_frame stage new history; reconcile()
    (harness.reconcile) brings the state up to date (advance) and judges it."""

    def __init__(self, directory: Path | None = None, memory_limit: str = "1GB", threads: int = 2):
        self._own_dir = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="checker-")) if directory is None else Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # a run's state in a database file (at 10M events as fast as in memory, peak RSS ~120 MB lower in one
        # trial); a temporary store (tests, small frame reconciles) in memory, without a file's creation cost
        self.con = duckdb.connect(":memory:" if self._own_dir else str(self.directory / "checker.duckdb"), config={
            "memory_limit": memory_limit, "threads": threads, "preserve_insertion_order": False,
            "temp_directory": str(self.directory / "spill")})
        self.con.execute(_SCHEMA)
        self.produced = self.acked = self.sink_rows = 0
        self._arid = 0  # ack ingestion order: the reference's row order, tie-break of equal offsets in order checks
        self._sink_ord = 0  # sink batches added: (ordinal, file, row) orders rows the way the sink log lists them
        self._generations: tuple[float, ...] | None = None
        self._order_dirty = False
        stage = self.directory / "stage"
        self.acks_staged = Runs(stage, "acks", bulk.ACK_SCHEMA, CHUNK_ROWS, RANGE_ROWS)
        self.sink_staged = Runs(stage, "sink", bulk.SINK_SCHEMA, CHUNK_ROWS, RANGE_ROWS)
        self._range_rows = RANGE_ROWS
        self._workers = threads  # key ranges matched at a time in a bulk pass
        self._no_id = 0  # sink rows without an event id
        self._failed: list[pa.Table] = []  # failed sends not inserted yet
        self._fresh = True  # no reconcile has left state yet: the next one is a bulk pass
        self._bulk: dict | None = None  # a bulk pass's results, while they are the state (else DuckDB's tables)
        # duplicate sink rows per commit time (ms), as the bulk pass finds them (a fault's recovery attributes
        # them: harness.analysis.recovery); later incremental reconciles (a soak's live checks) do not add to it
        self.duplicate_commits: dict[float, int] = {}
        # duplicate sink rows whose input position a fault declared may be written twice (harness.effects.DupRange)
        self.expected_duplicates = 0
        self._dup_ranges = np.zeros((0, 3), dtype=np.int64)

    # ---------------------------------------------------------------------------------------------- ingestion
    def add_acks(self, batches: Iterable[pa.RecordBatch]) -> int:
        """New history rows (ACK_SCHEMA record batches, or any with producer, seq, partition, offset, intended_ms,
        ack_ms, error and latency_us or produce_ms), in the order they were written. Returns the rows added.
        A batch at a time (its columns are numpy arrays without a copy), prepared on `threads` threads (numpy
        releases the GIL) and staged in order."""
        n = 0
        with ThreadPoolExecutor(self._workers) as pool:
            queue: deque = deque()
            for batch in batches:
                if batch.num_rows:
                    queue.append(pool.submit(_prepare_acks, pa.Table.from_batches([batch]), self._arid))
                    self._arid += batch.num_rows
                while len(queue) > self._workers or (queue and queue[0].done()):
                    n += self._stage_acks(*queue.popleft().result())
            while queue:
                n += self._stage_acks(*queue.popleft().result())
        self._insert_failed()
        return n

    def add_acks_frame(self, acks: pd.DataFrame) -> int:
        cols = [c for c in ("producer", "seq", "partition", "offset", "intended_ms", "ack_ms", "latency_us",
                            "produce_ms", "error") if c in acks.columns]
        frame = acks[cols].copy()
        frame["error"] = frame["error"].astype(object).where(frame["error"].notna(), None)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        n = self._stage_acks(*_prepare_acks(table, self._arid)) if len(frame) else 0
        self._arid += n
        self._insert_failed()
        return n

    def _stage_acks(self, n: int, acked: int, failed: pa.Table | None, cols: dict | None) -> int:
        if failed is not None:  # failed sends (rare): to their table, a few statements per add_acks
            self._failed.append(failed)
        if cols is not None:
            self.acks_staged.append(cols)
        self.produced += n
        self.acked += acked
        return n

    def _insert_failed(self) -> None:
        if self._failed:
            self.con.register("_failed_in", pa.concat_tables(self._failed, promote_options="permissive"))
            try:
                self.con.execute("""INSERT INTO failed SELECT producer::INTEGER, intended_ms::DOUBLE, ack_ms::DOUBLE,
                    error <> '' FROM _failed_in""")
            finally:
                self.con.unregister("_failed_in")
            self._failed = []

    def add_sink_batches(self, batches: list[tuple[float, list[str]]]) -> int:
        """Committed sink batches (commit time, files) in the sink log's order, their files read on `threads`
        threads and staged in order."""
        jobs = []
        for commit_ms, files in batches:
            base = self._sink_ord << 40
            self._sink_ord += 1
            jobs += [(name, float(commit_ms), base + (fidx << 28)) for fidx, name in enumerate(files)]
        added = 0
        with ThreadPoolExecutor(self._workers) as pool:  # at most workers + 1 files in memory
            queue: deque = deque()
            for name, commit_ms, rid0 in jobs:
                queue.append(pool.submit(lambda *job: _prepare_sink(_read_sink_file(job[0]), *job[1:]),
                                         name, commit_ms, rid0))
                while len(queue) > self._workers:
                    added += self._stage_sink(*queue.popleft().result())
            while queue:
                added += self._stage_sink(*queue.popleft().result())
        return added

    def add_sink_tables(self, commit_ms: float, tables: list[tuple[str, pa.Table]]) -> int:
        """One committed sink batch whose files the caller has read already, (name, table) each (a soak's live
        checker reads each file once, for its latency as well), staged as add_sink_batches stages files."""
        base = self._sink_ord << 40
        self._sink_ord += 1
        return sum(self._stage_sink(*_prepare_sink(_event_columns(name, t), float(commit_ms), base + (i << 28)))
                   for i, (name, t) in enumerate(tables))

    def add_sink_frame(self, sink: pd.DataFrame) -> int:
        """Sink rows as a frame (producer, seq, partition, offset, commit_ms), in the sink log's order."""
        if not len(sink):
            return 0
        t = pa.table({c: sink[c].to_numpy() for c in ("producer", "seq", "partition", "offset", "commit_ms")})
        added = self._stage_sink(*_prepare_sink(t, t["commit_ms"].to_numpy(), self._sink_ord << 40))
        self._sink_ord += 1
        return added

    def _stage_sink(self, n: int, no_id: int, cols: dict | None) -> int:
        self._no_id += no_id  # judged at the reconcile (as unaccountable)
        if cols is not None:
            self.sink_staged.append(cols)
        self.sink_rows += n + no_id
        return n + no_id

    def set_placements(self, placements: pd.DataFrame) -> None:
        """Where the service stored events whose sends reported no position (checker.load_placements): replaced
        whole at each reconcile (a fault writes them when it removes events, long after their acks)."""
        self.con.execute("DELETE FROM placements")
        if len(placements):
            frame = placements[["producer", "seq", "partition", "offset"]].astype("int64")
            self.con.register("_pl", frame)
            try:
                self.con.execute(f"""INSERT INTO placements SELECT (seq << {PRODUCER_BITS}) | producer, partition,
                    "offset" FROM _pl""")
            finally:
                self.con.unregister("_pl")

    # ---------------------------------------------------------------------------------------------- matching
    def advance(self, generations_ms: list[float], latency: tuple[float | None, float | None] | None = None,
                dup_ranges: list | None = None) -> None:
        """Bring the state up to date: first deliveries of the new sink rows, acks matched with deliveries, order
        state per (producer, partition, generation). The first time, in one bulk pass (harness.reconcile.bulk), which
        also counts the latency summary for `latency` (measured_from_ms, t0) on the way. `dup_ranges`: the input
        ranges (harness.effects.DupRange) whose duplicates are expected, counted apart as they are found."""
        self._dup_ranges = np.array([(r.partition, r.start, r.end) for r in dup_ranges or ()],
                                    dtype=np.int64).reshape(-1, 3)
        gens = tuple(sorted(float(g) for g in generations_ms))
        if self._no_id:
            raise ValueError(f"{self._no_id} sink rows without an event id (null producer or seq): not accountable")
        if self._fresh:
            self._generations = gens
            if self.acks_staged.rows or self.sink_staged.rows:
                self._bulk_pass(latency or (None, None))
            return
        if self._bulk is not None:  # the incremental path from here: its tables get the whole history
            self.con.execute("DELETE FROM pending_acks; DELETE FROM pending_first; DELETE FROM order_groups; "
                             "DELETE FROM unplaced")
            self._bulk = None
        self._unstage()
        if gens != self._generations:
            self._generations = gens
            if self.count("delivered"):
                self.con.execute(f"UPDATE delivered SET gen = {self._gen_sql('ack_ms')}", list(gens))
                self._order_dirty = True
        if self.count("sink_new"):
            for lo, hi in self._key_ranges(["sink_new"]):
                self._first_deliveries(lo, hi)
            self.con.execute("DELETE FROM sink_new")
        for lo, hi in self._key_ranges(["pending_acks", "pending_first"]):
            if self._match(lo, hi) and not self._order_dirty:
                self._order_incremental()
            self.con.execute("DROP TABLE IF EXISTS m")
        if self._order_dirty:
            self._order_full()
            self._order_dirty = False

    def _insert(self, table: str, cols: dict[str, np.ndarray], select: str = "*") -> None:
        self.con.register("_rows_in", pa.table(cols))
        try:
            self.con.execute(f"INSERT INTO {table} SELECT {select} FROM _rows_in")
        finally:
            self.con.unregister("_rows_in")

    # a staged ack as a pending_acks row (the publish delay's bucket from its index: histsummary.bucket_value)
    _ACKS_SELECT = f"""key, arid, (key & {MASK})::INTEGER, key >> {PRODUCER_BITS}, partition, "offset", intended_ms,
        ack_ms, (pub::BIGINT & 2047) << (pub::BIGINT >> 11)"""

    def _bulk_pass(self, latency: tuple[float | None, float | None]) -> None:
        """Everything staged in one pass (harness.reconcile.bulk): the pending tables get what is unmatched, the order
        groups their state; delivered events are counted (misplaced ones too, where the ack named a position) and
        their latency counted (for `latency`: measured_from_ms, t0), the staged runs kept (for ack_count and a later
        replay)."""
        result = {"delivered": 0, "misplaced": 0}
        lat_args = self._latency_args(*latency)
        counts = LatencyCounts(*lat_args)
        order = bulk.OrderState()
        gens = self._generations or ()
        lone: dict[str, list[dict]] = {"pending_acks": [], "pending_first": [], "unplaced": []}

        def insert_lone(at_least: int) -> None:  # a few statements, not one per range (each costs ~50 ms)
            for table, parts in lone.items():
                if parts and sum(len(p["key"]) for p in parts) >= at_least:
                    self._insert(table, {c: np.concatenate([p[c] for p in parts]) for c in parts[0]},
                                 self._ACKS_SELECT if table == "pending_acks" else "*")
                    parts.clear()

        for r in bulk.matched_ranges(self.acks_staged, self.sink_staged, gens, self._range_rows,
                                     lat_args, workers=self._workers, dup_ranges=self._dup_ranges):
            self.expected_duplicates += r.expected_duplicates
            for table, part in (("pending_acks", r.lone_acks), ("pending_first", r.lone_first),
                                ("unplaced", r.unplaced)):
                if part is not None and len(part["key"]):
                    lone[table].append(part)
            insert_lone(CHUNK_ROWS)
            result["delivered"] += r.delivered
            result["misplaced"] += r.misplaced
            if r.duplicate_commits is not None:
                for at, n in zip(*r.duplicate_commits):
                    self.duplicate_commits[float(at)] = self.duplicate_commits.get(float(at), 0) + int(n)
            if r.latency is not None:
                counts.merge(r.latency)
            order.merge(r.order)
        insert_lone(1)
        self._fresh = False
        self._bulk = result
        self._bulk["latency"] = (latency, self._bulk_latency(counts, lat_args))
        groups = order.frame()
        self._insert("order_groups", {c: groups[c].to_numpy() for c in groups.columns})
        if order.dirty:  # groups whose rows came out of key order across ranges: their rows again, sorted whole
            self.con.execute("CREATE TEMP TABLE order_rows(producer INTEGER, part BIGINT, gen INTEGER, off BIGINT, "
                             "arid BIGINT, seq BIGINT)")
            dirty = np.array(sorted(order.dirty), dtype=np.int64).reshape(-1, 3)
            for r in bulk.matched_ranges(self.acks_staged, self.sink_staged, gens, self._range_rows, None, dirty,
                                         workers=self._workers):
                if r.rows is not None and len(r.rows["key"]):
                    self._insert("order_rows", {"producer": r.rows["producer"], "part": r.rows["s_part"],
                                                "gen": r.rows["gen"], "off": r.rows["s_off"],
                                                "arid": r.rows["arid"], "seq": r.rows["seq"]})
            self.con.execute("INSERT INTO order_groups " + self._ORDER_AGG.format(rows="SELECT * FROM order_rows"))
            self.con.execute("DROP TABLE order_rows")

    def _unstage(self) -> None:
        """Staged history into the tables the incremental path works on."""
        for runs, table, select in ((self.acks_staged, "pending_acks", self._ACKS_SELECT),
                                    (self.sink_staged, "sink_new", "*")):
            for run in runs.read_all():
                self.con.register("_run", run)
                try:
                    self.con.execute(f"INSERT INTO {table} SELECT {select} FROM _run")
                finally:
                    self.con.unregister("_run")
            runs.clear()

    def _key_ranges(self, tables: list[str]) -> list[tuple[int, int]]:
        """[lo, hi) key ranges covering the keys the tables share, each about RANGE_ROWS rows of the largest
        (keys are seq-major, so equal widths hold about equal numbers of events)."""
        lo, hi, n = None, None, 0
        for table in tables:
            count, t_lo, t_hi = self.con.execute(f"SELECT count(*), min(key), max(key) FROM {table}").fetchall()[0]
            if not count:
                return []
            lo, hi = (t_lo, t_hi) if lo is None else (max(lo, t_lo), min(hi, t_hi))
            n = max(n, count)
        if lo is None or lo > hi:
            return []
        k = -(-n // RANGE_ROWS)
        edges = [lo + (hi + 1 - lo) * i // k for i in range(k + 1)]
        return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]

    def _gen_sql(self, col: str) -> str:
        """Generation of an event: how many declared topic recreations happened at or before its ack (the
        reference's searchsorted(..., side='right')); parameters: the generation times."""
        return " + ".join([f"({col} >= ?::DOUBLE)::INTEGER" for _ in self._generations or ()]) or "0"

    def _first_deliveries(self, lo: int, hi: int) -> None:
        """The new sink rows' first deliveries (earliest commit, then the sink log's order) that are new keys go
        to pending_first; every other row is a duplicate (counted as sink rows minus distinct keys). A new row
        committed earlier than a known key's first delivery (a clock step) takes its place."""
        con = self.con
        no_id = self.count("sink_new", "key IS NULL")
        if no_id:
            raise ValueError(f"{no_id} sink rows without an event id (null producer or seq): not accountable")
        # most keys arrive once: only those seen more than once need the (slower) earliest-row aggregate
        con.execute("""CREATE OR REPLACE TEMP TABLE new_rows AS SELECT * FROM sink_new
            WHERE key >= ? AND key < ?""", [lo, hi])
        con.execute("CREATE OR REPLACE TEMP TABLE twice AS SELECT key FROM new_rows GROUP BY key HAVING count(*) > 1")
        con.execute("""CREATE OR REPLACE TEMP TABLE cand AS SELECT * FROM new_rows ANTI JOIN twice USING (key)
            UNION ALL SELECT key, arg_min(partition, (commit_ms, rid)), arg_min("offset", (commit_ms, rid)),
                min(commit_ms), arg_min(rid, (commit_ms, rid)) FROM new_rows SEMI JOIN twice USING (key) GROUP BY key""")
        con.execute("DROP TABLE twice")
        if len(self._dup_ranges):  # rows in a declared range beyond the first of their event: expected duplicates
            con.register("_dups", pd.DataFrame(self._dup_ranges, columns=["p", "lo", "hi"]))
            try:
                within = 'EXISTS (SELECT 1 FROM _dups r WHERE r.p = x.partition AND x."offset" >= r.lo AND x."offset" < r.hi)'
                rows = self.count("new_rows x", within)
                new_keys = self.count("cand x", within + """ AND NOT EXISTS (SELECT 1 FROM delivered d WHERE d.key = x.key)
                    AND NOT EXISTS (SELECT 1 FROM pending_first f WHERE f.key = x.key)""")
                self.expected_duplicates += rows - new_keys
            finally:
                con.unregister("_dups")
        con.execute("DROP TABLE new_rows")
        earlier = con.execute("""SELECT count(*) FROM cand c JOIN delivered d USING (key)
            WHERE c.commit_ms < d.commit_ms""").fetchall()[0][0]
        if earlier:
            con.execute(f"""UPDATE delivered d SET s_part = c.partition, s_off = c."offset", commit_ms = c.commit_ms,
                lat_b = {bucket_sql('c.commit_ms - d.intended_ms')} FROM cand c WHERE c.key = d.key AND c.commit_ms < d.commit_ms""")
            self._order_dirty = True
        con.execute("""UPDATE pending_first f SET partition = c.partition, "offset" = c."offset",
            commit_ms = c.commit_ms, rid = c.rid FROM cand c WHERE c.key = f.key AND c.commit_ms < f.commit_ms""")
        con.execute("""INSERT INTO pending_first SELECT * FROM cand c
            WHERE NOT EXISTS (SELECT 1 FROM delivered d WHERE d.key = c.key)
              AND NOT EXISTS (SELECT 1 FROM pending_first f WHERE f.key = c.key)""")
        con.execute("DROP TABLE cand")

    def _match(self, lo: int, hi: int) -> int:
        """Pending acks meeting pending first deliveries (keys in [lo, hi)) become delivered events (temp table
        m: this range's)."""
        con = self.con
        con.execute(f"""CREATE OR REPLACE TEMP TABLE m AS SELECT a.key, a.arid, a.producer, a.seq,
            a.partition AS a_part, a."offset" AS a_off, f.partition AS s_part, f."offset" AS s_off, a.intended_ms,
            a.ack_ms, f.commit_ms, {self._gen_sql('a.ack_ms')} AS gen,
            {bucket_sql('f.commit_ms - a.intended_ms')} AS lat_b, a.pub_b
            FROM pending_acks a JOIN pending_first f USING (key)
            WHERE a.key >= ? AND a.key < ? AND f.key >= ? AND f.key < ?""",
                    list(self._generations or ()) + [lo, hi, lo, hi])
        n = self.count("m")
        if n:
            con.execute("INSERT INTO delivered SELECT * FROM m")
            for table in ("pending_acks", "pending_first"):
                con.execute(f"""DELETE FROM {table} WHERE key >= ? AND key < ?
                    AND key IN (SELECT key FROM m)""", [lo, hi])
        return n

    _ORDER_AGG = """SELECT producer, part, gen, count(*) FILTER (WHERE seq <= prev) AS violations,
        arg_max(off, (off, arid)) AS tail_off, arg_max(arid, (off, arid)) AS tail_arid,
        arg_max(seq, (off, arid)) AS tail_seq FROM (
          SELECT producer, part, gen, off, arid, seq,
                 lag(seq) OVER (PARTITION BY producer, part, gen ORDER BY off, arid) AS prev FROM ({rows}))
        GROUP BY producer, part, gen"""

    def _order_full(self) -> None:
        """Every group re-sorted, a partition at a time (bounded memory)."""
        rows = "SELECT producer, s_part AS part, gen, s_off AS off, arid, seq FROM delivered WHERE {where}"
        con = self.con
        con.execute("CREATE OR REPLACE TABLE order_groups AS " + self._ORDER_AGG.format(rows=rows.format(where="false")))
        for (part,) in con.execute("SELECT DISTINCT s_part FROM delivered").fetchall():
            con.execute("INSERT INTO order_groups " + self._ORDER_AGG.format(rows=rows.format(where="s_part = ?")),
                        [part])

    def _order_incremental(self) -> None:
        """A group whose new deliveries all sort after its tail (the usual case: later offsets) adds the new
        pairs, the tail's included; a group with a delivery landing before its tail is re-sorted whole."""
        con = self.con
        con.execute("""CREATE OR REPLACE TEMP TABLE heads AS SELECT h.producer, h.part, h.gen,
            coalesce(h.head <= (g.tail_off, g.tail_arid), false) AS overlap
            FROM (SELECT producer, s_part AS part, gen, min((s_off, arid)) AS head FROM m GROUP BY ALL) h
            LEFT JOIN order_groups g USING (producer, part, gen)""")
        appended = self._ORDER_AGG.format(rows="""
            SELECT g.producer, g.part, g.gen, g.tail_off AS off, g.tail_arid AS arid, g.tail_seq AS seq
              FROM order_groups g JOIN heads h USING (producer, part, gen) WHERE NOT h.overlap
            UNION ALL
            SELECT m.producer, m.s_part, m.gen, m.s_off, m.arid, m.seq FROM m
              JOIN heads h ON h.producer = m.producer AND h.part = m.s_part AND h.gen = m.gen WHERE NOT h.overlap""")
        redone = self._ORDER_AGG.format(rows="""
            SELECT d.producer, d.s_part AS part, d.gen, d.s_off AS off, d.arid, d.seq FROM delivered d
              JOIN heads h ON h.producer = d.producer AND h.part = d.s_part AND h.gen = d.gen WHERE h.overlap""")
        con.execute(f"""CREATE OR REPLACE TEMP TABLE upd AS
            SELECT a.producer, a.part, a.gen, a.violations + coalesce(g.violations, 0) AS violations,
                   a.tail_off, a.tail_arid, a.tail_seq
              FROM ({appended}) a LEFT JOIN order_groups g USING (producer, part, gen)
            UNION ALL {redone}""")
        con.execute("""DELETE FROM order_groups g WHERE EXISTS (SELECT 1 FROM upd u WHERE u.producer = g.producer
            AND u.part = g.part AND u.gen = g.gen)""")
        con.execute("INSERT INTO order_groups SELECT * FROM upd")
        con.execute("DROP TABLE upd; DROP TABLE heads")

    # ---------------------------------------------------------------------------------------------- queries
    def count(self, table: str, where: str = "TRUE", params: list | None = None) -> int:
        return int(self.con.execute(f"SELECT count(*) FROM {table} WHERE {where}", params or []).fetchall()[0][0])

    def ack_count(self, *, producer_below: int | None = None, ok_only: bool = False,
                  intended_from_ms: float | None = None) -> int:
        """History rows matching a filter (every row is staged, pending, delivered or failed)."""
        where, params = ["TRUE"], []
        if producer_below is not None:
            where.append("producer < ?")
            params.append(int(producer_below))
        if intended_from_ms is not None:
            where.append("intended_ms >= ?::DOUBLE")
            params.append(float(intended_from_ms))
        cond = " AND ".join(where)
        n = self.acks_staged.count(producer_below, intended_from_ms, PRODUCER_BITS)
        if self._bulk is None:  # else the pending acks are staged rows too
            n += self.count("pending_acks", cond, params) + self.count("delivered", cond, params)
        return n if ok_only else n + self.count("failed", cond, params)

    def delivered_count(self) -> int:
        return self._bulk["delivered"] if self._bulk is not None else self.count("delivered")

    def misplaced_count(self, placed_sql: str, part_sql: str, off_sql: str) -> int:
        """Delivered events not where their ack (or, for sends that reported no position, the placements) put
        them; the SQL pieces (harness.reconcile._judge) join a delivered relation `a` with the placements."""
        rel, n = "delivered", 0
        if self._bulk is not None:
            rel, n = "unplaced", self._bulk["misplaced"]
        return n + self.count(f"(SELECT {part_sql} AS ap, {off_sql} AS ao, a.s_part, a.s_off FROM {rel} a {placed_sql})",
                               "(ap >= 0 AND ap <> s_part) OR (ao >= 0 AND ao <> s_off)")

    def _latency_args(self, measured_from_ms: float | None, t0: float | None, windows: int = 10) -> tuple:
        """LatencyCounts' arguments for a bulk pass: the spans' edges from the extent of the acks (a delivered
        event's intended time is its ack's), checked against the delivered events' at the end."""
        extent = measured_extent(self.acks_staged.column("intended_ms"), measured_from_ms)
        return measured_from_ms, t0, windows, window_edges(extent, windows)

    def _bulk_latency(self, counts: LatencyCounts, args: tuple) -> LatencySummary:
        """The summary from a bulk pass's counts; when the first or last measured ack was not delivered, the spans'
        edges were not the delivered events' and the events are counted again with theirs."""
        measured_from_ms, t0, windows, edges = args
        actual = window_edges(counts.extent, windows)
        if (edges is None) != (actual is None) or (actual is not None and not np.array_equal(edges, actual)):
            if actual is None:
                counts.spans, counts.edges = None, None
            else:
                counts = LatencyCounts(measured_from_ms, t0, windows, actual)
                for r in bulk.matched_ranges(self.acks_staged, self.sink_staged, self._generations or (),
                                             self._range_rows, (measured_from_ms, t0, windows, actual),
                                             workers=self._workers):
                    if r.latency is not None:
                        counts.merge(r.latency)
        return counts.summary()

    def latency_summary(self, measured_from_ms: float | None = None, t0: float | None = None,
                        windows: int = 10) -> LatencySummary:
        """harness.records.histsummary.summarize over the delivered events: counted by the bulk pass (or, asked for
        another window, by another pass over the staged runs), or the delivered table's a chunk at a time."""
        if self._bulk is not None:
            asked, summary = self._bulk["latency"]
            if asked == (measured_from_ms, t0) and windows == 10:
                return summary
            args = self._latency_args(measured_from_ms, t0, windows)
            counts = LatencyCounts(*args)
            for r in bulk.matched_ranges(self.acks_staged, self.sink_staged, self._generations or (),
                                         self._range_rows, args, workers=self._workers):
                if r.latency is not None:
                    counts.merge(r.latency)
            return self._bulk_latency(counts, args)

        def chunks():
            reader = self.con.sql("SELECT intended_ms, commit_ms, lat_b, pub_b FROM delivered").to_arrow_reader(
                CHUNK_ROWS)
            for batch in reader:
                i, c, lat, pub = (batch.column(k).to_numpy() for k in range(4))
                yield i, c, bucket_index(lat), bucket_index(pub)

        return summarize(chunks, measured_from_ms, t0, windows)

    def close(self) -> None:
        try:
            self.acks_staged.close()
            self.sink_staged.close()
            self.con.close()
        finally:
            if self._own_dir:
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ReconcileStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _prepare_acks(table: pa.Table, arid0: int) -> tuple[int, int, pa.Table | None, dict | None]:
    """History rows as staged acks (bulk.ACK_SCHEMA's columns, arid from arid0 in row order) and the failed
    sends: (rows, acked, failed rows, staged columns)."""
    n = table.num_rows
    _check_ids(table)
    arid = np.arange(arid0, arid0 + n, dtype=np.int64)
    ok = _acked(table["error"])
    acked = int(ok.sum())
    failed = None
    if acked < n:
        failed = table.filter(pa.array(~ok)).select(["producer", "intended_ms", "ack_ms", "error"])
        table, arid = table.filter(pa.array(ok)), arid[ok]
    if not acked:
        return n, 0, failed, None

    def col(name, dtype):
        return table[name].to_numpy().astype(dtype, copy=False)

    intended, ack = col("intended_ms", np.float64), col("ack_ms", np.float64)
    # the produce call happened latency_us before the ack
    produce = (col("produce_ms", np.float64) if "produce_ms" in table.column_names
               else ack - col("latency_us", np.float64) / 1000.0)
    return n, acked, failed, {
        "key": (col("seq", np.int64) << PRODUCER_BITS) | col("producer", np.int64), "arid": arid,
        "partition": col("partition", np.int32), "offset": col("offset", np.int64), "intended_ms": intended,
        "ack_ms": ack, "pub": bucket_index_ms(produce - intended)}


def _read_sink_file(name: str) -> pa.Table:
    pf = pq.ParquetFile(name)
    _check_columns(name, pf.schema_arrow.names)
    return pf.read(columns=list(EVENT_ID_COLUMNS), use_threads=False)


def _event_columns(name: str, table: pa.Table) -> pa.Table:
    _check_columns(name, table.column_names)
    return table.select(list(EVENT_ID_COLUMNS))


def _check_columns(name: str, present: list[str]) -> None:
    missing = [c for c in list(EVENT_ID_COLUMNS) if c not in present]
    if missing:
        raise ValueError(f"sink file {name} lacks the column(s) {', '.join(missing)}")


def _prepare_sink(t: pa.Table, commit_ms, rid0: int) -> tuple[int, int, dict | None]:
    """Sink rows as staged ones (bulk.SINK_SCHEMA's columns, rid from rid0 in row order): (rows with an event
    id, rows without, staged columns)."""
    n, no_id = t.num_rows, 0
    if t["producer"].null_count or t["seq"].null_count:
        ok = pc.and_(pc.is_valid(t["producer"]), pc.is_valid(t["seq"]))
        no_id = n - (pc.sum(ok).as_py() or 0)
        t = t.filter(ok)
        if isinstance(commit_ms, np.ndarray):
            commit_ms = commit_ms[np.asarray(ok)]
        n = t.num_rows
    if not n:
        return 0, no_id, None
    seq, producer = t["seq"].to_numpy().astype(np.int64), t["producer"].to_numpy().astype(np.int64)
    return n, no_id, {"key": (seq << PRODUCER_BITS) | producer,
                      "partition": t["partition"].to_numpy(zero_copy_only=False).astype(np.int64),
                      "offset": t["offset"].to_numpy(zero_copy_only=False).astype(np.int64),
                      "commit_ms": np.broadcast_to(np.asarray(commit_ms, dtype=np.float64), (n,)).copy(),
                      "rid": rid0 + np.arange(n, dtype=np.int64)}


def _acked(error: pa.ChunkedArray) -> np.ndarray:
    """error == "" (null: not acked), from the strings' offsets: an empty string is one of no length."""
    parts = []
    for chunk in error.chunks:
        if pa.types.is_large_string(chunk.type) or pa.types.is_string(chunk.type):
            width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
            offsets = np.frombuffer(chunk.buffers()[1], dtype=width)[chunk.offset: chunk.offset + len(chunk) + 1]
            ok = offsets[1:] == offsets[:-1]
            if chunk.null_count:
                ok &= chunk.is_valid().to_numpy(zero_copy_only=False)
        else:
            ok = pc.fill_null(pc.equal(chunk, ""), False).to_numpy(zero_copy_only=False)
        parts.append(ok)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _check_ids(table: pa.Table) -> None:
    for col, hi in (("producer", 1 << PRODUCER_BITS), ("seq", MAX_SEQ)):
        if table[col].null_count:
            raise ValueError(f"{table[col].null_count} history rows without {col}: not accountable")
        values = table[col].to_numpy()
        lo_v, hi_v = int(values.min()), int(values.max())
        if lo_v < 0 or hi_v >= hi:
            raise ValueError(f"history {col} outside [0, {hi}): {lo_v}..{hi_v} (the checker packs producer and "
                             f"seq into one key)")
