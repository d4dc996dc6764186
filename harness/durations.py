"""Durations as people and connectors write them, each syntax parsed in one place:

- Spark's interval words (`spark_interval_ms`): '10 seconds', '1 minute 30 seconds', 'interval 2 hours', what
  Spark takes for a trigger interval, a window or a watermark delay;
- ISO-8601 (`iso_duration_s`): 'PT60S', 'PT1M30S', what java.time.Duration.parse takes, and so the Event Hubs
  connector's `eventhubs.*Timeout` options;
- the command line's (`cli_duration_s`): '2h', '10m', '90s', '1h30m' or plain seconds, for `--duration`.
Each raises ValueError saying what it expected; callers name the file, option or flag.
"""
from __future__ import annotations

import re

_UNITS_MS = {"week": 604_800_000, "day": 86_400_000, "hour": 3_600_000, "minute": 60_000, "second": 1000,
             "millisecond": 1, "microsecond": 0.001}
_PART = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)")


def spark_interval_ms(text: str) -> float:
    """Spark's interval words in milliseconds: '10 seconds', '1 minute 30 seconds', 'interval 2 hours',
    '500 milliseconds' (units week .. microsecond, singular or plural; no months or years, which have no fixed
    length and which Spark refuses for windows)."""
    body = str(text).strip().lower()
    body = body[len("interval"):].strip() if body.startswith("interval") else body
    parts = _PART.findall(body)
    if not body or _PART.sub("", body).strip():
        raise ValueError(f"{text!r} is not an interval; expected '<number> <unit>' ... with units "
                         "weeks, days, hours, minutes, seconds, milliseconds or microseconds")
    total = 0.0
    for number, unit in parts:
        scale = _UNITS_MS.get(unit[:-1] if unit.endswith("s") else unit)
        if scale is None:
            raise ValueError(f"unknown unit {unit!r} in {text!r}; allowed: weeks, days, hours, minutes, "
                             "seconds, milliseconds, microseconds")
        total += float(number) * scale
    return total


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
