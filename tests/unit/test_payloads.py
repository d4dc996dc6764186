"""Payload sizes, content compressibility and headers."""

import zlib

import numpy as np
import pytest

from harness.producers.event import decode, encode
from harness.producers.payloads import _TEXT, ALPHABET, PayloadSource, read_event_ids
from harness.producers.spec import PayloadSpec


def P(d=None, seed=1):
    return PayloadSource(PayloadSpec.model_validate(d or {}), seed)


def test_default_is_fixed_1k_random_without_headers():
    src = P()
    assert src.next_sizes(3) == [1024, 1024, 1024]
    assert src.headers() is None


def test_uniform_sizes_inclusive_range():
    src = P({"size": {"kind": "uniform", "min_bytes": 10, "max_bytes": 20}})
    sizes = np.array(src.next_sizes(20_000))
    assert sizes.min() == 10 and sizes.max() == 20
    counts = np.bincount(sizes - 10, minlength=11)
    exp = 20_000 / 11
    assert float(np.sum((counts - exp) ** 2 / exp)) < 29.59  # chi2 0.999, 10 dof


def test_weighted_sizes_follow_weights():
    src = P({"size": {"kind": "weighted", "sizes": [100, 1000, 10000], "weights": [6, 3, 1]}})
    sizes = src.next_sizes(50_000)
    assert set(sizes) == {100, 1000, 10000}
    counts = np.array([sizes.count(100), sizes.count(1000), sizes.count(10000)])
    exp = np.array([0.6, 0.3, 0.1]) * 50_000
    assert float(np.sum((counts - exp) ** 2 / exp)) < 13.82  # chi2 0.999, 2 dof


@pytest.mark.parametrize("content", ["random", "compressible"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 65_537, (1 << 20) + 3])
def test_fill_is_exact_length_ascii(content, n):
    src = P({"content": content, "size": {"kind": "fixed", "bytes": 1000}})
    s = src.fill(n)
    assert isinstance(s, str) and len(s) == n
    assert len(s.encode("ascii")) == n


def test_random_fill_uses_the_alphabet_and_does_not_repeat():
    src = P({"content": "random"})
    a, b = src.fill(5000), src.fill(5000)
    assert a != b
    assert set(a.encode()) <= set(ALPHABET)
    assert len(set(a)) == 64


def test_random_incompressible_compressible_compresses():
    rnd = P({"content": "random"})
    cmp_ = P({"content": "compressible"})
    single_r = rnd.fill(2000).encode()
    single_c = cmp_.fill(2000).encode()
    assert len(zlib.compress(single_r, 9)) / len(single_r) > 0.72
    assert len(zlib.compress(single_c, 9)) / len(single_c) < 0.15
    # a batch of messages (what Kafka compresses together) stays incompressible too
    batch_r = "".join(rnd.fill(1000) for _ in range(500)).encode()
    batch_c = "".join(cmp_.fill(1000) for _ in range(500)).encode()
    assert len(zlib.compress(batch_r, 9)) / len(batch_r) > 0.74
    assert len(zlib.compress(batch_c, 9)) / len(batch_c) < 0.02


def test_same_seed_same_stream():
    a = P({"size": {"kind": "uniform", "min_bytes": 1, "max_bytes": 99}}, seed=5)
    b = P({"size": {"kind": "uniform", "min_bytes": 1, "max_bytes": 99}}, seed=5)
    assert a.next_sizes(50) == b.next_sizes(50)
    assert a.fill(300) == b.fill(300)
    assert P(seed=6).fill(300) != P(seed=7).fill(300)


def test_headers_fixed_then_random():
    src = P({"headers": {"fixed": {"scenario": "s1", "run": "r-7"}, "random": 3, "value_bytes": 5}})
    h1, h2 = src.headers(), src.headers()
    assert [n for n, _ in h1] == ["scenario", "run", "h0", "h1", "h2"]
    assert h1[:2] == [("scenario", b"s1"), ("run", b"r-7")]
    assert all(isinstance(v, bytes) and len(v) == 5 for _, v in h1[2:])
    assert h1[2:] != h2[2:]
    only_fixed = P({"headers": {"fixed": {"a": "b"}}})
    assert only_fixed.headers() == [("a", b"b")]


def test_payload_uses_next_size():
    src = P({"size": {"kind": "fixed", "bytes": 33}, "content": "compressible"})
    assert len(src.payload()) == 33
    assert src.max_bytes == 33


# -- whole batches of encoded events (the producer's hot path) -----------------------------------------------------
T_S = 1_795_313_990.0  # an epoch instant in seconds


@pytest.mark.parametrize("content", ["random", "compressible"])
@pytest.mark.parametrize("size", [{"kind": "fixed", "bytes": 256}, {"kind": "uniform", "min_bytes": 1,
                                                                     "max_bytes": 400}])
def test_batch_events_are_what_the_event_encoder_writes(content, size):
    """Each value of a batch is byte for byte `producers.event.encode` of its id and intended time with its own
    pad, at its wanted size (or its head's when that is longer); the batch crosses a digit boundary of seq."""
    src = P({"content": content, "size": size})
    n, seq0 = 600, 99_700
    intended = T_S + np.arange(n) * 0.000_37 + 0.000_123_4
    sizes = src.next_sizes_array(n)
    values, total = src.events(7, seq0, intended, sizes)
    assert len(values) == n and total == sum(len(v) for v in values)
    for i, v in enumerate(values):
        pad = decode(v)["pad"]
        assert v == encode(7, seq0 + i, float(intended[i]), pad)
        assert len(v) == max(int(sizes[i]), len(encode(7, seq0 + i, float(intended[i]))))
        assert set(pad.encode()) <= set(ALPHABET if content == "random" else _TEXT.encode())


def test_batch_events_large_payloads_are_built_one_by_one_the_same_way():
    src = P({"content": "compressible", "size": {"kind": "fixed", "bytes": 9_000_000}})
    values, total = src.events(0, 0, T_S + np.arange(3), src.next_sizes_array(3))  # 27 MB: over the matrix limit
    assert [len(v) for v in values] == [9_000_000] * 3 and total == 27_000_000
    assert [decode(v)["s"] for v in values] == [0, 1, 2]
    assert values[2] == encode(0, 2, T_S + 2, decode(values[2])["pad"])


def test_batch_content_compresses_as_configured():
    rnd = P({"content": "random", "size": {"kind": "fixed", "bytes": 1000}})
    cmp_ = P({"content": "compressible", "size": {"kind": "fixed", "bytes": 1000}})
    batch_r = b"".join(rnd.events(0, 0, T_S + np.arange(500), rnd.next_sizes_array(500))[0])
    batch_c = b"".join(cmp_.events(0, 0, T_S + np.arange(500), cmp_.next_sizes_array(500))[0])
    assert len(zlib.compress(batch_r, 9)) / len(batch_r) > 0.70  # 95.5% pad at 6 bits of 8; heads compress
    assert len(zlib.compress(batch_c, 9)) / len(batch_c) < 0.05


def test_event_ids_are_read_back_from_values_in_bulk():
    """Values written by the event encoder itself (an independent source): ids and the intended time's text."""
    times = [T_S + 0.0004567, 1_795_313_999.9999996, 12.5, T_S + 86_400 * 365 * 300]  # 13, 13, 5 and 14 digits
    seqs = [9, 10, 12_345_678_901, 0]
    values = [encode(42, s, t, "x" * k) for s, t, k in zip(seqs, times, (0, 3, 300, 1))]
    seq, intended_ms = read_event_ids(42, values)
    assert seq.tolist() == seqs
    assert intended_ms.tolist() == [float(f"{t * 1000.0:.3f}") for t in times]
    with pytest.raises(ValueError):
        read_event_ids(4, values)  # not producer 4's events
    with pytest.raises(ValueError):
        read_event_ids(42, [b'{"p":42,"s":1x,"t":1.000,"pad":""}'])


def test_small_batches_formatted_in_python_are_the_matrix_paths_bytes(monkeypatch):
    """Up to _SMALL_BATCH events a batch is formatted in Python; the matrix path (forced here for the twin source,
    same seed) is the reference: the same values and totals, and the same draws (the streams stay in step)."""
    import harness.producers.payloads as payloads

    rng = np.random.default_rng(1)
    small_batch = payloads._SMALL_BATCH
    for spec in ({"content": "compressible", "size": {"kind": "fixed", "bytes": 256}},
                 {"content": "random", "size": {"kind": "uniform", "min_bytes": 10, "max_bytes": 400}},
                 {"content": "compressible", "size": {"kind": "uniform", "min_bytes": 10, "max_bytes": 400}}):
        small, matrix = P(spec), P(spec)
        for trial in range(100):
            n = int(rng.integers(1, small_batch + 1))
            seq0 = int(rng.integers(0, 10**12))
            t = T_S + np.sort(rng.uniform(0, 100, n)) if trial % 5 else np.full(n, 12.0004995)
            got = small.events(3, seq0, t, small.next_sizes_array(n))
            monkeypatch.setattr(payloads, "_SMALL_BATCH", 0)
            want = matrix.events(3, seq0, t, matrix.next_sizes_array(n))
            monkeypatch.setattr(payloads, "_SMALL_BATCH", small_batch)
            assert got == want
    assert [decode(v)["s"] for v in got[0]] == list(range(seq0, seq0 + n))
