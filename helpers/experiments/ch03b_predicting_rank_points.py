"""Chapter 3b's grid points that need more than the hardmax sampler: the identity for one fixed key set.

Kept apart from the chapter module so that editing the analysis, a verdict or a sentence keeps these sweeps cached.
"""

import math

import numpy as np
import torch

from .. import seeding, theory
from ..hardmax_sampling import argmax_winners, distinct_counts, sample_keys


def win_probabilities(k: torch.Tensor, queries: int, gen: torch.Generator, chunk: int = 8192) -> np.ndarray:
    """Estimate g_j `(n,)`: the share of `queries` fresh Gaussian queries whose argmax is key j."""
    counts = torch.zeros(k.shape[0], dtype=torch.long)
    done = 0
    while done < queries:
        size = min(chunk, queries - done)
        winners, _ = argmax_winners(torch.randn(size, k.shape[1], generator=gen), k)
        counts += torch.bincount(winners, minlength=k.shape[0])
        done += size
    return counts.numpy() / queries


def identity_point(n: int, d_head: int, keys: str, queries: int, replicates: int, seed: int) -> dict:
    """For one fixed key set: E[rank | K] and Var[rank | K] from estimated g_j, against fresh query sets.

    The predicted mean's standard error comes from the multinomial error of the estimated g_j (delta method);
    its plug-in bias, of order n^2 g / queries, is removed to first order.
    """
    gen = seeding.torch_generator(seeding.derive_seed(seed, "ch3b_identity", n, d_head, keys))
    k = sample_keys(n, d_head, keys, gen)
    g = win_probabilities(k, queries, gen)
    missed = (1 - g) ** n
    bias = n * (n - 1) / 2 * (1 - g) ** max(n - 2, 0) * g * (1 - g) / queries  # E[(1 - g_hat)^n] - (1 - g)^n
    predicted = float(np.sum(1 - missed + bias))
    grad = n * (1 - g) ** (n - 1)
    pred_se = math.sqrt(max(np.sum(grad**2 * g) - np.sum(grad * g) ** 2, 0.0) / queries)
    ranks = []
    per_batch = max(1, 2**22 // (n * n))
    for start in range(0, replicates, per_batch):  # fresh query sets against the same keys, batched
        size = min(per_batch, replicates - start)
        winners, _ = argmax_winners(torch.randn(size, n, d_head, generator=gen), k.expand(size, n, d_head))
        ranks.extend(distinct_counts(winners, n).tolist())
    ranks = np.array(ranks, dtype=float)
    predicted_var = theory.hardmax_rank_variance_from_probs(g, rows=n)
    return {"predicted": predicted, "predicted_se": pred_se, "predicted_var": predicted_var,
            "measured": float(ranks.mean()), "measured_se": float(ranks.std(ddof=1) / math.sqrt(replicates)),
            "measured_var": float(ranks.var(ddof=1)), "vertices_hit": int((g > 0).sum()),
            # the spread of the measured mean under the identity itself (the sample spread can be 0 by chance)
            "combined_se": math.sqrt(predicted_var / replicates + pred_se**2)}
