"""Rank measures for attention matrices, batched over any leading dimensions.

Every function takes a numpy array or torch tensor shaped `(..., n, m)` and returns a
torch tensor shaped `(...)`. Singular values are always computed in float64.

Measures (see chapter 1):
  numerical_rank  number of singular values with  sigma_i > max(rtol * sigma_1, atol)
  hardmax_rank    number of distinct argmax columns over the rows (zero-temperature rank)
  effective_rank  Roy & Vetterli (2007): exp(entropy of sigma / sum(sigma)); no tolerance
  stable_rank     ||A||_F^2 / ||A||_2^2; no tolerance
"""

import numpy as np
import torch

DEFAULT_RTOL = 1e-3


def as_tensor(matrix) -> torch.Tensor:
    """A torch tensor view of a numpy array or tensor, with at least two dimensions."""
    tensor = torch.as_tensor(matrix) if isinstance(matrix, np.ndarray) else matrix
    if not isinstance(tensor, torch.Tensor):
        tensor = torch.as_tensor(np.asarray(matrix))
    if tensor.ndim < 2:
        raise ValueError(f"matrix must have shape (..., n, m); got shape {tuple(tensor.shape)}")
    return tensor


_PARALLEL_MIN_BATCH = 64


def singular_values(matrix) -> torch.Tensor:
    """Singular values in float64, descending: `(..., n, m) -> (..., min(n, m))`.

    On the CPU, torch runs a batch of SVDs one after the other; a large batch is split across
    `torch.get_num_threads()` worker threads instead (LAPACK releases the GIL), with the same values.
    """
    tensor = as_tensor(matrix).to(torch.float64)
    workers = torch.get_num_threads()
    if tensor.device.type != "cpu" or workers < 2 or tensor.ndim < 3 or tensor.shape[:-2].numel() < _PARALLEL_MIN_BATCH:
        return torch.linalg.svdvals(tensor)
    flat = tensor.reshape(-1, *tensor.shape[-2:])
    chunks = flat.chunk(4 * workers)
    with _svd_pool(workers) as pool:
        parts = list(pool.map(torch.linalg.svdvals, chunks))
    return torch.cat(parts).reshape(*tensor.shape[:-2], -1)


def _svd_pool(workers: int):
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="svd")


def numerical_rank(matrix, rtol: float | None = DEFAULT_RTOL, atol: float | None = None) -> torch.Tensor:
    """Count of singular values above `max(rtol * sigma_1, atol)`: `(..., n, m) -> (...)` int64.

    At least one of `rtol` and `atol` must be given; a zero matrix has rank 0.
    """
    if rtol is None and atol is None:
        raise ValueError("numerical_rank needs a tolerance: give rtol (relative) and/or atol (absolute)")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (value >= 0):
            raise ValueError(f"{name} must be a non-negative number; got {value!r}")
    sigma = singular_values(matrix)
    threshold = torch.zeros(sigma.shape[:-1], dtype=sigma.dtype, device=sigma.device)
    if sigma.shape[-1] > 0:
        if rtol is not None:
            threshold = torch.maximum(threshold, rtol * sigma[..., 0])
        if atol is not None:
            threshold = torch.maximum(threshold, torch.full_like(threshold, atol))
    return (sigma > threshold.unsqueeze(-1)).sum(-1)


def hardmax_rank(matrix) -> torch.Tensor:
    """Number of distinct argmax columns over the rows: `(..., n, m) -> (...)` int64.

    This is the exact rank of the hardmax matrix (one 1 per row at its argmax). Ties go to the
    lowest column index, as in `torch.argmax`. It works on logits or on probabilities alike,
    since softmax preserves each row's argmax.
    """
    tensor = as_tensor(matrix)
    winners = tensor.argmax(dim=-1)
    chosen = torch.zeros(tensor.shape[:-2] + tensor.shape[-1:], dtype=torch.bool, device=tensor.device)
    chosen.scatter_(-1, winners, True)
    return chosen.sum(-1)


def effective_rank_from_sigma(sigma: torch.Tensor) -> torch.Tensor:
    """Effective rank from singular values `(..., k) -> (...)`; 0 for a zero matrix."""
    total = sigma.sum(-1, keepdim=True)
    p = sigma / torch.where(total > 0, total, torch.ones_like(total))
    entropy = -(torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))).sum(-1)
    return torch.where(total.squeeze(-1) > 0, torch.exp(entropy), torch.zeros_like(entropy))


def stable_rank_from_sigma(sigma: torch.Tensor) -> torch.Tensor:
    """Stable rank from singular values `(..., k) -> (...)`; 0 for a zero matrix."""
    top = sigma[..., 0] ** 2
    return torch.where(top > 0, (sigma**2).sum(-1) / torch.where(top > 0, top, torch.ones_like(top)), torch.zeros_like(top))


def effective_rank(matrix) -> torch.Tensor:
    """Roy–Vetterli effective rank `exp(H(sigma / sum sigma))`: `(..., n, m) -> (...)` float64."""
    return effective_rank_from_sigma(singular_values(matrix))


def stable_rank(matrix) -> torch.Tensor:
    """Stable rank `||A||_F^2 / ||A||_2^2`: `(..., n, m) -> (...)` float64."""
    return stable_rank_from_sigma(singular_values(matrix))


MEASURES = ("numerical", "hardmax", "effective", "stable")


def all_ranks(matrix, rtol: float = DEFAULT_RTOL) -> dict[str, torch.Tensor]:
    """Every measure for a batch `(..., n, n)`, sharing one SVD; values shaped `(...)` float64."""
    sigma = singular_values(matrix)
    return {
        "numerical": (sigma > rtol * sigma[..., :1]).sum(-1).to(torch.float64),
        "hardmax": hardmax_rank(matrix).to(torch.float64),
        "effective": effective_rank_from_sigma(sigma),
        "stable": stable_rank_from_sigma(sigma),
    }
