"""What a producer process records: one ack-log row per event and one stats line per second.

The ack log is the history the checker trusts (Jepsen's idea): every event handed to the client appears exactly
once, acked with its partition and offset, or failed with its error class. CSV, so a million rows stay cheap to
write from a greenlet and fast to load with pyarrow.
"""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path

from hdrh.histogram import HdrHistogram

ACK_COLUMNS = ("producer", "seq", "partition", "offset", "intended_ms", "produce_ms", "ack_ms", "error")


class AckLog:
    def __init__(self, path: Path, producer: int):
        self.producer = producer
        self.f = open(path, "w", encoding="utf-8", buffering=1 << 20)
        self.f.write(",".join(ACK_COLUMNS) + "\n")

    def acked(self, seq: int, partition: int, offset: int, intended_ms: float, produce_ms: float,
              ack_ms: float) -> None:
        self.f.write(f"{self.producer},{seq},{partition},{offset},{intended_ms:.3f},{produce_ms:.3f},{ack_ms:.3f},\n")

    def failed(self, seq: int, partition: int, intended_ms: float, produce_ms: float, ack_ms: float,
               error: str) -> None:
        self.f.write(f"{self.producer},{seq},{partition},-1,{intended_ms:.3f},{produce_ms:.3f},{ack_ms:.3f},"
                     f"{error}\n")

    def close(self) -> None:
        self.f.close()


class SecondStats:
    """Per-second target vs achieved, acks, failures by error class, and delivery latency in microseconds."""

    def __init__(self, path: Path):
        self.f = open(path, "w", encoding="utf-8", buffering=1 << 16)
        self.second: int | None = None
        self._reset()
        self.total_delivery = HdrHistogram(1, 120_000_000, 3)
        self.partition_events: Counter = Counter()
        self.partition_bytes: Counter = Counter()
        self.errors_total: Counter = Counter()

    def _reset(self) -> None:
        self.target = 0
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.buffer_full = 0
        self.errors: Counter = Counter()
        self.delivery = HdrHistogram(1, 120_000_000, 3)

    def _roll(self, now: float) -> None:
        sec = int(now)
        if self.second is None:
            self.second = sec
        while sec > self.second:
            self._emit()
            self.second += 1
            self._reset()

    def _emit(self) -> None:
        d = self.delivery
        row = {"t": self.second, "target": self.target, "sent": self.sent, "acked": self.acked,
               "failed": self.failed, "buffer_full": self.buffer_full, "errors": dict(self.errors)}
        if d.get_total_count():
            row["delivery_us"] = {"p50": d.get_value_at_percentile(50), "p99": d.get_value_at_percentile(99),
                                  "max": d.get_max_value()}
        self.f.write(json.dumps(row) + "\n")
        self.f.flush()  # once a second, so the runner's live view sees it

    def on_due(self, n: int, now: float) -> None:
        self._roll(now)
        self.target += n

    def on_sent(self, n: int, now: float) -> None:
        self._roll(now)
        self.sent += n

    def on_buffer_full(self, now: float) -> None:
        self._roll(now)
        self.buffer_full += 1

    def on_ack(self, partition: int, nbytes: int, delivery_us: int, now: float) -> None:
        self._roll(now)
        self.acked += 1
        self.partition_events[partition] += 1
        self.partition_bytes[partition] += nbytes
        us = max(1, min(delivery_us, 120_000_000))
        self.delivery.record_value(us)
        self.total_delivery.record_value(us)

    def on_fail(self, error: str, now: float) -> None:
        self._roll(now)
        self.failed += 1
        self.errors[error] += 1
        self.errors_total[error] += 1

    def close(self) -> None:
        self._roll(time.time() + 1)
        self.f.close()

    def delivery_summary(self) -> dict:
        d = self.total_delivery
        if not d.get_total_count():
            return {}
        return {f"p{p}".replace(".", ""): d.get_value_at_percentile(p) for p in (50, 90, 99, 99.9)} | {
            "max": d.get_max_value(), "count": d.get_total_count()}


def merge_partition_counts(summaries: list[dict]) -> tuple[dict[int, int], dict[int, int]]:
    events: dict[int, int] = defaultdict(int)
    nbytes: dict[int, int] = defaultdict(int)
    for s in summaries:
        for p, n in s.get("partition_events", {}).items():
            events[int(p)] += n
        for p, n in s.get("partition_bytes", {}).items():
            nbytes[int(p)] += n
    return dict(sorted(events.items())), dict(sorted(nbytes.items()))
