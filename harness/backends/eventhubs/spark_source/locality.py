"""Where azure-eventhubs-spark would run each partition's task (Python sources cannot state preferred locations).

The connector (EventHubsSource.getBatch) sorts the executors (block-manager peers, so never the driver) by host
then executor id, both descending as strings, and picks `sorted[floorMod(h, n)]` where h is, for strategy
  * Hash: NameAndPartition(hub, partition).hashCode = Scala's (hub, partition) Tuple2 hashCode
    (MurmurHash3.productHash; Scala 2.12, which the connector is built with, mixes no product prefix; 2.13 does);
  * BalancedHash: hub.hashCode (java.lang.String) + partition, so consecutive partitions land on consecutive
    executors.
No executors (local mode) means no preference, as in the connector. The harness reports this placement next to
the measured one (executor and Python worker pid per task, see metrics.py).
"""
from __future__ import annotations

from typing import Iterable, Sequence, Union

Executor = Union[str, tuple[str, str]]  # executor id, or (host, executor id)

_MASK = 0xFFFFFFFF
_PRODUCT_SEED = 0xCAFEBABE


def _int32(x: int) -> int:
    x &= _MASK
    return x - (1 << 32) if x & 0x80000000 else x


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, 32-bit wrap-around."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return _int32(h)


def _rotl(x: int, r: int) -> int:
    x &= _MASK
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_last(h: int, data: int) -> int:
    k = (data * 0xCC9E2D51) & _MASK
    k = _rotl(k, 15)
    k = (k * 0x1B873593) & _MASK
    return (h ^ k) & _MASK


def _mix(h: int, data: int) -> int:
    h = _rotl(_mix_last(h, data), 13)
    return (h * 5 + 0xE6546B64) & _MASK


def _finalize(h: int, length: int) -> int:
    h = (h ^ length) & _MASK
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return _int32(h)


def scala_tuple2_hash(name: str, number: int, scala: str = "2.12") -> int:
    """hashCode of the Scala tuple (name, number) (a String and an Int)."""
    h = _PRODUCT_SEED
    if scala == "2.13":
        h = _mix(h, java_string_hash("Tuple2"))
    elif scala != "2.12":
        raise ValueError(f"scala must be '2.12' or '2.13', got {scala!r}")
    h = _mix(h, java_string_hash(name) & _MASK)
    h = _mix(h, number & _MASK)
    return _finalize(h, 2)


def location_hash(strategy: str, hub: str, partition: int | str, scala: str = "2.12") -> int:
    pid = int(partition)
    if strategy == "Hash":
        return scala_tuple2_hash(hub, pid, scala)
    if strategy == "BalancedHash":
        return _int32(java_string_hash(hub) + pid)
    raise ValueError(f"strategy must be one of Hash, BalancedHash; got {strategy!r}")


def _host_and_id(executor: Executor) -> tuple[str, str]:
    if isinstance(executor, str):
        return "", executor
    host, executor_id = executor
    return str(host), str(executor_id)


def sorted_executors(executors: Iterable[Executor]) -> list[Executor]:
    """The connector's order: host descending, then executor id descending (string comparison)."""
    return sorted(executors, key=_host_and_id, reverse=True)


def preferred_executor(strategy: str, hub: str, partition: int | str, executors: Sequence[Executor],
                       scala: str = "2.12") -> Executor | None:
    """The executor (as given: an id or a (host, id) pair) the strategy would choose; None without executors."""
    ordered = sorted_executors(executors)
    if not ordered:
        return None
    return ordered[location_hash(strategy, hub, partition, scala) % len(ordered)]  # Python % is floorMod


def placement(strategy: str, hub: str, partitions: Iterable[int | str], executors: Sequence[Executor],
              scala: str = "2.12") -> dict[str, Executor | None]:
    """{partition id: preferred executor} for a batch's partitions."""
    return {str(p): preferred_executor(strategy, hub, p, executors, scala) for p in partitions}
