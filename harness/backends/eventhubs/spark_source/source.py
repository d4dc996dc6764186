"""`spark.readStream.format("eventhubs")`: a PySpark streaming data source on the unmodified azure-eventhub SDK.

Driver side (PySpark runs these in a long-lived Python process next to the driver): `initialOffset`,
`getDefaultReadLimit`, `latestOffset(start, limit)`, `partitions(start, end)`, `commit`, `stop`. They ask the hub
for its runtime properties and each partition's bounds and plan one sequence-number range per partition
(the connector's one Spark task per Event Hubs partition). Executor side: `read(partition)` runs in a Python
worker and reads its range through a receiver cached in that worker (receivers.py).

Offsets are `{"<hub>": {"<partition>": next sequence number}}`, the shape of Spark's Kafka source offsets.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from .options import EventHubsOptions, parse_options
from .offsets import (EventHubsDataLossError, Generation, PartitionBounds, Range, data_loss_message, offset_json,
                      plan_batch_end, plan_ranges, read_offset)
from .rows import spark_schema

LOG = logging.getLogger("harness.backends.eventhubs.spark_source")


def _key(offset: dict) -> str:
    return json.dumps(offset, sort_keys=True)


def _epoch_ms(when) -> int | None:
    """A time from the SDK (datetime, or epoch ms/s as a number) as epoch milliseconds."""
    if when is None:
        return None
    if isinstance(when, datetime):
        return round(when.timestamp() * 1000)
    value = float(when)
    return round(value if value > 1e11 else value * 1000)


class EventHubsDataSource(DataSource):
    """Options are checked when the DataFrame is defined (`.load()`), so a typo fails before the query starts."""

    def __init__(self, options) -> None:
        super().__init__(options)
        self.settings: EventHubsOptions = parse_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return "eventhubs"

    def schema(self):
        return spark_schema()

    def streamReader(self, schema) -> "EventHubsStreamReader":
        return EventHubsStreamReader(self.settings)


class EventHubsPartition(InputPartition):
    """One task: a partition's sequence-number range (picklable, shipped to an executor)."""

    def __init__(self, rng: Range) -> None:
        super().__init__(rng)
        self.range = rng


class EventHubsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, settings: EventHubsOptions) -> None:
        self.settings = settings
        # driver-side memory between calls; offsets alone drive re-runs, this only makes the tasks' checks and
        # loss reports sharper (a batch re-run by a restarted driver reads and reports without it)
        self._partition_ids: list[str] = []
        self._created_at = None
        self._seen_end: dict[str, int] = {}  # the highest end seen per partition in the current hub
        self._old_ends: dict[str, int] = {}  # the same for the hub before the last recreation
        self._recreated = False  # a recreation seen and not planned yet (any call may see it)
        self._generation: Generation | None = None
        self._planned: dict[str, tuple] = {}  # batch end -> (generation, old ends, retained_from) for partitions
        self._available: dict[str, int] | None = None
        self._target: dict[str, int] | None = None

    # ================================================================================== driver side
    def _hub_state(self) -> tuple[dict[str, PartitionBounds], dict[str, dict]]:
        """(bounds, raw partition properties) from the service. Notes a recreation (the creation time changed, or
        a partition ends below an end already seen) for the next plan, with the old hub's ends."""
        from .clients import hub_state

        hub, props = hub_state(self.settings, self._partition_ids)
        bounds = {p: PartitionBounds.from_properties(v) for p, v in props.items()}
        created_at = hub.get("created_at")
        recreated = self._created_at is not None and created_at is not None and created_at != self._created_at
        went_back = any(b.end < self._seen_end.get(p, 0) for p, b in bounds.items())
        if recreated or went_back:
            self._old_ends = dict(self._seen_end)
            self._seen_end = {}
            self._recreated = True
        for p, b in bounds.items():
            self._seen_end[p] = max(self._seen_end.get(p, 0), b.end)
        self._created_at = created_at
        self._partition_ids = list(props)
        self._generation = Generation(_epoch_ms(created_at), {
            p: t for p, t in ((p, _epoch_ms(v.get("last_enqueued_time_utc"))) for p, v in props.items())
            if t is not None})
        return bounds, props

    def initialOffset(self) -> dict:
        """A new query's start: startingPositions, else startingPosition, else the end of the stream."""
        from .clients import translate_position

        bounds, props = self._hub_state()
        ids = {int(p) for p in bounds}
        for pid, _pos in self.settings.starting_positions:
            if pid not in ids:
                raise ValueError(f"option eventhubs.startingPositions names partition {pid}, but event hub "
                                 f"{self.settings.hub!r} has partitions {sorted(ids)}")
        start = {p: translate_position(self.settings, p, self.settings.position_for(int(p)), props[p])
                 for p in bounds}
        LOG.info("event hub %s: initial sequence numbers %s", self.settings.hub, start)
        return offset_json(self.settings.hub, start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxEventsPerTrigger, or the connector's default of 1,000 events per partition."""
        if self.settings.max_events_per_trigger is not None:
            return ReadMaxRows(self.settings.max_events_per_trigger)
        if not self._partition_ids:
            self._hub_state()
        return ReadMaxRows(self.settings.default_max_events(len(self._partition_ids)))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        positions = read_offset(start, self.settings.hub)
        try:
            bounds, _ = self._hub_state()
        except Exception as exc:  # noqa: BLE001
            from .clients import is_not_found

            if not is_not_found(exc):
                raise
            detail = f"event hub {self.settings.hub!r} does not exist (deleted?): {exc}"
            if self.settings.fail_on_data_loss:
                raise EventHubsDataLossError(data_loss_message(detail)) from exc
            LOG.warning("%s; no new batch until it exists again (failOnDataLoss=false)", detail)
            return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if not isinstance(limit, (ReadMaxRows, ReadAllAvailable)):
            LOG.warning("read limit %r is not supported by this source; reading all available", limit)
        plan = plan_batch_end(positions, bounds, max_rows, self.settings.fail_on_data_loss, self.settings.hub,
                              recreated=self._recreated, ceiling=self._target)
        for warning in plan.warnings:
            LOG.warning("%s (failOnDataLoss=false: skipped; the task metrics report the exact ranges)", warning)
        self._recreated = False
        self._available = plan.available
        end = offset_json(self.settings.hub, plan.end)
        self._planned = {_key(end): (self._generation, dict(self._old_ends), plan.retained_from)}  # newest only
        return end

    def reportLatestOffset(self) -> dict | None:
        return None if self._available is None else offset_json(self.settings.hub, self._available)

    def prepareForTriggerAvailableNow(self) -> None:
        bounds, _ = self._hub_state()
        self._target = {p: b.end for p, b in bounds.items()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        generation, old_ends, retained_from = self._planned.get(_key(end), (None, {}, {}))
        ranges = plan_ranges(read_offset(start, self.settings.hub), read_offset(end, self.settings.hub),
                             self.settings.fail_on_data_loss, self.settings.hub, old_ends=old_ends,
                             generation=generation, retained_from=retained_from)
        return [EventHubsPartition(r) for r in ranges]

    def commit(self, end: dict) -> None:
        """Nothing to do: Event Hubs keeps no consumer position for us (the checkpoint is Spark's)."""

    def stop(self) -> None:
        from .clients import ClientConnectionPool

        ClientConnectionPool.close_all()

    # ================================================================================== executor side
    def read(self, partition: InputPartition) -> Iterator:
        from .receivers import read_range

        return read_range(self.settings, partition.range)
