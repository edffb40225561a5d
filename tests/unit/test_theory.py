"""Closed forms for the hardmax rank against brute-force enumeration and the stated formulas."""

import itertools
import math

import numpy as np
import pytest

from helpers import theory


def enumerate_rank_distribution(p: list[float]):
    """Exact distribution of the number of distinct columns when len(p) rows pick columns i.i.d. from p."""
    n = len(p)
    dist = {}
    for picks in itertools.product(range(n), repeat=n):
        prob = math.prod(p[j] for j in picks)
        k = len(set(picks))
        dist[k] = dist.get(k, 0.0) + prob
    return dist


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_expected_rank_and_variance_against_enumeration(n):
    dist = enumerate_rank_distribution([1 / n] * n)
    mean = sum(k * q for k, q in dist.items())
    var = sum(k * k * q for k, q in dist.items()) - mean**2
    assert theory.expected_hardmax_rank(n) == pytest.approx(mean, rel=1e-12)
    assert theory.hardmax_rank_variance(n) == pytest.approx(var, abs=1e-9)  # enumeration sums 6^6 terms


def test_nonuniform_expectation_against_enumeration():
    p = [0.5, 0.2, 0.2, 0.1]
    dist = enumerate_rank_distribution(p)
    assert theory.expected_rank_from_probs(p) == pytest.approx(sum(k * q for k, q in dist.items()), rel=1e-12)
    assert theory.expected_rank_from_probs(p) < theory.expected_hardmax_rank(4)


def test_expected_rank_matches_the_formula_for_n_up_to_2000():
    for n in range(1, 2001):
        exact = n * (1 - (1 - 1 / n) ** n)
        assert abs(theory.expected_hardmax_rank(n) - exact) <= 1e-12 * exact


def test_limits():
    assert theory.expected_hardmax_rank(10**6) / 10**6 == pytest.approx(1 - 1 / math.e, rel=1e-6)
    assert theory.barrier_limit(100) == pytest.approx(63.212055882855766)
    assert theory.hardmax_rank_variance(10**5) / 10**5 == pytest.approx(math.exp(-1) - 2 * math.exp(-2), rel=1e-3)
    ratios = [theory.expected_hardmax_rank(n) / n for n in range(2, 500)]
    assert all(a > b for a, b in zip(ratios, ratios[1:])), "E[rank]/n decreases towards 1 - 1/e"


def test_monte_carlo_agrees_with_the_closed_form():
    rng = np.random.default_rng(0)
    n, trials = 50, 4000
    picks = rng.integers(0, n, size=(trials, n))
    counts = np.array([len(set(row)) for row in picks])
    se = counts.std() / np.sqrt(trials)
    assert abs(counts.mean() - theory.expected_hardmax_rank(n)) < 4 * se
    assert counts.var() == pytest.approx(theory.hardmax_rank_variance(n), rel=0.1)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10", True])
def test_bad_n_is_rejected(bad):
    with pytest.raises(ValueError, match="n must be a positive integer"):
        theory.expected_hardmax_rank(bad)


def test_bad_probability_vector_is_rejected():
    with pytest.raises(ValueError, match="probability vector"):
        theory.expected_rank_from_probs([0.5, 0.6])
