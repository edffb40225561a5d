"""Chapter 5: the head-dimension phase diagram. How small can the query/key width d_qk of a trained head be at
sequence length n, on tasks whose attention need is known?

    result = analyse(P)          # P: the validated parameters of the notebook
    result.models                # one row per trained model: task, n, d_qk, model_seed, accuracy, converged, ranks
    result.cells                 # one row per (task, n): best accuracy, quality bar, saturation d_qk with intervals
    result.fits[task]            # scaling.BootstrapForms of the saturation d_qk against n (or None)
    result.verdicts[task]        # which answer of the literature the data support, as data and as a sentence

**Models.** Every model of a task has the same architecture (TASK_SPECS: layers, positions, learning rate);
only the query/key width d_qk varies, the value width stays fixed (`d_value`). Models are trained until their
validation loss stops improving (`converged`: none of the last `patience` evaluations beat the best earlier
one by more than `tolerance`, relative) or until `steps`; a model that did not converge is excluded.

**Search.** For each (task, n) the d_qk grid is searched coarse to fine (`helpers.gridsearch`): powers of two
first, then the grid points between the two that bracket the smallest d_qk reaching LEVEL (95 %) of the best
seed-mean accuracy. All models of a (task, n) share one dataset (from the base seed); model seeds
SEED, SEED + 1, ... set the initial weights and the batch order.

**Trainer.** `train_models` is the one place that trains; its rows are what everything else reads.
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import data as datasets, gridsearch, scaling, seeding
from . import run_sweep
from .ch05_training import TASK_SPECS, TASKS, Recipe, cell_point, stack_buckets  # noqa: F401 (TASKS for the notebook)

EXPERIMENT = "phase_diagram"
GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
LEVEL = gridsearch.LEVEL
CEILING = 1 - 1 / math.e
BOOTSTRAP = 1000
MIN_SEEDS = 3


# ---- the coarse-to-fine phase diagram ----

def seed_means(models_frame: pd.DataFrame, value: str = "test_accuracy", min_seeds: int = MIN_SEEDS) -> dict:
    """{(task, n): {d_qk: mean of `value` over the converged seeds}}, for widths with at least `min_seeds` of them."""
    kept = models_frame[models_frame.converged]
    stats = kept.groupby(["task", "n", "d_qk"])[value].agg(["mean", "size"])
    out: dict = {}
    for (task, n, d_qk), row in stats.iterrows():
        if row["size"] >= min_seeds:
            out.setdefault((task, int(n)), {})[int(d_qk)] = float(row["mean"])
    return out


def next_points(grid, means: dict, trained: set, bar_met: bool | None) -> list:
    """The widths a cell trains next. First the largest width alone (can the task be learned at all?); a cell
    whose largest width misses the quality bar stops there (it would be excluded anyway); then the coarse
    points, then `gridsearch.refine` until the answer is resolved. `means`: {d_qk: seed-mean accuracy} of the
    widths with enough converged seeds; `trained`: every width trained so far (never trained twice)."""
    top = max(grid)
    if top not in trained:
        return [top]
    if not bar_met:
        return []
    missing = [d for d in gridsearch.coarse(grid) if d not in trained]
    return missing or [d for d in gridsearch.refine(grid, means, LEVEL) if d not in trained]


def phase_diagram(tasks, n_values, grid, n_seeds: int, seed: int, recipe: Recipe, progress: bool = True) -> pd.DataFrame:
    """Every model the search trains (see `next_points`), over all tasks and n; one row per model (train_models)."""
    cells = [(task, int(n)) for task in tasks for n in n_values]
    pending = {cell: [max(grid)] for cell in cells}
    frames = []
    while pending:
        configs = [{"task": task, "n": n, "d_qks": bucket, "n_seeds": n_seeds, "recipe": recipe.__dict__}
                   for (task, n), d_qks in pending.items() for bucket in stack_buckets(d_qks, n, recipe)]
        frames.append(run_sweep(EXPERIMENT, cell_point, configs, [seed], progress=progress))
        frame = pd.concat(frames, ignore_index=True)
        means = seed_means(frame, min_seeds=min(MIN_SEEDS, n_seeds))
        trained = {cell: set(part.d_qk.astype(int)) for cell, part in frame.groupby(["task", "n"])}
        bars = {cell: cell_rule(part, TASK_SPECS[cell[0]].bar, min(MIN_SEEDS, n_seeds)).usable
                for cell, part in frame.groupby(["task", "n"])}
        pending = {cell: more for cell in cells
                   if (more := next_points(grid, means.get(cell, {}), trained.get(cell, set()), bars.get(cell)))}
    frame = pd.concat(frames, ignore_index=True).drop(columns=["d_qks", "recipe", "n_seeds"])
    return frame.rename(columns={"seed": "data_seed"}).sort_values(["task", "n", "d_qk", "model_seed"],
                                                                   ignore_index=True)


def add_head_summaries(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model: mean and largest head of each rank list, and rank / n."""
    out = frame.copy()
    for col in ("hardmax_rank", "numerical_rank", "hardmax_rank_targets"):
        out[f"{col}_mean"] = out[col].map(lambda v: float(np.mean(v)))
        out[f"{col}_max"] = out[col].map(lambda v: float(np.max(v)))
    out["hardmax_over_n"] = out.hardmax_rank_mean / out.n
    out["numerical_over_n"] = out.numerical_rank_mean / out.n
    return out


# ---- from models to cells, fits and verdicts ----

def seed_table(cell_models: pd.DataFrame, value: str) -> pd.DataFrame:
    """`value` of one cell's converged models as a (d_qk x model_seed) table, NaN where a model is missing."""
    kept = cell_models[cell_models.converged]
    return kept.pivot_table(index="d_qk", columns="model_seed", values=value, aggfunc="mean").sort_index()


def usable_points(table: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """The rows (d_qk) of a seed table with at least `min_seeds` converged models."""
    return table[table.notna().sum(axis=1) >= min_seeds]


def saturation_of(table: pd.DataFrame) -> float:
    """The smallest d_qk whose seed mean reaches LEVEL of the best seed mean (the chapter's one definition)."""
    means = table.mean(axis=1, skipna=True)
    return gridsearch.smallest_reaching(dict(zip(means.index.astype(int), means.to_numpy())), LEVEL)


def bootstrap_saturation(table: pd.DataFrame, replicates: int, seed: int) -> np.ndarray:
    """Saturation d_qk of `replicates` resamples of the model seeds (drawn with replacement, jointly for every
    d_qk of the cell): `(replicates,)`."""
    gen = np.random.default_rng(seed)
    values = table.to_numpy(dtype=float)                           # (d_qk, seeds)
    picks = gen.integers(0, values.shape[1], size=(replicates, values.shape[1]))
    out = np.empty(replicates)
    for b, pick in enumerate(picks):
        means = np.nanmean(values[:, pick], axis=1)
        out[b] = gridsearch.smallest_reaching(dict(zip(table.index.astype(int), means)), LEVEL)
    return out


@dataclass
class CellRule:
    """The quality rule of one cell: which models count, and whether the cell can be used."""

    usable: bool
    reason: str            # "" when usable
    top_d_qk: int
    top_accuracy: float    # seed mean at the largest trained d_qk
    top_passing: int       # models at the largest d_qk that converged and reached the bar
    top_models: int


def cell_rule(cell_models: pd.DataFrame, bar: float, min_seeds: int = MIN_SEEDS) -> CellRule:
    """A cell is usable when every model at its largest trained d_qk converged and reached `bar`, and there are
    at least `min_seeds` of them."""
    top = int(cell_models.d_qk.max())
    at_top = cell_models[cell_models.d_qk == top]
    passing = int((at_top.converged & (at_top.test_accuracy >= bar)).sum())
    accuracy = float(at_top.test_accuracy.mean())
    if len(at_top) < min_seeds:
        reason = f"only {len(at_top)} seed(s) at d_qk = {top} (at least {min_seeds} needed)"
    elif passing < len(at_top):
        reason = (f"{len(at_top) - passing} of {len(at_top)} models at d_qk = {top} did not converge to "
                  f"accuracy >= {bar:g} (seed mean {accuracy:.3f})")
    else:
        reason = ""
    return CellRule(reason == "", reason, top, accuracy, passing, len(at_top))


def cell_table(frame: pd.DataFrame, replicates: int = BOOTSTRAP, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """One row per (task, n): the quality rule, the saturation d_qk of accuracy (with a bootstrap interval over
    seeds), of the hardmax and numerical rank (head mean), and the solving pattern's hardmax rank.

    Also returns {(task, n): bootstrap replicates of the accuracy saturation} for the fits.
    """
    rows, boots = [], {}
    for (task, n), part in frame.groupby(["task", "n"]):
        spec = TASK_SPECS[task]
        rule = cell_rule(part, spec.bar)
        acc = usable_points(seed_table(part, "test_accuracy"))
        row = {"task": task, "n": int(n), "usable": rule.usable, "reason": rule.reason, "bar": spec.bar,
               "top_d_qk": rule.top_d_qk, "top_accuracy": rule.top_accuracy, "top_passing": rule.top_passing,
               "top_models": rule.top_models, "models": len(part), "converged": int(part.converged.sum()),
               "d_qk_trained": sorted(part.d_qk.unique().tolist()),
               "pattern_hardmax_rank": datasets.pattern_hardmax_rank(task, int(n), **spec.options)}
        row["d_star"] = saturation_of(acc) if len(acc) else float("nan")
        if rule.usable and len(acc):
            reps = bootstrap_saturation(acc, replicates, seeding.derive_seed(seed, "bootstrap", task, int(n)))
            boots[(task, int(n))] = reps
            row["d_star_low"], row["d_star_high"] = (float(np.quantile(reps, q)) for q in (0.025, 0.975))
        else:
            row["d_star_low"] = row["d_star_high"] = float("nan")
        for measure in ("hardmax_rank_mean", "numerical_rank_mean"):
            table = usable_points(seed_table(part, measure))
            row[f"d_star_{measure.removesuffix('_mean')}"] = saturation_of(table) if len(table) else float("nan")
            row[f"{measure.removesuffix('_mean')}_at_top"] = float(table.iloc[-1].mean()) if len(table) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows), boots


@dataclass
class Verdict:
    """Which literature answer the data support for one task: `answer` is one of ANSWERS."""

    task: str
    answer: str
    sentence: str
    usable_n: list
    best: str | None = None
    indistinguishable: tuple = ()


ANSWERS = ("log", "linear", "sqrt", "full", "untestable")
LITERATURE = {
    "log": "O(log n), as Likhosherstov et al. (2021) and Sanford et al. (2023) show suffices for sparse patterns",
    "linear": "d_h of order n, the low-rank bottleneck of Bhojanapalli et al. (2020)",
    "sqrt": "growth like sqrt(n): faster than O(log n), slower than the d_h ~ n of Bhojanapalli et al. (2020)",
    "full": "the full-rank head (d_qk = d_model) at every n, as Amsel et al. (2024) find for nearest-neighbour-like targets",
}


def _interval_text(low: float, high: float, digits: int = 2) -> str:
    return f"95 % interval {low:.{digits}g} to {high:.{digits}g}"


def task_verdict(task: str, cells: pd.DataFrame, fit: scaling.BootstrapForms | None, n_seeds: int,
                 grid_top: int, d_model: int) -> Verdict:
    """The verdict for one task from its cells and its fit (None when there are too few usable cells)."""
    part = cells[(cells.task == task)]
    usable = part[part.usable & part.d_star.notna()]
    usable_n = sorted(usable.n.tolist())
    prefix = f"`{task}`: untestable at this budget: "
    if n_seeds < MIN_SEEDS:
        return Verdict(task, "untestable", prefix + f"{n_seeds} seed(s) per model, at least {MIN_SEEDS} needed.",
                       usable_n)
    if len(usable) < scaling.MIN_POINTS or fit is None:
        return Verdict(task, "untestable", prefix + f"only {len(usable)} of {len(part)} sequence lengths meet the "
                       f"quality bar (at least {scaling.MIN_POINTS} needed for a fit).", usable_n)
    if grid_top >= d_model and (usable.d_star >= grid_top).all():
        return Verdict(task, "full", f"`{task}`: every usable n needs the largest d_qk = {grid_top} = d_model; "
                       f"this supports {LITERATURE['full']}.", usable_n, fit.best, fit.indistinguishable)
    growth = scaling.growth_class(fit.indistinguishable)
    best = fit.point[fit.best]
    coef = ", ".join(f"{k} = {v:.3g} ({_interval_text(*fit.coefficient_ci[fit.best][k])})"
                     for k, v in best.coefficients.items())
    others = [f for f in fit.indistinguishable if f != fit.best]
    head = f"`{task}`: the best fit is {scaling.FORM_LABELS[fit.best]} ({coef})"
    tied = (f"; the data cannot tell it apart from {scaling.describe_forms(others)}" if others
            else "; every other form fits worse in at least 97.5 % of the bootstrap resamples")
    if growth == "mixed":
        return Verdict(task, "untestable", head + tied + ", which include both a logarithmic and a power law, so "
                       "the scaling is untestable at this budget.", usable_n, fit.best, fit.indistinguishable)
    flat = ""
    if growth == "log":
        low, high = fit.coefficient_ci[fit.best]["b"]
        if low <= 0 <= high:
            flat = (f" The slope b is not distinguishable from 0 (its interval reaches 0): the smallest width does not "
                    f"grow with n from {min(usable_n)} to {max(usable_n)}, which is within O(log n).")
    return Verdict(task, growth, head + tied + f". This supports {LITERATURE[growth]}." + flat, usable_n, fit.best,
                   fit.indistinguishable)


def fit_task(task: str, cells: pd.DataFrame, boots: dict) -> scaling.BootstrapForms | None:
    """Bootstrap fits of the saturation d_qk against n over the usable cells of a task (None if fewer than 3)."""
    usable = cells[(cells.task == task) & cells.usable & cells.d_star.notna()].sort_values("n")
    if len(usable) < scaling.MIN_POINTS:
        return None
    reps = np.stack([boots[(task, int(n))] for n in usable.n], axis=1)   # (B, cells)
    return scaling.bootstrap_forms(usable.n.to_numpy(), usable.d_star.to_numpy(), reps)


def heads_above_ceiling(frame: pd.DataFrame) -> pd.DataFrame:
    """Every head of a converged model whose hardmax or numerical rank exceeds CEILING n (one row per head)."""
    rows = []
    for model in frame[frame.converged].itertuples(index=False):
        for head, (hard, numerical) in enumerate(zip(model.hardmax_rank, model.numerical_rank)):
            if hard > CEILING * model.n or numerical > CEILING * model.n:
                rows.append({"task": model.task, "n": model.n, "d_qk": model.d_qk, "model_seed": model.model_seed,
                             "head": head, "hardmax_over_n": hard / model.n, "numerical_over_n": numerical / model.n})
    return pd.DataFrame(rows, columns=["task", "n", "d_qk", "model_seed", "head", "hardmax_over_n",
                                       "numerical_over_n"])


# ---- the chapter's analysis ----

@dataclass
class Result:
    """What chapter 5 computes: tidy frames, fits, verdicts and the numbers its prose quotes."""

    models: pd.DataFrame
    cells: pd.DataFrame
    fits: dict
    verdicts: dict
    above_ceiling: pd.DataFrame
    numbers: dict          # {glue name: (value, format)}
    recipe: Recipe


def recipe_from(P) -> Recipe:
    """The Recipe of the validated parameters P (D_MODEL, D_VALUE, STEPS, EVAL_EVERY, PATIENCE, TOLERANCE)."""
    return Recipe(d_model=P["D_MODEL"], d_value=P["D_VALUE"], steps=P["STEPS"], eval_every=P["EVAL_EVERY"],
                  patience=P["PATIENCE"], tolerance=P["TOLERANCE"])


def curve_text(cells: pd.DataFrame, task: str) -> str:
    """"n = 16: 4 (3 to 6); n = 32: ...": the accuracy saturation d_qk of the usable cells, with intervals."""
    part = cells[(cells.task == task) & cells.usable].sort_values("n")
    if part.empty:
        return "none"
    return "; ".join(f"n = {r.n}: {r.d_star:g} ({r.d_star_low:g} to {r.d_star_high:g})" for r in part.itertuples())


def exhaustive_count(cells: pd.DataFrame, grid) -> int:
    """Grid points an exhaustive search would have trained over the same cells (for the search's saving)."""
    return len(cells) * len(list(grid))


ANSWER_WORDS = {"log": "O(log n)", "linear": "d_qk ~ n", "sqrt": "d_qk ~ sqrt(n)", "full": "a full-rank head",
                "untestable": "untestable at this budget"}


def headline(verdicts: dict) -> str:
    """One sentence over every task's verdict, e.g. "copy supports O(log n); qsa is untestable at this budget"."""
    if not verdicts:
        return "No task was run."
    parts = []
    for task, verdict in verdicts.items():
        if verdict.answer == "untestable":
            parts.append(f"`{task}` is untestable at this budget")
        else:
            parts.append(f"`{task}` supports {ANSWER_WORDS[verdict.answer]}")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + " (details and intervals below)."


def numbers_for_prose(P, frame, cells, fits, verdicts, above) -> dict:
    """{glue name: (value, format)} for every number and verdict the chapter's prose quotes."""
    converged = frame[frame.converged]
    heads_total = int(sum(len(v) for v in converged.hardmax_rank))
    out = {
        "ch5_models": (len(frame), "d"),
        "ch5_converged": (int(frame.converged.sum()), "d"),
        "ch5_not_converged": (int((~frame.converged).sum()), "d"),
        "ch5_cells": (len(cells), "d"),
        "ch5_cells_usable": (int(cells.usable.sum()), "d"),
        "ch5_cells_excluded": (int((~cells.usable).sum()), "d"),
        "ch5_models_in_excluded": (int(cells.loc[~cells.usable, "models"].sum()), "d"),
        "ch5_points_trained": (int(frame.groupby(["task", "n", "d_qk"]).ngroups), "d"),
        "ch5_points_exhaustive": (exhaustive_count(cells, P["D_QK"]), "d"),
        "ch5_n_seeds": (P["N_SEEDS"], "d"),
        "ch5_steps": (P["STEPS"], "d"),
        "ch5_tolerance": (100 * P["TOLERANCE"], "g"),
        "ch5_patience": (P["PATIENCE"], "d"),
        "ch5_eval_every": (P["EVAL_EVERY"], "d"),
        "ch5_d_model": (P["D_MODEL"], "d"),
        "ch5_d_value": (P["D_VALUE"], "d"),
        "ch5_level": (100 * LEVEL, "g"),
        "ch5_ceiling": (CEILING, ".3f"),
        "ch5_heads_total": (heads_total, "d"),
        "ch5_heads_above": (len(above), "d"),
        "ch5_heads_above_hardmax": (int((above.hardmax_over_n > CEILING).sum()), "d"),
        "ch5_heads_above_numerical": (int((above.numerical_over_n > CEILING).sum()), "d"),
        "ch5_max_hardmax_over_n": (float((converged.hardmax_rank_max / converged.n).max()), ".2f"),
        "ch5_max_numerical_over_n": (float((converged.numerical_rank_max / converged.n).max()), ".2f"),
        "ch5_stop_step_median": (float(converged.stop_step.median()) if len(converged) else math.nan, ".0f"),
        "ch5_stop_step_max": (int(converged.stop_step.max()) if len(converged) else 0, "d"),
        "ch5_n_max": (max(P["N_VALUES"]), "d"),
        "ch5_headline": (headline(verdicts), ""),
    }
    for task, verdict in verdicts.items():
        part = cells[cells.task == task]
        out[f"ch5_{task}_verdict"] = (verdict.sentence, "")
        out[f"ch5_{task}_answer"] = (verdict.answer, "")
        out[f"ch5_{task}_curve"] = (curve_text(cells, task), "")
        out[f"ch5_{task}_bar"] = (TASK_SPECS[task].bar, "g")
        out[f"ch5_{task}_usable"] = (int(part.usable.sum()), "d")
        out[f"ch5_{task}_cells"] = (len(part), "d")
        out[f"ch5_{task}_excluded_reasons"] = ("; ".join(f"n = {r.n}: {r.reason}" for r in part.itertuples()
                                                        if not r.usable) or "none", "")
        out[f"ch5_{task}_top_accuracy_min"] = (float(part.top_accuracy.min()), ".3f")
        out[f"ch5_{task}_pattern_rank_max_n"] = (int(part.pattern_hardmax_rank.iloc[-1]), "d")
        out[f"ch5_{task}_hardmax_top_max_n"] = (float(part.hardmax_rank_at_top.iloc[-1]), ".1f")
        out[f"ch5_{task}_n_max"] = (int(part.n.max()), "d")
    return out


def analyse(P, progress: bool = True) -> Result:
    """Train the phase diagram of P (TASKS, N_VALUES, D_QK, N_SEEDS, SEED and the recipe) and judge it."""
    recipe = recipe_from(P)
    frame = phase_diagram(P["TASKS"], P["N_VALUES"], P["D_QK"], P["N_SEEDS"], P["SEED"], recipe, progress=progress)
    return judge(P, frame, recipe)


def judge(P, frame: pd.DataFrame, recipe: Recipe | None = None, replicates: int = BOOTSTRAP) -> Result:
    """Cells, fits, verdicts and prose numbers from the per-model rows of a phase diagram (see `train_models`)."""
    frame = add_head_summaries(frame)
    cells, boots = cell_table(frame, replicates=replicates, seed=P["SEED"])
    fits = {task: fit_task(task, cells, boots) for task in P["TASKS"]}
    verdicts = {task: task_verdict(task, cells, fits[task], P["N_SEEDS"], max(P["D_QK"]), P["D_MODEL"])
                for task in P["TASKS"]}
    above = heads_above_ceiling(frame)
    numbers = numbers_for_prose(P, frame, cells, fits, verdicts, above)
    return Result(frame, cells, fits, verdicts, above, numbers, recipe or recipe_from(P))


def fits_table(result: Result) -> pd.DataFrame:
    """One row per (task, form): coefficients with intervals, loss with interval, best / indistinguishable."""
    rows = []
    for task, fit in result.fits.items():
        if fit is None:
            continue
        for form in scaling.FORMS:
            point = fit.point[form]
            row = {"task": task, "form": scaling.FORM_LABELS[form], "loss": point.loss,
                   "loss_low": fit.loss_ci[form][0], "loss_high": fit.loss_ci[form][1],
                   "best": form == fit.best, "indistinguishable": form in fit.indistinguishable}
            for name, value in point.coefficients.items():
                row[name] = value
                row[f"{name}_low"], row[f"{name}_high"] = fit.coefficient_ci[form][name]
            rows.append(row)
    return pd.DataFrame(rows)


def record(result: Result, rec) -> None:
    """Record the per-model rows, cells, fits and verdicts in the metrics file and glue every prose number."""
    model_columns = ["task", "n", "d_qk", "model_seed", "data_seed", "test_loss", "test_accuracy", "converged",
                     "stop_step", "hardmax_rank", "numerical_rank", "hardmax_rank_targets"]
    rec.record("models", result.models[model_columns].to_dict(orient="records"))
    rec.record("cells", result.cells.to_dict(orient="records"))
    rec.record("fits", fits_table(result).to_dict(orient="records"))
    rec.record("verdicts", {t: {"answer": v.answer, "sentence": v.sentence, "usable_n": v.usable_n, "best": v.best,
                                "indistinguishable": list(v.indistinguishable)} for t, v in result.verdicts.items()})
    rec.record("above_ceiling", result.above_ceiling.to_dict(orient="records"))
    rec.record("recipe", result.recipe.__dict__)
    for name, (value, fmt) in result.numbers.items():
        rec.glue(name, value, fmt)
