"""The book's one transformer forward pass: M models of one family at once, every tensor with a model axis first.

    out = forward(params, layout, x)        # x (M, batch, ...) -> (M, batch, ...)

A standalone `helpers.models.Transformer` runs it as a stack of one (`Transformer.forward`), and the trainer runs
it on a `helpers.training.ModelStack`; so a model computes the same thing while it trains and while it is read.

`params` maps the standalone parameter names (`blocks.0.attn.qkv.weight`, ...) to tensors `(M, *shape)`; the
query and key rows of `qkv` may be padded with zeros to a common width D (`layout.cfg.d_head`), which leaves
every q.k unchanged. `layout` holds what is not a parameter: the family's config, each model's logit scale per
layer, the rotary and sinusoidal tables, and per layer the attention path and an optional probe.

**Attention paths.** "fast" calls `scaled_dot_product_attention` where torch has a fused kernel for the shapes and
elsewhere runs torch's unfused (math) kernel written out, to the same bits (`_fused_or_math`); "explicit" materialises
the probabilities.
A probe, when a layer has one (set by `helpers.capture`), is called with the probabilities `(M batch, heads,
n, n)` and the output is left exactly as the path computes it. Each model's logit scale is folded into its query
weights (far smaller than the queries), and rotary positions are linear, so the scale commutes with them.

**Why these kernels (CPU, float32).** Biases are fused into `baddbmm`, a norm's per-model affine is one
`addcmul`: a separate multiply and add would each be another pass over the activations.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

if TYPE_CHECKING:  # helpers.models imports this module
    from .models import ModelConfig

PATHS = ("fast", "explicit")
MATH_BACKEND = int(SDPBackend.MATH.value)   # torch's unfused attention, as `_fused_sdp_choice` numbers it


@dataclass
class Layout:
    """What the forward pass needs besides the parameters.

    cfg: the family's config, its d_head the padded query/key width D; scales `(M, n_layers)`: each model's
    factor on q.k per layer; rotary: (cos, sin) `(M, max_len, D)` or None; pos_table: sinusoidal
    `(max_len, d_model)` or None; paths: "fast" or "explicit" per layer; probes: a callable or None per layer.
    """

    cfg: "ModelConfig"
    scales: torch.Tensor
    rotary: tuple | None
    pos_table: torch.Tensor | None
    paths: tuple
    probes: tuple


def linear(params: dict, x: torch.Tensor, name: str, rows_scale: torch.Tensor | None = None) -> torch.Tensor:
    """x `(M, ..., in)` through `name.weight` `(M, out, in)` and `name.bias` `(M, out)`; rows_scale `(M, out)`
    multiplies the outputs, applied to the weights and bias."""
    w, b = params[name + ".weight"], params.get(name + ".bias")
    if rows_scale is not None:
        w, b = w * rows_scale.unsqueeze(-1), (None if b is None else b * rows_scale)
    shape = x.shape
    flat = x.reshape(shape[0], -1, shape[-1])
    out = torch.matmul(flat, w.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), flat, w.transpose(1, 2))
    return out.reshape(*shape[:-1], w.shape[1])


def _norm(params, layout, x, name):
    if layout.cfg.norm == "none":
        return x
    view = (x.shape[0],) + (1,) * (x.ndim - 2) + (x.shape[-1],)
    return torch.addcmul(params[name + ".bias"].view(view), F.layer_norm(x, x.shape[-1:]),
                         params[name + ".weight"].view(view))


def _causal_mask(n: int, device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def _causal_bias(n: int, dtype, device) -> torch.Tensor:
    """`_causal_mask` as an additive mask `(n, n)`: 0 where a query sees the key, -inf where it does not."""
    return torch.zeros(n, n, dtype=dtype, device=device).masked_fill_(_causal_mask(n, device), float("-inf"))


def logits(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """q k^T for queries already scaled, entries above the diagonal -inf when causal: `(..., n, n)`."""
    out = q @ k.transpose(-1, -2)   # a fresh tensor, so it is masked in place: one pass over it, not a copy and a pass
    return out.masked_fill_(_causal_mask(q.shape[-2], q.device), float("-inf")) if causal else out


def probabilities(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T [+ causal mask]) for queries already scaled: `(..., n, n)`."""
    return torch.softmax(logits(q, k, causal), dim=-1)


def _queries_keys_values(params, layout, x, layer):
    """The attention input x `(M, B, n, d_model)` of `layer` -> q (times the model's logit scale), k and v
    `(M B, heads, n, width)`, rotary positions applied: the one place both the output and the logits come from."""
    cfg, prefix = layout.cfg, f"blocks.{layer}.attn"
    m, b, n, _ = x.shape
    h, d, dv = cfg.n_heads, cfg.head_dim, cfg.value_dim
    scales = layout.scales[:, layer]
    query_scale = torch.cat([scales[:, None].expand(m, h * d), scales.new_ones(m, h * (d + dv))], 1)
    q, k, v = linear(params, x, prefix + ".qkv", query_scale).split([h * d, h * d, h * dv], dim=-1)
    q, k, v = (t.reshape(m, b, n, h, -1).transpose(2, 3) for t in (q, k, v))  # (M, B, heads, n, width)
    if layout.rotary is not None:  # each model's own frequencies, on its halves-split layout
        cos, sin = (t[:, None, None, :n] for t in layout.rotary)  # (M, 1, 1, n, D)
        q, k = (t * cos + torch.cat([-t[..., d // 2:], t[..., : d // 2]], dim=-1) * sin for t in (q, k))
    return tuple(t.reshape(m * b, h, n, -1) for t in (q, k, v))


def _fused_or_math(q, k, v, causal: bool) -> torch.Tensor:
    """softmax(q k^T [+ causal mask]) v `(..., n, value width)`: `scaled_dot_product_attention` where torch has a
    fused kernel for these shapes, else torch's unfused (math) kernel written out. On the CPU torch fuses only when
    the query/key width equals the value width; chapter 05's heads are narrower. Its math kernel then adds passes
    over every probability that look for rows with no visible key, which no row here lacks (a causal row sees its
    own key). Written out op for op, scale 1 included, it gives the same bits (tests/unit/test_models.py), and whole
    training steps of chapter 05 take up to 1.3 times as long through torch (benchmarks/bench_attention_path.py)."""
    choose = getattr(torch, "_fused_sdp_choice", None)   # private: without it, leave the choice to torch
    if choose is None or choose(q, k, v, is_causal=causal, scale=1.0) != MATH_BACKEND:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0)
    # the kernel's copies q * 1 and k^T * 1 stay: without them a width-1 head (its q and k strided views of the
    # projection) rounded its gradients differently, most likely because their layout picks another BLAS routine
    scores = (q * 1.0) @ (k.transpose(-2, -1) * 1.0)
    if causal:   # an additive mask, as the kernel has: its backward pass is the identity
        scores.add_(_causal_bias(q.shape[-2], q.dtype, q.device))
    return torch.softmax(scores, dim=-1) @ v


def _attention(params, layout, x, layer):
    cfg = layout.cfg
    m, b, n, _ = x.shape
    h, dv = cfg.n_heads, cfg.value_dim
    q, k, v = _queries_keys_values(params, layout, x, layer)
    probe = layout.probes[layer]
    if layout.paths[layer] == "explicit":
        probs = probabilities(q, k, cfg.causal)
        if probe is not None:
            probe(probs.detach())
        mixed = probs @ v
    else:
        if probe is not None:
            with torch.no_grad():
                probe(probabilities(q.detach(), k.detach(), cfg.causal))
        mixed = _fused_or_math(q, k, v, cfg.causal)
    mixed = mixed.reshape(m, b, h, n, dv).transpose(2, 3).reshape(m, b, n, h * dv)
    return linear(params, mixed, f"blocks.{layer}.attn.out")


def _mlp(params, layout, x, layer):
    act = F.gelu if layout.cfg.activation == "gelu" else F.relu
    prefix = f"blocks.{layer}.mlp"
    return linear(params, act(linear(params, x, prefix + ".0")), prefix + ".2")


def _sublayer(params, layout, x, layer, part, norm):
    cfg = layout.cfg
    if cfg.norm == "pre":
        y = part(params, layout, _norm(params, layout, x, norm), layer)
        return x + y if cfg.residual else y
    y = part(params, layout, x, layer)
    return _norm(params, layout, x + y if cfg.residual else y, norm)


def _embed(params, layout, x):
    cfg, m = layout.cfg, x.shape[0]
    if cfg.vocab_size is not None:
        table = params["embed.weight"]  # (M, V, d_model): one lookup in the models' tables laid end to end
        offsets = (torch.arange(m, device=x.device) * cfg.vocab_size).view(m, *(1,) * (x.ndim - 1))
        return F.embedding(x + offsets, table.reshape(m * cfg.vocab_size, -1))
    if cfg.input_dim is not None:
        return linear(params, x, "embed")
    p, c, s = cfg.patch_size, cfg.channels, cfg.image_size
    b = x.shape[1]
    if x.shape[2:] not in ((c, s, s), (s, s)):
        raise ValueError(f"images must be (batch, {c}, {s}, {s}) or (batch, {s}, {s}); got {tuple(x.shape[1:])}")
    patches = F.unfold(x.reshape(m * b, c, s, s), kernel_size=p, stride=p)  # (M B, C p p, patches), row-major
    patches = patches.transpose(1, 2).reshape(m, b, -1, c * p * p)
    weight = params["embed.proj.weight"].reshape(m, cfg.d_model, c * p * p)
    bias = params.get("embed.proj.bias")
    out = torch.bmm(patches.reshape(m, -1, c * p * p), weight.transpose(1, 2))
    out = out if bias is None else out + bias.unsqueeze(1)
    return out.reshape(m, b, -1, cfg.d_model)


def stream(params: dict, layout: Layout, x: torch.Tensor) -> list[torch.Tensor]:
    """The token states entering the first block and leaving every block: n_layers + 1 tensors
    `(M, batch, n, d_model)` (before the final norm), for inputs `(M, batch, n)` tokens, `(M, batch, n, D)`
    vectors or `(M, batch, [C,] S, S)` images."""
    cfg = layout.cfg
    h = _embed(params, layout, x)
    n = h.shape[2]
    if n > cfg.max_len:
        raise ValueError(f"sequence length {n} exceeds max_len={cfg.max_len}; build with a larger max_len")
    if cfg.pos == "learned":
        h = h + params["pos_table"][:, None, :n]
    elif layout.pos_table is not None:
        h = h + layout.pos_table[:n]
    states = [h]
    for layer in range(cfg.n_layers):
        h = _sublayer(params, layout, h, layer, _attention, f"blocks.{layer}.norm1")
        if cfg.mlp:
            h = _sublayer(params, layout, h, layer, _mlp, f"blocks.{layer}.norm2")
        states.append(h)
    return states


def hidden(params: dict, layout: Layout, x: torch.Tensor) -> torch.Tensor:
    """Final hidden states `(M, batch, n, d_model)` (see `stream` for the inputs)."""
    h = stream(params, layout, x)[-1]
    return _norm(params, layout, h, "final_norm") if layout.cfg.norm == "pre" else h


def attention_logits(params: dict, layout: Layout, x: torch.Tensor) -> list[torch.Tensor]:
    """The logits every head applies, q.k times its logit scale, before the softmax: one tensor
    `(M, batch, heads, n, n)` per layer, causal entries -inf (inputs as `stream`). A row's softmax is the
    attention the forward pass uses; the logits themselves are what `helpers.margin.logit_scale` reads."""
    cfg = layout.cfg
    out = []
    for layer, state in enumerate(stream(params, layout, x)[:-1]):   # the state entering each block
        attn_input = _norm(params, layout, state, f"blocks.{layer}.norm1") if cfg.norm == "pre" else state
        q, k, _ = _queries_keys_values(params, layout, attn_input, layer)
        layer_logits = logits(q, k, cfg.causal)                      # (M batch, heads, n, n)
        out.append(layer_logits.reshape(state.shape[0], state.shape[1], *layer_logits.shape[1:]))
    return out


def forward(params: dict, layout: Layout, x: torch.Tensor) -> torch.Tensor:
    """Inputs with a model axis (see `hidden`) -> `(M, batch, n, V)` ("lm"), `(M, batch, n_classes)` ("classify")
    or `(M, batch, n, d_model)` ("features")."""
    cfg = layout.cfg
    h = hidden(params, layout, x)
    if cfg.task == "lm":
        return linear(params, h, "head")
    if cfg.task == "classify":
        return linear(params, h.mean(dim=2) if cfg.pool == "mean" else h[:, :, -1], "head")
    return h
