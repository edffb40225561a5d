"""Closed forms for the hardmax rank under i.i.d. row choices (balls in bins).

n rows (queries) each pick one of n columns (keys) independently from a distribution p.
The hardmax rank is the number of distinct columns picked, so

    E[rank] = sum_j 1 - (1 - p_j)^n   <=   n (1 - (1 - 1/n)^n)   ->   (1 - 1/e) n.
"""

import math

import numpy as np

BARRIER_FRACTION = 1.0 - math.exp(-1.0)


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    return int(n)


def _power_one_minus(k: float, n: int, rows: int) -> float:
    """(1 - k/n)^rows, accurate for large n."""
    if k >= n:
        return 0.0 if rows > 0 else 1.0
    return math.exp(rows * math.log1p(-k / n))


def expected_hardmax_rank(n: int, rows: int | None = None) -> float:
    """Exact E[rank] = n (1 - (1 - 1/n)^rows) for uniform choices; rows defaults to n."""
    n = _check_n(n)
    rows = n if rows is None else _check_n(rows)
    if n == 1:
        return 1.0
    return -n * math.expm1(rows * math.log1p(-1.0 / n))


def barrier_limit(n: int) -> float:
    """The large-n limit (1 - 1/e) n of the expected hardmax rank."""
    return BARRIER_FRACTION * _check_n(n)


def hardmax_rank_variance(n: int, rows: int | None = None) -> float:
    """Exact Var[rank] for uniform choices (the variance of the number of empty bins).

    Var = n (1 - 1/n)^m + n (n - 1) (1 - 2/n)^m - n^2 (1 - 1/n)^(2m),  m = rows.
    """
    n = _check_n(n)
    m = n if rows is None else _check_n(rows)
    a, b = _power_one_minus(1, n, m), _power_one_minus(2, n, m)
    return max(n * a + n * (n - 1) * b - n * n * a * a, 0.0)


def variance_limit(n: int) -> float:
    """Large-n limit of the variance: n (e^-1 - 2 e^-2) ≈ 0.0972 n."""
    return _check_n(n) * (math.exp(-1) - 2 * math.exp(-2))


def expected_rank_from_probs(p, rows: int | None = None) -> float:
    """E[rank] = sum_j 1 - (1 - p_j)^rows for a column distribution p; rows defaults to len(p)."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("p must be a non-empty 1-D probability vector that sums to 1")
    rows = p.size if rows is None else _check_n(rows)
    if np.any(p >= 1.0):
        return 1.0
    return float(np.sum(-np.expm1(rows * np.log1p(-p))))


# ---------------------------------------------------------------------------------------------
# Numeric companions of the chapter-2 and chapter-3 derivations (the tests pin these).
# ---------------------------------------------------------------------------------------------


def hardmax_rank_variance_from_probs(p, rows: int | None = None) -> float:
    """Exact Var[rank] when `rows` i.i.d. choices fall in the columns with probabilities p.

    Var = sum_j a_j (1 - a_j) + sum_{j != k} [(1 - p_j - p_k)^m - a_j a_k],  a_j = (1 - p_j)^m.
    """
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("p must be a non-empty 1-D probability vector that sums to 1")
    m = p.size if rows is None else _check_n(rows)
    a = np.clip(1.0 - p, 0.0, 1.0) ** m
    pair = np.clip(1.0 - p[:, None] - p[None, :], 0.0, 1.0) ** m
    np.fill_diagonal(pair, 0.0)
    outer = np.outer(a, a)
    np.fill_diagonal(outer, 0.0)
    return float(max(np.sum(a * (1 - a)) + np.sum(pair - outer), 0.0))


def mcdiarmid_halfwidth(n: int, delta: float = 0.05, rows: int | None = None) -> float:
    """Half-width t with P(|rank - E rank| >= t) <= delta, from McDiarmid: 2 exp(-2 t^2 / rows) = delta."""
    n = _check_n(n)
    m = n if rows is None else _check_n(rows)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}")
    return math.sqrt(m * math.log(2.0 / delta) / 2.0)


def max_rank_given_dh1() -> int:
    """With d_h = 1 every row's argmax is the largest or the smallest key, so the hardmax rank is at most 2."""
    return 2


def gaussian_max_level(n: int) -> float:
    """t_n = Phi^{-1}(1 - 1/n): the level that the largest of n standard normals typically reaches."""
    from scipy.stats import norm

    n = _check_n(n)
    return float(norm.isf(1.0 / n)) if n > 1 else 0.0


def chi_relative_std(d: int) -> float:
    """Relative spread std(|k|) / E|k| of the norm of a standard Gaussian vector in d dimensions (~ 1/sqrt(2d))."""
    d = _check_n(d)
    mean = math.sqrt(2.0) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    return math.sqrt(max(d - mean * mean, 0.0)) / mean


def _own_direction_win_probability(n: int, d: float) -> float:
    """E[Phi(R)^(n-1)] for R ~ chi_d (d may be real), by the trapezoid rule on a fine grid."""
    from scipy.special import gammaln, log_ndtr

    if n == 1:
        return 1.0
    mean = math.sqrt(max(d - 0.5, 0.25))
    r = np.linspace(max(mean - 14.0, 1e-9), mean + 14.0, 6001)
    log_pdf = (d - 1) * np.log(r) - r * r / 2 - (d / 2 - 1) * math.log(2) - gammaln(d / 2)
    values = np.exp((n - 1) * log_ndtr(r) + log_pdf)
    return float(min(max(np.trapezoid(values, r) if hasattr(np, "trapezoid") else np.trapz(values, r), 0.0), 1.0))


def vertex_probability_lower_bound(n: int, d: int) -> float:
    """P(one of n standard Gaussian points in R^d is a hull vertex) >= E[Phi(R)^(n-1)], R ~ chi_d.

    The bound is the probability that the point wins the argmax in its own direction: the other points'
    projections on that direction are i.i.d. N(0, 1), its own projection is its norm R.
    """
    return _own_direction_win_probability(_check_n(n), _check_n(d))


def norm_bias_fraction(n: int, d: int) -> float:
    """E[hardmax rank] / bound predicted by the key-norm bias alone (the lognormal model of chapter 3).

    Given the keys, key j wins a row with probability proportional to exp(t_n^2 delta_j), where
    delta_j is its relative norm excess, of spread sigma_d = chi_relative_std(d). With s = t_n^2 sigma_d,
    E[rank] / n ~ 1 - E_Z[exp(-exp(s Z - s^2 / 2))], Z ~ N(0, 1); divided by 1 - 1/e.
    """
    s = gaussian_max_level(n) ** 2 * chi_relative_std(d)
    return lognormal_occupancy_fraction(s) / BARRIER_FRACTION


def lognormal_occupancy_fraction(s: float) -> float:
    """1 - E_Z[exp(-exp(s Z - s^2/2))]: occupied fraction of bins whose weights are lognormal(s), mean 1."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    x = np.clip(s * nodes - s * s / 2, -700, 700)
    return float(1.0 - np.sum(weights * np.exp(-np.exp(x))) / math.sqrt(2 * math.pi))


def _solve_increasing(f, target: float, lo: float = 1.0, hi: float = 2.0**24) -> float:
    """The smallest real d in [lo, hi] with f(d) >= target, by bisection on log d (f increasing)."""
    if f(lo) >= target:
        return lo
    if f(hi) < target:
        return math.inf
    for _ in range(48):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return hi


def hull_critical_dh(n: int, eps: float) -> float:
    """Smallest (real) d at which the vertex-probability lower bound reaches 1 - eps (chi_d treated as continuous)."""
    n = _check_n(n)
    return _solve_increasing(lambda d: _own_direction_win_probability(n, d), 1.0 - eps)


def norm_critical_dh(n: int, eps: float) -> float:
    """Smallest (real) d at which the norm-bias model predicts E[rank] >= (1 - eps) x bound (sigma_d^2 = 1/(2d))."""
    t2 = gaussian_max_level(n) ** 2
    f = lambda d: lognormal_occupancy_fraction(t2 / math.sqrt(2 * d)) / BARRIER_FRACTION
    return _solve_increasing(f, 1.0 - eps)


# ---------------------------------------------------------------------------------------------
# Symbolic derivations (sympy). Each returns expressions that the notebooks display step by step.
# ---------------------------------------------------------------------------------------------


def sym_hardmax_gram(choices, n: int | None = None) -> dict:
    """For a concrete choice of argmax columns (0-based), the one-hot matrix H, H^T H and their ranks."""
    import sympy as sp

    n = len(choices) if n is None else n
    H = sp.zeros(len(choices), n)
    for i, c in enumerate(choices):
        H[i, c] = 1
    gram = H.T * H
    return {"H": H, "gram": gram, "rank": H.rank(), "distinct": len(set(choices))}


def sym_expected_rank() -> dict:
    """E[rank] = sum_j P(column j chosen at least once) = sum_j 1 - (1 - p_j)^n, as sympy expressions."""
    import sympy as sp

    n, j, m = sp.symbols("n j m", positive=True, integer=True)
    p = sp.IndexedBase("p")
    indicator = sp.Function("I")(j)
    rank = sp.Sum(indicator, (j, 1, n))
    p_missed = (1 - p[j]) ** m
    expected = sp.Sum(1 - (1 - p[j]) ** n, (j, 1, n))
    return {"n": n, "j": j, "p": p, "rank_as_sum": rank, "p_column_missed": p_missed, "expected": expected}


def sym_expected_rank_enumeration(k: int) -> dict:
    """Exact E[rank] for k rows and k columns by enumerating all k^k choice tuples, with symbolic p_1..p_k.

    Returns the enumerated polynomial, the closed form, and their difference after substituting
    p_k = 1 - (p_1 + ... + p_{k-1}) and expanding (which is 0).
    """
    import itertools

    import sympy as sp

    ps = sp.symbols(f"p1:{k + 1}", nonnegative=True)
    enumerated = sp.Integer(0)
    for choice in itertools.product(range(k), repeat=k):
        weight = sp.Mul(*[ps[c] for c in choice])
        enumerated += weight * len(set(choice))
    closed = sum(1 - (1 - pj) ** k for pj in ps)
    constraint = {ps[-1]: 1 - sum(ps[:-1])}
    difference = sp.expand(enumerated.subs(constraint) - closed.subs(constraint))
    return {"p": ps, "enumerated": enumerated, "closed": closed, "difference": difference}


def sym_concavity(k: int = 3) -> dict:
    """Gradient and Hessian of f(p) = sum_j 1 - (1 - p_j)^n for k columns, and the Lagrange stationary point."""
    import sympy as sp

    n = sp.Symbol("n", positive=True)
    lam = sp.Symbol("lambda")
    ps = sp.symbols(f"p1:{k + 1}", positive=True)
    f = sum(1 - (1 - pj) ** n for pj in ps)
    tidy = lambda e: sp.factor(sp.powsimp(sp.simplify(e), force=True))
    hessian = sp.hessian(f, ps).applyfunc(tidy)
    gradient = sp.Matrix([sp.diff(f, pj) for pj in ps]).applyfunc(tidy)
    lagrangian = f - lam * (sum(ps) - 1)
    stationarity = [sp.Eq(tidy(sp.diff(lagrangian, pj) + lam), lam) for pj in ps]
    # each stationarity equation reads n (1 - p_j)^(n-1) = lambda, the same for every j, so p_j = 1/k
    solved_pj = sp.solve(sp.Eq(n * (1 - ps[0]) ** (n - 1), lam), ps[0])
    return {"n": n, "p": ps, "f": f, "gradient": gradient, "hessian": hessian, "stationarity": stationarity,
            "p_of_lambda": solved_pj, "maximum": sp.simplify(f.subs({pj: sp.Rational(1, k) for pj in ps}))}


def sym_uniform_bound() -> dict:
    """n (1 - (1 - 1/n)^n): its limit, its large-n expansion, and the monotonicity of its fraction."""
    import sympy as sp

    n = sp.Symbol("n", positive=True)
    x = sp.Symbol("x", positive=True)
    bound = n * (1 - (1 - 1 / n) ** n)
    fraction = bound / n
    limit = sp.limit(fraction, n, sp.oo)
    expansion = sp.series(bound.subs(n, 1 / x), x, 0, 2).removeO().subs(x, 1 / n)
    # d/dn log (1 - 1/n)^n = log(1 - 1/n) + 1/(n - 1); with x = 1/n: h(x) = log(1 - x) + x / (1 - x)
    h = sp.log(1 - x) + x / (1 - x)
    h_prime = sp.simplify(sp.diff(h, x))
    return {"n": n, "x": x, "bound": bound, "fraction": fraction, "limit": limit,
            "expansion": sp.expand(expansion), "gap_limit": sp.limit(bound - limit * n, n, sp.oo),
            "h": h, "h_at_0": h.subs(x, 0), "h_prime": h_prime}


def sym_variance() -> dict:
    """Var[rank] for uniform choices via the number of empty columns E = n - rank, and its large-n limit."""
    import sympy as sp

    n = sp.Symbol("n", positive=True)
    x = sp.Symbol("x", positive=True)
    mean_empty = n * (1 - 1 / n) ** n
    second_moment = n * (1 - 1 / n) ** n + n * (n - 1) * (1 - 2 / n) ** n
    variance = second_moment - mean_empty**2
    per_n_limit = sp.limit(variance / n, n, sp.oo)
    return {"n": n, "mean_empty": mean_empty, "second_moment": second_moment, "variance": variance,
            "per_n_limit": sp.simplify(per_n_limit)}


def sym_mcdiarmid() -> dict:
    """Bounded differences: changing one row moves the rank by at most 1, so P(|R - ER| >= t) <= 2 exp(-2t^2/n)."""
    import sympy as sp

    n, t, delta = sp.symbols("n t delta", positive=True)
    tail = 2 * sp.exp(-2 * t**2 / n)
    halfwidth = [s for s in sp.solve(sp.Eq(tail, delta), t) if s.is_positive is not False][0]
    return {"n": n, "t": t, "delta": delta, "tail": tail, "halfwidth": sp.simplify(halfwidth),
            "fraction_halfwidth": sp.simplify(halfwidth / n)}


def sym_d1_bound() -> dict:
    """d_h = 1: score q k_j is monotone in k_j, so the argmax is max_j k_j (q > 0) or min_j k_j (q < 0)."""
    import sympy as sp

    q, ka, kb = sp.symbols("q k_a k_b", real=True)
    difference = sp.factor(q * ka - q * kb)
    return {"q": q, "difference": difference, "max_rank": 2}


def sym_hull_critical() -> dict:
    """Hull mechanism: a key fails its own-direction certificate with probability ~ n P(Z > sqrt d) ~ n e^{-d/2}.

    Setting the non-vertex fraction to eps and solving for d gives d* = 2 log(n / eps).
    """
    import sympy as sp

    n, d, eps = sp.symbols("n d epsilon", positive=True)
    failure = n * sp.exp(-d / 2)
    critical = sp.solve(sp.Eq(failure, eps), d)[0]
    return {"n": n, "d": d, "eps": eps, "failure": failure, "critical": sp.expand_log(critical, force=True),
            "leading": sp.limit(critical / sp.log(n), n, sp.oo)}


def sym_norm_critical() -> dict:
    """Norm-bias mechanism, step by step, ending in d* = (log n)^2 / ((e - 1) eps)."""
    import sympy as sp
    from sympy.stats import E as expect
    from sympy.stats import Normal

    n, d, eps, t, delta, s, X = sp.symbols("n d epsilon t delta s X", positive=True)
    steps = {}
    # 1. relative norm spread of a Gaussian key: |k|^2 has mean d and variance 2d; delta method
    steps["norm_sq_mean"], steps["norm_sq_var"] = d, 2 * d
    sigma_sq = sp.Rational(1, 4) * (2 * d) / d / d  # Var|k| ~ Var|k|^2 / (4 d), relative: / d
    steps["relative_var"] = sp.simplify(sigma_sq)
    # 2. a key with relative norm 1 + delta beats level t with log-odds ~ t^2 delta against a unit key
    log_ratio = -t**2 / (2 * (1 + delta) ** 2) + t**2 / 2
    steps["log_ratio"] = log_ratio
    steps["log_ratio_series"] = sp.series(log_ratio, delta, 0, 2).removeO()
    # 3. win weights w = exp(s Z - s^2/2) (mean 1); occupied fraction 1 - E exp(-w), expand to s^2
    Z = Normal("Z", 0, 1)
    h = sp.exp(-sp.exp(X))
    taylor = sp.series(h, X, 0, 3).removeO()
    expected_empty = sp.expand(expect(taylor.subs(X, s * Z - s**2 / 2)))
    expected_empty = sp.series(expected_empty, s, 0, 3).removeO()
    steps["empty_fraction_series"] = sp.simplify(expected_empty)
    deficit = sp.simplify((expected_empty - sp.exp(-1)) / (1 - sp.exp(-1)))
    steps["relative_deficit"] = deficit
    # 4. s = t^2 sigma with sigma^2 = 1/(2d) and t^2 = 2 log n; solve deficit = eps for d
    s_sq = (2 * sp.log(n)) ** 2 / (2 * d)
    deficit_nd = sp.simplify(deficit.subs(s, sp.sqrt(s_sq)))
    steps["deficit_in_n_d"] = deficit_nd
    critical = sp.solve(sp.Eq(deficit_nd, eps), d)[0]
    steps["critical"] = sp.simplify(critical)
    steps["critical_t"] = sp.simplify(sp.solve(sp.Eq(deficit.subs(s, sp.sqrt(t**4 / (2 * d))), eps), d)[0])
    return {"n": n, "d": d, "eps": eps, "t": t, "delta": delta, "s": s, **steps}
