"""Skew figures."""

import itertools
import random

import pytest

from harness.producers.skew import share_deviation, skew_figures


def brute_gini(xs):
    n, total = len(xs), sum(xs)
    return sum(abs(a - b) for a, b in itertools.product(xs, xs)) / (2 * n * total)


def test_even_counts():
    f = skew_figures([10, 10, 10, 10])
    assert f["gini"] == 0 and f["cv"] == 0 and f["max_mean_share"] == 1 and f["min_mean_share"] == 1
    assert f["shares"] == [0.25] * 4 and f["total"] == 40


def test_everything_on_one_partition():
    f = skew_figures([0, 0, 80, 0])
    assert f["max_mean_share"] == 4
    assert f["gini"] == pytest.approx(3 / 4)
    assert f["hottest"] == 2 and f["min"] == 0
    assert f["cv"] == pytest.approx(3 ** 0.5)


def test_known_example():
    f = skew_figures([1, 2, 3, 4])
    assert f["gini"] == pytest.approx(0.25)
    assert f["cv"] == pytest.approx(1.25 ** 0.5 / 2.5)
    assert f["max_mean_share"] == pytest.approx(1.6)
    assert f["shares"] == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_gini_matches_pairwise_definition():
    rnd = random.Random(3)
    for _ in range(50):
        xs = [rnd.randrange(0, 1000) for _ in range(rnd.randrange(1, 30))]
        if sum(xs) == 0:
            continue
        assert skew_figures(xs)["gini"] == pytest.approx(brute_gini(xs), abs=1e-12)


def test_zero_total_and_bad_input():
    f = skew_figures([0, 0, 0])
    assert f["gini"] is None and f["max_mean_share"] is None and f["shares"] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        skew_figures([])
    with pytest.raises(ValueError):
        skew_figures([1, -1])


def test_share_deviation():
    d = share_deviation([50, 30, 20, 0], [0.5, 0.25, 0.25, 0.0])
    assert d["max_abs"] == pytest.approx(0.05)
    assert d["tvd"] == pytest.approx(0.05)
    assert d["chi2"] == pytest.approx(0 + 25 / 25 + 25 / 25)
    assert d["dof"] == 2 and d["unexpected"] == 0
    assert share_deviation([1, 1], [1.0, 0.0])["unexpected"] == 1
    with pytest.raises(ValueError):
        share_deviation([1], [0.5, 0.5])
