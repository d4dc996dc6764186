"""Key -> partition mapping against published vectors."""

import random

import numpy as np
import pytest

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

# Azure SDK for .NET, sdk/eventhub/Azure.Messaging.EventHubs/tests/Core/PartitionResolverTests.cs
# PartitionHashTestCases: key -> (short) hash code. The Java SDK carries the same literals "to confirm
# cross-language compatibility": Azure/azure-sdk-for-java
# sdk/eventhubs/azure-messaging-eventhubs/src/test/java/com/azure/messaging/eventhubs/PartitionResolverTests.java
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


@pytest.mark.parametrize("key,expected", EVENTHUBS_HASH)
def test_eventhubs_hash_code_dotnet_vectors(key, expected):
    assert eventhubs_hash_code(key) == expected
    assert eventhubs_hash_code(key.encode()) == expected


def test_eventhubs_hash_codes_many_matches_vectors_and_scalar():
    keys = [k for k, _ in EVENTHUBS_HASH]
    assert eventhubs_hash_codes_many(keys).tolist() == [h for _, h in EVENTHUBS_HASH]
    rand = _random_keys(600, 4)
    assert eventhubs_hash_codes_many(rand).tolist() == [eventhubs_hash_code(k) for k in rand]


def test_eventhubs_null_and_empty_key_hash_to_zero():
    assert eventhubs_hash_code(None) == 0
    assert eventhubs_hash_code("") == 0


def test_eventhubs_key_is_utf8_encoded():
    assert eventhubs_hash_code("héllo→✓") == eventhubs_hash_code("héllo→✓".encode("utf-8"))
    assert eventhubs_hash_code("é") != eventhubs_hash_code(b"\xe9")


@pytest.mark.parametrize("key,h", EVENTHUBS_HASH)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 32, 2000])
def test_eventhubs_partition_is_dotnet_abs_of_truncated_remainder(key, h, n):
    # C#: Math.Abs(hash % n) with truncating %  ==  |h| % n
    trunc_rem = int(abs(h) % n) * (1 if h >= 0 else -1)
    assert eventhubs_partition_for_key(key, n) == abs(trunc_rem)
    assert eventhubs_buffered_partition_for_key(key, n) == abs(h % n)


@pytest.mark.parametrize("key,count,partition", EVENTHUBS_PLACEMENTS)
def test_eventhubs_partition_matches_published_service_placements(key, count, partition):
    assert eventhubs_partition_for_key(key, count) == partition
    assert eventhubs_partitions_for_keys([key], count).tolist() == [partition]
    assert partition_for_key(key, count, "eventhubs") == partition


def test_published_placements_tell_service_from_floor_modulo():
    # the JS vectors include negative hash codes where a flooring % would place the key elsewhere
    differs = [(k, n) for k, n, p in EVENTHUBS_PLACEMENTS if eventhubs_buffered_partition_for_key(k, n) != p]
    assert differs == [("alphabet", 11), ("TheWorstParitionEver", 15)]


def test_eventhubs_service_vs_python_buffered_differ_for_negative_hash():
    # "7" hashes to -15263: service -> |-15263| % 4 = 3; Python floor-mod -> 1
    assert eventhubs_partition_for_key("7", 4) == 3
    assert eventhubs_buffered_partition_for_key("7", 4) == 1
    assert eventhubs_partition_for_key("FWfAT", 32) == 5
    assert eventhubs_buffered_partition_for_key("FWfAT", 32) == 27
    # positive hash codes agree
    assert eventhubs_partition_for_key("131", 8) == eventhubs_buffered_partition_for_key("131", 8) == 30562 % 8


def test_eventhubs_partitions_many_matches_scalar():
    keys = [k.decode("latin-1") for k in _random_keys(400, 5)] + [k for k, _ in EVENTHUBS_HASH]
    for n in (1, 4, 32):
        assert eventhubs_partitions_for_keys(keys, n).tolist() == [eventhubs_partition_for_key(k, n) for k in keys]
        assert partitions_for_keys(keys, n, "eventhubs-buffered").tolist() == [
            eventhubs_buffered_partition_for_key(k, n) for k in keys
        ]


def test_cross_check_against_installed_azure_eventhub_sdk():
    resolver = pytest.importorskip("azure.eventhub._buffered_producer._partition_resolver")
    rnd = random.Random(6)
    keys = ["".join(chr(rnd.randrange(32, 127)) for _ in range(rnd.randrange(1, 40))) for _ in range(300)]
    keys += [k for k, _ in EVENTHUBS_HASH]
    assert [resolver.generate_hash_code(k) for k in keys] == [eventhubs_hash_code(k) for k in keys]
    ids = [str(i) for i in range(7)]
    pr = resolver.PartitionResolver(ids)
    assert [int(pr.get_partition_id_by_partition_key(k)) for k in keys] == [
        eventhubs_buffered_partition_for_key(k, 7) for k in keys
    ]


def test_partition_for_key_dispatch():
    assert partition_for_key(b"foobar", 50, "kafka") == 16
    assert partition_for_key("foobar", 50, "kafka") == 16
    assert partition_for_key("7", 4, "eventhubs") == 3
    assert partition_for_key("7", 4, "eventhubs-buffered") == 1
    with pytest.raises(ValueError, match="backend"):
        partition_for_key("7", 4, "pulsar")
    with pytest.raises(ValueError, match="backend"):
        partitions_for_keys(["7"], 4, "pulsar")
