"""SDK clients, pooled per connection string as the connector's ClientConnectionPool does, and the management
calls both sides make (hub properties, partition bounds, translating a start position to a sequence number).

An azure-eventhub EventHubConsumerClient is cheap to hold (each receive and each management call opens its own
AMQP connection) but only one receive per partition may run on it, and close() is the only way to stop one; so a
cached receiver borrows a client for its whole life and gives it back closed, ready for the next borrower. The SDK
opens a new connection for every management call (~0.36 s on loopback, mostly its own polling sleeps), so the
management calls go through one client per pool that keeps its connection open (management.py, ~2 ms a call); the
driver still asks about all partitions at once, from a small thread pool, which only matters when that connection
is down and the SDK's own path answers.
"""
from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Iterable

from .offsets import PartitionBounds
from .options import EventHubsOptions, EventPosition

LOG = logging.getLogger("harness.backends.eventhubs.spark_source")

# The SDK's EventProcessor sleeps this long between ownership checks; it also bounds how long its thread lingers
# after close(). One partition, no checkpoint store: the check is a dictionary lookup, so a short interval is free.
LOAD_BALANCING_INTERVAL_S = 1.0


# The SDK logs a WARNING for every receive error (a steal, a detach) through loggers without handlers, which
# Python's last-resort handler prints on the executors' stderr; the source reports these itself (task metrics, its
# own warnings) and raises what matters, so in the source's processes the SDK only speaks from ERROR up.
NOISY_SDK_LOGGERS = ("azure.eventhub._eventprocessor", "azure.eventhub._consumer", "azure.eventhub._consumer_client",
                     "azure.eventhub._client_base", "azure.eventhub._connection_manager", "azure.eventhub._pyamqp")


def quiet_sdk_loggers() -> None:
    """Raise the SDK's noisy loggers to ERROR, unless the application already set their level."""
    for name in NOISY_SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.ERROR)


class ClientConnectionPool:
    """EventHubConsumerClients for one (connection string, consumer group): borrow one (created if none is free),
    give it back after use."""

    _pools: dict[tuple[str, str], "ClientConnectionPool"] = {}
    _pools_lock = threading.Lock()

    def __init__(self, connection_string: str, consumer_group: str) -> None:
        self._connection_string = connection_string
        self._consumer_group = consumer_group
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._management = None  # the PersistentManagementClient every management call of this pool goes through
        self._management_lock = threading.Lock()
        self.created = 0
        self.borrowed = 0

    @classmethod
    def of(cls, options: EventHubsOptions) -> "ClientConnectionPool":
        key = (options.connection_string, options.consumer_group)
        with cls._pools_lock:
            pool = cls._pools.get(key)
            if pool is None:
                pool = cls._pools[key] = cls(*key)
            return pool

    def borrow(self):
        self.borrowed += 1
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            from azure.eventhub import EventHubConsumerClient

            self.created += 1
            return EventHubConsumerClient.from_connection_string(
                self._connection_string, self._consumer_group,
                load_balancing_interval=LOAD_BALANCING_INTERVAL_S)

    def give_back(self, client) -> None:
        self._idle.put(client)

    def management(self):
        """This pool's management client (created on first use; its connection stays open until close_all)."""
        with self._management_lock:
            if self._management is None:
                from .management import PersistentManagementClient

                self._management = PersistentManagementClient.from_connection_string(
                    self._connection_string, self._consumer_group)
            return self._management

    def call(self, method: str, *args):
        """A management call (get_eventhub_properties, get_partition_properties) on the pool's management
        client."""
        return getattr(self.management(), method)(*args)

    @classmethod
    def close_all(cls) -> None:
        with cls._pools_lock:
            pools = list(cls._pools.values())
        for pool in pools:
            with pool._management_lock:
                management, pool._management = pool._management, None
            if management is not None:
                try:
                    management.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
            while True:
                try:
                    client = pool._idle.get_nowait()
                except queue.Empty:
                    break
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _parallel() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="eventhubs-mgmt")
        return _executor


def is_not_found(exc: BaseException) -> bool:
    """The management endpoint answered 404: the hub does not exist (deleted), as opposed to a transient error."""
    text = str(exc).lower()
    return "404" in text or "could not be found" in text or "not found" in text


def partition_properties(options: EventHubsOptions, partition_ids: Iterable[str]) -> dict[str, dict]:
    """get_partition_properties of each partition, asked at the same time."""
    pool = ClientConnectionPool.of(options)
    ids = [str(p) for p in partition_ids]
    if len(ids) == 1:
        return {ids[0]: pool.call("get_partition_properties", ids[0])}
    futures = {p: _parallel().submit(pool.call, "get_partition_properties", p) for p in ids}
    return {p: f.result() for p, f in futures.items()}


def hub_state(options: EventHubsOptions, known_ids: list[str] | None = None) -> tuple[dict, dict[str, dict]]:
    """(hub properties, properties of every partition): the partitions we already know about are asked about
    at the same time as the hub itself; partitions that appeared meanwhile afterwards."""
    pool = ClientConnectionPool.of(options)
    hub_future = _parallel().submit(pool.call, "get_eventhub_properties")
    futures = {p: _parallel().submit(pool.call, "get_partition_properties", p) for p in (known_ids or [])}
    props = hub_future.result()
    ids = [str(p) for p in props["partition_ids"]]
    partitions = {p: f.result() for p, f in futures.items() if p in ids}
    missing = [p for p in ids if p not in partitions]
    if missing:
        partitions.update(partition_properties(options, missing))
    return props, {p: partitions[p] for p in ids}


def translate_position(options: EventHubsOptions, partition: str, position: EventPosition, props: dict) -> int:
    """The sequence number a start position stands for (the connector's EventHubsClient.translate): seqNo as
    given, '-1' the first retained event, '@latest' the end; a byte offset or an enqueued time by receiving
    the first event at that position (the end when the position is past the last event)."""
    bounds = PartitionBounds.from_properties(props)
    if position.kind == "seqNo":
        return int(position.value)  # starting sequence numbers are taken as given (always inclusive)
    if position.is_start_of_stream:
        return bounds.first
    if position.is_end_of_stream:
        return bounds.end
    if bounds.first >= bounds.end:
        return bounds.end
    inclusive = position.inclusive
    if position.kind == "enqueuedTime":
        inclusive = False  # the connector's fromEnqueuedTime: events enqueued after the time
        last_time = props.get("last_enqueued_time_utc")
        if last_time is not None and round(last_time.timestamp() * 1000) <= int(position.value):
            return bounds.end
        start = datetime.fromtimestamp(int(position.value) / 1000, tz=timezone.utc)
    else:
        last_offset = props.get("last_enqueued_offset")
        if last_offset is not None and str(last_offset).isdigit():
            beyond = int(position.value) > int(last_offset) or (
                int(position.value) == int(last_offset) and not position.inclusive)
            if beyond:
                return bounds.end
        start = str(position.value)
    seq = _first_sequence_number_at(options, partition, start, inclusive,
                                    min(options.receiver_timeout_s, 30.0))
    return bounds.end if seq is None else seq


def _first_sequence_number_at(options: EventHubsOptions, partition: str, start, inclusive: bool,
                              timeout_s: float) -> int | None:
    """Receive one event at a position, with the receiver kind the source is configured for (the connector
    translates with its exclusive receiver too); None when no event comes within the timeout."""
    found: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()
    pool = ClientConnectionPool.of(options)
    client = pool.borrow()

    def on_batch(_ctx, events):
        if events and not found:
            found.append(int(events[0].sequence_number))
            done.set()

    def on_error(_ctx, exc):
        errors.append(exc)
        done.set()

    worker = threading.Thread(
        target=client.receive_batch, name=f"eventhubs-translate-{partition}", daemon=True,
        kwargs=dict(on_event_batch=on_batch, partition_id=partition, starting_position=start,
                    starting_position_inclusive=inclusive, prefetch=1, max_batch_size=1, on_error=on_error,
                    owner_level=0 if options.use_exclusive_receiver else None))
    worker.start()
    done.wait(timeout_s)
    client.close()
    worker.join(LOAD_BALANCING_INTERVAL_S * 3 + 2)
    if not worker.is_alive():
        pool.give_back(client)
    if not found and errors:
        raise RuntimeError(f"could not translate the start position {start!r} of partition {partition} to a "
                           f"sequence number: {errors[0]!r}") from errors[0]
    return found[0] if found else None
