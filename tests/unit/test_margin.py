"""helpers.margin and helpers.code_search against closed forms, quadrature, brute force and exhaustive search."""

import itertools
import math

import numpy as np
import pytest
import sympy as sp
import torch
from scipy import integrate, special

from helpers import code_search, margin
from helpers.errors import ArgumentError


@pytest.mark.parametrize("L", [0.5, 3.0, 9.0, 25.0])
def test_sphere_mgf_matches_closed_forms_and_quadrature(L):
    assert margin.sphere_mgf(L, 1) == pytest.approx(math.cosh(L), rel=1e-12)
    assert margin.sphere_mgf(L, 2) == pytest.approx(special.i0(L), rel=1e-12)
    assert margin.sphere_mgf(L, 3) == pytest.approx(math.sinh(L) / L, rel=1e-12)
    for d in (5, 12):   # the density (1 - t^2)^((d-3)/2), normalised, integrated numerically
        w = lambda t: (1 - t * t) ** ((d - 3) / 2)
        num = integrate.quad(lambda t: math.exp(L * (t - 1)) * w(t), -1, 1, epsabs=0, epsrel=1e-12)[0]
        den = integrate.quad(w, -1, 1, epsabs=0, epsrel=1e-12)[0]
        assert margin.sphere_mgf(L, d) == pytest.approx(math.exp(L) * num / den, rel=1e-8)


def test_random_code_dim_solves_its_equation_and_diverges_at_the_threshold():
    for n, L in [(16, 9.0), (256, 16.0), (4096, 25.0)]:
        d = margin.random_code_dim(n, L, 0.1)
        assert margin.off_target_ratio(n, L, d) <= margin.odds(0.1) * (1 + 1e-9)
        assert margin.off_target_ratio(n, L, d * (1 - 1e-6)) > margin.odds(0.1)
    cut = margin.divergence_n(9.0, 0.1)
    assert margin.random_code_dim(math.floor(cut) - 1, 9.0, 0.1) < math.inf
    assert margin.random_code_dim(math.ceil(cut) + 1, 9.0, 0.1) == math.inf
    assert margin.least_logit_scale(math.ceil(cut) + 1, 0.1) > 9.0
    with pytest.raises(ArgumentError, match="eps"):
        margin.random_code_dim(16, 9.0, 1.5)
    with pytest.raises(ArgumentError, match="L"):
        margin.random_code_dim(16, -1.0)


def test_the_large_d_form_approaches_the_exact_law_when_d_is_much_larger_than_L():
    n = 1024
    for extra, rel in [(0.05, 0.01), (0.5, 0.06)]:
        L = margin.least_logit_scale(n) + extra     # just above the threshold: d >> L
        exact, approx = margin.random_code_dim(n, L), margin.random_code_dim_approx(n, L)
        assert exact > 5 * L and approx == pytest.approx(exact, rel=rel)


def _tail_by_hand(L, K):
    """e^L minus its first K + 1 Taylor terms, at 60 digits (mpmath), so the cancellation costs nothing."""
    import mpmath

    with mpmath.workdps(60):
        x = mpmath.mpf(L)
        return float(mpmath.exp(x) - mpmath.fsum(x ** j / mpmath.factorial(j) for j in range(K + 1)))


def test_rank_lower_bound_recomputed_by_hand():
    for n, L, k in [(256, 4.0, 1), (4096, 9.0, 1), (4096, 9.0, 2)]:
        bound = margin.rank_lower_bound(n, L, 0.1, k)

        def forced(d):          # some K forces C(d + K, K) above what d gives
            for K in range(0, 200):
                slack = _tail_by_hand(L, K) * math.exp(L)
                top = n * 0.9 - k * slack
                if top > 0 and math.comb(d + K, K) < (top / (k * (math.sqrt(n) + slack))) ** 2:
                    return True
            return False
        assert bound >= 1 and forced(bound - 1) and not forced(bound)


def test_sympy_derivations_close():
    mgf = margin.sym_mgf()
    assert mgf["moment_gap"] == 0 and mgf["check_d3"] == 0
    d, L = sp.symbols("d L", positive=True)
    assert sp.simplify(mgf["log_mgf_large_d"].coeff(1 / d) - L ** 2 / 2) == 0
    reg = margin.sym_regimes()
    c, delta = sp.symbols("c delta", positive=True)
    n, eps = sp.symbols("n varepsilon", positive=True)
    for values in ({n: 64, L: 12, eps: sp.Rational(1, 10)}, {n: 4096, L: 20, eps: sp.Rational(1, 20)}):
        assert abs(float(reg["solve_gap"].subs(values))) < 1e-12
    assert reg["divergence_gap"] == 0
    assert sp.simplify(reg["divergence_n"] - (1 + eps * sp.exp(L) / (1 - eps))) == 0
    assert "varepsilon - 1" not in sp.latex(reg["d_approx"]) + sp.latex(reg["divergence_n"]), "1 - ε as the prose writes it"
    assert sp.simplify(reg["log_scale"] - c ** 2 / (2 * (c - 1))) == 0
    assert sp.simplify(reg["margin_lead"] - 1 / (2 * delta)) == 0


def test_target_mass_and_logit_scale_by_brute_force():
    gen = np.random.default_rng(0)
    q, k = gen.standard_normal((5, 3)), gen.standard_normal((7, 3))
    assert margin.logit_scale(q, k) == max(abs(float(a @ b)) for a in q for b in k)
    logits = q @ k.T
    logits[0, 1] = logits[2, 2] = -np.inf                             # masked entries are left out
    finite = [abs(v) for v in logits.flat if np.isfinite(v)]
    assert margin.logit_scale(logits) == max(finite)
    half = max((max(v for v in row if np.isfinite(v)) - min(v for v in row if np.isfinite(v))) / 2 for row in logits)
    assert margin.logit_half_range(logits) == half <= margin.logit_scale(logits)
    shifted = logits + 100.0 * np.arange(5)[:, None]                  # row shifts: same softmax, same half range
    assert margin.logit_half_range(shifted) == pytest.approx(half, rel=1e-12)
    with pytest.raises(ArgumentError, match="logits"):
        margin.logit_half_range(np.full((2, 3), -np.inf))
    a = gen.random((5, 7))
    a /= a.sum(1, keepdims=True)
    t = np.array([0, 3, 6, 1, 2])
    rows = [a[i, t[i]] for i in range(5)]
    assert margin.target_mass(a, t) == pytest.approx((np.mean(rows), min(rows)), rel=1e-12)
    mask = np.zeros((5, 7), bool)
    mask[:, :2] = True
    assert margin.target_mass(a, mask)[0] == pytest.approx(np.mean(a[:, 0] + a[:, 1]), rel=1e-12)
    with pytest.raises(ArgumentError, match="targets"):
        margin.target_mass(a, np.array([0, 9, 0, 0, 0]))


def test_optimiser_reaches_the_two_key_optimum():
    # n = 2, d = 1: q1 = k1 = +sqrt(L), q2 = k2 = -sqrt(L) is optimal, mass 1 / (1 + e^{-2L})
    for L in (1.0, 2.0):
        found = code_search.optimise_code(2, 1, L, steps=300, seed=0)
        assert found.mean_mass == pytest.approx(1 / (1 + math.exp(-2 * L)), abs=1e-4)


def test_optimiser_matches_exhaustive_search_in_one_dimension():
    # in d = 1 every vector of norm sqrt(L) is +-sqrt(L): all 2^6 codes for n = 3 enumerated
    L, n = 2.0, 3
    best = 0.0
    for signs in itertools.product((-1.0, 1.0), repeat=2 * n):
        q, k = np.array(signs[:n]) * math.sqrt(L), np.array(signs[n:]) * math.sqrt(L)
        g = np.outer(q, k)
        a = np.exp(g) / np.exp(g).sum(1, keepdims=True)
        best = max(best, float(np.mean(np.diag(a))))
    found = max(code_search.optimise_code(n, 1, L, steps=300, seed=s).mean_mass for s in range(3))
    assert best - 1e-3 <= found <= best + 1e-6


def test_smallest_dim_is_consistent_with_what_it_tried_and_rejects_bad_input():
    found = code_search.smallest_dim(16, 9.0, 0.1, steps=150, seed=0, d_max=16)
    d = int(found.d_star)
    assert found.tried[d] >= 0.9
    assert d - 1 < margin.rank_lower_bound(16, 9.0) or found.tried.get(d - 1, 0.0) < 0.9
    assert margin.rank_lower_bound(16, 9.0) <= d <= math.ceil(margin.random_code_dim(16, 9.0))
    with pytest.raises(ArgumentError, match="pattern"):
        code_search.optimise_code(16, 2, 9.0, pattern="ring")
    with pytest.raises(ArgumentError, match="k"):
        code_search.optimise_code(16, 2, 9.0, pattern="permutation", k=2)


def _plain_target_loss(q, k, targets):
    """The same loss through autograd's own graph: the independent computation the hand-written one is checked
    against."""
    g = q @ k.T
    if targets.dtype == torch.bool:
        on_target = torch.logsumexp(g.masked_fill(~targets, -math.inf), 1)
    else:
        on_target = g.gather(1, targets[:, None])[:, 0]
    return (torch.logsumexp(g, 1) - on_target).mean()


@pytest.mark.parametrize("kind", ["index", "mask"])
def test_target_loss_gradient_matches_autograd_and_finite_differences(kind):
    gen = torch.Generator().manual_seed(0)
    rows, keys, d = 12, 20, 5
    q = torch.randn(rows, d, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(keys, d, generator=gen, dtype=torch.float64, requires_grad=True)
    if kind == "index":
        targets = torch.randint(0, keys, (rows,), generator=gen)
    else:
        targets = torch.rand(rows, keys, generator=gen) < 0.2
        targets[:, 0] = True                                       # every row has a target
    loss = code_search.target_loss(q, k, targets)
    grads = torch.autograd.grad(loss, (q, k))
    plain = _plain_target_loss(q, k, targets)
    plain_grads = torch.autograd.grad(plain, (q, k))
    # float64: each entry is a sum of at most `keys` products of O(1) terms, so both computations round within a
    # few keys * 2^-53 of the exact value; the bound leaves a factor of 100 over that
    bound = 100 * keys * torch.finfo(torch.float64).eps
    assert abs(loss.item() - plain.item()) <= bound
    for ours, theirs in zip(grads, plain_grads):
        assert float((ours - theirs).abs().max()) <= bound
    assert torch.autograd.gradcheck(lambda a, b: code_search.target_loss(a, b, targets), (q, k))


def test_target_loss_of_one_target_is_the_same_as_a_one_key_mask():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(8, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(8, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    index = torch.randperm(8, generator=gen)
    mask = torch.zeros(8, 8, dtype=torch.bool)
    mask[torch.arange(8), index] = True
    by_index = torch.autograd.grad(code_search.target_loss(q, k, index), (q, k))
    by_mask = torch.autograd.grad(code_search.target_loss(q, k, mask), (q, k))
    for a, b in zip(by_index, by_mask):
        assert float((a - b).abs().max()) <= 100 * 8 * torch.finfo(torch.float64).eps
