"""Direct optimisation of query and key codes: the smallest dimension at which *some* code puts mean target mass
1 - eps on a pattern, with every logit bounded by L (query and key norms held at sqrt(L)).

    found = optimise_code(n=256, d=8, L=16.0, pattern="permutation", seed=0)   # CodeResult: mean and min mass
    search = smallest_dim(n=256, L=16.0, eps=0.1, pattern="permutation", seed=0, d_max=64)

Patterns (the target keys of row i; `margin.target_mass` reads the mass on them):
    "permutation"  one key per row, all distinct (with free vectors every permutation is the identity relabelled)
    "sparse"       k keys per row, a k-regular pattern (row i: keys pi(i), pi(i + 1), ..., pi(i + k - 1) mod n for a
                   random permutation pi), Likhosherstov's setting; the row's mass is spread over its k keys
    "tied"         one key per row, the shift i -> i - 1 (mod n) of chapter 05's copy task, with q_i = W_q p_i and
                   k_j = W_k p_j from fixed position vectors p (sinusoids of width POSITION_WIDTH), as in a head

Training minimises the cross-entropy of the target mass (log of the mass on the targets) with Adam; the free codes
start from a random code (q_i along its target key), which the margin theory's `random_code_dim` covers, so the
search starts where the upper bound is achieved. Rows are sampled ROWS_PER_STEP at a time for large n; the reported
masses are exact, over every row.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import margin
from .allocator import keep_freed_memory
from .errors import ArgumentError

PATTERNS = ("permutation", "sparse", "tied")
POSITION_WIDTH = 64        # width of the fixed position vectors of the tied pattern
ROWS_PER_STEP = 256        # rows per optimisation step when n is larger (a cheap, unbiased gradient)
LEARNING_RATE = 0.05


@dataclass(frozen=True)
class CodeResult:
    """One optimised code: its mean and minimum target mass over all rows, the steps taken and the final loss."""

    n: int
    d: int
    L: float
    pattern: str
    mean_mass: float
    min_mass: float
    steps: int
    loss: float


def _targets(n: int, pattern: str, k: int, gen: torch.Generator) -> torch.Tensor:
    """The (n, n) boolean target mask of `pattern`."""
    mask = torch.zeros(n, n, dtype=torch.bool)
    rows = torch.arange(n)
    if pattern == "permutation":
        mask[rows, rows] = True
    elif pattern == "tied":
        mask[rows, (rows - 1) % n] = True
    else:
        pi = torch.randperm(n, generator=gen)
        for j in range(k):
            mask[rows, pi[(rows + j) % n]] = True
    return mask


def _positions(n: int, width: int = POSITION_WIDTH) -> torch.Tensor:
    """Sinusoidal position vectors (n, width), the fixed inputs of the tied pattern."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float64) / width)
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)


def _check(n, d, L, pattern, k, steps):
    if pattern not in PATTERNS:
        raise ArgumentError("pattern", pattern, f"one of {list(PATTERNS)}")
    if not (isinstance(n, int) and n >= 2):
        raise ArgumentError("n", n, "an integer >= 2")
    if not (isinstance(d, int) and d >= 1):
        raise ArgumentError("d", d, "an integer >= 1")
    if not L > 0:
        raise ArgumentError("L", L, "a logit scale > 0")
    if not (isinstance(k, int) and 1 <= k <= n and (k == 1 or pattern == "sparse")):
        raise ArgumentError("k", k, "1, or for the sparse pattern an integer from 1 to n")
    if not (isinstance(steps, int) and steps >= 1):
        raise ArgumentError("steps", steps, "an integer >= 1")


class _TargetLoss(torch.autograd.Function):
    """-mean over rows of log(softmax mass on the row's targets) of the logits q k^T, written out with its gradient.

    q (r, d), k (n, d); targets (r,) the one target key of each row, or an (r, n) boolean mask of them. The gradient
    of a row's loss with respect to its logits is its softmax minus its softmax restricted to the targets (a one-hot
    row for one target). Written by hand for speed at large n (benchmarks/bench_code_search.py): autograd's graph of
    the same loss fills several more (r, n) tensors in its backward pass (the logsumexp's softmax, the gather's
    one-hot, their difference), and multiplies the narrow codes with the (r, n) gradient in the orientation BLAS
    is slow at below d = 16 (on a 2-core AMD EPYC at n = 4096 and d = 2 to 10, G^T q took 5 to 17 times as long as
    (q^T G)^T, and G k 2 to 3 times as long as (k^T G^T)^T).
    """

    @staticmethod
    def forward(ctx, q, k, targets):
        g = q @ k.T
        lse = torch.logsumexp(g, 1)
        if targets.dtype == torch.bool:
            on_target = torch.logsumexp(g.masked_fill(~targets, -math.inf), 1)
        else:
            on_target = g.gather(1, targets[:, None])[:, 0]
        ctx.save_for_backward(q, k, targets, g, lse, on_target)
        return (lse - on_target).mean()

    @staticmethod
    def backward(ctx, grad):
        q, k, targets, g, lse, on_target = ctx.saved_tensors
        rows = g.shape[0]
        if targets.dtype == torch.bool:
            on = (g - on_target[:, None]).exp_().masked_fill_(~targets, 0.0)
            grad_g = (g - lse[:, None]).exp_().sub_(on)
        else:
            grad_g = (g - lse[:, None]).exp_()     # g itself stays as saved: backward may run twice (gradcheck)
            grad_g[torch.arange(rows, device=g.device), targets] -= 1.0
        grad_g.mul_(grad / rows)
        return (k.T @ grad_g.T).T, (q.T @ grad_g).T, None


def target_loss(q: torch.Tensor, k: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-mean over rows of log(mass on the targets) of softmax(q k^T): q (r, d), k (n, d), targets (r,) key indices
    or an (r, n) boolean mask. A scalar; its gradient is `_TargetLoss`'s hand-written one."""
    return _TargetLoss.apply(q, k, targets)


def optimise_code(n: int, d: int, L: float, pattern: str = "permutation", k: int = 1, steps: int = 400,
                  seed: int = 0, device: str | None = None) -> CodeResult:
    """Optimise a code of dimension `d` for `pattern` at logit scale `L` and return its exact target masses."""
    _check(n, d, L, pattern, k, steps)
    keep_freed_memory()   # each step frees the logits the next allocates: keep them in the process
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gen = torch.Generator().manual_seed(seed)
    mask = _targets(n, pattern, k, gen).to(device)
    scale = math.sqrt(L)
    if pattern == "tied":
        p = _positions(n).float().to(device)
        wq = (torch.randn(p.shape[1], d, generator=gen) / math.sqrt(p.shape[1])).to(device).requires_grad_()
        wk = (torch.randn(p.shape[1], d, generator=gen) / math.sqrt(p.shape[1])).to(device).requires_grad_()
        params = [wq, wk]

        def codes():
            return p @ wq, p @ wk
    else:
        keys = torch.randn(n, d, generator=gen)
        first = mask.float().argmax(dim=1).cpu()       # a random code: each query along (one of) its target keys
        q0 = keys[first] if pattern == "permutation" else torch.randn(n, d, generator=gen)
        q, kk = q0.to(device).requires_grad_(), keys.to(device).requires_grad_()
        params = [q, kk]

        def codes():
            return q, kk

    def unit_codes():
        """Queries and keys (n, d) of norm sqrt(L), so every logit is within +-L."""
        qq, kv = codes()
        return (scale * qq / qq.norm(dim=1, keepdim=True).clamp_min(1e-12),
                scale * kv / kv.norm(dim=1, keepdim=True).clamp_min(1e-12))

    def logits(rows=None):
        qq, kv = unit_codes()
        return (qq if rows is None else qq[rows]) @ kv.T

    targets = mask.float().argmax(dim=1) if k == 1 else mask    # the one target of each row, or the mask
    opt = torch.optim.Adam(params, lr=LEARNING_RATE)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    loss = torch.tensor(0.0)
    for _ in range(steps):
        rows = None if n <= ROWS_PER_STEP else torch.randint(0, n, (ROWS_PER_STEP,), generator=gen).to(device)
        qq, kv = unit_codes()
        loss = target_loss(qq if rows is None else qq[rows], kv, targets if rows is None else targets[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        mass = torch.cat([torch.softmax(logits(torch.arange(s, min(s + 1024, n), device=device)), 1)
                          .mul(mask[s:s + 1024]).sum(1) for s in range(0, n, 1024)])
    return CodeResult(n, d, float(L), pattern, float(mass.mean()), float(mass.min()), steps, float(loss.detach()))


@dataclass(frozen=True)
class DimSearch:
    """The smallest d (within `d_max`) reaching mean target mass 1 - eps, and every d tried with its mass.
    `d_star` is NaN when even d_max does not reach it."""

    d_star: float
    tried: dict       # {d: mean target mass}
    steps: int


def smallest_dim(n: int, L: float, eps: float = margin.EPS, pattern: str = "permutation", k: int = 1,
                 seed: int = 0, d_max: int = 64, steps: int = 400) -> DimSearch:
    """Bisection over integer d in [1, d_max] for the smallest d whose optimised code reaches mean target mass
    1 - eps (the optimised mass grows with d, up to optimisation noise, which the doubled-steps check measures).

    The first probe is the random-code dimension (where the search's starting code already reaches the target in
    expectation); d = rank_lower_bound - 1 is known to fail, so the bisection never trains below it.
    """
    if not 0 < eps < 1:
        raise ArgumentError("eps", eps, "a number in (0, 1)")
    if not (isinstance(d_max, int) and d_max >= 1):
        raise ArgumentError("d_max", d_max, "an integer >= 1")
    tried = {}

    def reaches(d):
        if d not in tried:
            tried[d] = optimise_code(n, d, L, pattern, k, steps, seed).mean_mass
        return tried[d] >= 1 - eps

    low = max(0, margin.rank_lower_bound(n, L, eps, k) - 1)       # fails for every code
    d_rand = margin.random_code_dim(n, L, eps)
    start = min(d_max, max(low + 1, math.ceil(d_rand))) if math.isfinite(d_rand) else d_max
    if reaches(start):
        high = start
    else:
        low = start
        if start == d_max or not reaches(d_max):
            return DimSearch(math.nan, tried, steps)
        high = d_max
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return DimSearch(float(high), tried, steps)
