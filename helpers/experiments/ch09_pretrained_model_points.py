"""Chapter 9's grid point: every head's ranks and sink statistics of all-MiniLM-L6-v2 on seeded text windows.

It lives apart from `ch09_pretrained_model` (the sweep, `analyse(P)` and the verdict rules) because the result
store keys a point by the code of the module that defines it and what that imports: editing the analysis keeps the
cached sweeps.
"""

import torch

from .. import minilm, rank, seeding
from ..threads import torch_threads

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


def _measures(tolerances) -> tuple[str, ...]:
    return MEASURES if len(tolerances) else tuple(m for m in MEASURES if m != "numerical")
