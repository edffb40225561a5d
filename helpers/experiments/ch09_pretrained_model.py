"""Chapter 09: the rank of every head of a real pretrained transformer (all-MiniLM-L6-v2) on real text.

    from helpers.experiments import ch09_pretrained_model as exp
    df = exp.head_rank_sweep(["shakespeare"], [16, 64], windows=3, tolerances=[1e-3], seed=0)

One row per (corpus, weights, n, window, layer, head), with every rank measure and the sink statistics.
Each grid point (corpus, weights, n) is cached in the result store, so re-runs are free.
"""

import pandas as pd
import torch

from .. import minilm, rank, seeding
from ..threads import torch_threads
from . import grid, run_sweep

EXPERIMENT = "ch9_pretrained_head_ranks"
MEASURES = ("hardmax", "numerical", "effective", "stable")   # the table's column order, headline first


def head_rank_point(corpus: str, weights: str, n: int, windows: int, tolerances: list, seed: int) -> list[dict]:
    """Every head's ranks and sink statistics on `windows` seeded windows of n tokens (plain numbers)."""
    ids, starts = minilm.token_windows(corpus, n, windows, seed)          # (windows, n)
    masks = minilm.sink_masks(ids)
    init_seed = seeding.derive_seed(seed, "random_init")
    rows = []
    for w in range(windows):                                                    # one window at a time: n=512 is 150 MB
        attn = minilm.attentions(ids[w : w + 1], weights, init_seed)       # (layer, 1, head, n, n)
        with torch_threads(1):                                                 # see helpers.threads
            ranks = rank.measures(attn, _measures(tolerances), tuple(tolerances))  # label -> (layer, 1, head)
        sinks = minilm.sink_stats(attn, {k: v[w : w + 1] for k, v in masks.items()})
        layers, _, heads = attn.shape[:3]
        for layer in range(layers):
            for head in range(heads):
                row = {"window": w, "start": starts[w], "layer": layer + 1, "head": head + 1}
                row.update({k: float(v[layer, 0, head]) for k, v in ranks.items()})
                row.update({k: float(v[layer, 0, head]) for k, v in sinks.items()})
                rows.append(row)
        del attn
    return rows


def head_rank_sweep(corpora, n_values, windows: int, tolerances, seed: int, weights=minilm.WEIGHTS,
                    progress: bool = True) -> pd.DataFrame:
    """The tidy table of `head_rank_point` over corpora x weights x n (cached per point)."""
    configs = [{**c, "windows": int(windows), "tolerances": [float(t) for t in tolerances]}
               for c in grid(corpus=list(corpora), weights=list(weights), n=[int(n) for n in n_values])]
    df = run_sweep(EXPERIMENT, head_rank_point, configs, seeds=[seed], progress=progress)
    return df.drop(columns=["tolerances"])


def _measures(tolerances) -> tuple[str, ...]:
    return MEASURES if len(tolerances) else tuple(m for m in MEASURES if m != "numerical")


def rank_columns(tolerances) -> list[str]:
    """The rank measures in the table (labels of `helpers.rank.labels`), headline first."""
    return list(rank.labels(_measures(tolerances), tuple(tolerances)))


def per_layer(df: pd.DataFrame, measures: list[str]) -> pd.DataFrame:
    """Long table of mean rank / n per (corpus, weights, n, layer, measure) over heads and windows,
    with the spread over windows (each window's mean over the layer's heads): std, min and max."""
    long = df.melt(id_vars=["corpus", "weights", "n", "window", "layer", "head"], value_vars=measures,
                   var_name="measure", value_name="rank")
    long["rank_over_n"] = long["rank"] / long["n"]
    by_window = long.groupby(["corpus", "weights", "n", "layer", "measure", "window"]).rank_over_n.mean()
    keys = ["corpus", "weights", "n", "layer", "measure"]
    out = by_window.groupby(keys).agg(mean="mean", window_std="std", window_min="min", window_max="max")
    return out.reset_index()


def per_head(df: pd.DataFrame, measures: list[str]) -> pd.DataFrame:
    """Long table of mean rank / n per (corpus, weights, n, layer, head, measure) over windows."""
    long = df.melt(id_vars=["corpus", "weights", "n", "layer", "head"], value_vars=measures,
                   var_name="measure", value_name="rank")
    long["rank_over_n"] = long["rank"] / long["n"]
    return long.groupby(["corpus", "weights", "n", "layer", "head", "measure"]).rank_over_n.mean().reset_index()


def example_attention(corpus: str, n: int, layer: int, head: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """One head's attention `(n, n)` on the first seeded window, and the window's tokens (for a heat map)."""
    ids, _ = minilm.token_windows(corpus, n, 1, seed)
    attn = minilm.attentions(ids, "pretrained")                 # (layer, 1, head, n, n)
    tokens = minilm.load_tokenizer().convert_ids_to_tokens(ids[0].tolist())
    return attn[layer - 1, 0, head - 1], tokens
