"""Closed forms for the hardmax rank under i.i.d. row choices (balls in bins).

n rows (queries) each pick one of n columns (keys) independently from a distribution p.
The hardmax rank is the number of distinct columns picked, so

    E[rank] = sum_j 1 - (1 - p_j)^n   <=   n (1 - (1 - 1/n)^n)   ->   (1 - 1/e) n.

Sections: the balls-in-bins closed forms (chapter 2); numeric companions of the chapter-3 mechanisms; the
predictor of E[hardmax rank] / n at any (n, d_h) and the critical d_h (chapter 3b); sympy derivations.
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

    n, d, eps = sp.symbols("n d varepsilon", positive=True)
    failure = n * sp.exp(-d / 2)
    critical = sp.solve(sp.Eq(failure, eps), d)[0]
    return {"n": n, "d": d, "eps": eps, "failure": failure, "critical": sp.expand_log(critical, force=True),
            "leading": sp.limit(critical / sp.log(n), n, sp.oo)}


def sym_norm_critical() -> dict:
    """Norm-bias mechanism, step by step, ending in d* = (log n)^2 / ((e - 1) eps)."""
    import sympy as sp
    from sympy.stats import E as expect
    from sympy.stats import Normal

    n, d, eps, t, delta, s, X = sp.symbols("n d varepsilon t delta s X", positive=True)
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


# ---------------------------------------------------------------------------------------------
# Chapter 3b: predicting E[hardmax rank] / n at any (n, d_h), from E[rank | K] = sum_j 1 - (1 - g_j)^n.
#
# g_j is the probability that a Gaussian query picks key j. Writing W = n g_J for a key J drawn
# uniformly, E[rank] / n = 1 - E[(1 - W / n)^n]. The predictor needs the law of W; it uses
#   * pi(n, d) = P(W > 0), exact: the vertex probability of a Gaussian polytope (Gaussian keys),
#     1 for keys on the sphere (every point of a sphere is a vertex of the hull);
#   * E[W^2] = n * E[sum_j g_j^2] = n * P(two independent queries pick the same key), exact by
#     quadrature (Gaussian keys);
#   * a closure: given W > 0, g is Beta-distributed with those two moments (the Gamma law of
#     Poisson-Voronoi cells, exact for d_h = 2 sphere keys at large n), and, once nearly every key
#     is a vertex, the spread due to key norms is the mean-field win probability f(|k|).
# ---------------------------------------------------------------------------------------------

# Internal angle beta_j at a vertex of the regular j-simplex (fraction of the full solid angle), j = 0..40.
# Computed by `regular_simplex_internal_angles_mp` (mpmath, 50 digits) and pinned by a unit test that
# recomputes the first ones; they are mathematical constants, stored because the recursion takes minutes.
SIMPLEX_INTERNAL_ANGLES: tuple[float, ...] = (
    1.0, 0.5, 0.16666666666666667, 0.043869914022955453,
    0.0097846883724168781, 0.0019220437369843493, 0.00034069513969111475, 5.5409353698599424e-5,
    8.3688410966660502e-6, 1.1846594030482453e-6, 1.5830186649790236e-7, 2.008396792458658e-8,
    2.4307557157124749e-9, 2.8176006883581606e-10, 3.1384810639984592e-11, 3.3690707260928364e-12,
    3.4940877850358462e-13, 3.5086321792224701e-14, 3.4178888878991578e-15, 3.2354653634041317e-16,
    2.9808388313915025e-17, 2.6764593962268388e-18, 2.3450037815481705e-19, 2.0071417954500463e-20,
    1.6800109566112475e-21, 1.3764361581987798e-22, 1.1048090096793055e-23, 8.694678904000764e-25,
    6.7139350833413296e-26, 5.0904575946998779e-27, 3.7920204208701155e-28, 2.7770137426985189e-29,
    2.0004209159697406e-30, 1.4181688004031029e-31, 9.8994470951677155e-33, 6.8072398176900406e-34,
    4.6131472565560565e-35, 3.0822523560665044e-36, 2.0311986208150754e-37, 1.3207167416931082e-38,
    8.476018288611782e-40,
)


def regular_simplex_internal_angles_mp(count: int, digits: int = 50) -> list:
    """beta_0 .. beta_{count-1} (mpmath numbers) from the angle-sum relation of the regular simplex.

    For a vertex v of the regular j-simplex T_j, sum over faces F of T_j containing v of
    (-1)^dim F beta(v, F) gamma(F, T_j) = 0 (j >= 1), which with the symmetric face counts reads
    sum_{k=0}^{j} (-1)^k C(j, k) beta_k gamma(k + 1, j + 1) = 0, triangular in beta_j.
    The alternating sum cancels badly, hence the extended precision.
    """
    import mpmath as mp

    with mp.workdps(digits):
        def gamma_mp(k, vertices):
            f = lambda x: mp.exp(-k * x * x + (vertices - k) * mp.log(mp.ncdf(mp.sqrt(2) * x)))
            return mp.sqrt(mp.mpf(k) / mp.pi) * mp.quad(f, [-mp.inf, 0, mp.inf])

        betas = [mp.mpf(1)]
        for j in range(1, count):
            total = sum((-1) ** k * mp.binomial(j, k) * betas[k] * gamma_mp(k + 1, j + 1) for k in range(j))
            betas.append(-total * (-1) ** j)
        return betas


def log_simplex_external_angle(k: int, vertices: int) -> float:
    """log gamma(k, N): external angle of the regular simplex with N vertices at a face with k vertices.

    gamma = sqrt(k / pi) int exp(-k x^2) Phi(sqrt 2 x)^(N - k) dx (Hadwiger, Ruben), in logs for large N.
    """
    from scipy.special import log_ndtr

    x = np.linspace(-12.0, 12.0, 12001)
    log_f = -k * x * x + (vertices - k) * log_ndtr(math.sqrt(2.0) * x)
    top = log_f.max()
    return 0.5 * math.log(k / math.pi) + top + math.log(np.trapezoid(np.exp(log_f - top), x))


def gaussian_vertex_probability(n: int, d: int) -> float:
    """P(one of n i.i.d. standard Gaussian points in R^d is a vertex of their convex hull), exact.

    A Gaussian polytope has the f-vector law of a random d-projection of the regular simplex with n
    vertices (Baryshnikov and Vitale 1994), whose expected vertex count is (Affentranger and Schneider 1992)
    E f_0 = 2 n sum_{s >= 0} C(n - 1, j) beta_j gamma(j + 1, n),  j = d - 1 - 2s >= 0.
    """
    from scipy.special import gammaln

    n, d = _check_n(n), _check_n(d)
    if n <= d + 1:
        return 1.0
    if d > len(SIMPLEX_INTERNAL_ANGLES):  # beyond the table every key is a vertex to within 1e-4 for n <= 1e6
        return 1.0
    total = 0.0
    for j in range(d - 1, -1, -2):
        log_term = (gammaln(n) - gammaln(j + 1) - gammaln(n - j) + math.log(SIMPLEX_INTERNAL_ANGLES[j])
                    + log_simplex_external_angle(j + 1, n))
        total += math.exp(log_term)
    return min(2.0 * total, 1.0)


def _bivariate_upper(h, k, rho: float):
    """P(X > h, Y > k) for standard normals with correlation rho (|rho| < 1), by Owen's T."""
    from scipy.special import ndtr, owens_t

    s = math.sqrt(1.0 - rho * rho)
    lo_h, lo_k = -h, -k  # the upper orthant at (h, k) is the lower orthant at (-h, -k)
    with np.errstate(divide="ignore", invalid="ignore"):
        a_h = np.where(lo_h == 0, np.inf, (lo_k - rho * lo_h) / (lo_h * s))
        a_k = np.where(lo_k == 0, np.inf, (lo_h - rho * lo_k) / (lo_k * s))
    shift = np.where((lo_h * lo_k > 0) | ((lo_h * lo_k == 0) & (lo_h + lo_k >= 0)), 0.0, 0.5)
    return 0.5 * (ndtr(lo_h) + ndtr(lo_k)) - owens_t(lo_h, a_h) - owens_t(lo_k, a_k) - shift


def _cosine_nodes(d: int, nodes: int):
    """Quadrature (cos, weight) for the cosine between a uniform direction in R^d and a fixed one.

    Its density is proportional to (1 - c^2)^((d - 3) / 2) (Gauss-Jacobi); above d = 2000 it is
    N(0, 1/d) to well within the quadrature error (Gauss-Hermite), where Jacobi nodes lose accuracy.
    """
    from scipy.special import roots_jacobi

    if d >= 2000:
        z, w = np.polynomial.hermite_e.hermegauss(nodes)
        return np.clip(z / math.sqrt(d), -1 + 1e-12, 1 - 1e-12), w / w.sum()
    a = (d - 3) / 2
    cos, w = roots_jacobi(nodes, a, a)
    return cos, w / w.sum()


def gaussian_collision_probability(n: int, d: int, grid: int = 80, nodes: int = 12) -> float:
    """E[sum_j g_j^2] for n Gaussian keys in R^d: P(two independent Gaussian queries pick the same key).

    For queries at correlation rho the n keys' score pairs are i.i.d. bivariate normal, so
    P(same | rho) = n E[F_rho(X, Y)^(n - 1)], (X, Y) one key's pair and F_rho its joint CDF;
    then average over rho. Exact up to quadrature (grid x grid points, `nodes` values of rho).
    """
    from scipy.special import ndtr

    n, d = _check_n(n), _check_n(d)
    if d == 1:
        return 0.5  # the two queries pick the same of the two extreme keys iff their signs agree
    x = np.linspace(-8.5, 9.5, grid)
    y = np.linspace(-8.5, 8.5, grid)
    wx = (x[1] - x[0]) * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    wy = (y[1] - y[0]) * np.exp(-y * y / 2) / math.sqrt(2 * math.pi)
    total = 0.0
    for rho, weight in zip(*_cosine_nodes(d, nodes)):  # the two queries' cosine
        s = math.sqrt(max(1.0 - rho * rho, 1e-300))
        a, b = x[:, None], rho * x[:, None] + s * y[None, :]  # (grid, grid): one key's two scores
        missed = np.clip(ndtr(-a) + ndtr(-b) - _bivariate_upper(a, b, rho), 0.0, 1.0 - 1e-16)
        total += weight * n * np.sum(wx[:, None] * wy[None, :] * np.exp((n - 1) * np.log1p(-missed)))
    return float(total)


def mean_field_win_weights(n: int, d: int, nodes: int = 160) -> np.ndarray:
    """f(R_i) / mean f: expected share of a key with norm R (equal-probability chi_d quantiles R_i).

    f(R) = E_B[Phi(R B)^(n - 1)], B the cosine between a uniform direction and the key: the key's
    projection on a random query direction is R B, the other keys' are i.i.d. N(0, 1).
    """
    from scipy.special import log_ndtr
    from scipy.stats import chi

    radius = chi.ppf((np.arange(nodes) + 0.5) / nodes, d)
    cos, w = _cosine_nodes(d, 64)
    f = np.exp((n - 1) * log_ndtr(radius[:, None] * cos[None, :])) @ w
    return f / f.mean()


def beta_miss_probability(n: int, mean, shape: float):
    """E[(1 - g)^n] for g ~ Beta(shape, shape (1/mean - 1)), i.e. mean `mean`: B(a, b + n) / B(a, b).

    `betaln` keeps its accuracy for b >> a; above shape 1e4 (nearly no spread) the second-order delta
    method (1 - m)^n (1 + n (n - 1) Var g / (2 (1 - m)^2)) is used, as betaln loses digits there.
    """
    from scipy.special import betaln

    mean = np.clip(np.atleast_1d(np.asarray(mean, dtype=float)), 1e-300, 1 - 1e-12)
    if shape > 1e4:
        var = mean * mean * (1 - mean) / (shape + mean)
        return np.exp(n * np.log1p(-mean)) * (1 + n * (n - 1) * var / (2 * (1 - mean) ** 2))
    b = shape * (1 / mean - 1)
    return np.exp(betaln(shape, b + n) - betaln(shape, b))


def poisson_voronoi_shape(d: int) -> float:
    """Gamma shape of the (normalised) cell size of a Poisson-Voronoi cell in d - 1 dimensions.

    (3m + 1) / 2 with m = d - 1 (Ferenc and Neda 2007): exact for m = 1 (a cell is half the sum of
    two exponential gaps), within 2 % of simulations for m = 2, 3; used for spherical Voronoi cells.
    """
    return (3 * (d - 1) + 1) / 2


def sphere_d2_rank_fraction(n: int) -> float:
    """Exact E[hardmax rank] / n for n unit keys on the circle (d_h = 2) and Gaussian queries.

    A query picks the key nearest in angle, so g_j is half the two arcs next to key j: g = X / 2,
    X ~ Beta(2, n - 2) (sum of two uniform spacings), and E[(1 - X/2)^n] is a one-dimensional integral.
    The n -> infinity limit is 1 - E[exp(-G / 2)] = 1 - (2/3)^2 = 5/9, G ~ Gamma(2).
    """
    from scipy.integrate import quad
    from scipy.special import betaln

    n = _check_n(n)
    if n <= 2:
        return 1.0 if n == 1 else 1.0 - 0.5 ** 2  # two keys: each half circle; rank 1 only if both rows agree
    log_norm = betaln(2, n - 2)
    f = lambda x: math.exp(n * math.log1p(-x / 2) + math.log(x) + (n - 3) * math.log1p(-x) - log_norm)
    upper = min(1.0, 100.0 / n)  # (1 - x)^(n - 3) < e^-90 beyond: the mass sits at x ~ 1/n
    miss, _ = quad(f, 0, upper, points=[upper / 25, upper / 5], limit=200, epsabs=1e-13)
    return 1.0 - miss


BRIDGE_POWER = 5.0  # exponent q of the blend weight pi^q; chapter 3b calibrates it on n off its grid (full mode chose 5)


def _beta_closure(n: int, vertex: float, collision: float) -> float:
    """rank / n when g = 0 off the vertices and Beta on them, with P(vertex) and E[sum g^2] matched."""
    m = 1.0 / (n * vertex)
    var = collision / (n * vertex) - m * m
    shape = 1e8 if var <= 1e-15 else max(m * (1 - m) / var - 1, 1e-12) * m
    return vertex * (1.0 - float(beta_miss_probability(n, m, shape)[0]))


def _mean_field_closure(n: int, d: int, vertex: float, collision: float) -> float:
    """rank / n when the shares are f(R) / mean f times an independent Beta factor that makes up E[sum g^2]."""
    weights = mean_field_win_weights(n, d)
    excess = vertex * n * collision / np.mean(weights**2) - 1.0
    shape = 1.0 / excess if excess > 1e-8 else 1e8
    return vertex * (1.0 - float(np.mean(beta_miss_probability(n, weights / (n * vertex), shape))))


def gaussian_closures(n: int, d: int) -> dict:
    """The exact pieces (vertex probability, collision probability) and both closures' rank / n, Gaussian keys."""
    n, d = _check_n(n), _check_n(d)
    vertex = gaussian_vertex_probability(n, d)
    collision = gaussian_collision_probability(n, d)
    return {"vertex": vertex, "collision": collision, "hull": _beta_closure(n, vertex, collision),
            "norms": _mean_field_closure(n, d, vertex, collision)}


def bridge_closures(closures: dict, bridge: float) -> float:
    """(1 - w) hull + w norms with w = vertex^bridge (bridge = inf: the norm closure only once every key is a vertex)."""
    vertex = closures["vertex"]
    weight = (1.0 if vertex >= 1.0 else 0.0) if math.isinf(bridge) else vertex**bridge
    return (1 - weight) * closures["hull"] + weight * closures["norms"]


def predicted_rank_fraction(n: int, d: int, keys: str = "gaussian", bridge: float = BRIDGE_POWER) -> float:
    """Predicted E[hardmax rank] / n for Gaussian queries and Gaussian or unit-sphere keys in R^d.

    d = 1 is exact for both; sphere keys use a Beta law of spherical Voronoi cells (exact closed form at
    d = 2); Gaussian keys blend the vertex/Beta closure and the mean-field norm closure with weight pi^bridge.
    """
    n, d = _check_n(n), _check_n(d)
    if keys not in ("gaussian", "sphere"):
        raise ValueError(f"keys must be 'gaussian' or 'sphere'; got {keys!r}")
    if d == 1:  # the argmax is the largest or the smallest key (ties on the sphere go to the first index)
        return 2 * (1 - 0.5**n) / n if keys == "gaussian" else (1 + (1 - 0.5 ** (n - 1)) ** 2) / n
    if keys == "sphere":
        if d == 2:
            return sphere_d2_rank_fraction(n)
        return 1.0 - float(beta_miss_probability(n, 1.0 / n, poisson_voronoi_shape(d))[0])
    return bridge_closures(gaussian_closures(n, d), bridge)


def plateau_fraction(n: int) -> float:
    """The d_h -> infinity limit of E[hardmax rank] / n: uniform choices, 1 - (1 - 1/n)^n."""
    return expected_hardmax_rank(n) / _check_n(n)


def critical_head_dim(n: int, eps: float, keys: str = "gaussian", bridge: float = BRIDGE_POWER,
                      d_max: int = 2**22, guess: int | None = None) -> int:
    """Smallest integer d_h whose predicted rank is within eps of the plateau: rank / n >= (1 - eps) plateau.

    Bisection on d (the prediction increases with d), in a bracket grown geometrically from `guess` (for
    example the asymptotic form); returns d_max + 1 when even d_max falls short.
    """
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1); got {eps!r}")
    target = (1 - eps) * plateau_fraction(n)
    f = lambda d: predicted_rank_fraction(n, d, keys, bridge) >= target
    lo, hi = 1, d_max  # invariant once set up: f(lo) false, f(hi) true
    if f(1):
        return 1
    start = min(max(int(guess or 2), 2), d_max)
    if f(start):
        hi = start
        while hi > 1 and f(max(hi // 2, 1)):
            hi = max(hi // 2, 1)
        if hi == 1:
            return 1
        lo = max(hi // 2, 1)
    else:
        lo = start
        while lo < d_max and not f(min(2 * lo, d_max)):
            lo = min(2 * lo, d_max)
        if lo >= d_max:
            return d_max + 1
        hi = min(2 * lo, d_max)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if not f(mid) else (lo, mid)
    return hi


def norm_spread_constant(n: int, d: int = 4096) -> float:
    """kappa(n) = d Var(W) at large d, W = n g: the exact second moment's 1/d coefficient (about t_n^4 / 2)."""
    return d * (_check_n(n) * gaussian_collision_probability(n, d) - 1.0)


def sym_conditional_identity(k: int = 3) -> dict:
    """E[rank | K] and Var[rank | K] from indicators of missed columns, checked by enumeration for k keys and k rows.

    M_j = 1{no row picks column j}: P(M_j) = (1 - g_j)^n, P(M_j M_l) = (1 - g_j - g_l)^n (j != l), rank = k - sum_j M_j.
    """
    import itertools

    import sympy as sp

    n = sp.Symbol("n", positive=True, integer=True)
    g = sp.symbols(f"g1:{k + 1}", nonnegative=True)
    missed = [(1 - gj) ** n for gj in g]
    both = {(j, l): (1 - g[j] - g[l]) ** n for j in range(k) for l in range(k) if j != l}
    mean = sum(1 - mj for mj in missed)
    variance = sum(mj * (1 - mj) for mj in missed) + sum(both[j, l] - missed[j] * missed[l] for j, l in both)
    # enumeration with n = k rows: every choice tuple, weighted by its probability
    rows = k
    e1 = e2 = sp.Integer(0)
    for choice in itertools.product(range(k), repeat=rows):
        weight = sp.Mul(*[g[c] for c in choice])
        r = len(set(choice))
        e1 += weight * r
        e2 += weight * r * r
    on_simplex = {g[-1]: 1 - sum(g[:-1])}
    mean_gap = sp.expand((e1 - mean.subs(n, rows)).subs(on_simplex))
    var_gap = sp.expand((e2 - e1**2 - variance.subs(n, rows)).subs(on_simplex))
    j = sp.Symbol("j", positive=True, integer=True)
    uniform_mean = sp.Sum(1 - (1 - 1 / n) ** n, (j, 1, n)).doit()  # every g_j = 1/n, n keys
    off_hull = {g[-1]: 0}
    return {"n": n, "g": g, "mean": mean, "variance": variance, "mean_gap": mean_gap, "var_gap": var_gap,
            "uniform_mean": uniform_mean, "uniform_limit": sp.limit(uniform_mean / n, n, sp.oo), "off_hull_mean": mean.subs(off_hull), "off_hull_variance": sp.simplify(variance.subs(off_hull))}


def sym_sphere_circle() -> dict:
    """Unit keys on the circle: g = X/2, X ~ Beta(2, n - 2); as n -> infinity n X -> Gamma(2), rank / n -> 5/9."""
    import sympy as sp

    x, n = sp.symbols("x n", positive=True)
    density = x * sp.exp(-x)  # Gamma(2): the sum of two exponential gaps, scaled by n
    miss = sp.integrate(sp.exp(-x / 2) * density, (x, 0, sp.oo))
    limit = sp.simplify(1 - miss)
    return {"x": x, "gamma_density": density, "miss": miss, "limit": limit,
            "ratio_to_barrier": sp.simplify(limit / (1 - sp.exp(-1)))}
