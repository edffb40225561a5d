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

Attention has two paths that agree to float tolerance: "fast" (`scaled_dot_product_attention`, used for
training) and "explicit" (softmax probabilities materialised). Logits are `scale * q k^T` with
`scale = 1 / sqrt(d_head)` unless `scale` or `temperature` (scale = 1 / temperature) is given.
`d_head` is the query/key (attention) width of a head; `d_value` (default: d_head) is its value/output width,
so a sweep over d_head can hold the value path and its parameter count fixed. The fused projection `qkv`
holds, row-block by row-block, W_q `(heads d_head, d_model)`, W_k (same) and W_v `(heads d_value, d_model)`.
`helpers.capture` reads the probabilities without changing the output.
"""

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from .errors import ArgumentError

POSITIONS = ("none", "sinusoidal", "learned", "rope")
NORMS = ("pre", "post", "none")
TASKS = ("lm", "classify", "features")
POOLS = ("mean", "last")
ACTIVATIONS = ("gelu", "relu")
PATHS = ("fast", "explicit")


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
    dropout: float = 0.0
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
        if not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ArgumentError("dropout", self.dropout, "a number in [0, 1)")
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


def sinusoidal_table(length: int, dim: int) -> torch.Tensor:
    """The Vaswani et al. sinusoidal table `(length, dim)`."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : dim // 2]
    return table


class Rotary(nn.Module):
    """Rotary position embedding (rotate-half form) applied to `(batch, heads, n, d_head)`."""

    def __init__(self, d_head: int, max_len: int, base: float = 10000.0):
        super().__init__()
        inv = 1.0 / base ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)
        angles = torch.arange(max_len, dtype=torch.float32)[:, None] * inv  # (max_len, d_head / 2)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-2]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos[:n] + rotated * self.sin[:n]


class Attention(nn.Module):
    """Multi-head self-attention with `n_heads` heads of query/key width `d_head` and value width `d_value`.

    `path` chooses "fast" (SDPA) or "explicit"; `probe`, when set (by `helpers.capture`), is called with the
    probabilities `(batch, heads, n, n)` and the output is left exactly as the path computes it.
    """

    def __init__(self, cfg: ModelConfig, rotary: Rotary | None):
        super().__init__()
        self.n_heads, self.d_head, self.d_value = cfg.n_heads, cfg.head_dim, cfg.value_dim
        self.scale, self.causal = cfg.attn_scale, cfg.causal
        self.qkv = nn.Linear(cfg.d_model, cfg.n_heads * (2 * cfg.head_dim + cfg.value_dim), bias=cfg.bias)
        self.out = nn.Linear(cfg.n_heads * cfg.value_dim, cfg.d_model, bias=cfg.bias)
        self.rotary = rotary
        self.path = cfg.attention
        self.probe = None

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys `(batch, heads, n, d_head)` and values `(batch, heads, n, d_value)`, rotary applied."""
        b, n, _ = x.shape
        width = self.n_heads * self.d_head
        q, k, v = self.qkv(x).split([width, width, self.n_heads * self.d_value], dim=-1)
        q, k, v = (t.reshape(b, n, self.n_heads, -1).transpose(1, 2) for t in (q, k, v))
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        return q, k, v

    def probabilities(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """softmax(scale q k^T [+ causal mask]): `(batch, heads, n, n)`."""
        logits = (q @ k.transpose(-1, -2)) * self.scale
        if self.causal:
            n = q.shape[-2]
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
            logits = logits.masked_fill(mask, float("-inf"))
        return torch.softmax(logits, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.heads(x)
        if self.path == "explicit":
            probs = self.probabilities(q, k)
            if self.probe is not None:
                self.probe(probs.detach())
            mixed = probs @ v
        else:
            if self.probe is not None:
                with torch.no_grad():
                    self.probe(self.probabilities(q.detach(), k.detach()))
            mixed = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, scale=self.scale)
        return self.out(mixed.transpose(1, 2).reshape(b, n, self.n_heads * self.d_value))


class Block(nn.Module):
    """Attention then optional MLP, each with optional residual and pre/post/no LayerNorm."""

    def __init__(self, cfg: ModelConfig, rotary: Rotary | None):
        super().__init__()
        self.norm_kind, self.residual = cfg.norm, cfg.residual
        self.attn = Attention(cfg, rotary)
        self.norm1 = nn.LayerNorm(cfg.d_model) if cfg.norm != "none" else nn.Identity()
        self.mlp = None
        if cfg.mlp:
            hidden = cfg.d_mlp or 4 * cfg.d_model
            act = nn.GELU() if cfg.activation == "gelu" else nn.ReLU()
            self.mlp = nn.Sequential(nn.Linear(cfg.d_model, hidden, bias=cfg.bias), act,
                                     nn.Linear(hidden, cfg.d_model, bias=cfg.bias))
            self.norm2 = nn.LayerNorm(cfg.d_model) if cfg.norm != "none" else nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)

    def _sub(self, x, layer, norm):
        if self.norm_kind == "pre":
            y = self.drop(layer(norm(x)))
            return x + y if self.residual else y
        y = self.drop(layer(x))
        return norm(x + y if self.residual else y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._sub(x, self.attn, self.norm1)
        if self.mlp is not None:
            x = self._sub(x, self.mlp, self.norm2)
        return x


class PatchEmbedding(nn.Module):
    """Images `(batch, C, S, S)` or `(batch, S, S)` -> patch vectors `(batch, (S/p)^2, d_model)`, row-major."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.image_size, self.channels = cfg.image_size, cfg.channels
        self.proj = nn.Conv2d(cfg.channels, cfg.d_model, cfg.patch_size, stride=cfg.patch_size, bias=cfg.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim == 3:
            images = images.unsqueeze(1)
        if images.shape[1:] != (self.channels, self.image_size, self.image_size):
            raise ValueError(f"images must be (batch, {self.channels}, {self.image_size}, {self.image_size}); "
                             f"got {tuple(images.shape)}")
        return self.proj(images).flatten(2).transpose(1, 2)


class Transformer(nn.Module):
    """Embedding -> positions -> `n_layers` blocks -> final norm (pre-LN) -> task head. See the module doc."""

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
            table = sinusoidal_table(cfg.max_len, cfg.d_model) if cfg.pos == "sinusoidal" else None
            self.register_buffer("pos_table", table, persistent=False)
        rotary = Rotary(cfg.head_dim, cfg.max_len) if cfg.pos == "rope" else None
        self.blocks = nn.ModuleList(Block(cfg, rotary) for _ in range(cfg.n_layers))
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
        """Switch every layer to "fast" (SDPA) or "explicit" (softmax materialised)."""
        _one_of("path", path, PATHS)
        for attn in self.attentions:
            attn.path = path
        return self

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """Final hidden states `(batch, n, d_model)` for any input kind."""
        if self.cfg.vocab_size is not None and x.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"token inputs must be integer tensors (batch, n); got dtype {x.dtype}")
        h = self.embed(x)
        n = h.shape[1]
        if n > self.cfg.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len={self.cfg.max_len}; build with a larger max_len")
        if self.pos_table is not None:
            h = h + self.pos_table[:n]
        for block in self.blocks:
            h = block(h)
        return self.final_norm(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits `(batch, n, vocab)` ("lm"), `(batch, n_classes)` ("classify") or hidden states ("features")."""
        h = self.hidden(x)
        if self.cfg.task == "lm":
            return self.head(h)
        if self.cfg.task == "classify":
            pooled = h.mean(dim=1) if self.cfg.pool == "mean" else h[:, -1]
            return self.head(pooled)
        return h


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
