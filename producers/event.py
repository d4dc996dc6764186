"""The event on the wire: a small JSON object the Spark query parses and the checker reconciles.

`p` (producer process) and `s` (its sequence) make the unique id; `t` is the *intended* send time in epoch
milliseconds, taken from the pacer's schedule rather than the clock at send time, so latency includes any time
the producer itself fell behind (no coordinated omission). `pad` brings the value to the wanted size.
Encoding works on whole batches: this is the producer's hot path.
"""
from __future__ import annotations

import json

# Everything but the digits of p and s and the padding; t is always 13 digits, a point and 3 decimals.
_FIXED = len('{"p":,"s":,"t":,"pad":""}') + 17


def pad_lengths(producer: int, seq0: int, sizes: list[int]) -> list[int]:
    """Padding that brings each event of a batch (sequences seq0, seq0+1, ...) to its wanted size (>= 0)."""
    fixed = _FIXED + len(str(producer))
    return [max(0, size - fixed - len(str(seq0 + i))) for i, size in enumerate(sizes)]


def encode_many(producer: int, seq0: int, intended_s: list[float], pads: list[str]) -> list[bytes]:
    return [f'{{"p":{producer},"s":{seq0 + i},"t":{t * 1000.0:.3f},"pad":"{pad}"}}'.encode()
            for i, (t, pad) in enumerate(zip(intended_s, pads))]


def encode(producer: int, seq: int, intended_s: float, pad: str = "") -> bytes:
    return encode_many(producer, seq, [intended_s], [pad])[0]


def decode(value: bytes) -> dict:
    return json.loads(value)
