"""Chapter 4's grid point, in a module of its own: the result store keys a point by the code of the module that
defines it (and what that imports), so editing the chapter's analysis, verdicts or prose leaves the sweeps warm.

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

import math

import torch

from .. import attention, rank, seeding

RTOLS = (1e-2, 1e-3, 1e-5, 1e-8)
SCALES = ("init", "unit", "raw")
ATTENTIONS = ("hardmax", "softmax")
LAYOUTS = ("heads_fixed", "dmodel_fixed")


ORDER = ("hardmax", "numerical", "effective", "stable")             # column order of the measures
RANK_MEASURES = rank.labels(ORDER, RTOLS)                          # "hardmax", "numerical@1e-02", ...
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


def softmax_diagnostics(probs: torch.Tensor, scaled_logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """logit_sd (sd of the entries of L / T) and peak_n (n times the mean row maximum) of `(batch, n, n)` heads."""
    n = probs.shape[-1]
    return {"logit_sd": scaled_logits.flatten(-2).std(-1), "peak_n": n * probs.max(-1).values.mean(-1)}


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
    hard = rank.hardmax_matrix_measures(logits, ORDER, RTOLS)                 # no SVD: sigma = sqrt(column counts)
    temperature = math.sqrt(d_head)
    rows = []
    for scale in SCALES:
        scaled = logits * weight_std(scale, d_model) ** 2 / temperature  # (trials, n, n): L / T at this scale
        probs = torch.softmax(scaled, dim=-1)
        rows += _summarise(hard, "hardmax", scale)
        soft = rank.measures_from_sigma(rank.singular_values(probs), ORDER, RTOLS, hardmax=hard["hardmax"])
        rows += _summarise({**soft, **softmax_diagnostics(probs, scaled)}, "softmax", scale)
    return rows
