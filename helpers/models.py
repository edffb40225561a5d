"""Small transformers built from explicit parts, with a head dimension independent of d_model / n_heads.

    cfg = ModelConfig(vocab_size=32, d_model=64, n_heads=4, d_head=8, n_layers=2, task="lm")
    model = build_model(cfg, seed=0)          # global RNG untouched; on CUDA when present
    logits = model(tokens)                    # (batch, n) int64 -> (batch, n, vocab_size)

Inputs (exactly one kind per model):
  tokens   vocab_size=V              (batch, n) int64
  vectors  input_dim=D               (batch, n, D) float
  images   image_size=S, patch_size=p, channels=C
                                     (batch, C, S, S) or (batch, S, S) float -> n = (S / p)^2 patches

Outputs (`task`):
  "lm"        per-position logits over vocab_size: (batch, n, V); next-token LM when the data shifts targets
  "classify"  pooled (mean, or last token) logits: (batch, n_classes)
  "features"  the final hidden states: (batch, n, d_model)

Attention has two paths that agree to float tolerance: "fast" (used for training: `scaled_dot_product_attention`
where torch has a fused kernel for the shapes, else torch's unfused kernel written out) and "explicit" (softmax
probabilities materialised). Logits are `scale * q k^T` with
`scale = 1 / sqrt(d_head)` unless `scale` or `temperature` (scale = 1 / temperature) is given.
`d_head` is the query/key (attention) width of a head; `d_value` (default: d_head) is its value/output width,
so a sweep over d_head can hold the value path and its parameter count fixed. The fused projection `qkv`
holds, row-block by row-block, W_q `(heads d_head, d_model)`, W_k (same) and W_v `(heads d_value, d_model)`.
`helpers.capture` reads the probabilities without changing the output.

The modules here only hold the parameters (under the names the trainer and the stored weights use); the
computation is `helpers.forward`, the one forward pass of the book, which a model runs as a stack of one.
"""

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from . import forward as forward_pass
from .attention import sinusoidal_table
from .errors import ArgumentError

POSITIONS = ("none", "sinusoidal", "learned", "rope")
NORMS = ("pre", "post", "none")
TASKS = ("lm", "classify", "features")
POOLS = ("mean", "last")
ACTIVATIONS = ("gelu", "relu")
PATHS = forward_pass.PATHS


def _positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ArgumentError(name, value, "a positive integer")


def _optional_positive_int(name, value):
    if value is not None:
        _positive_int(name, value)


def _one_of(name, value, options):
    if value not in options:
        raise ArgumentError(name, value, f"one of {list(options)}")


def _optional_positive_number(name, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
                              or not math.isfinite(value)):
        raise ArgumentError(name, value, "None or a finite number > 0")


@dataclass(frozen=True)
class ModelConfig:
    """Every knob of the transformer; invalid values raise `ArgumentError` naming the field."""

    d_model: int = 64
    n_heads: int = 4
    d_head: int | None = None  # query/key width per head; None: d_model // n_heads
    n_layers: int = 2
    mlp: bool = True  # False: attention-only blocks
    d_mlp: int | None = None  # None: 4 * d_model
    activation: str = "gelu"
    norm: str = "pre"  # "pre", "post" or "none" (no LayerNorm)
    residual: bool = True
    pos: str = "sinusoidal"  # "none", "sinusoidal", "learned" or "rope"
    max_len: int = 1024  # longest sequence (sinusoidal/learned/rope tables)
    causal: bool = False
    scale: float | None = None  # logits = scale * q.k; None: 1 / sqrt(d_head)
    temperature: float | None = None  # alternative to scale: logits = q.k / temperature
    task: str = "lm"
    vocab_size: int | None = None
    input_dim: int | None = None
    image_size: int | None = None
    patch_size: int | None = None
    channels: int = 1
    n_classes: int | None = None
    pool: str = "mean"  # classify: "mean" over positions or the "last" position
    bias: bool = True
    attention: str = "fast"  # default path: "fast" or "explicit"
    d_value: int | None = None  # value/output width per head; None: the query/key width (head_dim)

    def __post_init__(self):
        for name in ("d_model", "n_heads", "n_layers", "max_len", "channels"):
            _positive_int(name, getattr(self, name))
        for name in ("d_head", "d_value", "d_mlp", "vocab_size", "input_dim", "image_size", "patch_size", "n_classes"):
            _optional_positive_int(name, getattr(self, name))
        for name, options in (("activation", ACTIVATIONS), ("norm", NORMS), ("pos", POSITIONS), ("task", TASKS),
                              ("pool", POOLS), ("attention", PATHS)):
            _one_of(name, getattr(self, name), options)
        for name in ("mlp", "residual", "causal", "bias"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentError(name, getattr(self, name), "True or False")
        _optional_positive_number("scale", self.scale)
        _optional_positive_number("temperature", self.temperature)
        if self.scale is not None and self.temperature is not None:
            raise ArgumentError("temperature", self.temperature, "None when scale is given (set one of them)")
        if self.d_head is None and self.d_model % self.n_heads:
            raise ArgumentError("d_head", None, f"an explicit d_head, since d_model={self.d_model} is not divisible "
                                 f"by n_heads={self.n_heads}")
        if self.pos == "rope" and self.head_dim % 2:
            raise ArgumentError("d_head", self.head_dim, "an even number with pos='rope'")
        kinds = [k for k, on in (("vocab_size", self.vocab_size is not None),
                                 ("input_dim", self.input_dim is not None),
                                 ("image_size/patch_size", self.image_size is not None or self.patch_size is not None))
                 if on]
        if len(kinds) != 1:
            raise ArgumentError("vocab_size", self.vocab_size, "exactly one input kind: vocab_size (tokens), "
                                 f"input_dim (vectors) or image_size + patch_size (images); got {kinds or 'none'}")
        if kinds == ["image_size/patch_size"]:
            if self.image_size is None or self.patch_size is None:
                raise ArgumentError("patch_size", self.patch_size, "image_size and patch_size given together")
            if self.image_size % self.patch_size:
                raise ArgumentError("patch_size", self.patch_size, f"a divisor of image_size={self.image_size}")
            if self.n_patches > self.max_len:
                raise ArgumentError("max_len", self.max_len, f">= the number of patches {self.n_patches}")
        if self.task == "lm" and self.vocab_size is None:
            raise ArgumentError("task", self.task, "'classify' or 'features' for inputs without vocab_size "
                                 "('lm' predicts tokens)")
        if self.task == "classify" and self.n_classes is None:
            raise ArgumentError("n_classes", None, "a positive integer when task='classify'")

    @property
    def head_dim(self) -> int:
        """d_head, defaulting to d_model // n_heads."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def value_dim(self) -> int:
        """d_value, defaulting to the query/key width `head_dim`."""
        return self.d_value if self.d_value is not None else self.head_dim

    @property
    def attn_scale(self) -> float:
        """The factor on q.k: scale, 1 / temperature, or 1 / sqrt(d_head)."""
        if self.scale is not None:
            return float(self.scale)
        if self.temperature is not None:
            return 1.0 / float(self.temperature)
        return 1.0 / math.sqrt(self.head_dim)

    @property
    def n_patches(self) -> int | None:
        if self.image_size is None or self.patch_size is None:
            return None
        return (self.image_size // self.patch_size) ** 2

    def to_dict(self) -> dict:
        """Plain dict of the fields (JSON-able; for cache keys and metrics)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ArgumentError(sorted(unknown)[0], values[sorted(unknown)[0]],
                                 f"a ModelConfig field: {[f.name for f in fields(cls)]}")
        return cls(**values)


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """`device` as given, else CUDA when available, else CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ArgumentError("device", device, "None (auto), 'cpu', 'cuda' or 'cuda:<index>'") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ArgumentError("device", str(device), "'cpu' or None here: CUDA is not available")
    return device


def rotary_tables(d_head: int, max_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `(max_len, d_head)` of rotary positions in the rotate-half form (each half repeats the angles)."""
    inv = 1.0 / base ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * inv  # (max_len, d_head / 2)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


class Attention(nn.Module):
    """The parameters of one layer's heads: `qkv` and `out`, plus how the forward pass runs that layer.

    `scale` is the factor on q.k, `path` "fast" (fused where torch can) or "explicit"; `probe`, when set (by
    `helpers.capture`), is called with the probabilities `(batch, heads, n, n)` (see `helpers.forward`).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.d_head, self.d_value = cfg.n_heads, cfg.head_dim, cfg.value_dim
        self.scale, self.causal = cfg.attn_scale, cfg.causal
        self.qkv = nn.Linear(cfg.d_model, cfg.n_heads * (2 * cfg.head_dim + cfg.value_dim), bias=cfg.bias)
        self.out = nn.Linear(cfg.n_heads * cfg.value_dim, cfg.d_model, bias=cfg.bias)
        self.path = cfg.attention
        self.probe = None


class Block(nn.Module):
    """The parameters of one layer: attention, optional MLP (`mlp.0`, `mlp.2`) and LayerNorms `norm1`, `norm2`."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = Attention(cfg)
        self.norm1 = nn.LayerNorm(cfg.d_model) if cfg.norm != "none" else nn.Identity()
        if cfg.mlp:
            hidden = cfg.d_mlp or 4 * cfg.d_model
            act = nn.GELU() if cfg.activation == "gelu" else nn.ReLU()
            self.mlp = nn.Sequential(nn.Linear(cfg.d_model, hidden, bias=cfg.bias), act,
                                     nn.Linear(hidden, cfg.d_model, bias=cfg.bias))
            self.norm2 = nn.LayerNorm(cfg.d_model) if cfg.norm != "none" else nn.Identity()


class PatchEmbedding(nn.Module):
    """The patch projection `proj` (a convolution of stride p): images -> patch vectors, row-major."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.proj = nn.Conv2d(cfg.channels, cfg.d_model, cfg.patch_size, stride=cfg.patch_size, bias=cfg.bias)


class Transformer(nn.Module):
    """Embedding -> positions -> `n_layers` blocks -> final norm (pre-LN) -> task head. See the module doc.

    The modules hold the parameters; the computation is `helpers.forward`, run as a stack of one model.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        if cfg.vocab_size is not None:
            self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        elif cfg.input_dim is not None:
            self.embed = nn.Linear(cfg.input_dim, cfg.d_model, bias=cfg.bias)
        else:
            self.embed = PatchEmbedding(cfg)
        if cfg.pos == "learned":
            self.pos_table = nn.Parameter(0.02 * torch.randn(cfg.max_len, cfg.d_model))
        else:
            table = sinusoidal_table(cfg.max_len, cfg.d_model, dtype=torch.float32) if cfg.pos == "sinusoidal" else None
            self.register_buffer("pos_table", table, persistent=False)
        cos, sin = rotary_tables(cfg.head_dim, cfg.max_len) if cfg.pos == "rope" else (None, None)
        self.register_buffer("rotary_cos", cos, persistent=False)
        self.register_buffer("rotary_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.head = None
        if cfg.task == "lm":
            self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.bias)
        elif cfg.task == "classify":
            self.head = nn.Linear(cfg.d_model, cfg.n_classes, bias=cfg.bias)

    @property
    def attentions(self) -> list[Attention]:
        """The attention module of each layer, in order."""
        return [block.attn for block in self.blocks]

    def set_attention_path(self, path: str) -> "Transformer":
        """Switch every layer to "fast" (fused where torch can) or "explicit" (softmax materialised)."""
        _one_of("path", path, PATHS)
        for attn in self.attentions:
            attn.path = path
        return self

    def layout(self) -> forward_pass.Layout:
        """This model as a stack of one for `helpers.forward`: its scales, tables, paths and probes now."""
        weight = self.blocks[0].attn.qkv.weight
        scales = torch.tensor([[attn.scale for attn in self.attentions]], dtype=weight.dtype, device=weight.device)
        rotary = None if self.rotary_cos is None else (self.rotary_cos[None], self.rotary_sin[None])
        return forward_pass.Layout(self.cfg, scales, rotary, self.pos_table if self.cfg.pos == "sinusoidal" else None,
                                   tuple(a.path for a in self.attentions), tuple(a.probe for a in self.attentions))

    def _run(self, x: torch.Tensor, run) -> torch.Tensor:
        if self.cfg.vocab_size is not None and x.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"token inputs must be integer tensors (batch, n); got dtype {x.dtype}")
        params = {name: p.unsqueeze(0) for name, p in self.named_parameters()}  # views: gradients reach self
        out = run(params, self.layout(), x.unsqueeze(0))
        return out if isinstance(out, list) else out[0]

    def layer_states(self, x: torch.Tensor) -> torch.Tensor:
        """Token states entering block 0 and leaving every block: `(n_layers + 1, batch, n, d_model)`."""
        return torch.stack(self._run(x, forward_pass.stream))[:, 0]

    def attention_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Every head's logits before the softmax (q.k times its scale, causal entries -inf):
        `(n_layers, batch, heads, n, n)`."""
        return torch.stack(self._run(x, forward_pass.attention_logits))[:, 0]

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """Final hidden states `(batch, n, d_model)` for any input kind."""
        return self._run(x, forward_pass.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits `(batch, n, vocab)` ("lm"), `(batch, n_classes)` ("classify") or hidden states ("features")."""
        return self._run(x, forward_pass.forward)


def build_model(cfg: ModelConfig | dict | None = None, seed: int = 0, device=None, **overrides) -> Transformer:
    """A `Transformer` whose initial weights depend only on `seed`; the global RNG is left untouched.

    `cfg` may be a ModelConfig or a dict; keyword overrides replace its fields. The model is moved to
    `pick_device(device)` (CUDA when present).
    """
    if cfg is None:
        cfg = ModelConfig(**overrides)
    elif isinstance(cfg, dict):
        cfg = ModelConfig.from_dict({**cfg, **overrides})
    elif overrides:
        cfg = ModelConfig.from_dict({**cfg.to_dict(), **overrides})
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise ArgumentError("seed", seed, "a non-negative integer")
    target = pick_device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(cfg)
    return model.to(target)


@contextmanager
def uniform_attention(model: Transformer):
    """Inside the block, every head attends uniformly (over the keys its mask allows): logits scale 0.

    For the load-bearing test: the loss with trained attention against the loss with uniform attention.
    The model's scales and paths are restored afterwards, even after an error.
    """
    saved = [(attn.scale, attn.path) for attn in model.attentions]
    try:
        for attn in model.attentions:
            attn.scale, attn.path = 0.0, "explicit"
        yield model
    finally:
        for attn, (scale, path) in zip(model.attentions, saved):
            attn.scale, attn.path = scale, path


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
