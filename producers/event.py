"""The event on the wire: a small JSON object the Spark query parses and the checker reconciles.

`p` (producer process) and `s` (its sequence) make the unique id; `t` is the *intended* send time in epoch
milliseconds, taken from the pacer's schedule rather than the clock at send time, so latency includes any time
the producer itself fell behind (no coordinated omission). `pad` brings the value to the wanted size.
"""
from __future__ import annotations

import json

OVERHEAD = len('{"p":,"s":,"t":,"pad":""}')


def encode(producer: int, seq: int, intended_s: float, pad: str = "") -> bytes:
    return f'{{"p":{producer},"s":{seq},"t":{intended_s * 1000.0:.3f},"pad":"{pad}"}}'.encode()


def pad_length(producer: int, seq: int, wanted_bytes: int) -> int:
    """Padding that brings the encoded event to `wanted_bytes` (never negative; ids and time take ~40 bytes)."""
    fixed = OVERHEAD + len(str(producer)) + len(str(seq)) + 17  # 13-digit ms + '.' + 3 decimals
    return max(0, wanted_bytes - fixed)


def decode(value: bytes) -> dict:
    return json.loads(value)
