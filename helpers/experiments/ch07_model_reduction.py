"""Chapter 07: is extra head dimension redundant? Compression after training, and controlled tests of rank.

    from helpers.experiments import ch06_real_data as rd, ch07_model_reduction as red
    spec = rd.TrainSpec.for_mode("quick").as_config()
    rows = red.compression_point("shakespeare", 64, 16, [1, 4, 16], spec, seed=0)

The models are chapter 06's (`real_data.trained_model`: loaded from their `.npz` when chapter 06 ran with the
same code, else retrained identically).

Post-training compression (`truncate_qk`). With the bias folded in (x~ = [x, 1]), a head's logits are
`x~_i^T M x~_j` with `M = Wq~^T Wk~` ((d_model+1) x (d_model+1), rank <= d_h). Truncating `M` to its best rank-r
approximation (Eckart-Young, by SVD) and writing the factors `U_r S_r^1/2`, `V_r S_r^1/2` back (zero-padded to d_h)
gives a model whose every head has a rank-r bilinear form; at r = d_h the logits are unchanged.

Controlled tests, at inference, all else fixed:
  attention rank   every attention matrix A is replaced by its best rank-r approximation (`limit_attention_rank`);
                   in causal models the upper triangle is then zeroed again (no look-ahead), so the rank is only
                   close to r there (its measured numerical rank is reported)
  temperature      the logits are multiplied by beta (`scale_logits`); beta = 0 is uniform attention (rank 1)
"""

import copy
import math
from contextlib import contextmanager

import numpy as np
import torch

from ..capture import attention_ranks
from ..train import evaluate
from . import ch06_real_data as rd

EXPERIMENT_COMPRESSION = "ch7_compression"
EXPERIMENT_CONTROLLED = "ch7_controlled"
SCALES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


# ---- post-training compression of W_q W_k^T ----

def head_factors(attn, head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key maps of one head with the bias folded in: `(d_h, d_model + 1)` each, float64.

    The logit between tokens i and j is `(Q x~_i) . (K x~_j)` with `x~ = [x, 1]`.
    """
    h, d = attn.n_heads, attn.d_head
    weight = attn.qkv.weight.detach().double()  # (3 h d, d_model)
    bias = attn.qkv.bias.detach().double() if attn.qkv.bias is not None else torch.zeros(3 * h * d, dtype=torch.float64)
    rows_q = slice(head * d, (head + 1) * d)
    rows_k = slice(h * d + head * d, h * d + (head + 1) * d)
    q = torch.cat([weight[rows_q], bias[rows_q, None]], dim=1)
    k = torch.cat([weight[rows_k], bias[rows_k, None]], dim=1)
    return q, k


def bilinear(attn, head: int) -> torch.Tensor:
    """`M = Q~^T K~`, `(d_model + 1, d_model + 1)` float64: the head's logits are `x~_i^T M x~_j` (times the scale)."""
    q, k = head_factors(attn, head)
    return q.T @ k


def truncated_factors(matrix: torch.Tensor, r: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Factors `(width, m)` each whose product `Q^T K` is the best rank-r approximation of `matrix` `(m, m)`."""
    u, s, vh = torch.linalg.svd(matrix)
    r = min(r, width, s.numel())
    root = s[:r].sqrt()
    q = torch.zeros(width, matrix.shape[0], dtype=matrix.dtype)
    k = torch.zeros(width, matrix.shape[1], dtype=matrix.dtype)
    q[:r] = (u[:, :r] * root).T
    k[:r] = (vh[:r].T * root).T
    return q, k


@torch.no_grad()
def truncate_qk(model, r: int):
    """A copy of `model` with every head's `W_q W_k^T` (bias folded in) cut to its best rank-r approximation."""
    model = copy.deepcopy(model)
    for attn in model.attentions:
        h, d = attn.n_heads, attn.d_head
        if attn.rotary is not None:
            raise ValueError("truncate_qk needs position-free logits (not pos='rope')")
        weight, bias = attn.qkv.weight, attn.qkv.bias
        for head in range(h):
            q, k = truncated_factors(bilinear(attn, head), r, d)
            rows_q = slice(head * d, (head + 1) * d)
            rows_k = slice(h * d + head * d, h * d + (head + 1) * d)
            weight[rows_q] = q[:, :-1].to(weight.dtype)
            weight[rows_k] = k[:, :-1].to(weight.dtype)
            if bias is not None:
                bias[rows_q] = q[:, -1].to(bias.dtype)
                bias[rows_k] = k[:, -1].to(bias.dtype)
    return model


def qk_parameters(model, r: int | None = None) -> int:
    """Parameters of all query and key maps when each head's bilinear form is stored as rank-r factors."""
    total = 0
    for attn in model.attentions:
        width = attn.d_head if r is None else min(r, attn.d_head)
        total += attn.n_heads * 2 * width * (attn.qkv.in_features + (attn.qkv.bias is not None))
    return total


# ---- controlled interventions at inference ----

def low_rank(matrix: torch.Tensor, r: int, causal: bool) -> torch.Tensor:
    """Best rank-r approximation of each `(..., n, n)` matrix (float64 SVD); the upper triangle re-zeroed if causal."""
    n = matrix.shape[-1]
    if r >= n:
        return matrix
    u, s, vh = torch.linalg.svd(matrix.double(), full_matrices=False)
    approx = (u[..., :r] * s[..., None, :r]) @ vh[..., :r, :]
    if causal:
        approx = approx.tril()
    return approx.to(matrix.dtype)


@contextmanager
def limit_attention_rank(model, r: int):
    """Inside the block every attention matrix is replaced by its best rank-r approximation (explicit path)."""
    saved = []
    try:
        for attn in model.attentions:
            original = attn.probabilities
            saved.append((attn, attn.path))
            attn.probabilities = lambda q, k, original=original, causal=attn.causal: low_rank(original(q, k), r, causal)
            attn.path = "explicit"
        yield model
    finally:
        for attn, path in saved:
            attn.__dict__.pop("probabilities", None)
            attn.path = path


@contextmanager
def scale_logits(model, beta: float):
    """Inside the block every head's logits are multiplied by `beta` (0: uniform attention) (explicit path)."""
    saved = [(attn, attn.scale, attn.path) for attn in model.attentions]
    try:
        for attn, scale, _ in saved:
            attn.scale = scale * beta
            attn.path = "explicit"
        yield model
    finally:
        for attn, scale, path in saved:
            attn.scale, attn.path = scale, path


def _eval_subset(data, eval_tokens: int):
    count = max(8, eval_tokens // data.n)
    return data.test_x[:count], data.test_y[:count]


def _ranks_of(model, probe) -> dict:
    ranks = attention_ranks(model, probe, measures=("numerical", "effective"), rtol=rd.RTOL)
    return {f"{m}_layer{layer}": float(v[layer].mean()) for m, v in ranks.items() for layer in range(v.shape[0])} | {
        m: float(v.mean()) for m, v in ranks.items()}


def compression_point(domain: str, n: int, d_head: int, ranks: list, spec: dict, seed: int) -> list[dict]:
    """Loss of the trained model (d_head wide) with every head's W_q W_k^T cut to rank r, for each r in `ranks`."""
    model, data = rd.trained_model(domain, n, d_head, spec, seed)
    spec_obj = rd.TrainSpec(**spec)
    probe = rd.probe_inputs(data, spec_obj)
    base = rd.performance(model, data)
    rows = []
    for r in sorted(set(int(r) for r in ranks)):
        small = truncate_qk(model, r)
        scores = rd.performance(small, data)
        qk_rank = max(int(np.linalg.matrix_rank(bilinear(a, h).numpy(), tol=1e-8 * float(
            torch.linalg.matrix_norm(bilinear(a, h), ord=2)))) for a in small.attentions for h in range(a.n_heads))
        rows.append({"r": r, **scores, "base_loss": base["test_loss"], "base_accuracy": base["test_accuracy"],
                     "loss_increase": scores["test_loss"] - base["test_loss"], "qk_rank_max": qk_rank,
                     "qk_params": qk_parameters(model, r), "qk_params_full": qk_parameters(model),
                     "chance_loss": math.log(data.vocab_size or data.n_classes), **_ranks_of(small, probe)})
    return rows


def controlled_point(domain: str, n: int, d_head: int, attn_ranks: list, scales: list, eval_tokens: int,
                     spec: dict, seed: int) -> list[dict]:
    """Loss and measured attention ranks of the trained model when its attention is limited at inference."""
    model, data = rd.trained_model(domain, n, d_head, spec, seed)
    x, y = _eval_subset(data, eval_tokens)
    probe = rd.probe_inputs(data, rd.TrainSpec(**spec))
    base = evaluate(model, x, y)
    rows = []
    for r in sorted(set(int(r) for r in attn_ranks)):
        with limit_attention_rank(model, r):
            scores = evaluate(model, x, y)
            measured = _ranks_of(model, probe)
        rows.append({"intervention": "attention_rank", "level": float(min(r, n)), "test_loss": scores["loss"],
                     "test_accuracy": scores["accuracy"], "base_loss": base["loss"],
                     "loss_increase": scores["loss"] - base["loss"], **measured})
    for beta in sorted(set(float(b) for b in scales)):
        with scale_logits(model, beta):
            scores = evaluate(model, x, y)
            measured = _ranks_of(model, probe)
        rows.append({"intervention": "temperature", "level": beta, "test_loss": scores["loss"],
                     "test_accuracy": scores["accuracy"], "base_loss": base["loss"],
                     "loss_increase": scores["loss"] - base["loss"], **measured})
    base_ranks = _ranks_of(model, probe)
    for row in rows:
        row.update({f"base_{k}": v for k, v in base_ranks.items() if k in ("numerical", "effective")})
        row["chance_loss"] = math.log(data.vocab_size or data.n_classes)
    return rows


def rank_levels(n: int) -> list[int]:
    """Attention ranks for the controlled test: 1, 2, 4, ... below n, and n itself (no change)."""
    levels = [2**i for i in range(int(math.log2(n)) + 1) if 2**i < n]
    return levels + [n]


# ---- tasks and summaries for the notebook ----

def parse_task(name: str, value) -> tuple[str, int]:
    """A task "domain/n", e.g. "shakespeare/128", as (domain, n); a ParameterError names what is allowed."""
    from ..parameters import ParameterError

    allowed = f'"domain/n" with domain one of {list(rd.DOMAINS)} and a valid n, e.g. "shakespeare/128", "mnist/49"'
    if not isinstance(value, str) or value.count("/") != 1:
        raise ParameterError(name, value, allowed)
    domain, _, n_text = value.partition("/")
    if domain not in rd.DOMAINS or not n_text.isdigit():
        raise ParameterError(name, value, allowed)
    try:
        rd.check_n(domain, int(n_text))
    except ParameterError as err:
        raise ParameterError(name, value, f"{allowed}; for {domain}: {err.allowed}") from None
    return value


def needed_rank(controlled, tolerance: float) -> list[dict]:
    """Per task: the smallest attention rank r whose mean loss increase (over seeds) is at most `tolerance` nats."""
    import pandas as pd

    part = controlled[controlled.intervention == "attention_rank"]
    rows = []
    for (domain, n), group in part.groupby(["domain", "n"], sort=False):
        curve = group.groupby("level").agg(increase=("loss_increase", "mean"), sd=("loss_increase", "std"),
                                           numerical=("numerical", "mean"), effective=("effective", "mean"))
        ok = curve[curve.increase <= tolerance]
        smallest = curve.iloc[0]
        rows.append({"domain": domain, "n": int(n), "needed_rank": float(ok.index.min()) if len(ok) else float(n),
                     "rank1_increase": float(smallest.increase),
                     "base_effective": float(group.base_effective.mean()),
                     "base_numerical": float(group.base_numerical.mean()),
                     "base_loss": float(group.base_loss.mean()), "chance_loss": float(group.chance_loss.iloc[0])})
    return pd.DataFrame(rows).to_dict(orient="records")
