"""FROZEN COPY of `helpers/stacked.py` as of commit a6d68c4 (2026-12-04), before `helpers.training` replaced it.

Kept only so that `benchmarks/bench_trainer.py` can time the new trainer against the old one in one process.
Do not use it elsewhere. Two edits only, for today's `helpers.models`: no dropout check (`ModelConfig` has no
dropout any more) and the rotary tables from `rotary_tables` (the `Rotary` module is gone; same tables).

Train a stack of small transformers of one family at once: one computation with a leading model axis.

    configs = [ModelConfig(d_head=d, d_value=16, **fields) for d in (1, 3, 8, 16)]
    stack = ModelStack.build(configs, seeds=[0, 1, 2, 3])      # or ModelStack([model, model, ...])
    result = train_stack(stack, data, seeds=[0, 1, 2, 3], steps=3000, eval_every=100, patience=5)
    result.status                                               # per model: converged, stop_step, test_loss, ...
    models = stack.models()                                     # standalone `helpers.models.Transformer`s
    stack.save(stack_weights_path(name, task_config, __name__)) # one .npz per stack; ModelStack.load(path)

A sweep over d_head x seeds runs one stack per task with `helpers.experiments.run_stacked_sweep`.

**Family.** The models of a stack share everything but the query/key width `d_head` (and their seeds): the
value width (`value_dim`), d_model, heads, layers, inputs, task, positions, norms. Dropout is not supported
(a stack must compute exactly its models).

**Padding is exact.** Every model's query and key blocks of `qkv` are padded with zero rows to the largest
`d_head` of the stack, D: q_h = [q_h, 0], k_h = [k_h, 0], so q.k is unchanged (with rotary positions each
half of a head is padded, [q_h1, 0, q_h2, 0], and each model keeps its own rotary frequencies). Those rows
get exactly zero gradient (a padded query column only meets padded key columns, which are zero), their gradients are masked
all the same, and AdamW keeps zero at zero (weight decay of 0 is 0). Each model keeps its own logit scale,
passed as data (`1/sqrt(d_head)` of the model, not of D).

**Per model, as if alone.** The input batch has a model axis: model i reads its own batches from its own
`BatchOrder(seed_i)` (the standalone trainer's), so with the same seeds a stack reproduces `helpers.train.train`
model by model (a test checks 1e-5 after 20 steps). AdamW is elementwise, so one AdamW over the stacked
tensors is per-model state; gradient clipping uses each model's own gradient norm. A model that stopped (or
diverged) does not move at all afterwards: its update, momentum and step count are masked out.

**Stopped models leave the computation** (`compact=True`, the default). A stack would otherwise compute every
model until its slowest one stops. At the first step after any model stopped, the active models are copied into
a smaller stack (`ModelStack.take`, padded to their own largest d_head; `StackedAdamW.take` carries their moments
and step counts), and the stopped ones are written back to the caller's stack (`ModelStack.put`), which holds
every model's final parameters when `train_stack` returns. Stopping is checked only every `eval_every` steps, so
this costs at most one copy of a few small tensors per check (far below one training step), which is why there is
no threshold on the share of stopped models: any stopped model is pure waste from then on. Each model computes
the same numbers as before (padding is exact), so weights, histories and statuses agree with `compact=False`
and with training alone (a test checks both to 1e-5); `result.compactions` lists each shrink (step, models
left, padded width).

**Stopping rule.** Every `eval_every` steps each model is scored on held-out validation examples (the last
`val_examples` training examples, never trained on). A model stops, *converged*, when none of its last
`patience` evaluations improved on the best earlier validation loss by more than `min_improvement` (0.5 %
relative); otherwise it runs to `steps`. Two options (off by default): `min_evals` keeps this relative rule quiet
until a model has that many validation losses (the step-0 one included), since the flat start of a hard task looks
like convergence; `loss_floor` also stops a model, converged, as soon as its latest validation loss is below that
absolute value (a model that has solved its task keeps improving by large factors and would never stop
otherwise). `patience=None` switches the rule off (and keeps every example for training). A NaN or infinite training loss stops that model only; the others finish, then `StackDiverged`
names the failed models (the stack and `error.result` keep everyone's results).

**Buckets.** `bucket_head_dims` groups the d_head values of a sweep into stacks so that padding wastes at most
`max_waste` (25 %) of the stack's work: the work of a model is counted, per token and layer, as the
multiply-adds of its query/key path (projections and scores, proportional to d_head) plus the fixed rest
(value path, output projection, MLP); dims are taken in increasing order and a new stack starts whenever
padding the next dim's stack to it would exceed the budget. Small dims are cheap next to the fixed rest: at
d_model 64, 4 heads of value width 16 and n = 128 (rest = 48 dims), 1..64 make [1, 2, 4, 8, 16], [24, 32], [64].

**Speed (CPU, float32).** Profiled against `helpers.train.train` at d_model 64, n = 128, 16 windows per
step: the one-by-one loop already gives every matmul 2,048 rows, so stacking saves little dispatch
overhead, and the cost is in work both trainers share (GEMMs, flash attention, GELU, layer norm). The
stack's own extra passes over activations are kept out: biases fused into `baddbmm`, the norms' per-model
affine in one `addcmul`, each model's logit scale folded into its query weights, no argmax in training,
no `where` in AdamW while every model is active, and evaluation in chunks of one standalone batch's size
(larger stacked tensors fall out of cache). bfloat16 autocast was measured slower (CPU flash-attention
backward in bf16), so training stays float32; `benchmarks/bench_train_stacked.py` prints the ratio.

Device handling: `helpers.models.pick_device` (CUDA when present), once, in `train_stack`.
"""

import json
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from helpers import paths
from helpers.cache import cache_key, write_npz_atomic
from helpers.errors import ArgumentError
from helpers.data import IGNORE, TaskData
from helpers.attention import sinusoidal_table
from helpers.models import ModelConfig, Transformer, build_model, pick_device, rotary_tables
from helpers.threads import torch_threads
from frozen.train import BatchOrder, TrainingDiverged, _check, lr_factor

PATHS = ("fast", "explicit")
FUSED_BIAS = True


class StackDiverged(TrainingDiverged):
    """Some models of a stack diverged; `result` holds the history and status of every model."""

    def __init__(self, message: str, result: "StackResult"):
        super().__init__(message)
        self.result = result


def _family(cfg: ModelConfig) -> dict:
    """The fields that must agree inside a stack (all but the query/key width)."""
    fields = cfg.to_dict()
    fields["d_head"] = None
    fields["d_value"] = cfg.value_dim
    if cfg.scale is None and cfg.temperature is None:
        fields["scale"] = "1/sqrt(d_head)"
    return fields


def _qkv_rows(n_heads: int, d_head: int, d_value: int, padded: int, halves: bool = False) -> torch.Tensor:
    """Where the rows of a model's `qkv` (q, k blocks of width d_head per head, then v) sit in the padded one.

    halves (rotary positions): the two halves of a head go to the two halves of the padded head, so that
    rotate-half pairs the same dimensions as in the model.
    """
    heads = torch.arange(n_heads)[:, None] * padded
    within = torch.arange(d_head)
    if halves:
        within = torch.cat([within[: d_head // 2], padded // 2 + within[: d_head // 2]])
    qk = (heads + within).reshape(-1)  # (n_heads d_head,)
    v = 2 * n_heads * padded + torch.arange(n_heads * d_value)
    return torch.cat([qk, n_heads * padded + qk, v])


def _rotary_tables(dims: list[int], padded: int, max_len: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `(M, max_len, padded)`: model i's `helpers.models.Rotary` tables on its padded layout
    (cos 1 and sin 0 on the padding, which stays zero)."""
    cos, sin = torch.ones(len(dims), max_len, padded // 2), torch.zeros(len(dims), max_len, padded // 2)
    for i, d in enumerate(dims):
        table_cos, table_sin = rotary_tables(d, max_len)  # its tables repeat over the two halves
        cos[i, :, : d // 2], sin[i, :, : d // 2] = table_cos[:, : d // 2], table_sin[:, : d // 2]
    return torch.cat([cos, cos], dim=-1).to(device), torch.cat([sin, sin], dim=-1).to(device)


class ModelStack:
    """M models of one family as stacked parameters `(M, *shape)`, queries/keys padded to the largest d_head.

    `params[name]` has the standalone parameter name (`blocks.0.attn.qkv.weight`, ...); `forward(x)` takes
    inputs with a model axis, `(M, batch, ...)`, and returns `(M, batch, ...)` outputs.
    """

    def __init__(self, models: list[Transformer], attention: str = "fast"):
        models = list(models) if isinstance(models, (list, tuple)) else models
        if not isinstance(models, list) or not models:
            raise ArgumentError("models", models, "a non-empty list of helpers.models.Transformer")
        for i, model in enumerate(models):
            if not isinstance(model, Transformer):
                raise ArgumentError(f"models[{i}]", type(model).__name__, "a helpers.models.Transformer")
        if attention not in PATHS:
            raise ArgumentError("attention", attention, f"one of {list(PATHS)}")
        self.configs = [m.cfg for m in models]
        base = _family(self.configs[0])
        for i, cfg in enumerate(self.configs[1:], start=1):
            other = _family(cfg)
            differ = [k for k in base if base[k] != other[k]]
            if differ:
                k = differ[0]
                raise ArgumentError(f"models[{i}].cfg.{k}", other[k],
                                     f"{base[k]!r} as in models[0]: a stack holds one family (only d_head may "
                                     f"differ; set d_value to hold the value width fixed)")
        self.attention = attention
        names = [name for name, _ in models[0].named_parameters()]
        slices = {name: [m.get_parameter(name).detach() for m in models] for name in names}
        self._assemble(self.configs, slices, next(models[0].parameters()).device)

    def _assemble(self, configs: list, slices: dict, device) -> None:
        """Stack `slices` {parameter name: one unpadded tensor per model} of models with `configs`."""
        first = configs[0]
        dims = [cfg.head_dim for cfg in configs]
        self.configs, self.d_heads, self.padded = list(configs), dims, max(dims)
        self.template = replace(first, d_head=self.padded, d_value=first.value_dim)
        self.scales = torch.tensor([cfg.attn_scale for cfg in configs], device=device)
        rope = first.pos == "rope"
        self._rows = [_qkv_rows(first.n_heads, d, first.value_dim, self.padded, rope).to(device) for d in dims]
        self.masks = {}
        if len(set(dims)) > 1:
            for name in slices:
                if ".attn.qkv." in name:
                    self.masks[name] = self.pad(name, [torch.ones_like(v) for v in slices[name]])
        with torch.no_grad():
            self.params = {name: self.pad(name, values).requires_grad_(True) for name, values in slices.items()}
        self.ndims = {name: values[0].ndim for name, values in slices.items()}  # decay only matrices
        self.pos_table = (sinusoidal_table(first.max_len, first.d_model, dtype=torch.float32).to(device)
                          if first.pos == "sinusoidal" else None)
        self.rotary = _rotary_tables(dims, self.padded, first.max_len, device) if rope else None

    def _padded(self, name: str) -> bool:
        """Whether parameter `name` is laid out padded (the query/key rows, when the widths differ)."""
        return ".attn.qkv." in name and len(set(self.d_heads)) > 1

    def pad(self, name: str, values: list) -> torch.Tensor:
        """One unpadded tensor per model of parameter `name` (or of anything shaped like it) -> `(M, *padded)`:
        query/key rows placed in the padded layout, zeros on the padding."""
        if not self._padded(name):
            return torch.stack([v.detach() for v in values]).clone()
        cfg = self.template
        shape = (cfg.n_heads * (2 * self.padded + cfg.value_dim),) + values[0].shape[1:]
        out = torch.zeros((len(values),) + shape, dtype=values[0].dtype, device=values[0].device)
        for i, (rows, value) in enumerate(zip(self._rows, values)):
            out[i, rows] = value.detach()
        return out

    def unpad(self, name: str, stacked: torch.Tensor, index: int) -> torch.Tensor:
        """Model `index`'s unpadded slice of a `(M, *padded)` tensor laid out like parameter `name` (a copy when
        padded)."""
        return stacked[index][self._rows[index]] if self._padded(name) else stacked[index]

    def take(self, indices: list[int]) -> "ModelStack":
        """The members `indices` as a new stack, padded to their own largest d_head (parameters copied)."""
        sub = object.__new__(ModelStack)
        sub.attention = self.attention
        sub._assemble([self.configs[i] for i in indices],
                      {name: [self.unpad(name, v.detach(), i) for i in indices] for name, v in self.params.items()},
                      self.device)
        return sub

    def regroup(self, sub: "ModelStack", indices: list[int], tensors: dict) -> dict:
        """{name: `(M, *padded)` laid out like parameter name} (optimizer moments, say) -> the same for the members
        `indices`, in the layout of `sub = self.take(indices)`."""
        return {name: sub.pad(name, [self.unpad(name, t, i) for i in indices]) for name, t in tensors.items()}

    @torch.no_grad()
    def put(self, sub: "ModelStack", pairs: list[tuple[int, int]]) -> None:
        """Copy member j of `sub` into member i of this stack, for every (j, i) of `pairs` (same family)."""
        for name, value in self.params.items():
            for j, i in pairs:
                if self._padded(name):
                    value[i, self._rows[i]] = sub.unpad(name, sub.params[name], j)
                else:
                    value[i] = sub.unpad(name, sub.params[name], j)

    @classmethod
    def build(cls, configs: list, seeds: list[int], device=None, attention: str = "fast") -> "ModelStack":
        """A stack of freshly initialised models: model i is `build_model(configs[i], seed=seeds[i])`."""
        configs, seeds = list(configs), list(seeds)
        if not configs:
            raise ArgumentError("configs", configs, "a non-empty list of ModelConfig")
        if len(seeds) != len(configs):
            raise ArgumentError("seeds", seeds, f"one seed per config ({len(configs)})")
        return cls([build_model(cfg, seed=s, device=device) for cfg, s in zip(configs, seeds)], attention)

    def __len__(self) -> int:
        return len(self.configs)

    @property
    def device(self) -> torch.device:
        return self.scales.device

    def to(self, device) -> "ModelStack":
        device = pick_device(device)
        with torch.no_grad():
            self.params = {k: v.detach().to(device).requires_grad_(True) for k, v in self.params.items()}
        self.masks = {k: v.to(device) for k, v in self.masks.items()}
        self.scales = self.scales.to(device)
        self._rows = [r.to(device) for r in self._rows]
        if self.pos_table is not None:
            self.pos_table = self.pos_table.to(device)
        if self.rotary is not None:
            self.rotary = tuple(t.to(device) for t in self.rotary)
        return self

    def save(self, path: Path) -> Path:
        """Every model's (unpadded) parameters and config in one `.npz` (no pickle), written atomically."""
        arrays = {f"{i}/{k}": v.cpu().numpy() for i in range(len(self)) for k, v in self.state_dict(i).items()}
        arrays["configs"] = np.array(json.dumps([cfg.to_dict() for cfg in self.configs]))
        return write_npz_atomic(Path(path), arrays)

    @classmethod
    def load(cls, path: Path, device=None, attention: str = "fast") -> "ModelStack":
        """The stack written by `save` (use `.models()` for the standalone models)."""
        with np.load(path, allow_pickle=False) as arrays:
            configs = [ModelConfig.from_dict(c) for c in json.loads(str(arrays["configs"]))]
            models = []
            for i, cfg in enumerate(configs):
                model = build_model(cfg, seed=0, device=device)
                prefix = f"{i}/"
                model.load_state_dict({k[len(prefix):]: torch.from_numpy(arrays[k]) for k in arrays.files
                                       if k.startswith(prefix)})
                models.append(model)
        return cls(models, attention)

    def state_dict(self, index: int) -> dict:
        """Model `index`'s parameters, unpadded, as a standalone state dict (detached copies)."""
        return {name: self.unpad(name, value.detach(), index).clone() for name, value in self.params.items()}

    def models(self, device=None) -> list[Transformer]:
        """The stack split back into standalone models (on `device`, default the stack's)."""
        target = self.device if device is None else pick_device(device)
        out = []
        for i, cfg in enumerate(self.configs):
            model = build_model(cfg, seed=0, device=target)
            model.load_state_dict(self.state_dict(i))  # buffers are rebuilt by the constructor
            out.append(model.eval())
        return out

    # ---- the stacked forward pass: every tensor carries the model axis first ----

    def _linear(self, x, name, rows_scale=None):
        """x `(M, ..., in)` through `name.weight` `(M, out, in)` and `name.bias` `(M, out)`; rows_scale `(M, out)`
        multiplies the outputs, applied to the weights and bias (far smaller than the outputs)."""
        w, b = self.params[name + ".weight"], self.params.get(name + ".bias")
        if rows_scale is not None:
            w, b = w * rows_scale.unsqueeze(-1), (None if b is None else b * rows_scale)
        shape = x.shape
        flat = x.reshape(shape[0], -1, shape[-1])
        if b is not None and FUSED_BIAS:
            out = torch.baddbmm(b.unsqueeze(1), flat, w.transpose(1, 2))
        else:
            out = torch.matmul(flat, w.transpose(1, 2))
            out = out if b is None else out + b.unsqueeze(1)
        return out.reshape(*shape[:-1], w.shape[1])

    def _norm(self, x, name):
        if self.template.norm == "none":
            return x
        view = (x.shape[0],) + (1,) * (x.ndim - 2) + (x.shape[-1],)
        # one pass for the per-model affine part (a separate * and + cost two passes over the activations)
        return torch.addcmul(self.params[name + ".bias"].view(view), F.layer_norm(x, x.shape[-1:]),
                             self.params[name + ".weight"].view(view))

    def _attention(self, x, prefix):
        cfg = self.template
        m, b, n, _ = x.shape
        h, d, dv = cfg.n_heads, self.padded, cfg.value_dim
        # each model's own 1/sqrt(d_head) on its query rows (rotary positions are linear, so it commutes)
        query_scale = torch.cat([self.scales[:, None].expand(m, h * d), self.scales.new_ones(m, h * (d + dv))], 1)
        q, k, v = self._linear(x, prefix + ".qkv", query_scale).split([h * d, h * d, h * dv], dim=-1)
        q, k, v = (t.reshape(m, b, n, h, -1).transpose(2, 3) for t in (q, k, v))  # (M, B, heads, n, width)
        if self.rotary is not None:  # each model's own frequencies, on its halves-split layout
            cos, sin = (t[:, None, None, :n] for t in self.rotary)  # (M, 1, 1, n, D)
            q, k = (t * cos + torch.cat([-t[..., d // 2:], t[..., : d // 2]], dim=-1) * sin for t in (q, k))
        q, k, v = (t.reshape(m * b, h, n, -1) for t in (q, k, v))
        if self.attention == "fast":
            mixed = F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal, scale=1.0)
        else:
            logits = q @ k.transpose(-1, -2)
            if cfg.causal:
                mask = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
                logits = logits.masked_fill(mask, float("-inf"))
            mixed = torch.softmax(logits, dim=-1) @ v
        mixed = mixed.reshape(m, b, h, n, dv).transpose(2, 3).reshape(m, b, n, h * dv)
        return self._linear(mixed, prefix + ".out")

    def _mlp(self, x, prefix):
        act = F.gelu if self.template.activation == "gelu" else F.relu
        return self._linear(act(self._linear(x, prefix + ".mlp.0")), prefix + ".mlp.2")

    def _sub(self, x, layer, prefix, norm):
        if self.template.norm == "pre":
            y = layer(self._norm(x, norm), prefix)
            return x + y if self.template.residual else y
        y = layer(x, prefix)
        return self._norm(x + y if self.template.residual else y, norm)

    def _embed(self, x):
        cfg, m = self.template, len(self)
        if cfg.vocab_size is not None:
            table = self.params["embed.weight"]  # (M, V, d_model)
            offsets = (torch.arange(m, device=x.device) * cfg.vocab_size).view(m, *(1,) * (x.ndim - 1))
            return F.embedding(x + offsets, table.reshape(m * cfg.vocab_size, -1))
        if cfg.input_dim is not None:
            return self._linear(x, "embed")
        p, c, s = cfg.patch_size, cfg.channels, cfg.image_size
        b = x.shape[1]
        if x.shape[2:] not in ((c, s, s), (s, s)):
            raise ValueError(f"images must be (M, batch, {c}, {s}, {s}); got {tuple(x.shape)}")
        patches = F.unfold(x.reshape(m * b, c, s, s), kernel_size=p, stride=p)  # (M B, C p p, patches)
        patches = patches.transpose(1, 2).reshape(m, b, -1, c * p * p)
        weight = self.params["embed.proj.weight"].reshape(m, cfg.d_model, c * p * p)
        bias = self.params.get("embed.proj.bias")
        out = torch.bmm(patches.reshape(m, -1, c * p * p), weight.transpose(1, 2))
        out = out if bias is None else out + bias.unsqueeze(1)
        return out.reshape(m, b, -1, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Inputs `(M, batch, n)` tokens, `(M, batch, n, D)` vectors or `(M, batch, [C,] S, S)` images ->
        `(M, batch, n, V)` ("lm"), `(M, batch, n_classes)` ("classify") or `(M, batch, n, d_model)`."""
        cfg = self.template
        h = self._embed(x)
        n = h.shape[2]
        if cfg.pos == "learned":
            h = h + self.params["pos_table"][:, None, :n]
        elif self.pos_table is not None:
            h = h + self.pos_table[:n]
        for i in range(cfg.n_layers):
            prefix = f"blocks.{i}"
            h = self._sub(h, self._attention, prefix + ".attn", prefix + ".norm1")
            if cfg.mlp:
                h = self._sub(h, self._mlp, prefix, prefix + ".norm2")
        if cfg.norm == "pre":
            h = self._norm(h, "final_norm")
        if cfg.task == "lm":
            return self._linear(h, "head")
        if cfg.task == "classify":
            return self._linear(h.mean(dim=2) if cfg.pool == "mean" else h[:, :, -1], "head")
        return h

    __call__ = forward


def stacked_loss(logits: torch.Tensor, targets: torch.Tensor,
                 with_hits: bool = True) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Per-model cross-entropy (mean over counted targets), hits and counts: each `(M,)`.

    logits `(M, B, n, V)` with targets `(M, B, n)` (-100 ignored), or `(M, B, C)` with `(M, B)`.
    with_hits=False returns None for the hits.
    """
    m = logits.shape[0]
    flat = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    ce = F.cross_entropy(flat, targets, ignore_index=IGNORE, reduction="none").view(m, -1)
    counted = (targets != IGNORE).view(m, -1)
    count = counted.sum(1)
    if not with_hits:  # training needs no argmax
        return ce.sum(1) / count.clamp(min=1), None, count
    hits = ((flat.argmax(-1) == targets).view(m, -1) & counted).sum(1)
    return ce.sum(1) / count.clamp(min=1), hits, count


@torch.no_grad()
def evaluate_stack(stack: ModelStack, x: torch.Tensor, y: torch.Tensor, batch_size: int = 256) -> dict:
    """{"loss", "accuracy"}: `(M,)` tensors, every model scored on the same (x, y)."""
    m, device = len(stack), stack.device
    total = torch.zeros(m, dtype=torch.float64, device=device)
    hits = torch.zeros(m, dtype=torch.float64, device=device)
    counted = torch.zeros(m, dtype=torch.float64, device=device)
    chunk = max(1, batch_size // m)  # M x chunk examples per forward: the activations of one standalone batch
    for start in range(0, len(x), chunk):
        xb = x[start:start + chunk].to(device)
        yb = y[start:start + chunk].to(device)
        loss, h, c = stacked_loss(stack(xb.unsqueeze(0).expand(m, *xb.shape)), yb.unsqueeze(0).expand(m, *yb.shape))
        total += loss.double() * c
        hits += h
        counted += c
    return {"loss": total / counted.clamp(min=1), "accuracy": hits / counted.clamp(min=1)}


class StackedAdamW:
    """AdamW (torch's update rule) over stacked tensors, with a per-model step count and an `active` mask.

    Parameters with one dimension per model (biases, norms) get no weight decay, as in `helpers.train`.
    A model whose `active` entry is False is left exactly as it is: parameters, moments and step count.
    """

    def __init__(self, stack: ModelStack, weight_decay: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.stack, self.weight_decay, self.betas, self.eps = stack, weight_decay, betas, eps
        self.exp_avg = {k: torch.zeros_like(v) for k, v in stack.params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(v) for k, v in stack.params.items()}
        self.steps = torch.zeros(len(stack), dtype=torch.float64, device=stack.device)

    def take(self, sub: ModelStack, indices: list[int]) -> "StackedAdamW":
        """This optimizer's state for the members `indices`, on `sub = stack.take(indices)[0]`."""
        out = StackedAdamW.__new__(StackedAdamW)
        out.stack, out.weight_decay, out.betas, out.eps = sub, self.weight_decay, self.betas, self.eps
        out.exp_avg = self.stack.regroup(sub, indices, self.exp_avg)
        out.exp_avg_sq = self.stack.regroup(sub, indices, self.exp_avg_sq)
        out.steps = self.steps[torch.tensor(indices, device=self.steps.device)]
        return out

    @torch.no_grad()
    def step(self, lr: float, active: torch.Tensor) -> None:
        beta1, beta2 = self.betas
        self.steps += active.double()
        done = self.steps.clamp(min=1)
        step_size = (lr / (1 - beta1 ** done)).float()  # (M,)
        root_bc2 = (1 - beta2 ** done).sqrt().float()
        everyone = bool(active.all())
        for name, p in self.stack.params.items():
            g = p.grad
            shape = (len(self.stack),) + (1,) * (p.ndim - 1)
            keep = active.view(shape)
            m, v = self.exp_avg[name], self.exp_avg_sq[name]
            new_m = m.lerp(g, 1 - beta1)
            new_v = v * beta2 + (1 - beta2) * g * g
            decay = self.weight_decay if self.stack.ndims[name] >= 2 else 0.0
            new_p = p * (1 - lr * decay) - step_size.view(shape) * new_m / (new_v.sqrt() / root_bc2.view(shape) +
                                                                              self.eps)
            if everyone:  # the usual case: where() would select new_* everywhere, so copy them as they are
                p.copy_(new_p), m.copy_(new_m), v.copy_(new_v)
            else:
                p.copy_(torch.where(keep, new_p, p))
                m.copy_(torch.where(keep, new_m, m))
                v.copy_(torch.where(keep, new_v, v))


def clip_per_model(stack: ModelStack, clip: float) -> torch.Tensor:
    """Scale each model's gradient so its norm is at most `clip` (torch's clip_grad_norm_ rule); norms `(M,)`."""
    norms = torch.zeros(len(stack), device=stack.device)
    for p in stack.params.values():
        norms += p.grad.pow(2).reshape(len(stack), -1).sum(1)
    norms = norms.sqrt()
    coef = (clip / (norms + 1e-6)).clamp(max=1.0)
    for p in stack.params.values():
        p.grad.mul_(coef.view((len(stack),) + (1,) * (p.ndim - 1)))
    return norms


@dataclass
class StackResult:
    """`history`: tidy rows (model, step, metric, value); `status`: one row per model (see `train_stack`)."""

    history: pd.DataFrame
    status: pd.DataFrame
    compactions: list = field(default_factory=list)  # {step, models, d_head} each time the stack shrank


def _check_stack_args(stack, data, seeds, patience, min_improvement, val_examples, loss_floor, min_evals):
    if not isinstance(stack, ModelStack):
        raise ArgumentError("stack", type(stack).__name__, "a ModelStack")
    if not isinstance(data, TaskData):
        raise ArgumentError("data", type(data).__name__, "a helpers.data.TaskData")
    if not isinstance(seeds, (list, tuple)) or len(seeds) != len(stack) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ArgumentError("seeds", seeds, f"a list of {len(stack)} non-negative integers (one per model)")
    if patience is not None and (not isinstance(patience, int) or isinstance(patience, bool) or patience < 1):
        raise ArgumentError("patience", patience, "None (no early stopping) or an integer >= 1")
    if not isinstance(min_improvement, (int, float)) or not 0 <= min_improvement < 1:
        raise ArgumentError("min_improvement", min_improvement, "a number in [0, 1)")
    if loss_floor is not None and (patience is None or isinstance(loss_floor, bool)
                                   or not isinstance(loss_floor, (int, float)) or not 0 < loss_floor < math.inf):
        raise ArgumentError("loss_floor", loss_floor, "None, or a finite number > 0 when patience is set")
    if not isinstance(min_evals, int) or isinstance(min_evals, bool) or min_evals < 0:
        raise ArgumentError("min_evals", min_evals, "an integer >= 0")
    if val_examples is not None and (not isinstance(val_examples, int) or not 1 <= val_examples < len(data.train_x)):
        raise ArgumentError("val_examples", val_examples, f"None or an integer from 1 to {len(data.train_x) - 1}")


def should_stop(val_losses: list[float], patience: int, min_improvement: float, loss_floor: float | None = None,
                min_evals: int = 0) -> bool:
    """The stopping rule of the module doc: the latest validation loss is below `loss_floor` (None: no floor), or
    there are at least `min_evals` losses and none of the last `patience` beat the best earlier one by more than
    `min_improvement` (relative)."""
    if loss_floor is not None and val_losses and val_losses[-1] < loss_floor:
        return True
    if len(val_losses) < min_evals or len(val_losses) <= patience:
        return False
    best_before = min(val_losses[:-patience])
    return min(val_losses[-patience:]) > best_before * (1 - min_improvement)


def train_stack(
    stack: ModelStack,
    data: TaskData,
    seeds: list[int],
    steps: int = 500,
    batch_size: int = 64,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    warmup: int | None = None,
    final_lr_ratio: float = 0.0,
    clip: float | None = 1.0,
    eval_every: int | None = None,
    patience: int | None = None,
    min_improvement: float = 0.005,
    loss_floor: float | None = None,
    min_evals: int = 0,
    val_examples: int | None = None,
    device=None,
    progress: bool = True,
    log_every: int | None = None,
    threads: int | None = None,
    compact: bool = True,
) -> StackResult:
    """Train every model of `stack` in place on `data.train_*`, model i with data order `seeds[i]`.

    Arguments as in `helpers.train.train` (warm-up, cosine schedule, clip, eval_every), per model; plus the
    stopping rule of the module doc (`patience`, `min_improvement`, `loss_floor`, `min_evals`, `val_examples`:
    default min(512, a tenth of the training examples) when patience is set, 0 otherwise). threads: CPU threads (None: torch's setting).
    compact: drop stopped models from the computation (module doc); False keeps computing them, masked.
    `result.status` has, per model: model, d_head, seed, converged (stopped by the rule), stop_step (the
    step its parameters are from), diverged, error, val_loss, test_loss, test_accuracy. `history` rows: model,
    step, metric ("train_loss", "lr", "val_loss", "test_loss", "test_accuracy", "seconds"), value.
    """
    warmup = max(1, steps // 20) if warmup is None else warmup
    eval_every = max(1, steps // 10) if eval_every is None else eval_every
    log_every = log_every or max(1, min(50, steps // 20))
    _check(steps, batch_size, lr, warmup, clip, eval_every, 0, (), weight_decay)
    _check_stack_args(stack, data, seeds, patience, min_improvement, val_examples, loss_floor, min_evals)
    if patience is not None and not eval_every:
        raise ArgumentError("eval_every", eval_every, "an integer >= 1 when patience is set")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ArgumentError("threads", threads, "None or a positive integer")
    if not isinstance(compact, bool):
        raise ArgumentError("compact", compact, "True (drop stopped models from the computation) or False")
    if patience is not None and val_examples is None:
        val_examples = max(1, min(512, len(data.train_x) // 10))
    val_examples = val_examples if patience is not None else 0
    stack.to(pick_device(device))
    device = stack.device
    m = len(stack)
    n_train = len(data.train_x) - val_examples
    train_x, train_y = data.train_x[:n_train].to(device), data.train_y[:n_train].to(device)
    val_x, val_y = data.train_x[n_train:], data.train_y[n_train:]
    orders = [BatchOrder(n_train, seed) for seed in seeds]
    # `work` is the stack that trains: `stack` itself until a model stops, then (compact=True) a smaller stack of
    # the models still active, whose row j is model members[j] of `stack` (indices below are `stack`'s)
    work, members = stack, list(range(m))
    optimizer = StackedAdamW(work, weight_decay)
    active = torch.ones(m, dtype=torch.bool, device=device)
    stop_step = [steps] * m
    converged, errors = [False] * m, [None] * m
    val_history: list[list[float]] = [[] for _ in range(m)]
    rows: list[dict] = []
    compactions: list[dict] = []
    started = time.perf_counter()

    def log(step, metric, values, which):
        for i in which:
            rows.append({"model": i, "step": step, "metric": metric, "value": float(values[i])})

    def spread(local: torch.Tensor) -> list[float]:
        """Values of `work`'s rows -> a list over every model of `stack` (NaN for the models not in `work`)."""
        out = [math.nan] * m
        for j, i in enumerate(members):
            out[i] = float(local[j])
        return out

    def checkpoint(step, final=False):
        live = active.nonzero().flatten().tolist()
        if final and work is not stack:
            stack.put(work, list(enumerate(members)))
        which = range(m) if final or step == 0 else live
        scored = stack if final else work
        scores = evaluate_stack(scored, data.test_x, data.test_y, batch_size=max(batch_size, 256))
        if not final:
            scores = {k: spread(v) for k, v in scores.items()}
        log(step, "test_loss", scores["loss"], which)
        log(step, "test_accuracy", scores["accuracy"], which)
        log(step, "seconds", [time.perf_counter() - started] * m, which)
        if val_examples and not final:
            val = spread(evaluate_stack(work, val_x, val_y, batch_size=max(batch_size, 256))["loss"])
            log(step, "val_loss", val, live)
            for i in live:
                val_history[i].append(val[i])
                if step and should_stop(val_history[i], patience, min_improvement, loss_floor, min_evals):
                    active[i], stop_step[i], converged[i] = False, step, True
        return scores

    def shrink(step):
        """Drop the stopped models from `work` (their parameters go back to `stack`, where they stay)."""
        nonlocal work, optimizer, members
        keep = [j for j, i in enumerate(members) if active[i]]
        if work is not stack:  # (while `work` is `stack`, it already holds them)
            stack.put(work, [(j, i) for j, i in enumerate(members) if not active[i]])
        work, optimizer = (sub := work.take(keep)), optimizer.take(sub, keep)
        members = [members[j] for j in keep]
        compactions.append({"step": step, "models": len(members), "d_head": work.padded})

    with torch_threads(threads):  # see helpers.threads
        bar = tqdm(total=steps, desc=f"stack of {m} on {data.name}", file=sys.stderr, disable=not progress,
                   mininterval=1.0, leave=False)
        running, count = torch.zeros(m, dtype=torch.float64), 0
        try:
            checkpoint(0)
            step = 0
            for step in range(1, steps + 1):
                live = int(active.sum())
                if not live:
                    break
                if compact and live < len(members):
                    shrink(step - 1)
                rows_active = active[torch.tensor(members, device=device)]          # (len(work),)
                index = torch.stack([orders[i].next(batch_size) for i in members]).to(device)  # (len(work), batch)
                losses, _, _ = stacked_loss(work(train_x[index]), train_y[index], with_hits=False)
                finite = torch.isfinite(losses.detach())
                bad = (rows_active & ~finite).nonzero().flatten().tolist()
                rate = lr * lr_factor(step - 1, steps, warmup, final_lr_ratio)
                for j in bad:
                    i = members[j]
                    active[i], rows_active[j], stop_step[i] = False, False, step - 1
                    errors[i] = (f"model {i} (d_head={stack.d_heads[i]}, seed={seeds[i]}): the training loss became "
                                 f"{losses[j].item()} at step {step} (lr={rate:.3g}, base lr={lr}); lower lr, keep "
                                 f"clip on, or check the inputs")
                for p in work.params.values():
                    p.grad = None
                torch.where(rows_active, losses, torch.zeros_like(losses)).sum().backward()
                for name, mask in work.masks.items():
                    work.params[name].grad.mul_(mask)
                if clip is not None:
                    clip_per_model(work, clip)
                optimizer.step(rate, rows_active)
                running[members] += torch.where(finite, losses.detach(), torch.zeros_like(losses)).double().cpu()
                count += 1
                if step % log_every == 0 or step == steps:
                    now = active.nonzero().flatten().tolist()
                    log(step, "train_loss", (running / count).tolist(), now)
                    log(step, "lr", [rate] * m, now)
                    bar.set_postfix(loss=f"{float((running / count).mean()):.3f}", active=int(active.sum()),
                                    refresh=False)
                    running, count = torch.zeros(m, dtype=torch.float64), 0
                if eval_every and step % eval_every == 0 and step < steps:
                    checkpoint(step)
                bar.update()
            final_scores = checkpoint(step, final=True)
        finally:
            bar.close()
    history = pd.DataFrame(rows, columns=["model", "step", "metric", "value"])
    status = pd.DataFrame({
        "model": range(m), "d_head": stack.d_heads, "seed": list(seeds), "converged": converged,
        "stop_step": stop_step, "diverged": [e is not None for e in errors], "error": errors,
        "val_loss": [v[-1] if v else float("nan") for v in val_history],
        "test_loss": final_scores["loss"].tolist(), "test_accuracy": final_scores["accuracy"].tolist(),
    })
    result = StackResult(history, status, compactions)
    failed = [e for e in errors if e is not None]
    if failed:
        raise StackDiverged(f"{len(failed)} of {m} models diverged (the others trained to the end; "
                            f"error.result has every model):\n" + "\n".join(failed), result)
    return result


# ---- grouping a sweep's d_head values into stacks ----

def qk_work_offset(cfg: ModelConfig, n: int) -> float:
    """The work of a model outside its query/key path, in units of one query/key dimension (see the module doc)."""
    per_dim = cfg.n_heads * (2 * cfg.d_model + n)  # q and k projections plus scores, per unit of d_head
    fixed = cfg.n_heads * cfg.value_dim * (2 * cfg.d_model + n)  # v, output projection, probabilities x values
    if cfg.mlp:
        fixed += 2 * cfg.d_model * (cfg.d_mlp or 4 * cfg.d_model)
    return fixed / per_dim


def bucket_head_dims(dims, offset: float, max_waste: float = 0.25) -> list[list[int]]:
    """Group query/key widths into stacks, each padded to its largest, wasting at most `max_waste` of its work.

    The work of a model with width d is `offset + d` (see `qk_work_offset`). Returns the groups, ascending.
    """
    dims = sorted(set(dims))
    if not dims or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise ArgumentError("dims", dims, "a non-empty list of positive integers")
    groups: list[list[int]] = []
    for d in dims:
        if groups:
            group = groups[-1] + [d]
            waste = len(group) * (offset + d) / sum(offset + x for x in group) - 1
            if waste <= max_waste:
                groups[-1] = group
                continue
        groups.append([d])
    return groups


def stack_weights_path(experiment: str, config: dict, module: str | None = None) -> Path:
    """Where a stack task's weights live: `<store>/<experiment>_weights/<key>.npz`, keyed like its store entry
    (the task's config with its members, and the code of `module`, the point function's module)."""
    return paths.cache_dir() / f"{experiment}_weights" / f"{cache_key(experiment + '_weights', config, 0, module)}.npz"
