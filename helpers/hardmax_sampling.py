"""Hardmax rank of random heads by Monte Carlo: float32 logits with a per-row certificate, float64 for the rest.

Queries are i.i.d. N(0, I_d); keys are i.i.d. N(0, I_d) ("gaussian") or uniform on the unit sphere ("sphere").
The hardmax rank of a head is the number of distinct argmax columns over its n rows (as `rank.hardmax_rank`).
Kept apart from the chapter modules so that the result store keys these sweeps by this code only.
"""

import torch

from . import seeding

KEY_KINDS = ("gaussian", "sphere")
FLOAT32_UNIT = 2.0**-24  # unit roundoff of float32


def sample_keys(n: int, d: int, keys: str, gen: torch.Generator, heads: int | None = None) -> torch.Tensor:
    """Keys `(n, d)` (or `(heads, n, d)`) float32: standard Gaussian, or normalised onto the unit sphere."""
    if keys not in KEY_KINDS:
        raise ValueError(f"keys must be one of {KEY_KINDS}; got {keys!r}")
    k = torch.randn(*(() if heads is None else (heads,)), n, d, generator=gen)
    return k / k.norm(dim=-1, keepdim=True) if keys == "sphere" else k


_BLOCK = 2**22  # score entries per block: bounds memory, and batches many small heads into one matmul


def argmax_winners(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Argmax column of every row of q k^T, for one head (q `(m, d)`, k `(n, d)`) or a batch (`(B, m, d)`,
    `(B, n, d)`), float32; returns winners `(m,)` or `(B, m)` and how many rows needed float64.

    Each float32 score is within gamma_d |q| |k| of the exact score of these float32 vectors
    (gamma_d = d u / (1 - d u), u = 2^-24). A row whose top two scores are further apart than twice
    the largest such error has the same argmax as in exact arithmetic; the other rows (near-ties, and the
    exact ties of d = 1 sphere keys) are recomputed in float64, whose products of float32 numbers are exact.
    Ties go to the lowest index, as in `rank.hardmax_rank`.
    """
    single = q.ndim == 2
    q, k = (q[None], k[None]) if single else (q, k)
    heads, m, d = q.shape
    n = k.shape[1]
    gamma = d * FLOAT32_UNIT / (1 - d * FLOAT32_UNIT)
    k_max = k.norm(dim=-1).amax(dim=-1)  # (B,)
    winners = torch.zeros(heads, m, dtype=torch.long)
    fallback = 0
    if n == 1:
        return (winners[0] if single else winners), 0
    rows = max(1, min(m, _BLOCK // max(heads * n, 1)))
    for start in range(0, m, rows):
        qc = q[:, start:start + rows]
        top = (qc @ k.transpose(1, 2)).topk(2, dim=-1)  # (B, rows, 2)
        winners[:, start:start + rows] = top.indices[..., 0]
        margin = top.values[..., 0] - top.values[..., 1]
        unsure = margin <= 2.5 * gamma * qc.norm(dim=-1) * k_max[:, None]
        if unsure.any():
            fallback += int(unsure.sum())
            for b in torch.unique(unsure.nonzero()[:, 0]).tolist():  # float64 for the uncertified rows of head b
                idx = unsure[b].nonzero()[:, 0]
                exact = (qc[b, idx].double() @ k[b].double().T).argmax(dim=-1)
                winners[b, start + idx] = exact
    return (winners[0] if single else winners), fallback


def distinct_counts(winners: torch.Tensor, n: int) -> torch.Tensor:
    """Hardmax rank of each head: distinct winners per row of `(B, m)` -> `(B,)` (as in `rank.hardmax_rank`)."""
    chosen = torch.zeros(winners.shape[0], n, dtype=torch.bool)
    chosen.scatter_(1, winners, True)
    return chosen.sum(dim=1)


def hardmax_point(n: int, d_head: int, keys: str, trials: int, seed: int) -> list[dict]:
    """Hardmax rank of `trials` random heads (n queries, n keys, dimension d_head); one row per head.

    Heads are drawn in batches of about 2^22 score entries, so small heads share one batched matmul.
    """
    gen = seeding.torch_generator(seeding.derive_seed(seed, "hardmax_sampling", n, d_head, keys))
    per_batch = max(1, _BLOCK // (n * n))
    rows = []
    for start in range(0, trials, per_batch):
        size = min(per_batch, trials - start)
        k = sample_keys(n, d_head, keys, gen, heads=size)
        q = torch.randn(size, n, d_head, generator=gen)
        winners, fallback = argmax_winners(q, k)
        ranks = distinct_counts(winners, n).tolist()
        rows.extend({"trial": start + i, "rank": int(r), "fallback_rows": fallback if i == 0 else 0}
                    for i, r in enumerate(ranks))
    return rows
