"""Chapter 09: the rank of every head of a real pretrained transformer (all-MiniLM-L6-v2) on real text.

    from helpers.experiments import ch09_pretrained_model as chapter
    df = chapter.head_rank_sweep(["shakespeare"], [16, 64], windows=3, tolerances=[1e-3], seed=0)

One row per (corpus, weights, n, window, layer, head), with every rank measure and the sink statistics. The grid
point lives in `ch09_pretrained_model_points` (so edits here keep the cached sweeps); `analyse(P)` turns the sweep
into the chapter's `ChapterResult`: frames, the numbers the prose quotes and the verdicts with their rules.
"""

import math

import numpy as np
import pandas as pd
import torch

from .. import english, minilm, rank, theory
from ..results import ChapterResult, Verdict
from . import grid, run_sweep
from .ch09_pretrained_model_points import EXPERIMENT, MEASURES, _measures, head_rank_point  # noqa: F401

# (quick, full) defaults of the parameters left at None
DEFAULTS = {"N_VALUES": ([16, 64, 256], [16, 32, 64, 128, 256, 512]), "WINDOWS": (2, 5),
            "SCHEDULER": (None, "processes")}   # (quick, full); full mode: one worker per core
HEADLINE_TOL = 1e-3            # the book's headline tolerance (chapter 1); always computed
TOLERANCES = [1e-2, 1e-3, 1e-5, 1e-8]
HEADLINE = rank.label("numerical", HEADLINE_TOL)
BARRIER = theory.BARRIER_FRACTION   # 1 - 1/e
EXAMPLE_N = 64                 # the heat maps of two heads use the n of the grid nearest to this
CORPUS_NAMES = {"shakespeare": "Shakespeare", "bbc": "BBC News"}   # how the page names the corpora

# ------------------------------------------------------------------------------------------------ verdict rules
PROPORTIONAL_TOL = 0.25        # rank / n "roughly constant" when it moves by less than 25 % between the two n
MOSTLY = 0.5                   # "well above" the line when more than half of the layer means are above it


def barrier_verdict(layers_above: int, points: int) -> Verdict:
    """The hardmax barrier for layer means: holds when no (corpus, n, layer) mean exceeds the balls-in-bins bound."""
    holds = layers_above == 0
    return Verdict("holds" if holds else "fails",
                   "holds for every layer mean" if holds else "fails for some layer means",
                   rule="holds when no layer's mean hardmax rank exceeds n (1 - (1 - 1/n)^n)",
                   evidence={"layers_above": layers_above, "points": points})


def numerical_verdict(layers_above: int, points: int) -> Verdict:
    """Where the numerical-rank layer means sit against the 0.63 n line ("mostly": more than MOSTLY of them above)."""
    if layers_above > MOSTLY * points:
        outcome, sentence = "mostly_above", "mostly above the 0.63 n line"
    elif layers_above:
        outcome, sentence = "some_above", "above the 0.63 n line in some layers"
    else:
        outcome, sentence = "below", "below the 0.63 n line everywhere"
    return Verdict(outcome, sentence, rule=f"well above when more than {MOSTLY:g} of the layer means exceed (1 - 1/e) n",
                   evidence={"layers_above": layers_above, "points": points})


def scaling_verdict(small: float, large: float, tol: float = PROPORTIONAL_TOL) -> Verdict:
    """How the mean hardmax rank grows with n, from its rank / n at a small and at a large n."""
    if abs(large - small) < tol * max(small, 1e-9):
        outcome, sentence = "proportional", "roughly proportional to n"
    elif large < small:
        outcome, sentence = "slower", "slower than proportional to n"
    else:
        outcome, sentence = "faster", "faster than proportional to n"
    return Verdict(outcome, sentence, rule=f"proportional when rank / n moves by less than {tol:g} of its value",
                   evidence={"small_n": small, "large_n": large, "tol": tol})


def layer_trend_verdict(first: float, last: float) -> Verdict:
    """Whether the layer mean of the hardmax rank falls from the first layer to the last."""
    falls = last < first
    return Verdict("falls" if falls else "flat",
                   "falls from the first layer to the last" if falls else "does not fall from the first layer to the last",
                   rule="falls when the last layer's mean is below the first layer's", evidence={"first": first, "last": last})


def offset_name(offset: int) -> str:
    """The token a fixed-offset head attends to, in words."""
    named = {0: "its own token", -1: "the previous token", 1: "the next token"}
    return named.get(offset, f"the token {abs(offset)} places {'before' if offset < 0 else 'after'} it")


# ------------------------------------------------------------------------------------------------ sweep and tables
def head_rank_sweep(corpora, n_values, windows: int, tolerances, seed: int, weights=minilm.WEIGHTS,
                    progress: bool = True) -> pd.DataFrame:
    """The tidy table of `head_rank_point` over corpora x weights x n (cached per point)."""
    configs = [{**c, "windows": int(windows), "tolerances": [float(t) for t in tolerances]}
               for c in grid(corpus=list(corpora), weights=list(weights), n=[int(n) for n in n_values])]
    df = run_sweep(EXPERIMENT, head_rank_point, configs, seeds=[seed], progress=progress)
    return df.drop(columns=["tolerances"])


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


def head_grid(heads: pd.DataFrame, measure: str, n: int, weights: str = "pretrained") -> pd.DataFrame:
    """Mean rank / n of every head at window length n (over windows and corpora): layers x heads."""
    part = heads[(heads.measure == measure) & (heads.n == n) & (heads.weights == weights)]
    return part.groupby(["layer", "head"]).rank_over_n.mean().unstack("head")


# ------------------------------------------------------------------------------------------------ the chapter
def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved): corpora, window lengths, windows and tolerances."""
    P["CORPORA"] = P.default("CORPORA", list(minilm.CORPORA))
    P.fill_mode_defaults(DEFAULTS)
    P["TOLERANCES"] = sorted(set(P.default("TOLERANCES", TOLERANCES)) | {HEADLINE_TOL}, reverse=True)
    return P


def analyse(P) -> ChapterResult:
    """Measure every head of the pretrained and the randomly initialised model on every window; return the
    chapter's frames, quotes and verdicts."""
    result = ChapterResult()
    measures = rank_columns(P.TOLERANCES)
    df = head_rank_sweep(P.CORPORA, P.N_VALUES, P.WINDOWS, P.TOLERANCES, P.SEED, progress=False)
    layers, heads = per_layer(df, measures), per_head(df, measures)
    result.data.update(df=df, per_layer=layers, heads=heads, measures=measures)
    facts = minilm.model_facts()
    result.data["facts"] = facts
    _setting(P, facts, df, layers, result)
    _measures_at_top(P, facts, layers, heads, result)
    _spread(P, layers, result)
    _sinks(P, facts, df, result)
    _example(P, heads, result)
    _verdicts(P, layers, heads, df, result)
    return result.done()


def layer_value(per_layer_frame, measure, weights, n, layer=None, stat="mean") -> float:
    """Mean of a per-layer statistic over corpora (and over layers when `layer` is None)."""
    part = per_layer_frame[(per_layer_frame.measure == measure) & (per_layer_frame.weights == weights)
                           & (per_layer_frame.n == n)]
    part = part[part.layer == layer] if layer else part
    return float(part[stat].mean())


def _setting(P, facts, df, layers, result) -> None:
    for key in ("layers", "heads", "d_model", "d_head", "max_positions"):
        result.quote(f"ch9_{key}", facts[key], "d")
    n_min, n_max = P.N_VALUES[0], P.N_VALUES[-1]
    result.quote("ch9_n_min", n_min, "d")
    result.quote("ch9_n_max", n_max, "d")
    result.quote("ch9_log_n_min", math.log(n_min), ".1f")
    result.quote("ch9_log_n_max", math.log(n_max), ".1f")
    result.quote("ch9_dh_over_logn", facts["d_head"] / math.log(n_max), ".1f")
    result.quote("ch9_windows", P.WINDOWS, "d")
    result.quote("ch9_n_count", len(P.N_VALUES), "d")
    result.quote("ch9_corpora", english.join([CORPUS_NAMES[c] for c in P.CORPORA]))
    result.quote("ch9_matrices", len(df), ",d")
    result.frames["per_layer_rank_over_n"] = {
        corpus: {measure: {str(n): {w: part[(part.n == n) & (part.weights == w)].sort_values("layer")["mean"].tolist()
                                    for w in minilm.WEIGHTS} for n in P.N_VALUES}
                 for measure, part in layers[layers.corpus == corpus].groupby("measure")}
        for corpus in P.CORPORA}
    result.frames["per_layer_table"] = layers
    result.frames["measures"] = result.data["measures"]
    result.frames["n_values"] = list(P.N_VALUES)


def _measures_at_top(P, facts, layers, heads, result) -> None:
    n_top = P.N_VALUES[-1]
    head_top = heads[(heads.n == n_top) & (heads.weights == "pretrained")]
    hm, nr = head_top[head_top.measure == "hardmax"], head_top[head_top.measure == HEADLINE]
    value = lambda measure, weights, layer=None: layer_value(layers, measure, weights, n_top, layer)  # noqa: E731
    result.quote("ch9_hm_first_layer", value("hardmax", "pretrained", 1), ".2f")
    result.quote("ch9_hm_last_layer", value("hardmax", "pretrained", facts["layers"]), ".2f")
    result.quote("ch9_hm_random_top", value("hardmax", "random"), ".2f")
    result.quote("ch9_hm_head_max", float(hm.rank_over_n.max()), ".2f")
    result.quote("ch9_hm_head_min", float(hm.rank_over_n.min()), ".3f")
    result.quote("ch9_nr_head_max", float(nr.rank_over_n.max()), ".2f")
    result.quote("ch9_nr_head_min", float(nr.rank_over_n.min()), ".2f")
    result.quote("ch9_nr_random_top", value(HEADLINE, "random"), ".2f")
    result.quote("ch9_nr_pre_top", value(HEADLINE, "pretrained"), ".2f")
    result.quote("ch9_er_pre_top", value("effective", "pretrained"), ".2f")
    result.quote("ch9_er_random_top", value("effective", "random"), ".2f")
    result.quote("ch9_sr_pre_top", value("stable", "pretrained") * n_top, ".1f")
    result.quote("ch9_sr_random_top", value("stable", "random") * n_top, ".2f")
    result.verdict("ch9_hm_layer_trend", layer_trend_verdict(value("hardmax", "pretrained", 1),
                                                             value("hardmax", "pretrained", facts["layers"])))
    small, big = rank.label("numerical", P.TOLERANCES[-1]), rank.label("numerical", P.TOLERANCES[0])
    result.quote("ch9_tol_smallest", english.number(P.TOLERANCES[-1], 1, power=True))
    result.quote("ch9_nr_small_pre", value(small, "pretrained"), ".2f")
    result.quote("ch9_nr_small_random", value(small, "random"), ".2f")
    result.quote("ch9_tol_largest", english.number(P.TOLERANCES[0], 1, power=True))
    result.quote("ch9_nr_big_pre", value(big, "pretrained"), ".2f")
    result.quote("ch9_nr_big_random", value(big, "random"), ".2f")
    table = layers[layers.n == n_top].groupby(["weights", "measure", "layer"])["mean"].mean().unstack("layer")
    table = table.reindex(pd.MultiIndex.from_product([minilm.WEIGHTS, result.data["measures"]]))
    table.columns = [f"layer {c}" for c in table.columns]
    result.data["layer_table"] = table


def _spread(P, layers, result) -> None:
    n_top = P.N_VALUES[-1]
    spread = layers[(layers.n == n_top) & (layers.measure.isin(["hardmax", HEADLINE]))]
    width = spread.window_max - spread.window_min
    result.quote("ch9_spread_max", float(width.max()), ".2f")
    result.quote("ch9_spread_median", float(width.median()), ".3f")
    corpus_gap = (layers[(layers.weights == "pretrained") & (layers.measure == "hardmax")]
                  .groupby(["n", "layer", "corpus"])["mean"].mean().unstack("corpus"))
    result.quote("ch9_corpus_gap", float((corpus_gap.max(axis=1) - corpus_gap.min(axis=1)).max()), ".2f")
    df = result.data["df"]
    result.data["by_window"] = (df[df.n == n_top].groupby(["corpus", "weights", "layer", "window"])[
        ["hardmax", HEADLINE]].mean() / n_top).reset_index()


SINK_TABLE_HEADERS = {"mass_special": "mass on [CLS] + [SEP]", "mass_punct": "mass on punctuation",
                      "mass_top3": "mass on the top 3 columns", "argmax_sink": "rows with argmax on a sink",
                      "hardmax_over_n": "hardmax rank / n", "sink_share_of_rank": "sink columns' share of the rank"}
SINK_COLUMNS = ["mass_special", "mass_punct", "mass_top3", "argmax_sink", "hardmax_sink", "hardmax_other", "sink_columns"]


def _sinks(P, facts, df, result) -> None:
    n_top = P.N_VALUES[-1]
    sinks = df.groupby(["weights", "n", "layer"])[SINK_COLUMNS].mean().reset_index()
    sinks["hardmax_over_n"] = (sinks.hardmax_sink + sinks.hardmax_other) / sinks.n
    sinks["sink_share_of_rank"] = sinks.hardmax_sink / (sinks.hardmax_sink + sinks.hardmax_other)
    result.frames["sinks_per_layer"] = sinks
    result.data["sinks"] = sinks
    top = sinks[sinks.n == n_top].set_index(["weights", "layer"])
    deep = list(range(2, facts["layers"] + 1))
    pre, rnd = top.loc["pretrained"].loc[deep], top.loc["random"]
    result.quote("ch9_sink_argmax_pre", float(pre.argmax_sink.mean()), ".2f")
    result.quote("ch9_sink_argmax_random", float(rnd.argmax_sink.mean()), ".2f")
    result.quote("ch9_sink_mass_special_pre", float(pre.mass_special.mean()), ".2f")
    result.quote("ch9_sink_mass_special_random", float(rnd.mass_special.mean()), ".3f")
    result.quote("ch9_sink_mass_punct_pre", float(pre.mass_punct.mean()), ".2f")
    result.quote("ch9_sink_mass_top3_pre", float(pre.mass_top3.mean()), ".2f")
    result.quote("ch9_sink_mass_top3_random", float(rnd.mass_top3.mean()), ".3f")
    result.quote("ch9_sink_cols_share", float(top.loc["pretrained"].sink_columns.mean() / n_top), ".2f")
    result.quote("ch9_sink_argmax_layer1", float(top.loc[("pretrained", 1), "argmax_sink"]), ".2f")
    per_head_top = df[(df.n == n_top) & (df.weights == "pretrained")]
    result.quote("ch9_sink_corr", float(np.corrcoef(per_head_top.argmax_sink, per_head_top.hardmax / n_top)[0, 1]), ".2f")
    result.data["sink_table"] = top[list(SINK_TABLE_HEADERS)].rename(columns=SINK_TABLE_HEADERS)


def _example(P, heads, result) -> None:
    n_ex = min(P.N_VALUES, key=lambda v: abs(v - EXAMPLE_N))
    corpus = P.CORPORA[0]
    ex = heads[(heads.n == n_ex) & (heads.weights == "pretrained") & (heads.measure == "hardmax") & (heads.corpus == corpus)]
    examples = {}
    for kind, row in (("low", ex.loc[ex.rank_over_n.idxmin()]), ("high", ex.loc[ex.rank_over_n.idxmax()])):
        matrix, tokens = example_attention(corpus, n_ex, int(row.layer), int(row["head"]), P.SEED)
        examples[kind] = {"matrix": matrix, "tokens": tokens, "layer": int(row.layer), "head": int(row["head"]),
                          "hardmax": int(matrix.argmax(-1).unique().numel())}
    offsets = (examples["high"]["matrix"].argmax(-1).numpy() - np.arange(n_ex))[1:-1]   # inner tokens only
    values, counts = np.unique(offsets, return_counts=True)
    result.data.update(examples=examples, example_n=n_ex, example_corpus=corpus)
    result.quote("ch9_example_n", n_ex, "d")
    result.quote("ch9_example_high_share", 100 * counts.max() / counts.sum(), ".0f")
    result.quote("ch9_example_high_kind", offset_name(int(values[counts.argmax()])))
    result.quote("ch9_example_high_name", f"layer {examples['high']['layer']}, head {examples['high']['head']}")


def _verdicts(P, layers, heads, df, result) -> None:
    n_values, n_top = P.N_VALUES, P.N_VALUES[-1]
    bounds = {n: theory.expected_hardmax_rank(n) / n for n in n_values}      # balls-in-bins bound on E[rank] / n
    pre = df[df.weights == "pretrained"]
    above_heads = float((pre.hardmax / pre.n > pre.n.map(bounds)).mean())
    layer_means = layers[(layers.weights == "pretrained") & (layers.measure == "hardmax")]
    layers_above = int((layer_means["mean"] > layer_means.n.map(bounds)).sum())
    result.quote("ch9_hm_layer_mean_max", float(layer_means["mean"].max()), ".2f")
    result.quote("ch9_hm_heads_above", 100 * above_heads, ".1f")
    result.quote("ch9_hm_layers_above", layers_above, "d")
    result.quote("ch9_layer_points", len(layer_means), "d")
    result.verdict("ch9_verdict_barrier", barrier_verdict(layers_above, len(layer_means)))
    grid_top = head_grid(heads, "hardmax", n_top)
    above = grid_top.stack()[lambda s: s > bounds[n_top]]
    result.data["head_bounds"] = bounds
    result.quote("ch9_heads_above_top", int(len(above)), "d")
    result.quote("ch9_heads_total", int(grid_top.size), "d")
    result.quote("ch9_heads_above_names", english.join([f"layer {l}, head {h}" for l, h in above.index], separator="; "))

    nr_layers = layers[(layers.weights == "pretrained") & (layers.measure == HEADLINE)]
    nr_above = int((nr_layers["mean"] > BARRIER).sum())
    result.quote("ch9_nr_layer_mean_max", float(nr_layers["mean"].max()), ".2f")
    result.quote("ch9_nr_layers_above", nr_above, "d")
    result.verdict("ch9_verdict_numerical", numerical_verdict(nr_above, len(nr_layers)))

    random_hm = layers[(layers.weights == "random") & (layers.measure == "hardmax")]
    result.quote("ch9_random_hm_min", float(random_hm["mean"].min()), ".2f")
    result.quote("ch9_random_hm_max", float(random_hm["mean"].max()), ".2f")
    result.quote("ch9_bound_n_min", bounds[n_values[0]], ".3f")
    n_mid = [n for n in n_values if n >= 64] or n_values
    small = layer_value(layers, "hardmax", "pretrained", n_mid[0])
    large = layer_value(layers, "hardmax", "pretrained", n_mid[-1])
    result.quote("ch9_hm_mean_nsmall", small, ".2f")
    result.quote("ch9_hm_mean_nlarge", large, ".2f")
    result.quote("ch9_n_small_used", n_mid[0], "d")
    result.verdict("ch9_verdict_scaling", scaling_verdict(small, large))
    keys = ["corpus", "n", "layer"]
    paired = layer_means.set_index(keys)["mean"].align(random_hm.set_index(keys)["mean"], join="inner")
    result.quote("ch9_layers_above_random", 100 * float((paired[0] > paired[1]).mean()), ".0f")
    result.frames["verdict"] = {"hardmax_layers_above_bound": layers_above, "hardmax_head_windows_above_bound": above_heads,
                                "numerical_layers_above_barrier": nr_above, "layer_points": len(layer_means),
                                "hardmax_mean_small_n": small, "hardmax_mean_large_n": large}
