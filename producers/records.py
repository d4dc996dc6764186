"""What a producer process records besides its history: one stats line per second and a summary's counters.

The history itself (one ack row per event, acked with its partition and offset or failed with its error class)
is `harness.records.history.AckWriter`'s, written in bulk as Arrow record batches. Delivery reports arrive in bulk (one
poll serves many), so everything here takes whole batches as numpy arrays: per-event Python work is what limits
a producer process.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

MAX_US = 120_000_000
# librdkafka names its threads rdk:main, rdk:broker<id>, rdk:broker-1 ...: their CPU is the client library's own
CLIENT_THREAD_PREFIX = "rdk:"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def client_threads_cpu_s(prefix: str = CLIENT_THREAD_PREFIX, tasks: Path = Path("/proc/self/task")) -> float | None:
    """CPU seconds so far of this process's threads whose name starts with `prefix` (Linux: each thread's utime +
    stime from /proc/self/task/<tid>/stat); None where that cannot be read or no thread has such a name. A client
    library's own threads spin where the harness's code does not (librdkafka's broker threads facing a broker that
    does not answer), and the footprint names the part that was theirs."""
    total, found = 0.0, False
    try:
        entries = list(tasks.iterdir())
    except OSError:
        return None
    for task in entries:
        try:
            if not (task / "comm").read_text().startswith(prefix):
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
        total += (int(fields[11]) + int(fields[12])) / _TICKS
        found = True
    return round(total, 4) if found else None


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, MAX_US, 3)


def _counts(hist: HdrHistogram) -> np.ndarray:
    """The histogram's own counters as a numpy array (no copy): bulk updates and scans without a Python loop."""
    return np.ctypeslib.as_array(hist.counts)


def record_many(hist: HdrHistogram, values_us) -> None:
    """Record a batch exactly as `record_value` would record each value (clipped to 1..MAX_US), with numpy: the
    bucket arithmetic of HdrHistogram vectorised and the counts added in one bincount. One call per value cost a
    producer tens of milliseconds a second, a stall in its traffic (a gevent process does nothing else meanwhile)."""
    if not len(values_us):
        return
    v = np.clip(np.asarray(values_us, dtype=np.int64), 1, MAX_US)
    # bit length of (v | mask), exact through float64 for values below 2^53
    pow2ceiling = np.frexp((v | hist.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
    bucket = pow2ceiling - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = v >> (bucket + hist.unit_magnitude)
    index = ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + sub_bucket - hist.sub_bucket_half_count
    counts = _counts(hist)
    counts += np.bincount(index, minlength=hist.counts_len)[: hist.counts_len].astype(counts.dtype)
    hist.total_count += len(v)
    hist.min_value = min(hist.min_value, int(v.min()))
    hist.max_value = max(hist.max_value, int(v.max()))


def value_at_percentile(hist: HdrHistogram, percentile: float) -> int:
    """`hist.get_value_at_percentile(percentile)` with a numpy scan of the counts (that one loops in Python over
    every bucket up to the percentile: ~10 ms a call)."""
    if not hist.total_count:
        return 0
    target = hist.get_target_count_at_percentile(percentile)
    index = int(np.searchsorted(np.cumsum(_counts(hist)), target, side="left"))
    value = hist.get_value_from_index(index)
    return hist.get_highest_equivalent_value(value) if percentile else hist.get_lowest_equivalent_value(value)


class SecondStats:
    """Per-second events due (handed out by the pacer) vs sent, acks, failures by error class, delivery latency in
    microseconds, and the process's CPU time when the row was written (`cpu_s`, cumulative; `client_cpu_s`, the
    part of it the client library's own threads used, when it has any)."""

    def __init__(self, path: Path):
        self.f = open(path, "w", encoding="utf-8", buffering=1 << 16)
        self.second: int | None = None
        self._reset()
        self.total_delivery = new_histogram()
        self.partition_events: Counter = Counter()
        self.partition_bytes: Counter = Counter()
        self.errors_total: Counter = Counter()

    def _reset(self) -> None:
        self.due = 0
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.buffer_full = 0
        self.errors: Counter = Counter()
        self.latencies: list[np.ndarray] = []

    def _roll(self, now: float) -> None:
        sec = int(now)
        if self.second is None:
            self.second = sec
        while sec > self.second:
            self._emit()
            self.second += 1
            self._reset()

    def _emit(self) -> None:
        row = {"t": self.second, "due": self.due, "sent": self.sent, "acked": self.acked,
               "failed": self.failed, "buffer_full": self.buffer_full, "errors": dict(self.errors),
               "cpu_s": round(time.process_time(), 4)}  # the process's CPU so far (all its threads): cost per event
        client = client_threads_cpu_s()
        if client is not None:
            row["client_cpu_s"] = client  # of which the client library's own threads (librdkafka's), so far
        if self.latencies:
            d = new_histogram()
            record_many(d, np.concatenate(self.latencies))
            self.total_delivery.add(d)
            row["delivery_us"] = {"p50": value_at_percentile(d, 50), "p99": value_at_percentile(d, 99),
                                  "max": d.get_max_value()}
            row["delivery_hist"] = d.encode().decode()  # processes' seconds merge exactly from these
        self.f.write(json.dumps(row) + "\n")
        self.f.flush()  # once a second, so the runner's live view sees it

    def on_due(self, n: int, now: float) -> None:
        self._roll(now)
        self.due += n

    def on_sent(self, n: int, now: float) -> None:
        self._roll(now)
        self.sent += n

    def on_buffer_full(self, now: float) -> None:
        self._roll(now)
        self.buffer_full += 1

    def on_acks(self, partitions, sizes, latencies_us, now: float) -> None:
        """A batch of acked events: partition, value size and delivery latency of each (arrays or lists)."""
        self._roll(now)
        partitions = np.asarray(partitions, dtype=np.int64)
        if not len(partitions):
            return
        self.acked += len(partitions)
        shifted = partitions + 1  # round-robin sends ack partition -1
        events = np.bincount(shifted)
        nbytes = np.bincount(shifted, weights=np.asarray(sizes, dtype=np.float64))
        for i in np.flatnonzero(events).tolist():
            self.partition_events[i - 1] += int(events[i])
            self.partition_bytes[i - 1] += int(nbytes[i])
        self.latencies.append(np.asarray(latencies_us, dtype=np.int64))

    def on_fail(self, error: str, now: float, n: int = 1) -> None:
        self._roll(now)
        self.failed += n
        self.errors[error] += n
        self.errors_total[error] += n

    def on_fails(self, errors: list[str], now: float) -> None:
        """A batch of failed events, one error class each."""
        for error, n in Counter(errors).items():
            self.on_fail(error, now, n)

    def close(self) -> None:
        self._roll(time.time() + 1)
        self.f.close()

    def delivery_encoded(self) -> str | None:
        return self.total_delivery.encode().decode() if self.total_delivery.get_total_count() else None


def merge_histograms(encoded: list[str | None]) -> HdrHistogram:
    total = new_histogram()
    for e in encoded:
        if e:
            total.add(HdrHistogram.decode(e))
    return total


def histogram_summary(h: HdrHistogram) -> dict:
    if not h.get_total_count():
        return {}
    return {f"p{p}".replace(".", ""): h.get_value_at_percentile(p) for p in (50, 90, 99, 99.9)} | {
        "max": h.get_max_value(), "count": h.get_total_count()}


def merge_partition_counts(summaries: list[dict]) -> tuple[dict[int, int], dict[int, int]]:
    events: dict[int, int] = defaultdict(int)
    nbytes: dict[int, int] = defaultdict(int)
    for s in summaries:
        for p, n in s.get("partition_events", {}).items():
            events[int(p)] += n
        for p, n in s.get("partition_bytes", {}).items():
            nbytes[int(p)] += n
    return dict(sorted(events.items())), dict(sorted(nbytes.items()))
