"""Latency distributions of any number of events in fixed size: HdrHistogram buckets counted with numpy.

The definition is HdrHistogram's: a value in ms is taken to microseconds (rint), clipped to [1 us, 1 h] and
recorded in HdrHistogram(1, 3_600_000_000, 3). Every value in one HdrHistogram bucket is equivalent (3 significant
digits), so counting events per bucket (its lowest equivalent value) is the histogram: the checker counts the
delivered events per bucket as it matches them (LatencyCounts; harness.reconcile.store.bucket_sql is the same bucket in
SQL), and the percentile walk below is HdrHistogram's (get_value_at_percentile, get_max_value), vectorised so
per-second and per-window percentiles cost nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

SUB_BUCKET_BITS = 11  # HdrHistogram(1, 3_600_000_000, 3): 2048 sub-buckets, unit magnitude 0
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))


def _shift(values_us: np.ndarray) -> np.ndarray:
    """log2 of a bucket's width at these values: 0 below 2048 us, +1 per power of two above."""
    bitlen = np.frexp(values_us.astype(np.float64))[1]  # exact for integers below 2^53
    return np.maximum(bitlen - SUB_BUCKET_BITS, 0).astype(np.int64)


def bucket_us(values_ms: np.ndarray) -> np.ndarray:
    """Lowest equivalent microsecond value of each millisecond value (SQL: harness.reconcile.store.bucket_sql)."""
    us = np.clip(np.rint(np.asarray(values_ms, dtype=np.float64) * 1000.0), 1, 3_600_000_000).astype(np.int64)
    s = _shift(us)
    return (us >> s) << s


def bucket_index_ms(values_ms: np.ndarray) -> np.ndarray:
    """bucket_index(bucket_us(values_ms)) in one pass."""
    us = np.clip(np.rint(np.asarray(values_ms, dtype=np.float64) * 1000.0), 1, 3_600_000_000).astype(np.int64)
    shift = _shift(us)
    return ((shift << SUB_BUCKET_BITS) + (us >> shift)).astype(np.uint16)


def bucket_index(values_us: np.ndarray) -> np.ndarray:
    """A bucket (its lowest equivalent value) as a dense index below 2^16, in value order: histograms as bincounts."""
    v = np.asarray(values_us, dtype=np.int64)
    shift = _shift(v)
    return ((shift << SUB_BUCKET_BITS) + (v >> shift)).astype(np.uint16)


def bucket_value(index: np.ndarray) -> np.ndarray:
    i = np.asarray(index, dtype=np.int64)
    return (i & ((1 << SUB_BUCKET_BITS) - 1)) << (i >> SUB_BUCKET_BITS)


def highest_equivalent(values_us: np.ndarray) -> np.ndarray:
    return values_us + (np.int64(1) << _shift(values_us)) - 1


@dataclass
class Hist:
    """One distribution: bucket values (lowest equivalent, us, ascending) and their counts."""

    values_us: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @classmethod
    def from_ms(cls, values_ms: np.ndarray) -> Hist:
        v, n = np.unique(bucket_us(values_ms), return_counts=True)
        return cls(v.astype(np.int64), n.astype(np.int64))

    @classmethod
    def from_rows(cls, values_us, counts) -> Hist:
        v, n = np.asarray(values_us, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        order = np.argsort(v, kind="stable")
        return cls(v[order], n[order])

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def value_at_ms(self, percentile: float) -> float:
        return float(grouped_percentile(np.zeros(len(self.counts), dtype=np.int64), self.values_us, self.counts,
                                        percentile)[1][0]) / 1000.0 if self.total else 0.0

    def percentiles(self) -> dict[str, float]:
        """p50, p90, p99, p999 and max in ms, as HdrHistogram reports them; all 0 without events."""
        if not self.total:
            return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
        out = {name: self.value_at_ms(p) for name, p in PERCENTILES}
        out["max"] = float(highest_equivalent(self.values_us[-1:])[0]) / 1000.0
        return out


def grouped_percentile(groups: np.ndarray, values_us: np.ndarray, counts: np.ndarray,
                       percentile: float) -> tuple[np.ndarray, np.ndarray]:
    """HdrHistogram's value at `percentile` for each group of bucket rows sorted by (group, value): the first
    bucket whose running count reaches int(percentile * total / 100 + 0.5) (at least 1), its highest equivalent
    value (its lowest at percentile 0). Returns (group ids, values in us)."""
    if not len(counts):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    cum = np.cumsum(counts)
    totals = np.add.reduceat(counts, starts)
    before = cum[starts] - counts[starts]
    wanted = np.maximum((min(percentile, 100.0) * totals.astype(np.float64) / 100 + 0.5).astype(np.int64), 1)
    at = np.searchsorted(cum, before + wanted, side="left")
    values = values_us[at]
    return groups[starts], (highest_equivalent(values) if percentile else values)


@dataclass
class LatencySummary:
    """What the verdict and the report need of the delivered events' latency, in fixed size."""

    latency: Hist = field(default_factory=Hist)  # the measured window's (intended at or after the warm-up)
    publish_delay: Hist = field(default_factory=Hist)
    warmup_latency: Hist = field(default_factory=Hist)
    warmup_delivered: int = 0
    windows: list[dict] = field(default_factory=list)  # reports.compare.latency_windows' shape
    per_second: dict = field(default_factory=dict)  # harness.analysis.series: latency per second of intended time
    curve: list[list[float]] = field(default_factory=list)  # harness.analysis.series: the measured percentile curve


def windows_from(edges: np.ndarray, window: np.ndarray, values_us: np.ndarray, counts: np.ndarray) -> list[dict]:
    """reports.compare.latency_windows from bucket rows sorted by (window, value): each span's start, events,
    p50 / p90 / p99 / max (ms)."""
    window = np.asarray(window, dtype=np.int64)
    values_us, counts = np.asarray(values_us, dtype=np.int64), np.asarray(counts, dtype=np.int64)
    if not len(counts):
        return []
    starts = np.flatnonzero(np.r_[True, window[1:] != window[:-1]])
    ids, out = window[starts], {}
    totals = np.add.reduceat(counts, starts)
    for name, p in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("max", 100.0)):
        out[name] = grouped_percentile(window, values_us, counts, p)[1] / 1000.0
    return [{"from_ms": float(edges[w]), "n": int(totals[i]), **{k: float(v[i]) for k, v in out.items()}}
            for i, w in enumerate(ids.tolist())]


Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # intended_ms, commit_ms, latency and publish index
N_BUCKETS = 1 << 16


def measured_extent(chunks: Iterable[np.ndarray], measured_from_ms: float | None) -> tuple[int, float, float]:
    """(count, min, max) of the intended times at or after measured_from_ms (all without one)."""
    n, lo, hi = 0, np.inf, -np.inf
    for intended in chunks:
        m = intended if measured_from_ms is None else intended[intended >= measured_from_ms]
        if len(m):
            n, lo, hi = n + len(m), min(lo, float(m.min())), max(hi, float(m.max()))
    return n, lo, hi


def window_edges(extent: tuple[int, float, float], windows: int) -> np.ndarray | None:
    n, lo, hi = extent
    return np.linspace(lo, hi, windows + 1) if n >= windows * 10 else None


class LatencyCounts:
    """summarize's counts over some of the events (added a chunk at a time, merged with others': the sums do not
    depend on how the events were cut), given the spans' edges (window_edges of the measured extent), and the
    measured extent of the events added, to check the edges against."""

    def __init__(self, measured_from_ms: float | None, t0: float | None, windows: int, edges: np.ndarray | None):
        self.measured_from_ms, self.t0, self.windows, self.edges = measured_from_ms, t0, windows, edges
        self.hists = np.zeros((3, N_BUCKETS), dtype=np.int64)  # measured latency, warm-up latency, publish delay
        self.spans = np.zeros(windows * N_BUCKETS, dtype=np.int64) if edges is not None else None
        self.seconds: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.visible: list[tuple[np.ndarray, np.ndarray]] = []
        self.extent = (0, np.inf, -np.inf)

    def add(self, intended: np.ndarray, commit: np.ndarray, lat: np.ndarray, pub: np.ndarray) -> None:
        measured = (np.ones(len(intended), dtype=bool) if self.measured_from_ms is None
                    else intended >= self.measured_from_ms)
        lat = lat.astype(np.int64)
        self.hists[0] += np.bincount(lat[measured], minlength=N_BUCKETS)
        self.hists[1] += np.bincount(lat[~measured], minlength=N_BUCKETS)
        self.hists[2] += np.bincount(pub[measured], minlength=N_BUCKETS)
        self._extend(measured_extent([intended[measured]], None))
        if self.spans is not None:
            w = np.clip(np.searchsorted(self.edges, intended[measured], side="right") - 1, 0, self.windows - 1)
            self.spans += np.bincount(w * N_BUCKETS + lat[measured], minlength=self.windows * N_BUCKETS)
        if self.t0 is not None:
            self.seconds.append(_count_pairs(np.floor(intended / 1000.0 - self.t0).astype(np.int64), lat))
            v, _, c = _count_pairs(np.floor((intended + (commit - intended)) / 1000.0 - self.t0).astype(np.int64),
                                   np.zeros(len(intended), dtype=np.int64), width=1)
            self.visible.append((v, c))
            if len(self.seconds) > 64:  # bounded: as many rows as seconds times buckets seen
                self.seconds, self.visible = [_merge_pairs(self.seconds)], [_merge_counts(self.visible)]

    def _extend(self, extent: tuple[int, float, float]) -> None:
        n, lo, hi = self.extent
        self.extent = (n + extent[0], min(lo, extent[1]), max(hi, extent[2]))

    def merge(self, other: LatencyCounts) -> None:
        self.hists += other.hists
        if self.spans is not None:
            self.spans += other.spans
        self.seconds += other.seconds
        self.visible += other.visible
        self._extend(other.extent)
        if len(self.seconds) > 64:  # bounded: as many rows as seconds times buckets seen
            self.seconds, self.visible = [_merge_pairs(self.seconds)], [_merge_counts(self.visible)]

    def summary(self) -> LatencySummary:
        hists = self.hists
        out = LatencySummary(latency=_from_counts(hists[0]), publish_delay=_from_counts(hists[2]))
        if self.measured_from_ms is not None:
            out.warmup_latency = _from_counts(hists[1])
            out.warmup_delivered = out.warmup_latency.total
        if self.spans is not None and self.extent[0] >= self.windows * 10:
            w, b = np.divmod(np.flatnonzero(self.spans), N_BUCKETS)
            out.windows = windows_from(self.edges, w, bucket_value(b), self.spans[self.spans > 0])
        if self.t0 is not None:
            ps, pb, pn = _merge_pairs(self.seconds)
            vs, vn = _merge_counts(self.visible)
            out.per_second = {"s": ps, "bucket_us": bucket_value(pb), "n": pn, "visible_s": vs, "visible_n": vn}
        return out


def summarize(chunks: Callable[[], Iterable[Chunk]], measured_from_ms: float | None = None, t0: float | None = None,
              windows: int = 10) -> LatencySummary:
    """The delivered events' latency (sink commit - intended) and publish delay (produce call - intended): the
    measured window's (intended at or after measured_from_ms; all without one) and the warm-up's, the measured
    window cut in `windows` spans of intended time (reports.compare latency_windows: fewer than 10 events a window
    gives none), and per second since t0 of intended time (all events) with the events made visible per second of
    commit time (harness.analysis.series). `chunks()` gives the events a chunk at a time (bucket indexes: bucket_index);
    it is called twice, as the spans need the measured window's extent first. Bounded memory at any size: every
    figure is a count per bucket (bincounts), per second only as many rows as seconds times buckets seen."""
    edges = window_edges(measured_extent((c[0] for c in chunks()), measured_from_ms), windows)
    counts = LatencyCounts(measured_from_ms, t0, windows, edges)
    for chunk in chunks():
        counts.add(*chunk)
    return counts.summary()


def _from_counts(counts: np.ndarray) -> Hist:
    idx = np.flatnonzero(counts)
    return Hist(bucket_value(idx), counts[idx])


def _count_pairs(group: np.ndarray, index: np.ndarray, width: int = N_BUCKETS
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Events per (group, index below width), sorted by both: a bincount when the groups span few values (the
    seconds of a chunk), else a sort."""
    if not len(group):
        return (np.zeros(0, dtype=np.int64),) * 3
    g0, g1 = int(group.min()), int(group.max())
    code = (group - g0) * width + index
    if (g1 - g0 + 1) * width <= max(4 * len(group), 1 << 22):
        counts = np.bincount(code, minlength=(g1 - g0 + 1) * width)
        code = np.flatnonzero(counts)
        counts = counts[code]
    else:
        code, counts = np.unique(code, return_counts=True)
    return code // width + g0, code % width, counts


def _merge_pairs(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    if not parts:
        return (np.zeros(0, dtype=np.int64),) * 3
    g, i, n = (np.concatenate(x) for x in zip(*parts))
    order = np.lexsort((i, g))
    g, i, n = g[order], i[order], n[order]
    start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (i[1:] != i[:-1])])
    return g[start], i[start], np.add.reduceat(n, start) if len(n) else n


def _merge_counts(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    v, c = (np.concatenate(x) for x in zip(*parts))
    order = np.argsort(v, kind="stable")
    v, c = v[order], c[order]
    start = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])
    return v[start], np.add.reduceat(c, start) if len(c) else c
