"""Chapter 5's training: the models of one (task, n) cell for a list of query/key widths and seeds.

    rows = train_models("copy", 32, d_qks=[2, 8], model_seeds=[0, 1, 2], data_seed=0, spec=CellSpec())
    # one row per model: d_qk, model_seed, test_loss, test_accuracy, converged, stop_step, and per head (lists
    # ordered by layer, head): hardmax_rank, numerical_rank, hardmax_rank_targets, logit_scale, logit_half_range,
    # target_mass, target_mass_min
    rows = stack_point("copy", 32, spec.__dict__, data_seed=0, members=[{"d_qk": 2, "seed": 0}, ...])
    # the adaptive sweep's point: any (width, seed) pairs, rows with `seed` for the model seed
    rows = stack_point(..., ssmax_s=1.0)   # the same models with the scalable softmax (logits times s ln n)
    stack_buckets([1, 4, 8, 32], 256, spec), stack_size(256, spec)   # how a cell's models are cut into stacks

**Models.** Every model of a task has the same architecture (TASK_SPECS: layers, positions, learning rate);
only the query/key width d_qk varies, the value width stays fixed (`d_value`). A model trains until its
validation loss stops improving (`converged`: none of the last `patience` evaluations beat the best earlier
one by more than `tolerance`, relative) or until `steps`. All models of a (task, n) share one dataset (from
the data seed); the model seed sets the initial weights and the batch order.

This module holds only what a trained model's numbers depend on, so that the result store (which keys a
point by the code of its module) keeps the trained models when the chapter's analysis changes.
"""

import math
from dataclasses import dataclass, field

from .. import capture, data as datasets, margin, models, rank, seeding, training

RTOL = 1e-3          # numerical rank: sigma_i > 1e-3 sigma_1, the book's headline tolerance
PROBE_EXAMPLES = 8   # test inputs whose attention ranks are averaged per head


@dataclass(frozen=True)
class TaskSpec:
    """How a task is trained and judged: positions, layers, learning rate, data options, quality bar. (Its
    description in words is `ch05_trained_synthetic.TASK_WORDS`: prose kept here would retrain every model
    whenever a sentence changed, since the result store keys a model by this module's code.)"""

    pos: str
    n_layers: int
    lr: float
    bar: float
    options: dict = field(default_factory=dict)


TASK_SPECS = {
    "copy": TaskSpec("sinusoidal", 1, 3e-3, 0.99, {}),
    "qsa": TaskSpec("sinusoidal", 1, 3e-3, 0.99, {"q": 2, "n_values": 4}),
    "mq_recall": TaskSpec("none", 2, 3e-3, 0.99, {"n_values": 4}),
    "reversal": TaskSpec("sinusoidal", 1, 3e-3, 0.99, {}),
    # lr measured at n = 128, d_qk 32, 3 seeds: 3e-3 sat at chance until the stopping rule fired, 7e-3 solved it
    # (accuracy 0.998 to 1), 1e-2 left one seed at 0.978, 1.4e-2 and 2e-2 two or three below 0.99
    "high_rank": TaskSpec("learned", 1, 7e-3, 0.99, {}),
}
TASKS = tuple(TASK_SPECS)


@dataclass(frozen=True)
class CellSpec:
    """Everything shared by the models of a run besides task, n, d_qk and seeds: the model, the data and the
    budget; `recipe(task, n)` is the `helpers.training.Recipe` they train by."""

    d_model: int = 64
    d_value: int = 16
    steps: int = 3000             # the most steps a model may take
    eval_every: int = 50
    patience: int = 6
    tolerance: float = 0.005      # relative improvement of the validation loss that still counts
    loss_floor: float = 0.01      # nats per target: a model below it has solved its task (mean p(right) > 0.99)
    min_fraction: float = 0.5     # the relative rule may stop a model only after this share of `steps`: at n = 128
                                  # models sat 400+ steps on their initial plateau and were stopped there at chance

    @property
    def min_evals(self) -> int:
        """Validation checks before the relative rule may fire (see min_fraction)."""
        return int(self.min_fraction * self.steps) // self.eval_every
    tokens_per_step: int = 1024
    n_train: int = 4096
    n_val: int = 256
    n_test: int = 256

    def batch_size(self, n: int) -> int:
        """Sequences per step: about tokens_per_step tokens, at least 8 sequences."""
        return max(8, self.tokens_per_step // n)

    def recipe(self, task: str, n: int) -> training.Recipe:
        """How the models of a (task, n) cell train: the task's learning rate, cosine to a tenth of it, the
        stopping rule, the last n_val training examples held out for it."""
        return training.Recipe(steps=self.steps, batch_size=self.batch_size(n), lr=TASK_SPECS[task].lr,
                               final_lr_ratio=0.1, eval_every=self.eval_every, patience=self.patience,
                               min_improvement=self.tolerance, loss_floor=self.loss_floor, min_evals=self.min_evals,
                               val_examples=self.n_val)


def task_data(task: str, n: int, seed: int, spec: CellSpec) -> datasets.TaskData:
    """The (task, n) dataset shared by every model of the cell; its last n_val training examples validate."""
    return datasets.synthetic(task, n, seed=seeding.derive_seed(seed, "data"), n_train=spec.n_train + spec.n_val,
                              n_test=spec.n_test, **TASK_SPECS[task].options)


def logit_factor(n: int, d_qk: int, ssmax_s: float | None = None) -> float:
    """The factor on q.k: 1 / sqrt(d_qk), times s ln n with the scalable softmax (`ssmax_s` = s)."""
    return (1.0 if ssmax_s is None else ssmax_s * math.log(n)) / math.sqrt(d_qk)


def model_config(task: str, data: datasets.TaskData, d_qk: int, spec: CellSpec,
                 ssmax_s: float | None = None) -> models.ModelConfig:
    """The task's model with query/key width d_qk and value width spec.d_value (one head per layer); with
    `ssmax_s`, its logits are scaled by s ln n on top of 1 / sqrt(d_qk) (`logit_factor`)."""
    task_spec = TASK_SPECS[task]
    scale = None if ssmax_s is None else logit_factor(data.n, d_qk, ssmax_s)
    return models.ModelConfig(d_model=spec.d_model, n_heads=1, n_layers=task_spec.n_layers, d_mlp=2 * spec.d_model,
                              d_head=d_qk, d_value=spec.d_value, pos=task_spec.pos, scale=scale,
                              **data.model_fields())


def _train_stack(task, data, members: list[tuple[int, int]], spec, compact=True, ssmax_s=None):
    """Train one stack of (d_qk, model seed) members; returns (standalone models, status frame) in member order.
    compact=False keeps stopped models in the computation (for `benchmarks/bench_stack_compaction.py`)."""
    configs = [model_config(task, data, d, spec, ssmax_s) for d, _ in members]
    stack = training.ModelStack.build(configs, [seeding.derive_seed(s, "init") for _, s in members], device="cpu")
    order = [seeding.derive_seed(s, "order") for _, s in members]
    try:
        result = training.train(stack, data, spec.recipe(task, data.n), order, threads=1, compact=compact)
    except training.Diverged as error:  # the others trained on; the diverged ones are not converged
        result = error.result
    return stack.models(), result.status


def head_measures(model, data: datasets.TaskData) -> dict:
    """What every trained head does on PROBE_EXAMPLES test inputs; lists ordered by (layer, head).

    Ranks (mean over the inputs): hardmax and numerical (rtol 1e-3) rank; `hardmax_rank_targets` counts only the
    rows that carry a target (the rows of `datasets.solving_pattern`), comparable with the pattern's own hardmax
    rank. The margin law's inputs (`helpers.margin`), over the target rows of all the inputs: `logit_scale` (the
    largest |q.k| after the head's scale), `logit_half_range` (the smallest scale of a head with the same
    attention), and the mass on the solving pattern's keys, `target_mass` (mean) and `target_mass_min`.
    """
    x = data.test_x[:PROBE_EXAMPLES]
    probs = capture.attention_probs(model, x)                         # (layer, batch, head, n, n)
    logits = capture.attention_logits(model, x)                       # (layer, batch, head, n, n)
    targets = (data.test_y[0] != datasets.IGNORE).nonzero().flatten()
    hard = rank.hardmax_rank(probs).double().mean(dim=1)              # (layer, head)
    numerical = rank.numerical_rank(probs, rtol=RTOL).double().mean(dim=1)
    hard_targets = rank.hardmax_rank(probs[..., targets, :]).double().mean(dim=1)
    on_target = datasets.solving_pattern(data)[:PROBE_EXAMPLES] > 0    # (batch, n, n)
    law = {"logit_scale": [], "logit_half_range": [], "target_mass": [], "target_mass_min": []}
    for layer in range(probs.shape[0]):
        for head in range(probs.shape[2]):
            rows = logits[layer, :, head][:, targets]                 # (batch, target rows, n)
            law["logit_scale"].append(margin.logit_scale(rows))
            law["logit_half_range"].append(margin.logit_half_range(rows))
            mean, least = margin.target_mass(probs[layer, :, head][:, targets].flatten(0, 1),
                                             on_target[:, targets].flatten(0, 1))
            law["target_mass"].append(mean)
            law["target_mass_min"].append(least)
    return {"hardmax_rank": hard.flatten().tolist(), "numerical_rank": numerical.flatten().tolist(),
            "hardmax_rank_targets": hard_targets.flatten().tolist(), **law}


def _rows(trained, status, members, data) -> list[dict]:
    return [{"d_qk": int(d), "model_seed": int(s), "test_loss": float(st.test_loss),
             "test_accuracy": float(st.test_accuracy), "converged": bool(st.converged and not st.diverged),
             "diverged": bool(st.diverged), "stop_step": int(st.stop_step), **head_measures(model, data)}
            for (d, s), model, st in zip(members, trained, status.itertuples(index=False))]


def train_models(task: str, n: int, d_qks: list, model_seeds: list, data_seed: int, spec: CellSpec) -> list[dict]:
    """Train one model per (d_qk, model seed) of one (task, n) cell, as one stack; one row per model.

    Row: d_qk, model_seed, test_loss, test_accuracy, converged, diverged, stop_step, and per head (lists ordered
    by layer, head) the measures of `head_measures`.
    """
    data = task_data(task, n, data_seed, spec)
    members = [(d, s) for d in d_qks for s in model_seeds]
    trained, status = _train_stack(task, data, members, spec)
    return _rows(trained, status, members, data)


def stack_point(task: str, n: int, spec: dict, data_seed: int, members: list[dict], seed: int = 0,
                ssmax_s: float | None = None) -> list[dict]:
    """The adaptive sweep's point: the models `members` ([{"d_qk": width, "seed": model seed}, ...]) of one cell,
    trained as one stack on the cell's data (`data_seed`), with the scalable softmax when `ssmax_s` is given; rows
    as `train_models`, the model seed as `seed`."""
    cell = CellSpec(**spec)
    data = task_data(task, n, data_seed, cell)
    pairs = [(int(m["d_qk"]), int(m["seed"])) for m in members]
    trained, status = _train_stack(task, data, pairs, cell, ssmax_s=ssmax_s)
    return [{**{k: v for k, v in row.items() if k != "model_seed"}, "seed": row["model_seed"]}
            for row in _rows(trained, status, pairs, data)]


def _shape(spec: CellSpec) -> models.ModelConfig:
    """A cell's model as far as the cost of its stacks goes (one head per layer; the width does not matter)."""
    return models.ModelConfig(d_model=spec.d_model, n_heads=1, d_head=1, d_value=spec.d_value,
                              d_mlp=2 * spec.d_model, vocab_size=2)


def stack_buckets(d_qks, n: int, spec: CellSpec) -> list[list[int]]:
    """The widths of a cell grouped into stacks that waste at most 25 % of their work on padding
    (`helpers.training.bucket_head_dims`)."""
    return training.bucket_head_dims(list(d_qks), training.qk_work_offset(_shape(spec), n))


def stack_size(n: int, spec: CellSpec) -> int:
    """The most models of one stack at sequence length n: 3 at n = 256 and 12 at n = 128 in full mode
    (`helpers.training.stack_limit`)."""
    return training.stack_limit(_shape(spec), n, spec.batch_size(n))
