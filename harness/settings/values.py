"""Values of pass-through settings, judged by the type the software itself gave each setting.

A known name with a wrong value is as quiet as a misspelt name: Spark reads `spark.sql.adaptive.enabled = "maybe"`
only when the query plans (the run fails late with a JVM error, or a conf read lazily never fails at all), and a
Kafka topic config is refused only when the harness creates the topic, after the broker has started. The types
come from the software (SettingNames.java: Spark's ConfigEntry converters probed with sample strings, Kafka's
ConfigDef types, ranges and allowed strings, cached with the names by harness.settings.catalogue); this module
holds the parsing rules those types stand for, as Spark's ConfigHelpers/JavaUtils and Kafka's ConfigDef.parseType
apply them (tests/integration/test_setting_values_real.py holds each to the real converter and broker).

Each function returns the reason a value is refused, or None. A value holding a `${VAR}` reference is expanded
later (harness.secrets) and is not judged here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.text.durations import spark_bytes

_JAVA_TRIM = "".join(chr(c) for c in range(33))  # String.trim: every char <= ' ' at either end
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Double.parseDouble's decimal forms (Java also takes hex floats; nobody writes those in a config)
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
# JavaUtils.timeSuffixes in nanoseconds (harness.text.durations reads the same strings in milliseconds, too coarse for
# an entry kept in microseconds)
_TIME_NS = {"us": 1_000, "ms": 1_000_000, "s": 10 ** 9, "m": 60 * 10 ** 9, "min": 60 * 10 ** 9, "h": 3600 * 10 ** 9,
            "d": 86400 * 10 ** 9}
_BOUNDS = {"int": (-2 ** 31, 2 ** 31 - 1), "short": (-2 ** 15, 2 ** 15 - 1), "long": (-2 ** 63, 2 ** 63 - 1)}
TIME_ALLOWED = "an integer with a suffix us, ms, s, m, min, h or d (e.g. '30s', '500ms', '5min')"
BYTES_ALLOWED = "an integer with a suffix b, k, m, g, t or p (e.g. '512m', '2g'; no fractions)"


@dataclass(frozen=True)
class SparkType:
    """A Spark conf entry's value type: kind (boolean, int, long, double, time, bytes, enum, string, other),
    its lower bound ("" none, "0" at least 0, ">0" positive, "?" one the probe could not tell), an enum's
    values (`any_case`: Spark takes them in any case), the largest whole number it takes (None: its type's) and
    a time's unit in nanoseconds or a size's in bytes (what a bare number means; None: not known)."""
    kind: str
    minimum: str = ""
    options: tuple[str, ...] = ()
    any_case: bool = False
    maximum: int | None = None
    unit: int | None = None

    @classmethod
    def parse(cls, fields: list[str]) -> "SparkType":
        kind, minimum, options, maximum, unit = (fields + [""] * 5)[:5]
        values = [o for o in options.split("|") if o]
        any_case = bool(values) and values[-1] == "i"
        return cls(kind, minimum, tuple(values[:-1] if any_case else values), any_case,
                   int(maximum) if maximum.lstrip("-").isdigit() else None, int(unit) if unit.isdigit() else None)


@dataclass(frozen=True)
class KafkaType:
    """A Kafka ConfigDef key: its Type (BOOLEAN, INT, SHORT, LONG, DOUBLE, STRING, LIST, CLASS, PASSWORD), a
    Range validator's bounds, a ValidString/ValidList's allowed strings (`any_case`: CaseInsensitiveValidString)."""
    kind: str
    minimum: float | None = None
    maximum: float | None = None
    options: tuple[str, ...] = ()
    any_case: bool = False

    @classmethod
    def parse(cls, fields: list[str]) -> "KafkaType":
        kind, lo, hi, options = (fields + ["", "", "", ""])[:4]
        values = [o for o in options.split("|") if o]
        any_case = bool(values) and values[-1] == "i"
        return cls(kind, _number(lo), _number(hi), tuple(values[:-1] if any_case else values), any_case)


def _number(text: str) -> float | None:
    try:
        return (int(text) if re.fullmatch(r"-?[0-9]+", text) else float(text)) if text not in ("", "null") else None
    except ValueError:
        return None


def _n(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def _text(value: object) -> str:
    """What the software is handed: the harness passes TOML booleans as 'true'/'false', the rest with str()."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _integer(text: str, kind: str) -> int | None:
    body = text.strip(_JAVA_TRIM)
    if not _INTEGER.fullmatch(body):
        return None
    number = int(body)
    lo, hi = _BOUNDS[kind]
    return number if lo <= number <= hi else None


def _double(text: str) -> float | None:
    body = text.strip(_JAVA_TRIM)
    return float(body.rstrip("fFdD")) if _DOUBLE.fullmatch(body) else None


def _options(options: tuple[str, ...], any_case: bool) -> str:
    return ", ".join(options) + (" (any case)" if any_case else "")


def _one_of(text: str, options: tuple[str, ...], any_case: bool) -> bool:
    return text.upper() in {o.upper() for o in options} if any_case else text in options


def _time(text: str, unit_ns: int | None) -> int | None:
    """JavaUtils.timeStringAs: the value in the entry's unit (TimeUnit.convert truncates toward zero), or None."""
    m = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", text.lower().strip(_JAVA_TRIM))
    if not m or (m.group(2) is not None and m.group(2) not in _TIME_NS):
        return None
    number = int(m.group(1))
    if not _BOUNDS["long"][0] <= number <= _BOUNDS["long"][1]:
        return None
    if m.group(2) is None or not unit_ns:
        return number
    scaled = abs(number) * _TIME_NS[m.group(2)] // unit_ns
    return -scaled if number < 0 else scaled


def _bytes(text: str, unit: int | None) -> int | None:
    """ConfigHelpers.byteFromString: a leading '-' negates, then JavaUtils.byteStringAs in the entry's unit
    (ByteUnit floors; over a long is refused), or None."""
    negative = text.startswith("-")
    body = text[1:] if negative else text
    try:
        number = spark_bytes(body, "b")
    except ValueError:
        return None
    bare = re.fullmatch(r"[0-9]+", body.strip(_JAVA_TRIM)) is not None  # already in the entry's unit
    if number > _BOUNDS["long"][1]:
        return None
    in_unit = number if bare or not unit else number // unit
    return -in_unit if negative else in_unit


def spark_value_problem(value: object, spark_type: SparkType) -> str | None:
    """Why Spark's converter for this type refuses `value`, or None (also for types not checked here)."""
    text = _text(value)
    if "${" in text:
        return None
    kind = spark_type.kind
    if kind == "boolean":
        return None if text.strip(_JAVA_TRIM).lower() in ("true", "false") else "not a boolean; allowed: true, false"
    if kind == "enum" and spark_type.options:
        return None if _one_of(text, spark_type.options, spark_type.any_case) else \
            f"not one of the allowed values; allowed: {_options(spark_type.options, spark_type.any_case)}"
    if kind in ("int", "long"):
        number = _integer(text, kind)
        if number is None:
            lo, hi = _BOUNDS[kind]
            return f"not an integer; allowed: an integer from {lo} to {hi}, no fraction and no unit"
    elif kind == "double":
        number = _double(text)
        if number is None:
            return "not a number; allowed: a decimal number such as 0.5 or 2"
    elif kind == "time":
        number = _time(text, spark_type.unit)
        if number is None:
            return f"not a Spark time; allowed: {TIME_ALLOWED}, or an integer in {_unit(spark_type)}"
    elif kind == "bytes":
        number = _bytes(text, spark_type.unit)
        if number is None:
            return f"not a Spark size; allowed: {BYTES_ALLOWED}, or an integer in {_unit(spark_type)}"
    else:
        return None
    if spark_type.minimum == "0" and number < 0:
        return "negative; allowed: 0 or more"
    if spark_type.minimum == ">0" and number <= 0:
        read = f" (Spark reads it as {number} {_unit(spark_type)})" if kind in ("time", "bytes") else ""
        return f"not positive{read}; allowed: more than 0"
    top = spark_type.maximum
    if top is not None and (number >= top + 1 if kind == "double" else number > top):
        return f"too large; allowed: at most {top}" + (f" {_unit(spark_type)}" if kind in ("time", "bytes") else "")
    return None


_UNIT_NAMES = {1: "nanoseconds", 1_000: "microseconds", 1_000_000: "milliseconds", 10 ** 9: "seconds",
               60 * 10 ** 9: "minutes", 3600 * 10 ** 9: "hours", 86400 * 10 ** 9: "days"}
_BYTE_NAMES = {1: "bytes", 1 << 10: "KiB", 1 << 20: "MiB", 1 << 30: "GiB", 1 << 40: "TiB", 1 << 50: "PiB"}


def _unit(spark_type: SparkType) -> str:
    names = _UNIT_NAMES if spark_type.kind == "time" else _BYTE_NAMES
    return names.get(spark_type.unit or 0, "the setting's own unit")


def kafka_value_problem(value: object, kafka_type: KafkaType) -> str | None:
    """Why Kafka's ConfigDef (parseType, then the key's Range/ValidString/ValidList) refuses `value`, or None."""
    text = _text(value)
    if "${" in text:
        return None
    kind, body = kafka_type.kind, text.strip(_JAVA_TRIM)
    number: float | None = None
    if kind == "BOOLEAN":
        return None if body.lower() in ("true", "false") else "not a boolean; allowed: true, false"
    if kind in ("INT", "SHORT", "LONG"):
        number = _integer(body, kind.lower())
        if number is None:
            lo, hi = _BOUNDS[kind.lower()]
            return f"not an integer ({kind}); allowed: an integer from {lo} to {hi}, no fraction and no unit"
    elif kind == "DOUBLE":
        number = _double(body)
        if number is None:
            return "not a number; allowed: a decimal number such as 0.5"
    elif kind == "STRING" and kafka_type.options and not _one_of(body, kafka_type.options, kafka_type.any_case):
        return f"not one of the allowed values; allowed: {_options(kafka_type.options, kafka_type.any_case)}"
    elif kind == "LIST" and kafka_type.options and body:
        wrong = [item for item in re.split(r"\s*,\s*", body) if not _one_of(item, kafka_type.options, False)]
        if wrong:
            return f"{wrong[0][:80]!r} is not allowed in this list; allowed: a comma-separated list of " \
                   f"{_options(kafka_type.options, False)}"
    if number is not None:
        lo, hi = kafka_type.minimum, kafka_type.maximum
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            bound = f"from {_n(lo)} to {_n(hi)}" if lo is not None and hi is not None else \
                f"at least {_n(lo)}" if lo is not None else f"at most {_n(hi)}"
            return f"out of range; allowed: {bound}"
    return None
