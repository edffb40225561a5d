"""Rank measures against independent computations (numpy SVD, constructed ranks, loops)."""

import numpy as np
import pytest
import torch

from helpers import rank


def matrix_of_rank(k: int, n: int, rng) -> np.ndarray:
    return rng.standard_normal((n, k)) @ rng.standard_normal((k, n))


@pytest.mark.parametrize("k", [1, 3, 7, 20])
def test_numerical_rank_of_constructed_matrix(k):
    rng = np.random.default_rng(k)
    a = matrix_of_rank(k, 20, rng)
    assert int(rank.numerical_rank(a, rtol=1e-10)) == k
    assert int(rank.numerical_rank(a, rtol=1e-10)) == np.linalg.matrix_rank(a, tol=1e-10 * np.linalg.svd(a, compute_uv=False)[0])


def test_numerical_rank_matches_numpy_svd_thresholds():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((12, 12)) @ np.diag(np.logspace(0, -11, 12)) @ rng.standard_normal((12, 12))
    sigma = np.linalg.svd(a, compute_uv=False)
    for rtol in [1e-1, 1e-3, 1e-6, 1e-9]:
        assert int(rank.numerical_rank(a, rtol=rtol)) == int((sigma > rtol * sigma[0]).sum())
    assert int(rank.numerical_rank(a, rtol=None, atol=1e-4)) == int((sigma > 1e-4).sum())


def test_numerical_rank_needs_a_tolerance():
    with pytest.raises(ValueError, match="tolerance"):
        rank.numerical_rank(np.eye(3), rtol=None, atol=None)
    with pytest.raises(ValueError, match="rtol"):
        rank.numerical_rank(np.eye(3), rtol=-1.0)


def test_batching_matches_a_loop_and_accepts_torch_and_numpy():
    rng = np.random.default_rng(1)
    batch = rng.standard_normal((2, 3, 9, 9))
    batch[0, 1] = matrix_of_rank(2, 9, rng)
    for fn in (rank.numerical_rank, rank.hardmax_rank, rank.effective_rank, rank.stable_rank):
        batched = fn(batch)
        assert batched.shape == (2, 3)
        looped = torch.stack([torch.stack([fn(m) for m in row]) for row in batch])
        assert torch.allclose(batched.double(), looped.double())
        assert torch.allclose(fn(torch.as_tensor(batch)).double(), batched.double())


@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_hardmax_rank_counts_distinct_argmax_columns(k):
    rng = np.random.default_rng(k)
    n = 10
    columns = rng.choice(n, size=k, replace=False)
    choice = np.concatenate([columns, rng.choice(columns, size=n - k)])
    logits = rng.standard_normal((n, n))
    logits[np.arange(n), choice] = 10.0
    assert int(rank.hardmax_rank(logits)) == k
    one_hot = np.zeros((n, n))
    one_hot[np.arange(n), choice] = 1
    assert np.linalg.matrix_rank(one_hot) == k


def test_hardmax_ties_go_to_the_lowest_index():
    ties = np.ones((4, 4))
    assert int(rank.hardmax_rank(ties)) == 1


def test_effective_and_stable_rank_closed_forms():
    d = np.diag([4.0, 2.0, 2.0, 0.0])
    p = np.array([0.5, 0.25, 0.25])
    assert float(rank.effective_rank(d)) == pytest.approx(np.exp(-(p * np.log(p)).sum()))
    assert float(rank.stable_rank(d)) == pytest.approx((16 + 4 + 4) / 16)
    assert float(rank.effective_rank(np.eye(5))) == pytest.approx(5.0)
    assert float(rank.effective_rank(np.zeros((3, 3)))) == 0.0


def test_all_ranks_agrees_with_individual_measures():
    rng = np.random.default_rng(3)
    a = torch.softmax(torch.as_tensor(rng.standard_normal((4, 16, 16))), -1)
    together = rank.all_ranks(a, rtol=1e-3)
    assert torch.equal(together["numerical"].long(), rank.numerical_rank(a, rtol=1e-3))
    assert torch.equal(together["hardmax"].long(), rank.hardmax_rank(a))
    assert torch.allclose(together["effective"], rank.effective_rank(a))
    assert torch.allclose(together["stable"], rank.stable_rank(a))


def test_singular_values_are_float64_even_for_float32_input():
    a = torch.randn(5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    assert rank.singular_values(a).dtype == torch.float64
