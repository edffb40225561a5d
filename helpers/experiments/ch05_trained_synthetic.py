"""Chapter 5: small transformers trained on synthetic tasks; attention rank at init, during and after training.

One grid point trains one model and returns its tidy history (plain numbers):

    rows = train_point(task="copy", n=64, d_head=8, d_model=32, n_heads=2, n_layers=1, steps=250, seed=0)
    # [{"step", "metric", "value", "layer", "head"}, ...]; layer = head = -1 for model-wide metrics

Metrics: "test_loss", "test_accuracy", "train_loss", "lr" (from `helpers.train.train`), "rank_<measure>" per
layer and head for every measure in RANK_MEASURES (each the mean over RANK_EXAMPLES test sequences, read at
step 0 = initialization, every steps / RANK_CHECKS steps, and at the end), and at step 0 two reference levels:
"chance_loss" (log of the vocabulary size: a uniform guess) and "baseline_accuracy" (the best predictor that
sees only the output position: the most frequent training target at each position, scored on the test set).

Each task trains with the recipe in TASK_RECIPES (positional encoding and learning rate). They were chosen
so the task is learnable within the CPU budget: a model with RoPE learns "copy" (a relative shift) quickly;
"sorting" and "reversal" need absolute positions (sinusoidal). Every model has an MLP of width 2 d_model,
pre-LayerNorm and residual connections. The batch holds about TOKENS_PER_STEP tokens (at least MIN_BATCH
sequences), so long sequences are not more expensive per step than short ones by a factor n.

All randomness (data, initial weights, batch order) comes from `seed`. Sweeps go through `run_sweep` under
one experiment name, so a configuration shared by the d_h sweep and the ablations is trained once.
"""

import math

import numpy as np
import pandas as pd
import torch

from .. import data as datasets
from .. import models, rank, seeding, train
from . import grid, run_sweep

EXPERIMENT = "trained_synthetic"
RANK_MEASURES = ("hardmax", "numerical", "effective")
RANK_RTOL = rank.DEFAULT_RTOL  # numerical rank: sigma_i > 1e-3 sigma_1 (the book's headline tolerance)
RANK_EXAMPLES = 8  # test sequences whose attention ranks are averaged per head
RANK_CHECKS = 4  # rank and test metrics at 0, steps/4, ..., steps
TOKENS_PER_STEP = 1024
MIN_BATCH = 8
N_TRAIN, N_TEST = 2048, 128
SATURATION_FRACTION = 0.95
LEARNED_MARGIN = 0.05  # accuracy above the position-only baseline needed to call a task "learned"

TASK_RECIPES = {
    "copy": {"pos": "rope", "lr": 1e-2},
    "reversal": {"pos": "sinusoidal", "lr": 1e-2},
    "sorting": {"pos": "sinusoidal", "lr": 3e-3},
    "high_rank": {"pos": "learned", "lr": 3e-2},
    "recall": {"pos": "sinusoidal", "lr": 3e-3},
}
TASKS = tuple(TASK_RECIPES)


def batch_size_for(n: int) -> int:
    """Sequences per step: about TOKENS_PER_STEP tokens, at least MIN_BATCH sequences."""
    return max(MIN_BATCH, TOKENS_PER_STEP // n)


def needs_even_d_head(task: str) -> bool:
    """RoPE rotates pairs of coordinates, so its head dimension must be even."""
    return TASK_RECIPES[task]["pos"] == "rope"


def position_baseline(data: datasets.TaskData) -> float:
    """Test accuracy of predicting, at each position, the most frequent training target there."""
    y, ty = data.train_y, data.test_y  # (N, n) with IGNORE where nothing is predicted
    vocab = data.vocab_size
    counts = torch.zeros(y.shape[1], vocab + 1, dtype=torch.int64)
    counts.scatter_add_(1, torch.where(y == datasets.IGNORE, vocab, y).T.contiguous(), torch.ones_like(y.T))
    guess = counts[:, :vocab].argmax(-1)  # (n,)
    counted = ty != datasets.IGNORE
    return float(((ty == guess[None, :]) & counted).sum() / counted.sum().clamp_min(1))


def build(task: str, n: int, d_head: int, d_model: int, n_heads: int, n_layers: int, seed: int):
    """The data and the untrained model of one grid point."""
    if task not in TASK_RECIPES:
        raise ValueError(f"task must be one of {list(TASKS)}; got {task!r}")
    data = datasets.synthetic(task, n, seed=seeding.derive_seed(seed, "data"), n_train=N_TRAIN, n_test=N_TEST)
    model = models.build_model(d_model=d_model, n_heads=n_heads, d_head=d_head, n_layers=n_layers, d_mlp=2 * d_model,
                               pos=TASK_RECIPES[task]["pos"], seed=seeding.derive_seed(seed, "init"), device="cpu",
                               **data.model_fields())
    return data, model


def train_point(task: str, n: int, d_head: int, d_model: int, n_heads: int, n_layers: int, steps: int,
                seed: int) -> list[dict]:
    """Train one model; its history as a list of plain row dicts (see the module doc)."""
    data, model = build(task, n, d_head, d_model, n_heads, n_layers, seed)
    every = max(1, steps // RANK_CHECKS)
    history = train.train(model, data, steps=steps, batch_size=batch_size_for(n), lr=TASK_RECIPES[task]["lr"],
                          eval_every=every, rank_every=every, rank_measures=RANK_MEASURES,
                          rank_examples=RANK_EXAMPLES, rank_rtol=RANK_RTOL, seed=seeding.derive_seed(seed, "train"),
                          device="cpu", progress=False)
    history = history[history.metric != "lr"]
    rows = [{"step": int(s), "metric": str(m), "value": float(v),
             "layer": -1 if pd.isna(layer) else int(layer), "head": -1 if pd.isna(head) else int(head)}
            for s, m, v, layer, head in history.itertuples(index=False, name=None)]
    rows.append({"step": 0, "metric": "chance_loss", "value": math.log(data.vocab_size), "layer": -1, "head": -1})
    rows.append({"step": 0, "metric": "baseline_accuracy", "value": position_baseline(data), "layer": -1, "head": -1})
    return rows


CONFIG_KEYS = ("task", "n", "d_head", "d_model", "n_heads", "n_layers", "steps")


def sweep(configs: list[dict], seeds, progress: bool = True) -> pd.DataFrame:
    """Every config x seed through the result store; one tidy row per history entry."""
    return run_sweep(EXPERIMENT, train_point, configs, list(seeds), progress=progress)


def dh_configs(tasks, n_values, d_heads, d_model: int, n_heads: int, n_layers: int, steps: int) -> list[dict]:
    """The d_h sweep: every task x n x d_h at a fixed width, number of heads and depth."""
    return grid(task=list(tasks), n=list(n_values), d_head=list(d_heads), d_model=[d_model], n_heads=[n_heads],
                n_layers=[n_layers], steps=[steps])


def ablation_configs(tasks, n: int, d_head: int, base: dict, widths, heads, layers, steps: int) -> list[dict]:
    """Width, heads and depth varied one at a time around `base` (d_model, n_heads, n_layers) at fixed n, d_h.

    Each config carries `factor` (which knob varies) in the returned list only as a label for the caller;
    the config passed to the sweep has the CONFIG_KEYS alone.
    """
    out = []
    for factor, key, values in (("width", "d_model", widths), ("heads", "n_heads", heads),
                                ("layers", "n_layers", layers)):
        for task in tasks:
            for value in values:
                config = {"task": task, "n": n, "d_head": d_head, "d_model": base["d_model"],
                          "n_heads": base["n_heads"], "n_layers": base["n_layers"], "steps": steps}
                config[key] = value
                out.append({"factor": factor, **config})
    return out


def ablation_sweep(labelled: list[dict], seeds, progress: bool = True) -> pd.DataFrame:
    """Run the ablation configs (deduplicated) and attach the `factor` label to every row."""
    unique = list({tuple(c[k] for k in CONFIG_KEYS): {k: c[k] for k in CONFIG_KEYS} for c in labelled}.values())
    df = sweep(unique, seeds, progress)
    labels = pd.DataFrame(labelled)
    return labels.merge(df, on=list(CONFIG_KEYS), how="left")


# ---- summaries ----

def summarise(df: pd.DataFrame, keys=CONFIG_KEYS) -> pd.DataFrame:
    """One row per config and seed: rank at init and after training (mean over layers and heads, and the largest
    head) per measure, final test loss and accuracy, and the reference levels."""
    keys = [k for k in keys if k in df.columns] + ["seed"]
    last = df.groupby(keys).step.transform("max")
    rows = []
    ranks = df[df.metric.str.startswith("rank_")]
    for metric, part in ranks.groupby("metric"):
        measure = metric.removeprefix("rank_")
        init = part[part.step == 0].groupby(keys).value
        end = part[part.step == last[part.index]].groupby(keys).value
        rows.append(pd.DataFrame({f"{measure}_init": init.mean(), f"{measure}_final": end.mean(),
                                  f"{measure}_final_max": end.max()}))
    final = df[(df.step == last) & df.metric.isin(["test_loss", "test_accuracy"])]
    first = df[(df.step == 0) & df.metric.isin(["test_loss", "chance_loss", "baseline_accuracy"])]
    rows.append(final.pivot_table(index=keys, columns="metric", values="value"))
    rows.append(first.pivot_table(index=keys, columns="metric", values="value").rename(
        columns={"test_loss": "init_loss"}))
    out = pd.concat(rows, axis=1).reset_index()
    for measure in RANK_MEASURES:
        out[f"{measure}_change"] = (out[f"{measure}_final"] - out[f"{measure}_init"]) / out["n"]
    return out


def spread(summary: pd.DataFrame, value: str, by) -> pd.DataFrame:
    """Mean, standard deviation, min and max over seeds of one summary column."""
    stats = summary.groupby(list(by))[value].agg(["mean", "std", "min", "max", "count"]).reset_index()
    stats["std"] = stats["std"].fillna(0.0)
    return stats


def saturation_d_head(d_heads, values, fraction: float = SATURATION_FRACTION, floor: float = 0.0) -> float:
    """The smallest swept d_h whose value reaches `floor + fraction * (max - floor)`; NaN when max <= floor.

    `values[i]` belongs to `d_heads[i]` (sorted here). For a rank, floor = 0; for accuracy, floor is the
    position-only baseline, so saturation means 95% of the gain over that baseline.
    """
    order = np.argsort(np.asarray(d_heads))
    d = np.asarray(d_heads)[order]
    v = np.asarray(values, dtype=float)[order]
    top = np.nanmax(v)
    if not top > floor:
        return float("nan")
    reached = np.nonzero(v >= floor + fraction * (top - floor))[0]
    return float(d[reached[0]])


def saturation_table(summary: pd.DataFrame, measure: str = "numerical") -> pd.DataFrame:
    """Per task and n: the saturation d_h of the trained rank (`measure`) and of the test accuracy, and log2 n.

    The seed-mean is used at each d_h. `learned` says whether the best accuracy beats the position-only
    baseline by LEARNED_MARGIN; without that the performance saturation is NaN (nothing to saturate).
    """
    rows = []
    for (task, n), part in summary.groupby(["task", "n"]):
        means = part.groupby("d_head")[[f"{measure}_final", "test_accuracy", "baseline_accuracy"]].mean()
        base = float(means.baseline_accuracy.mean())
        learned = bool(means.test_accuracy.max() >= base + LEARNED_MARGIN)
        rows.append({
            "task": task, "n": int(n), "log2_n": math.log2(n),
            "rank_saturation_d_head": saturation_d_head(means.index, means[f"{measure}_final"]),
            "accuracy_saturation_d_head": saturation_d_head(means.index, means.test_accuracy, floor=base)
            if learned else float("nan"),
            "learned": learned,
            "best_accuracy": float(means.test_accuracy.max()),
            "baseline_accuracy": base,
            "rank_over_n_at_largest_d_head": float(means[f"{measure}_final"].iloc[-1] / n),
        })
    return pd.DataFrame(rows)


def rank_trajectories(df: pd.DataFrame, keys=CONFIG_KEYS) -> pd.DataFrame:
    """Rank over training: one row per config, seed, step and measure, mean over layers and heads, and rank / n."""
    keys = [k for k in keys if k in df.columns] + ["seed"]
    ranks = df[df.metric.str.startswith("rank_")]
    out = ranks.groupby(keys + ["step", "metric"]).value.mean().reset_index()
    out["measure"] = out.metric.str.removeprefix("rank_")
    out["rank_over_n"] = out.value / out.n
    return out.drop(columns="metric")


def per_head_final(df: pd.DataFrame, keys=CONFIG_KEYS) -> pd.DataFrame:
    """Rank of every layer and head after training (mean over the probe sequences), with rank / n."""
    keys = [k for k in keys if k in df.columns] + ["seed"]
    ranks = df[df.metric.str.startswith("rank_")].copy()
    ranks = ranks[ranks.step == ranks.groupby(keys).step.transform("max")]
    ranks["measure"] = ranks.metric.str.removeprefix("rank_")
    ranks["rank_over_n"] = ranks.value / ranks.n
    return ranks.drop(columns="metric")
