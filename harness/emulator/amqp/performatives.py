"""AMQP 1.0 performatives, SASL frames, errors and outcomes as positional field lists.

Incoming bodies are decoded to a ``Performative`` (descriptor code + list padded to full arity) so handlers can
read fields by name; outgoing ones are always encoded at full arity with explicit types, because the SDK
indexes the fields of what it receives by position.
"""

from __future__ import annotations

from .codec import DecodeError, decode, encode, encode_list_full
from .types import Described, Symbol, ULong

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)
ERROR = 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED = range(0x23, 0x28)
SOURCE, TARGET = 0x28, 0x29

FIELDS = {
    OPEN: ("container_id", "hostname", "max_frame_size", "channel_max", "idle_time_out", "outgoing_locales",
           "incoming_locales", "offered_capabilities", "desired_capabilities", "properties"),
    BEGIN: ("remote_channel", "next_outgoing_id", "incoming_window", "outgoing_window", "handle_max",
            "offered_capabilities", "desired_capabilities", "properties"),
    ATTACH: ("name", "handle", "role", "snd_settle_mode", "rcv_settle_mode", "source", "target", "unsettled",
             "incomplete_unsettled", "initial_delivery_count", "max_message_size", "offered_capabilities",
             "desired_capabilities", "properties"),
    FLOW: ("next_incoming_id", "incoming_window", "next_outgoing_id", "outgoing_window", "handle",
           "delivery_count", "link_credit", "available", "drain", "echo", "properties"),
    TRANSFER: ("handle", "delivery_id", "delivery_tag", "message_format", "settled", "more", "rcv_settle_mode",
               "state", "resume", "aborted", "batchable"),
    DISPOSITION: ("role", "first", "last", "settled", "state", "batchable"),
    DETACH: ("handle", "closed", "error"),
    END: ("error",),
    CLOSE: ("error",),
    SASL_MECHANISMS: ("sasl_server_mechanisms",),
    SASL_INIT: ("mechanism", "initial_response", "hostname"),
    SASL_CHALLENGE: ("challenge",),
    SASL_RESPONSE: ("response",),
    SASL_OUTCOME: ("code", "additional_data"),
}
NAMES = {
    OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer",
    DISPOSITION: "disposition", DETACH: "detach", END: "end", CLOSE: "close",
    SASL_MECHANISMS: "sasl-mechanisms", SASL_INIT: "sasl-init", SASL_CHALLENGE: "sasl-challenge",
    SASL_RESPONSE: "sasl-response", SASL_OUTCOME: "sasl-outcome",
}
_INDEX = {code: {name: i for i, name in enumerate(names)} for code, names in FIELDS.items()}
SOURCE_FIELDS = ("address", "durable", "expiry_policy", "timeout", "dynamic", "dynamic_node_properties",
                 "distribution_mode", "filter", "default_outcome", "outcomes", "capabilities")
TARGET_FIELDS = ("address", "durable", "expiry_policy", "timeout", "dynamic", "dynamic_node_properties",
                 "capabilities")


class ProtocolError(Exception):
    """A peer broke the protocol; ``condition`` is the AMQP error symbol to close with."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


class Performative:
    """Decoded performative: ``code`` and ``fields`` padded to full arity; fields readable as attributes."""

    __slots__ = ("code", "fields", "payload")

    def __init__(self, code: int, fields: list, payload: bytes = b"") -> None:
        self.code = code
        self.fields = fields
        self.payload = payload

    def __getattr__(self, name):
        try:
            return self.fields[_INDEX[self.code][name]]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def kind(self) -> str:
        return NAMES.get(self.code, hex(self.code))

    def __repr__(self) -> str:
        names = FIELDS.get(self.code, ())
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self.fields) if v is not None)
        return f"<{self.kind} {shown}>"


def decode_body(body: bytes) -> Performative:
    """Decode a frame body (performative + optional transfer payload)."""
    if len(body) < 3 or body[0] != 0x00:
        raise ProtocolError("amqp:decode-error", "frame body is not a described performative")
    descriptor, pos = decode(body, 1, 1)
    if isinstance(descriptor, int):
        code = int(descriptor)
    else:
        code = _SYMBOLIC.get(str(descriptor), -1)
    arity = FIELDS.get(code)
    if arity is None:
        raise ProtocolError("amqp:decode-error", f"unknown performative descriptor {descriptor!r}")
    if pos >= len(body) or body[pos] not in (0xC0, 0xD0, 0x45):
        raise ProtocolError("amqp:decode-error", f"{NAMES[code]} body is not a list")
    fields, pos = decode(body, pos, 1)
    n = len(arity)
    if len(fields) > n:
        del fields[n:]  # ignore fields from newer protocol versions
    elif len(fields) < n:
        fields.extend([None] * (n - len(fields)))
    payload = b""
    if code == TRANSFER:
        payload = body[pos:]
    elif pos != len(body):
        raise ProtocolError("amqp:decode-error", f"trailing bytes after {NAMES[code]}")
    return Performative(code, fields, payload)


_SYMBOLIC = {
    "amqp:open:list": OPEN, "amqp:begin:list": BEGIN, "amqp:attach:list": ATTACH, "amqp:flow:list": FLOW,
    "amqp:transfer:list": TRANSFER, "amqp:disposition:list": DISPOSITION, "amqp:detach:list": DETACH,
    "amqp:end:list": END, "amqp:close:list": CLOSE, "amqp:sasl-mechanisms:list": SASL_MECHANISMS,
    "amqp:sasl-init:list": SASL_INIT, "amqp:sasl-challenge:list": SASL_CHALLENGE,
    "amqp:sasl-response:list": SASL_RESPONSE, "amqp:sasl-outcome:list": SASL_OUTCOME,
}


def encode_performative(code: int, fields: list) -> bytearray:
    """Encode ``fields`` (already typed) as a full-arity described list."""
    n = len(FIELDS[code])
    if len(fields) != n:
        raise ValueError(f"{NAMES[code]} needs {n} fields, got {len(fields)}")
    out = bytearray(b"\x00\x53")
    out.append(code)
    return encode_list_full(fields, out)


def error(condition: str, description: str | None = None, info: dict | None = None) -> Described:
    """amqp:error:list at full arity (condition, description, info)."""
    return Described(ULong(ERROR), [Symbol(condition), description, info])


def outcome(code: int, fields: list | None = None) -> Described:
    return Described(ULong(code), fields if fields is not None else [])


def encode_value(value) -> bytes:
    return bytes(encode(value, bytearray()))


def terminus_fields(value, names) -> list | None:
    """Field list of a decoded source/target (padded), or None if absent/malformed."""
    if not isinstance(value, Described) or not isinstance(value.value, list):
        return None
    fields = list(value.value)
    if len(fields) < len(names):
        fields.extend([None] * (len(names) - len(fields)))
    return fields[: len(names)]


__all__ = [
    "DecodeError", "Performative", "ProtocolError", "decode_body", "encode_performative", "error", "outcome",
]
