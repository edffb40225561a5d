"""Chapter 06's grid point: one stack of small transformers (query/key widths x seeds) trained to convergence.

    spec = DomainSpec.for_mode("quick")
    rows = stack_point("shakespeare", 64, spec.as_config(), [{"d_head": 1, "seed": 0}, {"d_head": 4, "seed": 0}])
    model, data = trained_model("shakespeare", 64, spec.as_config(), d_head=4, seed=0)   # from the stored .npz

A stack holds some (d_qk, seed) pairs of one (domain, n), as the adaptive design asks for them: the models share
n, the data and everything but the query/key width `d_head` (the value width `d_value` is fixed, so a change of
loss is caused by the attention logits, not by the capacity of the value path). They are trained together by
`helpers.training.train` with early stopping. Each model's weights are stored on their own (`weights_path`: keyed
by the domain, n, spec, width and seed, which fix its recipe, and by this module's code), so any chapter that needs
the same model (chapter 07) reads it, whichever stack trained it, instead of retraining.

This module is the code the result store keys the point by: edits to the chapter's analysis
(`ch06_real_data`) keep the trained stacks.
"""

import math
import time
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

import torch

from .. import data as datasets
from .. import rank, seeding
from ..capture import attention_ranks
from ..models import ModelConfig, count_parameters, uniform_attention
from ..parameters import ParameterError
from ..threads import torch_threads
from ..training import Diverged, ModelStack, Recipe, evaluate, stack_weights_path, train

EXPERIMENT = "ch6_real_data_stacks"
DOMAINS = ("shakespeare", "mnist", "bbc", "proteins")
LM_DOMAINS = ("shakespeare", "bbc", "proteins")
IMAGE_DOMAINS = ("mnist",)
IMAGE_N = (16, 49, 196)          # 28x28 images in patches of 7, 4 or 2 pixels
LM_N_RANGE = (8, 1024)
RTOL = 1e-3
MEASURES = ("hardmax", "numerical")
RANK_LABELS = rank.labels(MEASURES, (RTOL,))   # ("hardmax", "numerical@1e-03")


def domain_kind(domain: str) -> str:
    """"lm" (causal character language model) or "image" (patch classification)."""
    if domain in LM_DOMAINS:
        return "lm"
    if domain in IMAGE_DOMAINS:
        return "image"
    raise ParameterError("domain", domain, f"one of {list(DOMAINS)}")


def check_n(domain: str, n) -> int:
    """n must be a patch count of a 28x28 image (16, 49, 196) for images, and in LM_N_RANGE for text."""
    if domain_kind(domain) == "image":
        if n not in IMAGE_N:
            raise ParameterError("N_VALUES", n, f"one of {list(IMAGE_N)} for {domain} (28x28 images, patches of 7, 4, 2)")
    elif not (isinstance(n, int) and not isinstance(n, bool) and LM_N_RANGE[0] <= n <= LM_N_RANGE[1]):
        raise ParameterError("N_VALUES", n, f"an integer from {LM_N_RANGE[0]} to {LM_N_RANGE[1]} for {domain}")
    return n


@dataclass(frozen=True)
class DomainSpec:
    """The model, data and budget shared by every stack (part of each stack's cache key); `recipe(domain, n)`
    is the `helpers.training.Recipe` its models train by.

    Text windows are drawn from the first 90 % of the corpus (`text_train_tokens` tokens of windows in all, the
    last `val_examples` of them held out for early stopping); images from MNIST's training file.
    """

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_value: int = 16
    lr: float = 1e-2                   # text: peak learning rate (images: `image_lr`)
    image_lr: float = 3e-3
    max_steps: int = 2000
    eval_every: int = 100
    patience: int = 4
    min_improvement: float = 0.005
    text_batch_tokens: int = 1024      # tokens per step for text (8 windows at n = 128)
    text_train_tokens: int = 1_048_576  # windows of this many tokens in all
    image_batch: int = 128
    image_train: int = 20000
    val_tokens: int = 16384            # text: held-out validation windows of this many tokens (at most a tenth of
                                       # the training windows; images: the trainer's default, 512 images)
    test_tokens: int = 16384           # text: test windows of this many tokens (images: `test_images`)
    test_images: int = 2000
    probe_tokens: int = 512            # rank probes: this many tokens of test sequences (at least 2 sequences)

    @classmethod
    def for_mode(cls, mode: str, **overrides) -> "DomainSpec":
        """The full-mode spec, or the quick one (a narrower model, short budgets); `overrides` replace fields."""
        quick = cls(d_model=32, n_heads=2, d_value=8, max_steps=100, eval_every=20, patience=3,
                    text_batch_tokens=512, text_train_tokens=65536, image_batch=32, image_train=4000,
                    test_tokens=4096, test_images=500, probe_tokens=256)
        spec = quick if mode == "quick" else cls()
        return replace(spec, **{k: v for k, v in overrides.items() if v is not None})

    def as_config(self) -> dict:
        return asdict(self)

    def recipe(self, domain: str, n: int) -> Recipe:
        """How a stack of `domain` at length n trains (cosine schedule over max_steps, the stopping rule)."""
        return Recipe(steps=self.max_steps, batch_size=batch_size(domain, n, self), lr=learning_rate(domain, self),
                      eval_every=self.eval_every, patience=self.patience, min_improvement=self.min_improvement,
                      val_examples=val_examples(domain, n, self))


def batch_size(domain: str, n: int, spec: DomainSpec) -> int:
    """Sequences per step: `text_batch_tokens` tokens for text whatever n is (at least 2 windows); images fixed."""
    if domain_kind(domain) == "image":
        return spec.image_batch
    return max(2, spec.text_batch_tokens // n)


def learning_rate(domain: str, spec: DomainSpec) -> float:
    """Peak learning rate: `lr` for text, `image_lr` for images (measured: 1e-2 halves the text models' distance to
    their bar at the same steps, while MNIST at 5e-3 or 1e-2 is noisier and less accurate than at 3e-3)."""
    return spec.image_lr if domain_kind(domain) == "image" else spec.lr


def val_examples(domain: str, n: int, spec: DomainSpec) -> int | None:
    """Held-out validation windows for the stopping rule: `val_tokens` tokens for text (at most a tenth of the
    training windows, at least 2); None for images (the trainer's default). Validation runs every
    `eval_every` steps on every model, so its size is a large share of a text stack's cost."""
    if domain_kind(domain) == "image":
        return None
    return max(2, min(spec.val_tokens, spec.text_train_tokens // 10) // n)


def load_domain(domain: str, n: int, spec: DomainSpec) -> datasets.TaskData:
    """The data of a stack (the same for every seed: seeds vary the initialisation and the data order)."""
    check_n(domain, n)
    if domain_kind(domain) == "lm":
        return datasets.load(domain, n, seed=0, n_train=max(256, spec.text_train_tokens // n),
                             n_test=max(8, spec.test_tokens // n))
    images = _images(domain, spec.image_train, spec.test_images)  # the same pixels for every n
    return replace(images, n=n, info={"patch_size": datasets.PATCH_FOR_N[n]})


@lru_cache(maxsize=2)
def _images(domain: str, n_train: int, n_test: int) -> datasets.TaskData:
    return datasets.load(domain, 16, n_train=n_train, n_test=n_test)


def model_config(data: datasets.TaskData, d_head: int, spec: DomainSpec) -> ModelConfig:
    """A stack member: fixed width, heads, value width and MLP (2 d_model); the query/key width `d_head` free."""
    return ModelConfig(d_model=spec.d_model, n_heads=spec.n_heads, d_head=d_head, d_value=spec.d_value,
                       n_layers=spec.n_layers, d_mlp=2 * spec.d_model, pos="sinusoidal", **data.model_fields())


def probe_inputs(data: datasets.TaskData, spec: DomainSpec) -> torch.Tensor:
    """The first test sequences, `probe_tokens` tokens in all (at least 2 sequences)."""
    return data.test_x[:max(2, spec.probe_tokens // data.n)]


def _check_members(members) -> list[dict]:
    if not isinstance(members, list) or not members or not all(
            isinstance(m, dict) and set(m) == {"d_head", "seed"} for m in members):
        raise ValueError(f"members must be a non-empty list of {{'d_head': int, 'seed': int}}; got {members!r}")
    return members


def weights_path(domain: str, n: int, spec: dict, d_head: int, seed: int):
    """Where one model's weights live: keyed by its recipe (domain, n, spec, width, seed) and this module's code."""
    return stack_weights_path(EXPERIMENT, {"domain": domain, "n": n, "spec": spec, "d_head": d_head, "seed": seed},
                              __name__)


def train_models(domain: str, n: int, spec: dict, members: list[dict]):
    """Train the stack of `members`; returns (stack, data, status frame, seconds). Diverged models are kept
    (their status says so); the others trained to the end."""
    spec_obj = DomainSpec(**spec)
    members = _check_members(members)
    data = load_domain(domain, n, spec_obj)
    configs = [model_config(data, m["d_head"], spec_obj) for m in members]
    stack = ModelStack.build(configs, [seeding.derive_seed(m["seed"], "init") for m in members], device="cpu")
    started = time.perf_counter()
    try:
        result = train(stack, data, spec_obj.recipe(domain, n), [seeding.derive_seed(m["seed"], "order") for m in members],
                       device="cpu", progress=False, threads=1)   # the sweep writes one progress line
    except Diverged as error:
        result = error.result
    return stack, data, result.status, time.perf_counter() - started


def save_models(domain: str, n: int, spec: dict, members: list[dict], stack: ModelStack) -> None:
    """Each model of a trained stack in its own `.npz` (see `weights_path`)."""
    for member, model in zip(members, stack.models()):
        ModelStack([model]).save(weights_path(domain, n, spec, member["d_head"], member["seed"]))


def trained_model(domain: str, n: int, spec: dict, d_head: int, seed: int):
    """One standalone model and its data: read from its stored `.npz`, else trained (a stack of one) and stored."""
    path = weights_path(domain, n, spec, d_head, seed)
    if path.exists():
        return ModelStack.load(path, device="cpu").models()[0], load_domain(domain, n, DomainSpec(**spec))
    members = [{"d_head": d_head, "seed": seed}]
    stack, data, _, _ = train_models(domain, n, spec, members)
    save_models(domain, n, spec, members, stack)
    return stack.models()[0], data


def model_rows(model, data: datasets.TaskData, spec: DomainSpec) -> list[dict]:
    """One trained model: per layer, its mean attention ranks (heads and probe sequences), with the model's test
    loss, accuracy, bits per token and the test loss with uniform attention (the load-bearing test)."""
    model.eval()
    scores = evaluate(model, data.test_x, data.test_y)
    with uniform_attention(model):
        uniform = evaluate(model, data.test_x, data.test_y)
    ranks = attention_ranks(model, probe_inputs(data, spec), measures=MEASURES, rtol=RTOL)  # measure -> (layer, batch, head)
    common = {"test_loss": scores["loss"], "test_accuracy": scores["accuracy"],
              "bits_per_token": scores["loss"] / math.log(2), "uniform_loss": uniform["loss"],
              "uniform_increase": uniform["loss"] - scores["loss"], "params": count_parameters(model),
              "chance_loss": math.log(data.vocab_size or data.n_classes)}
    return [{"layer": layer, **{label: float(ranks[m][layer].mean()) for m, label in zip(MEASURES, RANK_LABELS)}, **common}
            for layer in range(model.cfg.n_layers)]


def stack_point(domain: str, n: int, spec: dict, members: list[dict], seed: int = 0) -> list[dict]:
    """Train one stack, store its weights, and return one row per (member, layer) (see `model_rows`) with the
    member's d_head, seed, whether it converged, the step its weights are from, and whether it diverged."""
    with torch_threads(1):
        stack, data, status, seconds = train_models(domain, n, spec, members)
        save_models(domain, n, spec, members, stack)
        rows = []
        spec_obj = DomainSpec(**spec)
        for member, model, (_, st) in zip(members, stack.models(), status.iterrows()):
            common = {"d_head": member["d_head"], "seed": member["seed"], "converged": bool(st.converged),
                      "stop_step": int(st.stop_step), "diverged": bool(st.diverged),
                      "stack_seconds": seconds, "stack_size": len(members), "batch": batch_size(domain, n, spec_obj)}
            if st.diverged:
                rows += [{**common, "layer": layer} for layer in range(model.cfg.n_layers)]
            else:
                rows += [{**common, **row} for row in model_rows(model, data, spec_obj)]
    return rows
