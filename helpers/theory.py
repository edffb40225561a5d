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
