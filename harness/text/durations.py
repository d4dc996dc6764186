"""Durations as people and connectors write them, each syntax parsed in one place:

- Spark's interval words (`spark_interval_ms`, `spark_trigger_ms`): '10 seconds', '1 minute 30 seconds',
  'interval 2 hours', what Spark takes for a trigger interval, a window or a watermark delay, parsed by a port of
  Spark's own parser (tests/integration/test_durations_spark.py holds it to Spark on a list of strings);
- Spark's time and size strings (`spark_time_string_ms`, `spark_bytes`): '15m', '500ms'; '512m', '2g', what
  Spark's configuration and the Kafka source's maxTriggerDelay take;
- ISO-8601 (`iso_duration_s`): 'PT60S', 'PT1M30S', what java.time.Duration.parse takes, and so the Event Hubs
  connector's `eventhubs.*Timeout` options;
- the command line's (`cli_duration_s`): '2h', '10m', '90s', '1h30m' or plain seconds, for `--duration`.
Each raises ValueError saying what it expected; callers name the file, option or flag.
"""
from __future__ import annotations

import re

from harness.text.suggest import did_you_mean

_MICROS = {"week": 7 * 86_400_000_000, "day": 86_400_000_000, "hour": 3_600_000_000, "minute": 60_000_000,
           "second": 1_000_000, "millisecond": 1000, "microsecond": 1}
# The order Spark's parser tries units at a word's first letter (month before minute before millisecond ...).
_UNIT_WORDS = ("year", "week", "day", "hour", "second", "month", "minute", "millisecond", "microsecond")
_LONG_MAX, _INT_MAX = 2 ** 63 - 1, 2 ** 31 - 1
_ALLOWED = ("allowed: weeks, days, hours, minutes, seconds, milliseconds, microseconds (singular or plural), "
            "each after a number and a space, a fraction only for seconds, optionally after 'interval'; e.g. "
            "'10 seconds', '1 minute 30 seconds'")


def _whitespace(ch: str) -> bool:
    """Java's Character.isWhitespace on one byte of ASCII (what Spark's parser asks of each byte)."""
    return ch in " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"


_ABBREVIATIONS = {"s": "seconds", "sec": "seconds", "secs": "seconds", "ms": "milliseconds", "msec": "milliseconds",
                  "m": "minutes", "min": "minutes", "mins": "minutes", "h": "hours", "hr": "hours", "hrs": "hours",
                  "d": "days", "w": "weeks", "wk": "weeks", "us": "microseconds"}


def _unknown_unit(word: str, note: str = "") -> str:
    """"unknown unit 'secnd'; did you mean 'seconds'?": Spark spells its units out, a typo or an abbreviation
    gets the word it meant."""
    if word in _ABBREVIATIONS:
        hint = f"; did you mean {_ABBREVIATIONS[word]!r}?"
    else:
        hint = did_you_mean(word, [f"{u}s" for u in _UNIT_WORDS if u not in ("year", "month")])
    return f"unknown unit {word[:40]!r}" + (f" ({note}{hint})" if note else hint)


def _in_int(value: int) -> bool:
    return -_INT_MAX - 1 <= value <= _INT_MAX


def _interval(text: str) -> tuple[int, int, int]:
    """(months, days, microseconds) exactly as Spark's SparkIntervalUtils.stringToInterval reads `text` (a port of
    its state machine: case-insensitive, an optional 'interval' prefix, '[+|-] number unit' groups separated by
    whitespace, a fraction of up to 9 digits only before 'second', plural 's' optional, overflow refused).
    Raises ValueError with Spark's reason."""
    def refuse(reason: str) -> ValueError:
        return ValueError(f"{reason} in {str(text)[:200]!r} (not a Spark interval; {_ALLOWED})")

    s = str(text).strip("".join(chr(c) for c in range(33))).lower()  # UTF8String.trimAll: <= 0x20 either side
    if not s:
        raise refuse("empty")
    i = 0
    if s.startswith("interval"):
        if len(s) == len("interval"):
            raise refuse("nothing after 'interval'")
        if not _whitespace(s[len("interval")]):
            raise refuse("invalid prefix")
        i = len("interval") + 1
    months = days = micros = 0
    n = len(s)
    while True:
        while i < n and _whitespace(s[i]):
            i += 1
        if i >= n:
            break
        negative, point_prefixed = False, False
        value, fraction_digits = 0, None
        if s[i] in "+-":
            negative = s[i] == "-"
            i += 1
            while i < n and _whitespace(s[i]):
                i += 1
            if i >= n:
                raise refuse("a number expected after the sign")
        elif s[i] == ".":
            point_prefixed = True
        elif not s[i].isascii() or not s[i].isdigit():
            raise refuse(f"no number at {s[i:i + 20]!r}")
        if not point_prefixed:
            start = i
            while i < n and "0" <= s[i] <= "9":
                i += 1
            digits = s[start:i]
            value = int(digits) if digits else 0
            if value > _LONG_MAX:
                raise refuse("long overflow")
            if i < n and s[i] not in "." and not _whitespace(s[i]):
                word = s[i:].split()[0]
                if word.isalpha():
                    raise refuse(_unknown_unit(word, "a number and its unit need a space between them"))
                raise refuse(f"invalid value at {s[start:i + 20]!r}")
        if i < n and s[i] == ".":
            i += 1
            start = i
            while i < n and "0" <= s[i] <= "9":
                i += 1
            fraction_digits = s[start:i]
            if len(fraction_digits) > 9:
                raise refuse("more than nanosecond precision")
            if i < n and not _whitespace(s[i]):
                raise refuse("invalid value")
            if point_prefixed and not fraction_digits and i < n:
                raise refuse("invalid value '.'")
        if i >= n:
            raise refuse("a unit expected after the number")
        while i < n and _whitespace(s[i]):
            i += 1
        if fraction_digits is not None and s[i] != "s":
            raise refuse("only seconds can have a fractional part")
        fraction = int((fraction_digits or "").ljust(9, "0")[:9] or 0) // 1000  # nanoseconds, then micros
        if negative:
            value, fraction = -value, -fraction
        unit = next((u for u in _UNIT_WORDS if u[0] == s[i] and s.startswith(u, i)), None)
        if unit is None:
            raise refuse(_unknown_unit(s[i:].split()[0]))
        if unit == "year":
            months += 12 * value
        elif unit == "month":
            months += value
        elif unit in ("week", "day"):
            days += value * (7 if unit == "week" else 1)
        else:
            if abs(value * _MICROS[unit]) > _LONG_MAX:  # Math.multiplyExact before the sum
                raise refuse("long overflow")
            micros += value * _MICROS[unit] + (fraction if unit == "second" else 0)
        if not (_in_int(months) and _in_int(days) and -_LONG_MAX - 1 <= micros <= _LONG_MAX):
            raise refuse("overflow")
        unit_start = i
        i += len(unit)
        if i < n and s[i] == "s":
            i += 1
        if i < n and not _whitespace(s[i]):
            raise refuse(_unknown_unit(s[unit_start:].split()[0]))
    return months, days, micros


def spark_interval_ms(text: str) -> float:
    """Spark's interval words in milliseconds: '10 seconds', '1 minute 30 seconds', 'interval 2 hours',
    '500 milliseconds' (Spark's grammar, harness.text.durations._interval; no months or years, which have no fixed
    length and which Spark refuses for triggers and windows)."""
    months, days, micros = _interval(text)
    if months:
        raise ValueError(f"{str(text)[:200]!r}: months and years have no fixed length; Spark refuses them here "
                         "(use weeks, days, hours, minutes, seconds)")
    return (days * _MICROS["day"] + micros) / 1000


def spark_trigger_ms(text: str) -> int:
    """What Trigger.ProcessingTime(text) makes of a trigger interval: whole milliseconds (floored, as Spark's
    DateTimeUtils.toMillis), never negative, no months, the total within a Java long."""
    if not str(text).strip():
        raise ValueError("an empty interval; PySpark wants a non-empty string such as '10 seconds'")
    months, days, micros = _interval(text)
    if months:
        raise ValueError(f"{str(text)[:200]!r}: Spark's trigger does not support month or year intervals")
    total = days * _MICROS["day"] + micros
    if abs(days * _MICROS["day"]) > _LONG_MAX or not -_LONG_MAX - 1 <= total <= _LONG_MAX:
        raise ValueError(f"{str(text)[:200]!r}: too long for Spark (long overflow)")
    if total < 0:
        raise ValueError(f"{str(text)[:200]!r} is negative; a trigger interval is 0 or more")
    return total // 1000


_TIME_SUFFIX_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def spark_time_string_ms(text: str) -> int:
    """Spark's time strings (JavaUtils.timeStringAsMs, for options such as the Kafka source's maxTriggerDelay):
    an integer with an optional suffix us, ms, s, m, min, h, d; no suffix means milliseconds. Never negative here."""
    body = str(text).strip().lower()
    m = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", body)
    if not m:
        raise ValueError(f"{str(text)[:200]!r} is not a Spark time string; expected an integer with a suffix "
                         "us, ms, s, m, min, h or d, e.g. '15m', '30s', '500ms'")
    suffix = m.group(2)
    if suffix is not None and suffix not in _TIME_SUFFIX_MS:
        raise ValueError(f"{str(text)[:200]!r}: invalid suffix {suffix!r}; allowed: us, ms, s, m, min, h, d")
    value = int(m.group(1))
    if not -_LONG_MAX - 1 <= value <= _LONG_MAX:
        raise ValueError(f"{str(text)[:200]!r}: too large for Spark (a Java long)")
    if value < 0:
        raise ValueError(f"{str(text)[:200]!r} is negative")
    scale = _TIME_SUFFIX_MS[suffix] if suffix else 1
    return int(value * scale) if scale >= 1 else value // 1000


_BYTE_SUFFIX = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
                "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50}


def spark_bytes(text: str, default_unit: str = "b") -> int:
    """Spark's size strings (JavaUtils.byteStringAs: an integer with an optional suffix b, k/kb, m/mb, g/gb,
    t/tb, p/pb, case-insensitive; no fractions) in bytes; no suffix means `default_unit`."""
    body = str(text).strip().lower()
    m = re.fullmatch(r"([0-9]+)([a-z]+)?", body)
    if not m or (m.group(2) is not None and m.group(2) not in _BYTE_SUFFIX):
        raise ValueError(f"{str(text)[:200]!r} is not a Spark size; expected an integer with a suffix k, m, g or "
                         "t (e.g. '512m', '2g'); no fractions")
    return int(m.group(1)) * _BYTE_SUFFIX[m.group(2) or default_unit]


_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


def iso_duration_s(text: str) -> float:
    """java.time.Duration.parse (ISO-8601 PnDTnHnMn.nS, e.g. PT60S, PT1M30S, P1D) -> seconds."""
    m = _ISO_DURATION.fullmatch(text.strip())
    if not m or (m.group(3) is not None and m.group(3).upper() == "T") or (
            m.group(2) is None and m.group(3) is None):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT60S or PT1M30S")
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(g) if g else 0 for g in (m.group(2), m.group(4), m.group(5), m.group(6)))
    fraction = m.group(7) or ""
    frac = int(fraction.ljust(9, "0")) / 1e9 if fraction else 0.0
    if m.group(6) and m.group(6).startswith("-"):
        frac = -frac
    return sign * (days * 86400 + hours * 3600 + minutes * 60 + seconds + frac)


_CLI_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)")


def cli_duration_s(text: str) -> float:
    """'2h', '10m', '90s', '1h30m' or plain seconds ('600') -> seconds."""
    body = str(text).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", body):
        seconds = float(body)
    else:
        parts = _CLI_DURATION.findall(body)
        if not parts or _CLI_DURATION.sub("", body).strip():
            raise ValueError(f"duration {text!r}: expected e.g. 2h, 10m, 90s, 1h30m or seconds")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"duration {text!r}: must be more than 0 seconds")
    return seconds
