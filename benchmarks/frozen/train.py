"""FROZEN COPY of `helpers/train.py` as of commit a6d68c4 (2026-12-04); see `frozen/stacked.py`.

Training loop: AdamW, linear warm-up then cosine decay, gradient clipping, periodic evaluation, and attention ranks.

    data = load("reversal", n=32)
    model = build_model(d_model=64, n_heads=4, d_head=4, **data.model_fields())
    history = train(model, data, steps=300, rank_every=50)      # the model is trained in place

`history` is tidy: one row per (step, metric[, layer, head]) with columns `step, metric, value, layer, head`
(`layer`/`head` are <NA> for model-wide metrics). Metrics: "lr", "train_loss" (mean since the last log),
"test_loss", "test_accuracy", and with `rank_every` "rank_<measure>" per layer and head (mean over
`rank_examples` test inputs). A NaN or infinite loss raises `TrainingDiverged`. Progress goes to stderr
with tqdm (hidden in the rendered book). Training is deterministic given `seed` and leaves the global RNG
untouched. The fast attention path is used for training; ranks are read with `helpers.capture`.
"""

import math
import sys
from collections.abc import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from helpers import rank
from helpers.capture import attention_ranks
from helpers.errors import ArgumentError
from helpers.data import IGNORE, TaskData
from helpers.models import count_parameters, pick_device
from helpers.seeding import torch_generator
from helpers.threads import torch_threads


SMALL_MODEL = 200_000


class TrainingDiverged(FloatingPointError):
    """The training loss became NaN or infinite."""


def lr_factor(step: int, steps: int, warmup: int, final: float = 0.0) -> float:
    """Multiplier of the base learning rate: linear warm-up over `warmup` steps, then cosine to `final`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


class BatchOrder:
    """The example order of one training run: a fresh permutation of `count` examples from `seed` each epoch.

    `next(batch_size)` gives the indices `(batch_size,)` of the next batch; an epoch's tail shorter than a
    batch is skipped. The stacked trainer draws each model's batches from its own `BatchOrder`, so a model
    sees the same batches in a stack as alone.
    """

    def __init__(self, count: int, seed: int):
        self.count, self.gen = count, torch_generator(seed)
        self.perm, self.cursor = torch.randperm(count, generator=self.gen), 0

    def next(self, batch_size: int) -> torch.Tensor:
        if self.cursor + batch_size > self.count:
            self.perm, self.cursor = torch.randperm(self.count, generator=self.gen), 0
        index = self.perm[self.cursor:self.cursor + batch_size]
        self.cursor += batch_size
        return index


def loss_and_hits(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """Cross-entropy (mean over counted targets), number correct, number counted.

    logits `(B, n, V)` with targets `(B, n)` (-100 ignored), or `(B, C)` with `(B,)`.
    """
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_targets = targets.reshape(-1)
    loss = F.cross_entropy(flat_logits, flat_targets, ignore_index=IGNORE)
    counted = flat_targets != IGNORE
    hits = (flat_logits.argmax(-1) == flat_targets) & counted
    return loss, int(hits.sum()), int(counted.sum())


@torch.no_grad()
def evaluate(model, x: torch.Tensor, y: torch.Tensor, batch_size: int = 256, device=None) -> dict:
    """{"loss", "accuracy"} of `model` on (x, y), in eval mode, without gradients."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, hits, counted = 0.0, 0, 0
    try:
        for start in range(0, len(x), batch_size):
            xb, yb = x[start:start + batch_size].to(device), y[start:start + batch_size].to(device)
            loss, h, c = loss_and_hits(model(xb), yb)
            total += loss.item() * c
            hits += h
            counted += c
    finally:
        model.train(was_training)
    return {"loss": total / max(counted, 1), "accuracy": hits / max(counted, 1)}


def _check(steps, batch_size, lr, warmup, clip, eval_every, rank_every, rank_measures, weight_decay):
    def integer(name, value, low):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ArgumentError(name, value, f"an integer >= {low}")

    integer("steps", steps, 1)
    integer("batch_size", batch_size, 1)
    integer("warmup", warmup, 0)
    integer("eval_every", eval_every, 0)
    integer("rank_every", rank_every, 0)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0 or not math.isfinite(lr):
        raise ArgumentError("lr", lr, "a finite number > 0")
    if clip is not None and not clip > 0:
        raise ArgumentError("clip", clip, "None (no clipping) or a number > 0")
    if not weight_decay >= 0:
        raise ArgumentError("weight_decay", weight_decay, "a number >= 0")
    for m in rank_measures:
        if m not in rank.MEASURES:
            raise ArgumentError("rank_measures", rank_measures, f"a tuple of {list(rank.MEASURES)}")


def train(
    model,
    data: TaskData,
    steps: int = 500,
    batch_size: int = 64,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    warmup: int | None = None,
    final_lr_ratio: float = 0.0,
    clip: float | None = 1.0,
    eval_every: int | None = None,
    rank_every: int = 0,
    rank_measures: tuple[str, ...] = ("numerical", "effective"),
    rank_examples: int = 8,
    rank_rtol: float = rank.DEFAULT_RTOL,
    callbacks: tuple[Callable, ...] = (),
    seed: int = 0,
    device=None,
    progress: bool = True,
    log_every: int | None = None,
    threads: int | str | None = "auto",
) -> pd.DataFrame:
    """Train `model` in place on `data.train_*`; returns the tidy history (see the module doc).

    warmup defaults to 5% of steps; eval_every to steps // 10 (0: only at the start and end); rank_every=0
    switches rank tracking off. Each callback is called as `callback(step, model)` at every evaluation
    and may return a list of row dicts (`metric`, `value`, optional `layer`, `head`) for the history.
    threads: CPU threads while training; "auto" uses 1 for models under `SMALL_MODEL` parameters (tiny
    models run several times faster single-threaded on a shared 2-core machine), None leaves torch's setting.
    """
    warmup = max(1, steps // 20) if warmup is None else warmup
    eval_every = max(1, steps // 10) if eval_every is None else eval_every
    log_every = log_every or max(1, min(50, steps // 20))
    _check(steps, batch_size, lr, warmup, clip, eval_every, rank_every, rank_measures, weight_decay)
    device = pick_device(device)
    model.to(device)
    train_x, train_y = data.train_x.to(device), data.train_y.to(device)
    probe = data.test_x[:rank_examples].to(device)

    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, steps, warmup, final_lr_ratio))
    order = BatchOrder(len(train_x), seed)
    rows: list[dict] = []

    def log(step, metric, value, layer=None, head=None):
        rows.append({"step": step, "metric": metric, "value": float(value), "layer": layer, "head": head})

    def checkpoint(step):
        evaluating = step in (0, steps) or (eval_every and step % eval_every == 0)
        if evaluating:
            scores = evaluate(model, data.test_x, data.test_y, batch_size=max(batch_size, 256), device=device)
            log(step, "test_loss", scores["loss"])
            log(step, "test_accuracy", scores["accuracy"])
        if rank_every and (step % rank_every == 0 or step == steps):
            ranks = attention_ranks(model, probe, measures=rank_measures, rtol=rank_rtol)
            for m, values in ranks.items():  # (layer, batch, head)
                for layer, per_head in enumerate(values.mean(dim=1).tolist()):
                    for head, value in enumerate(per_head):
                        log(step, f"rank_{m}", value, layer, head)
        for callback in callbacks if evaluating else ():
            for row in callback(step, model) or ():
                log(step, row["metric"], row["value"], row.get("layer"), row.get("head"))

    if threads == "auto":
        threads = 1 if device.type == "cpu" and count_parameters(model) < SMALL_MODEL else None
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ArgumentError("threads", threads, '"auto", None or a positive integer')
    with torch_threads(threads):  # see helpers.threads
        model.train()
        bar = tqdm(total=steps, desc=f"train {data.name}", file=sys.stderr, disable=not progress,
                   mininterval=1.0, leave=False)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            checkpoint(0)
            running, count = 0.0, 0
            try:
                for step in range(1, steps + 1):
                    index = order.next(batch_size).to(device)
                    loss, _, _ = loss_and_hits(model(train_x[index]), train_y[index])
                    if not torch.isfinite(loss):
                        raise TrainingDiverged(
                            f"the training loss became {loss.item()} at step {step} (lr={schedule.get_last_lr()[0]:.3g}, "
                            f"base lr={lr}); lower lr, keep clip on, or check the inputs")
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if clip is not None:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                    optimizer.step()
                    schedule.step()
                    running, count = running + loss.item(), count + 1
                    if step % log_every == 0 or step == steps:
                        log(step, "train_loss", running / count)
                        log(step, "lr", schedule.get_last_lr()[0])
                        bar.set_postfix(loss=f"{running / count:.3f}", refresh=False)
                        running, count = 0.0, 0
                    if (eval_every and step % eval_every == 0) or step == steps or (rank_every and step % rank_every == 0):
                        checkpoint(step)
                    bar.update()
            finally:
                bar.close()
    history = pd.DataFrame(rows, columns=["step", "metric", "value", "layer", "head"])
    history["layer"] = history["layer"].astype("Int64")
    history["head"] = history["head"].astype("Int64")
    return history


def final(history: pd.DataFrame, metric: str) -> float:
    """The last recorded value of a model-wide metric (e.g. "test_loss")."""
    rows = history[history.metric == metric]
    if rows.empty:
        raise KeyError(f"no {metric!r} in the history; it has {sorted(history.metric.unique())}")
    return float(rows.value.iloc[-1])
