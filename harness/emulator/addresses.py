"""Link addresses and selector filters as the SDK writes them.

Sender target: ``amqps://<host>/<hub>`` or ``amqps://<host>/<hub>/Partitions/<id>``.
Receiver source: ``amqps://<host>/<hub>/ConsumerGroups/<cg>/Partitions/<id>`` with a selector filter
``amqp.annotation.x-opt-offset > '<offset>'`` (or ``x-opt-sequence-number``, ``x-opt-enqueued-time``; ``>=``
when inclusive; offset ``-1`` = start of stream, ``@latest`` = end).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SELECTOR = "apache.org:selector-filter:string"
_FILTER_RE = re.compile(
    r"^\s*amqp\.annotation\.x-opt-(offset|sequence-number|enqueued-time)\s*(>=|>|=)\s*'([^']*)'\s*$",
    re.IGNORECASE,
)


_FIELD_NAMES = {"offset": "offset", "sequence-number": "sequence number", "enqueued-time": "enqueued time"}


class AddressError(ValueError):
    pass


class FilterError(AddressError):
    """The source filter (starting position) is not one the service accepts: an argument error, not not-found."""


class PositionError(FilterError):
    """A starting position the service would refuse (``field`` as the service names it, the raw ``value``)."""

    def __init__(self, field: str, value: str) -> None:
        super().__init__(f"The supplied {field} '{value}' is invalid.")
        self.field = field
        self.value = value


def path_segments(address) -> list[str]:
    if isinstance(address, bytes):
        address = address.decode("utf-8", "replace")
    if not isinstance(address, str) or not address:
        raise AddressError("missing address")
    if "://" in address:
        address = address.split("://", 1)[1]
        address = address.split("/", 1)[1] if "/" in address else ""
    return [seg for seg in address.split("/") if seg]


def entity_uri(address, *segments: str) -> str:
    """``sb://<host the client addressed>/<segments>``, the form the service names entities in errors."""
    text = address.decode("utf-8", "replace") if isinstance(address, bytes) else str(address or "")
    host = text.split("://", 1)[1].split("/", 1)[0] if "://" in text else ""
    return f"sb://{host}/" + "/".join(segments)


def audience_path(uri: str) -> str:
    """Lower-cased path of an audience or address, without scheme and host: 'hub1/consumergroups/cg'."""
    try:
        return "/".join(path_segments(uri)).lower()
    except AddressError:
        return ""


@dataclass(frozen=True)
class SendTarget:
    hub: str
    partition_id: str | None


@dataclass(frozen=True)
class ReceiveSource:
    hub: str
    consumer_group: str
    partition_id: str


def parse_send_target(address) -> SendTarget:
    segs = path_segments(address)
    if len(segs) == 1:
        return SendTarget(segs[0], None)
    if len(segs) == 3 and segs[1].lower() == "partitions":
        return SendTarget(segs[0], segs[2])
    raise AddressError(f"not an event hub send address: {address!r}")


def parse_receive_source(address) -> ReceiveSource:
    segs = path_segments(address)
    if len(segs) == 5 and segs[1].lower() == "consumergroups" and segs[3].lower() == "partitions":
        return ReceiveSource(segs[0], segs[2], segs[4])
    raise AddressError(f"not an event hub receive address: {address!r}")


@dataclass(frozen=True)
class StartPosition:
    kind: str  # earliest | latest | offset | seq | time
    value: int | None = None
    inclusive: bool = False


def parse_filter(filter_map) -> StartPosition:
    """Starting position from a source filter map (None/empty = start of stream)."""
    if not filter_map:
        return StartPosition("earliest")
    if not isinstance(filter_map, dict):
        raise FilterError("The source filter is not a map.")
    expr = None
    for key, value in filter_map.items():
        if str(key) == SELECTOR or getattr(value, "descriptor", None) in (SELECTOR, 0x0000468C00000004):
            expr = getattr(value, "value", value)
            break
    if expr is None:
        return StartPosition("earliest")
    if isinstance(expr, bytes):
        expr = expr.decode("utf-8", "replace")
    m = _FILTER_RE.match(str(expr))
    if not m:
        raise FilterError(f"The selector filter {expr!r} is not supported.")
    field, op, raw = m.group(1).lower(), m.group(2), m.group(3).strip()
    inclusive = op in (">=", "=")
    if field == "offset":
        if raw == "-1":
            return StartPosition("earliest")
        if raw.lower() == "@latest":
            return StartPosition("latest")
        kind = "offset"
    elif field == "sequence-number":
        kind = "seq"
    else:
        kind = "time"
    try:
        value = int(raw)
    except ValueError:
        # Offsets are opaque strings to clients, but the emulator only ever hands out decimal byte positions,
        # so anything else cannot be one of its offsets.
        raise PositionError(_FIELD_NAMES[field], raw) from None
    if kind == "offset" and value < 0:
        return StartPosition("earliest")
    return StartPosition(kind, value, inclusive)
