"""Source offsets and batch planning as pure functions of what the hub reports (unit-tested without Spark or SDK).

Offsets are per-partition *sequence numbers* in the shape of Spark's Kafka source offsets, `{"<hub>": {"0": n}}`,
where n is the sequence number the next batch starts at (a batch reads [start, end)). A batch whose end is below
its start for a partition marks a *sequence reset* (the hub was deleted and recreated, its numbers started over):
that batch reads the new hub's [0, end). Encoding the reset in the ordinary offsets keeps a re-run after a crash
reading exactly the same events, with no state outside Spark's offset log.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .options import FAIL_ON_DATA_LOSS


class EventHubsDataLossError(RuntimeError):
    """Events the query should have read are gone (aged out, hub deleted or recreated) and failOnDataLoss=true."""


def data_loss_message(detail: str) -> str:
    return (f"{detail}. Some data may have been lost because it is not available in Event Hubs any more; either "
            "the events were aged out by retention or the event hub was deleted (or recreated) before all of its "
            f"events were processed. If you want the query to go on in such cases, set the source option "
            f"{FAIL_ON_DATA_LOSS} to false (the skipped ranges are then logged and reported in the task metrics).")


@dataclass(frozen=True)
class PartitionBounds:
    """A partition's readable range by sequence number: [first, end). end = last enqueued + 1 (0 when the
    partition never held an event); first = the oldest retained event, or end when none is retained."""

    partition: str
    first: int
    end: int

    @classmethod
    def from_properties(cls, props: Mapping) -> "PartitionBounds":
        """From EventHubConsumerClient.get_partition_properties()."""
        end = int(props["last_enqueued_sequence_number"]) + 1
        if props["is_empty"]:
            first = end
        else:
            first = max(int(props["beginning_sequence_number"]), 0)
        return cls(str(props["id"]), min(first, end), max(end, 0))


def offset_json(hub: str, positions: Mapping[str, int]) -> dict:
    return {hub: {str(p): int(s) for p, s in sorted(positions.items(), key=lambda kv: int(kv[0]))}}


def read_offset(offset: Mapping, hub: str) -> dict[str, int]:
    """{partition: seq} from an offset dict; the hub must be this source's (a checkpoint of another hub is a
    user error, not a reason to start over)."""
    if not isinstance(offset, Mapping) or set(offset) != {hub}:
        raise ValueError(f"offset {dict(offset) if isinstance(offset, Mapping) else offset!r} does not belong to "
                         f"event hub {hub!r}; the checkpoint was written by a query on another hub")
    return {str(p): int(s) for p, s in offset[hub].items()}


def split_limit(limit: int, backlog: Mapping[str, int]) -> dict[str, int]:
    """Share `limit` events across partitions in proportion to their backlog, exactly: the shares sum to
    min(limit, total backlog). Floors first, then one more event to the largest remainders (ties: lower partition
    id). The connector floors (or ceils shares below one) and so may take less (or more) than the limit."""
    sizes = {p: max(int(n), 0) for p, n in backlog.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(sizes)
    shares = {p: limit * n // total for p, n in sizes.items()}
    left = limit - sum(shares.values())
    by_remainder = sorted(sizes, key=lambda p: (-(limit * sizes[p] % total), int(p)))
    for p in by_remainder[:left]:
        shares[p] += 1
    return shares


@dataclass(frozen=True)
class Plan:
    end: dict[str, int]  # the batch's end offsets (partition -> seq)
    available: dict[str, int]  # every partition's end without a limit (reportLatestOffset, lag)
    warnings: tuple[str, ...]  # data loss tolerated with failOnDataLoss=false
    retained_from: dict[str, int]  # partitions whose batch starts past a tolerated aged-out range: where it ends


def plan_batch_end(start: Mapping[str, int], bounds: Mapping[str, PartitionBounds], limit: int | None,
                   fail_on_data_loss: bool, hub: str, recreated: bool = False,
                   ceiling: Mapping[str, int] | None = None) -> Plan:
    """Where the next batch ends, given its start, the partitions' bounds and an optional row limit.

    `recreated`: the hub's creation time changed since the last plan (numbers restarted even if they already
    passed our start). `ceiling`: Trigger.AvailableNow's target, never planned past.
    Raises EventHubsDataLossError when failOnDataLoss=true and a partition lost events or went away.
    """
    warnings: list[str] = []

    def lost(detail: str) -> None:
        if fail_on_data_loss:
            raise EventHubsDataLossError(data_loss_message(detail))
        warnings.append(detail)

    for p in sorted(set(start) - set(bounds), key=int):
        lost(f"Partition {p} of event hub {hub!r} no longer exists (the query was at sequence number {start[p]})")
    begin: dict[str, int] = {}  # where the backlog starts counting
    cap: dict[str, int] = {}  # the highest end this batch may plan
    resets: set[str] = set()
    for p, b in bounds.items():
        s = start.get(p, 0)  # a partition added to the hub is read from its beginning
        if s > 0 and (recreated or b.end < s):
            lost(f"Partition {p} of event hub {hub!r}: sequence numbers went back (failOnDataLoss: the hub was "
                 f"recreated); the query was at sequence number {s}, the partition now ends at {b.end}")
            resets.add(p)
            begin[p] = 0
            cap[p] = min(b.end, s - 1)  # end < start encodes the reset; the rest follows next batch
            continue
        if s < b.first:
            lost(f"Partition {p} of event hub {hub!r}: starting sequence number {s} is behind the earliest "
                 f"retained sequence number {b.first} (failOnDataLoss: events {s}..{b.first - 1} aged out)")
        begin[p] = max(s, b.first) if s < b.end else s
        cap[p] = b.end
    if ceiling is not None:
        for p in cap:
            if p in ceiling and p not in resets:
                cap[p] = max(min(cap[p], int(ceiling[p])), begin[p])
    backlog = {p: max(cap[p] - begin[p], 0) for p in cap}
    shares = backlog if limit is None else split_limit(limit, backlog)
    end = {}
    for p in cap:
        s = start.get(p, 0)
        if p in resets or backlog[p] > 0 or begin[p] > s:
            end[p] = begin[p] + shares[p]  # past a tolerated loss too: its task reports the range as lost
        else:
            end[p] = s  # nothing new: stay
    available = {p: b.end for p, b in bounds.items()}
    skipped = {p: begin[p] for p in cap if p not in resets and begin[p] > start.get(p, 0)}
    return Plan(end, available, tuple(warnings), skipped)


@dataclass(frozen=True)
class Generation:
    """What the driver knew of the hub when it planned a batch, so a task can tell the planned hub's events from
    a recreated hub's: every event of a range was enqueued at or after the hub's creation (`created_ms`) and at
    or before the partition's last enqueued time at planning (`last_enqueued_ms`, per partition). Epoch ms."""

    created_ms: int | None
    last_enqueued_ms: Mapping[str, int]


@dataclass(frozen=True)
class Range:
    """One Spark task's work: partition events [start, end); reset_from set when the batch follows a sequence
    reset (the range is then in the recreated hub, and reset_from is where the query stood in the old one, whose
    events up to old_end, the old hub's end the driver last saw, were never read). retained_from: events below it
    had aged out when the batch was planned, so the batch's admission budget leaves them out and the task must
    not deliver them even if its cached receiver fetched them before they aged out. not_before_ms/not_after_ms:
    the enqueued times the range's events must lie within (Generation). Both None when unknown (a batch re-run by
    a restarted driver, whose receivers are all new)."""

    partition: str
    start: int
    end: int
    reset_from: int | None = None
    old_end: int | None = None
    not_before_ms: int | None = None
    not_after_ms: int | None = None
    retained_from: int | None = None


def plan_ranges(start: Mapping[str, int], end: Mapping[str, int], fail_on_data_loss: bool,
                hub: str, old_ends: Mapping[str, int] | None = None,
                generation: Generation | None = None, retained_from: Mapping[str, int] | None = None) -> list[Range]:
    """One range per partition with events to read, in partition order (the connector's 1:1:1). `old_ends`: for
    a batch after a sequence reset, the old hub's ends the driver last saw; `generation`: the hub as planned;
    `retained_from`: Plan.retained_from."""
    ranges = []

    def make(p: str, lo: int, hi: int, reset_from: int | None = None) -> Range:
        old_end = None
        if reset_from is not None and old_ends is not None and p in old_ends:
            old_end = int(old_ends[p])
        skip_to = (retained_from or {}).get(p)
        return Range(p, lo, hi, reset_from, old_end,
                     not_before_ms=None if generation is None else generation.created_ms,
                     not_after_ms=None if generation is None else generation.last_enqueued_ms.get(p),
                     retained_from=None if reset_from is not None or skip_to is None or skip_to <= lo
                     else int(skip_to))

    for p in sorted(end, key=int):
        s, e = start.get(p, 0), end[p]
        if e < s:
            if fail_on_data_loss:
                raise EventHubsDataLossError(data_loss_message(
                    f"Partition {p} of event hub {hub!r}: the batch ends at sequence number {e}, before its start "
                    f"{s} (failOnDataLoss: the hub was recreated)"))
            if e > 0 or (old_ends or {}).get(p, 0) > s:
                ranges.append(make(p, 0, e, reset_from=s))
        elif e > s:
            ranges.append(make(p, s, e))
    return ranges
