"""The attention of a Llama-type decoder, read and cut layer by layer (RoPE and grouped-query attention included).

    with probing(model, on_layer=look) as probe:      # look(a: LayerAttention) is called once per layer
        losses = next_token_losses(model, ids)         # (batch, n - 1) nats

    with probing(model, key_bases=bases):              # every head's query/key space cut to rank r
        losses = next_token_losses(model, ids)

While probing, each attention module runs `_attention_forward` below instead of its own forward: the same
projections, the model's own rotary embedding, and the fused causal SDPA kernel for the output. A callback
receives the layer's queries and keys before and after RoPE and, when it asks for them, the logits and the
probabilities of that layer only, so n = 2048 never needs every layer's n x n matrices at once. The module's own
forward is restored in `finally`. A test checks the probabilities against the model's eager attention and the
output against the unprobed model.

Cutting the query/key space: `key_bases[layer]` `(kv_heads, d_h, r)` holds orthonormal columns per key/value
group; each key after RoPE is replaced by its projection B B^T k, so every logit q . B B^T k of that group's
heads has rank at most r (projecting the keys alone is enough: B B^T is symmetric and idempotent).
"""

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F

from .errors import ArgumentError


@dataclass
class LayerAttention:
    """One layer's attention on a batch of windows.

    query_pre `(B, H, n, d)` and key_pre `(B, KV, n, d)` are the projections before RoPE; query and key after it
    (key after the cut, if any). `groups` = H / KV query heads share each key/value head.
    """

    layer: int
    query_pre: torch.Tensor
    key_pre: torch.Tensor
    query: torch.Tensor
    key: torch.Tensor
    scaling: float
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def groups(self) -> int:
        return self.query.shape[1] // self.key.shape[1]

    @property
    def scores(self) -> torch.Tensor:
        """`(B, H, n, n)`: scaling * q_i . k_j for every pair, the causal mask not applied."""
        if "scores" not in self._cache:
            key = self.key.repeat_interleave(self.groups, dim=1)          # (B, H, n, d): head h reads group h // groups
            self._cache["scores"] = (self.query @ key.transpose(-1, -2)) * self.scaling
        return self._cache["scores"]

    @property
    def logits(self) -> torch.Tensor:
        """`(B, H, n, n)`: `scores` on and below the diagonal, -inf above (the causal mask)."""
        if "logits" not in self._cache:
            n = self.scores.shape[-1]
            future = torch.ones(n, n, dtype=torch.bool, device=self.scores.device).triu(1)
            self._cache["logits"] = self.scores.masked_fill(future, float("-inf"))
        return self._cache["logits"]

    @property
    def probs(self) -> torch.Tensor:
        """`(B, H, n, n)`: the softmax of `logits` over keys; row i is zero beyond column i."""
        if "probs" not in self._cache:
            self._cache["probs"] = torch.softmax(self.logits, dim=-1)
        return self._cache["probs"]


def _rotary(module):
    """The rotary function of the module's own model file (Llama, Mistral and Qwen2 each define one)."""
    return sys.modules[type(module).__module__].apply_rotary_pos_emb


def _attention_forward(module, layer: int, on_layer, basis, hidden_states, position_embeddings=None,
                       attention_mask=None, **kwargs):
    """A Llama attention module's forward on `hidden_states` `(B, n, d_model)`, with no padding and no cache."""
    if kwargs.get("past_key_values") is not None or kwargs.get("cache") is not None:
        raise ArgumentError("past_key_values", "a cache", "None: probing runs whole windows (use_cache=False)")
    batch, n, _ = hidden_states.shape
    d = module.head_dim
    q_pre = module.q_proj(hidden_states).view(batch, n, -1, d).transpose(1, 2)   # (B, H, n, d)
    k_pre = module.k_proj(hidden_states).view(batch, n, -1, d).transpose(1, 2)   # (B, KV, n, d)
    v = module.v_proj(hidden_states).view(batch, n, -1, d).transpose(1, 2)       # (B, KV, n, d)
    cos, sin = position_embeddings
    q, k = _rotary(module)(q_pre, k_pre, cos, sin)
    if basis is not None:
        basis = basis.to(k.dtype)                                               # (KV, d, r)
        k = (k @ basis) @ basis.transpose(-1, -2)                               # B B^T k per group
    if on_layer is not None:
        on_layer(LayerAttention(layer, q_pre, k_pre, q, k, module.scaling))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=module.scaling,
                                         enable_gqa=q.shape[1] != k.shape[1])  # (B, H, n, d)
    out = out.transpose(1, 2).reshape(batch, n, -1)
    return module.o_proj(out), None


def attention_modules(model) -> list:
    """The self-attention module of every decoder layer, in order."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not all(hasattr(layer, "self_attn") for layer in layers):
        raise ArgumentError("model", type(model).__name__, "a Llama-type causal LM (model.model.layers[i].self_attn)")
    return [layer.self_attn for layer in layers]


def check_key_bases(model, key_bases) -> dict:
    """`{layer: (KV, d_h, r)}` with orthonormal columns, for layers of the model; a clear error otherwise."""
    modules = attention_modules(model)
    cfg = model.config
    kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    checked = {}
    for layer, basis in (key_bases or {}).items():
        if not 0 <= int(layer) < len(modules):
            raise ArgumentError("key_bases", layer, f"layer indices from 0 to {len(modules) - 1}")
        d = modules[layer].head_dim
        if basis.ndim != 3 or basis.shape[0] != kv or basis.shape[1] != d or not 1 <= basis.shape[2] <= d:
            raise ArgumentError("key_bases", tuple(basis.shape), f"(key/value heads {kv}, d_h {d}, r from 1 to {d})")
        gram = basis.transpose(-1, -2).double() @ basis.double()
        eye = torch.eye(basis.shape[2], dtype=torch.float64)
        # orthonormal up to the rounding of float32 columns of length d (a few ulps times d)
        if (gram - eye).abs().max() > 64 * d * torch.finfo(torch.float32).eps:
            raise ArgumentError("key_bases", f"layer {layer}", "orthonormal columns (B^T B = I)")
        checked[int(layer)] = basis
    return checked


@contextmanager
def probing(model, on_layer: Callable[[LayerAttention], None] | None = None, layers=None, key_bases=None):
    """Run `model` with the book's attention forward in every layer; restore the modules' forward afterwards.

    `on_layer` is called for the layers in `layers` (default: all); `key_bases` cuts the query/key space.
    """
    modules = attention_modules(model)
    wanted = set(range(len(modules)) if layers is None else (int(layer) for layer in layers))
    bases = check_key_bases(model, key_bases)
    try:
        for index, module in enumerate(modules):
            callback = on_layer if index in wanted else None
            module.forward = partial(_attention_forward, module, index, callback, bases.get(index))
        yield modules
    finally:
        for module in modules:
            module.__dict__.pop("forward", None)


@torch.no_grad()
def next_token_losses(model, ids: torch.Tensor) -> torch.Tensor:
    """Cross-entropy in nats of each next token: `ids` `(B, n)` -> `(B, n - 1)` float32 (position t predicts t + 1)."""
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ArgumentError("ids", tuple(ids.shape), "a (batch, n) tensor of token ids with n >= 2")
    logits = model(input_ids=ids, use_cache=False).logits                          # (B, n, vocab)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), ids[:, 1:], reduction="none")


def prefix_means(values: torch.Tensor, sizes) -> torch.Tensor:
    """Mean of `values` `(..., m)` over its first s entries for each s in `sizes`: `(..., len(sizes))`."""
    cumulative = values.double().cumsum(-1)
    index = torch.tensor([int(s) - 1 for s in sizes])
    if index.min() < 0 or index.max() >= values.shape[-1]:
        raise ArgumentError("sizes", list(sizes), f"lengths from 1 to {values.shape[-1]}")
    return cumulative[..., index] / torch.tensor([float(s) for s in sizes], dtype=torch.float64)


def logit_bound(query: torch.Tensor, key: torch.Tensor) -> float:
    """Rounding bound for float32 logits q . k of length d: d * eps32 * max|q| |k| (elementwise products summed)."""
    d = query.shape[-1]
    return d * torch.finfo(torch.float32).eps * float(query.norm(dim=-1).max() * key.norm(dim=-1).max())
@torch.no_grad()
def key_principal_bases(model, windows) -> tuple[dict[int, torch.Tensor], dict[str, dict[int, torch.Tensor]]]:
    """Every layer's principal directions of its keys after RoPE, per key/value group, strongest first.

    `windows`: token ids `(B, n)` of calibration text. Returns `(bases, grams)`: `bases[layer]` `(KV, d_h, d_h)`
    float32, the eigenvectors of the uncentred second moment sum_t k_t k_t^T (uncentred, because logits are dot
    products: a mean key direction that every key shares, as a sink's, is part of what the logits use), so that
    `[..., :r]` is the rank-r basis; `grams["keys"][layer]` and `grams["queries"][layer]` `(KV, d_h, d_h)` float64,
    the second moments of the keys and of the queries of each group's heads, to measure how much of each a cut
    drops (`dropped_share`).
    """
    keys: dict[int, torch.Tensor] = {}
    queries: dict[int, torch.Tensor] = {}

    def accumulate(a: LayerAttention) -> None:
        key = a.key.double()                                                   # (B, KV, n, d)
        query = a.query.double().unflatten(1, (key.shape[1], a.groups))        # (B, KV, groups, n, d)
        keys[a.layer] = keys.get(a.layer, 0) + torch.einsum("bgnd,bgne->gde", key, key)
        queries[a.layer] = queries.get(a.layer, 0) + torch.einsum("bghnd,bghne->gde", query, query)

    with probing(model, on_layer=accumulate):
        for row in windows:
            model(input_ids=row[None], use_cache=False)
    bases = {}
    for layer, gram in keys.items():
        _, vectors = torch.linalg.eigh(gram)                                   # ascending eigenvalues
        bases[layer] = vectors.flip(-1).float().contiguous()
    return bases, {"keys": keys, "queries": queries}


def dropped_share(gram: torch.Tensor, basis: torch.Tensor, r: int) -> torch.Tensor:
    """The share of the energy trace(G) of vectors with second moment `gram` `(KV, d, d)` that lies outside the first
    r columns of `basis` `(KV, d, d)`: `(KV,)` float64 (0 when r = d)."""
    kept = basis[..., :r].double()
    inside = torch.einsum("gdr,gde,ger->g", kept, gram, kept)
    return 1 - inside / torch.einsum("gdd->g", gram)


@torch.no_grad()
def eager_agreement(model, ids: torch.Tensor) -> float:
    """The largest difference between the probabilities `probing` reads and the model's own eager attention on `ids`
    `(B, n)`, as a share of the rounding bound (<= 1 means they agree to rounding).

    The bound per layer: logits off by at most 2 d eps |q||k| scaling (the same products summed in another order)
    move a probability by at most twice that, and a softmax taken in float32 (as Llama's eager attention does) adds
    (n + 4) eps32 (n exponentials summed, a division, a cast).
    """
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        eager = model(input_ids=ids, output_attentions=True, use_cache=False).attentions
    finally:
        model.set_attn_implementation(before)
    eps, eps32, n = torch.finfo(model.dtype).eps, torch.finfo(torch.float32).eps, ids.shape[1]
    ratios = []

    def compare(a: LayerAttention) -> None:
        d = a.query.shape[-1]
        logit_error = 2 * d * eps * float(a.query.norm(dim=-1).max() * a.key.norm(dim=-1).max()) * a.scaling
        bound = 2 * logit_error + (n + 4) * eps32
        ratios.append(float((a.probs - eager[a.layer]).abs().max()) / bound)

    with probing(model, on_layer=compare):
        model(input_ids=ids, use_cache=False)
    return max(ratios)
