"""The checker's engine: an out-of-core, incremental reconciliation of the producers' history with the sink, in a
DuckDB database file on disk (memory_limit bounded, spilling to its temp directory), so hours of traffic fit.

Nothing of the raw history is kept: each ack and each first delivery waits in a *pending* table until its other
half arrives, then both move to `delivered` (one row per event delivered). A soak adds new ack batches and new
sink batches as the run goes and reconciles every ~30 s; each reconcile joins only what is pending (the acks the
sink has not shown yet, the deliveries whose ack has not been flushed yet) and what arrived since the last one,
never the whole history again. What stays whole-history is cheap: column scans of `delivered` (misplaced rows,
the latency histograms) and the per-(producer, partition, generation) order state, which keeps a tail row per
group and only re-sorts a group when a new delivery lands before its tail.

The verdict is the same as the pandas reference (tests/unit/reference_reconcile.py, today's checker) on the
same history; see harness.checker.reconcile for the rules. One assumption, true of every history the producers
write: (producer, seq) identifies one event (one ack row each), with 0 <= producer < 2^20 and 0 <= seq < 2^43
(packed into one BIGINT key, seq-major, so a reconcile's new keys fall in a narrow key range and DuckDB skips the
row groups of older ones).
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from harness.histsummary import Hist, LatencySummary, windows_from

PRODUCER_BITS = 20
MAX_SEQ = 1 << 43
CHUNK_ROWS = 1 << 21  # ack rows handed to DuckDB at a time (bounded memory while ingesting)
RANGE_ROWS = 4_000_000  # rows joined or grouped at a time: one key range each, so memory is bounded at any size

_SCHEMA = """
CREATE TABLE pending_acks(key BIGINT, arid BIGINT, producer INTEGER, seq BIGINT, partition INTEGER, "offset" BIGINT,
                          intended_ms DOUBLE, ack_ms DOUBLE, produce_ms DOUBLE);
CREATE TABLE failed(producer INTEGER, intended_ms DOUBLE, ack_ms DOUBLE, is_error BOOLEAN);
CREATE TABLE sink_new(key BIGINT, partition BIGINT, "offset" BIGINT, commit_ms DOUBLE, rid BIGINT);
CREATE TABLE pending_first(key BIGINT, partition BIGINT, "offset" BIGINT, commit_ms DOUBLE, rid BIGINT);
CREATE TABLE delivered(key BIGINT, arid BIGINT, producer INTEGER, seq BIGINT, a_part INTEGER, a_off BIGINT,
                       s_part BIGINT, s_off BIGINT, intended_ms DOUBLE, produce_ms DOUBLE, ack_ms DOUBLE,
                       commit_ms DOUBLE, gen INTEGER, lat_b BIGINT, pub_b BIGINT);
CREATE TABLE order_groups(producer INTEGER, part BIGINT, gen INTEGER, violations BIGINT, tail_off BIGINT,
                          tail_arid BIGINT, tail_seq BIGINT);
CREATE TABLE placements(key BIGINT, partition BIGINT, "offset" BIGINT);
"""

# the microsecond value (percentiles_ms: rint, clipped to [1 us, 1 h]) and its HdrHistogram bucket (3 significant
# digits: the lowest value equivalent to it in HdrHistogram(1, 3_600_000_000, 3), whose sub-buckets are 2048 wide)
_US = "least(greatest(round_even(({x}) * 1000::DOUBLE, 0), 1), 3600000000)::BIGINT"
_BUCKET = "(({v} >> greatest(0, floor(log2({v}))::INTEGER - 10)) << greatest(0, floor(log2({v}))::INTEGER - 10))"


def bucket_sql(ms_expr: str) -> str:
    """SQL for the HdrHistogram bucket (lowest equivalent microsecond value) of a millisecond expression."""
    return _BUCKET.format(v=f"({_US.format(x=ms_expr)})")


class CheckStore:
    """The incremental checker's state in one DuckDB database file under `directory` (or, without one, in
    memory, spilling to a temporary directory removed by close()). add_acks / add_sink_batch / add_sink_frame
    queue new history; reconcile() (harness.checker) brings
    the state up to date and judges it."""

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

    # ---------------------------------------------------------------------------------------------- ingestion
    def add_acks(self, batches: Iterable[pa.RecordBatch]) -> int:
        """New history rows (ACK_SCHEMA record batches, or any with producer, seq, partition, offset, intended_ms,
        ack_ms, error and latency_us or produce_ms), in the order they were written. Returns the rows added."""
        n = 0
        chunk: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            if batch.num_rows:
                chunk.append(batch)
                rows += batch.num_rows
            if rows >= CHUNK_ROWS:
                n += self._add_ack_table(pa.Table.from_batches(chunk))
                chunk, rows = [], 0
        if chunk:
            n += self._add_ack_table(pa.Table.from_batches(chunk))
        return n

    def add_acks_frame(self, acks: pd.DataFrame) -> int:
        cols = [c for c in ("producer", "seq", "partition", "offset", "intended_ms", "ack_ms", "latency_us",
                            "produce_ms", "error") if c in acks.columns]
        frame = acks[cols].copy()
        frame["error"] = frame["error"].astype(object).where(frame["error"].notna(), None)
        return self._add_ack_table(pa.Table.from_pandas(frame, preserve_index=False))

    def _add_ack_table(self, table: pa.Table) -> int:
        n = table.num_rows
        if not n:
            return 0
        if "produce_ms" not in table.column_names:  # the produce call happened latency_us before the ack
            produce = pc.subtract(table["ack_ms"], pc.divide(pc.cast(table["latency_us"], pa.float64()), 1000.0))
            table = table.append_column("produce_ms", produce)
        _check_ids(table)
        t = table.append_column("arid", pa.array(np.arange(self._arid, self._arid + n, dtype=np.int64)))
        self._arid += n
        con = self.con
        con.register("_acks_in", t)
        try:
            con.execute(f"""INSERT INTO pending_acks SELECT (seq::BIGINT << {PRODUCER_BITS}) | producer::BIGINT,
                arid, producer::INTEGER, seq::BIGINT, partition::INTEGER, "offset"::BIGINT, intended_ms::DOUBLE,
                ack_ms::DOUBLE, produce_ms::DOUBLE FROM _acks_in WHERE error = ''""")
            con.execute("""INSERT INTO failed SELECT producer::INTEGER, intended_ms::DOUBLE, ack_ms::DOUBLE,
                error <> '' FROM _acks_in WHERE error IS NULL OR error <> ''""")
            ok = con.execute("SELECT count(*) FROM _acks_in WHERE error = ''").fetchall()[0][0]
        finally:
            con.unregister("_acks_in")
        self.produced += n
        self.acked += int(ok)
        return n

    def add_sink_batch(self, batch_id: int, commit_ms: float, files: list[str]) -> int:
        """One committed sink batch (harness.sink.batch_log): its Parquet files, read by DuckDB without pandas.
        Returns the rows added. A file lacking a required column is an error."""
        if not files:
            self._sink_ord += 1
            return 0
        index = pd.DataFrame({"filename": files, "fidx": np.arange(len(files), dtype=np.int64)})
        con = self.con
        con.register("_files", index)
        base = self._sink_ord << 40
        try:
            before = self._count("sink_new")
            con.execute(f"""INSERT INTO sink_new SELECT (p.seq::BIGINT << {PRODUCER_BITS}) | p.producer::BIGINT,
                p.partition::BIGINT, p."offset"::BIGINT, ?::DOUBLE, ? + (coalesce(f.fidx, error('a sink file read '
                || 'back under another name: ' || p.filename)) << 28) + p.file_row_number
                FROM read_parquet(?, filename = true, file_row_number = true) p LEFT JOIN _files f USING (filename)""",
                        [float(commit_ms), base, list(files)])
            added = self._count("sink_new") - before
        finally:
            con.unregister("_files")
        self._sink_ord += 1
        self.sink_rows += added
        return added

    def add_sink_frame(self, sink: pd.DataFrame) -> int:
        """Sink rows as a frame (producer, seq, partition, offset, commit_ms), in the sink log's order."""
        n = len(sink)
        if not n:
            return 0
        frame = pd.DataFrame({c: sink[c].to_numpy() for c in ("producer", "seq", "partition", "offset",
                                                              "commit_ms")})
        frame["rid"] = (self._sink_ord << 40) + np.arange(n, dtype=np.int64)
        self._sink_ord += 1
        self.con.register("_sink_in", frame)
        try:
            self.con.execute(f"""INSERT INTO sink_new SELECT (seq::BIGINT << {PRODUCER_BITS}) | producer::BIGINT,
                partition::BIGINT, "offset"::BIGINT, commit_ms::DOUBLE, rid FROM _sink_in""")
        finally:
            self.con.unregister("_sink_in")
        self.sink_rows += n
        return n

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
    def advance(self, generations_ms: list[float]) -> None:
        """Bring the state up to date: first deliveries of the new sink rows, acks matched with deliveries, order
        state per (producer, partition, generation)."""
        gens = tuple(sorted(float(g) for g in generations_ms))
        if gens != self._generations:
            self._generations = gens
            if self._count("delivered"):
                self.con.execute(f"UPDATE delivered SET gen = {self._gen_sql('ack_ms')}", list(gens))
                self._order_dirty = True
        if self._count("sink_new"):
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
        no_id = self._count("sink_new", "key IS NULL")
        if no_id:
            raise ValueError(f"{no_id} sink rows without an event id (null producer or seq): not accountable")
        # most keys arrive once: only those seen more than once need the (slower) earliest-row aggregate
        con.execute("""CREATE OR REPLACE TEMP TABLE new_rows AS SELECT * FROM sink_new
            WHERE key >= ? AND key < ?""", [lo, hi])
        con.execute("CREATE OR REPLACE TEMP TABLE twice AS SELECT key FROM new_rows GROUP BY key HAVING count(*) > 1")
        con.execute("""CREATE OR REPLACE TEMP TABLE cand AS SELECT * FROM new_rows ANTI JOIN twice USING (key)
            UNION ALL SELECT key, arg_min(partition, (commit_ms, rid)), arg_min("offset", (commit_ms, rid)),
                min(commit_ms), arg_min(rid, (commit_ms, rid)) FROM new_rows SEMI JOIN twice USING (key) GROUP BY key""")
        con.execute("DROP TABLE twice; DROP TABLE new_rows")
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
            a.produce_ms, a.ack_ms, f.commit_ms, {self._gen_sql('a.ack_ms')} AS gen,
            {bucket_sql('f.commit_ms - a.intended_ms')} AS lat_b, {bucket_sql('a.produce_ms - a.intended_ms')} AS pub_b
            FROM pending_acks a JOIN pending_first f USING (key)
            WHERE a.key >= ? AND a.key < ? AND f.key >= ? AND f.key < ?""",
                    list(self._generations or ()) + [lo, hi, lo, hi])
        n = self._count("m")
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
    def _count(self, table: str, where: str = "TRUE", params: list | None = None) -> int:
        return int(self.con.execute(f"SELECT count(*) FROM {table} WHERE {where}", params or []).fetchall()[0][0])

    def ack_count(self, *, producer_below: int | None = None, ok_only: bool = False,
                  intended_from_ms: float | None = None) -> int:
        """History rows matching a filter (every row is pending, delivered or failed)."""
        where, params = ["TRUE"], []
        if producer_below is not None:
            where.append("producer < ?")
            params.append(int(producer_below))
        if intended_from_ms is not None:
            where.append("intended_ms >= ?::DOUBLE")
            params.append(float(intended_from_ms))
        cond = " AND ".join(where)
        n = self._count("pending_acks", cond, params) + self._count("delivered", cond, params)
        return n if ok_only else n + self._count("failed", cond, params)

    def latency_summary(self, measured_from_ms: float | None = None, t0: float | None = None,
                        windows: int = 10) -> LatencySummary:
        """The delivered events' latency (sink commit - intended) and publish delay (produce call - intended) in
        HdrHistogram buckets: the measured window's (intended at or after measured_from_ms; all without one) and
        the warm-up's, the measured window cut in `windows` spans of intended time (reports.compare
        latency_windows: fewer than 10 events a window gives none), and per second since t0 of intended time
        (all events) with the events made visible per second of commit time (reports.series)."""
        con = self.con
        measured = "TRUE" if measured_from_ms is None else "intended_ms >= ?::DOUBLE"
        mparams = [] if measured_from_ms is None else [float(measured_from_ms)]
        n, lo, hi = con.execute(f"SELECT count(*), min(intended_ms), max(intended_ms) FROM delivered WHERE {measured}",
                                mparams).fetchall()[0]
        split = n >= windows * 10
        edges = np.linspace(float(lo), float(hi), windows + 1) if split else np.zeros(0)
        which = (" + ".join(["(intended_ms >= ?::DOUBLE)::INTEGER"] * len(edges)) + f" - 1, 0), {windows - 1})"
                 if split else "0, 0), 0)")
        sec = "floor(intended_ms / 1000::DOUBLE - ?::DOUBLE)::BIGINT" if t0 is not None else "0"
        # one pass: events per (measured, window, second, latency bucket); the splits are sums of it
        rows = con.execute(f"""SELECT ({measured}) AS m, least(greatest({which} AS w, {sec} AS s, lat_b AS b,
            count(*) AS n FROM delivered GROUP BY ALL ORDER BY m, w, b""",
                           mparams + [float(e) for e in edges] + ([float(t0)] if t0 is not None else [])).fetchnumpy()
        m, w, s, b, cnt = (np.asarray(rows[k]) for k in ("m", "w", "s", "b", "n"))
        m = m.astype(bool) if len(m) else np.zeros(0, dtype=bool)
        pub = con.execute(f"SELECT pub_b AS b, count(*) AS n FROM delivered WHERE {measured} GROUP BY b",
                          mparams).fetchnumpy()
        out = LatencySummary(latency=_hist(b[m], cnt[m]), publish_delay=Hist.from_rows(pub["b"], pub["n"]))
        if measured_from_ms is not None:
            out.warmup_latency = _hist(b[~m], cnt[~m])
            out.warmup_delivered = out.warmup_latency.total
        if split:
            out.windows = windows_from(edges, *_sum_by(w[m], b[m], cnt[m]))
        if t0 is not None:
            ps, pb, pn = _sum_by(s, b, cnt)
            vis = con.execute("""SELECT floor((intended_ms + (commit_ms - intended_ms)) / 1000::DOUBLE - ?::DOUBLE)::BIGINT
                AS s, count(*) AS n FROM delivered GROUP BY s ORDER BY s""", [float(t0)]).fetchnumpy()
            out.per_second = {"s": ps, "bucket_us": pb, "n": pn, "visible_s": vis["s"], "visible_n": vis["n"]}
        return out

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            if self._own_dir:
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> CheckStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sum_by(group: np.ndarray, bucket: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts summed per (group, bucket), sorted by both."""
    if not len(n):
        return (np.zeros(0, dtype=np.int64),) * 3
    keys, inverse = np.unique(np.stack([group.astype(np.int64), bucket.astype(np.int64)]), axis=1,
                              return_inverse=True)
    return keys[0], keys[1], np.bincount(inverse.ravel(), weights=n, minlength=keys.shape[1]).astype(np.int64)


def _hist(bucket: np.ndarray, n: np.ndarray) -> Hist:
    _, b, c = _sum_by(np.zeros(len(n), dtype=np.int64), bucket, n)
    return Hist(b, c)


def _check_ids(table: pa.Table) -> None:
    for col, hi in (("producer", 1 << PRODUCER_BITS), ("seq", MAX_SEQ)):
        if table[col].null_count:
            raise ValueError(f"{table[col].null_count} history rows without {col}: not accountable")
        mm = pc.min_max(table[col])
        lo_v, hi_v = mm["min"].as_py(), mm["max"].as_py()
        if lo_v is not None and (lo_v < 0 or hi_v >= hi):
            raise ValueError(f"history {col} outside [0, {hi}): {lo_v}..{hi_v} (the checker packs producer and "
                             f"seq into one key)")

