"""A stack of M small transformers of one family, held as stacked parameters with a leading model axis.

    stack = ModelStack.build(configs, seeds=[0, 1, 2, 3])       # or ModelStack([model, model, ...])
    logits = stack(x)                                           # x (M, batch, ...) -> (M, batch, ...)
    models = stack.models()                                     # standalone `helpers.models.Transformer`s
    stack.save(path); ModelStack.load(path)                     # one .npz per stack, no pickle

**Family.** The models of a stack share everything but the query/key width `d_head`, the logit scale (held per
model) and their seeds: the value width (`value_dim`), d_model, heads, layers, inputs, task, positions, norms.

**Padding is exact.** Every model's query and key blocks of `qkv` are padded with zero rows to the largest
`d_head` of the stack, D: q_h = [q_h, 0], k_h = [k_h, 0], so q.k is unchanged (with rotary positions each
half of a head is padded, [q_h1, 0, q_h2, 0], and each model keeps its own rotary frequencies). Those rows
get exactly zero gradient (a padded query column only meets padded key columns, which are zero), their
gradients are masked all the same (`masks`), and AdamW keeps zero at zero (weight decay of 0 is 0). Each
model keeps its own logit scale (`1/sqrt(d_head)` of the model, not of D).

**Shrinking.** `take` copies some members into a smaller stack padded to their own largest width, and `put`
copies members back: the trainer drops stopped models from the computation this way.
"""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from .. import forward as forward_pass
from .. import paths
from ..attention import sinusoidal_table
from ..cache import cache_key, write_npz_atomic
from ..errors import ArgumentError
from ..models import ModelConfig, Transformer, build_model, pick_device, rotary_tables

PATHS = forward_pass.PATHS


def _family(cfg: ModelConfig) -> dict:
    """The fields that must agree inside a stack: all but the query/key width and the logit scale, which the stack
    holds per model (`scales`), so models with a scale of their own (e.g. s ln n / sqrt(d_head)) stack too."""
    fields = cfg.to_dict()
    fields["d_head"] = fields["scale"] = fields["temperature"] = None
    fields["d_value"] = cfg.value_dim
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
    """cos and sin `(M, max_len, padded)`: model i's `helpers.models.rotary_tables` on its padded layout
    (cos 1 and sin 0 on the padding, which stays zero)."""
    cos, sin = torch.ones(len(dims), max_len, padded // 2), torch.zeros(len(dims), max_len, padded // 2)
    for i, d in enumerate(dims):
        table_cos, table_sin = rotary_tables(d, max_len)  # they repeat over the two halves
        cos[i, :, : d // 2], sin[i, :, : d // 2] = table_cos[:, : d // 2], table_sin[:, : d // 2]
    return torch.cat([cos, cos], dim=-1).to(device), torch.cat([sin, sin], dim=-1).to(device)


class ModelStack:
    """M models of one family as stacked parameters `(M, *shape)`, queries/keys padded to the largest d_head.

    `params[name]` has the standalone parameter name (`blocks.0.attn.qkv.weight`, ...); `stack(x)` runs
    `helpers.forward` on inputs with a model axis, `(M, batch, ...)`, and returns `(M, batch, ...)` outputs.
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
                                     f"{base[k]!r} as in models[0]: a stack holds one family (only d_head and the "
                                     f"logit scale may differ; set d_value to hold the value width fixed)")
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
        dtype = next(iter(slices.values()))[0].dtype  # the scales in the parameters' precision
        self.scales = torch.tensor([cfg.attn_scale for cfg in configs], dtype=dtype, device=device)
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
            model = build_model(cfg, seed=0, device=target).to(self.scales.dtype)  # the stack's precision
            model.load_state_dict(self.state_dict(i))  # buffers are rebuilt by the constructor
            out.append(model.eval())
        return out

    @property
    def layout(self) -> forward_pass.Layout:
        """The stack's `helpers.forward.Layout`: one path for every layer, no probes."""
        layers = self.template.n_layers
        return forward_pass.Layout(self.template, self.scales[:, None].expand(len(self), layers), self.rotary,
                                   self.pos_table, (self.attention,) * layers, (None,) * layers)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Inputs `(M, batch, ...)` -> outputs `(M, batch, ...)` (see `helpers.forward.forward`)."""
        return forward_pass.forward(self.params, self.layout, x)



def stack_weights_path(experiment: str, config: dict, module: str | None = None) -> Path:
    """Where a stack task's weights live: `<store>/<experiment>_weights/<key>.npz`, keyed like its store entry
    (the task's config with its members, and the code of `module`, the point function's module)."""
    return paths.cache_dir() / f"{experiment}_weights" / f"{cache_key(experiment + '_weights', config, 0, module)}.npz"
