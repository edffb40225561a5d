"""Chapter 5's training: the models of one (task, n) cell for a list of query/key widths and seeds.

    rows = train_models("copy", 32, d_qks=[2, 8], model_seeds=[0, 1, 2], data_seed=0, recipe=Recipe())
    # one row per model: d_qk, model_seed, test_loss, test_accuracy, converged, stop_step,
    # and per head (lists ordered by layer, head): hardmax_rank, numerical_rank, hardmax_rank_targets

**Models.** Every model of a task has the same architecture (TASK_SPECS: layers, positions, learning rate);
only the query/key width d_qk varies, the value width stays fixed (`d_value`). A model trains until its
validation loss stops improving (`converged`: none of the last `patience` evaluations beat the best earlier
one by more than `tolerance`, relative) or until `steps`. All models of a (task, n) share one dataset (from
the data seed); the model seed sets the initial weights and the batch order.

This module holds only what a trained model's numbers depend on, so that the result store (which keys a
point by the code of its module) keeps the trained models when the chapter's analysis changes.
"""

from dataclasses import dataclass, field, fields, replace

from .. import capture, data as datasets, models, rank, seeding, train

RTOL = 1e-3          # numerical rank: sigma_i > 1e-3 sigma_1, the book's headline tolerance
PROBE_EXAMPLES = 8   # test inputs whose attention ranks are averaged per head


@dataclass(frozen=True)
class TaskSpec:
    """How a task is trained and judged: positions, layers, learning rate, data options, quality bar."""

    pos: str
    n_layers: int
    lr: float
    bar: float
    options: dict = field(default_factory=dict)
    need: str = ""        # the attention pattern that solves it, in words
    expected: str = ""    # what the literature predicts for the smallest d_qk


TASK_SPECS = {
    "copy": TaskSpec("sinusoidal", 1, 3e-3, 0.99, {},
                     "a shift: the query at position i reads the key at i - ceil(n/2)",
                     "O(log n) (a sparse pattern: Likhosherstov et al. 2021)"),
    "qsa": TaskSpec("sinusoidal", 1, 3e-3, 0.99, {"q": 2, "n_values": 4},
                    "q-sparse averaging: each query spreads its weight evenly over the q = 2 positions it names",
                    "O(q log n) (Sanford et al. 2023)"),
    "mq_recall": TaskSpec("none", 2, 3e-3, 0.99, {"n_values": 4},
                          "content matching: the query for key k reads the one slot that stores key k",
                          "O(log n) to separate n/2 keys (Likhosherstov et al. 2021)"),
    "reversal": TaskSpec("sinusoidal", 1, 3e-3, 0.99, {},
                         "the anti-diagonal permutation: position i reads key n - 1 - i",
                         "O(log n) (a sparse pattern: Likhosherstov et al. 2021)"),
    "high_rank": TaskSpec("learned", 1, 3e-3, 0.99, {},
                          "a fixed random permutation of the positions",
                          "O(log n) (a sparse pattern: Likhosherstov et al. 2021)"),
}
TASKS = tuple(TASK_SPECS)


@dataclass(frozen=True)
class Recipe:
    """Everything shared by the models of a run besides task, n, d_qk and seeds."""

    d_model: int = 64
    d_value: int = 16
    steps: int = 3000             # the most steps a model may take
    eval_every: int = 50
    patience: int = 6
    tolerance: float = 0.005      # relative improvement of the validation loss that still counts
    loss_floor: float = 1e-3      # a validation loss below this (nats per target) has nothing left to learn
    tokens_per_step: int = 1024
    n_train: int = 4096
    n_val: int = 256
    n_test: int = 256
    trainer: str = "loop"

    def batch_size(self, n: int) -> int:
        """Sequences per step: about tokens_per_step tokens, at least 8 sequences."""
        return max(8, self.tokens_per_step // n)


def value_width_supported() -> bool:
    """Whether ModelConfig has a value width of its own (`d_value`); without it the value width is d_qk."""
    return "d_value" in {f.name for f in fields(models.ModelConfig)}


def task_data(task: str, n: int, seed: int, recipe: Recipe) -> datasets.TaskData:
    """The (task, n) dataset shared by every model of the cell; the last n_val training examples validate."""
    spec = TASK_SPECS[task]
    return datasets.synthetic(task, n, seed=seeding.derive_seed(seed, "data"), n_train=recipe.n_train + recipe.n_val,
                              n_test=recipe.n_test, **spec.options)


def build_model(task: str, data: datasets.TaskData, d_qk: int, model_seed: int, recipe: Recipe):
    """One untrained model of the task's family with query/key width d_qk (value width recipe.d_value)."""
    spec = TASK_SPECS[task]
    widths = {"d_head": d_qk}
    if value_width_supported():
        widths["d_value"] = recipe.d_value
    return models.build_model(d_model=recipe.d_model, n_heads=1, n_layers=spec.n_layers, d_mlp=2 * recipe.d_model,
                              pos=spec.pos, seed=seeding.derive_seed(model_seed, "init"), device="cpu",
                              **widths, **data.model_fields())


class _Converged(Exception):
    """Raised from the training callback when the stopping rule fires (the loop trainer has no early stop)."""

    def __init__(self, step: int):
        self.step = step


def should_stop(val_losses: list, patience: int, tolerance: float, loss_floor: float = 0.0) -> bool:
    """The last validation loss is below `loss_floor`, or none of the last `patience` validation losses beat the
    best earlier one by more than `tolerance` (relative). A relative rule alone never stops a model that has
    solved its task: its loss keeps falling by large factors while it sharpens an already perfect answer."""
    if val_losses and val_losses[-1] < loss_floor:
        return True
    if len(val_losses) <= patience:
        return False
    best_before = min(val_losses[:-patience])
    return min(val_losses[-patience:]) > best_before * (1 - tolerance)


def _split_validation(data: datasets.TaskData, n_val: int):
    """(training data without its last n_val examples, validation x, validation y)."""
    cut = len(data.train_x) - n_val
    return replace(data, train_x=data.train_x[:cut], train_y=data.train_y[:cut]), data.train_x[cut:], data.train_y[cut:]


def _train_one_loop(task, data, d_qk, model_seed, recipe):
    """Train one model with `helpers.train.train`, stopped by `should_stop`; returns (model, status dict)."""
    model = build_model(task, data, d_qk, model_seed, recipe)
    train_part, val_x, val_y = _split_validation(data, recipe.n_val)
    losses = []

    def watch(step, net):
        if step:
            losses.append(train.evaluate(net, val_x, val_y)["loss"])
            if should_stop(losses, recipe.patience, recipe.tolerance, recipe.loss_floor):
                raise _Converged(step)

    stop_step, converged = recipe.steps, False
    try:
        train.train(model, train_part, steps=recipe.steps, batch_size=recipe.batch_size(data.n),
                    lr=TASK_SPECS[task].lr, final_lr_ratio=0.1, eval_every=recipe.eval_every, callbacks=(watch,),
                    seed=seeding.derive_seed(model_seed, "order"), device="cpu", progress=False)
    except _Converged as done:
        stop_step, converged = done.step, True
    return model, {"converged": converged, "stop_step": stop_step}


def head_ranks(model, data: datasets.TaskData) -> dict:
    """Hardmax and numerical (rtol 1e-3) rank of every trained head, mean over PROBE_EXAMPLES test inputs.

    Lists ordered by (layer, head). `hardmax_rank_targets` counts only the rows that carry a target (the rows
    of `datasets.solving_pattern`), comparable with the pattern's own hardmax rank.
    """
    x = data.test_x[:PROBE_EXAMPLES]
    probs = capture.attention_probs(model, x)                         # (layer, batch, head, n, n)
    targets = (data.test_y[0] != datasets.IGNORE).nonzero().flatten()
    hard = rank.hardmax_rank(probs).double().mean(dim=1)              # (layer, head)
    numerical = rank.numerical_rank(probs, rtol=RTOL).double().mean(dim=1)
    hard_targets = rank.hardmax_rank(probs[..., targets, :]).double().mean(dim=1)
    return {"hardmax_rank": hard.flatten().tolist(), "numerical_rank": numerical.flatten().tolist(),
            "hardmax_rank_targets": hard_targets.flatten().tolist()}


def train_models(task: str, n: int, d_qks: list, model_seeds: list, data_seed: int, recipe: Recipe) -> list[dict]:
    """Train one model per (d_qk, model seed) of one (task, n) cell; one row per model.

    Row: d_qk, model_seed, test_loss, test_accuracy, converged, stop_step, and per head (lists ordered by
    layer, head) hardmax_rank, numerical_rank, hardmax_rank_targets.
    """
    data = task_data(task, n, data_seed, recipe)
    rows = []
    for d_qk in d_qks:
        for model_seed in model_seeds:
            model, status = _train_one_loop(task, data, d_qk, model_seed, recipe)
            scores = train.evaluate(model, data.test_x, data.test_y)
            rows.append({"d_qk": int(d_qk), "model_seed": int(model_seed), "test_loss": scores["loss"],
                         "test_accuracy": scores["accuracy"], **status, **head_ranks(model, data)})
    return rows


def cell_point(task: str, n: int, d_qks: list, n_seeds: int, recipe: dict, seed: int) -> list[dict]:
    """The sweep point: the models of one (task, n) cell for the widths `d_qks`, model seeds seed .. seed + n_seeds - 1."""
    return train_models(task, n, list(d_qks), [seed + i for i in range(n_seeds)], seed, Recipe(**recipe))
