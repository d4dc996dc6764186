"""The reconciler's bulk pass: a store's first reconcile (a run's verdict: its only one), over all the history added
so far, in numpy a key range at a time (harness.reconcile.store keeps the incremental state of later reconciles in
DuckDB).

Moving every event through DuckDB's tables (insert, join, delete, window) costs several microseconds an event; a
binary search in sorted numpy arrays a fraction of one. So new history is *staged* here, not inserted: ack rows and
sink rows go to sorted runs (`Runs`: Arrow IPC files of up to CHUNK_ROWS rows each, sorted by key, written in the
background, a key sample kept in memory), and the first reconcile does the whole work in one pass over key ranges
of about RANGE_ROWS rows (`matched_ranges`, two ranges at a time on two threads: numpy and Arrow release the GIL).
Each range is read from every run by binary search on its key column (memory-mapped, copied out, unmapped again),
so memory is bounded by the range, not the history:
- the first delivery per key: earliest commit, then the sink log's order (only keys seen twice need the sort);
- each ack looks its first delivery up by binary search; what stays unmatched goes to the store's pending tables,
  delivered events are counted (misplaced ones too) and their latency counted into histsummary.LatencyCounts;
- the order state per (producer, partition, generation): a range's rows grouped by a radix sort of their group
  id keep their run order, which is (offset, ack order) order in the usual case (checked; a full sort otherwise),
  so violations are one comparison of neighbours; a group whose rows in a later range start before its tail
  (offsets not growing with the key) is re-sorted whole by DuckDB at the end, from a second pass over its rows.
The rules are harness.reconcile's; the property tests hold this pass and the incremental one to the reference.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc

from harness.records.histsummary import LatencyCounts, bucket_index_ms

ACK_SCHEMA = pa.schema([("key", pa.int64()), ("arid", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("intended_ms", pa.float64()), ("ack_ms", pa.float64()), ("pub", pa.uint16())])
SINK_SCHEMA = pa.schema([("key", pa.int64()), ("partition", pa.int64()), ("offset", pa.int64()),
                         ("commit_ms", pa.float64()), ("rid", pa.int64())])
SAMPLES_PER_RANGE = 16  # key samples kept per RANGE_ROWS rows of a run: the ranges' sizes are that precise
PRODUCER_BITS = 20

Columns = dict[str, np.ndarray]


def _empty(schema: pa.Schema) -> Columns:
    return {f.name: np.zeros(0, dtype=f.type.to_pandas_dtype()) for f in schema}


def _take(cols: Columns, which) -> Columns:
    return {k: v[which] for k, v in cols.items()}


def _sorted(cols: Columns) -> Columns:
    key = cols["key"]
    if len(key) > 1 and not (key[1:] >= key[:-1]).all():
        return _take(cols, np.argsort(key, kind="stable"))  # timsort: the concatenated runs merge cheaply
    return cols


def write_ipc(path: Path, schema: pa.Schema, cols: Columns) -> None:
    batch = pa.record_batch([pa.array(cols[f.name], f.type) for f in schema], schema=schema)
    with pa.OSFile(str(path), "wb") as out, ipc.new_file(out, schema) as writer:
        writer.write_batch(batch)


class Runs:
    """Rows staged on disk as sorted runs: appended in any order, written CHUNK_ROWS at a time, each chunk sorted
    by key in one Arrow IPC file; read back a key range at a time."""

    def __init__(self, directory: Path, name: str, schema: pa.Schema, chunk_rows: int, range_rows: int):
        self.dir, self.name, self.schema, self.chunk_rows = directory, name, schema, chunk_rows
        self.step = max(1, range_rows // SAMPLES_PER_RANGE)
        self.runs: list[tuple[Path, int, int, np.ndarray]] = []  # file, first key, last key, every step-th key
        self.rows = 0
        self._buffer: list[Columns] = []
        self._buffered = 0
        self._written = 0
        self._writing: Future | None = None  # the last run's write, in the background (Arrow releases the GIL)
        self._writer = ThreadPoolExecutor(1)

    def append(self, cols: Columns) -> None:
        n = len(cols["key"])
        if n:
            self._buffer.append(cols)
            self._buffered += n
            self.rows += n
            if self._buffered >= self.chunk_rows:
                self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        cols = self._buffer[0] if len(self._buffer) == 1 else {
            f.name: np.concatenate([b[f.name] for b in self._buffer]) for f in self.schema}
        self._buffer, self._buffered = [], 0
        cols = _sorted(cols)
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{self.name}-{self._written:06d}.arrow"
        self._written += 1
        self.wait()  # one run in memory at a time besides the buffer
        self._writing = self._writer.submit(write_ipc, path, self.schema, cols)
        key = cols["key"]
        self.runs.append((path, int(key[0]), int(key[-1]), key[:: self.step].copy()))

    def wait(self) -> None:
        """Every run written (before any is read)."""
        if self._writing is not None:
            self._writing.result()
            self._writing = None

    def read(self, lo: int, hi: int) -> Columns:
        """Every staged row with lo <= key < hi (copied out: no map of the runs stays), in run order: each run's
        rows by key, the runs in the order they were written."""
        self.flush()
        self.wait()
        parts: dict[str, list[np.ndarray]] = {f.name: [] for f in self.schema}
        for path, first, last, _ in self.runs:
            if last < lo or first >= hi:
                continue
            with pa.memory_map(str(path)) as source:
                batch = ipc.open_file(source).get_batch(0)
                i0, i1 = np.searchsorted(batch.column(0).to_numpy(), [lo, hi])
                if i1 > i0:
                    for j, f in enumerate(self.schema):
                        parts[f.name].append(np.array(batch.column(j).to_numpy()[i0:i1]))
                del batch
        if not parts["key"]:
            return _empty(self.schema)
        return {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in parts.items()}

    def count(self, producer_below: int | None, intended_from_ms: float | None, producer_bits: int) -> int:
        """Staged rows (acks) with producer < producer_below and intended_ms >= intended_from_ms (None: any)."""
        self.flush()
        self.wait()
        if producer_below is None and intended_from_ms is None:
            return self.rows
        n = 0
        for path, *_ in self.runs:
            with pa.memory_map(str(path)) as source:
                batch = ipc.open_file(source).get_batch(0)
                keep = np.ones(batch.num_rows, dtype=bool)
                if producer_below is not None:
                    keep &= (batch.column(0).to_numpy() & ((1 << producer_bits) - 1)) < producer_below
                if intended_from_ms is not None:
                    keep &= batch.column(batch.schema.get_field_index("intended_ms")).to_numpy() >= intended_from_ms
                n += int(keep.sum())
                del batch
        return n

    def column(self, name: str) -> Iterator[np.ndarray]:
        """One column of every run, a run at a time: a view into the run's map, valid until the next one."""
        self.flush()
        self.wait()
        for path, *_ in self.runs:
            with pa.memory_map(str(path)) as source:
                batch = ipc.open_file(source).get_batch(0)
                yield batch.column(batch.schema.get_field_index(name)).to_numpy()
                del batch

    def read_all(self) -> list[pa.Table]:
        """The runs whole, one table each (the store's incremental path inserts them)."""
        self.flush()
        self.wait()
        out = []
        for path, *_ in self.runs:
            with pa.OSFile(str(path)) as source:
                out.append(ipc.open_file(source).read_all())
        return out

    def close(self) -> None:
        self.clear()
        self._writer.shutdown()

    def clear(self) -> None:
        self.wait()
        for path, *_ in self.runs:
            path.unlink(missing_ok=True)
        self.runs, self.rows, self._buffer, self._buffered = [], 0, [], 0


def key_ranges(runs: list[Runs], range_rows: int, workers: int = 1) -> list[tuple[int, int]]:
    """[lo, hi) key ranges covering every staged row, about range_rows rows each (from the runs' key samples, each
    standing for `step` rows), and at least two per worker when there are samples enough (a short history keeps
    every worker busy too)."""
    for r in runs:
        r.flush()
        r.wait()
    staged = [run for r in runs for run in r.runs]
    if not staged:
        return []
    lo, hi = min(run[1] for run in staged), max(run[2] for run in staged) + 1
    samples = np.sort(np.concatenate([run[3] for run in staged]))
    step = max(r.step for r in runs)
    per = max(1, min(range_rows // step, len(samples) // (2 * workers)))
    edges = np.unique(samples[per::per])
    bounds = [lo] + [int(e) for e in edges if lo < e < hi] + [hi]
    return list(zip(bounds[:-1], bounds[1:]))


def first_deliveries(sink: Columns) -> np.ndarray:
    """Row numbers of the first delivery of each key, in key order: the earliest commit, ties in the sink log's
    order (rid). Only keys seen more than once need the three-key sort."""
    key = sink["key"]
    order = np.argsort(key, kind="stable")  # timsort: runs merge cheaply
    k = key[order]
    same = k[1:] == k[:-1]
    if not same.any():
        return order
    multi = np.zeros(len(k), dtype=bool)
    multi[1:] |= same
    multi[:-1] |= same
    rows = order[multi]
    rows = rows[np.lexsort((sink["rid"][rows], sink["commit_ms"][rows], key[rows]))]
    firsts = rows[np.r_[True, key[rows][1:] != key[rows][:-1]]]
    merged = np.concatenate([order[~multi], firsts])  # single keys and each duplicated key's first row
    return merged[np.argsort(key[merged], kind="stable")]


Group = tuple[int, int, int]


def order_stats(d: Columns) -> list[tuple[Group, int, tuple[int, int], int, list[int]]]:
    """Per (producer, partition, generation) of one range's delivered rows: (group, violations among them, head
    (offset, ack order), head seq, tail [0, offset, ack order, seq]). Rows come in run order, which within a
    group is (offset, ack order) order in the usual case (checked, else sorted)."""
    n = len(d["key"])
    producer, part, gen = d["producer"], d["s_part"], d["gen"]
    spans = [(int(c.min()), int(c.max())) for c in (producer, part, gen)]
    widths = [hi - lo + 1 for lo, hi in spans]
    if widths[0] * widths[1] * widths[2] < (1 << 15):  # the usual few producers and partitions: arithmetic
        g = ((producer - spans[0][0]).astype(np.int16) * widths[1] + (part - spans[1][0]).astype(np.int16)
             ) * widths[2] + (gen - spans[2][0]).astype(np.int16)
        ng = widths[0] * widths[1] * widths[2]
    else:
        packed = producer.astype(np.int64) | (gen.astype(np.int64) << 20)
        packed = packed | (np.unique(part, return_inverse=True)[1].astype(np.int64) << 28)
        g = pd.factorize(packed, sort=False)[0]
        ng = int(g.max()) + 1
    order = np.argsort(g.astype(np.int16) if ng < (1 << 15) else g, kind="stable")  # 16 bits: a radix sort
    go, off, arid = g[order], d["s_off"][order], d["arid"][order]
    same = go[1:] == go[:-1]
    ordered = (off[1:] > off[:-1]) | ((off[1:] == off[:-1]) & (arid[1:] > arid[:-1]))
    if (same & ~ordered).any():  # some group's offsets do not grow with the key: sort it properly
        order = np.lexsort((d["arid"], d["s_off"], g))
        go, off, arid = g[order], d["s_off"][order], d["arid"][order]
        same = go[1:] == go[:-1]
    seq = d["seq"][order]
    violations = np.bincount(go[1:][same & (seq[1:] <= seq[:-1])], minlength=ng)
    starts = np.flatnonzero(np.r_[True, ~same])
    ends = np.r_[starts[1:] - 1, n - 1]
    rows = order[starts]
    ids = zip(producer[rows].astype(np.int64).tolist(), part[rows].tolist(), gen[rows].astype(np.int64).tolist())
    return [(key, int(violations[gid]), (int(off[h]), int(arid[h])), int(seq[h]),
             [0, int(off[t]), int(arid[t]), int(seq[t])])
            for gid, h, t, key in zip(go[starts].tolist(), starts.tolist(), ends.tolist(), ids)]


class OrderState:
    """Per (producer, partition, generation): violations so far and the tail (offset, ack order, seq) of the rows
    seen in key order; groups whose new rows start before their tail are `dirty` (re-sorted whole at the end)."""

    def __init__(self) -> None:
        self.groups: dict[Group, list[int]] = {}
        self.dirty: set[Group] = set()

    def merge(self, stats) -> None:
        for key, violations, head, head_seq, tail in stats:
            if key in self.dirty:
                continue
            known = self.groups.get(key)
            tail[0] = violations
            if known is None:
                self.groups[key] = tail
            elif head > (known[1], known[2]):
                tail[0] += known[0] + int(head_seq <= known[3])
                self.groups[key] = tail
            else:
                del self.groups[key]
                self.dirty.add(key)

    def frame(self) -> pd.DataFrame:
        rows = [(*k, *v) for k, v in self.groups.items()]
        return pd.DataFrame(rows, columns=["producer", "part", "gen", "violations", "tail_off", "tail_arid",
                                           "tail_seq"]).astype({"producer": "int32", "part": "int64", "gen": "int32",
                                                                "violations": "int64", "tail_off": "int64",
                                                                "tail_arid": "int64", "tail_seq": "int64"})


@dataclass
class RangeResult:
    lone_acks: Columns  # acks without a delivery
    lone_first: Columns  # first deliveries without an ack
    delivered: int = 0
    misplaced: int = 0  # among the delivered whose ack named a position
    unplaced: Columns | None = None  # delivered whose ack named none (judged with the placements of the moment)
    order: list = field(default_factory=list)  # order_stats
    latency: LatencyCounts | None = None  # the delivered events' latency (histsummary.summarize's counts)
    rows: Columns | None = None  # the delivered rows of the groups asked for (dirty order groups)
    duplicate_commits: tuple[np.ndarray, np.ndarray] | None = None  # (commit ms, rows) of rows not a first delivery
    expected_duplicates: int = 0  # of those, rows whose input position is in a declared duplicate range


def in_ranges(partition: np.ndarray, offset: np.ndarray, ranges: np.ndarray | None) -> np.ndarray:
    """Which (partition, offset) pairs fall in any of `ranges` ((k, 3) rows of partition, start, end: [start, end))."""
    hit = np.zeros(len(partition), dtype=bool)
    for p, lo, hi in (ranges if ranges is not None else ()):
        hit |= (partition == p) & (offset >= lo) & (offset < hi)
    return hit


def match_range(acks: Runs, sink: Runs, lo: int, hi: int, gens: np.ndarray, latency: tuple | None,
                groups: np.ndarray | None = None, dup_ranges: np.ndarray | None = None) -> RangeResult:
    """One key range: acks meet their first deliveries (binary search in the sink's keys; the acks keep their run
    order, in which a producer's rows stay the way it wrote them, which order_stats' quick path counts on). A row
    that is not its event's first delivery is a duplicate; one whose input position (the sink row's partition and
    offset) is in `dup_ranges` is an expected one (an at-least-once sink's re-run batch, harness.effects)."""
    a, s = acks.read(lo, hi), sink.read(lo, hi)
    first = first_deliveries(s)
    expected_dups = 0
    if len(first) < len(s["key"]) and groups is None:
        again = np.ones(len(s["key"]), dtype=bool)
        again[first] = False
        dup_at, dup_n = np.unique(s["commit_ms"][again], return_counts=True)
        dup = (dup_at, dup_n)
        if dup_ranges is not None and len(dup_ranges):
            expected_dups = int(in_ranges(s["partition"][again], s["offset"][again], dup_ranges).sum())
    else:
        dup = None
    fk = s["key"][first]
    ak = a["key"]
    pos = np.searchsorted(fk, ak)
    hit = np.zeros(len(ak), dtype=bool)
    if len(fk):
        hit = fk[np.minimum(pos, len(fk) - 1)] == ak
    matched = np.zeros(len(fk), dtype=bool)
    matched[pos[hit]] = True
    out = RangeResult(_empty(ACK_SCHEMA) if hit.all() else _take(a, ~hit),
                      _empty(SINK_SCHEMA) if matched.all() else _take(s, first[~matched]))
    out.duplicate_commits = dup
    out.expected_duplicates = expected_dups
    if not hit.any():
        return out
    if not hit.all():
        a = _take(a, hit)
    f = _take({c: s[c] for c in ("partition", "offset", "commit_ms")}, first[pos[hit]])
    key = a["key"]
    d = {"key": key, "arid": a["arid"], "producer": (key & ((1 << PRODUCER_BITS) - 1)).astype(np.int32),
         "seq": key >> PRODUCER_BITS, "a_part": a["partition"], "a_off": a["offset"], "s_part": f["partition"],
         "s_off": f["offset"], "gen": np.searchsorted(gens, a["ack_ms"], side="right").astype(np.int32)}
    if groups is not None:  # only the rows of these groups (producer, partition, generation)
        mine = np.zeros(len(key), dtype=bool)
        for p, part, g in groups.tolist():
            mine |= (d["producer"] == p) & (d["s_part"] == part) & (d["gen"] == g)
        out.rows = _take(d, mine)
        return out
    known = (d["a_part"] >= 0) & (d["a_off"] >= 0)
    out.delivered = len(key)
    out.misplaced = int((known & ((d["a_part"] != d["s_part"]) | (d["a_off"] != d["s_off"]))).sum())
    if not known.all():
        out.unplaced = {c: d[c][~known] for c in ("key", "a_part", "a_off", "s_part", "s_off")}
    out.order = order_stats(d)
    if latency is not None:  # LatencyCounts' arguments
        out.latency = LatencyCounts(*latency)
        out.latency.add(a["intended_ms"], f["commit_ms"], bucket_index_ms(f["commit_ms"] - a["intended_ms"]), a["pub"])
    return out


def matched_ranges(acks: Runs, sink: Runs, generations: tuple[float, ...], range_rows: int,
                   latency: tuple | None, groups: np.ndarray | None = None, workers: int = 2,
                   dup_ranges: np.ndarray | None = None) -> Iterator[RangeResult]:
    """match_range over every key range of the staged rows, `workers` ranges at a time (numpy and Arrow release
    the GIL), results in key order; at most workers + 1 ranges in memory."""
    gens = np.asarray(generations, dtype=np.float64)
    ranges = key_ranges([acks, sink], range_rows, workers)

    def job(i: int) -> RangeResult:
        return match_range(acks, sink, *ranges[i], gens, latency, groups, dup_ranges)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        queue = deque(pool.submit(job, i) for i in range(min(len(ranges), workers)))
        nxt = len(queue)
        while queue:
            result = queue.popleft().result()
            if nxt < len(ranges):
                queue.append(pool.submit(job, nxt))
                nxt += 1
            yield result
