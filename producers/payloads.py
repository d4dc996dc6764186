"""Payload sizes, bodies and headers.

``fill(nbytes)`` returns exactly ``nbytes`` ASCII characters:

* ``random``: characters from a 64-symbol alphabet (``A-Z a-z 0-9 - _``) drawn
  fresh from the generator: a buffer of random bytes (``Generator.bytes``) is
  mapped to the alphabet with ``bytes.translate`` (256 = 4 x 64, so uniform) and
  consumed sequentially, refilled when used up.  Nothing repeats between events,
  so neither per-message nor per-batch compression finds redundancy beyond the
  6-of-8-bits entropy (best ratio ~0.75).
* ``compressible``: slices of a repeated English-like sentence at varying
  offsets (zlib ratio well under 0.1 for a few hundred bytes and up).

``headers()`` returns the fixed headers then ``h0..h{n-1}`` with random values,
as ``[(name, value_bytes), ...]``, or None when no headers are configured.
"""

from __future__ import annotations

import numpy as np

from producers import spec as S

__all__ = ["PayloadSource", "ALPHABET"]

ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
assert len(ALPHABET) == 64
_TRANSLATE = bytes(ALPHABET[i % 64] for i in range(256))
_POOL_BYTES = 1 << 20

_TEXT = (
    "The quick brown fox jumps over the lazy dog while the stream processor keeps "
    "up with the backlog; offsets are committed, watermarks advance and every "
    "micro-batch lands on time. "
)


class PayloadSource:
    """Sizes and bodies for one producer process (seeded, deterministic)."""

    def __init__(self, spec: S.PayloadSpec, seed: int):
        self.spec = spec
        self._rng = np.random.default_rng(seed)
        size = spec.size
        self._kind = size.kind
        if size.kind == "fixed":
            self._max = size.bytes
        elif size.kind == "uniform":
            self._lo, self._hi = size.min_bytes, size.max_bytes
            self._max = size.max_bytes
        else:
            self._sizes = np.asarray(size.sizes, dtype=np.int64)
            w = np.asarray(size.weights, dtype=np.float64)
            cdf = np.cumsum(w / w.sum())
            cdf[-1] = 1.0
            self._cdf = cdf
            self._max = int(self._sizes.max())
        self.max_bytes: int = int(self._max)
        self._random_content = spec.content == "random"
        self._pool = ""
        self._pool_pos = 0
        if not self._random_content:
            reps = (self._max + len(_TEXT)) // len(_TEXT) + 1
            self._text = _TEXT * reps
        h = spec.headers
        self._fixed_headers = [(k, v.encode("utf-8")) for k, v in h.fixed.items()]
        self._n_random_headers = h.random
        self._header_value_bytes = h.value_bytes
        self._header_names = [f"h{i}" for i in range(h.random)]
        self.has_headers = bool(self._fixed_headers or self._n_random_headers)

    # ---------------------------------------------------------------- sizes
    def next_sizes(self, n: int) -> list[int]:
        """Sizes (bytes) of the next n payloads."""
        return self.next_sizes_array(n).tolist()

    def next_sizes_array(self, n: int) -> np.ndarray:
        if self._kind == "fixed":
            return np.full(n, self._max, dtype=np.int64)
        if self._kind == "uniform":
            return self._rng.integers(self._lo, self._hi, size=n, endpoint=True, dtype=np.int64)
        idx = np.searchsorted(self._cdf, self._rng.random(n), side="right")
        return self._sizes[np.minimum(idx, self._sizes.size - 1)]

    def next_size(self) -> int:
        return int(self.next_sizes_array(1)[0])

    # ---------------------------------------------------------------- bodies
    def _random_chars(self, n: int) -> str:
        out = []
        while n > 0:
            avail = len(self._pool) - self._pool_pos
            if avail <= 0:
                size = max(_POOL_BYTES, n)
                self._pool = self._rng.bytes(size).translate(_TRANSLATE).decode("ascii")
                self._pool_pos = 0
                avail = size
            take = min(avail, n)
            out.append(self._pool[self._pool_pos : self._pool_pos + take])
            self._pool_pos += take
            n -= take
        return out[0] if len(out) == 1 else "".join(out)

    def fill(self, nbytes: int) -> str:
        """Exactly ``nbytes`` ASCII characters of the configured content."""
        if nbytes <= 0:
            return ""
        if self._random_content:
            return self._random_chars(nbytes)
        text = self._text
        if nbytes + len(_TEXT) > len(text):
            text = _TEXT * ((nbytes // len(_TEXT)) + 2)
        off = int(self._rng.integers(0, len(_TEXT)))
        return text[off : off + nbytes]

    def fill_many(self, nbytes: list[int]) -> list[str]:
        """`fill` for a whole batch: one draw of offsets (numpy calls are costly per event under gevent)."""
        if self._random_content:
            return [self._random_chars(n) if n > 0 else "" for n in nbytes]
        text = self._text
        longest = max(nbytes, default=0)
        if longest + len(_TEXT) > len(text):
            text = self._text = _TEXT * ((longest // len(_TEXT)) + 2)
        offsets = self._rng.integers(0, len(_TEXT), size=len(nbytes)).tolist()
        return [text[o : o + n] if n > 0 else "" for o, n in zip(offsets, nbytes)]

    def payload(self) -> str:
        """A body of the next size."""
        return self.fill(self.next_size())

    # ---------------------------------------------------------------- headers
    def headers(self) -> list[tuple[str, bytes]] | None:
        """Headers for one event, or None when none are configured."""
        if not self.has_headers:
            return None
        out = list(self._fixed_headers)
        if self._n_random_headers:
            vb = self._header_value_bytes
            blob = self._random_chars(vb * self._n_random_headers).encode("ascii")
            out.extend((name, blob[i * vb : (i + 1) * vb]) for i, name in enumerate(self._header_names))
        return out
