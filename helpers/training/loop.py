"""The book's one training loop: every model of a stack trained as if alone, stopped models leaving the stack.

    result = train(stack, data, Recipe(steps=3000, patience=6, ...), seeds=[0, 1, 2])   # or train(model, ...)
    result.status       # per model: converged (stopped by the rule), stop_step, test_loss, test_accuracy, ...
    result.history      # tidy rows: model, step, metric, value

**Per model, as if alone.** Model i reads its own batches from its own `BatchOrder(seeds[i])`, its own
gradient norm is clipped, its own AdamW state moves (`helpers.training.optim`); a model that stopped (or
diverged) does not move afterwards. A standalone model is trained as a stack of one and its weights are
written back into it.

**Stopped models leave the computation** (`compact=True`). At the first step after any model stopped, the
active ones are copied into a smaller stack (`ModelStack.take`, padded to their own largest d_head; the
optimizer's moments and step counts go with them) and the stopped ones are written back to the caller's stack,
which holds every model's final parameters when `train` returns. Stopping is checked every `eval_every`
steps, so this costs at most one copy of a few small tensors per check, far below one training step. Each
model computes the same numbers either way (padding is exact); `result.compactions` lists each shrink.

**The loop** is four named steps: `step` (one optimiser step of the active models), `evaluate` (test scores,
and validation losses that feed the stopping rule), `shrink` (drop stopped models) and `finish` (every model
scored with its final weights). A NaN or infinite training loss stops that model only; the others finish,
then `Diverged` names the failed models (`error.result` keeps everyone's results). Progress goes to stderr
with tqdm when `progress` is True (hidden in the rendered book). The process's C allocator keeps the memory a
step frees (`helpers.allocator.keep_freed_memory`), so that the next step does not fault it in afresh.
"""

import math
import sys
import time
from dataclasses import dataclass, field

import pandas as pd
import torch
from tqdm.auto import tqdm

from ..allocator import keep_freed_memory
from ..data import TaskData
from ..errors import ArgumentError
from ..models import Transformer, pick_device
from ..seeding import torch_generator
from ..threads import torch_threads
from .optim import StackedAdamW, clip_per_model
from .recipe import Recipe
from .scoring import evaluate_stack, stacked_loss
from .stack import ModelStack

STATUS_COLUMNS = ("model", "d_head", "seed", "converged", "stop_step", "diverged", "error", "val_loss",
                  "test_loss", "test_accuracy")


class Diverged(FloatingPointError):
    """Some models' training loss became NaN or infinite; `result` holds every model's history and status."""

    def __init__(self, message: str, result: "TrainResult"):
        super().__init__(message)
        self.result = result


@dataclass
class TrainResult:
    """`history`: tidy rows (model, step, metric, value); `status`: one row per model (`STATUS_COLUMNS`);
    `compactions`: {step, models, d_head} each time the stack shrank."""

    history: pd.DataFrame
    status: pd.DataFrame
    compactions: list = field(default_factory=list)


class BatchOrder:
    """The example order of one model: a fresh permutation of `count` examples from `seed` each epoch.

    `next(batch_size)` gives the indices `(batch_size,)` of the next batch; an epoch's tail shorter than a
    batch is skipped.
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


# Examples per model in one evaluation forward pass on the CPU: as many as keep one layer's attention weights of the
# whole stack, M x chunk x heads x n^2 floats, within 2^20 (4 MiB, a common L2 cache per core). Larger chunks fall
# out of cache: chapter 05's 9-model stacks scored 256 examples 1.7 times faster at 1 per model than at 28 at
# n = 256, and 1.5 times faster at 7 at n = 128 (`benchmarks/bench_eval_chunk.py`, 2026-12-06). Never more than
# the 256 examples per pass shared by the models that the trainer used before (larger chunks gained nothing
# measurable), and on a GPU those 256 stay.
ATTENTION_FLOATS = 2 ** 20


def eval_chunk(stack: ModelStack, x: torch.Tensor) -> int:
    """Examples per model in each evaluation forward pass of `stack` on inputs x `(B, n)` tokens or images."""
    m = len(stack)
    shared = max(1, 256 // m)
    if stack.device.type != "cpu":
        return shared
    cfg = stack.template
    n = x.shape[1] if x.ndim == 2 else cfg.n_patches
    return max(1, min(shared, ATTENTION_FLOATS // (m * cfg.n_heads * n * n)))


class _Run:
    """The state of one call of `train`. `stack` holds every model; `work` is the stack that computes (`stack`
    itself until a model stops, then a smaller one whose row j is model `members[j]` of `stack`)."""

    def __init__(self, stack: ModelStack, data: TaskData, recipe: Recipe, seeds: list[int], compact: bool):
        self.stack, self.data, self.recipe, self.seeds, self.compact = stack, data, recipe, seeds, compact
        m, device = len(stack), stack.device
        val = recipe.validation_size(len(data.train_x))
        n_train = len(data.train_x) - val
        self.train_x, self.train_y = data.train_x[:n_train].to(device), data.train_y[:n_train].to(device)
        self.val_x, self.val_y = data.train_x[n_train:], data.train_y[n_train:]
        self.orders = [BatchOrder(n_train, seed) for seed in seeds]
        self.work, self.members = stack, list(range(m))
        self.optimizer = StackedAdamW(stack, recipe.weight_decay)
        self.active = torch.ones(m, dtype=torch.bool, device=device)
        self.stop_step, self.converged, self.errors = [recipe.steps] * m, [False] * m, [None] * m
        self.val_losses: list[list[float]] = [[] for _ in range(m)]
        self.rows: list[dict] = []
        self.compactions: list[dict] = []
        self.running, self.count = torch.zeros(m, dtype=torch.float64), 0
        self.started = time.perf_counter()

    def log(self, step, metric, values, which):
        for i in which:
            self.rows.append({"model": i, "step": step, "metric": metric, "value": float(values[i])})

    def spread(self, local: torch.Tensor) -> list[float]:
        """Values of `work`'s rows -> a list over every model of `stack` (NaN for the models not in `work`)."""
        out = [math.nan] * len(self.stack)
        for j, i in enumerate(self.members):
            out[i] = float(local[j])
        return out

    def live(self) -> list[int]:
        return self.active.nonzero().flatten().tolist()

    def step(self, step: int) -> None:
        """One optimiser step (1-based `step`) of the active models of `work`."""
        recipe, work = self.recipe, self.work
        rows_active = self.active[torch.tensor(self.members, device=self.active.device)]   # (len(work),)
        index = torch.stack([self.orders[i].next(recipe.batch_size) for i in self.members]).to(work.device)
        losses, _, _ = stacked_loss(work(self.train_x[index]), self.train_y[index], with_hits=False)
        finite = torch.isfinite(losses.detach())
        rate = recipe.lr_at(step - 1)
        for j in (rows_active & ~finite).nonzero().flatten().tolist():
            i = self.members[j]
            self.active[i], rows_active[j], self.stop_step[i] = False, False, step - 1
            self.errors[i] = (f"model {i} (d_head={self.stack.d_heads[i]}, seed={self.seeds[i]}): the training loss "
                              f"became {losses[j].item()} at step {step} (lr={rate:.3g}, base lr={recipe.lr}); lower "
                              f"lr, keep clip on, or check the inputs")
        for p in work.params.values():
            p.grad = None
        torch.where(rows_active, losses, torch.zeros_like(losses)).sum().backward()
        for name, mask in work.masks.items():
            work.params[name].grad.mul_(mask)
        if recipe.clip is not None:
            clip_per_model(work, recipe.clip)
        self.optimizer.step(rate, rows_active)
        self.running[self.members] += torch.where(finite, losses.detach(), torch.zeros_like(losses)).double().cpu()
        self.count += 1
        if step % recipe.log_interval == 0 or step == recipe.steps:
            now = self.live()
            self.log(step, "train_loss", (self.running / self.count).tolist(), now)
            self.log(step, "lr", [rate] * len(self.stack), now)
            self.running, self.count = torch.zeros(len(self.stack), dtype=torch.float64), 0

    def scores(self, stack, x: torch.Tensor, y: torch.Tensor) -> dict:
        """`evaluate_stack` of `stack` on (x, y) in chunks sized by `eval_chunk`."""
        return evaluate_stack(stack, x, y, batch_size=len(stack) * eval_chunk(stack, x))

    def evaluate(self, step: int) -> None:
        """Test scores of the models in `work` (every model at step 0; later only with `recipe.curve`), then their
        validation losses, which may stop them."""
        live = self.live()
        which = range(len(self.stack)) if step == 0 else live
        if step == 0 or self.recipe.curve:
            scores = {k: self.spread(v) for k, v in self.scores(self.work, self.data.test_x, self.data.test_y).items()}
            self.log(step, "test_loss", scores["loss"], which)
            self.log(step, "test_accuracy", scores["accuracy"], which)
        self.log(step, "seconds", [time.perf_counter() - self.started] * len(self.stack), which)
        if len(self.val_x):
            val = self.spread(self.scores(self.work, self.val_x, self.val_y)["loss"])
            self.log(step, "val_loss", val, live)
            for i in live:
                self.val_losses[i].append(val[i])
                if step and self.recipe.stops(self.val_losses[i]):
                    self.active[i], self.stop_step[i], self.converged[i] = False, step, True

    def shrink(self, step: int) -> None:
        """Drop the stopped models from `work` (their parameters go back to `stack`, where they stay)."""
        keep = [j for j, i in enumerate(self.members) if self.active[i]]
        if self.work is not self.stack:  # (while `work` is `stack`, it already holds them)
            self.stack.put(self.work, [(j, i) for j, i in enumerate(self.members) if not self.active[i]])
        self.work = self.work.take(keep)
        self.optimizer = self.optimizer.take(self.work, keep)
        self.members = [self.members[j] for j in keep]
        self.compactions.append({"step": step, "models": len(self.members), "d_head": self.work.padded})

    def finish(self, step: int) -> TrainResult:
        """Every model's final weights back in `stack`, scored on the test set; the result."""
        if self.work is not self.stack:
            self.stack.put(self.work, list(enumerate(self.members)))
        m = len(self.stack)
        scores = self.scores(self.stack, self.data.test_x, self.data.test_y)
        self.log(step, "test_loss", scores["loss"], range(m))
        self.log(step, "test_accuracy", scores["accuracy"], range(m))
        self.log(step, "seconds", [time.perf_counter() - self.started] * m, range(m))
        status = pd.DataFrame({
            "model": range(m), "d_head": self.stack.d_heads, "seed": list(self.seeds), "converged": self.converged,
            "stop_step": self.stop_step, "diverged": [e is not None for e in self.errors], "error": self.errors,
            "val_loss": [v[-1] if v else float("nan") for v in self.val_losses],
            "test_loss": scores["loss"].tolist(), "test_accuracy": scores["accuracy"].tolist(),
        })
        history = pd.DataFrame(self.rows, columns=["model", "step", "metric", "value"])
        return TrainResult(history, status, self.compactions)


def _check(models, data, recipe, seeds, threads, compact):
    if not isinstance(models, (ModelStack, Transformer)):
        raise ArgumentError("models", type(models).__name__, "a helpers.training.ModelStack or a "
                            "helpers.models.Transformer")
    if not isinstance(data, TaskData):
        raise ArgumentError("data", type(data).__name__, "a helpers.data.TaskData")
    if not isinstance(recipe, Recipe):
        raise ArgumentError("recipe", type(recipe).__name__, "a helpers.training.Recipe")
    m = len(models) if isinstance(models, ModelStack) else 1
    if not isinstance(seeds, (list, tuple)) or len(seeds) != m or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ArgumentError("seeds", seeds, f"a list of {m} non-negative integers (one per model)")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ArgumentError("threads", threads, "None or a positive integer")
    if not isinstance(compact, bool):
        raise ArgumentError("compact", compact, "True (drop stopped models from the computation) or False")
    recipe.validation_size(len(data.train_x))


def train(models: ModelStack | Transformer, data: TaskData, recipe: Recipe, seeds: list[int], device=None,
          progress: bool = False, threads: int | None = None, compact: bool = True) -> TrainResult:
    """Train every model of `models` (a stack, or one model as a stack of one) in place on `data.train_*`,
    model i with data order `seeds[i]`, by `recipe` (see the module doc). threads: CPU threads (None: torch's
    setting). `result.status` says per model whether it stopped by the rule (`converged`) or ran out of steps.
    """
    _check(models, data, recipe, seeds, threads, compact)
    keep_freed_memory()   # every step frees what the next allocates: keep it in the process (`helpers.allocator`)
    single = isinstance(models, Transformer)
    stack = ModelStack([models]) if single else models
    stack.to(pick_device(device))
    run = _Run(stack, data, recipe, list(seeds), compact)
    every = recipe.eval_interval
    with torch_threads(threads):
        bar = tqdm(total=recipe.steps, desc=f"{len(stack)} models on {data.name}", file=sys.stderr,
                   disable=not progress, mininterval=1.0, leave=False)
        try:
            run.evaluate(0)
            step = 0
            for step in range(1, recipe.steps + 1):
                live = int(run.active.sum())
                if not live:
                    break
                if compact and live < len(run.members):
                    run.shrink(step - 1)
                run.step(step)
                if every and step % every == 0 and step < recipe.steps:
                    run.evaluate(step)
                bar.update()
            result = run.finish(step)
        finally:
            bar.close()
    if single:
        with torch.no_grad():
            models.to(stack.device).load_state_dict(stack.state_dict(0))
    failed = [e for e in run.errors if e is not None]
    if failed:
        raise Diverged(f"{len(failed)} of {len(stack)} models diverged (the others trained to the end; "
                       f"error.result has every model):\n" + "\n".join(failed), result)
    return result
