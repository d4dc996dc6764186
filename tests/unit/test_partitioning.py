"""Key -> partition mapping against published vectors."""

import math
import random

import numpy as np
import pytest
from azure.eventhub._buffered_producer import _partition_resolver as sdk_resolver
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.partitioning import (
    eventhubs_buffered_partition_for_key,
    eventhubs_hash_code,
    eventhubs_hash_codes_many,
    eventhubs_partition_for_key,
    eventhubs_partitions_for_keys,
    kafka_partition_for_key,
    kafka_partitions_for_keys,
    lookup3_hashlittle2,
    murmur2,
    murmur2_many,
    partition_for_key,
    partitions_for_keys,
)

# Apache Kafka UtilsTest.testMurmur2 vectors (signed Java ints), plus the empty key.
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}

# librdkafka rdmurmur2.c unittest: Java murmur2 results after toPositive (& 0x7fffffff).
LIBRDKAFKA_POSITIVE = {b"kafka": 1348980580, b"amqp": 767747138, b"giberish123456789": 257239820}

# Published Event Hubs partition-key hash codes, copied literally (key -> (short) hash code):
#   Azure/azure-sdk-for-net  sdk/eventhub/Azure.Messaging.EventHubs/tests/Core/PartitionResolverTests.cs
#     (PartitionHashTestCases, checked by HashCodeAssignmentIsStable against PartitionResolver.GenerateHashCode,
#     "a direct port of the Event Hubs service code");
#   Azure/azure-sdk-for-java sdk/eventhubs/azure-messaging-eventhubs/src/test/java/com/azure/messaging/eventhubs/
#     PartitionResolverTests.java (partitionHashTestCases, "Taken from .NET's to confirm cross-language
#     compatibility": the same 12 pairs);
#   Azure/azure-sdk-for-python sdk/eventhub/azure-eventhub/tests/unittest/test_partition_resolver.py
#     (test_partition_key: the same pairs except "131").
# They are NOT computed by harness.partitioning: every Event Hubs expectation below comes from these literals, from
# the literal placements further down, or from the installed azure-eventhub SDK's own resolver.
EVENTHUBS_HASH = [
    ("7", -15263),
    ("131", 30562),
    ("7149583486996073602", 12977),
    ("FWfAT", -22341),
    ("sOdeEAsyQoEuEFPGerWO", -6503),
    ("FAyAIctPeCgmiwLKbJcyswoHglHVjQdvtBowLACDNORsYvOcLddNJYDmhAVkbyLOrHTKLneMNcbgWVlasVywOByANjs", 5226),
    ("1XYM6!(7(lF5wq4k4m*e$Nc!1ezLJv*1YK1Y-C^*&B$O)lq^iUkG(TNzXG;Zi#z2Og*Qq0#^*k):vXh$3,C7We7%W0meJ;b3,rQCg^J;^twXgs5E$$hWKxqp", 23950),
    ("E(x;RRIaQcJs*P;D&jTPau-4K04oqr:lF6Z):ERpo&;9040qyV@G1_c9mgOs-8_8/10Fwa-7b7-yP!T-!IH&968)FWuI;(^g$2fN;)HJ^^yTn:", -29304),
    ("!c*_!I@1^c", 15372),
    ("p4*!jioeO/z-!-;w:dh", -3104),
    ("$0cb", 26269),
    ("-4189260826195535198", 453),
]


# Published partition placements: Azure/azure-sdk-for-js
# sdk/eventhub/event-hubs/test/internal/mapPartitionKeyToId.spec.ts, "created from outputs received from the C#
# implementation of Jenkins lookup3 that the Event Hubs service uses": (key, partition count) -> partition.
EVENTHUBS_PLACEMENTS = [
    ("alphabet", 3, 0),
    ("alphabet", 11, 4),
    ("TheBestParitionEver", 4, 2),
    ("TheWorstParitionEver", 15, 1),
]


def _random_keys(n, seed, max_len=40, high_bytes=True):
    rnd = random.Random(seed)
    top = 256 if high_bytes else 128
    return [bytes(rnd.randrange(top) for _ in range(rnd.randrange(max_len + 1))) for _ in range(n)]


@pytest.mark.parametrize("key,expected", sorted(KAFKA_MURMUR2.items()))
def test_murmur2_kafka_vectors(key, expected):
    assert murmur2(key) == expected


@pytest.mark.parametrize("key,expected", sorted(LIBRDKAFKA_POSITIVE.items()))
def test_murmur2_librdkafka_vectors(key, expected):
    assert murmur2(key) & 0x7FFFFFFF == expected


def test_murmur2_is_signed_32_bit():
    vals = [murmur2(k) for k in _random_keys(300, 1)]
    assert all(-(2**31) <= v < 2**31 for v in vals)
    assert any(v < 0 for v in vals) and any(v > 0 for v in vals)


def test_murmur2_many_matches_scalar_all_lengths_and_high_bytes():
    keys = _random_keys(600, 2) + list(KAFKA_MURMUR2)
    got = murmur2_many(keys)
    assert got.dtype == np.int32
    assert got.tolist() == [murmur2(k) for k in keys]


def test_kafka_partition_formula():
    # (murmur2 & 0x7fffffff) % n, e.g. "foobar" on 50 partitions -> 16
    assert kafka_partition_for_key(b"foobar", 50) == (-790332482 & 0x7FFFFFFF) % 50 == 16
    for key, h in KAFKA_MURMUR2.items():
        for n in (1, 3, 8, 12, 64, 1000):
            assert kafka_partition_for_key(key, n) == (h & 0x7FFFFFFF) % n


def test_kafka_partitions_many_matches_scalar():
    keys = _random_keys(500, 3)
    for n in (1, 7, 12, 256):
        assert kafka_partitions_for_keys(keys, n).tolist() == [kafka_partition_for_key(k, n) for k in keys]


@pytest.mark.parametrize("bad", [0, -1, True])
def test_partition_count_validated(bad):
    with pytest.raises(ValueError):
        kafka_partition_for_key(b"x", bad)
    with pytest.raises(ValueError):
        eventhubs_partition_for_key("x", bad)


# Bob Jenkins' lookup3.c driver5 published values: hashlittle2(key, len, &c, &b).
@pytest.mark.parametrize(
    "data,seed_c,seed_b,c,b",
    [
        (b"", 0, 0, 0xDEADBEEF, 0xDEADBEEF),
        (b"", 0, 0xDEADBEEF, 0xBD5B7DDE, 0xDEADBEEF),
        (b"", 0xDEADBEEF, 0xDEADBEEF, 0x9C093CCD, 0xBD5B7DDE),
        (b"Four score and seven years ago", 0, 0, 0x17770551, 0xCE7226E6),
        (b"Four score and seven years ago", 0, 1, 0xE3607CAE, 0xBD371DE4),
        (b"Four score and seven years ago", 1, 0, 0xCD628161, 0x6CBEA4B3),
    ],
)
def test_lookup3_driver5_vectors(data, seed_c, seed_b, c, b):
    assert lookup3_hashlittle2(data, seed_c, seed_b) == (c, b)


def test_lookup3_hashlittle_vectors():
    # hashlittle(k, len, init) == the c word of hashlittle2 with pb = 0
    assert lookup3_hashlittle2(b"hello world\x00")[0] == 0x14973B58
    assert lookup3_hashlittle2(b"hello world\x00", 1)[0] == 0x4746E99F


# -- Event Hubs oracles independent of harness.partitioning ---------------------------------------------------------

PUBLISHED_KEYS = [k for k, _ in EVENTHUBS_HASH]
PUBLISHED_HASHES = [h for _, h in EVENTHUBS_HASH]

# The partition counts of the .NET / Java PartitionResolverTests' PartitionSetTestCases (1..7, 16, 32, 2000).
PARTITION_COUNTS = [1, 2, 3, 4, 5, 6, 7, 16, 32, 2000]


def service_partition(hash_code, n):
    """Azure/azure-sdk-for-net sdk/eventhub/Azure.Messaging.EventHubs/src/Core/PartitionResolver.cs
    AssignForPartitionKey: ``partitions[Math.Abs(hashValue % partitions.Length)]``; C#'s ``%`` truncates (fmod)."""
    return abs(int(math.fmod(hash_code, n)))


def sdk_hash(key):
    """The installed azure-eventhub SDK's ``generate_hash_code`` (_buffered_producer/_partition_resolver.py, the real
    client's lookup3 port) over the key's UTF-8 bytes.  The SDK hashes ``ord()`` of each character, so it is given
    one latin-1 character per UTF-8 byte: exactly the bytes .NET's ``Encoding.UTF8.GetBytes`` hands the service hash."""
    data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return sdk_resolver.generate_hash_code(data.decode("latin-1"))


def sdk_buffered_partition(key, n):
    """Placement by the SDK's own buffered-producer ``PartitionResolver.get_partition_id_by_partition_key``."""
    return int(sdk_resolver.PartitionResolver([str(i) for i in range(n)]).get_partition_id_by_partition_key(key))


ascii_keys = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=60)
partition_counts = st.sampled_from(PARTITION_COUNTS) | st.integers(1, 300)


def test_oracles_agree_with_the_published_literals():
    # the SDK oracle used below is itself held to the published vectors, and so is the service formula
    assert [sdk_resolver.generate_hash_code(k) for k in PUBLISHED_KEYS] == PUBLISHED_HASHES
    assert [sdk_hash(k) for k in PUBLISHED_KEYS] == PUBLISHED_HASHES
    for key, count, partition in EVENTHUBS_PLACEMENTS:
        assert service_partition(sdk_resolver.generate_hash_code(key), count) == partition


# -- eventhubs_hash_code / eventhubs_hash_codes_many -----------------------------------------------------------------


@pytest.mark.parametrize("key,expected", EVENTHUBS_HASH)
def test_eventhubs_hash_code_published_vectors(key, expected):
    assert eventhubs_hash_code(key) == expected
    assert eventhubs_hash_code(key.encode()) == expected


def test_eventhubs_hash_codes_many_published_vectors():
    got = eventhubs_hash_codes_many(PUBLISHED_KEYS)
    assert got.dtype == np.int16
    assert got.tolist() == PUBLISHED_HASHES
    assert eventhubs_hash_codes_many([k.encode() for k in PUBLISHED_KEYS]).tolist() == PUBLISHED_HASHES
    assert eventhubs_hash_codes_many(PUBLISHED_KEYS[::-1]).tolist() == PUBLISHED_HASHES[::-1]
    for key, h in EVENTHUBS_HASH:  # each alone: one length group per call
        assert eventhubs_hash_codes_many([key]).tolist() == [h]


def test_eventhubs_null_and_empty_key_hash_to_zero():
    # .NET GenerateHashCode: null -> 0; the Python SDK: `if not partition_key: return 0`
    assert eventhubs_hash_code(None) == 0
    assert eventhubs_hash_code("") == sdk_resolver.generate_hash_code("") == 0
    assert eventhubs_hash_codes_many(["", b""]).tolist() == [0, 0]


def test_eventhubs_key_is_utf8_encoded():
    # .NET hashes Encoding.UTF8 bytes: a non-ASCII key must hash like the SDK over its UTF-8 bytes, and differently
    # from the SDK over its code points (what a latin-1 / ord() encoding would hash)
    for key in ["é", "héllo→✓", "日本語のキー", "😀-partition"]:
        assert eventhubs_hash_code(key) == sdk_hash(key) == eventhubs_hash_codes_many([key])[0]
    assert eventhubs_hash_code("é") != sdk_resolver.generate_hash_code("é")
    assert eventhubs_hash_code(b"\xe9") == sdk_resolver.generate_hash_code("\xe9")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_eventhubs_hash_code_matches_sdk_for_any_text(key):
    assert eventhubs_hash_code(key) == sdk_hash(key)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_eventhubs_hash_code_matches_sdk_for_any_bytes(data):
    assert eventhubs_hash_code(data) == sdk_hash(data)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=50) | st.text(max_size=20), max_size=40))
def test_eventhubs_hash_codes_many_matches_sdk(keys):
    assert eventhubs_hash_codes_many(keys).tolist() == [sdk_hash(k) for k in keys]


# -- placement: eventhubs (service) and eventhubs-buffered (Python SDK client-side) ---------------------------------


@pytest.mark.parametrize("key,h", EVENTHUBS_HASH)
@pytest.mark.parametrize("n", PARTITION_COUNTS)
def test_eventhubs_partition_from_published_hash(key, h, n):
    assert eventhubs_partition_for_key(key, n) == service_partition(h, n)
    assert partition_for_key(key, n, "eventhubs") == service_partition(h, n)
    assert eventhubs_buffered_partition_for_key(key, n) == sdk_buffered_partition(key, n)
    assert partition_for_key(key, n, "eventhubs-buffered") == sdk_buffered_partition(key, n)


@pytest.mark.parametrize("n", PARTITION_COUNTS)
def test_eventhubs_partitions_for_keys_from_published_hashes(n):
    service = [service_partition(h, n) for h in PUBLISHED_HASHES]
    assert eventhubs_partitions_for_keys(PUBLISHED_KEYS, n).tolist() == service
    assert partitions_for_keys(PUBLISHED_KEYS, n, "eventhubs").tolist() == service
    assert partitions_for_keys([k.encode() for k in PUBLISHED_KEYS], n, "eventhubs").tolist() == service
    buffered = [sdk_buffered_partition(k, n) for k in PUBLISHED_KEYS]
    assert partitions_for_keys(PUBLISHED_KEYS, n, "eventhubs-buffered").tolist() == buffered


@pytest.mark.parametrize("key,count,partition", EVENTHUBS_PLACEMENTS)
def test_eventhubs_partition_matches_published_service_placements(key, count, partition):
    assert eventhubs_partition_for_key(key, count) == partition
    assert eventhubs_partitions_for_keys([key], count).tolist() == [partition]
    assert partition_for_key(key, count, "eventhubs") == partition
    assert partitions_for_keys([key.encode()], count, "eventhubs").tolist() == [partition]


def test_published_placements_tell_service_from_floor_modulo():
    # the JS vectors include negative hash codes where the SDK's flooring % places the key elsewhere
    differs = [(k, n) for k, n, p in EVENTHUBS_PLACEMENTS if sdk_buffered_partition(k, n) != p]
    assert differs == [("alphabet", 11), ("TheWorstParitionEver", 15)]
    assert [(k, n) for k, n, p in EVENTHUBS_PLACEMENTS if eventhubs_buffered_partition_for_key(k, n) != p] == differs


def test_eventhubs_service_vs_python_buffered_differ_for_negative_hash():
    # "7" hashes to -15263 (published): service -> |-15263 rem 4| = 3; the SDK's floor-mod -> 1
    assert eventhubs_partition_for_key("7", 4) == 3
    assert eventhubs_buffered_partition_for_key("7", 4) == sdk_buffered_partition("7", 4) == 1
    # "FWfAT" hashes to -22341 (published): 22341 = 698 * 32 + 5
    assert eventhubs_partition_for_key("FWfAT", 32) == 5
    assert eventhubs_buffered_partition_for_key("FWfAT", 32) == sdk_buffered_partition("FWfAT", 32) == 27
    # positive hash codes agree: "131" -> 30562 (published), 30562 % 8 == 2
    assert eventhubs_partition_for_key("131", 8) == eventhubs_buffered_partition_for_key("131", 8) == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(ascii_keys, min_size=1, max_size=30), partition_counts)
def test_eventhubs_placement_matches_sdk(keys, n):
    service = [service_partition(sdk_resolver.generate_hash_code(k), n) for k in keys]
    assert [eventhubs_partition_for_key(k, n) for k in keys] == service
    assert eventhubs_partitions_for_keys(keys, n).tolist() == service
    assert partitions_for_keys([k.encode() for k in keys], n, "eventhubs").tolist() == service
    buffered = [sdk_buffered_partition(k, n) for k in keys]
    assert [eventhubs_buffered_partition_for_key(k, n) for k in keys] == buffered
    assert partitions_for_keys(keys, n, "eventhubs-buffered").tolist() == buffered


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=20), partition_counts)
def test_eventhubs_service_placement_of_non_ascii_keys_matches_sdk_hash(keys, n):
    service = [service_partition(sdk_hash(k), n) for k in keys]
    assert [eventhubs_partition_for_key(k, n) for k in keys] == service
    assert eventhubs_partitions_for_keys(keys, n).tolist() == service


def test_partition_for_key_dispatch():
    assert partition_for_key(b"foobar", 50, "kafka") == 16
    assert partition_for_key("foobar", 50, "kafka") == 16
    assert partition_for_key("7", 4, "eventhubs") == 3
    assert partition_for_key("7", 4, "eventhubs-buffered") == 1
    with pytest.raises(ValueError, match="backend"):
        partition_for_key("7", 4, "pulsar")
    with pytest.raises(ValueError, match="backend"):
        partitions_for_keys(["7"], 4, "pulsar")
