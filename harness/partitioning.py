"""Key -> partition mapping exactly as Kafka clients and the Event Hubs service do it.

Kafka
-----
``murmur2`` is a port of Java's ``org.apache.kafka.common.utils.Utils.murmur2``
(seed ``0x9747b28c``, m ``0x5bd1e995``, r 24, little-endian 4-byte blocks, signed
32-bit result).  ``kafka_partition_for_key`` is ``(murmur2(key) & 0x7fffffff) %
num_partitions``: what Java's default partitioner (``BuiltInPartitioner.
partitionForKey``) does for a non-null key, and what librdkafka / confluent-kafka
do with ``partitioner=murmur2_random`` (or ``murmur2``).

NOTE: librdkafka's *default* partitioner is ``consistent_random`` (CRC32 based),
which places keys differently.  A confluent-kafka producer must be configured with
``"partitioner": "murmur2_random"`` for keys to land where this module says.

Event Hubs
----------
``eventhubs_partition_for_key`` reproduces the service's partition-key hashing as
ported to the Azure SDK for .NET (``Azure.Messaging.EventHubs.Core.
PartitionResolver``; the Java SDK carries the same port, and both state that it
is "a direct port of the Event Hubs service code"):

* the key is encoded as UTF-8;
* Bob Jenkins' lookup3 ``hashlittle2`` with both seeds 0 yields two 32-bit words
  (``hash1 = c``, ``hash2 = b``);
* the hash code is ``(short)(hash1 ^ hash2)`` - the low 16 bits, signed;
* partition = ``Math.Abs(hashCode % partitionCount)`` with C#'s truncating ``%``
  (== ``abs(hash_code) % partition_count`` in Python).

The Python ``azure-eventhub`` SDK's *buffered* producer resolves keys client-side
with Python's flooring ``%`` (``abs(hash_code % n)``), which differs from the
service for negative hash codes; ``eventhubs_buffered_partition_for_key`` gives
that placement.  The non-buffered producer sends the key and the service places it.

Batch variants (``*_many``) are vectorised with numpy (uint32 arithmetic wraps
like Java ints) and are used to precompute key pools for many keys at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "MURMUR2_SEED",
    "murmur2",
    "murmur2_many",
    "kafka_partition_for_key",
    "kafka_partitions_for_keys",
    "lookup3_hashlittle2",
    "eventhubs_hash_code",
    "eventhubs_hash_codes_many",
    "eventhubs_partition_for_key",
    "eventhubs_partitions_for_keys",
    "eventhubs_buffered_partition_for_key",
    "partition_for_key",
    "partitions_for_keys",
    "BACKENDS",
]

MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

#: Backends understood by :func:`partition_for_key` / :func:`partitions_for_keys`.
#: ``kafka``: murmur2 (Java default partitioner / librdkafka murmur2_random);
#: ``eventhubs``: the Event Hubs service's partition-key hashing;
#: ``eventhubs-buffered``: the Python SDK buffered producer's client-side placement.
BACKENDS = ("kafka", "eventhubs", "eventhubs-buffered")


def _to_signed32(x: int) -> int:
    x &= _MASK32
    return x - 0x100000000 if x & 0x80000000 else x


def _check_count(n: int, what: str = "num_partitions") -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{what} must be an integer >= 1, got {n!r}")


# ---------------------------------------------------------------------------
# Kafka murmur2
# ---------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Java Kafka ``Utils.murmur2``: signed 32-bit murmur2 of ``data``."""
    data = bytes(data)
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK32
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rem = length & 3
    if rem == 3:
        h ^= data[n4 + 2] << 16
    if rem >= 2:
        h ^= data[n4 + 1] << 8
    if rem >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _to_signed32(h)


def kafka_partition_for_key(key: bytes, num_partitions: int) -> int:
    """Partition of a non-null key under Kafka's murmur2 partitioner."""
    _check_count(num_partitions)
    return (murmur2(key) & 0x7FFFFFFF) % int(num_partitions)


def _group_by_length(keys: Sequence[bytes]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(len(k), []).append(i)
    return groups


def _u32(x: int) -> np.uint32:
    return np.uint32(x & _MASK32)


def _murmur2_fixed(mat: np.ndarray) -> np.ndarray:
    """murmur2 of each row of a (N, L) uint8 matrix; returns uint32 array."""
    n, length = mat.shape
    m = _u32(_M)
    h = np.full(n, (MURMUR2_SEED ^ length) & _MASK32, dtype=np.uint32)
    n4 = length & ~3
    if n4:
        words = np.ascontiguousarray(mat[:, :n4]).view("<u4").astype(np.uint32)
        for j in range(words.shape[1]):
            k = words[:, j] * m
            k ^= k >> np.uint32(24)
            k *= m
            h *= m
            h ^= k
    rem = length & 3
    if rem == 3:
        h ^= mat[:, n4 + 2].astype(np.uint32) << np.uint32(16)
    if rem >= 2:
        h ^= mat[:, n4 + 1].astype(np.uint32) << np.uint32(8)
    if rem >= 1:
        h ^= mat[:, n4].astype(np.uint32)
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h


def _apply_fixed(keys: Sequence[bytes], fn) -> np.ndarray:
    out = np.empty(len(keys), dtype=np.uint32)
    for length, idx in _group_by_length(keys).items():
        if length == 0:
            mat = np.zeros((len(idx), 0), dtype=np.uint8)
        else:
            buf = b"".join(keys[i] for i in idx)
            mat = np.frombuffer(buf, dtype=np.uint8).reshape(len(idx), length)
        out[np.asarray(idx, dtype=np.int64)] = fn(mat)
    return out


def murmur2_many(keys: Sequence[bytes]) -> np.ndarray:
    """Vectorised :func:`murmur2` over many keys; returns an int32 array."""
    keys = [bytes(k) for k in keys]
    return _apply_fixed(keys, _murmur2_fixed).view(np.int32)


def kafka_partitions_for_keys(keys: Sequence[bytes], num_partitions: int) -> np.ndarray:
    """Vectorised :func:`kafka_partition_for_key`; returns an int64 array."""
    _check_count(num_partitions)
    h = murmur2_many(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (h % np.uint32(num_partitions)).astype(np.int64)


# ---------------------------------------------------------------------------
# Event Hubs: Jenkins lookup3 hashlittle2
# ---------------------------------------------------------------------------


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _MASK32


def lookup3_hashlittle2(data: bytes, seed1: int = 0, seed2: int = 0) -> tuple[int, int]:
    """Bob Jenkins' lookup3 ``hashlittle2`` as ported by the Event Hubs SDKs.

    Returns ``(hash1, hash2)`` = ``(c, b)`` as unsigned 32-bit ints.
    """
    data = bytes(data)
    length = len(data)
    a = b = c = (0xDEADBEEF + length + seed1) & _MASK32
    c = (c + seed2) & _MASK32
    if length == 0:
        return c, b

    def word(i: int) -> int:
        return int.from_bytes(data[i : i + 4], "little")

    p = 0
    size = length
    while size > 12:
        a = (a + word(p)) & _MASK32
        b = (b + word(p + 4)) & _MASK32
        c = (c + word(p + 8)) & _MASK32
        # mix(a, b, c)
        a = (a - c) & _MASK32; a ^= _rot(c, 4); c = (c + b) & _MASK32  # noqa: E702
        b = (b - a) & _MASK32; b ^= _rot(a, 6); a = (a + c) & _MASK32  # noqa: E702
        c = (c - b) & _MASK32; c ^= _rot(b, 8); b = (b + a) & _MASK32  # noqa: E702
        a = (a - c) & _MASK32; a ^= _rot(c, 16); c = (c + b) & _MASK32  # noqa: E702
        b = (b - a) & _MASK32; b ^= _rot(a, 19); a = (a + c) & _MASK32  # noqa: E702
        c = (c - b) & _MASK32; c ^= _rot(b, 4); b = (b + a) & _MASK32  # noqa: E702
        p += 12
        size -= 12

    # Tail: 1..12 bytes, little-endian, zero padded (bytes are unsigned, as in .NET).
    tail = data[p:] + b"\x00" * (12 - size)
    a = (a + int.from_bytes(tail[0:4], "little")) & _MASK32
    if size > 4:
        b = (b + int.from_bytes(tail[4:8], "little")) & _MASK32
    if size > 8:
        c = (c + int.from_bytes(tail[8:12], "little")) & _MASK32

    # final(a, b, c)
    c ^= b; c = (c - _rot(b, 14)) & _MASK32  # noqa: E702
    a ^= c; a = (a - _rot(c, 11)) & _MASK32  # noqa: E702
    b ^= a; b = (b - _rot(a, 25)) & _MASK32  # noqa: E702
    c ^= b; c = (c - _rot(b, 16)) & _MASK32  # noqa: E702
    a ^= c; a = (a - _rot(c, 4)) & _MASK32  # noqa: E702
    b ^= a; b = (b - _rot(a, 14)) & _MASK32  # noqa: E702
    c ^= b; c = (c - _rot(b, 24)) & _MASK32  # noqa: E702
    return c, b


def _key_bytes(key: str | bytes) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    return bytes(key)


def eventhubs_hash_code(key: str | bytes | None) -> int:
    """The service's signed 16-bit hash code of a partition key (None -> 0).

    ``bytes`` are taken as the already UTF-8 encoded key.
    """
    if key is None:
        return 0
    h1, h2 = lookup3_hashlittle2(_key_bytes(key), 0, 0)
    v = (h1 ^ h2) & 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def eventhubs_partition_for_key(key: str, partition_count: int) -> int:
    """Partition index the Event Hubs service assigns to ``key``.

    ``Math.Abs(hashCode % partitionCount)`` with a truncating remainder.
    """
    _check_count(partition_count, "partition_count")
    return abs(eventhubs_hash_code(key)) % int(partition_count)


def eventhubs_buffered_partition_for_key(key: str, partition_count: int) -> int:
    """Placement by the Python azure-eventhub *buffered* producer (client-side).

    It computes the same hash code but applies Python's flooring ``%``
    (``abs(hash_code % n)``), so negative hash codes can map elsewhere than the
    service would place them.  (It also hashes ``ord()`` of each str character
    rather than UTF-8 bytes; for ASCII keys that is the same.)
    """
    _check_count(partition_count, "partition_count")
    return abs(eventhubs_hash_code(key) % int(partition_count))


def _rot_np(x: np.ndarray, k: int) -> np.ndarray:
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _lookup3_fixed(mat: np.ndarray) -> np.ndarray:
    """(hash1 ^ hash2) of lookup3 hashlittle2 (seeds 0) per row; uint32 array."""
    n, length = mat.shape
    init = (0xDEADBEEF + length) & _MASK32
    a = np.full(n, init, dtype=np.uint32)
    b = a.copy()
    c = a.copy()
    if length == 0:
        return c ^ b
    nblocks = (length - 1) // 12
    padded_len = (nblocks + 1) * 12
    pad = np.zeros((n, padded_len), dtype=np.uint8)
    pad[:, :length] = mat
    words = pad.view("<u4").astype(np.uint32)  # (n, 3 * (nblocks + 1))
    for blk in range(nblocks):
        a += words[:, 3 * blk]
        b += words[:, 3 * blk + 1]
        c += words[:, 3 * blk + 2]
        a -= c; a ^= _rot_np(c, 4); c += b  # noqa: E702
        b -= a; b ^= _rot_np(a, 6); a += c  # noqa: E702
        c -= b; c ^= _rot_np(b, 8); b += a  # noqa: E702
        a -= c; a ^= _rot_np(c, 16); c += b  # noqa: E702
        b -= a; b ^= _rot_np(a, 19); a += c  # noqa: E702
        c -= b; c ^= _rot_np(b, 4); b += a  # noqa: E702
    size = length - nblocks * 12
    base = 3 * nblocks
    a += words[:, base]
    if size > 4:
        b += words[:, base + 1]
    if size > 8:
        c += words[:, base + 2]
    c ^= b; c -= _rot_np(b, 14)  # noqa: E702
    a ^= c; a -= _rot_np(c, 11)  # noqa: E702
    b ^= a; b -= _rot_np(a, 25)  # noqa: E702
    c ^= b; c -= _rot_np(b, 16)  # noqa: E702
    a ^= c; a -= _rot_np(c, 4)  # noqa: E702
    b ^= a; b -= _rot_np(a, 14)  # noqa: E702
    c ^= b; c -= _rot_np(b, 24)  # noqa: E702
    return c ^ b


def eventhubs_hash_codes_many(keys: Sequence[str | bytes]) -> np.ndarray:
    """Vectorised :func:`eventhubs_hash_code`; returns an int16 array."""
    kb = [_key_bytes(k) for k in keys]
    x = _apply_fixed(kb, _lookup3_fixed)
    return (x & np.uint32(0xFFFF)).astype(np.uint16).view(np.int16)


def eventhubs_partitions_for_keys(keys: Sequence[str | bytes], partition_count: int) -> np.ndarray:
    """Vectorised :func:`eventhubs_partition_for_key`; returns an int64 array."""
    _check_count(partition_count, "partition_count")
    h = eventhubs_hash_codes_many(keys).astype(np.int64)
    return np.abs(h) % int(partition_count)


def partition_for_key(key: bytes | str, num_partitions: int, backend: str = "kafka") -> int:
    """Partition of ``key`` for ``backend`` (one of :data:`BACKENDS`)."""
    if backend == "kafka":
        return kafka_partition_for_key(_key_bytes(key), num_partitions)
    if backend == "eventhubs":
        return eventhubs_partition_for_key(key, num_partitions)  # type: ignore[arg-type]
    if backend == "eventhubs-buffered":
        return eventhubs_buffered_partition_for_key(key, num_partitions)  # type: ignore[arg-type]
    raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")


def partitions_for_keys(keys: Sequence[bytes | str], num_partitions: int, backend: str = "kafka") -> np.ndarray:
    """Vectorised :func:`partition_for_key`; returns an int64 array."""
    if backend == "kafka":
        return kafka_partitions_for_keys([_key_bytes(k) for k in keys], num_partitions)
    if backend == "eventhubs":
        return eventhubs_partitions_for_keys(keys, num_partitions)
    if backend == "eventhubs-buffered":
        _check_count(num_partitions, "partition_count")
        h = eventhubs_hash_codes_many(keys).astype(np.int64)
        return np.abs(h % int(num_partitions))
    raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
