"""Event Hubs for Spark Structured Streaming, as a PySpark Python data source on the azure-eventhub SDK.

    from harness.backends.eventhubs.spark_source import register
    register(spark)                                   # spark.dataSource.register(EventHubsDataSource)
    df = (spark.readStream.format("eventhubs")
          .option("eventhubs.connectionString", conn)  # with EntityPath=<hub>
          .option("maxEventsPerTrigger", 10000)
          .load())

Options, schema and offsets follow azure-eventhubs-spark (see options.py, rows.py, offsets.py); the driver/executor
split is in source.py, the executor's cached receivers in receivers.py (shared by an executor's Python workers
through handoff.py), the management calls over a kept connection in management.py, per-task metrics in metrics.py
and the connector's preferred-location strategies in locality.py. Importing this package (or `.options`, `.locality`,
`.offsets`) does not import pyspark: the scenario config checks options without Spark.
"""
from __future__ import annotations

from typing import Iterator, Mapping

from .locality import placement, preferred_executor
from .options import ALLOWED_OPTIONS, EventHubsOptionError, EventHubsOptions, parse_options

__all__ = [
    "ALLOWED_OPTIONS", "EventHubsDataSource", "EventHubsOptionError", "EventHubsOptions", "close_receivers",
    "parse_options", "placement", "preferred_executor", "read_partition", "register",
]


def read_partition(options: Mapping[str, str], partition: str | int, start: int, end: int) -> Iterator:
    """Arrow record batches of events [start, end) of one partition, read exactly as a Spark task reads them
    (the receiver cached in this process, reused by the next call that starts at `end`; one metrics record per
    call when harness.metricsPath is set), without Spark. `options` are the source's options."""
    from .offsets import Range
    from .receivers import read_range

    return read_range(parse_options(options), Range(str(partition), int(start), int(end)))


def close_receivers() -> None:
    """Close the receivers and clients this process holds."""
    from .receivers import close_all

    close_all()


def register(spark) -> None:
    """Make `format("eventhubs")` available in this session."""
    from .source import EventHubsDataSource

    spark.dataSource.register(EventHubsDataSource)


def __getattr__(name: str):
    if name == "EventHubsDataSource":
        from .source import EventHubsDataSource

        return EventHubsDataSource
    raise AttributeError(name)
