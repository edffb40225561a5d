"""Chapter 2's grid points: Monte Carlo hardmax ranks under four models of the rows' choices.

They live apart from the analysis (`ch02_low_rank_barrier`) because the result store keys a point by the code of
the module that defines it and what that imports: editing the analysis, a verdict or a sentence keeps the cached
sweeps. Point functions are top-level and return lists of plain-number dicts, so `run_sweep` can cache them.

Models (`model`):
  uniform      each of n rows picks one of n columns uniformly (balls in bins; d_head is ignored, use 0)
  orthonormal  hardmax of X W_q W_k^T X^T with orthonormal rows X and Gaussian W_q, W_k. Since X W has
               i.i.d. Gaussian entries when X has orthonormal rows, this is sampled exactly (and fast) as
               i.i.d. Gaussian queries and keys; `equivalence_point` checks it against the explicit
               construction of `helpers.attention`.
  gaussian     the same with Gaussian inputs X (d_model = max(n, d_head)), sampled through the Cholesky
               factor of X X^T (`gaussian_input_logits`), which is exact and avoids drawing the weights
  sphere_keys  Gaussian queries, keys Gaussian then projected onto the unit sphere (no norm bias)
"""

import numpy as np
import torch

from .. import attention, geometry, rank, seeding

MODELS = ("uniform", "orthonormal", "gaussian", "sphere_keys")


TRIALS_REFERENCE_N = 256   # `trials` matrices per point from this n up; proportionally more below (for powers of two
                           # the former `trials * max(1, 256 // n)`, so the sweeps draw the same matrices)


def _chunks(total: int, per_chunk: int):
    done = 0
    while done < total:
        size = min(per_chunk, total - done)
        yield size
        done += size


def gaussian_input_logits(n: int, d_head: int, d_model: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """Logits X W_q W_k^T X^T for Gaussian X `(n, d_model)` and standard Gaussian W, sampled exactly but cheaply.

    With X = L U (L lower triangular, U with orthonormal rows; L is the Cholesky factor of X X^T), X W = L (U W)
    and U W_q, U W_k are independent matrices of i.i.d. N(0, 1) entries. X X^T is Wishart, so L is drawn
    directly by Bartlett's decomposition (chi variables on the diagonal, standard normals below it), and
    neither X nor the (d_model, d_head) weights are ever formed. Needs d_model >= n.
    """
    if d_model < n:
        raise ValueError(f"needs d_model >= n; got d_model={d_model}, n={n}")
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
    chol = torch.randn(count, n, n, generator=generator, dtype=torch.float64).tril(-1)  # (count, n, n)
    dof = d_model - np.arange(n)  # Bartlett: L_ii^2 ~ chi^2 with d_model - i degrees of freedom
    diag = torch.as_tensor(np.sqrt(rng.chisquare(dof, size=(count, n))), dtype=torch.float64)
    chol = (chol + torch.diag_embed(diag)) / d_model**0.5
    z_q = torch.randn(count, n, d_head, generator=generator, dtype=torch.float64)
    z_k = torch.randn(count, n, d_head, generator=generator, dtype=torch.float64)
    queries, keys = chol @ z_q, chol @ z_k  # (count, n, d_head)
    return queries @ keys.transpose(-1, -2)


def hardmax_ranks(model: str, n: int, d_head: int, count: int, generator: torch.Generator) -> np.ndarray:
    """Hardmax ranks of `count` random matrices `(count,)` under one of the MODELS."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}; got {model!r}")
    out = []
    if model == "uniform":
        choices = torch.randint(0, n, (count, n), generator=generator)  # (count, n rows)
        occupied = torch.zeros(count, n, dtype=torch.bool).scatter_(1, choices, True)
        return occupied.sum(1).numpy().astype(float)
    d_model = max(n, d_head)
    per_chunk = max(1, 2**22 // (n * max(n, d_head)))
    for size in _chunks(count, per_chunk):
        if model == "gaussian":
            logits = gaussian_input_logits(n, d_head, d_model, size, generator)  # (size, n, n)
        else:
            q = torch.randn(size, n, d_head, generator=generator, dtype=torch.float64)  # (size, n, d_head)
            k = torch.randn(size, n, d_head, generator=generator, dtype=torch.float64)
            if model == "sphere_keys":
                k = k / k.norm(dim=-1, keepdim=True)
            logits = q @ k.transpose(-1, -2)  # (size, n, n)
        out.append(rank.hardmax_rank(logits).numpy().astype(float))
    return np.concatenate(out)


def barrier_point(model: str, n: int, d_head: int, trials: int, seed: int) -> list[dict]:
    """One row per random matrix: its hardmax rank (number of distinct argmax columns)."""
    gen = seeding.torch_generator(seeding.derive_seed(seed, "barrier", model, n, d_head))
    count = seeding.trials_for(n, trials, reference_n=TRIALS_REFERENCE_N, minimum=trials)
    ranks = hardmax_ranks(model, n, d_head, count, gen)
    return [{"trial": i, "rank": float(r)} for i, r in enumerate(ranks)]


def equivalence_point(n: int, d_head: int, trials: int, seed: int) -> list[dict]:
    """Hardmax ranks from the explicit construction (orthonormal X, Gaussian W) and from i.i.d. Gaussian q, k."""
    gen = seeding.torch_generator(seeding.derive_seed(seed, "equivalence", n, d_head))
    count = seeding.trials_for(n, trials, reference_n=TRIALS_REFERENCE_N, minimum=trials)
    explicit = rank.hardmax_rank(attention.random_logits(n, d_head, inputs="orthonormal", weight_std=1.0,
                                                         batch=count, generator=gen)).numpy()
    direct = hardmax_ranks("orthonormal", n, d_head, count, gen)
    return [{"construction": "explicit X W", "rank": float(r)} for r in explicit] + \
           [{"construction": "i.i.d. Gaussian q, k", "rank": float(r)} for r in direct]


def win_by_norm_point(n: int, d_head: int, queries_per_key: int, draws: int, seed: int) -> list[dict]:
    """For Gaussian keys, how often each key wins an argmax against i.i.d. Gaussian queries.

    One row per key: its relative norm |k| / mean |k| and its win frequency times n (1 = fair share).
    """
    rng = seeding.numpy_generator(seeding.derive_seed(seed, "win_by_norm", n, d_head))
    rows = []
    for draw in range(draws):
        keys = rng.standard_normal((n, d_head))
        queries = rng.standard_normal((queries_per_key * n, d_head))
        wins = geometry.argmax_win_counts(queries, keys)
        norms = np.linalg.norm(keys, axis=1)
        for j in range(n):
            rows.append({"draw": draw, "key": j, "rel_norm": float(norms[j] / norms.mean()),
                         "win_share": float(wins[j] * n / queries.shape[0])})
    return rows
