"""Key choosers: distributions, partition targeting, determinism."""

import math

import numpy as np
import pytest
from azure.eventhub._buffered_producer import _partition_resolver as sdk_resolver
from pydantic import TypeAdapter

from harness.partitioning import kafka_partition_for_key, partition_for_key
from harness.producers.keys import KeyChooser, expected_partition_shares, make_key_chooser
from harness.producers.spec import KeysSpec

TA = TypeAdapter(KeysSpec)

# chi-square 0.999 quantiles (so a correct sampler fails with prob. 1e-3 per seed; seeds are fixed)
CHI2_999 = {9: 27.88, 19: 43.82, 49: 85.35, 99: 148.23}


def K(d):
    return TA.validate_python(d)


def eventhubs_oracle(key, n, backend="eventhubs"):
    """Where Event Hubs puts a producer key (ASCII bytes), independently of harness.partitioning: the installed
    azure-eventhub SDK's lookup3 port (_buffered_producer/_partition_resolver.py, held to the Azure SDKs' published
    hash vectors in test_partitioning.py).  ``eventhubs``: the service's ``Math.Abs(hash % n)`` with C#'s truncating
    ``%`` (Azure/azure-sdk-for-net sdk/eventhub/Azure.Messaging.EventHubs/src/Core/PartitionResolver.cs);
    ``eventhubs-buffered``: the SDK buffered producer's own ``PartitionResolver``."""
    key = key.decode("ascii") if isinstance(key, bytes) else key
    if backend == "eventhubs":
        return abs(int(math.fmod(sdk_resolver.generate_hash_code(key), n)))
    assert backend == "eventhubs-buffered", backend
    return int(sdk_resolver.PartitionResolver([str(i) for i in range(n)]).get_partition_id_by_partition_key(key))


def placement_oracle(key, n, backend):
    if backend == "kafka":
        return partition_for_key(key, n, backend)  # murmur2 has its own published vectors in test_partitioning.py
    return eventhubs_oracle(key, n, backend)


def chi2(counts, probs):
    exp = np.asarray(probs) * np.sum(counts)
    return float(np.sum((np.asarray(counts) - exp) ** 2 / exp))


def ids_of(choices, prefix=b"k"):
    return np.array([int(k[len(prefix):]) for k, _ in choices])


def test_uniform_frequencies_chi_square():
    c = make_key_chooser(K({"kind": "uniform", "count": 50}), 8, seed=11)
    ids = ids_of(c.next_many(200_000))
    counts = np.bincount(ids, minlength=50)
    assert counts.size == 50
    assert chi2(counts, np.full(50, 1 / 50)) < CHI2_999[49]


def test_uniform_detects_bias():
    # the chi-square check above does reject a skewed stream of the same size
    rng = np.random.default_rng(0)
    skewed = rng.choice(50, size=200_000, p=np.r_[np.full(49, 0.975 / 49), 0.025])  # one key 25% hot
    assert chi2(np.bincount(skewed, minlength=50), np.full(50, 1 / 50)) > CHI2_999[49]


@pytest.mark.parametrize("s", [0.5, 1.0, 1.3, 2.5])
def test_zipf_frequencies_match_exact_bounded_probabilities(s):
    count = 100
    c = make_key_chooser(K({"kind": "zipf", "count": count, "s": s}), 8, seed=12)
    ids, probs = c.key_probabilities()
    w = np.arange(1, count + 1) ** -s
    assert np.allclose(probs, w / w.sum())  # rank r has weight r^-s, bounded to `count` keys
    draws = ids_of(c.next_many(200_000))
    counts_by_id = np.bincount(draws, minlength=count)
    counts_by_rank = counts_by_id[ids]
    # merge the tail so every cell expects >= 20
    exp = probs * draws.size
    keep = exp >= 20
    cells_c = np.r_[counts_by_rank[keep], counts_by_rank[~keep].sum()]
    cells_p = np.r_[probs[keep], probs[~keep].sum()]
    if cells_p[-1] == 0:
        cells_c, cells_p = cells_c[:-1], cells_p[:-1]
    dof = cells_c.size - 1
    crit = 3.09 * np.sqrt(2 * dof) + dof  # ~0.999 quantile (normal approx.)
    assert chi2(cells_c, cells_p) < crit
    # the most frequent key is the rank-1 key
    assert int(np.argmax(counts_by_id)) == int(ids[0])


def test_zipf_hot_keys_are_shuffled_and_same_for_every_seed():
    a = make_key_chooser(K({"kind": "zipf", "count": 1000, "s": 1.1}), 8, seed=1)
    b = make_key_chooser(K({"kind": "zipf", "count": 1000, "s": 1.1}), 8, seed=2)
    ia, pa = a.key_probabilities()
    ib, pb = b.key_probabilities()
    assert ia.tolist() == ib.tolist() and np.array_equal(pa, pb)
    assert ia[:10].tolist() != list(range(10))  # hot keys not the adjacent ids 0..9
    assert sorted(ia.tolist()) == list(range(1000))
    c = make_key_chooser(K({"kind": "zipf", "count": 1000, "s": 1.1, "shuffle_seed": 9}), 8, seed=1)
    assert c.key_probabilities()[0].tolist() != ia.tolist()


@pytest.mark.parametrize("backend", ["kafka", "eventhubs", "eventhubs-buffered"])
@pytest.mark.parametrize("rest", ["uniform", "even"])
def test_hot_partitions_keys_hash_to_hot_partitions(backend, rest):
    P = 12
    spec = K({"kind": "hot_partitions", "partitions": [2, 7], "share": 0.6, "rest": rest, "count": 100})
    c = make_key_chooser(spec, P, seed=5, backend=backend)
    shares = c.expected_partition_shares()
    assert shares[2] == pytest.approx(0.3) and shares[7] == pytest.approx(0.3)
    assert sum(shares) == pytest.approx(1.0)
    if rest == "even":
        for p in range(P):
            if p not in (2, 7):
                assert shares[p] == pytest.approx(0.4 / 10)
    draws = c.next_many(100_000)
    hash_fn = kafka_partition_for_key if backend == "kafka" else (lambda k, n: eventhubs_oracle(k, n, backend))
    parts = np.array([hash_fn(k, P) for k, _ in draws])
    observed = np.bincount(parts, minlength=P) / len(draws)
    assert observed[2] + observed[7] == pytest.approx(0.6, abs=0.01)
    assert np.max(np.abs(observed - np.array(shares))) < 0.01
    assert all(p is None for _, p in draws)


def test_hot_partitions_full_share_and_explicit_assignment():
    spec = K({"kind": "hot_partitions", "partitions": [3], "share": 1.0, "assign": "explicit", "hot_keys_per_partition": 4})
    c = make_key_chooser(spec, 6, seed=1)
    draws = c.next_many(1000)
    assert {p for _, p in draws} == {3}
    assert {kafka_partition_for_key(k, 6) for k, _ in draws} == {3}
    assert len({k for k, _ in draws}) == 4
    assert c.expected_partition_shares() == [0, 0, 0, 1.0, 0, 0]


@pytest.mark.parametrize("backend", ["eventhubs", "eventhubs-buffered"])
def test_hot_partitions_explicit_with_rest_returns_hashing_partition(backend):
    spec = K({"kind": "hot_partitions", "partitions": [0], "share": 0.5, "assign": "explicit", "rest": "even", "count": 9})
    c = make_key_chooser(spec, 4, seed=2, backend=backend)
    for k, p in c.next_many(500):
        assert eventhubs_oracle(k, 4, backend) == p


# Published hash codes (Azure/azure-sdk-for-net sdk/eventhub/Azure.Messaging.EventHubs/tests/Core/
# PartitionResolverTests.cs, PartitionHashTestCases; the same in the Java and Python SDKs' PartitionResolver tests):
# "7" -> -15263, "131" -> 30562.  On 4 partitions the service puts "7" on |-15263 rem 4| = 3 and the Python SDK's
# buffered producer on -15263 % 4 = 1 (floor); "131" goes to 30562 % 4 = 2 on both.
@pytest.mark.parametrize("backend,where_7,where_131", [("eventhubs", 3, 2), ("eventhubs-buffered", 1, 2)])
def test_producer_places_published_keys(backend, where_7, where_131):
    # prefix "" makes the producer's keys "0", "1", ...: "7" and "131" are published vector keys
    spec = K({"kind": "hot_partitions", "partitions": [0, 1, 2, 3], "share": 1.0, "assign": "explicit",
              "hot_keys_per_partition": 100, "prefix": ""})
    c = make_key_chooser(spec, 4, seed=3, backend=backend)
    placed = dict(c.next_many(20_000))
    assert placed[b"7"] == where_7 and placed[b"131"] == where_131
    assert all(eventhubs_oracle(k, 4, backend) == p for k, p in placed.items())
    # one hot partition: its key pool holds "7" only where the backend places "7"
    for p in range(4):
        one = K({"kind": "hot_partitions", "partitions": [p], "share": 1.0, "hot_keys_per_partition": 8, "prefix": ""})
        ids = make_key_chooser(one, 4, seed=0, backend=backend).key_probabilities()[0].tolist()
        assert (7 in ids) == (p == where_7)


@pytest.mark.parametrize(
    "d,P,match",
    [
        ({"kind": "hot_partitions", "partitions": [8], "share": 0.5}, 8, "out of range"),
        ({"kind": "hot_partitions", "partitions": [0, 1], "share": 0.5}, 2, "not hot"),
    ],
)
def test_hot_partitions_errors(d, P, match):
    with pytest.raises(ValueError, match=match):
        make_key_chooser(K(d), P, seed=0)


def test_sequential_round_robin_across_calls():
    c = make_key_chooser(K({"kind": "sequential", "count": 3, "prefix": "user-"}), 4, seed=0)
    got = [k for k, _ in c.next_many(4)] + [c.next()[0]] + [k for k, _ in c.next_many(2)]
    assert got == [b"user-0", b"user-1", b"user-2", b"user-0", b"user-1", b"user-2", b"user-0"]


def test_none_gives_no_key_and_even_expected_shares():
    c = make_key_chooser(K({"kind": "none"}), 5, seed=0)
    assert c.next() == (None, None)
    assert c.next_many(3) == [(None, None)] * 3
    assert c.expected_partition_shares() == [0.2] * 5


def test_next_and_next_many_share_one_stream_and_seed_determines_it():
    spec = K({"kind": "zipf", "count": 500, "s": 0.9})
    a = make_key_chooser(spec, 8, seed=3)
    b = make_key_chooser(spec, 8, seed=3)
    seq_a = [a.next() for _ in range(10)] + a.next_many(5000) + a.next_many(7)
    seq_b = b.next_many(5017)
    assert seq_a == seq_b
    c = make_key_chooser(spec, 8, seed=4)
    assert c.next_many(100) != seq_b[:100]


@pytest.mark.parametrize("backend", ["kafka", "eventhubs", "eventhubs-buffered"])
@pytest.mark.parametrize(
    "d",
    [
        {"kind": "uniform", "count": 300},
        {"kind": "zipf", "count": 300, "s": 1.2},
        {"kind": "sequential", "count": 37},
        {"kind": "hot_partitions", "partitions": [1], "share": 0.25},
    ],
)
def test_expected_partition_shares_exact_against_scalar_hash(d, backend):
    P = 7
    c = make_key_chooser(K(d), P, seed=0, backend=backend)
    ids, probs = c.key_probabilities()
    manual = np.zeros(P)
    for i, pr in zip(ids.tolist(), probs.tolist()):
        key = f"k{i}"
        manual[placement_oracle(key, P, backend)] += pr
    assert np.allclose(c.expected_partition_shares(), manual)
    assert np.allclose(expected_partition_shares(K(d), P, backend), manual)
    assert np.allclose(expected_partition_shares(c, P, backend), manual)


def test_observed_partition_frequencies_match_expected_shares():
    spec = K({"kind": "zipf", "count": 2000, "s": 1.0})
    c = make_key_chooser(spec, 10, seed=8)
    shares = np.array(c.expected_partition_shares())
    parts = np.array([kafka_partition_for_key(k, 10) for k, _ in c.next_many(100_000)])
    counts = np.bincount(parts, minlength=10)
    assert chi2(counts, shares) < CHI2_999[9]


def test_expected_shares_for_other_partition_count():
    c = make_key_chooser(K({"kind": "uniform", "count": 64}), 8, seed=0)
    shares16 = c.expected_partition_shares(16)
    manual = np.bincount([kafka_partition_for_key(f"k{i}".encode(), 16) for i in range(64)], minlength=16) / 64
    assert np.allclose(shares16, manual)


def test_large_uniform_formats_keys_on_the_fly():
    c = make_key_chooser(K({"kind": "uniform", "count": 5_000_000, "prefix": "dev:"}), 8, seed=1)
    ks = c.next_many(1000)
    assert all(k.startswith(b"dev:") and 0 <= int(k[4:]) < 5_000_000 for k, _ in ks)


def test_invalid_backend_and_partitions():
    with pytest.raises(ValueError, match="backend"):
        make_key_chooser(K({"kind": "uniform"}), 4, seed=0, backend="pulsar")
    with pytest.raises(ValueError, match="num_partitions"):
        KeyChooser(K({"kind": "uniform"}), 0, seed=0)


@pytest.mark.parametrize("spec", [{"kind": "uniform", "count": 1000}, {"kind": "zipf", "count": 300, "s": 1.2},
                                  {"kind": "sequential", "count": 7}, {"kind": "none"},
                                  {"kind": "hot_partitions", "partitions": [0], "share": 0.5, "assign": "explicit"},
                                  {"kind": "hot_partitions", "partitions": [1, 2], "share": 0.8}])
def test_key_columns_are_the_same_stream_as_choices(spec):
    """The producer's columns (keys, partitions) follow the very stream next_many gives as tuples."""
    a, b = make_key_chooser(K(spec), 8, seed=4), make_key_chooser(K(spec), 8, seed=4)
    for n in (3, 5000, 1):
        choices = a.next_many(n)
        keys, partitions = b.next_columns(n)
        assert (keys or [None] * n) == [k for k, _ in choices]
        assert (partitions or [None] * n) == [p for _, p in choices]
