"""The rank predictor of chapter 3b (helpers.theory): each piece against an independent computation or a simulation."""

import math

import numpy as np
import pytest
import torch

from helpers import geometry, theory


def simulate_fraction(n, d, keys, heads, seed=0):
    """Mean and standard error of hardmax rank / n over `heads` random heads, plain float64 torch."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(heads, n, d, generator=gen, dtype=torch.float64)
    if keys == "sphere":
        k = k / k.norm(dim=-1, keepdim=True)
    q = torch.randn(heads, n, d, generator=gen, dtype=torch.float64)
    winners = (q @ k.transpose(1, 2)).argmax(-1)  # (heads, n)
    ranks = np.array([len(set(w.tolist())) for w in winners]) / n
    return ranks.mean(), ranks.std(ddof=1) / math.sqrt(heads)


def test_identity_mean_and_variance_for_fixed_keys_against_simulation():
    rng = np.random.default_rng(3)
    n, d = 12, 3
    keys = rng.standard_normal((n, d))
    g = np.bincount((rng.standard_normal((400_000, d)) @ keys.T).argmax(1), minlength=n) / 400_000
    mean = theory.expected_rank_from_probs(g, rows=n)
    var = theory.hardmax_rank_variance_from_probs(g, rows=n)
    reps = 20_000
    winners = (rng.standard_normal((reps, n, d)) @ keys.T).argmax(-1)
    ranks = np.array([len(set(w)) for w in winners])
    assert abs(ranks.mean() - mean) < 4 * math.sqrt(var / reps) + 0.01
    assert ranks.var() == pytest.approx(var, rel=0.05)


def test_sympy_identity_matches_enumeration_and_special_cases():
    import sympy as sp

    ident = theory.sym_conditional_identity(3)
    assert ident["mean_gap"] == 0 and ident["var_gap"] == 0
    assert sp.simplify(ident["uniform_limit"] - (1 - sp.exp(-1))) == 0
    assert ident["off_hull_mean"].free_symbols == {ident["n"], *ident["g"][:2]}


def test_internal_angles_table_matches_recomputation_and_closed_forms():
    recomputed = theory.regular_simplex_internal_angles_mp(7, digits=30)
    assert [float(b) for b in recomputed] == pytest.approx(theory.SIMPLEX_INTERNAL_ANGLES[:7], rel=1e-12)
    assert theory.SIMPLEX_INTERNAL_ANGLES[2] == pytest.approx(1 / 6)
    tetrahedron = (3 * math.acos(1 / 3) - math.pi) / (4 * math.pi)  # solid angle of a regular tetrahedron's vertex
    assert theory.SIMPLEX_INTERNAL_ANGLES[3] == pytest.approx(tetrahedron, rel=1e-12)


def test_external_angles_of_the_regular_simplex():
    for vertices in (3, 10, 200):
        assert math.exp(theory.log_simplex_external_angle(1, vertices)) == pytest.approx(1 / vertices, rel=1e-9)
        assert math.exp(theory.log_simplex_external_angle(vertices - 1, vertices)) == pytest.approx(0.5, rel=1e-9)


@pytest.mark.parametrize("n, d, clouds", [(30, 2, 60), (40, 3, 30), (64, 4, 12)])
def test_vertex_probability_against_exact_hull_counts(n, d, clouds):
    rng = np.random.default_rng(n + d)
    fractions = [geometry.hull_vertex_mask(rng.standard_normal((n, d)), rng=rng).mean() for _ in range(clouds)]
    se = np.std(fractions, ddof=1) / math.sqrt(clouds)
    assert abs(np.mean(fractions) - theory.gaussian_vertex_probability(n, d)) < 4 * se + 0.005


def test_vertex_probability_edge_cases():
    assert theory.gaussian_vertex_probability(50, 1) == pytest.approx(2 / 50)
    assert theory.gaussian_vertex_probability(5, 4) == 1.0
    assert theory.gaussian_vertex_probability(4096, 16) > theory.vertex_probability_lower_bound(4096, 16)


@pytest.mark.parametrize("n, d", [(6, 2), (8, 5), (32, 8), (256, 64)])
def test_collision_probability_against_simulation(n, d):
    """P(two independent queries pick the same key), fresh keys for every pair."""
    gen = torch.Generator().manual_seed(n * d)
    pairs = 100_000 if n <= 8 else 40_000 if n <= 32 else 8_000
    k = torch.randn(pairs, n, d, generator=gen, dtype=torch.float64)
    q = torch.randn(pairs, 2, d, generator=gen, dtype=torch.float64)
    winners = (q @ k.transpose(1, 2)).argmax(-1)  # (pairs, 2)
    same = (winners[:, 0] == winners[:, 1]).double()
    se = same.std().item() / math.sqrt(pairs)
    assert abs(same.mean().item() - theory.gaussian_collision_probability(n, d)) < 4 * se


def test_beta_miss_probability_against_the_product_and_sampling():
    rng = np.random.default_rng(0)
    for n, m, k in [(16, 1 / 16, 2.0), (500, 1e-3, 0.3), (2000, 5e-4, 5e3), (100, 0.01, 2e4)]:
        i = np.arange(n)
        product = np.exp(np.sum(np.log1p(-k / (k / m + i))))
        assert theory.beta_miss_probability(n, m, k)[0] == pytest.approx(product, rel=1e-6, abs=1e-9)
    g = rng.beta(2.0, 2.0 * 15, 400_000)
    assert theory.beta_miss_probability(16, 1 / 16, 2.0)[0] == pytest.approx(np.mean((1 - g) ** 16), abs=3e-3)


def test_mean_field_weights_have_mean_one_and_grow_with_the_norm():
    w = theory.mean_field_win_weights(1024, 32)
    assert w.mean() == pytest.approx(1.0)
    assert np.all(np.diff(w) > 0), "a longer key wins more often"


@pytest.mark.parametrize("n", [5, 20])
def test_circle_closed_form_against_simulation(n):
    mean, se = simulate_fraction(n, 2, "sphere", 20_000, seed=n)
    assert abs(mean - theory.sphere_d2_rank_fraction(n)) < 4 * se


def test_circle_limit_is_five_ninths():
    assert theory.sphere_d2_rank_fraction(100_000) == pytest.approx(5 / 9, abs=1e-4)
    assert float(theory.sym_sphere_circle()["limit"]) == pytest.approx(5 / 9)


@pytest.mark.parametrize("keys", ["gaussian", "sphere"])
def test_d1_prediction_is_exact(keys):
    mean, se = simulate_fraction(8, 1, keys, 20_000, seed=1)
    assert abs(mean - theory.predicted_rank_fraction(8, 1, keys)) < 4 * se


@pytest.mark.parametrize("n, d, keys", [(16, 4, "gaussian"), (64, 16, "gaussian"), (64, 4, "sphere"), (32, 8, "sphere")])
def test_prediction_within_goal_of_simulation(n, d, keys):
    mean, se = simulate_fraction(n, d, keys, 3000, seed=d)
    assert abs(theory.predicted_rank_fraction(n, d, keys) - mean) < 0.02 + 3 * se


def test_prediction_rises_to_the_plateau_and_critical_dh_is_the_first_crossing():
    n = 256
    values = [theory.predicted_rank_fraction(n, d) for d in (2, 8, 32, 128, 4096)]
    assert np.all(np.diff(values) > 0)
    assert values[-1] == pytest.approx(theory.plateau_fraction(n), abs=0.01)
    d_star = theory.critical_head_dim(n, 0.05, guess=40)
    target = 0.95 * theory.plateau_fraction(n)
    assert theory.predicted_rank_fraction(n, d_star) >= target > theory.predicted_rank_fraction(n, d_star - 1)
    assert theory.critical_head_dim(n, 0.05) == d_star == theory.critical_head_dim(n, 0.05, guess=4000)


def test_norm_spread_constant_is_close_to_the_norm_bias_estimate():
    for n in (256, 16384):
        ratio = theory.norm_spread_constant(n) / (theory.gaussian_max_level(n) ** 4 / 2)
        assert 0.95 < ratio < 1.15


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="keys"):
        theory.predicted_rank_fraction(16, 4, "cube")
    with pytest.raises(ValueError, match="eps"):
        theory.critical_head_dim(16, 1.5)
    with pytest.raises(ValueError):
        theory.gaussian_vertex_probability(0, 3)


def test_rank_one_logits_give_a_strictly_totally_positive_softmax_numerator():
    """Chapter 1's witness: with L = a b^T (d_h = 1), sorted distinct a and b, every minor of [exp(a_i b_j)] is positive."""
    import itertools

    import mpmath as mp

    rng = np.random.default_rng(0)
    a, b = np.sort(rng.standard_normal(5)), np.sort(rng.standard_normal(5))
    with mp.workdps(40):
        kernel = mp.matrix([[mp.exp(mp.mpf(x) * mp.mpf(y)) for y in b] for x in a])
        for size in range(1, 6):
            for rows in itertools.combinations(range(5), size):
                for cols in itertools.combinations(range(5), size):
                    assert mp.det(mp.matrix([[kernel[i, j] for j in cols] for i in rows])) > 0
