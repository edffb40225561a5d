"""The sympy derivations of chapters 2 and 3 against independent numeric computations."""

import itertools
import math

import numpy as np
import pytest
import sympy as sp

from helpers import theory


def exact_rank_moments(p, rows):
    """Mean and variance of the number of distinct columns, by enumerating every choice tuple."""
    k = len(p)
    mean = second = 0.0
    for picks in itertools.product(range(k), repeat=rows):
        prob = math.prod(p[j] for j in picks)
        r = len(set(picks))
        mean += prob * r
        second += prob * r * r
    return mean, second - mean * mean


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_symbolic_variance_matches_exact_enumeration(n):
    var = theory.sym_variance()
    symbolic = float(var["variance"].subs(var["n"], n))
    _, enumerated = exact_rank_moments([1.0 / n] * n, n)
    assert symbolic == pytest.approx(enumerated, abs=1e-9)
    assert theory.hardmax_rank_variance(n) == pytest.approx(enumerated, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_general_p_variance_matches_enumeration(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    p = rng.dirichlet(np.ones(k))
    mean, variance = exact_rank_moments(list(p), k)
    assert theory.expected_rank_from_probs(p) == pytest.approx(mean, abs=1e-12)
    assert theory.hardmax_rank_variance_from_probs(p) == pytest.approx(variance, abs=1e-12)


def test_variance_limit_is_e_minus_2_over_e_squared():
    var = theory.sym_variance()
    assert float(var["per_n_limit"]) == pytest.approx(math.exp(-1) - 2 * math.exp(-2), rel=1e-12)
    assert theory.hardmax_rank_variance(100000) / 100000 == pytest.approx(float(var["per_n_limit"]), rel=1e-3)


def test_symbolic_expected_rank_equals_enumeration():
    for k in (2, 3):
        assert theory.sym_expected_rank_enumeration(k)["difference"] == 0
    er = theory.sym_expected_rank()
    n, p, j = er["n"], er["p"], er["j"]
    probs = [0.5, 0.3, 0.2]
    value = er["expected"].subs(n, 3).doit().subs({p[i + 1]: probs[i] for i in range(3)})
    assert float(value) == pytest.approx(exact_rank_moments(probs, 3)[0], abs=1e-12)


def test_hessian_is_negative_on_the_simplex_and_uniform_is_the_maximum():
    conc = theory.sym_concavity(3)
    n, ps = conc["n"], conc["p"]
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.dirichlet(np.ones(3))
        for nn in (2, 5, 9):
            h = np.array(conc["hessian"].subs({n: nn, **dict(zip(ps, p))}).evalf(), dtype=float)
            assert np.allclose(h, np.diag(np.diag(h)))
            assert np.all(np.diag(h) <= 0)
            f = float(conc["f"].subs({n: nn, **dict(zip(ps, p))}))
            assert f <= float(conc["maximum"].subs(n, nn)) + 1e-12


def test_uniform_bound_limit_expansion_and_monotone_fraction():
    ub = theory.sym_uniform_bound()
    n = ub["n"]
    assert sp.simplify(ub["limit"] - (1 - sp.exp(-1))) == 0
    assert float(ub["gap_limit"]) == pytest.approx(1 / (2 * math.e))
    for nn in (10, 100, 1000):
        exact = theory.expected_hardmax_rank(nn)
        assert float(ub["bound"].subs(n, nn)) == pytest.approx(exact, rel=1e-12)
        assert float(ub["expansion"].subs(n, nn)) == pytest.approx(exact, abs=5.0 / nn**2)
    fractions = [theory.expected_hardmax_rank(nn) / nn for nn in range(2, 400)]
    assert all(a > b for a, b in zip(fractions, fractions[1:])), "B(n)/n decreases"
    assert min(fractions) > 1 - 1 / math.e
    x = ub["x"]
    for xx in (0.01, 0.3, 0.9):
        assert float(ub["h_prime"].subs(x, xx)) > 0


def test_mcdiarmid_halfwidth_matches_symbolic_and_covers_simulation():
    mc = theory.sym_mcdiarmid()
    for nn, delta in ((64, 0.05), (1000, 0.01)):
        sym = float(mc["halfwidth"].subs({mc["n"]: nn, mc["delta"]: delta}))
        assert sym == pytest.approx(theory.mcdiarmid_halfwidth(nn, delta))
    rng = np.random.default_rng(1)
    n = 200
    ranks = np.array([len(np.unique(rng.integers(0, n, n))) for _ in range(2000)])
    inside = np.mean(np.abs(ranks - theory.expected_hardmax_rank(n)) <= theory.mcdiarmid_halfwidth(n, 0.05))
    assert inside >= 0.95


def test_critical_dh_formulas():
    hc = theory.sym_hull_critical()
    value = float(hc["critical"].subs({hc["n"]: 1000, hc["eps"]: 0.01}))
    assert value == pytest.approx(2 * math.log(1000 / 0.01))
    assert hc["leading"] == 2
    nc = theory.sym_norm_critical()
    assert sp.simplify(nc["relative_var"] - 1 / (2 * nc["d"])) == 0
    assert sp.simplify(nc["critical"] - sp.log(nc["n"]) ** 2 / (nc["eps"] * (sp.E - 1))) == 0
    # the s^2 term of the lognormal occupancy matches the numeric quadrature for small s
    s = 0.05
    deficit = (theory.BARRIER_FRACTION - theory.lognormal_occupancy_fraction(s)) / theory.BARRIER_FRACTION
    assert deficit == pytest.approx(float(nc["relative_deficit"].subs(nc["s"], s)), rel=0.05)


def test_lognormal_model_matches_a_direct_simulation():
    rng = np.random.default_rng(2)
    s, n = 1.0, 2000
    fractions = []
    for _ in range(50):
        w = np.exp(s * rng.standard_normal(n))
        p = w / w.sum()
        fractions.append(theory.expected_rank_from_probs(p) / n)
    assert np.mean(fractions) == pytest.approx(theory.lognormal_occupancy_fraction(s), abs=5e-3)


def test_numeric_critical_dh_is_increasing_in_n_and_in_precision():
    for eps in (0.1, 0.02):
        norm = [theory.norm_critical_dh(n, eps) for n in (16, 64, 256, 1024)]
        hull = [theory.hull_critical_dh(n, eps) for n in (16, 64, 256, 1024)]
        assert all(a < b for a, b in zip(norm, norm[1:]))
        assert all(a < b for a, b in zip(hull, hull[1:]))
    assert theory.norm_critical_dh(256, 0.02) > theory.norm_critical_dh(256, 0.1)


def test_vertex_lower_bound_exact_for_d1_and_against_simulation():
    assert theory.vertex_probability_lower_bound(16, 1) == pytest.approx(2 / 16, rel=1e-4)
    rng = np.random.default_rng(3)
    n, d = 50, 4
    wins = 0
    total = 0
    for _ in range(200):
        k = rng.standard_normal((n, d))
        scores = k @ k.T
        wins += int(np.sum(scores.argmax(axis=1) == np.arange(n)))
        total += n
    assert wins / total == pytest.approx(theory.vertex_probability_lower_bound(n, d), abs=0.03)


def test_chi_relative_std_against_simulation():
    rng = np.random.default_rng(4)
    for d in (1, 4, 32):
        norms = np.linalg.norm(rng.standard_normal((200000, d)), axis=1)
        assert theory.chi_relative_std(d) == pytest.approx(norms.std() / norms.mean(), rel=0.02)


def test_d1_bound_and_gram_example():
    d1 = theory.sym_d1_bound()
    q = d1["q"]
    assert sp.factor(d1["difference"]).has(q)
    example = theory.sym_hardmax_gram([0, 0, 2, 3])
    assert example["rank"] == example["distinct"] == 3
    assert example["gram"] == sp.diag(2, 0, 1, 1)
