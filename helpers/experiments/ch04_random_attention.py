"""Chapter 4: rank of random attention at initialization, swept over n, d_h, inputs, weight scale and layout.

One grid point draws `trials` random heads `(trials, n, n)` with Gaussian `W_q, W_k` and returns one row per
(attention, scale) with the mean and standard deviation of every rank measure:

    attention  "hardmax" (T -> 0) or "softmax" at T = sqrt(d_h)
    scale      the tokens X have rows of norm about 1 (helpers.attention.random_inputs), and W_q, W_k have
               "init": weight std 1/sqrt(d_model), the usual fan-in initialization; L / T has entries of size ~1/d_model;
               "unit": weight std 1; this gives the same logits as "init" weights applied to LayerNorm-scale tokens of
                       norm sqrt(d_model) (X W is unchanged when X is multiplied and W divided by sqrt(d_model));
                       L / T has entries of size ~1;
               "raw":  weight std sqrt(d_model), i.e. N(0, 1) weights on N(0, 1)-entry tokens; L / T ~ d_model
    measures   hardmax, numerical@<rtol> for every rtol in RTOLS, effective, stable, and two diagnostics of the
               softmax: logit_sd (standard deviation of the entries of L / T) and peak_n (n times the mean row maximum
               of A; 1 means uniform rows, n means one-hot rows)

All scales use the SAME random draws (the logits at weight std s are s^2 times those at std 1), so the scale
comparison is paired. The hardmax rank does not depend on the scale; its rows are repeated under every scale.
The hardmax matrix needs no SVD: if column j is chosen by m_j rows its singular values are sqrt(m_j).

A multi-head layer with `h` heads of size `d_h` has i.i.d. heads given the inputs, so the per-head rank depends
on the layout only through `d_model`: "heads_fixed" uses d_model = h * d_h, "dmodel_fixed" uses a fixed d_model.
"""

import contextlib
import math

import numpy as np
import pandas as pd
import torch

from .. import attention, rank, seeding
from . import grid, run_sweep

RTOLS = (1e-2, 1e-3, 1e-5, 1e-8)
SCALES = ("init", "unit", "raw")
ATTENTIONS = ("hardmax", "softmax")
LAYOUTS = ("heads_fixed", "dmodel_fixed")
SATURATION_FRACTION = 0.95


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Run a block with `threads` torch threads (None: leave as is), restoring the setting afterwards.

    The sweeps use one thread: batched float64 SVDs gain little from a second thread, and on a shared
    2-core machine an oversubscribed OpenMP pool was measured 10x slower than a single thread.
    """
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def numerical_name(rtol: float) -> str:
    """Column name of the numerical rank at relative tolerance `rtol`, e.g. "numerical@1e-03"."""
    return f"numerical@{rtol:.0e}"


RANK_MEASURES = ("hardmax",) + tuple(numerical_name(t) for t in RTOLS) + ("effective", "stable")
DIAGNOSTICS = ("logit_sd", "peak_n")


def weight_std(scale: str, d_model: int) -> float:
    """The standard deviation of the entries of W_q and W_k under a named scale."""
    if scale == "init":
        return attention.init_std(d_model)
    if scale == "unit":
        return 1.0
    if scale == "raw":
        return math.sqrt(d_model)
    raise ValueError(f"scale must be one of {SCALES}; got {scale!r}")


def layout_d_model(layout: str, d_head: int, heads: int, d_model: int) -> int:
    """The model width of a layout: `heads * d_head` with the heads fixed, or the fixed `d_model`."""
    if layout == "heads_fixed":
        return heads * d_head
    if layout == "dmodel_fixed":
        if d_model % d_head:
            raise ValueError(f"d_model = {d_model} is not a multiple of d_head = {d_head}")
        return d_model
    raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")


def trials_for(n: int, trials: int, reference_n: int = 64, minimum: int = 4) -> int:
    """Heads per point: `trials` at n = reference_n, scaled like 1/n (the MC error of rank/n shrinks like 1/sqrt(n))."""
    return max(minimum, int(round(trials * reference_n / n)))


def hardmax_spectrum_ranks(logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every measure of the hardmax matrix of `logits` `(batch, n, n)`, from column counts (no SVD)."""
    winners = logits.argmax(dim=-1)  # (batch, n)
    counts = torch.zeros(logits.shape[:-1], dtype=torch.float64)
    counts.scatter_add_(-1, winners, torch.ones_like(winners, dtype=torch.float64))  # (batch, n): m_j
    sigma = counts.sqrt()  # singular values sqrt(m_j), zeros included
    top = sigma.max(-1, keepdim=True).values
    out = {"hardmax": (counts > 0).sum(-1).to(torch.float64)}
    for rtol in RTOLS:
        out[numerical_name(rtol)] = (sigma > rtol * top).sum(-1).to(torch.float64)
    out["effective"] = rank.effective_rank_from_sigma(sigma)  # the order of sigma does not matter here
    out["stable"] = (counts.sum(-1) / top.squeeze(-1) ** 2)
    return out


def softmax_spectrum_ranks(probs: torch.Tensor, scaled_logits: torch.Tensor, hardmax: torch.Tensor) -> dict:
    """Every measure of softmax matrices `(batch, n, n)`, sharing one float64 SVD."""
    sigma = rank.singular_values(probs)  # (batch, n)
    top = sigma[..., :1]
    out = {"hardmax": hardmax}
    for rtol in RTOLS:
        out[numerical_name(rtol)] = (sigma > rtol * top).sum(-1).to(torch.float64)
    out["effective"] = rank.effective_rank_from_sigma(sigma)  # the order of sigma does not matter here
    out["stable"] = (sigma**2).sum(-1) / top.squeeze(-1) ** 2
    n = probs.shape[-1]
    out["logit_sd"] = scaled_logits.flatten(-2).std(-1)
    out["peak_n"] = n * probs.max(-1).values.mean(-1)
    return out


def _summarise(values: dict[str, torch.Tensor], attention_kind: str, scale: str) -> list[dict]:
    rows = []
    for measure, tensor in values.items():
        tensor = tensor.to(torch.float64)
        rows.append({
            "attention": attention_kind,
            "scale": scale,
            "measure": measure,
            "mean": float(tensor.mean()),
            "sd": float(tensor.std()) if tensor.numel() > 1 else 0.0,
            "trials": int(tensor.numel()),
        })
    return rows


def rank_point(n: int, d_head: int, d_model: int, inputs: str, trials: int, seed: int) -> list[dict]:
    """One grid point: `trials` random heads; rows per (attention, scale, measure) with mean and sd over heads."""
    gen = seeding.torch_generator(seeding.derive_seed(seed, "random_init", n, d_head, d_model, inputs))
    logits = attention.random_logits(n, d_head, d_model=d_model, inputs=inputs, weight_std=1.0,
                                     batch=trials, generator=gen)  # (trials, n, n) at unit weight scale
    hard = hardmax_spectrum_ranks(logits)
    temperature = math.sqrt(d_head)
    rows = []
    for scale in SCALES:
        scaled = logits * weight_std(scale, d_model) ** 2 / temperature  # (trials, n, n): L / T at this scale
        probs = torch.softmax(scaled, dim=-1)
        rows += _summarise(hard, "hardmax", scale)
        rows += _summarise(softmax_spectrum_ranks(probs, scaled, hard["hardmax"]), "softmax", scale)
    return rows


def rank_sweep(n_values, d_heads, inputs, d_model: int, trials: int, seeds, progress: bool = False,
               threads: int | None = 1) -> pd.DataFrame:
    """Rank against d_h at a fixed d_model for every n and input kind (points cached in the result store)."""
    frames = []
    with torch_threads(threads):
        for n in n_values:
            configs = grid(n=[n], d_head=list(d_heads), d_model=[d_model], inputs=list(inputs),
                           trials=[trials_for(n, trials)])
            frames.append(run_sweep("random_init_rank", rank_point, configs, list(seeds), progress=progress))
    return _tidy(pd.concat(frames, ignore_index=True))


def layout_sweep(n_values, d_heads, heads: int, d_model: int, inputs: str, trials: int, seeds,
                 progress: bool = False, threads: int | None = 1) -> pd.DataFrame:
    """Rank against d_h in both multi-head layouts (d_h must divide d_model); one input kind.

    The "dmodel_fixed" points are the same configs as `rank_sweep` at this d_model, so they come from the store.
    """
    frames = []
    with torch_threads(threads):
        for layout in LAYOUTS:
            for n in n_values:
                configs = [dict(n=n, d_head=d, d_model=layout_d_model(layout, d, heads, d_model), inputs=inputs,
                                trials=trials_for(n, trials)) for d in d_heads]
                df = run_sweep("random_init_rank", rank_point, configs, list(seeds), progress=progress)
                frames.append(df.assign(layout=layout, heads=[d_model // d if layout == "dmodel_fixed" else heads
                                                              for d in df.d_head]))
    return _tidy(pd.concat(frames, ignore_index=True))


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["rank_over_n"] = np.where(df.measure.isin(RANK_MEASURES), df["mean"] / df.n, np.nan)
    df["se_over_n"] = np.where(df.measure.isin(RANK_MEASURES), df.sd / np.sqrt(df.trials) / df.n, np.nan)
    return df


def pooled(df: pd.DataFrame, keys=("n", "d_head", "d_model", "inputs", "attention", "scale", "measure")) -> pd.DataFrame:
    """Average seeds: mean of the per-seed means, and a standard error from all heads."""
    keys = [k for k in keys if k in df.columns]
    out = df.groupby(keys, sort=True).agg(mean=("mean", "mean"), sd=("sd", "mean"), trials=("trials", "sum"),
                                          n_seeds=("seed", "nunique")).reset_index()
    return _tidy(out)


def saturation_d_head(d_heads, ranks, fraction: float = SATURATION_FRACTION) -> float:
    """The smallest d_h at which `ranks` first reaches `fraction` of its value at the largest d_h.

    Linear interpolation in log d_h between the grid points around the first crossing; NaN when the
    curve never rises (the value at the smallest d_h is already at the target).
    """
    d = np.asarray(d_heads, dtype=np.float64)
    r = np.asarray(ranks, dtype=np.float64)
    order = np.argsort(d)
    d, r = d[order], r[order]
    if d.size < 2 or not np.all(np.isfinite(r)):
        return float("nan")
    target = fraction * r[-1]
    above = np.nonzero(r >= target)[0]
    first = int(above[0])
    if first == 0:
        return float("nan")
    lo, hi = first - 1, first
    t = (target - r[lo]) / (r[hi] - r[lo])
    return float(np.exp(np.log(d[lo]) + t * (np.log(d[hi]) - np.log(d[lo]))))


def select(frame: pd.DataFrame, **where) -> pd.DataFrame:
    """Rows of `frame` whose columns equal the given values, e.g. `select(df, attention="hardmax", n=64)`."""
    mask = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        mask &= frame[column].to_numpy() == value
    return frame[mask]


def verdict(value: float, se: float, bound: float, z: float = 2.0) -> str:
    """"below", "above" or "at" the bound, with a margin of `z` standard errors."""
    if value + z * se < bound:
        return "below"
    if value - z * se > bound:
        return "above"
    return "at"
