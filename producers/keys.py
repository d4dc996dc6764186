"""Key choosers: which key (and, if needed, which explicit partition) each event gets.

Keys are ``{prefix}{id}`` (ASCII bytes), ids ``0 .. count-1``.  A chooser draws
ids in numpy blocks from its own seeded generator; ``next()`` and
``next_many(n)`` consume the same stream, so the sequence does not depend on how
calls are batched.  Everything that shapes the *distribution* (Zipf rank->id
shuffle, hot-partition key pools) is deterministic and independent of ``seed``,
so N producer processes with different seeds produce the same global mix.

``next()`` returns ``(key, partition)``:

* keyed kinds: ``(key, None)``; the Kafka client's murmur2 partitioner (configure
  confluent-kafka with ``partitioner=murmur2_random``) or the Event Hubs service
  places the key;
* ``hot_partitions`` with ``assign: explicit``: ``(key, p)`` with the key hashing
  to ``p`` under the chosen backend, for producers that set the partition;
* ``none``: ``(None, None)``.

Backends: ``kafka`` (murmur2), ``eventhubs`` (service hashing of the key sent as
``partition_key``), ``eventhubs-buffered`` (Python SDK buffered producer's
client-side placement); see :mod:`harness.partitioning`.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from harness.partitioning import BACKENDS, partitions_for_keys
from harness.producers import spec as S

__all__ = ["KeyChooser", "make_key_chooser", "expected_partition_shares"]

_BLOCK = 4096
_CACHE_KEYS_UP_TO = 200_000
_MAX_SCAN_IDS = 50_000_000

Choice = tuple[Union[bytes, None], Union[int, None]]


class KeyChooser:
    """Draws keys for one producer process.  Build with :func:`make_key_chooser`."""

    def __init__(self, spec, num_partitions: int, seed: int, backend: str = "kafka"):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
        if isinstance(num_partitions, bool) or int(num_partitions) != num_partitions or num_partitions < 1:
            raise ValueError(f"num_partitions must be an integer >= 1, got {num_partitions!r}")
        self.spec = spec
        self.kind: str = spec.kind
        self.num_partitions = int(num_partitions)
        self.backend = backend
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)
        self._buf = np.empty(0, dtype=np.int64)
        self._pos = 0
        self._seq = 0
        self._prefix = getattr(spec, "prefix", "k").encode("ascii")
        self._keys: list[bytes] | None = None
        self._explicit = False
        self._table_ids: np.ndarray | None = None  # hot_partitions: key id per table slot
        self._table_parts: np.ndarray | None = None  # hot_partitions: partition per table slot
        self._table_probs: np.ndarray | None = None
        self._cdf: np.ndarray | None = None

        if self.kind == "uniform":
            self.count = spec.count
        elif self.kind == "sequential":
            self.count = spec.count
        elif self.kind == "zipf":
            self.count = spec.count
            ranks = np.arange(1, self.count + 1, dtype=np.float64)
            w = ranks ** (-float(spec.s))
            self._rank_probs = w / w.sum()
            cdf = np.cumsum(self._rank_probs)
            cdf[-1] = 1.0
            self._cdf = cdf
            self._perm = np.random.default_rng(spec.shuffle_seed).permutation(self.count).astype(np.int64)
        elif self.kind == "hot_partitions":
            self._build_hot(spec)
        elif self.kind == "none":
            self.count = 0
        else:  # pragma: no cover - spec union is closed
            raise ValueError(f"unknown keys kind {self.kind!r}")

        max_id = self._max_id()
        if self.kind != "none" and max_id < _CACHE_KEYS_UP_TO:
            p = self._prefix
            self._keys = [p + str(i).encode() for i in range(max_id + 1)]

    # ------------------------------------------------------------------ setup
    def _max_id(self) -> int:
        if self.kind == "none":
            return -1
        if self._table_ids is not None:
            return int(self._table_ids.max())
        return self.count - 1

    def _build_hot(self, spec: S.HotPartitionKeys) -> None:
        P = self.num_partitions
        hot = list(spec.partitions)
        bad = [p for p in hot if p >= P]
        if bad:
            raise ValueError(f"hot_partitions.partitions {bad} out of range for {P} partitions")
        cold = [p for p in range(P) if p not in set(hot)]
        need_rest = spec.share < 1.0
        if need_rest and not cold:
            raise ValueError("hot_partitions.share < 1 needs at least one partition that is not hot")
        self._explicit = spec.assign == "explicit"
        per_hot = spec.hot_keys_per_partition
        want: dict[int, int] = {p: per_hot for p in hot}
        rest_uniform = need_rest and spec.rest == "uniform"
        if need_rest and spec.rest == "even":
            base, extra = divmod(spec.count, len(cold))
            for j, p in enumerate(cold):
                want[p] = max(1, base + (1 if j < extra else 0))
        pools: dict[int, list[int]] = {p: [] for p in want}
        rest_ids: list[int] = []
        cold_set = set(cold)

        def done() -> bool:
            if any(len(pools[p]) < n for p, n in want.items()):
                return False
            return not rest_uniform or len(rest_ids) >= spec.count

        start, chunk = 0, 4096
        while not done():
            if start > _MAX_SCAN_IDS:
                raise ValueError(f"could not find enough keys for hot_partitions after {start} candidate keys")
            ids = np.arange(start, start + chunk, dtype=np.int64)
            parts = self._partitions_of_ids(ids, P)
            for i, p in zip(ids.tolist(), parts.tolist()):
                if p in pools and len(pools[p]) < want[p]:
                    pools[p].append(i)
                    continue
                if rest_uniform and p in cold_set and len(rest_ids) < spec.count:
                    rest_ids.append(i)
            start += chunk
            chunk = min(chunk * 2, 1 << 20)

        ids_l: list[int] = []
        parts_l: list[int] = []
        probs_l: list[float] = []
        for p in hot:
            for i in pools[p]:
                ids_l.append(i)
                parts_l.append(p)
                probs_l.append(spec.share / len(hot) / per_hot)
        if need_rest:
            rest_share = 1.0 - spec.share
            if rest_uniform:
                rparts = self._partitions_of_ids(np.asarray(rest_ids, dtype=np.int64), P).tolist()
                for i, p in zip(rest_ids, rparts):
                    ids_l.append(i)
                    parts_l.append(p)
                    probs_l.append(rest_share / len(rest_ids))
            else:
                for p in cold:
                    for i in pools[p]:
                        ids_l.append(i)
                        parts_l.append(p)
                        probs_l.append(rest_share / len(cold) / len(pools[p]))
        self._table_ids = np.asarray(ids_l, dtype=np.int64)
        self._table_parts = np.asarray(parts_l, dtype=np.int64)
        probs = np.asarray(probs_l, dtype=np.float64)
        self._table_probs = probs / probs.sum()
        cdf = np.cumsum(self._table_probs)
        cdf[-1] = 1.0
        self._cdf = cdf
        self.count = len(ids_l)

    def _key_of(self, i: int) -> bytes:
        return self._prefix + str(i).encode()

    def keys_for_ids(self, ids) -> list[bytes]:
        """Key bytes for key ids."""
        ids_l = np.asarray(ids, dtype=np.int64).tolist()
        if self._keys is not None:
            ks = self._keys
            return [ks[i] for i in ids_l]
        p = self._prefix
        return [p + str(i).encode() for i in ids_l]

    def _partitions_of_ids(self, ids: np.ndarray, num_partitions: int, backend: str | None = None) -> np.ndarray:
        p = self._prefix
        keys = [p + str(i).encode() for i in np.asarray(ids).tolist()]
        return partitions_for_keys(keys, num_partitions, backend or self.backend)

    # ------------------------------------------------------------------ drawing
    def _draw_block(self, n: int) -> np.ndarray:
        """Next n table slots (or ids) from the generator."""
        kind = self.kind
        if kind == "uniform":
            return self._rng.integers(0, self.count, size=n, dtype=np.int64)
        if kind in ("zipf", "hot_partitions"):
            u = self._rng.random(n)
            idx = np.searchsorted(self._cdf, u, side="right")
            return np.minimum(idx, self._cdf.size - 1).astype(np.int64)
        raise AssertionError(kind)  # pragma: no cover

    def _next_slots(self, n: int) -> np.ndarray:
        if self.kind == "sequential":
            out = (self._seq + np.arange(n, dtype=np.int64)) % self.count
            self._seq = (self._seq + n) % self.count
            return out
        avail = self._buf.size - self._pos
        if avail >= n:
            out = self._buf[self._pos : self._pos + n]
            self._pos += n
            return out
        parts = [self._buf[self._pos :]]
        missing = n - avail
        block = self._draw_block(max(_BLOCK, missing))
        parts.append(block[:missing])
        self._buf = block
        self._pos = missing
        return np.concatenate(parts)

    def next_ids(self, n: int) -> np.ndarray:
        """Key ids of the next n events (-1 for ``none``)."""
        if self.kind == "none":
            return np.full(n, -1, dtype=np.int64)
        slots = self._next_slots(n)
        if self.kind == "zipf":
            return self._perm[slots]
        if self.kind == "hot_partitions":
            return self._table_ids[slots]
        return slots

    def next_many(self, n: int) -> list[Choice]:
        """The next n ``(key, partition)`` choices."""
        if n <= 0:
            return []
        if self.kind == "none":
            return [(None, None)] * n
        slots = self._next_slots(n)
        if self.kind == "hot_partitions":
            ids = self._table_ids[slots]
            if self._explicit:
                keys = self.keys_for_ids(ids)
                return list(zip(keys, self._table_parts[slots].tolist()))
        elif self.kind == "zipf":
            ids = self._perm[slots]
        else:
            ids = slots
        return [(k, None) for k in self.keys_for_ids(ids)]

    def next_columns(self, n: int) -> tuple[list | None, list | None]:
        """The next n choices as columns (keys, partitions), either None when it is None for every event: the
        same stream as ``next_many`` without a tuple per event (the producer's hot path)."""
        if n <= 0 or self.kind == "none":
            return None, None
        slots = self._next_slots(n)
        partitions = None
        if self.kind == "hot_partitions":
            ids = self._table_ids[slots]
            if self._explicit:
                partitions = self._table_parts[slots].tolist()
        elif self.kind == "zipf":
            ids = self._perm[slots]
        else:
            ids = slots
        if self._keys is None:
            return self.keys_for_ids(ids), partitions
        table = getattr(self, "_keys_table", None)
        if table is None:
            table = self._keys_table = np.array(self._keys + [None], dtype=object)[:-1]  # 1-d even for equal keys
        return table[ids].tolist(), partitions

    def next(self) -> Choice:
        """The next ``(key, partition)`` choice."""
        return self.next_many(1)[0]

    # ------------------------------------------------------------------ exact distribution
    def key_probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """(key ids, probability of each) - the exact per-event key distribution.
        Empty arrays for ``none``."""
        if self.kind == "none":
            return np.empty(0, np.int64), np.empty(0, np.float64)
        if self.kind in ("uniform", "sequential"):
            return np.arange(self.count, dtype=np.int64), np.full(self.count, 1.0 / self.count)
        if self.kind == "zipf":
            return self._perm.copy(), self._rank_probs.copy()
        return self._table_ids.copy(), self._table_probs.copy()

    def expected_partition_shares(self, num_partitions: int | None = None, backend: str | None = None) -> list[float]:
        """Exact expected share of events per partition (from key weights and the
        hash).  Defaults to the chooser's own partition count and backend; other
        values give the shares the same keys would produce on such a topic.
        ``none`` gives an even split (what a round-robin / random partitioner
        averages to)."""
        P = self.num_partitions if num_partitions is None else int(num_partitions)
        be = backend or self.backend
        if P < 1:
            raise ValueError("num_partitions must be >= 1")
        if self.kind == "none":
            return [1.0 / P] * P
        if self._explicit and P == self.num_partitions:
            parts = self._table_parts
            probs = self._table_probs
        else:
            ids, probs = self.key_probabilities()
            parts = self._partitions_of_ids(ids, P, be)
        shares = np.bincount(parts, weights=probs, minlength=P)
        shares = shares / shares.sum()
        return shares.tolist()


def make_key_chooser(spec, num_partitions: int, seed: int, backend: str = "kafka") -> KeyChooser:
    """Build the chooser for a validated keys spec (``spec.KeysSpec``)."""
    return KeyChooser(spec, num_partitions, seed, backend)


def expected_partition_shares(chooser_or_spec, num_partitions: int, backend: str = "kafka") -> list[float]:
    """Exact expected per-partition event shares for a chooser or a keys spec."""
    if isinstance(chooser_or_spec, KeyChooser):
        return chooser_or_spec.expected_partition_shares(num_partitions, backend)
    return KeyChooser(chooser_or_spec, num_partitions, 0, backend).expected_partition_shares()

