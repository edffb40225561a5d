"""Rank measures against independent computations (numpy SVD, constructed ranks, loops)."""

import numpy as np
import pytest
import torch

from helpers import rank
from helpers.errors import ArgumentError


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


def numpy_measures(a: np.ndarray, rtols) -> dict:
    """Independent reference for every measure of one matrix: numpy SVD, numpy argmax, the formulas written out."""
    sigma = np.linalg.svd(a, compute_uv=False)
    p = sigma / sigma.sum()
    out = {f"numerical@{t:.0e}": float((sigma > t * sigma[0]).sum()) for t in rtols}
    out["hardmax"] = float(len(set(a.argmax(-1).tolist())))
    out["effective"] = float(np.exp(-(p[p > 0] * np.log(p[p > 0])).sum()))
    out["stable"] = float((sigma**2).sum() / sigma[0] ** 2)
    return out


@pytest.mark.parametrize("wanted", [rank.MEASURES, ("hardmax",), ("numerical",), ("stable", "numerical"),
                                    ("numerical", "hardmax")])
@pytest.mark.parametrize("rtols", [(1e-3,), (1e-2, 1e-8)])
def test_measures_match_numpy_for_every_subset_and_tolerance(wanted, rtols):
    rng = np.random.default_rng(3)
    a = torch.softmax(torch.as_tensor(rng.standard_normal((4, 16, 16)) * 3), -1).numpy()
    values = rank.measures(a, wanted, rtols)
    assert list(values) == list(rank.labels(wanted, rtols))
    for i in range(a.shape[0]):
        expected = numpy_measures(a[i], rtols)
        for key, value in values.items():
            assert value.dtype == torch.float64 and float(value[i]) == pytest.approx(expected[key]), key


def test_labels_have_one_format():
    assert rank.label("numerical", 1e-3) == "numerical@1e-03" and rank.label("numerical", 0.001) == "numerical@1e-03"
    assert rank.labels(("hardmax", "numerical"), (1e-2, 1e-8)) == ("hardmax", "numerical@1e-02", "numerical@1e-08")
    assert rank.title("numerical@1e-03") == "numerical rank, rtol 1e-03" and rank.title("stable") == "stable rank"
    with pytest.raises(ValueError, match="measure"):
        rank.label("nuclear")
    with pytest.raises(ValueError, match="rtol"):
        rank.label("numerical")
    with pytest.raises(ValueError, match="rtols"):
        rank.measures(np.eye(3), ("numerical",), (0.0,))


def test_hardmax_matrix_measures_equal_an_svd_of_the_one_hot_matrix():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((6, 12, 12)) * np.linspace(0.1, 3, 12)    # unequal key scales: repeated winners
    one_hot = np.zeros_like(logits)
    np.put_along_axis(one_hot, logits.argmax(-1)[..., None], 1.0, axis=-1)
    fast = rank.hardmax_matrix_measures(logits, rank.MEASURES, (1e-2, 1e-3))
    slow = rank.measures(one_hot, rank.MEASURES, (1e-2, 1e-3))
    for key in slow:
        assert torch.allclose(fast[key], slow[key]), key
    assert torch.equal(rank.argmax_counts(logits).sum(-1), torch.full((6,), 12))


def test_singular_values_are_float64_even_for_float32_input():
    a = torch.randn(5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    assert rank.singular_values(a).dtype == torch.float64


def numpy_svd_count(a: np.ndarray, rtol=None, atol=None) -> np.ndarray:
    """Independent reference: numpy's SVD, threshold max(rtol * sigma_1, atol), looped over the batch."""
    flat = a.reshape(-1, *a.shape[-2:])
    counts = []
    for m in flat:
        sigma = np.linalg.svd(m, compute_uv=False)
        threshold = max(rtol * sigma[0] if rtol is not None else 0.0, atol if atol is not None else 0.0)
        counts.append(int((sigma > threshold).sum()))
    return np.array(counts).reshape(a.shape[:-2])


def varied_matrices(rng) -> list[np.ndarray]:
    """Batches of the kinds the book measures: attention at several temperatures, low rank, rectangular."""
    batches = []
    for n, scale in [(16, 0.1), (32, 1.0), (48, 4.0), (64, 16.0)]:
        logits = scale * rng.standard_normal((80, n, n))
        batches.append(np.exp(logits - logits.max(-1, keepdims=True)) / np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
    batches.append(np.stack([matrix_of_rank(k, 24, rng) for k in rng.integers(1, 24, size=70)]))
    batches.append(rng.standard_normal((70, 12, 30)) @ np.diag(np.logspace(0, -14, 30)))
    batches.append(rng.standard_normal((70, 30, 12)) * np.logspace(0, -9, 12))
    return batches


@pytest.mark.parametrize("rtol, atol", [(1e-1, None), (1e-3, None), (1e-6, None), (1e-12, None), (None, 1e-4), (1e-3, 1e-2)])
def test_numerical_rank_equals_the_float64_svd_count_on_varied_batches(rtol, atol):
    rng = np.random.default_rng(11)
    for batch in varied_matrices(rng):
        ours = rank.numerical_rank(batch, rtol=rtol, atol=atol).numpy()
        assert np.array_equal(ours, numpy_svd_count(batch, rtol, atol))


def test_gram_rank_hands_matrices_near_the_threshold_to_the_svd():
    near = np.diag([1.0, 1e-3 * (1 + 1e-13), 0.5])
    far = np.diag([1.0, 1e-2, 0.5])
    tiny = np.diag([1.0, 1e-11, 0.5])
    ranks, undecided = rank._gram_rank(torch.as_tensor(np.stack([near, far, tiny])), rtol=1e-3, atol=None)
    assert undecided.tolist() == [True, False, False]
    assert ranks[1:].tolist() == [3, 2]
    _, undecided = rank._gram_rank(torch.as_tensor(tiny)[None], rtol=1e-12, atol=None)
    assert undecided.tolist() == [True]  # 1e-11 is below the Gram matrix's resolution (~1e-7 sigma_1)
    assert int(rank.numerical_rank(tiny, rtol=1e-12)) == 3
    assert int(rank.numerical_rank(near, rtol=1e-3)) == 3


def test_numerical_rank_of_edge_cases():
    assert int(rank.numerical_rank(np.zeros((5, 5)))) == 0
    assert int(rank.numerical_rank(np.eye(7))) == 7
    assert rank.numerical_rank(np.zeros((0, 3, 3))).shape == (0,)
    assert int(rank.numerical_rank(np.zeros((4, 0)))) == 0
    huge = np.diag([1e200, 1e199, 1e190])  # the Gram matrix overflows: the SVD decides
    assert int(rank.numerical_rank(huge, rtol=1e-3)) == 2
    assert int(rank.numerical_rank(huge, rtol=1e-11)) == 3


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_numerical_rank_rejects_non_finite_entries(bad):
    batch = np.random.default_rng(0).random((100, 6, 9))
    batch[37, 2, 4] = bad
    for a in (batch, batch.transpose(0, 2, 1), batch[37]):
        with pytest.raises(ValueError, match="NaN or infinite"):
            rank.numerical_rank(a)


def test_threaded_batches_match_one_at_a_time_and_keep_the_thread_setting():
    probs = torch.softmax(torch.randn(200, 20, 20, generator=torch.Generator().manual_seed(4), dtype=torch.float64), -1)
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        batched_sigma, batched_rank = rank.singular_values(probs), rank.numerical_rank(probs)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(saved)
    assert torch.equal(batched_sigma, torch.stack([torch.linalg.svdvals(m) for m in probs]))
    assert torch.equal(batched_rank, torch.stack([rank.numerical_rank(m) for m in probs]))



@pytest.mark.parametrize("rtol", [1e-3, 1e-6])
def test_numerical_rank_is_the_svd_count_at_every_scale_from_1e_minus_200_to_1e200(rtol):
    """Entries ~1e-156 make A A^T subnormal (the Gram route lost eigenvalues there); ~1e155 overflow it."""
    rng = np.random.default_rng(8)
    base = rng.standard_normal((12, 10, 14)) @ np.diag(np.logspace(0, -9, 14))   # graded spectra
    for exponent in range(-200, 201, 2):
        a = base * 10.0**exponent
        assert rank.numerical_rank(a, rtol).tolist() == numpy_svd_count(a, rtol=rtol).tolist(), exponent


def test_energy_rank_against_a_cumulative_sum_by_hand():
    sigma = torch.tensor([[3.0, 2.0, 1.0, 0.5], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    # by hand: squares 9, 4, 1, 0.25 (total 14.25): 9 holds 63 %, 13 holds 91 % -> 2 at share 0.9, 1 at 0.6
    assert rank.energy_rank_from_sigma(sigma, 0.9).tolist() == [2, 4]   # four equal values: 90 % needs all four
    assert rank.energy_rank_from_sigma(sigma, 0.6).tolist() == [1, 3]
    with pytest.raises(ArgumentError, match="share"):
        rank.energy_rank_from_sigma(sigma, 0.0)
