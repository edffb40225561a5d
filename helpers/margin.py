"""A margin theory of the head dimension: how many dimensions a head needs to put mass 1 - eps on one key of n,
when its logits are bounded by the logit scale L.

Definitions used by the whole book (chapter 03c and every chapter that measures a trained head):

    logit scale L      the largest |q . k| of a head after its own scaling (1/sqrt(d_h) included): `logit_scale`;
                       `logit_half_range` is the smallest L of a head with the same attention (rows shifted)
    target mass        the softmax mass a row puts on its target keys; the headline is the mean over rows, the
                       minimum over rows is reported beside it: `target_mass`
    eps                the mass allowed off target, EPS = 0.1 unless a chapter says otherwise

Random codes (queries and keys uniform on the sphere of radius sqrt(L), the query of row i along its target key):
the off-target logits are L u.v with u.v the cosine of two independent uniform unit vectors in d dimensions, whose
moment generating function is the confluent limit function

    M_d(L) = E[exp(L u.v)] = 0F1(; d/2; L^2/4)   ( = Gamma(d/2) (2/L)^(d/2-1) I_{d/2-1}(L) ),

so the expected off-target mass ratio of a row is r = (n - 1) e^{-L} M_d(L), and the mean target mass is at least
1/(1 + r) (Jensen: the mass 1/(1 + R) is convex in the row's ratio R). `random_code_dim` is the smallest d with
r <= eps / (1 - eps): an achievable dimension (some code of the random family reaches it), so an upper bound on the
optimum d*. It is infinite once (n - 1) e^{-L} >= eps / (1 - eps): at a fixed L there is an n beyond which no
dimension is enough.

Any code: `rank_lower_bound` (a lower bound on d for every code with |q . k| <= L and mean target mass 1 - eps on a
permutation pattern, or on a k-regular pattern with the factor k^2 below) from the trace bound on the rank of the
attention matrix and the rank of the truncated Taylor series of exp(Q K^T); see its docstring.
"""

import math

import numpy as np

from .errors import ArgumentError

EPS = 0.1


# ------------------------------------------------------------------------------------------------ definitions
def _numpy(values) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().double().cpu().numpy()
    return np.asarray(values, dtype=float)


def logit_scale(q, k=None) -> float:
    """L = max |q_i . k_j| over all query rows `q` `(n, d)` and key rows `k` `(m, d)` (numpy or torch), the logits
    as the head applies them (pass q already multiplied by the head's scale, e.g. 1/sqrt(d_h)). With one argument,
    `q` is the logits themselves `(..., n, m)`, masked entries -inf (left out)."""
    q = _numpy(q)
    if k is None:
        finite = q[np.isfinite(q)]
        if finite.size == 0:
            raise ArgumentError("logits", q.shape, "an array with at least one finite entry")
        return float(np.abs(finite).max())
    k = _numpy(k)
    if q.ndim != 2 or k.ndim != 2 or q.shape[1] != k.shape[1]:
        raise ArgumentError("q, k", (q.shape, k.shape), "two 2-D arrays (n, d) and (m, d) of the same width d")
    return float(np.abs(q @ k.T).max())


def logit_half_range(logits) -> float:
    """max over rows of (largest - smallest logit) / 2 for logits `(..., n, m)` (masked entries -inf left out):
    the smallest logit scale of any head with the same attention, since adding a constant to a row of logits does
    not change its softmax. At most `logit_scale(logits)`."""
    values = _numpy(logits)
    if values.ndim < 2 or not np.isfinite(values).any(axis=-1).all():
        raise ArgumentError("logits", values.shape, "an array (..., rows, keys) with a finite entry in every row")
    top = np.where(np.isfinite(values), values, -np.inf).max(axis=-1)
    bottom = np.where(np.isfinite(values), values, np.inf).min(axis=-1)
    return float(((top - bottom) / 2).max())


def target_mass(attention, targets) -> tuple[float, float]:
    """(mean over rows, minimum over rows) of the mass each row of `attention` `(n, m)` puts on its targets:
    `targets` `(n,)` one key index per row, or a boolean mask `(n, m)` (several keys per row)."""
    a = np.asarray(attention.detach().cpu() if hasattr(attention, "detach") else attention, dtype=float)
    t = np.asarray(targets.detach().cpu() if hasattr(targets, "detach") else targets)
    if a.ndim != 2:
        raise ArgumentError("attention", a.shape, "a 2-D array (rows, keys)")
    if t.shape == a.shape and t.dtype == bool:
        mass = (a * t).sum(axis=1)
    elif t.shape == (a.shape[0],) and np.issubdtype(t.dtype, np.integer):
        if t.min() < 0 or t.max() >= a.shape[1]:
            raise ArgumentError("targets", (int(t.min()), int(t.max())), f"key indices from 0 to {a.shape[1] - 1}")
        mass = a[np.arange(a.shape[0]), t]
    else:
        raise ArgumentError("targets", t.shape, f"one key index per row ({a.shape[0]},) or a boolean mask {a.shape}")
    return float(mass.mean()), float(mass.min())


def _check(n, L, eps) -> None:
    if not n >= 2:
        raise ArgumentError("n", n, "a sequence length >= 2")
    if not L > 0:
        raise ArgumentError("L", L, "a logit scale > 0")
    if not 0 < eps < 1:
        raise ArgumentError("eps", eps, "a number in (0, 1)")


def odds(eps: float) -> float:
    """eps / (1 - eps): the largest off-target to target mass ratio a row with target mass 1 - eps can have."""
    return eps / (1 - eps)


# ------------------------------------------------------------------------------------------------ random codes
def sphere_mgf(L: float, d: float) -> float:
    """M_d(L) = E[exp(L u.v)] for independent uniform unit vectors u, v in d >= 1 dimensions: 0F1(; d/2; L^2/4)
    (d = 1: cosh L; d = 3: sinh(L)/L)."""
    from scipy.special import hyp0f1

    if not d >= 1:
        raise ArgumentError("d", d, "a dimension >= 1")
    return float(hyp0f1(d / 2, L * L / 4))


def off_target_ratio(n: int, L: float, d: float) -> float:
    """Expected off-target to target mass ratio of a row of a random code: (n - 1) e^{-L} M_d(L)."""
    return (n - 1) * math.exp(-L) * sphere_mgf(L, d)


def divergence_n(L: float, eps: float = EPS) -> float:
    """The n at which a random code stops being able to reach mass 1 - eps at logit scale L: 1 + e^L eps/(1-eps)."""
    return 1 + math.exp(L) * odds(eps)


def least_logit_scale(n: int, eps: float = EPS) -> float:
    """The smallest L at which some dimension is enough for a random code: ln((n - 1)(1 - eps)/eps)."""
    return math.log((n - 1) / odds(eps))


def random_code_dim(n: int, L: float, eps: float = EPS) -> float:
    """The smallest real d >= 1 at which a random code reaches mean target mass 1 - eps (r = eps/(1 - eps)):
    1.0 when d = 1 already does, inf when no d does (L <= least_logit_scale(n, eps)). Bisection to 1e-9 relative."""
    _check(n, L, eps)
    goal = odds(eps)
    if (n - 1) * math.exp(-L) >= goal:
        return math.inf
    if off_target_ratio(n, L, 1.0) <= goal:
        return 1.0
    low, high = 1.0, 2.0
    while off_target_ratio(n, L, high) > goal:
        low, high = high, 2 * high
    while high - low > 1e-9 * high:
        mid = (low + high) / 2
        low, high = (mid, high) if off_target_ratio(n, L, mid) > goal else (low, mid)
    return high


def random_code_dim_approx(n: int, L: float, eps: float = EPS) -> float:
    """The large-d reading of `random_code_dim` (M_d(L) ~ exp(L^2 / 2d)): L^2 / (2 (L - ln((n-1)(1-eps)/eps)));
    only for reading the regimes, valid when d >> L."""
    _check(n, L, eps)
    gap = L - least_logit_scale(n, eps)
    return L * L / (2 * gap) if gap > 0 else math.inf


# ------------------------------------------------------------------------------------------------ any code
def _exp_tail(L: float, K: int) -> float:
    """sum_{j > K} L^j / j!: the largest error of exp truncated after the L^K term on [-L, L] (summed term by
    term upward, all positive, so there is no cancellation against e^L)."""
    j = K + 1
    term = math.exp(j * math.log(L) - math.lgamma(j + 1))
    total = 0.0
    while term > 1e-18 * total or j <= L:
        total += term
        j += 1
        term *= L / j
    return total


def rank_lower_bound(n: int, L: float, eps: float = EPS, k: int = 1, k_max: int | None = None) -> int:
    """A lower bound on the dimension d of *any* code (q_i, k_j in R^d, every |q_i . k_j| <= L) whose attention
    matrix A puts mean target mass >= 1 - eps on a k-regular target pattern P (k = 1: a permutation).

    The argument: |<A, P>| <= ||A||_* ||P||_op <= sqrt(rank A) ||A||_F k, with <A, P> >= n (1 - eps) and
    ||A||_F <= sqrt(n) (rows are probability vectors), so rank A >= n (1 - eps)^2 / k^2. A = D^{-1} exp(G) with
    G = Q K^T of rank <= d; the Taylor series of exp cut after G^{o K} (entrywise powers) has rank <= C(d + K, K)
    and differs from exp(G) by at most tau_K = sum_{j > K} L^j / j! per entry, and D_ii >= n e^{-L}, so
        C(d + K, K) >= ((n (1 - eps) - k tau_K e^L)_+ / (k (sqrt(n) + tau_K e^L)))^2   for every K >= 0.
    The bound is the largest d this forces over K (0 when no K forces anything). It grows like ln n / ln(e L / d).
    """
    _check(n, L, eps)
    if k < 1 or k > n:
        raise ArgumentError("k", k, f"an integer from 1 to n ({n})")
    k_max = k_max or int(3 * math.e * L + 30)
    best = 0
    for K in range(0, k_max + 1):
        slack = _exp_tail(L, K) * math.exp(L)
        top = n * (1 - eps) - k * slack
        if top <= 0:
            continue
        need = (top / (k * (math.sqrt(n) + slack))) ** 2
        d = 0
        while math.comb(d + K, K) < need:
            d += 1
            if d > 100000:
                break
        best = max(best, d)
    return best


def any_code_least_logit_scale(n: int, eps: float = EPS) -> float:
    """A logit scale below which no code of any dimension reaches mean target mass 1 - eps: each row's mass is at
    most 1 / (1 + (n - 1) e^{-2L}) (target logit <= L, every other >= -L), so L >= ln((n-1)(1-eps)/eps) / 2."""
    return least_logit_scale(n, eps) / 2


# ------------------------------------------------------------------------------------------------ sympy
def sym_mgf() -> dict:
    """The moment generating function of the cosine t = u.v of two uniform unit vectors in d dimensions, derived.

    Returns sympy expressions: "density" of t (up to its constant), "moment" E[t^(2m)] as a ratio of Gamma
    functions, "moment_pochhammer" the same as rising factorials (1/2)_m / (d/2)_m, "moment_gap" their difference
    simplified (0), "series_term" the m-th term of E[exp(L t)], "check_d3" M_3(L) - sinh(L)/L summed in closed form
    (0), "log_mgf_large_d" the series of ln M_d(L) in 1/d (L^2/(2d) leads).
    """
    import sympy as sp

    t, d, L, m = sp.symbols("t d L m", positive=True)
    density = (1 - t ** 2) ** ((d - 3) / 2)
    # E[t^(2m)] = B(m + 1/2, (d-1)/2) / B(1/2, (d-1)/2), the Beta integrals of the density in t^2
    moment = (sp.gamma(m + sp.Rational(1, 2)) * sp.gamma(d / 2)) / (sp.gamma(sp.Rational(1, 2)) * sp.gamma(m + d / 2))
    pochhammer = sp.rf(sp.Rational(1, 2), m) / sp.rf(d / 2, m)
    gap = sp.simplify(sp.gammasimp(sp.expand_func(moment - pochhammer)))
    term = L ** (2 * m) / sp.factorial(2 * m) * pochhammer
    term_simplified = sp.simplify(sp.combsimp(term.rewrite(sp.gamma)))
    check3 = sp.simplify(sp.summation(sp.simplify(term.subs(d, 3).rewrite(sp.gamma)), (m, 0, sp.oo)) - sp.sinh(L) / L)
    eps_ = sp.symbols("epsilon", positive=True)     # 1/d
    partial = sum((L ** 2 / 4) ** j / (sp.factorial(j) * sp.rf(1 / (2 * eps_), j)) for j in range(4))
    log_large_d = sp.series(sp.log(partial), eps_, 0, 3).removeO().subs(eps_, 1 / d)
    return {"density": density, "moment": moment, "moment_pochhammer": pochhammer, "moment_gap": gap,
            "series_term": term_simplified, "check_d3": check3, "log_mgf_large_d": sp.expand(log_large_d)}


def sym_regimes() -> dict:
    """The random-code dimension read in its large-d form d = L^2 / (2 (L - ell)), ell = ln((n-1)(1-eps)/eps).

    "d_approx" that formula (solved by sympy from (n-1) e^{-L} e^{L^2/(2d)} = eps/(1-eps)); "log_scale" the limit of
    d / ln n when L = c ln n (c > 1); "margin" d at L = ell + delta and its leading term in ell, (ell^2)/(2 delta);
    "divergence_n" the n at which d becomes infinite at a fixed L. "solve_gap" and "divergence_gap" are sympy's own
    solutions minus these forms (zero where the forms are right).
    """
    import sympy as sp

    n, L, d, eps, c, delta, ell = sp.symbols("n L d varepsilon c delta ell", positive=True)
    condition = sp.Eq((n - 1) * sp.exp(-L) * sp.exp(L ** 2 / (2 * d)), eps / (1 - eps))
    solved = sp.solve(condition, d)[0]
    # the forms the prose uses, each checked against sympy's own solution below (simplify would print 1 - eps as
    # -(eps - 1), since sympy cannot know that eps < 1)
    ell_of_n = sp.log((n - 1) * (1 - eps) / eps)
    d_approx = L ** 2 / sp.Mul(2, L - ell_of_n, evaluate=False)    # unevaluated: 2 (L - ell), not 2 L - 2 ell
    gap = sp.simplify(solved - d_approx)
    log_scale = sp.limit(d_approx.subs(L, c * sp.log(n)) / sp.log(n), n, sp.oo)
    margin = sp.simplify((L ** 2 / (2 * (L - ell))).subs(L, ell + delta))
    margin_lead = sp.limit(margin / ell ** 2, ell, sp.oo)
    divergence = 1 + eps * sp.exp(L) / (1 - eps)
    divergence_gap = sp.simplify(sp.solve(sp.Eq(L, ell_of_n), n)[0] - divergence)
    return {"condition": condition, "d_solved": solved, "d_approx": d_approx, "solve_gap": gap,
            "log_scale": sp.simplify(log_scale), "margin": margin, "margin_lead": margin_lead,
            "divergence_n": divergence, "divergence_gap": divergence_gap}
