"""Constructed attention heads that break the 0.63 n barrier (or sit far below it), with closed-form ranks,
and the bounds that tie softmax to its hardmax and uniform limits.

Every function is float64 and returns plain tensors; `logits` are `(n, n)` or `(..., n, n)`, rows are
queries and columns are keys. Chapter 8 ("Where the barrier breaks") uses them; tests pin the closed forms.

Counterexamples (closed-form ranks proved in the docstrings):

  identity_head_logits     queries = keys = unit vectors:      hardmax rank n, every measure -> n as T -> 0
  previous_token_logits    queries = shifted sinusoidal keys:  hardmax rank n - 1; numerical n - 1; stable n / 2
  causal_attention         any logits under a causal mask:     exact rank n at every T > 0
  uniform_causal           the T -> inf limit under the mask:  exact rank n, yet hardmax rank 1
  uniform_attention        the T -> inf limit, no mask:        rank 1 under every measure

Bounds (chapter 8 derives them):

  gap_bound                ||softmax(L/T) - hardmax(L)||_F <= sqrt(2 sum_i eta_i^2), eta_i = sum_{j != a_i} e^{-(l_ia - l_ij)/T}
  hot_bound                ||softmax(L/T) - 11^T/n||_F <= sqrt(sum_i (||l_i - mean l_i|| / T * min(1/2, (e^rho_i - 1)/(rho_i n)))^2)
  By Weyl, |sigma_k(S) - sigma_k(H)| <= ||S - H||_2 <= ||S - H||_F for every k; by Mirsky the same holds for the
  l2 norm of the whole vector of singular-value differences.
"""

import math

import torch

from . import rank
from .attention import sinusoidal_frequencies, sinusoidal_table


# ---------------------------------------------------------------- hardmax matrices with known column counts
def hardmax_closed_form(counts) -> dict[str, float]:
    """Every rank measure of a hardmax (one 1 per row) matrix whose column j is chosen by `counts[j]` rows.

    H^T H = diag(m_j), so the singular values are sqrt(m_j). Hence
      hardmax = numerical (any rtol < 1 / sqrt(max m)) = #{j : m_j > 0},
      stable = sum m_j / max m_j = n_rows / max m_j,
      effective = exp(H(p)) with p_j = sqrt(m_j) / sum_k sqrt(m_k).
    """
    m = torch.as_tensor(counts, dtype=torch.float64)
    sigma = m.sqrt()
    p = sigma[sigma > 0] / sigma.sum()
    return {
        "hardmax": float((m > 0).sum()),
        "numerical": float((m > 0).sum()),
        "effective": float(torch.exp(-(p * p.log()).sum())),
        "stable": float(m.sum() / m.max()),
    }


def column_counts(logits: torch.Tensor) -> torch.Tensor:
    """How many rows pick each column as their argmax: `(..., n, m) -> (..., m)` float64 (`rank.argmax_counts`)."""
    return rank.argmax_counts(logits).to(torch.float64)


# ---------------------------------------------------------------- 1. identity head
def unit_vectors(n: int, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """n i.i.d. uniform points on the unit sphere of R^d: `(n, d)` float64 (d >= 2 keeps them distinct a.s.)."""
    if d < 2:
        raise ValueError(f"d must be >= 2 (on the 0-sphere only two unit vectors exist); got {d}")
    g = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return g / g.norm(dim=-1, keepdim=True)


def identity_head_logits(n: int, d_head: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Logits `(n, n)` of a head with W_q = W_k (here the identity) on unit-norm inputs: L = X X^T.

    Closed form: L_ii = 1 and L_ij = <x_i, x_j> < 1 for distinct unit vectors (Cauchy-Schwarz, equality only
    when x_j = x_i), so row i's argmax is i and the **hardmax rank is n** for any d_head >= 2. Every unit vector
    is a vertex of the convex hull of the others, which is why the hull argument that caps random heads fails.
    As T -> 0 the softmax tends to the identity matrix, whose rank is n under every measure; `gap_bound` says
    how small T must be (the margin is 1 - max_{i != j} <x_i, x_j>, which shrinks as n grows for fixed d_head).
    """
    x = unit_vectors(n, d_head, generator)
    return x @ x.T


# ---------------------------------------------------------------- 2. previous-token head
def shift_matrix(d: int, shift: int = 1, base: float = 10000.0) -> torch.Tensor:
    """The linear map `(d, d)` with p_i @ R = p_{i - shift} for the sinusoidal table: a rotation per frequency pair."""
    if d % 2:
        raise ValueError(f"d must be even (sin/cos pairs); got {d}")
    freq = sinusoidal_frequencies(d, base)
    c, s = torch.cos(shift * freq), torch.sin(shift * freq)
    R = torch.zeros(d, d, dtype=torch.float64)
    # sin((i-h)w) = sin(iw) cos(hw) - cos(iw) sin(hw);  cos((i-h)w) = cos(iw) cos(hw) + sin(iw) sin(hw)
    R[0::2, 0::2] = torch.diag(c)
    R[1::2, 0::2] = torch.diag(-s)
    R[0::2, 1::2] = torch.diag(s)
    R[1::2, 1::2] = torch.diag(c)
    return R


def positional_profile(n: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """f(m) = <p_i, p_{i+m}> = sum_k cos(m w_k) for m = 0 .. n: `(n + 1,)` float64 (independent of i)."""
    freq = sinusoidal_frequencies(d, base)
    return torch.cos(torch.arange(n + 1, dtype=torch.float64)[:, None] * freq).sum(-1)


def previous_token_logits(n: int, d_head: int, gain: float = 1.0, base: float = 10000.0) -> torch.Tensor:
    """Logits `(n, n)` of a previous-token head built from sinusoidal positions: q_i = p_i R = p_{i-1}, k_j = p_j.

    L_ij = gain * <p_{i-1}, p_j> = gain * f(i - 1 - j), a Toeplitz matrix. Since f(0) = d/2 > f(m) for every
    integer m != 0 (the k = 0 frequency is 1 radian, so cos(m) < 1), row i >= 1 picks column i - 1. Row 0 picks
    argmax_{j >= 0} f(1 + j), which is column 0 whenever f(1) > f(m) for 2 <= m <= n (`previous_token_condition`;
    with base 10000 it holds for d_head >= 12 at every n <= 512 and fails for d_head <= 10 once n >= 8).
    Then column 0 is chosen twice and column n - 1 never, so the column counts are (2, 1, ..., 1, 0):
      hardmax rank = numerical rank (T -> 0) = n - 1,  stable rank = n / 2,
      effective rank = exp(H(p)), p = (sqrt 2, 1, ..., 1) / (sqrt 2 + n - 2).
    A causal mask gives the same matrix (row 0 can only see itself).
    """
    R = shift_matrix(d_head, 1, base)  # (d, d); checks that d_head is even
    p = sinusoidal_table(n, d_head, base)
    queries = p @ R  # (n, d): row i is p_{i-1}
    return gain * queries @ p.T


def previous_token_condition(n: int, d_head: int, base: float = 10000.0) -> bool:
    """True when f(1) > f(m) for 2 <= m <= n, so that row 0 of the previous-token head picks column 0."""
    f = positional_profile(n, d_head, base)
    return bool(n < 2 or (f[1] > f[2:]).all())


def previous_token_counts(n: int) -> torch.Tensor:
    """The column counts (2, 1, ..., 1, 0) of the previous-token hardmax matrix, n >= 2."""
    counts = torch.ones(n, dtype=torch.float64)
    counts[0], counts[-1] = 2.0, 0.0
    return counts


# ---------------------------------------------------------------- 3. causal softmax
def causal_mask(n: int) -> torch.Tensor:
    """True above the diagonal (keys after the query): `(n, n)` bool."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def causal_attention(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(L / T) with keys j > i masked: `(..., n, n)` float64, lower triangular.

    Closed form: the diagonal entries are positive at every finite T, so det = prod_i A_ii > 0 and the
    **exact rank is n** whatever the logits, weights or temperature.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature!r}")
    n = logits.shape[-1]
    masked = logits.to(torch.float64).masked_fill(causal_mask(n), float("-inf"))
    return torch.softmax(masked / temperature, dim=-1)


def uniform_causal(n: int) -> torch.Tensor:
    """The T -> infinity limit of causal softmax: A_ij = 1 / (i + 1) for j <= i (0-based). `(n, n)` float64.

    Exact rank n; its inverse is lower bidiagonal with (A^-1)_ii = i + 1 and (A^-1)_{i,i-1} = -i, so it is
    explicitly invertible. Every row's maximum is a tie that includes column 0, so its hardmax rank is 1.
    """
    i = torch.arange(n, dtype=torch.float64)
    return torch.tril(torch.ones(n, n, dtype=torch.float64)) / (i[:, None] + 1)


def uniform_causal_inverse(n: int) -> torch.Tensor:
    """The closed-form inverse of `uniform_causal(n)`: lower bidiagonal, diagonal i + 1, subdiagonal -i."""
    i = torch.arange(n, dtype=torch.float64)
    return torch.diag(i + 1) - torch.diag(i[1:], -1)


def expected_causal_hardmax_rank(n: int) -> float:
    """E[hardmax rank] = (n + 1) / 2 under a causal mask when each row's visible logits are i.i.d. continuous.

    Row i picks each of its i + 1 visible columns with probability 1 / (i + 1), independently of the other rows,
    so column j is never chosen with probability prod_{i=j}^{n-1} i / (i + 1) = j / n, and
    E[rank] = sum_j (1 - j / n) = (n + 1) / 2.
    """
    return (n + 1) / 2


# ---------------------------------------------------------------- 4. uniform (high-temperature) limit
def uniform_attention(n: int) -> torch.Tensor:
    """11^T / n, the T -> infinity limit of unmasked softmax: rank 1 under every measure. `(n, n)` float64.

    Its only non-zero singular value is 1; effective and stable ranks are 1; all argmaxes tie and go to column 0.
    """
    return torch.full((n, n), 1.0 / n, dtype=torch.float64)


# ---------------------------------------------------------------- bounds
def margins(logits: torch.Tensor) -> torch.Tensor:
    """Per-row logit margin: largest minus second largest, `(..., n, m) -> (..., n)` float64 (0 on ties)."""
    top2 = logits.to(torch.float64).topk(2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def row_tail_mass(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """eta_i = sum_{j != a_i} exp(-(l_{i a_i} - l_ij) / T) for each row: `(..., n)` float64 (a_i the argmax).

    1 - softmax(l/T)_{a_i} = eta_i / (1 + eta_i) <= eta_i, and eta_i <= (n - 1) exp(-margin_i / T).
    """
    logits = logits.to(torch.float64)
    top = logits.max(dim=-1, keepdim=True).values
    return torch.exp((logits - top) / temperature).sum(-1) - 1.0


def gap_bound(logits: torch.Tensor, temperature: float, crude: bool = False) -> torch.Tensor:
    """Upper bound on ||softmax(L/T) - hardmax(L)||_F from the logits alone: `(..., n, n) -> (...)`.

    Row i: with eps_i = 1 - s_{a_i}, the row error is (-eps_i at a_i, s_j elsewhere), whose squared l2 norm is
    eps_i^2 + sum_{j != a} s_j^2 <= eps_i^2 + (sum_{j != a} s_j)^2 = 2 eps_i^2. Summing rows,
    ||S - H||_F <= sqrt(2 sum_i eps_i^2) <= sqrt(2 sum_i eta_i^2). `crude=True` uses eta_i <= (n-1) e^{-margin_i/T}.
    Assumes the argmax of every row is unique (margin > 0).
    """
    if crude:
        n = logits.shape[-1]
        eta = (n - 1) * torch.exp(-margins(logits) / temperature)
    else:
        eta = row_tail_mass(logits, temperature)
    eps = eta / (1 + eta)  # exact 1 - s_{a_i} (an upper bound on it when crude); increasing in eta
    return torch.sqrt(2 * (eps**2).sum(-1))


def hot_bound(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Upper bound on ||softmax(L/T) - 11^T/n||_F from the logits: `(..., n, n) -> (...)`.

    Along the path t -> softmax(t l / T), t in [0, 1], the Jacobian J = diag(s) - s s^T has v^T J v = Var_s(v),
    which is <= 1/2 for a unit v (Popoviciu: range^2 / 4 with range <= sqrt 2) and <= max_i s_i (<= e^{t rho} / n,
    rho = (max l - min l) / T). Softmax is shift-invariant, so with l_c = l - mean(l) each row moves at most
      ||l_c||_2 / T * min(1/2, (e^rho - 1) / (rho n))
    from the uniform row; the second term tends to 1/n as T -> infinity, the exact first-order rate.
    """
    logits = logits.to(torch.float64)
    n = logits.shape[-1]
    centred = logits - logits.mean(dim=-1, keepdim=True)
    rho = (logits.max(dim=-1).values - logits.min(dim=-1).values) / temperature
    slope = torch.where(rho > 1e-12, torch.expm1(rho) / (rho.clamp_min(1e-12) * n), torch.full_like(rho, 1.0 / n))
    per_row = centred.norm(dim=-1) / temperature * torch.clamp(slope, max=0.5)
    return per_row.norm(dim=-1)


def certified_temperature(logits: torch.Tensor, rtol: float = rank.DEFAULT_RTOL) -> float:
    """A temperature below which the numerical rank at `rtol` provably equals the hardmax rank, for one `(n, n)`.

    H has singular values sqrt(m_j) (>= 1) and zeros. If e = ||S - H||_2 satisfies e <= rtol (sqrt(m_max) - e)
    and 1 - e > rtol (sqrt(m_max) + e), Weyl's inequality puts exactly rank(H) singular values of S above
    rtol * sigma_1(S). Both hold when e <= e* = min(rtol, 1 - 2 rtol sqrt(m_max)) / (1 + rtol) (using
    sqrt(m_max) >= 1). With the crude bound e <= sqrt(2n) (n - 1) e^{-margin_min / T}, this gives
    T* = margin_min / log(sqrt(2n) (n - 1) / e*). Returns 0 when a row has a tie.
    """
    logits = logits.to(torch.float64)
    n = logits.shape[-1]
    m_max = float(column_counts(logits).max())
    e_star = min(rtol, 1 - 2 * rtol * math.sqrt(m_max)) / (1 + rtol)
    margin = float(margins(logits).min())
    if margin <= 0 or e_star <= 0:
        return 0.0
    return margin / math.log(math.sqrt(2 * n) * max(n - 1, 1) / e_star)


# ---------------------------------------------------------------- Dong et al. rank collapse
def collapse_residual(x: torch.Tensor) -> torch.Tensor:
    """Relative distance of token states `(..., n, d)` from the nearest matrix 1 x^T: `(...)` float64.

    res(X) = X - 1 x^T with x minimising ||res||_F, i.e. x = the mean token (Dong, Cordonnier & Loukas, 2021,
    measure the same residual in a composite l1/l_inf norm). Returns ||res||_F / ||X||_F, in [0, 1]; 0 means
    every token is the same vector (rank collapse), and the value is scale-free.
    """
    x = x.to(torch.float64)
    res = x - x.mean(dim=-2, keepdim=True)
    total = x.norm(dim=(-2, -1))
    return torch.where(total > 0, res.norm(dim=(-2, -1)) / torch.where(total > 0, total, torch.ones_like(total)),
                       torch.zeros_like(total))
