# The pandas checker as it stood before the DuckDB engine (harness/checker.py at commit c30a62e; the reconciler is
# harness/reconcile/ now), copied verbatim below: the reference the property tests (tests/unit/test_checker_engine.py) hold the engine to, and the baseline
# `harness bench checker` measures the engine against. Nothing judges a run with it.
"""The checker: a pure function of the history (producers' ack logs), what the sink holds and what the faults
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

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

from harness.effects import LossRange


def _complete_rows(path: Path) -> io.StringIO | None:
    """The file up to its last full line: a producer killed mid-write leaves a torn last row, never a lie."""
    text = path.read_text(encoding="utf-8", errors="replace")
    text = text[: text.rfind("\n") + 1]
    return io.StringIO(text) if text.count("\n") >= 1 else None


PLACEMENT_COLUMNS = ["producer", "seq", "partition", "offset"]


def load_placements(placements_dir: Path) -> pd.DataFrame:
    """Where the service stored events whose sends reported no position (Event Hubs), as read from the service
    by a fault just before it removed them (placements/*.csv)."""
    sources = [src for f in sorted(placements_dir.glob("*.csv")) if (src := _complete_rows(f)) is not None]
    frames = [pd.read_csv(src, dtype="int64") for src in sources]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in PLACEMENT_COLUMNS})
    return pd.concat(frames, ignore_index=True).drop_duplicates(["producer", "seq"], keep="last")


def apply_placements(acks: pd.DataFrame, placements: pd.DataFrame) -> pd.DataFrame:
    """Acks that report no offset (or no partition: round-robin sends) take the service's placement, so loss
    ranges in the service's positions apply to them; a partition an ack did name is never overwritten."""
    if not len(placements) or not len(acks):
        return acks
    placed = acks[["producer", "seq"]].astype("int64").merge(
        placements, on=["producer", "seq"], how="left")
    known = placed["offset"].notna().to_numpy()
    out = acks.copy()
    no_offset = known & (out["offset"].to_numpy() < 0)
    out.loc[no_offset, "offset"] = placed.loc[no_offset, "offset"].astype("int64").to_numpy()
    no_partition = known & (out["partition"].to_numpy() < 0)
    out.loc[no_partition, "partition"] = placed.loc[no_partition, "partition"].astype("int32").to_numpy()
    return out


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
    latency_ms: np.ndarray = field(repr=False)
    publish_delay_ms: np.ndarray = field(repr=False)
    delivered_intended_ms: np.ndarray = field(repr=False)  # aligned with the two above (warm-up split)
    lost_by_partition: dict[int, int] = field(default_factory=dict)
    failed_expected: int = 0
    unread: int = 0
    expected_lost_by_partition: dict[int, int] = field(default_factory=dict)

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


def _in_ranges(frame: pd.DataFrame, ranges: list[LossRange], time_col: str) -> np.ndarray:
    mask = np.zeros(len(frame), dtype=bool)
    if not len(frame):
        return mask
    part, off = frame["partition"].to_numpy(), frame["offset"].to_numpy()
    when = frame[time_col].to_numpy()
    for r in ranges:
        m = (part == r.partition) & (off >= r.start) & (off < r.end)
        if r.acked_before_ms is not None:
            m &= when < r.acked_before_ms
        mask |= m
    return mask


def reconcile(acks: pd.DataFrame, sink: pd.DataFrame, expected: Expectations | None = None) -> Reconciliation:
    expected = expected or Expectations()
    failed_rows = acks[acks["error"] != ""]
    failed_expected = 0
    if expected.failure_windows_ms and len(failed_rows):
        when = failed_rows["ack_ms"].to_numpy()
        hit = np.zeros(len(failed_rows), dtype=bool)
        for lo, hi in expected.failure_windows_ms:
            hit |= (when >= lo) & (when <= hi)
        failed_expected = int(hit.sum())
    ok = acks[acks["error"] == ""]
    ids = ["producer", "seq"]
    sink_ids = sink[ids + ["partition", "offset", "commit_ms", "intended_ms"]].astype(
        {"producer": "int64", "seq": "int64", "partition": "int64", "offset": "int64"})
    first = sink_ids.sort_values("commit_ms", kind="stable").drop_duplicates(ids, keep="first")
    duplicates = len(sink_ids) - len(first)

    joined = ok[ids + ["partition", "offset", "intended_ms", "produce_ms", "ack_ms"]].astype(
        {"producer": "int64", "seq": "int64", "partition": "int64", "offset": "int64"}).merge(
        first, on=ids, how="left", suffixes=("", "_sink"), indicator=True)
    delivered = joined[joined["_merge"] == "both"]
    missing = joined[joined["_merge"] == "left_only"]

    expected_mask = _in_ranges(missing, expected.loss, "ack_ms")
    expected_lost_by_partition = {int(k): int(v) for k, v in
                                  missing[expected_mask].groupby("partition").size().items()}
    missing = missing[~expected_mask]
    unread = 0
    if expected.read_up_to is not None and len(missing):
        reached = missing["partition"].map(lambda p: expected.read_up_to.get(int(p), 0)).to_numpy()
        unread_mask = missing["offset"].to_numpy() >= reached
        unread = int(unread_mask.sum())
        missing = missing[~unread_mask]

    acked_ids = ok[ids].astype("int64")
    unacked = first.merge(acked_ids, on=ids, how="left", indicator=True)
    delivered_unacked = int((unacked["_merge"] == "left_only").sum())

    # Event Hubs sends report no offset (-1): there only the partition can be compared, and round-robin sends
    # not even that (-1)
    offset_known, partition_known = delivered["offset"] >= 0, delivered["partition"] >= 0
    misplaced = int(((partition_known & (delivered["partition"] != delivered["partition_sink"]))
                     | (offset_known & (delivered["offset"] != delivered["offset_sink"]))).sum())

    # Order per producer, partition and generation (a recreated topic restarts its offsets), by the offsets the
    # sink saw: a producer's later events must sit at later offsets.
    order_violations = 0
    if len(delivered):
        generation = np.searchsorted(np.sort(np.asarray(expected.generations_ms, dtype="float64")),
                                     delivered["ack_ms"].to_numpy(), side="right")
        keyed = pd.DataFrame({"producer": delivered["producer"].to_numpy(),
                              "partition": delivered["partition_sink"].to_numpy(), "generation": generation,
                              "offset": delivered["offset_sink"].to_numpy(), "seq": delivered["seq"].to_numpy()})
        ordered = keyed.sort_values(["producer", "partition", "generation", "offset"], kind="stable")
        cols = [ordered[c].to_numpy() for c in ("producer", "partition", "generation")]
        same_group = np.logical_and.reduce([c[1:] == c[:-1] for c in cols])
        order_violations = int((same_group & (np.diff(ordered["seq"].to_numpy()) <= 0)).sum())

    return Reconciliation(
        produced=len(acks), acked=len(ok), failed=len(acks) - len(ok), delivered_unique=len(delivered),
        duplicates=duplicates, lost=len(missing), expected_lost=int(expected_mask.sum()),
        delivered_unacked=delivered_unacked, misplaced=misplaced, order_violations=order_violations,
        sink_rows=len(sink_ids),
        latency_ms=(delivered["commit_ms"] - delivered["intended_ms"]).to_numpy(dtype="float64"),
        publish_delay_ms=(delivered["produce_ms"] - delivered["intended_ms"]).to_numpy(dtype="float64"),
        delivered_intended_ms=delivered["intended_ms"].to_numpy(dtype="float64"),
        lost_by_partition={int(k): int(v) for k, v in missing.groupby("partition").size().items()},
        failed_expected=failed_expected, unread=unread, expected_lost_by_partition=expected_lost_by_partition,
    )


def percentiles_ms(values_ms: np.ndarray) -> dict[str, float]:
    """HdrHistogram at microsecond resolution, 3 significant digits, up to one hour."""
    hist = HdrHistogram(1, 3_600_000_000, 3)
    values_us, counts = np.unique(np.clip(np.rint(values_ms * 1000.0), 1, 3_600_000_000).astype(np.int64),
                                  return_counts=True)
    for v, n in zip(values_us.tolist(), counts.tolist()):
        hist.record_value(v, n)
    if not hist.get_total_count():
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
    out = {f"p{str(p).replace('.', '')}": hist.get_value_at_percentile(p) / 1000.0 for p in (50, 90, 99, 99.9)}
    out["max"] = hist.get_max_value() / 1000.0
    return out


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def evaluate(rec: Reconciliation, checks, *, target_events: float, latency: dict[str, float],
             drained: bool, drain_detail: str, pacer_skipped: int = 0, unacked_at_exit: int = 0) -> list[Check]:
    """The verdict's evidence on the events, one named check each; `checks` is the scenario's [checks] section.
    Every figure that can reveal a defect has its check here."""
    unexpected_failed = rec.failed - rec.failed_expected
    out = [
        Check("drained", drained, drain_detail),
        Check("no_loss", rec.lost <= checks.max_lost,
              f"{rec.lost} acked events never delivered (allowed {checks.max_lost}; expected losses "
              f"{rec.expected_lost}, unread after the query stopped as expected {rec.unread})"
              + (f"; by partition {rec.lost_by_partition}" if rec.lost else "")),
        Check("no_duplicates", rec.duplicates <= checks.max_duplicates,
              f"{rec.duplicates} duplicate deliveries (allowed {checks.max_duplicates})"),
        Check("offsets_match", rec.misplaced == 0,
              f"{rec.misplaced} delivered events at another partition/offset than their ack said"),
        Check("no_unacked_deliveries", rec.delivered_unacked == 0,
              f"{rec.delivered_unacked} sink rows whose event no producer acked"),
        Check("acked", rec.acked > 0 and unexpected_failed == 0,
              f"{rec.acked} of {rec.produced} events acked, {rec.failed} failed"
              + (f" ({rec.failed_expected} while a fault allowed failed sends)" if rec.failed_expected else "")),
        Check("sends_resolved", unacked_at_exit == 0,
              f"{unacked_at_exit} events neither acked nor failed when the producers exited"),
        Check("no_skipped_sends", pacer_skipped <= checks.max_pacer_skipped,
              f"{pacer_skipped} scheduled events skipped by the pacer (producer fell behind by more than "
              f"max_backlog_s; allowed {checks.max_pacer_skipped})"),
        Check("produce_rate", rec.produced >= checks.min_produce_ratio * target_events,
              f"{rec.produced} produced of {target_events:.0f} scheduled "
              f"({(rec.produced / target_events if target_events else 0):.4f}, need >= {checks.min_produce_ratio})"),
    ]
    if checks.require_order:
        out.append(Check("order", rec.order_violations == 0,
                         f"{rec.order_violations} out-of-order events per producer and partition"))
    if checks.latency_p99_ms is not None:
        out.append(Check("latency_p99", latency["p99"] <= checks.latency_p99_ms,
                         f"p99 {latency['p99']:.1f} ms (limit {checks.latency_p99_ms:.1f} ms)"))
    return out
