"""Random attention matrices: random inputs X, Gaussian W_q, W_k, softmax or hardmax.

    A = softmax(X W_q W_k^T X^T / T),  X: (n, d_model),  W_q, W_k: (d_model, d_head)

Everything is float64 and batched: a call returns `(batch, n, n)`.
"""

import math

import torch

INPUT_KINDS = ("gaussian", "orthonormal", "near_orthonormal", "anisotropic", "sphere")


def sinusoidal_frequencies(dim: int, base: float = 10000.0, dtype=torch.float64) -> torch.Tensor:
    """The frequencies w_k = base^(-2k/dim) of the sinusoidal table, k = 0 .. ceil(dim / 2) - 1: `(ceil(dim / 2),)`."""
    return torch.exp(torch.arange(0, dim, 2, dtype=dtype) * (-math.log(base) / dim))


def sinusoidal_table(length: int, dim: int, base: float = 10000.0, dtype=torch.float64) -> torch.Tensor:
    """The Vaswani et al. table `(length, dim)`: p_i[2k] = sin(i w_k), p_i[2k+1] = cos(i w_k) (odd dim: no last cos).

    The book's one definition, used by the models (float32) and by the constructed heads (float64).
    """
    position = torch.arange(length, dtype=dtype)[:, None]
    angle = position * sinusoidal_frequencies(dim, base, dtype)  # (length, ceil(dim / 2))
    table = torch.zeros(length, dim, dtype=dtype)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)[:, : dim // 2]
    return table


def init_std(d_model: int) -> float:
    """The standard initialization scale for a projection with fan-in `d_model`: 1 / sqrt(d_model)."""
    return 1.0 / math.sqrt(d_model)


def random_inputs(
    n: int,
    d_model: int,
    kind: str = "gaussian",
    batch: int = 1,
    generator: torch.Generator | None = None,
    perturbation: float = 0.05,
    anisotropy: float = 1.0,
) -> torch.Tensor:
    """Token inputs `(batch, n, d_model)` float64 with rows of norm about 1.

    kind: "gaussian" (i.i.d. N(0, 1/d_model) entries), "orthonormal" (orthonormal rows, needs
    d_model >= n), "near_orthonormal" (orthonormal plus `perturbation` times Gaussian noise),
    "anisotropic" (Gaussian with covariance eigenvalues proportional to k^-anisotropy), or
    "sphere" (Gaussian rows projected onto the unit sphere).
    """
    if kind not in INPUT_KINDS:
        raise ValueError(f"kind must be one of {INPUT_KINDS}; got {kind!r}")
    if kind in ("orthonormal", "near_orthonormal") and d_model < n:
        raise ValueError(f"kind={kind!r} needs d_model >= n; got d_model={d_model}, n={n}")
    g = torch.randn(batch, n, d_model, generator=generator, dtype=torch.float64)
    if kind == "gaussian":
        return g / math.sqrt(d_model)
    if kind == "sphere":
        return g / g.norm(dim=-1, keepdim=True)
    if kind == "anisotropic":
        spectrum = torch.arange(1, d_model + 1, dtype=torch.float64) ** (-anisotropy)
        return g * torch.sqrt(spectrum / spectrum.sum())
    square = torch.randn(batch, d_model, n, generator=generator, dtype=torch.float64)
    q, _ = torch.linalg.qr(square)  # (batch, d_model, n), orthonormal columns
    x = q.transpose(-1, -2)
    if kind == "near_orthonormal":
        x = x + perturbation * g / math.sqrt(d_model)
    return x


def random_logits(
    n: int,
    d_head: int,
    d_model: int | None = None,
    inputs: str = "gaussian",
    weight_std: float | None = None,
    batch: int = 1,
    generator: torch.Generator | None = None,
    **input_options,
) -> torch.Tensor:
    """Raw scores `X W_q W_k^T X^T` shaped `(batch, n, n)`, before any temperature.

    W_q, W_k have i.i.d. N(0, weight_std^2) entries; `weight_std` defaults to `init_std(d_model)`.
    `d_model` defaults to max(n, d_head).
    """
    if d_model is None:
        d_model = max(n, d_head)
    if weight_std is None:
        weight_std = init_std(d_model)
    x = random_inputs(n, d_model, inputs, batch, generator, **input_options)
    w_q = weight_std * torch.randn(batch, d_model, d_head, generator=generator, dtype=torch.float64)
    w_k = weight_std * torch.randn(batch, d_model, d_head, generator=generator, dtype=torch.float64)
    queries, keys = x @ w_q, x @ w_k  # (batch, n, d_head)
    return queries @ keys.transpose(-1, -2)


def softmax_attention(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Row-wise softmax(logits / temperature): `(..., n, m) -> (..., n, m)`."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature!r} (use hardmax_attention for T -> 0)")
    return torch.softmax(logits.to(torch.float64) / temperature, dim=-1)


def hardmax_attention(logits: torch.Tensor) -> torch.Tensor:
    """The zero-temperature limit: a one-hot row at each argmax (ties to the lowest index)."""
    winners = logits.argmax(dim=-1, keepdim=True)
    return torch.zeros_like(logits, dtype=torch.float64).scatter_(-1, winners, 1.0)


def random_attention(
    n: int,
    d_head: int,
    temperature: float | None = None,
    hardmax: bool = False,
    **logit_options,
) -> torch.Tensor:
    """Random attention probabilities `(batch, n, n)`; temperature defaults to sqrt(d_head).

    Other keyword arguments go to `random_logits` (d_model, inputs, weight_std, batch, generator, ...).
    """
    logits = random_logits(n, d_head, **logit_options)
    if hardmax:
        return hardmax_attention(logits)
    return softmax_attention(logits, math.sqrt(d_head) if temperature is None else temperature)
