"""Chapter 3's grid points, in a module of their own: the result store keys a point by the code of the module that
defines it (and what that imports), so editing the chapter's analysis, verdicts or prose keeps the sweeps warm.

Random heads use i.i.d. standard Gaussian queries and keys, q, k ~ N(0, I_{d_h}). For hardmax this is exactly the
orthonormal-input model of chapter 2 (X W with orthonormal rows X and Gaussian W has i.i.d. Gaussian entries); for
softmax it is the scale of LayerNorm-ed tokens with 1/sqrt(d_model) weights, and the temperature is T = sqrt(d_h), so
the logits have unit variance for every d_h.
"""

import math

import torch

from .. import geometry, rank, seeding

KEY_KINDS = ("gaussian", "sphere")
TRIALS_REFERENCE_N = 256  # `trials` matrices per point from this n up, proportionally more below (as in chapter 02)


def _keys_queries(n, d_head, count, keys, gen):
    q = torch.randn(count, n, d_head, generator=gen, dtype=torch.float64)
    k = torch.randn(count, n, d_head, generator=gen, dtype=torch.float64)
    if keys == "sphere":
        k = k / k.norm(dim=-1, keepdim=True)
    return q, k


def hardmax_point(n: int, d_head: int, keys: str, trials: int, seed: int) -> list[dict]:
    """Hardmax rank of random heads (Gaussian queries; Gaussian or unit-sphere keys), one row per matrix."""
    if keys not in KEY_KINDS:
        raise ValueError(f"keys must be one of {KEY_KINDS}; got {keys!r}")
    gen = seeding.torch_generator(seeding.derive_seed(seed, "sat_hardmax", n, d_head, keys))
    count = seeding.trials_for(n, trials, reference_n=TRIALS_REFERENCE_N, minimum=trials)
    per_chunk = max(1, 2**22 // (n * max(n, d_head)))
    ranks = []
    done = 0
    while done < count:
        size = min(per_chunk, count - done)
        q, k = _keys_queries(n, d_head, size, keys, gen)
        ranks.extend(rank.hardmax_rank(q @ k.transpose(-1, -2)).tolist())  # (size,)
        done += size
    return [{"trial": i, "rank": float(r)} for i, r in enumerate(ranks)]


def softmax_point(n: int, d_head: int, trials: int, rtol: float, seed: int) -> list[dict]:
    """Softmax at T = sqrt(d_h) with Gaussian q, k: numerical rank (rtol), effective and hardmax rank per matrix."""
    gen = seeding.torch_generator(seeding.derive_seed(seed, "sat_softmax", n, d_head))
    count = seeding.trials_for(n, trials, reference_n=TRIALS_REFERENCE_N, minimum=trials)
    q, k = _keys_queries(n, d_head, count, "gaussian", gen)
    logits = q @ k.transpose(-1, -2) / math.sqrt(d_head)  # (count, n, n), unit-variance logits
    probs = torch.softmax(logits, dim=-1)
    ranks = rank.measures(probs, ("numerical", "effective", "hardmax"), (rtol,))
    numerical = ranks[rank.label("numerical", rtol)]
    return [{"trial": i, "numerical": float(numerical[i]), "effective": float(ranks["effective"][i]),
             "hardmax": float(ranks["hardmax"][i])} for i in range(count)]


def hull_point(n: int, d: int, trials: int, seed: int) -> list[dict]:
    """Hull vertices of n standard Gaussian points in R^d (exact LP test), and their norm spread."""
    rng = seeding.numpy_generator(seeding.derive_seed(seed, "sat_hull", n, d))
    rows = []
    for i in range(trials):
        points = rng.standard_normal((n, d))
        mask, stats = geometry.hull_vertex_mask(points, rng=rng, return_stats=True)
        rows.append({"trial": i, "vertices": int(mask.sum()), "fraction": float(mask.mean()),
                     "lp_calls": stats["lp_small"] + stats["lp_full"], **geometry.key_norm_stats(points)})
    return rows
