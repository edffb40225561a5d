"""Read every head's attention probabilities from a `helpers.models.Transformer` without changing its output.

    with capture(model) as cap:                     # all layers
        logits = model(x)
    cap.probs                                       # (layer, batch, head, query, key), rows sum to 1

    with capture(model, layers=[0], measures=("numerical", "effective"), store=False) as cap:
        model(x)                                    # long sequences: ranks per layer, no matrices kept
    cap.ranks["numerical"]                          # (layer, batch, head) float64

While capturing, each chosen layer also computes its probabilities explicitly (in the "explicit" path it
hands over the very matrix it uses); the output is the one the model computes anyway. The probes are
removed in `finally`, even if the body raises. Ranks use `helpers.rank` (SVDs in float64).
"""

from contextlib import contextmanager

import torch

from . import rank
from .errors import ArgumentError


class Captured:
    """What a capture collected: `probs` `(layer, batch, head, n, n)` and/or `ranks` {measure: (layer, batch, head)}.

    `layers` lists the model layer index of each entry along the first axis. After several forward
    passes inside one block, the batches are concatenated along the batch axis.
    """

    def __init__(self, layers: list[int], measures: tuple[str, ...], rtol: float, store: bool, to_cpu: bool):
        self.layers, self.measures, self.rtol, self.store, self.to_cpu = layers, measures, rtol, store, to_cpu
        self._probs = {layer: [] for layer in layers}
        self._ranks = {layer: {m: [] for m in measures} for layer in layers}

    def _record(self, layer: int, probs: torch.Tensor) -> None:
        probs = probs.detach()
        if self.store:
            self._probs[layer].append(probs.cpu() if self.to_cpu else probs)
        if self.measures:
            values = rank.measures(probs, self.measures, (self.rtol,))   # keyed by label, e.g. "numerical@1e-03"
            for name in self.measures:
                self._ranks[layer][name].append(values[rank.label(name, self.rtol)].cpu())

    @property
    def probs(self) -> torch.Tensor | None:
        """Probabilities `(layer, batch, head, query, key)`, or None when `store=False`."""
        if not self.store:
            return None
        if not all(self._probs[layer] for layer in self.layers):
            raise RuntimeError("nothing was captured: run the model inside the `with capture(...)` block")
        return torch.stack([torch.cat(self._probs[layer], dim=0) for layer in self.layers])

    @property
    def ranks(self) -> dict[str, torch.Tensor]:
        """{measure: `(layer, batch, head)` float64} for the measures asked for.

        Keyed by the bare measure name ("numerical", not "numerical@1e-03"): a capture has one tolerance,
        `self.rtol`, and `helpers.rank.label(name, rtol)` gives the book's label for it.
        """
        if self.measures and not all(self._ranks[layer][self.measures[0]] for layer in self.layers):
            raise RuntimeError("nothing was captured: run the model inside the `with capture(...)` block")
        return {m: torch.stack([torch.cat(self._ranks[layer][m], dim=0) for layer in self.layers])
                for m in self.measures}


def _check(model, layers, measures, store, rtol):
    attentions = getattr(model, "attentions", None)
    if attentions is None:
        raise ArgumentError("model", type(model).__name__, "a helpers.models.Transformer (with .attentions)")
    n_layers = len(attentions)
    if layers is None:
        layers = list(range(n_layers))
    elif isinstance(layers, int):
        layers = [layers]
    layers = [int(layer) for layer in layers]
    if not layers or any(not -n_layers <= layer < n_layers for layer in layers):
        raise ArgumentError("layers", layers, f"None (all) or layer indices in [0, {n_layers})")
    layers = [layer % n_layers for layer in layers]
    if len(set(layers)) != len(layers):
        raise ArgumentError("layers", layers, "distinct layer indices")
    measures = tuple(measures or ())
    for m in measures:
        if m not in rank.MEASURES:
            raise ArgumentError("measures", measures, f"a tuple of {list(rank.MEASURES)}")
    if not store and not measures:
        raise ArgumentError("store", store, "True unless measures are asked for (otherwise nothing is kept)")
    if not rtol > 0:
        raise ArgumentError("rtol", rtol, "a number > 0")
    return layers, measures


@contextmanager
def capture(model, layers=None, measures=None, store: bool | None = None, rtol: float = rank.DEFAULT_RTOL,
            to_cpu: bool = True):
    """Collect attention probabilities (and/or rank measures) of `layers` during the forward passes in the block.

    layers: None (all), an index or a list of indices (negative counts from the end).
    measures: rank measures from `helpers.rank.MEASURES` computed per layer on the fly.
    store: keep the matrices (default: True when no measures are asked for, else False).
    Yields a `Captured`; read `.probs` / `.ranks` after the forward pass.
    """
    if store is None:
        store = not measures
    layers, measures = _check(model, layers, measures, store, rtol)
    result = Captured(layers, measures, rtol, store, to_cpu)
    attentions = model.attentions
    for layer in layers:
        if attentions[layer].probe is not None:
            raise RuntimeError(f"layer {layer} is already being captured (nested capture of the same layer)")
    try:
        for layer in layers:
            attentions[layer].probe = lambda probs, layer=layer: result._record(layer, probs)
        yield result
    finally:
        for layer in layers:
            attentions[layer].probe = None


def attention_probs(model, x: torch.Tensor, layers=None) -> torch.Tensor:
    """One forward pass in eval mode without gradients -> probabilities `(layer, batch, head, n, n)`."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), capture(model, layers) as cap:
            model(x)
    finally:
        model.train(was_training)
    return cap.probs


def attention_logits(model, x: torch.Tensor) -> torch.Tensor:
    """One forward pass in eval mode without gradients -> every head's logits `(layer, batch, head, n, n)`
    (`Transformer.attention_logits`; their row softmax is `attention_probs`)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return model.attention_logits(x)
    finally:
        model.train(was_training)


def attention_ranks(model, x: torch.Tensor, measures=rank.MEASURES, layers=None,
                    rtol: float = rank.DEFAULT_RTOL) -> dict[str, torch.Tensor]:
    """One no-grad eval forward pass -> {measure: `(layer, batch, head)` float64}, no matrices kept."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), capture(model, layers, measures=measures, rtol=rtol) as cap:
            model(x)
    finally:
        model.train(was_training)
    return cap.ranks
