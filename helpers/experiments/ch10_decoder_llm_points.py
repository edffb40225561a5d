"""Chapter 10's grid points: one text window through a decoder LM (ranks, sinks, logit scale, losses), the n-gram
baselines on the same windows, and the loss with every head's query/key space cut to rank r.

Every point runs one window of the longest length n_max: a causal model computes on the first n tokens exactly what it
computes inside the longer window, so the leading n x n block of each attention matrix, and the mean loss of the first
n - 1 predictions, are the results for a window of length n. The points live apart from `ch10_decoder_llm` (the
sweep and `analyse(P)`) because the result store keys a point by the code of its module and what that imports.
"""

from functools import lru_cache

import torch

from .. import decoder, rank, seeding
from ..allocator import keep_large_freed_memory
from .. import decoder_attention as attention
from ..threads import torch_threads

EXPERIMENT_HEADS = "ch10_decoder_heads"
EXPERIMENT_COMPRESSION = "ch10_decoder_compression"
EXPERIMENT_LAYERS = "ch10_decoder_layer_cuts"
ENERGY_SHARE = 0.9


def _window(tokenizer, corpus: str, n: int, window: int, seed: int, part: str = "test") -> torch.Tensor:
    return decoder.text_windows(tokenizer, corpus, n, window + 1, seed, part)[window:]      # (1, n)


def _svd_measures(probs: torch.Tensor, sizes, tolerances) -> list[dict]:
    """Numerical ranks, energy rank and effective rank of each leading block of one head's probs `(n, n)`."""
    out = []
    for s in sizes:
        sigma = rank.singular_values(probs[:s, :s].double())                      # float64, as the book's SVDs are
        row = {rank.label("numerical", t): float(rank.numerical_rank_from_sigma(sigma, t)) for t in tolerances}
        row["energy"] = float(rank.energy_rank_from_sigma(sigma, ENERGY_SHARE))
        row["effective"] = float(rank.effective_rank_from_sigma(sigma))
        out.append(row)
    return out


def window_point(corpus: str, weights: str, model_path, n_values: list, window: int, svd_layers: list,
                 tolerances: list, seed: int) -> list[dict]:
    """Rows per (layer, head, n) with hardmax rank, first-token mass, logit scale (and the SVD measures on the heads
    of `svd_layers`: the first query head of each key/value group), plus one row per n with the window's loss."""
    keep_large_freed_memory()   # each layer frees attention blocks of up to 151 MB that the next allocates
    model, tokenizer = decoder.load(weights, model_path, seeding.derive_seed(seed, "random_init"))
    sizes = sorted(int(n) for n in n_values)
    ids = _window(tokenizer, corpus, sizes[-1], window, seed)
    index = torch.tensor(sizes) - 1
    rows = []

    def look(a: attention.LayerAttention) -> None:
        logits = a.logits[0]                                                      # (H, n, n), -inf above the diagonal
        probs = torch.softmax(logits, dim=-1)
        hardmax = rank.hardmax_rank_prefixes(logits, sizes)                       # (H, S)
        first = attention.prefix_means(probs[..., 0], sizes)                      # (H, S) Gu et al.'s sink metric
        visible = a.scores[0].abs().tril().amax(-1)                               # (H, n) largest visible |logit| per row
        scale = visible.cummax(-1).values[:, index]                               # (H, S) over the first s rows
        for head in range(logits.shape[0]):
            measured = (_svd_measures(probs[head], sizes, tolerances)
                        if a.layer in svd_layers and head % a.groups == 0 else [{}] * len(sizes))
            for k, n in enumerate(sizes):
                rows.append({"kind": "head", "window": window, "layer": a.layer + 1, "head": head + 1,
                             "group": head // a.groups + 1, "n": n, "hardmax": float(hardmax[head, k]),
                             "first_token_mass": float(first[head, k]), "logit_scale": float(scale[head, k]),
                             **measured[k]})

    with torch_threads(None), attention.probing(model, on_layer=look):
        losses = attention.next_token_losses(model, ids)                          # (1, n_max - 1)
    means = attention.prefix_means(losses, [n - 1 for n in sizes])[0]
    rows += [{"kind": "window", "window": window, "n": n, "loss": float(means[k])} for k, n in enumerate(sizes)]
    if weights == "pretrained":
        grams = decoder.ngram_losses(model_path, corpus, ids)
        for name, values in grams.items():
            base = attention.prefix_means(values, [n - 1 for n in sizes])[0]
            for k, row in enumerate(rows[-len(sizes):]):
                row[name] = float(base[k])
    return rows


@lru_cache(maxsize=2)
def _bases(model_path, n: int, calibration: int, seed: int) -> dict:
    model, tokenizer = decoder.load("pretrained", model_path)
    windows = torch.cat([_window(tokenizer, corpus, n, w, seed, "calibration")
                         for corpus in decoder.CORPORA for w in range(calibration)])
    with torch_threads(None):
        return attention.key_principal_bases(model, windows)


def compression_point(corpus: str, model_path, n_values: list, window: int, ranks: list, calibration: int,
                      seed: int) -> list[dict]:
    """The loss of one test window at each n with every head's query/key space cut to rank r (keys after RoPE
    projected on the top-r principal directions of their group's calibration keys), for each r in `ranks`."""
    keep_large_freed_memory()
    model, tokenizer = decoder.load("pretrained", model_path)
    sizes = sorted(int(n) for n in n_values)
    ids = _window(tokenizer, corpus, sizes[-1], window, seed)
    bases, grams = _bases(model_path, sizes[-1], int(calibration), seed)
    rows = []
    for r in ranks:
        cut = {layer: basis[..., :r] for layer, basis in bases.items()}
        with torch_threads(None), attention.probing(model, key_bases=cut):
            losses = attention.next_token_losses(model, ids)
        means = attention.prefix_means(losses, [n - 1 for n in sizes])[0]
        dropped = {kind: float(torch.stack([attention.dropped_share(grams[kind][layer], bases[layer], r)
                                            for layer in bases]).mean()) for kind in ("keys", "queries")}
        rows += [{"window": window, "r": int(r), "n": n, "loss": float(means[k]), "key_energy_dropped":
                  dropped["keys"], "query_energy_dropped": dropped["queries"]} for k, n in enumerate(sizes)]
    return rows


def layer_cut_point(corpus: str, model_path, n: int, n_max: int, window: int, r: int, calibration: int,
                    seed: int) -> list[dict]:
    """The loss of one test window of n tokens with one layer at a time cut to rank r (the other layers uncut),
    and with none cut: which layers carry the cost of the cut. The bases are those of `compression_point`."""
    keep_large_freed_memory()
    model, tokenizer = decoder.load("pretrained", model_path)
    ids = _window(tokenizer, corpus, n, window, seed)
    bases, grams = _bases(model_path, int(n_max), int(calibration), seed)
    with torch_threads(None):
        uncut = float(attention.next_token_losses(model, ids).mean())
        rows = []
        for layer, basis in sorted(bases.items()):
            with attention.probing(model, key_bases={layer: basis[..., :r]}):
                loss = float(attention.next_token_losses(model, ids).mean())
            rows.append({"window": window, "layer": layer + 1, "loss": loss, "uncut": uncut,
                         "key_energy_dropped": float(attention.dropped_share(grams["keys"][layer], basis, r).mean()),
                         "query_energy_dropped": float(attention.dropped_share(grams["queries"][layer], basis,
                                                                              r).mean())})
    return rows
