"""Chapter 10: a real decoder language model (SmolLM2-135M-Instruct, RoPE, grouped-query attention) from n = 64
to 2048: its quality, the rank of its heads, attention sinks, the logit scale, and compression judged by perplexity.

    from helpers.experiments import ch10_decoder_llm as chapter
    P = chapter.resolve(parameters)            # fills the mode defaults
    result = chapter.analyse(P)

The grid points live in `ch10_decoder_llm_points` (so edits here keep the cached sweeps).
"""

import math

import numpy as np
import pandas as pd

from .. import counterexamples, decoder, english, margin, minilm, parameters, rank, robust, saturation, theory
from .. import decoder_attention as attention
from ..results import ChapterResult, Verdict
from . import ch09_pretrained_model, grid, run_sweep
from .ch10_decoder_llm_points import (EXPERIMENT_COMPRESSION, EXPERIMENT_HEADS, EXPERIMENT_LAYERS,  # noqa: F401
                                      compression_point, layer_cut_point, window_point)

# (quick, full) defaults of the parameters left at None
DEFAULTS = {
    "N_VALUES": ([64, 128, 256], [64, 128, 256, 512, 1024, 2048]),
    "WINDOWS": (1, 3),                   # test windows per corpus for ranks, sinks, logit scale and quality
    "RANDOM_WINDOWS": (1, 1),            # windows per corpus through the same model with random weights
    "SVD_EVERY": (10, 10),               # the SVD measures on the first head of each key/value group of every k-th layer
    "RANKS": ([4, 16], [4, 8, 16, 32, 48, 56]),   # query/key ranks r tried below d_h (r = d_h is the uncut model)
    "COMPRESSION_WINDOWS": (1, 1),       # test windows per corpus for the compression
    "COMPRESSION_N_MIN": (128, 256),     # the compression is read at the n of N_VALUES from this one up
    "CALIBRATION": (1, 1),               # calibration windows per corpus (from the first fifth of the text)
}
HEADLINE_TOL = 1e-3
PROBE_CHECK_N = 48                       # the window on which the probe is compared with the model's eager attention
SINK_EPS = 0.3                           # Gu et al. 2025: a head is a sink head when its first-token mass exceeds 0.3
PERPLEXITY_TOLERANCES = (0.01, 0.05)     # "within 1 %" and "within 5 %" of the uncut perplexity
CORPUS_NAMES = {"shakespeare": "Shakespeare", "bbc": "BBC News"}
BARRIER = theory.BARRIER_FRACTION        # 1 - 1/e


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved) and check the window lengths and ranks against the
    model's positions and d_h (this loads the model, which the chapter needs anyway)."""
    P["CORPORA"] = P.default("CORPORA", list(decoder.CORPORA))
    if P.MODEL_PATH is None:      # None means the packaged model; the appendix names it
        P.resolved["MODEL_PATH"] = f"{decoder.MODEL_NAME}, from the package {decoder.MODEL_DIST}"
    P.fill_mode_defaults(DEFAULTS)
    P["TOLERANCES"] = sorted(set(P.default("TOLERANCES", [HEADLINE_TOL])) | {HEADLINE_TOL}, reverse=True)
    facts = decoder.model_facts(decoder.load_model("pretrained", P.MODEL_PATH))
    parameters.require(max(P.N_VALUES) <= facts["max_positions"], "N_VALUES", P.N_VALUES,
                       f"window lengths up to the model's {facts['max_positions']} positions")
    parameters.require(all(1 <= r < facts["d_head"] for r in P.RANKS), "RANKS", P.RANKS,
                       f"ranks from 1 to d_h - 1 = {facts['d_head'] - 1} (r = d_h is the uncut model)")
    parameters.require(P.COMPRESSION_N_MIN <= max(P.N_VALUES), "COMPRESSION_N_MIN", P.COMPRESSION_N_MIN,
                       f"at most the largest window length, {max(P.N_VALUES)}")
    P["N_VALUES"], P["RANKS"] = sorted(set(P.N_VALUES)), sorted(set(P.RANKS))
    return P


def svd_layers(layers: int, every: int) -> list[int]:
    """0-based layers whose sampled heads get the SVD measures: every `every`-th from the first, and the last."""
    return sorted(set(range(0, layers, every)) | {layers - 1})


# ------------------------------------------------------------------------------------------------ sweeps
def head_sweep(P, layers: int) -> pd.DataFrame:
    configs = []
    for weights, count in (("pretrained", P.WINDOWS), ("random", P.RANDOM_WINDOWS)):
        configs += [{**c, "weights": weights, "model_path": P.MODEL_PATH, "n_values": list(P.N_VALUES),
                     "svd_layers": svd_layers(layers, P.SVD_EVERY), "tolerances": list(P.TOLERANCES)}
                    for c in grid(corpus=list(P.CORPORA), window=list(range(count)))]
    return run_sweep(EXPERIMENT_HEADS, window_point, configs, seeds=[P.SEED], progress=True)


def layer_cut_sweep(P) -> pd.DataFrame:
    """One layer at a time cut to the largest rank tried, at the smallest compression n, on the first compression
    window of the first corpus (one forward pass per layer)."""
    n = min(n for n in P.N_VALUES if n >= P.COMPRESSION_N_MIN)
    configs = [{**c, "model_path": P.MODEL_PATH, "n": n, "n_max": max(P.N_VALUES), "r": max(P.RANKS),
                "calibration": P.CALIBRATION}
               for c in grid(corpus=list(P.CORPORA)[:1], window=[0])]
    return run_sweep(EXPERIMENT_LAYERS, layer_cut_point, configs, seeds=[P.SEED], progress=True)


def compression_sweep(P) -> pd.DataFrame:
    n_values = [n for n in P.N_VALUES if n >= P.COMPRESSION_N_MIN]
    configs = [{**c, "model_path": P.MODEL_PATH, "n_values": n_values, "ranks": list(P.RANKS),
                "calibration": P.CALIBRATION}
               for c in grid(corpus=list(P.CORPORA), window=list(range(P.COMPRESSION_WINDOWS)))]
    return run_sweep(EXPERIMENT_COMPRESSION, compression_point, configs, seeds=[P.SEED], progress=True)


# ------------------------------------------------------------------------------------------------ rules
def quality_verdict(losses: pd.DataFrame) -> Verdict:
    """The model counts as a language model of this text when its loss is below the bigram's in every window at
    every n (`losses`: rows with loss, unigram, bigram)."""
    beaten = int((losses.loss < losses.bigram).sum())
    holds = beaten == len(losses)
    return Verdict("learned" if holds else "not_learned",
                   f"below the bigram baseline in {beaten} of {len(losses)} (window, n) pairs",
                   rule="learned when the next-token loss is below the bigram's in every window at every n",
                   evidence={"beaten": beaten, "pairs": len(losses)})


def barrier_verdict(heads_above: int, heads: int) -> Verdict:
    """The paper's 0.63 n bound on the hardmax rank of single heads."""
    holds = heads_above == 0
    return Verdict("holds" if holds else "fails",
                   "no head's hardmax rank exceeds 0.63 n" if holds
                   else f"{heads_above:,} of {heads:,} (head, window, n) hardmax ranks exceed 0.63 n",
                   rule="holds when no head's hardmax rank exceeds (1 - 1/e) n at any n",
                   evidence={"heads_above": heads_above, "heads": heads})


def smallest_rank(ranks, losses, base: float, tolerance: float) -> float:
    """The smallest r tried whose loss is within ln(1 + tolerance) of the uncut loss (perplexity within
    `tolerance`), read at the ranks tried; the book's saturation rule with a known plateau. NaN when none is."""
    point = saturation.saturation_point(ranks, -np.asarray(losses, dtype=float),
                                        reference=-(base + math.log1p(tolerance)), within=0.0, interpolate="none")
    return point.value


def needed_ranks(comp: pd.DataFrame, base: pd.DataFrame, d_head: int, tolerance: float,
                 windows=None) -> dict[int, float]:
    """{n: the smallest r within `tolerance`} on the pooled windows (all, or `windows` only), r = d_h the uncut model."""
    keep = comp if windows is None else comp[comp.key.isin(windows)]
    keep_base = base if windows is None else base[base.key.isin(windows)]
    out = {}
    for n, part in keep.groupby("n"):
        uncut = float(keep_base[keep_base.n == n].loss.mean())
        curve = part.groupby("r").loss.mean()
        ranks = list(curve.index) + [d_head]
        out[int(n)] = smallest_rank(ranks, list(curve.values) + [uncut], uncut, tolerance)
    return out


def growth_outcome(needed: dict[int, float]) -> str:
    """How the needed rank moves from the smallest to the largest n: grows, flat or shrinks."""
    n_values = sorted(needed)
    first, last = needed[n_values[0]], needed[n_values[-1]]
    return "grows" if last > first else "shrinks" if last < first else "flat"


def needed_text(needed: dict[int, float], grid_r) -> str:
    """Each needed rank as the bracket of the ranks tried: "17 to 32 at n = 256, 33 to 48 at n = 512", or
    "57 to 64 at every n from 256 to 2,048" when they are all the same."""
    brackets = {n: saturation.bracket_text(grid_r, r, at_first=r == min(grid_r)) for n, r in sorted(needed.items())}
    if len(set(brackets.values())) == 1 and len(brackets) > 1:
        return f"{next(iter(brackets.values()))} at every n from {min(brackets):,} to {max(brackets):,}"
    return ", ".join(f"{bracket} at n = {n:,}" for n, bracket in brackets.items())


def redundancy_verdict(comp, base, d_head: int, tolerance: float) -> Verdict:
    """The paper's third claim for this model: a query/key rank of about log n suffices. At each n the needed rank
    (smallest r within `tolerance`) is compared with ceil(log2 n): "fails" when the bracket's lowest possible value is
    above it at every n, "holds" when the needed rank is at most ceil(log2 n) at every n, recomputed with each window
    left out; anything else, or a flip, is untestable."""
    grid_r = sorted(set(comp.r)) + [d_head]
    keys = sorted(comp.key.unique())

    def outcome(windows=None) -> str:
        needed = needed_ranks(comp, base, d_head, tolerance, windows)
        logs = {n: math.ceil(math.log2(n)) for n in needed}
        if all(saturation.lowest_possible(grid_r, r) > logs[n] for n, r in needed.items()):
            return "fails"
        if all(r <= logs[n] for n, r in needed.items()):
            return "holds"
        return robust.UNTESTABLE

    decided = outcome()
    flips = [f"{left} left out" for left in keys
             if len(keys) >= 2 and outcome([k for k in keys if k != left]) != decided]
    needed = needed_ranks(comp, base, d_head, tolerance)
    pct = english.number(100 * tolerance, 2)
    text = needed_text(needed, grid_r)
    logs = english.join([f"{math.ceil(math.log2(n))}" for n in sorted(needed)])
    evidence = {"needed": {str(k): v for k, v in needed.items()}, "flips": flips, "windows": len(keys)}
    rule = ("fails when the needed rank's bracket lies above ⌈log₂ n⌉ at every n, holds when it is at most "
            "⌈log₂ n⌉ at every n, on every leave-one-window-out")
    if flips or decided == robust.UNTESTABLE:
        why = f"leaving out {english.join(flips)} changes it" if flips else "the brackets straddle ⌈log₂ n⌉"
        return Verdict(robust.UNTESTABLE, f"the claim is untestable at this budget ({why}): the smallest r within "
                       f"{pct} % is {text}, against ⌈log₂ n⌉ = {logs}", rule=rule, evidence=evidence)
    # sentences that name their subject: the chapter says "in this model ..." and the ledger "in chapter 10's decoder"
    if decided == "fails":
        sentence = (f"the heads cannot be cut to about log n: to keep the perplexity within {pct} %, every head needs "
                    f"{text}, more than ⌈log₂ n⌉ = {logs}")
    else:
        sentence = (f"the heads can be cut to about log n: the smallest r within {pct} % is {text}, at most "
                    f"⌈log₂ n⌉ = {logs}")
    return Verdict(decided, sentence, rule=rule, evidence=evidence)


def growth_verdict(comp, base, d_head: int, tolerance: float) -> Verdict:
    """The growth of the needed rank with n, recomputed with each window left out; untestable if any flips it."""
    needed = needed_ranks(comp, base, d_head, tolerance)
    outcome = growth_outcome(needed)
    keys = sorted(comp.key.unique())
    flips = []
    if len(keys) >= 2:
        for left in keys:
            kept = [k for k in keys if k != left]
            if growth_outcome(needed_ranks(comp, base, d_head, tolerance, kept)) != outcome:
                flips.append(f"{left} left out")
    pct = english.number(100 * tolerance, 2)
    at_top = all(r == d_head for r in needed.values())
    rule = "grows / flat / shrinks from the smallest to the largest n, on every leave-one-window-out"
    evidence = {"needed": {str(k): v for k, v in needed.items()}, "flips": flips, "windows": len(keys)}
    if flips or len(keys) < 2 or at_top:
        reason = (f"leaving out {english.join(flips)} changes it" if flips else
                  "fewer than 2 windows" if len(keys) < 2 else
                  f"no rank below the head dimension dₕ = {d_head} keeps the perplexity within {pct} % at any n")
        return Verdict(robust.UNTESTABLE, f"untestable at this budget ({reason})", rule=rule, evidence=evidence)
    words = {"grows": "grows with n", "flat": "does not change with n", "shrinks": "shrinks as n grows"}
    return Verdict(outcome, f"the smallest r within {pct} % of the uncut perplexity {words[outcome]}", rule=rule,
                   evidence=evidence)


# ------------------------------------------------------------------------------------------------ the chapter
def analyse(P) -> ChapterResult:
    """Run the model (and its random-weight control) over the windows, then the compression; return the chapter's
    frames, quotes and verdicts."""
    result = ChapterResult()
    model, _ = decoder.load("pretrained", P.MODEL_PATH)
    facts = decoder.model_facts(model)
    result.data["facts"] = facts
    probe_window = decoder.text_windows(decoder.load_tokenizer(P.MODEL_PATH), P.CORPORA[0], PROBE_CHECK_N, 1, P.SEED)
    agreement = attention.eager_agreement(model, probe_window)    # the probe against the model's own eager attention
    result.frames["probe_agreement"] = agreement
    result.quote("ch10_probe_agreement", agreement, ".2g")
    result.quote("ch10_probe_n", PROBE_CHECK_N, "d")
    df = head_sweep(P, facts["layers"])
    df["key"] = df.corpus + " window " + (df.window + 1).astype(str)
    heads, windows = df[df.kind == "head"].copy(), df[df.kind == "window"].copy()
    heads["rank_over_n"] = heads.hardmax / heads.n
    result.data.update(heads=heads, windows=windows)
    _setting(P, facts, result)
    _quality(P, windows, result)
    _ranks(P, facts, heads, result)
    _sinks_and_scale(P, heads, result)
    _minilm(P, result)
    comp = compression_sweep(P)
    comp["key"] = comp.corpus + " window " + (comp.window + 1).astype(str)
    _compression(P, facts, comp, windows, result)
    _layer_cuts(P, layer_cut_sweep(P), result)
    result.frames["peak_memory_gb"] = peak_memory_gb()
    return result.done()


def peak_memory_gb() -> float:
    """The largest resident memory this process has used so far, in GB (Linux reports kilobytes, macOS bytes)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1e9 if sys.platform == "darwin" else 1e6)


def _setting(P, facts, result) -> None:
    for key in ("layers", "heads", "kv_heads", "d_model", "d_head", "max_positions"):
        result.quote(f"ch10_{key}", facts[key], ",d")
    result.quote("ch10_model_name", decoder.MODEL_NAME if P.MODEL_PATH is None else str(P.MODEL_PATH))
    result.quote("ch10_n_min", P.N_VALUES[0], "d")
    result.quote("ch10_n_max", P.N_VALUES[-1], "d")
    result.quote("ch10_n_list", english.join([f"{n:,}" for n in P.N_VALUES]))
    result.quote("ch10_windows", english.plural(P.WINDOWS, "test window"))
    result.quote("ch10_random_windows", english.plural(P.RANDOM_WINDOWS, "window"))
    result.quote("ch10_corpora", english.join([CORPUS_NAMES[c] for c in P.CORPORA]))
    layers = [layer + 1 for layer in svd_layers(facts["layers"], P.SVD_EVERY)]
    result.quote("ch10_svd_layers", english.join([str(layer) for layer in layers]))
    result.quote("ch10_svd_heads", len(layers) * facts["kv_heads"], "d")
    result.quote("ch10_calibration_text", english.plural(P.CALIBRATION, "calibration window"))
    result.frames["n_values"] = list(P.N_VALUES)


def _quality(P, windows, result) -> None:
    pre = windows[windows.weights == "pretrained"]
    table = pre.groupby(["corpus", "n"])[["loss", "unigram", "bigram"]].mean()
    rand = windows[windows.weights == "random"].groupby(["corpus", "n"]).loss.mean()
    table["random weights"] = rand
    result.data["quality"] = table
    result.frames["quality"] = table.reset_index()
    result.verdict("ch10_quality", quality_verdict(pre))
    top = pre[pre.n == P.N_VALUES[-1]]
    result.quote("ch10_loss_top", float(top.loss.mean()), ".2f")
    result.quote("ch10_bigram_top", float(top.bigram.mean()), ".2f")
    result.quote("ch10_unigram_top", float(top.unigram.mean()), ".2f")
    low = pre[pre.n == P.N_VALUES[0]]
    result.quote("ch10_loss_low", float(low.loss.mean()), ".2f")


def rank_table(heads: pd.DataFrame, measures) -> pd.DataFrame:
    """Mean over heads and windows of each measure / n, per (weights, n); the causal random reference beside it."""
    table = heads.groupby(["weights", "n"])[list(measures)].mean()
    table = table.div(table.index.get_level_values("n"), axis=0)
    return table


def _ranks(P, facts, heads, result) -> None:
    measures = ["hardmax", rank.label("numerical", HEADLINE_TOL), "energy", "effective"]
    table = rank_table(heads, measures)
    ref = pd.Series({n: counterexamples.expected_causal_hardmax_rank(n) / n for n in P.N_VALUES})
    result.data["rank_table"], result.data["causal_reference"] = table, ref
    result.frames["rank_table"] = table.reset_index()
    pre = heads[heads.weights == "pretrained"]
    above = int((pre.hardmax > BARRIER * pre.n).sum())
    result.verdict("ch10_barrier", barrier_verdict(above, len(pre)))
    above_causal = int((pre.hardmax > (pre.n + 1) / 2).sum())
    result.quote("ch10_above_causal", above_causal, ",d")
    result.quote("ch10_head_rows", len(pre), ",d")
    top = pre[pre.n == P.N_VALUES[-1]]
    result.quote("ch10_hm_mean_top", float(top.rank_over_n.mean()), ".2f")
    result.quote("ch10_hm_max_top", float(top.rank_over_n.max()), ".2f")
    result.quote("ch10_hm_mean_low", float(pre[pre.n == P.N_VALUES[0]].rank_over_n.mean()), ".2f")
    rnd = heads[(heads.weights == "random") & (heads.n == P.N_VALUES[-1])]
    result.quote("ch10_hm_random_top", float(rnd.rank_over_n.mean()), ".2f")
    # growth: the exponent of the mean hardmax rank in n, per window (a log-log least-squares line)
    per_window = pre.groupby(["key", "n"]).hardmax.mean().unstack("n")
    logn = np.log(per_window.columns.to_numpy(dtype=float))
    slopes = [float(np.polyfit(logn, np.log(row.to_numpy(dtype=float)), 1)[0]) for _, row in per_window.iterrows()]
    result.quote("ch10_hm_exponent_low", min(slopes), ".2f")
    result.quote("ch10_hm_exponent_high", max(slopes), ".2f")
    sampled = pre.dropna(subset=[measures[1]])
    top_s = sampled[sampled.n == P.N_VALUES[-1]]
    num = measures[1]
    result.quote("ch10_num_mean_top", float((top_s[num] / top_s.n).mean()), ".2f")
    result.quote("ch10_num_min_top", float((top_s[num] / top_s.n).min()), ".2f")
    result.quote("ch10_energy_mean_top", float((top_s.energy / top_s.n).mean()), ".3f")
    result.quote("ch10_energy_mean_low", float((sampled[sampled.n == P.N_VALUES[0]].energy
                                                / P.N_VALUES[0]).mean()), ".3f")
    per_layer = pre.assign(layer=pre.layer.astype(int)).groupby(["n", "layer"]).rank_over_n.mean()
    result.data["per_layer"] = per_layer.unstack("n")


def minilm_hardmax(P) -> pd.Series:
    """all-MiniLM-L6-v2's mean hardmax rank / n (chapter 09's sweep) at the n of this run it can take (n <= 512)."""
    n_values = [n for n in P.N_VALUES if n <= minilm.N_MAX]
    if not n_values:
        return pd.Series(dtype=float)
    df = ch09_pretrained_model.head_rank_sweep(P.CORPORA, n_values, P.WINDOWS, [], P.SEED, weights=["pretrained"],
                                               progress=False)
    return (df.hardmax / df.n).groupby(df.n).mean()


def _minilm(P, result) -> None:
    encoder = minilm_hardmax(P)
    result.data["minilm_hardmax"] = encoder
    result.frames["minilm_hardmax"] = {str(n): float(v) for n, v in encoder.items()}
    top = int(encoder.index.max()) if len(encoder) else None
    table = result.data["rank_table"]
    result.quote("ch10_minilm_n", top if top else math.nan, ",d")
    result.quote("ch10_minilm_hm", float(encoder.loc[top]) if top else math.nan, ".2f")
    result.quote("ch10_smol_hm_at_minilm_n", float(table.loc[("pretrained", top), "hardmax"]) if top else math.nan,
                 ".2f")


def scale_slopes(heads: pd.DataFrame) -> list[float]:
    """Per window, the least-squares slope of the median head's logit scale against ln n."""
    medians = heads.groupby(["key", "n"]).logit_scale.median().unstack("n")
    logn = np.log(medians.columns.to_numpy(dtype=float))
    return [float(np.polyfit(logn, row.to_numpy(dtype=float), 1)[0]) for _, row in medians.iterrows()]


def scale_growth_verdict(heads: pd.DataFrame) -> Verdict:
    """Does the median logit scale grow faster in ln n than the random-code threshold ln((n - 1)(1 - eps)/eps),
    whose slope in ln n tends to 1? Decided only when every window's slope is on the same side of 1."""
    slopes = scale_slopes(heads)
    low, high = min(slopes), max(slopes)
    span = f"{english.number(low, 2)} to {english.number(high, 2)} over {len(slopes)} windows"
    rule = "faster when every window's slope of the median logit scale in ln n exceeds 1, slower when every one is below"
    evidence = {"slopes": slopes}
    if low > 1:
        return Verdict("faster", f"grows faster than the threshold: its slope in ln n is {span}, against 1",
                       rule=rule, evidence=evidence)
    if high < 1:
        return Verdict("slower", f"grows more slowly than the threshold: its slope in ln n is {span}, against 1",
                       rule=rule, evidence=evidence)
    return Verdict(robust.UNTESTABLE, f"untestable at this budget: its slope in ln n is {span}, on both sides of 1",
                   rule=rule, evidence=evidence)


def _sinks_and_scale(P, heads, result) -> None:
    pre = heads[heads.weights == "pretrained"]
    share = (pre.assign(sink=pre.first_token_mass > SINK_EPS, layer=pre.layer.astype(int))
             .groupby(["n", "layer"]).sink.mean().unstack("n"))
    result.data["sink_share"] = share
    overall = pre.assign(sink=pre.first_token_mass > SINK_EPS).groupby("n").sink.mean()
    result.frames["sink_share"] = {str(n): float(v) for n, v in overall.items()}
    result.quote("ch10_sink_low", 100 * float(overall.iloc[0]), ".0f")
    result.quote("ch10_sink_top", 100 * float(overall.iloc[-1]), ".0f")
    result.quote("ch10_sink_eps", SINK_EPS, ".1f")
    scale = pre.groupby("n").logit_scale.describe()[["50%", "max"]]
    result.data["logit_scale"] = scale
    result.frames["logit_scale"] = {str(n): {"median": float(r["50%"]), "max": float(r["max"])}
                                    for n, r in scale.iterrows()}
    # the margin law of chapter 03c: a head can put mass 1 - eps on one key of n only if n < divergence_n(L)
    can_focus = pre.assign(ok=pre.n < pre.logit_scale.map(margin.divergence_n)).groupby("n").ok.mean()
    result.data["can_focus"] = can_focus
    result.quote("ch10_focus_low", 100 * float(can_focus.iloc[0]), ".0f")
    result.quote("ch10_focus_top", 100 * float(can_focus.iloc[-1]), ".0f")
    result.verdict("ch10_scale_growth", scale_growth_verdict(pre))
    result.quote("ch10_scale_median_low", float(scale["50%"].iloc[0]), ".1f")
    result.quote("ch10_scale_median_top", float(scale["50%"].iloc[-1]), ".1f")
    result.quote("ch10_scale_max_top", float(scale["max"].iloc[-1]), ".1f")


def _compression(P, facts, comp, windows, result) -> None:
    d_head = facts["d_head"]
    base = windows[(windows.weights == "pretrained") & windows.key.isin(set(comp.key)) & windows.n.isin(set(comp.n))]
    curves = comp.groupby(["n", "r"]).loss.mean().unstack("r")
    curves[d_head] = base.groupby("n").loss.mean()
    ratio = np.exp(curves.sub(curves[d_head], axis=0)) - 1                       # relative perplexity increase
    result.data["perplexity_increase"] = ratio
    result.frames["perplexity_increase"] = {str(n): {str(r): float(v) for r, v in row.items()}
                                            for n, row in ratio.iterrows()}
    grid_r = sorted(set(comp.r)) + [d_head]
    rows = {}
    for tolerance in PERPLEXITY_TOLERANCES:
        pct = english.number(100 * tolerance, 2)
        needed = needed_ranks(comp, base, d_head, tolerance)
        spread = {}
        keys = sorted(comp.key.unique())
        if len(keys) >= 2:
            for left in keys:
                for n, r in needed_ranks(comp, base, d_head, tolerance, [k for k in keys if k != left]).items():
                    spread.setdefault(n, set()).add(r)
        rows[f"within {pct} %"] = {
            n: saturation.bracket_text(grid_r, r, at_first=r == min(grid_r))
            + (f" ({english.join([english.number(v, 3) for v in sorted(spread[n])])} leaving one window out)"
               if n in spread and len(spread[n]) > 1 else "")
            for n, r in needed.items()}
        key = f"ch10_growth_{int(round(100 * tolerance))}pct"
        result.verdict(key, growth_verdict(comp, base, d_head, tolerance))
    result.verdict("ch10_redundancy", redundancy_verdict(comp, base, d_head, max(PERPLEXITY_TOLERANCES)))
    table = pd.DataFrame(rows).T
    table.columns = [f"n = {n:,}" for n in table.columns]
    result.data["needed_table"] = table
    result.frames["needed_table"] = table.reset_index().rename(columns={"index": "tolerance"})
    largest = comp[comp.r == max(comp.r)]
    result.quote("ch10_key_dropped", 100 * float(largest.key_energy_dropped.mean()), ".1f")
    result.quote("ch10_query_dropped", 100 * float(largest.query_energy_dropped.mean()), ".1f")
    result.quote("ch10_ranks_tried", english.join([str(r) for r in grid_r]))
    result.quote("ch10_compression_windows", len(set(comp.key)), "d")
    smallest = int(min(comp.r))
    worst = float(ratio[smallest].max())
    result.quote("ch10_worst_increase", 100 * worst, ".0f")
    result.quote("ch10_smallest_r", smallest, "d")


def _layer_cuts(P, cuts, result) -> None:
    per_layer = (cuts.loss - cuts.uncut).groupby(cuts.layer).mean()              # mean loss increase (nats) per layer
    result.data["layer_cuts"] = per_layer
    result.frames["layer_cuts"] = {str(layer): float(v) for layer, v in per_layer.items()}
    total = float(per_layer.sum())
    top = per_layer.sort_values(ascending=False)
    count = int(min(4, len(top)))
    result.quote("ch10_cut_r", int(cuts.r.iloc[0]), "d")
    result.quote("ch10_cut_n", int(cuts.n.iloc[0]), ",d")
    result.quote("ch10_cut_top_layers", english.join([str(int(layer)) for layer in sorted(top.index[:count])]))
    result.quote("ch10_cut_top_share", 100 * float(top.iloc[:count].sum()) / total if total > 0 else math.nan, ".0f")
    result.quote("ch10_cut_top_count", count, "d")
    result.quote("ch10_cut_sum", total, ".2f")
