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

``events(...)`` builds a whole batch of encoded events (``producers.event``'s
format, the pad being the content above) with numpy: one matrix of content rows,
the heads written over their first bytes, and one ``tolist`` of a bytes view, so
no Python bytecode runs per event on the producer's hot path.  ``read_event_ids``
reads the ids back from a batch of values the same way (delivery reports carry
the value, not our bookkeeping).
"""

from __future__ import annotations

import math

import numpy as np

from harness.producers import spec as S

__all__ = ["PayloadSource", "ALPHABET", "read_event_ids"]

ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
assert len(ALPHABET) == 64
_TRANSLATE = bytes(ALPHABET[i % 64] for i in range(256))
_POOL_BYTES = 1 << 20

_TAIL = b'"}'
_POW10F = 10.0 ** np.arange(15, -1, -1)
_COMMA, _QUOTE, _BRACE = ord(","), ord('"'), ord("}")
_POW10 = 10 ** np.arange(18, -1, -1, dtype=np.int64)  # 10^18 .. 10^0: digit weights, most significant first
_FOUR_DIGITS = np.frombuffer("".join(f"{i:04d}" for i in range(10000)).encode("ascii"), dtype=np.uint32)
_SMALL_BATCH = 32  # up to this many events a batch is formatted in Python (numpy's fixed cost is higher)
_MATRIX_BYTES = 16 << 20  # a batch is built as one (events x longest) matrix up to this size, else event by event
_OFFSETS_DRAWN = 4096  # the text offsets of compressible content are drawn this many at a time (a draw's fixed cost
# was a tenth of a small batch's)

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
        self._text_rows = np.empty(0, dtype=np.uint8)  # repeated text, for content rows (grown on demand)
        self._text_bytes: bytes | None = None  # the same text as bytes (small batches)
        self._text_table: np.ndarray | None = None  # (len(_TEXT), widest yet): the content row at each offset
        self._offsets = np.empty(0, dtype=np.int64)  # text offsets drawn ahead (_text_offsets), from _offsets_at on
        self._offsets_at = 0
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

    # ---------------------------------------------------------------- events
    def events(self, producer: int, seq0: int, intended_s: np.ndarray, sizes: np.ndarray) -> tuple[list[bytes], int]:
        """A batch of encoded events, sequences seq0, seq0+1, ..., each `sizes[i]` bytes long (or its head's length
        when that is longer), exactly as ``producers.event.encode`` writes them with this source's content as the
        pad; returns (values, total bytes).  ``t`` is the intended time in epoch ms rounded to the microsecond."""
        n = len(intended_s)
        if n == 0:
            return [], 0
        if n <= _SMALL_BATCH:
            return self._events_small(producer, seq0, intended_s, sizes)
        seq = np.arange(seq0, seq0 + n, dtype=np.int64)
        x = np.asarray(intended_s, dtype=np.float64) * 1000.0  # as event.encode: f"{t * 1000.0:.3f}"
        whole = np.floor(x)
        us = whole.astype(np.int64) * 1000 + np.rint((x - whole) * 1000.0).astype(np.int64)  # x - whole is exact
        ms = us // 1000
        prefix = b'{"p":%d,"s":' % producer
        seq_w, ms_w = _widths(seq), _widths(ms)
        groups = _groups(seq_w * 32 + ms_w)
        head_len = np.empty(n, dtype=np.int64)
        heads = []
        for key, rows in groups:
            h = _heads(prefix, seq[rows], ms[rows], us[rows] % 1000, key // 32, key % 32)
            heads.append((rows, h))
            head_len[rows] = h.shape[1]
        lengths = np.maximum(np.asarray(sizes, dtype=np.int64), head_len + len(_TAIL))
        total = int(lengths.sum())
        width = int(lengths.max())
        if n * width <= _MATRIX_BYTES:
            m = self._content_rows(n, width)
            for rows, h in heads:
                m[rows, : h.shape[1]] = h
            if int(lengths.min()) == width:  # one length (fixed sizes): the tail is two columns
                m[:, width - 2] = _QUOTE
                m[:, width - 1] = _BRACE
            else:
                r = np.arange(n)
                m[r, lengths - 2] = _QUOTE
                m[r, lengths - 1] = _BRACE
                m[np.arange(width) >= lengths[:, None]] = 0  # shorter rows end in NULs, which the bytes view drops
            return m.view(f"S{width}").ravel().tolist(), total
        return self._events_one_by_one(heads, lengths), total

    def _events_small(self, producer: int, seq0: int, intended_s, sizes) -> tuple[list[bytes], int]:
        """A small batch (a moderate rate, sent as soon as due) with Python formatting: numpy's cost per call is
        what a few events would cost here. The same bytes as the matrix path, drawing the same randomness."""
        heads = []
        for i, t in enumerate(np.asarray(intended_s, dtype=np.float64).tolist()):
            x = t * 1000.0
            whole = math.floor(x)
            us = int(whole) * 1000 + round((x - whole) * 1000.0)  # half to even, as np.rint
            heads.append(b'{"p":%d,"s":%d,"t":%d.%03d,"pad":"' % (producer, seq0 + i, us // 1000, us % 1000))
        lengths = [max(int(size), len(h) + len(_TAIL)) for h, size in zip(heads, np.asarray(sizes).tolist())]
        width = max(lengths)
        n = len(heads)
        if self._random_content:
            chars = self._rng.bytes(n * width).translate(_TRANSLATE)
            rows = [chars[i * width : (i + 1) * width] for i in range(n)]
        else:
            if self._text_rows.size < width + len(_TEXT):
                text = _TEXT * ((width + len(_TEXT)) // len(_TEXT) + 2)
                self._text_rows = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
            text = self._text_rows.tobytes() if self._text_bytes is None or len(self._text_bytes) != self._text_rows.size \
                else self._text_bytes
            self._text_bytes = text
            rows = [text[o : o + width] for o in self._text_offsets(n).tolist()]
        values = [h + row[len(h) : length - 2] + _TAIL for h, row, length in zip(heads, rows, lengths)]
        return values, sum(lengths)

    def _content_rows(self, n: int, width: int) -> np.ndarray:
        """An (n, width) matrix of content: random characters, or the text from a random offset per row."""
        if self._random_content:
            chars = bytearray(self._rng.bytes(n * width).translate(_TRANSLATE))
            return np.frombuffer(chars, dtype=np.uint8).reshape(n, width)
        if self._text_rows.size < width + len(_TEXT):
            text = _TEXT * ((width + len(_TEXT)) // len(_TEXT) + 2)
            self._text_rows = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        if self._text_table is None or self._text_table.shape[1] < width:  # the row at every text offset
            self._text_table = np.lib.stride_tricks.sliding_window_view(self._text_rows, width)[: len(_TEXT)].copy()
        return self._text_table[:, :width].take(self._text_offsets(n), axis=0)

    def _text_offsets(self, n: int) -> np.ndarray:
        """The offsets into the text of the next n compressible rows, uniform over one sentence, from draws made
        _OFFSETS_DRAWN at a time (every path takes them from here, so the paths stay in step)."""
        if self._offsets_at + n > len(self._offsets):
            rest = self._offsets[self._offsets_at :]
            drawn = self._rng.integers(0, len(_TEXT), size=max(n, _OFFSETS_DRAWN), dtype=np.int64)
            self._offsets, self._offsets_at = np.concatenate([rest, drawn]), 0
        out = self._offsets[self._offsets_at : self._offsets_at + n]
        self._offsets_at += n
        return out

    def _events_one_by_one(self, heads: list, lengths: np.ndarray) -> list[bytes]:
        """Large payloads: each event is its head, a pad and the tail (the pad copy dominates, not Python)."""
        n = len(lengths)
        head_bytes: list = [b""] * n
        for rows, h in heads:
            idx = range(n) if isinstance(rows, slice) else rows.tolist()
            for i, b in zip(idx, h.view(f"S{h.shape[1]}").ravel().tolist()):
                head_bytes[i] = b
        pads = (lengths - np.fromiter(map(len, head_bytes), dtype=np.int64, count=n) - len(_TAIL)).tolist()
        if self._random_content:
            return [h + self._random_chars(p).encode("ascii") + _TAIL for h, p in zip(head_bytes, pads)]
        text = self._text.encode("ascii")
        if max(pads) + len(_TEXT) > len(text):
            text = _TEXT.encode("ascii") * (max(pads) // len(_TEXT) + 2)
        offsets = self._text_offsets(n).tolist()
        return [h + text[o : o + p] + _TAIL for h, o, p in zip(head_bytes, offsets, pads)]


def _widths(values: np.ndarray) -> np.ndarray:
    """Decimal digits of each non-negative int (0 has one)."""
    return np.maximum(np.searchsorted(_POW10[::-1], values, side="right"), 1)


def _groups(key: np.ndarray) -> list:
    """(key, rows) for each distinct key; rows is slice(None) when there is one key (the usual case)."""
    first = int(key[0])
    if int(key.min()) == int(key.max()):
        return [(first, slice(None))]
    return [(int(k), np.flatnonzero(key == k)) for k in np.unique(key)]


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """(n, width) ASCII digits, most significant first (zero-padded): four digits per step, each step a division
    by a constant (fast in numpy) and a look-up of the four characters. Once what is left is one number for the
    whole batch (a batch's sequences and epoch milliseconds share their leading digits), its digits are written
    once for every row."""
    chunks = (width + 3) // 4
    out = np.empty((len(values), chunks), dtype=np.uint32)
    v = values
    for j in range(chunks - 1, -1, -1):
        if j < chunks - 1 and len(v) and v[0] == v[-1] and int(v.min()) == int(v.max()):
            out[:, : j + 1] = np.frombuffer(b"%0*d" % ((j + 1) * 4, int(v[0])), dtype=np.uint32)
            break
        q = v // 10000
        out[:, j] = _FOUR_DIGITS[v - q * 10000]
        v = q
    return out.view(np.uint8)[:, chunks * 4 - width :]


def _heads(prefix: bytes, seq: np.ndarray, ms: np.ndarray, frac: np.ndarray, seq_w: int, ms_w: int) -> np.ndarray:
    """`{"p":P,"s":SEQ,"t":MS.FFF,"pad":"` for rows whose numbers have the same widths, as a uint8 matrix."""
    parts = [prefix, seq_w, b',"t":', ms_w, b".", 3, b',"pad":"']
    numbers = [seq, ms, frac]
    width = sum(p if isinstance(p, int) else len(p) for p in parts)
    h = np.empty((len(seq), width), dtype=np.uint8)
    c = 0
    for p in parts:
        if isinstance(p, int):
            h[:, c : c + p] = _digits(numbers.pop(0), p)
            c += p
        else:
            h[:, c : c + len(p)] = np.frombuffer(p, dtype=np.uint8)
            c += len(p)
    return h


def read_event_ids(producer: int, values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(seq, intended_ms) of a batch of this producer's encoded events, read from their heads in bulk (the
    delivery reports' values). Raises ValueError for a value that is not one of this producer's events."""
    n = len(values)
    if n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    prefix = b'{"p":%d,"s":' % producer
    k = len(prefix)
    width = k + 19 + 5 + 24
    m = np.array(values, dtype=f"S{width}").view(np.uint8).reshape(n, width)
    window = m[:, k : k + 20]
    seq_w = (window == _COMMA).argmax(axis=1)
    if not (m[:, :k] == np.frombuffer(prefix, dtype=np.uint8)).all() or int(seq_w.min()) < 1:
        raise ValueError(f"values that are not producer {producer}'s events (an id head {prefix!r}...)")
    seq = np.empty(n, dtype=np.int64)
    us = np.empty(n, dtype=np.int64)
    for w, rows in _groups(seq_w):
        seq[rows] = _number(m[rows, k : k + w])
        t = m[rows, k + w + 5 : k + w + 5 + 24]
        ends = (t == _COMMA).argmax(axis=1)
        sub = np.arange(len(t)) if isinstance(rows, slice) else rows
        for e, inner in _groups(ends):
            tt = t[inner]
            if e < 5 or not (tt[:, e - 4] == ord(".")).all():
                raise ValueError(f"values that are not producer {producer}'s events (a t without 3 decimals)")
            us[sub[inner]] = _number(tt[:, : e - 4]) * 1000 + _number(tt[:, e - 3 : e])
    return seq, us / 1000.0


def _number(digits: np.ndarray) -> np.ndarray:
    """The ints an (n, w) matrix of ASCII digits spells (up to 15 digits through a float product, exact below
    2^53 and much faster than integer arithmetic in numpy)."""
    d = digits - np.uint8(48)
    if (d > 9).any():
        raise ValueError("a number field holds something other than digits")
    w = digits.shape[1]
    if w <= 15:
        return (d.astype(np.float64) @ _POW10F[len(_POW10F) - w :]).astype(np.int64)
    return d.astype(np.int64) @ _POW10[len(_POW10) - w :]
