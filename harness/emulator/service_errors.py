"""Error conditions and descriptions worded as the Event Hubs service words them.

Clients match on the condition; people and logs match on the text, so both follow what the service sends (texts
as quoted in public SDK issue reports), including the ``TrackingId/SystemTracker/Timestamp`` tail the service
appends to every description.
"""

from __future__ import annotations

import datetime as _dt
import uuid

NOT_FOUND = "amqp:not-found"
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
LINK_STOLEN = "amqp:link:stolen"
ARGUMENT_ERROR = "com.microsoft:argument-error"
ARGUMENT_OUT_OF_RANGE = "com.microsoft:argument-out-of-range"


def tracked(description: str, tracker: str) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{description} TrackingId:{uuid.uuid4()}_G0, SystemTracker:{tracker}, Timestamp:{now}"


def entity_not_found(entity_uri: str) -> str:
    """``entity_uri``: ``sb://<host>/<hub>[/consumergroups/<cg>]`` as the client addressed it."""
    return tracked(
        f"The messaging entity '{entity_uri}' could not be found. To know more visit "
        "https://aka.ms/sbResourceMgrExceptions.",
        entity_uri.split("://", 1)[-1].replace("/", ":", 1),
    )


def invalid_partition(partition_id: str, partition_count: int, tracker: str) -> str:
    return tracked(
        "The specified partition is invalid for an EventHub partition sender or receiver. It should be between 0 "
        f"and {partition_count - 1}.\r\nParameter name: PartitionId",
        tracker,
    )


def receiver_quota(limit: int, names: list[str], tracker: str) -> str:
    listed = ", ".join(names)
    return tracked(
        f"Exceeded the maximum number of allowed receivers per partition in a consumer group which is {limit}. "
        f"List of connected receivers - {listed}.",
        tracker,
    )


def epoch_stolen(new_name: str, new_epoch, old_name: str, old_epoch) -> str:
    return (
        f"New receiver '{new_name}' with higher epoch of '{new_epoch}' is created hence current receiver "
        f"'{old_name}' with epoch '{old_epoch}' is getting disconnected. If you are recreating the receiver, make "
        "sure a higher epoch is used."
    )


def lower_epoch_refused(name: str, epoch: int, current: int) -> str:
    return (
        f"Receiver '{name}' with a higher epoch '{current}' already exists. Receiver '{name}' with epoch {epoch} "
        "cannot be created. Make sure you are creating receiver with increasing epoch value to ensure "
        "connectivity, or ensure all old epoch receivers are closed or disconnected."
    )


def non_epoch_refused(current: int) -> str:
    return (
        f"At least one receiver for the endpoint is created with epoch of '{current}', and so non-epoch receiver "
        "is not allowed. Either reconnect with a higher epoch, or make sure all epoch receivers are closed or "
        "disconnected."
    )


def connection_inactive(idle_ms: int, container_id: str) -> str:
    """The service's text when it closes a silent connection (``amqp:connection:forced``)."""
    return tracked(f"The connection was inactive for more than the allowed {idle_ms} milliseconds and is closed by "
                   f"container '{container_id}'.", "gateway5")


def connection_quota(limit: int, namespace: str) -> str:
    """Refusal of a connection above ``Emulator.MaxConnections`` (``amqp:resource-limit-exceeded``)."""
    return tracked(f"Cannot open more connections to namespace '{namespace}': it already has {limit}, the limit "
                   "(Emulator.MaxConnections). Close unused clients or raise the limit.", namespace)


def incomplete_frames_limit(total: int, limit: int, held: int) -> str:
    """The connection closed because unfinished frames of all connections passed the emulator's budget."""
    return tracked(f"The emulator holds {total} bytes of incomplete frames across all connections, more than the "
                   f"limit of {limit} (Emulator.MaxIncompleteFrameBytes); this connection held the most ({held} "
                   "bytes) and is closed.", "emulator")
