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

from .errors import ArgumentError
from .threads import torch_threads

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


def _map_batch(fn, tensor: torch.Tensor) -> torch.Tensor:
    """`fn` over the matrices of `(..., n, m)`, returning `(..., k)`.

    On the CPU, torch runs a batch of LAPACK calls one after the other; a large batch is split across
    `torch.get_num_threads()` worker threads instead (LAPACK releases the GIL), each worker using one
    intra-op thread so that the pools do not oversubscribe the cores. The values are the same.
    """
    workers = torch.get_num_threads()
    if tensor.device.type != "cpu" or workers < 2 or tensor.ndim < 3 or tensor.shape[:-2].numel() < _PARALLEL_MIN_BATCH:
        return fn(tensor)
    from concurrent.futures import ThreadPoolExecutor

    flat = tensor.reshape(-1, *tensor.shape[-2:])

    def one_thread(chunk):
        with torch_threads(1):
            return fn(chunk)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rank") as pool:
        parts = list(pool.map(one_thread, flat.chunk(4 * workers)))
    return torch.cat(parts).reshape(*tensor.shape[:-2], -1)


def singular_values(matrix) -> torch.Tensor:
    """Singular values in float64, descending: `(..., n, m) -> (..., min(n, m))`."""
    return _map_batch(torch.linalg.svdvals, as_tensor(matrix).to(torch.float64))


def _check_tolerances(rtol, atol) -> None:
    if rtol is None and atol is None:
        raise ValueError("numerical_rank needs a tolerance: give rtol (relative) and/or atol (absolute)")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (value >= 0):
            raise ValueError(f"{name} must be a non-negative number; got {value!r}")


def _threshold(top: torch.Tensor, rtol, atol) -> torch.Tensor:
    """`max(rtol * top, atol)` elementwise, with a missing tolerance left out."""
    threshold = torch.zeros_like(top)
    if rtol is not None:
        threshold = torch.maximum(threshold, rtol * top)
    if atol is not None:
        threshold = torch.maximum(threshold, torch.full_like(threshold, atol))
    return threshold


def numerical_rank_from_sigma(sigma: torch.Tensor, rtol: float | None = DEFAULT_RTOL,
                              atol: float | None = None) -> torch.Tensor:
    """Count of singular values `(..., k)` (descending) above `max(rtol * sigma_1, atol)`: `-> (...)` int64."""
    _check_tolerances(rtol, atol)
    if sigma.shape[-1] == 0:
        return torch.zeros(sigma.shape[:-1], dtype=torch.int64, device=sigma.device)
    return (sigma > _threshold(sigma[..., 0], rtol, atol).unsqueeze(-1)).sum(-1)


def _gram_eigenvalues(tensor: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of the smaller Gram matrix, `(b, n, m) -> (b, min(n, m))` ascending.

    They are the squared singular values. A row of NaN marks a matrix whose Gram matrix is not
    finite: NaN or infinite entries, or entries above ~1e154 that overflow when squared.
    """
    gram = tensor @ tensor.mT if tensor.shape[-2] <= tensor.shape[-1] else tensor.mT @ tensor
    overflowed = ~torch.isfinite(gram.diagonal(dim1=-2, dim2=-1)).all(-1)  # NaN/inf anywhere shows on the diagonal
    gram[overflowed] = 0.0
    eigen = torch.linalg.eigvalsh(gram)
    eigen[overflowed] = float("nan")
    return eigen


def _gram_rank(tensor: torch.Tensor, rtol, atol) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank from the eigenvalues of the Gram matrix, and which matrices it cannot decide.

    `sigma_i^2` are the eigenvalues of `A A^T` (the smaller Gram matrix), and a symmetric
    eigensolver is about half the work of an SVD. Forming and diagonalising `A A^T` in float64
    moves each eigenvalue by at most ~ p q eps sigma_1^2 (p, q the short and long sides), so a
    matrix with an eigenvalue within that slack of the squared threshold is "undecided", and so is
    one whose Gram matrix overflowed, or comes within a factor 1/eps of either end of the float64 range
    (sigma_1^2 below tiny / eps ~ 1e-292 or above max * eps ~ 4e292): near the subnormals the rounding of
    A A^T is absolute, not relative, and eigenvalues are lost (found by comparing with numpy's SVD at entries
    ~1e-156), and near overflow the eigensolver's internal scaling loses them. `tensor`: `(b, n, m)` float64 -> ranks `(b,)` int64, undecided `(b,)` bool.
    """
    short, long = sorted(tensor.shape[-2:])
    eigen = _map_batch(_gram_eigenvalues, tensor)                        # (b, p) ascending
    overflowed = torch.isnan(eigen).any(-1)
    if overflowed.any() and not torch.isfinite(tensor[overflowed]).all():
        raise ValueError("numerical_rank: matrix contains NaN or infinite entries")
    eigen = eigen.nan_to_num(0.0)
    top = eigen[..., -1].clamp(min=0)
    squared_threshold = _threshold(top.sqrt(), rtol, atol).square().unsqueeze(-1)
    slack = (2 * short * (long + 1) * torch.finfo(torch.float64).eps * top).unsqueeze(-1)
    finfo = torch.finfo(torch.float64)
    out_of_range = (top < finfo.tiny / finfo.eps) | (top > finfo.max * finfo.eps)
    undecided = ((eigen - squared_threshold).abs() <= slack).any(-1) | overflowed | out_of_range
    return (eigen > squared_threshold).sum(-1), undecided


def numerical_rank(matrix, rtol: float | None = DEFAULT_RTOL, atol: float | None = None) -> torch.Tensor:
    """Count of singular values above `max(rtol * sigma_1, atol)`: `(..., n, m) -> (...)` int64.

    At least one of `rtol` and `atol` must be given; a zero matrix has rank 0. The count equals the
    float64 SVD count: it is read from the Gram eigenvalues, and the matrices where rounding could
    change it (an eigenvalue too close to the threshold, e.g. at tiny tolerances) are recomputed by SVD.
    """
    _check_tolerances(rtol, atol)
    tensor = as_tensor(matrix).to(torch.float64)
    batch_shape = tensor.shape[:-2]
    if min(tensor.shape[-2:]) == 0:
        return torch.zeros(batch_shape, dtype=torch.int64, device=tensor.device)
    flat = tensor.reshape(-1, *tensor.shape[-2:])
    ranks, undecided = _gram_rank(flat, rtol, atol)
    if undecided.any():
        ranks[undecided] = numerical_rank_from_sigma(singular_values(flat[undecided]), rtol, atol)
    return ranks.reshape(batch_shape)


def argmax_counts(matrix) -> torch.Tensor:
    """How many rows have their argmax in each column: `(..., n, m) -> (..., m)` int64.

    Ties go to the lowest column index, as in `torch.argmax`. Softmax keeps each row's argmax, so logits and
    probabilities give the same counts.
    """
    tensor = as_tensor(matrix)
    winners = tensor.argmax(dim=-1)                                      # (..., n)
    counts = torch.zeros(tensor.shape[:-2] + tensor.shape[-1:], dtype=torch.int64, device=tensor.device)
    return counts.scatter_add_(-1, winners, torch.ones_like(winners))


def hardmax_rank(matrix) -> torch.Tensor:
    """Number of distinct argmax columns over the rows: `(..., n, m) -> (...)` int64.

    This is the exact rank of the hardmax matrix (one 1 per row at its argmax); see `argmax_counts`.
    """
    return (argmax_counts(matrix) > 0).sum(-1)


def hardmax_rank_prefixes(matrix, sizes) -> torch.Tensor:
    """Hardmax rank of every leading s x s block of a causal matrix, for s in `sizes`: `(..., n, n) -> (..., S)` int64.

    In a causal matrix (logits -inf, or probabilities 0, above the diagonal) row i's argmax lies at a column <= i, so
    the leading s x s block has the same row argmaxes as the first s rows: the block is the matrix a causal model
    computes on the first s tokens. A column counts in block s when the first row that picks it lies below s.
    """
    tensor = as_tensor(matrix)
    n = tensor.shape[-1]
    if tensor.shape[-2] != n:
        raise ArgumentError("matrix", tuple(tensor.shape), "square (..., n, n) matrices")
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1 or max(sizes) > n:
        raise ArgumentError("sizes", sizes, f"block sizes from 1 to {n}")
    winners = tensor.argmax(dim=-1)                                          # (..., n)
    rows = torch.arange(n, device=tensor.device).expand_as(winners)
    if (winners > rows).any():
        raise ArgumentError("matrix", "a row whose argmax lies above the diagonal", "a causal (lower-triangular) matrix")
    first = torch.full_like(winners, n).scatter_reduce_(-1, winners, rows, reduce="amin")   # (..., n) first row per column
    return torch.stack([(first < s).sum(-1) for s in sizes], dim=-1)


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


def energy_rank_from_sigma(sigma: torch.Tensor, share: float = 0.9) -> torch.Tensor:
    """The energy rank: the smallest r whose top r squared singular values hold `share` of their total,
    `(..., k)` -> `(...)` (the rank a compression at that share of the "energy" keeps)."""
    if not 0 < share <= 1:
        raise ArgumentError("share", share, "a number in (0, 1]")
    energy = sigma.double().pow(2)
    cumulative = energy.cumsum(-1) / energy.sum(-1, keepdim=True).clamp(min=1e-300)
    return (cumulative < share - 1e-12).sum(-1) + 1


def effective_rank(matrix) -> torch.Tensor:
    """Roy–Vetterli effective rank `exp(H(sigma / sum sigma))`: `(..., n, m) -> (...)` float64."""
    return effective_rank_from_sigma(singular_values(matrix))


def stable_rank(matrix) -> torch.Tensor:
    """Stable rank `||A||_F^2 / ||A||_2^2`: `(..., n, m) -> (...)` float64."""
    return stable_rank_from_sigma(singular_values(matrix))


MEASURES = ("numerical", "hardmax", "effective", "stable")


def label(measure: str, rtol: float | None = None) -> str:
    """The book's one label of a measure: "numerical@1e-03" for the numerical rank at rtol 1e-3, else the name."""
    if measure not in MEASURES:
        raise ArgumentError("measure", measure, f"one of {list(MEASURES)}")
    if measure == "numerical":
        if rtol is None or not rtol > 0:
            raise ArgumentError("rtol", rtol, "a number > 0 (the numerical rank's relative tolerance)")
        return f"numerical@{rtol:.0e}"
    return measure


def labels(measures=MEASURES, rtols=(DEFAULT_RTOL,)) -> tuple[str, ...]:
    """Labels of `measures` in order, the numerical rank once per tolerance: ("hardmax", "numerical@1e-03", ...)."""
    out = []
    for m in measures:
        out += [label(m, t) for t in rtols] if m == "numerical" else [label(m)]
    return tuple(out)


def title(measure_label: str) -> str:
    """A label in words, for legends and captions: "numerical rank, rtol 1e-03", "effective rank"."""
    name, _, rtol = measure_label.partition("@")
    return f"{name} rank, rtol {rtol}" if rtol else f"{name} rank"


def _check_measures(measures, rtols) -> tuple[tuple[str, ...], tuple[float, ...]]:
    measures = tuple(measures)
    if not measures or any(m not in MEASURES for m in measures):
        raise ArgumentError("measures", measures, f"a non-empty tuple from {list(MEASURES)}")
    rtols = tuple(float(t) for t in rtols)
    if "numerical" in measures and (not rtols or not all(t > 0 for t in rtols)):
        raise ArgumentError("rtols", rtols, "a non-empty tuple of numbers > 0")
    return measures, rtols


def measures_from_sigma(sigma: torch.Tensor, measures=MEASURES, rtols=(DEFAULT_RTOL,),
                        hardmax: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Every asked-for measure from singular values `(..., k)` (descending): {label: `(...)` float64}.

    The hardmax rank is not a function of sigma: pass it as `hardmax` `(...)` when "hardmax" is asked for.
    """
    measures, rtols = _check_measures(measures, rtols)
    out = {}
    for m in measures:
        if m == "numerical":
            for t in rtols:
                out[label(m, t)] = numerical_rank_from_sigma(sigma, t).to(torch.float64)
        elif m == "hardmax":
            if hardmax is None:
                raise ArgumentError("hardmax", None, "the hardmax ranks `(...)` when measures include \"hardmax\"")
            out[m] = hardmax.to(torch.float64)
        elif m == "effective":
            out[m] = effective_rank_from_sigma(sigma)
        else:
            out[m] = stable_rank_from_sigma(sigma)
    return out


def measures(matrix, measures=MEASURES, rtols=(DEFAULT_RTOL,)) -> dict[str, torch.Tensor]:
    """Every asked-for measure of a batch `(..., n, m)`: {label: `(...)` float64}, labels as in `labels`.

    One float64 SVD serves every spectral measure; the hardmax rank needs none. When the numerical rank at a
    single tolerance is the only spectral measure, it takes the cheaper Gram route of `numerical_rank` (same count).
    """
    measures, rtols = _check_measures(measures, rtols)
    hard = hardmax_rank(matrix) if "hardmax" in measures else None
    spectral = [m for m in measures if m != "hardmax"]
    if spectral == ["numerical"] and len(rtols) == 1:           # the Gram route: half an SVD, the same count
        out = {"hardmax": hard} if hard is not None else {}
        out[label("numerical", rtols[0])] = numerical_rank(matrix, rtols[0])
        return {key: out[key].to(torch.float64) for key in labels(measures, rtols)}
    sigma = singular_values(matrix) if spectral else torch.zeros(as_tensor(matrix).shape[:-2] + (0,))
    return measures_from_sigma(sigma, measures, rtols, hardmax=hard)


def hardmax_matrix_measures(logits, measures=MEASURES, rtols=(DEFAULT_RTOL,)) -> dict[str, torch.Tensor]:
    """Every measure of the hardmax (one-hot argmax) matrix of `logits` `(..., n, m)`, without an SVD.

    If column j is the argmax of m_j rows, the one-hot matrix has orthogonal columns of norms sqrt(m_j), so its
    singular values are the sorted sqrt(m_j). {label: `(...)` float64}.
    """
    counts = argmax_counts(logits)                                       # (..., m)
    sigma = counts.to(torch.float64).sqrt().sort(dim=-1, descending=True).values
    return measures_from_sigma(sigma, measures, rtols, hardmax=(counts > 0).sum(-1))
