"""Hull-vertex counting against brute force, and the d_h = 1 bound on random cases."""

import itertools

import numpy as np
import pytest
import torch

from helpers import geometry, rank
from helpers.experiments import ch03_saturation


def brute_force_vertices(points):
    """A point is not a vertex iff it lies in a simplex of d + 1 other points (Caratheodory)."""
    n, d = points.shape
    mask = np.ones(n, dtype=bool)
    for j in range(n):
        others = [i for i in range(n) if i != j]
        for subset in itertools.combinations(others, min(d + 1, len(others))):
            corners = points[list(subset)]
            system = np.vstack([corners.T, np.ones(len(subset))])
            rhs = np.append(points[j], 1.0)
            weights, *_ = np.linalg.lstsq(system, rhs, rcond=None)
            if np.allclose(system @ weights, rhs, atol=1e-10) and np.all(weights >= -1e-12):
                mask[j] = False
                break
    return mask


@pytest.mark.parametrize("n,d,seed", [(6, 1, 0), (7, 2, 1), (8, 2, 2), (9, 3, 3), (8, 3, 4), (9, 2, 5), (8, 4, 6)])
def test_hull_vertices_match_brute_force(n, d, seed):
    points = np.random.default_rng(seed).standard_normal((n, d))
    assert np.array_equal(geometry.hull_vertex_mask(points), brute_force_vertices(points))


def test_hull_vertices_match_qhull_and_plain_lp():
    from scipy.spatial import ConvexHull

    rng = np.random.default_rng(7)
    for n, d in [(60, 2), (80, 3), (50, 5)]:
        points = rng.standard_normal((n, d))
        mask = geometry.hull_vertex_mask(points, rng=rng)
        qhull = np.zeros(n, dtype=bool)
        qhull[ConvexHull(points).vertices] = True
        assert np.array_equal(mask, qhull)
        plain = np.array([not geometry.in_convex_hull(points[j], np.delete(points, j, 0)) for j in range(n)])
        assert np.array_equal(mask, plain)


def test_known_configurations():
    square = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5], [0.2, 0.7]], dtype=float)
    assert geometry.hull_vertex_mask(square).tolist() == [True] * 4 + [False] * 2
    sphere = np.random.default_rng(0).standard_normal((40, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    assert geometry.hull_vertex_mask(sphere).all(), "every point of a sphere is a vertex"
    assert geometry.count_hull_vertices(np.random.default_rng(1).standard_normal((30, 1))) == 2


def test_only_hull_vertices_win_an_argmax():
    rng = np.random.default_rng(8)
    keys = rng.standard_normal((100, 3))
    mask = geometry.hull_vertex_mask(keys)
    winners = geometry.argmax_win_counts(rng.standard_normal((5000, 3)), keys) > 0
    assert not np.any(winners & ~mask)


@pytest.mark.parametrize("seed", range(5))
def test_d1_hardmax_rank_is_at_most_two(seed):
    gen = torch.Generator().manual_seed(seed)
    n = int(torch.randint(3, 300, (1,), generator=gen))
    q = torch.randn(20, n, 1, generator=gen, dtype=torch.float64)
    k = torch.randn(20, n, 1, generator=gen, dtype=torch.float64)
    ranks = rank.hardmax_rank(q @ k.transpose(-1, -2))
    assert int(ranks.max()) <= 2
    rows = ch03_saturation.hardmax_point(n=n, d_head=1, keys="gaussian", trials=2, seed=seed)
    assert max(r["rank"] for r in rows) <= 2


def test_key_norm_stats_and_bad_input():
    stats = geometry.key_norm_stats(np.ones((5, 4)))
    assert stats["norm_mean"] == pytest.approx(2.0) and stats["norm_rel_std"] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        geometry.hull_vertex_mask(np.array([[np.nan, 1.0]]))


def test_cheap_gaussian_input_sampling_matches_the_explicit_construction():
    from helpers import attention
    from helpers.experiments import ch02_low_rank_barrier

    gen = torch.Generator().manual_seed(11)
    n, d_head, d_model, count = 16, 4, 24, 600
    cheap = rank.hardmax_rank(ch02_low_rank_barrier.gaussian_input_logits(n, d_head, d_model, count, gen)).double()
    explicit = rank.hardmax_rank(attention.random_logits(n, d_head, d_model=d_model, inputs="gaussian", weight_std=1.0,
                                                         batch=count, generator=gen)).double()
    se = float(torch.sqrt(cheap.var() / count + explicit.var() / count))
    assert abs(float(cheap.mean() - explicit.mean())) < 4 * se
    assert abs(float(cheap.std() - explicit.std())) < 0.25 * float(explicit.std())
