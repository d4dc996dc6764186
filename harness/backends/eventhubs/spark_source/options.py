"""The source's options, parsed and checked without Spark (the scenario config validates them before anything runs).

Names, value shapes and defaults are azure-eventhubs-spark's (EventHubsConf, EventPosition, NameAndPartition,
package.scala): option names are case-insensitive, positions are the connector's EventPosition JSON, timeouts
are java.time.Duration strings. Where the connector is silent or lax the checks here are stricter, because a
typo that silently changes the start position or the batch cap ruins a load test:
  * an unknown option name is an error (Spark would ignore it);
  * an EventPosition with more than one of offset / seqNo / enqueuedTime in use is an error (the connector's
    docs say only one may be, its code silently prefers offset);
  * a startingPositions key naming another event hub is an error (the connector ignores it).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping

from harness.text.durations import iso_duration_s
from harness.errors import InputError

CONNECTION_STRING = "eventhubs.connectionString"
CONSUMER_GROUP = "eventhubs.consumerGroup"
STARTING_POSITION = "eventhubs.startingPosition"
STARTING_POSITIONS = "eventhubs.startingPositions"
MAX_EVENTS_PER_TRIGGER = "maxEventsPerTrigger"
RECEIVER_TIMEOUT = "eventhubs.receiverTimeout"
OPERATION_TIMEOUT = "eventhubs.operationTimeout"
PREFETCH_COUNT = "eventhubs.prefetchCount"
USE_EXCLUSIVE_RECEIVER = "eventhubs.useExclusiveReceiver"
PREFERRED_LOCATION_STRATEGY = "partitionPreferredLocationStrategy"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
METRICS_PATH = "harness.metricsPath"
RECEIVER_CACHE = "harness.receiverCache"  # false: a new receiver per task, closed after it (to measure the cache)

#: Canonical spellings, the connector's own (EventHubsConf keys), plus failOnDataLoss and the harness's own two.
ALLOWED_OPTIONS: tuple[str, ...] = (
    CONNECTION_STRING, CONSUMER_GROUP, STARTING_POSITION, STARTING_POSITIONS, MAX_EVENTS_PER_TRIGGER,
    RECEIVER_TIMEOUT, OPERATION_TIMEOUT, PREFETCH_COUNT, USE_EXCLUSIVE_RECEIVER, PREFERRED_LOCATION_STRATEGY,
    FAIL_ON_DATA_LOSS, METRICS_PATH, RECEIVER_CACHE,
)
#: Other accepted spellings: the connector's MaxEventsPerTriggerKeyAlias, and the "eventhubs."-prefixed
#: strategy name (the connector's key has no prefix; both are taken).
ALIASES: dict[str, str] = {
    "eventhubs.maxeventspertrigger": MAX_EVENTS_PER_TRIGGER,
    "eventhubs.partitionpreferredlocationstrategy": PREFERRED_LOCATION_STRATEGY,
}
# Connector options this source does not implement: named as such in the error rather than "unknown".
CONNECTOR_ONLY_OPTIONS = (
    "eventhubs.endingPosition", "eventhubs.endingPositions", "eventhubs.maxRatePerPartition",
    "eventhubs.maxRatesPerPartition", "eventhubs.maxSilentTime", "eventhubs.threadPoolSize",
    "eventhubs.metricPlugin", "eventhubs.slowPartitionAdjustment", "eventhubs.throttlingStatusPlugin",
    "eventhubs.maxAcceptableBatchReceiveTime", "eventhubs.useAadAuth", "eventhubs.aadAuthCallback",
    "eventhubs.AadAuthCallbackParams", "eventhubs.DynamicPartitionDiscovery", "useSimulatedClient",
)

DEFAULT_CONSUMER_GROUP = "$Default"
DEFAULT_RECEIVER_TIMEOUT_S = 60.0  # DefaultReceiverTimeout
DEFAULT_OPERATION_TIMEOUT_S = 300.0  # DefaultOperationTimeout
DEFAULT_PREFETCH_COUNT = 500  # PartitionReceiver.DEFAULT_PREFETCH_COUNT (Java SDK)
PREFETCH_RANGE = (1, 8000)  # PartitionReceiver.MINIMUM_PREFETCH_COUNT .. MAXIMUM_PREFETCH_COUNT
DEFAULT_EVENTS_PER_PARTITION = 1000  # maxEventsPerTrigger defaults to partitionCount * 1000
STRATEGIES = ("Hash", "BalancedHash")  # PartitionPreferredLocationStrategy values, matched exactly
START_OF_STREAM, END_OF_STREAM = "-1", "@latest"


class EventHubsOptionError(ValueError, InputError):
    """A bad source option; the message names the option, the value and what is allowed."""


@dataclass(frozen=True)
class EventPosition:
    """One of the connector's positions: kind 'offset' (value '-1', '@latest' or a byte offset as text),
    'seqNo' (int) or 'enqueuedTime' (epoch ms); inclusive as the connector's isInclusive."""

    kind: str
    value: object
    inclusive: bool = True

    @property
    def is_start_of_stream(self) -> bool:
        return self.kind == "offset" and self.value == START_OF_STREAM

    @property
    def is_end_of_stream(self) -> bool:
        return self.kind == "offset" and self.value == END_OF_STREAM


END_OF_STREAM_POSITION = EventPosition("offset", END_OF_STREAM, inclusive=False)  # DefaultEventPosition


@dataclass(frozen=True)
class ConnectionString:
    endpoint: str  # sb://host[:port]/
    host: str  # host[:port], the SDK's fully qualified namespace
    hub: str  # EntityPath
    emulator: bool

    @property
    def namespace(self) -> str:
        return self.host


@dataclass(frozen=True)
class EventHubsOptions:
    connection_string: str = field(repr=False)  # holds the key: kept out of repr and logs
    connection: ConnectionString
    consumer_group: str = DEFAULT_CONSUMER_GROUP
    starting_position: EventPosition | None = None
    starting_positions: tuple[tuple[int, EventPosition], ...] = ()  # (partition id, position) of this hub
    max_events_per_trigger: int | None = None  # None: partitionCount * 1000, as the connector
    receiver_timeout_s: float = DEFAULT_RECEIVER_TIMEOUT_S
    operation_timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    prefetch_count: int = DEFAULT_PREFETCH_COUNT
    use_exclusive_receiver: bool = True
    preferred_location_strategy: str = "Hash"
    fail_on_data_loss: bool = True
    metrics_path: str | None = None
    receiver_cache: bool = True

    @property
    def hub(self) -> str:
        return self.connection.hub

    def position_for(self, partition: int) -> EventPosition:
        """startingPositions for the partition, else startingPosition, else the end of the stream."""
        for pid, position in self.starting_positions:
            if pid == partition:
                return position
        return self.starting_position or END_OF_STREAM_POSITION

    def default_max_events(self, partition_count: int) -> int:
        if self.max_events_per_trigger is not None:
            return self.max_events_per_trigger
        return partition_count * DEFAULT_EVENTS_PER_PARTITION


def _allowed_text() -> str:
    return ", ".join(ALLOWED_OPTIONS)


def parse_options(options: Mapping[str, str]) -> EventHubsOptions:
    """Check every option and return them typed; raises EventHubsOptionError on the first bad one."""
    canonical = {name.lower(): name for name in ALLOWED_OPTIONS}
    canonical.update(ALIASES)
    unsupported = {name.lower(): name for name in CONNECTOR_ONLY_OPTIONS}
    values: dict[str, str] = {}
    for raw_key, raw_value in options.items():
        key = str(raw_key).lower()
        if key in unsupported:
            raise EventHubsOptionError(
                f"option {raw_key!r} is an azure-eventhubs-spark option this source does not implement; "
                f"allowed options: {_allowed_text()}")
        if key not in canonical:
            raise EventHubsOptionError(f"unknown option {raw_key!r}; allowed options: {_allowed_text()}")
        name = canonical[key]
        if name in values:
            raise EventHubsOptionError(f"option {name!r} is given twice (as {raw_key!r} too)")
        values[name] = "" if raw_value is None else str(raw_value)

    if CONNECTION_STRING not in values:
        raise EventHubsOptionError(
            f"option {CONNECTION_STRING!r} is required: a connection string with EntityPath=<event hub>")
    conn = parse_connection_string(values[CONNECTION_STRING])
    receiver_timeout = _duration(values, RECEIVER_TIMEOUT, DEFAULT_RECEIVER_TIMEOUT_S)
    operation_timeout = _duration(values, OPERATION_TIMEOUT, DEFAULT_OPERATION_TIMEOUT_S)
    if receiver_timeout > operation_timeout:  # EventHubsConf.setReceiverTimeout / setOperationTimeout
        raise EventHubsOptionError(
            f"option {RECEIVER_TIMEOUT!r} ({receiver_timeout:g} s) is greater than {OPERATION_TIMEOUT!r} "
            f"({operation_timeout:g} s); the receiver timeout must not exceed the operation timeout")
    strategy = values.get(PREFERRED_LOCATION_STRATEGY, "Hash")
    if strategy not in STRATEGIES:
        raise EventHubsOptionError(
            f"option {PREFERRED_LOCATION_STRATEGY!r} is {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    consumer_group = values.get(CONSUMER_GROUP, DEFAULT_CONSUMER_GROUP)
    if not consumer_group.strip():
        raise EventHubsOptionError(f"option {CONSUMER_GROUP!r} is empty; give a consumer group name")
    metrics_path = values.get(METRICS_PATH)
    if metrics_path is not None and not metrics_path.strip():
        raise EventHubsOptionError(f"option {METRICS_PATH!r} is empty; give a directory")
    starting_position = None
    if STARTING_POSITION in values:
        starting_position = parse_event_position(values[STARTING_POSITION], STARTING_POSITION)
    starting_positions = ()
    if STARTING_POSITIONS in values:
        starting_positions = parse_starting_positions(values[STARTING_POSITIONS], conn.hub)
    return EventHubsOptions(
        connection_string=values[CONNECTION_STRING],
        connection=conn,
        consumer_group=consumer_group,
        starting_position=starting_position,
        starting_positions=starting_positions,
        max_events_per_trigger=_int(values, MAX_EVENTS_PER_TRIGGER, None, low=1),
        receiver_timeout_s=receiver_timeout,
        operation_timeout_s=operation_timeout,
        prefetch_count=_int(values, PREFETCH_COUNT, DEFAULT_PREFETCH_COUNT, *PREFETCH_RANGE),
        use_exclusive_receiver=_bool(values, USE_EXCLUSIVE_RECEIVER, True),
        preferred_location_strategy=strategy,
        fail_on_data_loss=_bool(values, FAIL_ON_DATA_LOSS, True),
        metrics_path=metrics_path,
        receiver_cache=_bool(values, RECEIVER_CACHE, True),
    )


# ---------------------------------------------------------------------------------------------- scalar values
def _int(values: dict[str, str], name: str, default, low: int | None = None, high: int | None = None):
    if name not in values:
        return default
    text = values[name].strip()
    try:
        number = int(text)
    except ValueError:
        raise EventHubsOptionError(f"option {name!r} is {values[name]!r}; expected an integer") from None
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise EventHubsOptionError(f"option {name!r} is {number}; allowed range {bounds}")
    return number


def _bool(values: dict[str, str], name: str, default: bool) -> bool:
    if name not in values:
        return default
    text = values[name].strip().lower()
    if text not in ("true", "false"):
        raise EventHubsOptionError(f"option {name!r} is {values[name]!r}; expected true or false")
    return text == "true"


def _duration(values: dict[str, str], name: str, default: float) -> float:
    if name not in values:
        return default
    try:
        seconds = iso_duration_s(values[name])
    except ValueError as exc:
        raise EventHubsOptionError(f"option {name!r}: {exc}") from None
    if not seconds > 0 or math.isinf(seconds):
        raise EventHubsOptionError(f"option {name!r} is {values[name]!r}; the duration must be positive")
    return seconds


# ---------------------------------------------------------------------------------------------- connection string
def parse_connection_string(text: str) -> ConnectionString:
    """Endpoint and EntityPath are required (EventHubsConf.validate); keys are case-insensitive as in the SDK."""
    if "endpoint=" not in text.lower():
        raise EventHubsOptionError(
            f"option {CONNECTION_STRING!r} has no Endpoint=sb://<namespace>/; expected Endpoint=sb://<namespace>/;"
            "SharedAccessKeyName=...;SharedAccessKey=...;EntityPath=<hub>. An encrypted connection string "
            "(EventHubsUtils.encrypt, the connector's PySpark form) is not accepted: pass it in plain text")
    parts: dict[str, str] = {}
    for item in text.split(";"):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise EventHubsOptionError(
                f"option {CONNECTION_STRING!r} is not a connection string (a segment has no '='); expected "
                "Endpoint=sb://<namespace>/;SharedAccessKeyName=...;SharedAccessKey=...;EntityPath=<hub>. "
                "An encrypted string (EventHubsUtils.encrypt) is not accepted: pass it in plain text")
        parts[key.strip().lower()] = value.strip()
    endpoint = parts.get("endpoint")
    if not endpoint:
        raise EventHubsOptionError(f"option {CONNECTION_STRING!r} has no Endpoint=sb://<namespace>/")
    hub = parts.get("entitypath")
    if not hub:
        raise EventHubsOptionError(
            f"option {CONNECTION_STRING!r} has no EntityPath. The EntityPath is your event hub name; the "
            "connection string should look like Endpoint=sb://SAMPLE;SharedAccessKeyName=KEY_NAME;"
            "SharedAccessKey=KEY;EntityPath=EVENTHUB_NAME")
    host = re.sub(r"^[a-z]+://", "", endpoint, flags=re.IGNORECASE).rstrip("/")
    if not host:
        raise EventHubsOptionError(f"option {CONNECTION_STRING!r} has an empty Endpoint host")
    return ConnectionString(endpoint, host, hub, parts.get("usedevelopmentemulator") == "true")


# ---------------------------------------------------------------------------------------------- positions
_POSITION_FIELDS = ("offset", "seqNo", "enqueuedTime", "isInclusive")


def parse_event_position(text: str | dict, where: str) -> EventPosition:
    """The connector's EventPosition JSON: {"offset": str|null, "seqNo": long (-1 = unused),
    "enqueuedTime": ISO-8601 string|epoch ms|null, "isInclusive": bool (default true)}."""
    if isinstance(text, dict):
        data = text
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise EventHubsOptionError(f"{where}: not JSON ({exc.msg}); expected an EventPosition such as "
                                       '{"offset": "-1", "seqNo": -1, "enqueuedTime": null, "isInclusive": true}'
                                       ) from None
    if not isinstance(data, dict):
        raise EventHubsOptionError(f"{where}: expected a JSON object with {', '.join(_POSITION_FIELDS)}")
    unknown = sorted(set(data) - set(_POSITION_FIELDS))
    if unknown:
        raise EventHubsOptionError(f"{where}: unknown field {unknown[0]!r}; allowed fields: "
                                   f"{', '.join(_POSITION_FIELDS)}")
    inclusive = data.get("isInclusive", True)
    if not isinstance(inclusive, bool):
        raise EventHubsOptionError(f"{where}: isInclusive is {inclusive!r}; expected true or false")
    in_use = []
    offset = data.get("offset")
    if offset is not None:
        if isinstance(offset, bool) or not isinstance(offset, (str, int)):
            raise EventHubsOptionError(f"{where}: offset is {offset!r}; expected a string: '-1' (start of "
                                       "stream), '@latest' (end of stream) or a byte offset")
        offset = str(offset)
        if offset not in (START_OF_STREAM, END_OF_STREAM) and not offset.isdigit():
            raise EventHubsOptionError(f"{where}: offset is {offset!r}; expected '-1' (start of stream), "
                                       "'@latest' (end of stream) or a non-negative byte offset")
        in_use.append(EventPosition("offset", offset, inclusive))
    seq = data.get("seqNo", -1)
    if seq is None:
        seq = -1
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise EventHubsOptionError(f"{where}: seqNo is {seq!r}; expected an integer (-1 when not in use)")
    if seq >= 0:
        in_use.append(EventPosition("seqNo", seq, inclusive))
    elif seq != -1:
        raise EventHubsOptionError(f"{where}: seqNo is {seq}; expected a sequence number >= 0 or -1 (not in use)")
    when = data.get("enqueuedTime")
    if when is not None:
        in_use.append(EventPosition("enqueuedTime", _epoch_ms(when, where), inclusive))
    if not in_use:
        raise EventHubsOptionError(f"{where}: no position set; give one of offset, seqNo (>= 0) or enqueuedTime")
    if len(in_use) > 1:
        raise EventHubsOptionError(f"{where}: {' and '.join(p.kind for p in in_use)} are both set; only one of "
                                   "offset, seqNo and enqueuedTime may be in use")
    return in_use[0]


def _epoch_ms(value, where: str) -> int:
    if isinstance(value, bool):
        raise EventHubsOptionError(f"{where}: enqueuedTime is {value!r}; expected an ISO-8601 time or epoch ms")
    if isinstance(value, (int, float)):
        return int(value)  # a JSON number is epoch milliseconds (json4s reads a number into a Date as ms)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise EventHubsOptionError(f"{where}: enqueuedTime is {value!r}; expected ISO-8601 such as "
                                       "2024-01-31T12:00:00.000Z, or epoch milliseconds") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)  # the connector's format ends in a literal Z: UTC
        return int(parsed.timestamp() * 1000)
    raise EventHubsOptionError(f"{where}: enqueuedTime is {value!r}; expected an ISO-8601 time or epoch ms")


def parse_starting_positions(text: str, hub: str) -> tuple[tuple[int, EventPosition], ...]:
    """{"<NameAndPartition JSON>": EventPosition}, keys as the connector writes them:
    '{"ehName":"<hub>","partitionId":0}'."""
    where = STARTING_POSITIONS
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise EventHubsOptionError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise EventHubsOptionError(f"{where}: expected a JSON object mapping NameAndPartition keys to positions")
    out: dict[int, EventPosition] = {}
    for key, value in data.items():
        shape = '{"ehName": "<hub>", "partitionId": <int>} as a JSON string'
        try:
            name_and_partition = json.loads(key)
        except ValueError:
            raise EventHubsOptionError(f"{where}: key {key!r} is not a NameAndPartition; expected {shape}") from None
        if (not isinstance(name_and_partition, dict) or set(name_and_partition) != {"ehName", "partitionId"}
                or not isinstance(name_and_partition["partitionId"], int)
                or isinstance(name_and_partition["partitionId"], bool)):
            raise EventHubsOptionError(f"{where}: key {key!r} is not a NameAndPartition; expected {shape}")
        if name_and_partition["ehName"] != hub:
            raise EventHubsOptionError(f"{where}: key {key!r} names event hub {name_and_partition['ehName']!r}, "
                                       f"but the connection string's EntityPath is {hub!r}")
        pid = name_and_partition["partitionId"]
        if pid < 0:
            raise EventHubsOptionError(f"{where}: key {key!r} has a negative partitionId")
        if pid in out:
            raise EventHubsOptionError(f"{where}: partition {pid} is given twice")
        out[pid] = parse_event_position(value, f"{where}[{key}]")
    return tuple(sorted(out.items()))
