"""How models are trained: one `Recipe` for every chapter (schedule, optimiser, stopping rule).

    recipe = Recipe(steps=3000, batch_size=32, lr=3e-3, eval_every=50, patience=6, loss_floor=0.01)
    recipe.lr_at(step)          # the learning rate of step `step` (0-based)

**Schedule.** Linear warm-up over `warmup` steps (default 5 % of `steps`), then cosine decay to
`final_lr_ratio` times `lr`; AdamW (weight decay on matrices only) with each model's gradient clipped to norm
`clip`.

**Stopping rule.** Every `eval_every` steps each model is scored on held-out validation examples (the last
`val_examples` training examples, never trained on). A model stops, *converged*, when none of its last
`patience` evaluations improved on the best earlier validation loss by more than `min_improvement` (relative);
otherwise it runs to `steps` (it *ran out of steps*, which is not convergence). `min_evals` keeps the relative
rule quiet until a model has that many validation losses (the step-0 one included), since the flat start of a
hard task looks like convergence; `loss_floor` also stops a model as soon as its latest validation loss is
below that absolute value (a model that has solved its task keeps improving by large factors and would never
stop otherwise). `patience=None` switches the rule off and keeps every example for training.

**Test scores.** Every model is scored on the test set at the start and with its final weights. `curve=True` also
scores it at every evaluation, for a learning curve in `result.history`; it is off by default because nothing but
a benchmark reads that curve, and with small models it is a large share of the time (a chapter-05 stack at
n = 128: 9 models, 400 steps, 256 test sequences every 50 steps took 22.6 s with it, 18.4 s without; 2026-12-06).
It never changes a weight or a stopping decision.
"""

import math
from dataclasses import asdict, dataclass

from ..errors import ArgumentError


def lr_factor(step: int, steps: int, warmup: int, final: float = 0.0) -> float:
    """Multiplier of the base learning rate: linear warm-up over `warmup` steps, then cosine to `final`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def should_stop(val_losses: list[float], patience: int, min_improvement: float, loss_floor: float | None = None,
                min_evals: int = 0) -> bool:
    """The stopping rule of the module doc on one model's validation losses so far."""
    if loss_floor is not None and val_losses and val_losses[-1] < loss_floor:
        return True
    if len(val_losses) < min_evals or len(val_losses) <= patience:
        return False
    best_before = min(val_losses[:-patience])
    return min(val_losses[-patience:]) > best_before * (1 - min_improvement)


def _integer(name, value, low, optional=False):
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ArgumentError(name, value, ("None or " if optional else "") + f"an integer >= {low}")


def _number(name, value, allowed, ok):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ArgumentError(name, value, allowed)


@dataclass(frozen=True)
class Recipe:
    """Every knob of training (see the module doc); a bad value raises `ArgumentError` naming the field."""

    steps: int = 500
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int | None = None          # None: 5 % of steps (at least 1)
    final_lr_ratio: float = 0.0
    clip: float | None = 1.0           # None: no clipping
    eval_every: int | None = None      # None: steps // 10; 0: only at the start and the end
    patience: int | None = None        # None: no early stopping
    min_improvement: float = 0.005
    loss_floor: float | None = None
    min_evals: int = 0
    val_examples: int | None = None    # None: min(512, a tenth of the training examples) when patience is set
    log_every: int | None = None       # training-loss rows; None: min(50, steps // 20)
    curve: bool = False                # test scores at every evaluation too (a learning curve), not only at both ends

    def __post_init__(self):
        _integer("steps", self.steps, 1)
        _integer("batch_size", self.batch_size, 1)
        _integer("warmup", self.warmup, 0, optional=True)
        _integer("eval_every", self.eval_every, 0, optional=True)
        _integer("patience", self.patience, 1, optional=True)
        _integer("min_evals", self.min_evals, 0)
        _integer("val_examples", self.val_examples, 1, optional=True)
        _integer("log_every", self.log_every, 1, optional=True)
        if not isinstance(self.curve, bool):
            raise ArgumentError("curve", self.curve, "True (test scores at every evaluation) or False")
        _number("lr", self.lr, "a finite number > 0", lambda v: 0 < v < math.inf)
        _number("weight_decay", self.weight_decay, "a finite number >= 0", lambda v: 0 <= v < math.inf)
        _number("final_lr_ratio", self.final_lr_ratio, "a number in [0, 1]", lambda v: 0 <= v <= 1)
        _number("min_improvement", self.min_improvement, "a number in [0, 1)", lambda v: 0 <= v < 1)
        if self.clip is not None:
            _number("clip", self.clip, "None (no clipping) or a finite number > 0", lambda v: 0 < v < math.inf)
        if self.loss_floor is not None:
            if self.patience is None:
                raise ArgumentError("loss_floor", self.loss_floor, "None when patience is None (no stopping rule)")
            _number("loss_floor", self.loss_floor, "None or a finite number > 0", lambda v: 0 < v < math.inf)
        if self.patience is not None and self.eval_every == 0:
            raise ArgumentError("eval_every", self.eval_every, "an integer >= 1 when patience is set")

    @property
    def warmup_steps(self) -> int:
        return max(1, self.steps // 20) if self.warmup is None else self.warmup

    @property
    def eval_interval(self) -> int:
        """Steps between evaluations (0: only at the start and the end)."""
        return max(1, self.steps // 10) if self.eval_every is None else self.eval_every

    @property
    def log_interval(self) -> int:
        return self.log_every or max(1, min(50, self.steps // 20))

    def lr_at(self, step: int) -> float:
        """The learning rate of 0-based step `step`."""
        return self.lr * lr_factor(step, self.steps, self.warmup_steps, self.final_lr_ratio)

    def validation_size(self, n_examples: int) -> int:
        """Training examples held out for the stopping rule (0 without one); checked against the data."""
        if self.patience is None:
            return 0
        size = max(1, min(512, n_examples // 10)) if self.val_examples is None else self.val_examples
        if not 1 <= size < n_examples:
            raise ArgumentError("val_examples", self.val_examples, f"None or an integer from 1 to {n_examples - 1}")
        return size

    def stops(self, val_losses: list[float]) -> bool:
        """Whether a model with these validation losses stops now (always False without a stopping rule)."""
        return self.patience is not None and should_stop(val_losses, self.patience, self.min_improvement,
                                                         self.loss_floor, self.min_evals)

    def to_dict(self) -> dict:
        return asdict(self)
