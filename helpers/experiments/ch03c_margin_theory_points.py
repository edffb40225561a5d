"""Chapter 3c's grid points: Monte Carlo of the sphere MGF and of random codes, and optimised codes.

Kept apart from the chapter module so that editing the analysis, a verdict or a sentence keeps these sweeps cached.
"""

import math

import numpy as np

from .. import code_search, margin, seeding, theory


def _unit(gen: np.random.Generator, shape) -> np.ndarray:
    x = gen.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def mgf_point(d: int, L: float, samples: int, seed: int) -> dict:
    """Monte Carlo of E[exp(L u.v)] for uniform unit u, v in d dimensions (mean and standard error) and the
    closed form."""
    gen = np.random.default_rng(seeding.derive_seed(seed, "ch3c_mgf", d, L))
    values = np.concatenate([np.exp(L * np.sum(_unit(gen, (c, d)) * _unit(gen, (c, d)), axis=1))
                             for c in [min(65536, samples - s) for s in range(0, samples, 65536)]])
    return {"mc": float(values.mean()), "se": float(values.std(ddof=1) / math.sqrt(samples)),
            "exact": margin.sphere_mgf(L, d)}


def random_code_point(n: int, L: float, eps: float, codes: int, seed: int) -> dict:
    """Random codes (n unit keys, each query along its own key, logits L u.v) at the integer dimension
    ceil(random_code_dim): the mean over rows of the off-target ratio and of the target mass, averaged over
    `codes` codes, with their standard errors, beside the formula's ratio at that dimension."""
    d_real = margin.random_code_dim(n, L, eps)
    if not math.isfinite(d_real):
        return {"d_rand": d_real, "d": None, "ratio": None, "ratio_se": None, "mass": None, "mass_se": None,
                "formula_ratio": None}
    d = max(1, math.ceil(d_real))
    gen = np.random.default_rng(seeding.derive_seed(seed, "ch3c_random_code", n, L))
    ratios, masses = [], []
    for _ in range(codes):
        v = _unit(gen, (n, d))
        logits = L * (v @ v.T - 1.0)                    # relative to the target logit L
        np.fill_diagonal(logits, -np.inf)
        ratio = np.exp(logits).sum(axis=1)              # (n,): off-target over target mass, per row
        ratios.append(ratio.mean())
        masses.append(np.mean(1.0 / (1.0 + ratio)))
    ratios, masses = np.array(ratios), np.array(masses)
    return {"d_rand": d_real, "d": d, "ratio": float(ratios.mean()),
            "ratio_se": float(ratios.std(ddof=1) / math.sqrt(codes)), "mass": float(masses.mean()),
            "mass_se": float(masses.std(ddof=1) / math.sqrt(codes)),
            "formula_ratio": margin.off_target_ratio(n, L, d)}


def code_point(n: int, L: float, eps: float, pattern: str, k: int, steps: int, d_max: int, seed: int) -> dict:
    """The smallest dimension of an optimised code (`code_search.smallest_dim`), every dimension tried, and the two
    bounds of the margin theory at (n, L, eps)."""
    found = code_search.smallest_dim(n, L, eps, pattern, k, seed, d_max, steps)
    return {"d_star": found.d_star, "tried": {str(d): m for d, m in sorted(found.tried.items())},
            "d_rand": margin.random_code_dim(n, L, eps), "d_lower": margin.rank_lower_bound(n, L, eps, k)}


def convergence_point(n: int, L: float, eps: float, pattern: str, k: int, steps: int, d: int, seed: int) -> dict:
    """The optimised mean target mass at dimension d with `steps` steps (the doubled-steps check)."""
    if d < 1:
        return {"mass": 0.0}
    return {"mass": code_search.optimise_code(n, d, L, pattern, k, steps, seed).mean_mass}


def prediction_point(n: int, d_max: int, eps: float, seed: int) -> list[dict]:
    """Chapter 3b's random-key predictor at one n (Gaussian queries and keys), for the explorer: the predicted
    hardmax rank / n at every d_h from 1 to `d_max`, each row with the critical d_h (the smallest whose prediction
    is within `eps` of the plateau). Deterministic: `seed` is the sweep engine's and not used."""
    critical = theory.critical_head_dim(n, eps)
    return [{"d_head": d, "fraction": theory.predicted_rank_fraction(n, d), "critical": critical}
            for d in range(1, d_max + 1)]
