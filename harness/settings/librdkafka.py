"""librdkafka's own judgement of a setting (the producers and the harness's admin use confluent-kafka).

librdkafka has no list of its properties an application can read, but it checks every name and value as the
configuration is set, before any client exists. So each setting is handed to a confluent_kafka Producer together
with a sentinel setting whose value is invalid: the constructor always raises, either on the user's setting
("No such configuration property", "Invalid value ...") or on the sentinel, which means the user's setting was
accepted. No client is created, no thread started, no network touched.
"""
from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, Producer

_SENTINELS = ("batch.num.messages", "message.max.bytes")  # integers: "x" is never a valid value
UNKNOWN = "No such configuration property"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def refusal(name: str, value: Any) -> tuple[str, str] | None:
    """None when librdkafka accepts `name = value`; else ("unknown", its message) or ("value", its message).
    A value holding a `${VAR}` reference is judged by name only (the reference is expanded by the producer)."""
    sentinel = next(s for s in _SENTINELS if s != name)
    probe = "x" if "${" in _text(value) else _text(value)
    try:
        client = Producer({name: probe, sentinel: "x"})
    except KafkaException as exc:
        message = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        if message.startswith(UNKNOWN):
            return "unknown", message
        if f'"{sentinel}"' in message or "${" in _text(value):
            return None
        return "value", message
    except (TypeError, ValueError) as exc:  # a name confluent_kafka itself takes (callbacks such as error_cb)
        return "value", str(exc)
    del client  # never reached (the sentinel is invalid); a client made anyway is not kept
    raise AssertionError(f"librdkafka accepted {sentinel} = 'x', which this check relies on being refused")


def knows(name: str) -> bool:
    """librdkafka has a setting of this name (whatever values it takes)."""
    refused = refusal(name, "x")
    return refused is None or refused[0] != "unknown"
