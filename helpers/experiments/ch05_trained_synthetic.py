"""Chapter 5: the head-dimension phase diagram. How small can the query/key width d_qk of a trained head be at
sequence length n, on tasks whose attention need is known?

    result = analyse(P)                  # P: the validated parameters of the notebook
    result.data["models"]                # one row per trained model: task, n, d_qk, model_seed, accuracy, ranks, ...
    result.data["cells"]                 # one row per (task, n): quality bar, saturation d_qk with intervals
    result.data["fits"][task]            # scaling.BootstrapForms of the saturation d_qk against n (or None)
    result.verdicts["ch5_<task>_verdict"]  # which answer of the literature the data support (robust or untestable)
    result.verdicts["ch5_<task>_heldout"]  # which growth forms predict the largest n from the others (ch05_heldout)
    result.verdicts["ch5_ssmax_<task>"]    # narrower heads with the scalable softmax? (ch05_ssmax)
    result.data["bridge"]                # the margin law of chapter 03c beside every usable cell (ch05_bridge)

**Models.** Every model of a task has the same architecture (TASK_SPECS: layers, positions, learning rate);
only the query/key width d_qk varies, the value width stays fixed (`d_value`). Models are trained until their
validation loss stops improving (`converged`: stopped by the rule: none of the last `patience` evaluations beat the
best earlier one by more than `tolerance`, relative) or until `steps` (the step cap). **Every model counts by its own
test accuracy**, whether its rule stopped it or it ran to the cap: dropping the capped ones would shape the smallest
widths by the step cap. The counts of both kinds are recorded.

**Search** (`helpers.design`, run by `helpers.experiments.adaptive`, the engine chapter 06 uses too). For
each (task, n) both ends of the d_qk grid are trained first (the saturation rule's baseline and reference), a cell
whose largest width misses the quality bar stops there, then one width per step by bisection until the saturation
point, by the book's rule for trained models (`saturation.RISE`: LEVEL = 95 % of the rise of the seed-mean accuracy
from the smallest to the largest width, read at trained widths), is resolved to the grid's spacing; where leaving one
seed out moves it, the widths it rests on get another seed, up to MAX_SEEDS. It is reported as the bracket of
trained widths around it. All models of a (task, n) share one dataset (from the base seed); model seeds SEED,
SEED + 1, ... set the initial weights and the batch order.

**Robustness.** Every task's growth verdict is recomputed with each seed left out and with each per-n smallest width
moved one grid step (`helpers.robust`); if any of these changes the answer, the task is untestable at this budget.

**Trainer.** `train_models` is the one place that trains; its rows are what everything else reads.
"""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import data as datasets, gridsearch, parameters, robust, saturation, scaling, seeding, training
from ..design import Design
from ..english import count_of, join, number, plural, span_short
from ..results import ChapterResult, Verdict
from . import run_sweep
from .adaptive import run_adaptive_sweep
from . import ch05_bridge as bridge
from . import ch05_heldout as heldout
from . import ch05_ssmax as ssmax
from .ch05_training import (TASK_SPECS, TASKS, CellSpec, stack_buckets, stack_point,  # noqa: F401 (TASKS: notebook)
                            stack_size)

EXPERIMENT = "phase_diagram"
LONG_TASKS = ("copy", "reversal")   # also trained at LONG_N_VALUES: the permutations that learn at every n
EXPERIMENT_FRESH = "ch5_fresh_seeds"
FRESH_SEED_OFFSET = 1000   # data and model seeds of the fresh-seed check: never used to choose a learning rate
GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
LEVEL = gridsearch.LEVEL
CEILING = 1 - 1 / math.e
BOOTSTRAP = 1000
MIN_SEEDS = 3


# ---- the coarse-to-fine phase diagram ----

def counted(models_frame: pd.DataFrame) -> pd.DataFrame:
    """The models that count: every one that trained to the end (stopped by its rule or by the step cap); only a
    model whose training diverged has no accuracy to count."""
    if "diverged" not in models_frame:
        return models_frame
    return models_frame[~models_frame.diverged.astype(bool)]


def design_scores(rows: pd.DataFrame) -> dict:
    """{"accuracy": {(d_qk, model seed): test accuracy}} of one cell's models (NaN for a diverged one): the score the
    search steers by, the same seed means as the analysis."""
    accuracy = rows.test_accuracy.astype(float).where(~rows.diverged.astype(bool))
    return {"accuracy": {(int(d), int(s)): a for d, s, a in zip(rows.d_qk, rows.seed, accuracy)}}


def phase_diagram(tasks, n_values, grid, n_seeds: int, seed: int, spec: CellSpec, progress: bool = True,
                  max_seeds: int | None = None, long_cells=(), ssmax_cells=(), ssmax_s: float | None = None
                  ) -> pd.DataFrame:
    """Every model the search trains (`helpers.design`: both ends, the quality bar, bisection, extra seeds up to
    `max_seeds`), over all tasks and n, and the further (task, n) cells of `long_cells`; one row per model
    (train_models), the model seed as `model_seed`.
    `ssmax_cells` [(task, n), ...] are searched again in the same sweep with the scalable softmax (s = `ssmax_s`,
    `ch05_training.logit_factor`); their rows carry `ssmax_s` (the others NaN): see `split_arms`.

    The cells go out largest n first, so that a pool of workers ends together."""
    cells = [(task, int(n), None) for task in tasks for n in n_values]
    cells += [(task, int(n), None) for task, n in long_cells]
    cells += [(task, int(n), float(ssmax_s)) for task, n in ssmax_cells]
    cells.sort(key=lambda cell: -cell[1])
    settings = [{"task": task, "n": n, "spec": spec.__dict__, "data_seed": seed,
                 **({} if s is None else {"ssmax_s": s})} for task, n, s in cells]
    design = Design(tuple(grid), seeds=n_seeds, max_seeds=max(n_seeds, max_seeds or n_seeds), first_seed=seed)
    min_seeds = min(MIN_SEEDS, n_seeds)

    def worth_refining(rows):   # a cell whose largest width misses the bar would be excluded anyway
        return cell_rule(rows, TASK_SPECS[rows.task.iloc[0]].bar, min_seeds).usable

    frame = run_adaptive_sweep(EXPERIMENT, stack_point, settings, design, design_scores, keep_going=worth_refining,
                               axis="d_qk", buckets=lambda s, widths: stack_buckets(widths, s["n"], spec),
                               stack_size=lambda s: stack_size(s["n"], spec), progress=progress)
    frame = frame.drop(columns="spec").rename(columns={"seed": "model_seed"})
    return frame.sort_values(["task", "n", "d_qk", "model_seed"], ignore_index=True)


def split_arms(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(the standard models, the scalable-softmax models or None) of a `phase_diagram` frame."""
    if "ssmax_s" not in frame:
        return frame, None
    scaled = frame.ssmax_s.notna()
    return (frame[~scaled].drop(columns="ssmax_s").reset_index(drop=True),
            frame[scaled].drop(columns="ssmax_s").reset_index(drop=True))


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
    """`value` of one cell's models that count as a (d_qk x model_seed) table, NaN where a model is missing."""
    return counted(cell_models).pivot_table(index="d_qk", columns="model_seed", values=value,
                                            aggfunc="mean").sort_index()


def usable_points(table: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """The rows (d_qk) of a seed table with at least `min_seeds` models."""
    return table[table.notna().sum(axis=1) >= min_seeds]


RULE = {**saturation.RISE, "level": LEVEL}   # the book's one saturation rule for trained models


def saturation_of(table: pd.DataFrame) -> saturation.Saturation:
    """The saturation d_qk of the seed-mean curve of a seed table, by the book's rule (`saturation.RISE`)."""
    return saturation.saturation_point(table.index.to_numpy(float), table.mean(axis=1, skipna=True).to_numpy(), **RULE)


def bootstrap_saturation(table: pd.DataFrame, replicates: int, seed: int) -> np.ndarray:
    """Saturation d_qk of `replicates` resamples of the model seeds (`scaling.resample_models`: every model,
    drawn with replacement, jointly for every d_qk of the cell), each read at the widths where it has a model:
    `(replicates,)`."""
    widths = table.index.to_numpy(float)

    def statistic(curve):
        # a resample drawn only from extra seeds (trained at the widths an answer rests on, not at every width)
        # has no model at some widths: its curve is read at the widths it has
        have = np.isfinite(curve)
        return saturation.saturation_point(widths[have], curve[have], **RULE).value
    return scaling.resample_models([table.to_numpy(dtype=float)], statistic, replicates, seed)[:, 0]


def seed_saturations(table: pd.DataFrame) -> np.ndarray:
    """The saturation d_qk of the own accuracy curve of each seed (column) of a seed table with a model at every
    width (`saturation.own_points`): `(complete seeds,)`."""
    return saturation.own_points(table.index.to_numpy(float), table.to_numpy(float).T, **RULE)


@dataclass
class CellRule:
    """The quality rule of one cell: which models count, and whether the cell can be used."""

    usable: bool
    reason: str            # "" when usable
    top_d_qk: int
    top_accuracy: float    # seed mean at the largest trained d_qk
    top_passing: int       # models at the largest d_qk that reached the bar (stopped by the rule or at the cap)
    top_models: int


def cell_rule(cell_models: pd.DataFrame, bar: float, min_seeds: int = MIN_SEEDS) -> CellRule:
    """A cell is usable when every model at its largest trained d_qk reached `bar` (whether its stopping rule or
    the step cap ended it; a diverged model does not), and there are at least `min_seeds` of them."""
    top = int(cell_models.d_qk.max())
    at_top = cell_models[cell_models.d_qk == top]
    kept = counted(at_top)
    passing = int((kept.test_accuracy >= bar).sum())
    accuracy = float(kept.test_accuracy.mean()) if len(kept) else float("nan")
    if len(at_top) < min_seeds:
        reason = f"only {plural(len(at_top), 'seed')} at d_qk = {top} (at least {min_seeds} needed)"
    elif passing < len(at_top):
        reason = (f"{count_of(len(at_top) - passing, len(at_top), 'model')} at d_qk = {top} did not reach "
                  f"an accuracy of at least {number(bar)} (seed mean {number(accuracy)})")
    else:
        reason = ""
    return CellRule(reason == "", reason, top, accuracy, passing, len(at_top))


def cell_table(frame: pd.DataFrame, replicates: int = BOOTSTRAP, seed: int = 0,
               min_seeds: int = MIN_SEEDS) -> tuple[pd.DataFrame, dict]:
    """One row per (task, n): the quality rule, the saturation d_qk of accuracy (`d_star`, a trained width; the
    smallest width it can be, `d_star_lowest`, one above the trained width below it; `d_star_at_first` when the
    smallest width already saturates), its 95 % bootstrap interval over seeds as a bracket of trained widths
    (`d_star_low` is the smallest width the lower end can be), the saturation d_qk of the hardmax and numerical
    rank (head mean) by the same rule, and the solving pattern's hardmax rank.

    Also returns {(task, n): bootstrap replicates of the accuracy saturation} for the fits.
    """
    rows, boots = [], {}
    for (task, n), part in frame.groupby(["task", "n"]):
        spec = TASK_SPECS[task]
        rule = cell_rule(part, spec.bar, min_seeds)
        acc = usable_points(seed_table(part, "test_accuracy"), min_seeds)
        kept = counted(part)
        row = {"task": task, "n": int(n), "usable": rule.usable, "reason": rule.reason, "bar": spec.bar,
               "top_d_qk": rule.top_d_qk, "top_accuracy": rule.top_accuracy, "top_passing": rule.top_passing,
               "top_models": rule.top_models, "models": len(part), "converged": int(part.converged.sum()),
               "at_cap": int((~kept.converged.astype(bool)).sum()), "diverged": len(part) - len(kept),
               "seeds": int(part.model_seed.nunique()),
               "d_qk_trained": sorted(int(d) for d in part.d_qk.unique()),
               "pattern_hardmax_rank": datasets.pattern_hardmax_rank(task, int(n), **spec.options)}
        point = saturation_of(acc) if len(acc) else None
        grid = acc.index.to_numpy(float)
        row["d_star"] = point.value if point else float("nan")
        row["d_star_at_first"] = bool(point and point.status == saturation.AT_FIRST)
        row["d_star_lowest"] = saturation.lowest_possible(grid, row["d_star"]) if point else float("nan")
        if rule.usable and len(acc):
            reps = bootstrap_saturation(acc, replicates, seeding.derive_seed(seed, "bootstrap", task, int(n)))
            boots[(task, int(n))] = reps
            low, high = (float(np.quantile(reps, q, method=m)) for q, m in ((0.025, "lower"), (0.975, "higher")))
            row["d_star_low"], row["d_star_high"] = saturation.lowest_possible(grid, low), high
            # where the resamples' quantiles coincide, an interval would say more than the seeds can back (3
            # seeds agreeing leave up to 63 % of seeds free to differ): the book says how many give it alone
            row["spread"] = bool(high > low)
            own = seed_saturations(acc)
            row["seeds_at_d_star"], row["seed_count"] = int((own == row["d_star"]).sum()), len(own)
        else:
            row["d_star_low"] = row["d_star_high"] = float("nan")
            row["spread"], row["seeds_at_d_star"], row["seed_count"] = True, 0, 0   # undefined, as in saturation
        for measure in ("hardmax_rank_mean", "numerical_rank_mean"):
            table = usable_points(seed_table(part, measure), min_seeds)
            row[f"d_star_{measure.removesuffix('_mean')}"] = saturation_of(table).value if len(table) else float("nan")
            row[f"{measure.removesuffix('_mean')}_at_top"] = float(table.iloc[-1].mean()) if len(table) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows), boots


ANSWERS = ("log", "linear", "sqrt", "full", "untestable")
LITERATURE = {
    "log": "a width of order log n, which Likhosherstov et al. (2023) and Sanford et al. (2023) show suffices for "
           "sparse patterns",
    "linear": "a width of order n, the low-rank bottleneck of Bhojanapalli et al. (2020)",
    "sqrt": "growth like the square root of n: faster than log n, slower than the width of order n of "
            "Bhojanapalli et al. (2020)",
    "full": "the full-rank head (d_qk = d_model) at every n, as Amsel et al. (2024) find for nearest-neighbour-like "
            "targets",
}
FORM_WORDS = scaling.FORM_WORDS   # the notebook's figure labels read them here
VERDICT_RULE = (f"the smallest trained d_qk making {100 * LEVEL:g} % of the rise of the seed-mean accuracy from the "
                "smallest to the largest width (every model counted), over the n whose cell meets the quality bar, "
                "fitted against the forms of helpers.scaling with bootstrap intervals over models; at least "
                f"{MIN_SEEDS} seeds and {scaling.VERDICT_MIN_POINTS} usable n, else untestable; the answer is the growth "
                "class of the forms the data cannot tell from the best (log and power law together: untestable)")


def _forms_text(forms) -> str:
    return join([FORM_WORDS[f] for f in scaling.FORMS if f in forms])


def task_verdict(task: str, cells: pd.DataFrame, fit: scaling.BootstrapForms | None, n_seeds: int,
                 grid_top: int, d_model: int, min_seeds: int = MIN_SEEDS) -> Verdict:
    """The verdict for one task from its cells and its fit (None when there are too few usable cells).

    outcome: one of ANSWERS; evidence: usable_n, best form, indistinguishable forms, seeds. `min_seeds` is relaxed
    by one only by the robustness check (`robust_verdict`)."""
    part = cells[(cells.task == task)]
    usable = part[part.usable & part.d_star.notna()]
    usable_n = [int(n) for n in sorted(usable.n.tolist())]
    evidence = {"usable_n": usable_n, "cells": len(part), "n_seeds": n_seeds, "best": None, "indistinguishable": []}

    def verdict(answer, sentence, fitted=False):
        if fitted:
            evidence.update(best=fit.best, indistinguishable=list(fit.indistinguishable))
        return Verdict(answer, sentence, VERDICT_RULE, evidence)

    prefix = f"{task} is untestable at this budget: "
    if n_seeds < min_seeds:
        return verdict("untestable", prefix + f"{plural(n_seeds, 'seed')} per model, at least {min_seeds} needed.")
    if len(usable) < scaling.VERDICT_MIN_POINTS or fit is None:
        need = f"at least {scaling.VERDICT_MIN_POINTS} needed for a fit"
        if len(usable) == len(part):
            return verdict("untestable", prefix + f"only {plural(len(part), 'sequence length')} "
                           f"{'was' if len(part) == 1 else 'were'} run, and all meet the quality bar ({need}).")
        verb = "meets" if len(usable) == 1 else "meet"
        return verdict("untestable", prefix + f"{'only ' if len(usable) else ''}"
                       f"{count_of(len(usable), len(part), 'sequence length')} {verb} the quality bar ({need}).")
    if grid_top >= d_model and (usable.d_star >= grid_top).all():
        return verdict("full", f"{task} supports {LITERATURE['full']}: every usable n needs the largest d_qk, "
                               f"{grid_top} = d_model.", True)
    growth = scaling.growth_outcome(fit)
    others = [f for f in fit.indistinguishable if f != fit.best]
    # the coefficients and their intervals are in the fits table; the sentence keeps what the answer rests on
    fitted = f"the best fit is {FORM_WORDS[fit.best]}" + (
        f", and the data cannot tell it apart from {_forms_text(others)}" if others
        else ", and every other form fits worse in at least 97.5 % of the bootstrap resamples")
    if growth == "untestable":
        return verdict("untestable", f"{task} is untestable at this budget: {fitted}, which include both a "
                       "logarithm and a power law.", True)
    flat = ""
    if growth == "log" and scaling.slope_is_flat(fit):
        flat = (f" The slope b is not distinguishable from 0 (its interval reaches 0): the smallest width does "
                f"not grow with n from {min(usable_n)} to {max(usable_n)}, which is within order log n.")
    return verdict(growth, f"{task} supports {LITERATURE[growth]}: {fitted}." + flat, True)


def fit_task(task: str, cells: pd.DataFrame, boots: dict) -> scaling.BootstrapForms | None:
    """Bootstrap fits of the saturation d_qk against n over the usable cells of a task (None if fewer than 3)."""
    usable = cells[(cells.task == task) & cells.usable & cells.d_star.notna()].sort_values("n")
    if len(usable) < scaling.VERDICT_MIN_POINTS:
        return None
    reps = np.stack([boots[(task, int(n))] for n in usable.n], axis=1)   # (B, cells)
    return scaling.bootstrap_forms(usable.n.to_numpy(), usable.d_star.to_numpy(), reps)


def perturbations(task: str, frame: pd.DataFrame, cells: pd.DataFrame, boots: dict, P, replicates: int) -> list:
    """What a hostile referee tries first, as (kind, label, cells, boots, seeds, min_seeds): each model seed left out
    (kind "seed": the cells recomputed from the remaining seeds, the minimum number of seeds relaxed by one) and each
    usable n's smallest width moved to its lower and upper neighbour on the D_QK grid (kind "width", with its
    bootstrap replicates moved the same way)."""
    out = []
    models = frame[frame.task == task]
    n_seeds = int(models.model_seed.nunique())
    if n_seeds >= 2:
        for label, s in robust.leave_one_out(sorted(models.model_seed.unique())):
            sub_cells, sub_boots = cell_table(models[models.model_seed != s], replicates, P["SEED"], MIN_SEEDS - 1)
            out.append(("seed", label, sub_cells, sub_boots, n_seeds - 1, MIN_SEEDS - 1))
    usable = cells[(cells.task == task) & cells.usable & cells.d_star.notna()]
    points = {f"n = {int(r.n)}": r.d_star for r in usable.itertuples()}
    for label, moved in robust.grid_steps(points, P["D_QK"]):
        key = next(k for k in points if moved[k] != points[k])
        n = int(key.removeprefix("n = "))
        direction = 1 if moved[key] > points[key] else -1
        step_cells = cells.copy()
        step_cells.loc[(step_cells.task == task) & (step_cells.n == n), "d_star"] = moved[key]
        step_boots = {**boots, (task, n): np.array([robust.step(P["D_QK"], v, direction) for v in boots[(task, n)]])}
        out.append(("width", label, step_cells, step_boots, n_seeds, MIN_SEEDS))
    return out


def robust_verdict(task: str, verdict: Verdict, trials: list, P) -> Verdict:
    """`verdict` if it survives every one of the `trials` (`perturbations`); otherwise untestable, naming the
    perturbation that flips it (`helpers.robust`). A "full" verdict (every n needs the top of the grid: no growth
    law) is checked against the seeds left out only."""
    if verdict.outcome == "untestable":
        return verdict

    def decide(part_cells, part_boots, seeds, min_seeds):
        fit = fit_task(task, part_cells, part_boots)
        return task_verdict(task, part_cells, fit, seeds, max(P["D_QK"]), P["D_MODEL"], min_seeds).outcome

    perturbed = [(label, decide(c, b, seeds, least)) for kind, label, c, b, seeds, least in trials
                 if kind == "seed" or verdict.outcome != "full"]
    return robust.Robustness.of(verdict.outcome, perturbed).apply(verdict, subject=task, words=ANSWER_WORDS)


def heldout_verdict(task: str, cells: pd.DataFrame, boots: dict, trials: list) -> tuple[Verdict, pd.DataFrame]:
    """The held-out test of the growth forms for one task (`ch05_heldout`), robust to every one of the `trials`
    (`perturbations`); returns the verdict and the task's held-out table."""
    table = heldout.heldout_table(cells, boots, task)
    first = heldout.decide(table)
    verdict = Verdict(first, heldout.sentence(task, table), heldout.RULE,
                      {"rows": table.to_dict(orient="records")})
    if first == "untestable":
        return verdict, table
    perturbed = [(label, heldout.decide(heldout.heldout_table(c, b, task))) for _, label, c, b, _, _ in trials]
    return robust.Robustness.of(first, perturbed).apply(verdict, subject=task, words=heldout.OUTCOME_WORDS), table


def heads_above_ceiling(frame: pd.DataFrame) -> pd.DataFrame:
    """Every head of a model that counts (`counted`) whose hardmax or numerical rank exceeds CEILING n (one row per
    head)."""
    rows = []
    for model in counted(frame).itertuples(index=False):
        for head, (hard, numerical) in enumerate(zip(model.hardmax_rank, model.numerical_rank)):
            if hard > CEILING * model.n or numerical > CEILING * model.n:
                rows.append({"task": model.task, "n": model.n, "d_qk": model.d_qk, "model_seed": model.model_seed,
                             "head": head, "hardmax_over_n": hard / model.n, "numerical_over_n": numerical / model.n})
    return pd.DataFrame(rows, columns=["task", "n", "d_qk", "model_seed", "head", "hardmax_over_n",
                                       "numerical_over_n"])


# ---- the chapter's analysis ----

DEFAULTS = {"N_VALUES": ([8, 12, 16], [16, 32, 64, 128]), "LONG_N_VALUES": ([24], [256]), "SSMAX_N_VALUES": ([12, 16], [64, 128]), "D_QK": ([1, 2, 4, 8], [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]),
            "N_SEEDS": (3, 3), "MAX_SEEDS": (3, 5), "STEPS": (200, 2000), "EVAL_EVERY": (10, 50), "D_MODEL": (16, 32), "PATIENCE": (4, 6),
            "SCHEDULER": (None, "processes")}   # (quick, full); full mode trains one stack per core


def resolve(P):
    """Fill the mode defaults of the parameters left at None and check the constraints between parameters."""
    max_seeds_given = P.get("MAX_SEEDS") is not None
    P.fill_mode_defaults(DEFAULTS, keep_order=("D_QK",))   # a D_QK grid out of order is refused below
    if not max_seeds_given:
        P["MAX_SEEDS"] = max(P["MAX_SEEDS"], P["N_SEEDS"])   # more starting seeds than the default cap: no extra ones
    parameters.require(P["MAX_SEEDS"] >= P["N_SEEDS"], "MAX_SEEDS", P["MAX_SEEDS"],
                       f"an integer >= N_SEEDS ({P['N_SEEDS']}): the seeds every width starts with")
    parameters.require(P["D_QK"] == sorted(set(P["D_QK"])), "D_QK", P["D_QK"],
                       "increasing widths without repeats (the grid is searched in order)")
    parameters.require(max(P["D_QK"]) <= P["D_MODEL"], "D_QK", P["D_QK"],
                       f"widths up to D_MODEL = {P['D_MODEL']} (W_q W_k^T has rank at most d_model)")
    parameters.require(not P["LONG_N_VALUES"] or min(P["LONG_N_VALUES"]) > max(P["N_VALUES"]), "LONG_N_VALUES",
                       P["LONG_N_VALUES"], f"sequence lengths above every one of N_VALUES = {P['N_VALUES']} (copy "
                       "and reversal alone are trained there), or [] for none")
    parameters.require(set(P["SSMAX_N_VALUES"]) <= set(P["N_VALUES"]), "SSMAX_N_VALUES", P["SSMAX_N_VALUES"],
                       f"sequence lengths among N_VALUES = {P['N_VALUES']} (each is compared with the same cell "
                       "trained without the scalable softmax), or [] to skip the comparison")
    parameters.require(P["EVAL_EVERY"] * (P["PATIENCE"] + 1) < P["STEPS"], "STEPS", P["STEPS"],
                       f"more than EVAL_EVERY x (PATIENCE + 1) = {P['EVAL_EVERY'] * (P['PATIENCE'] + 1)} steps, "
                       "so that the stopping rule can fire")
    return P


def cell_spec(P) -> CellSpec:
    """The CellSpec of the validated parameters P (D_MODEL, D_VALUE, STEPS, EVAL_EVERY, PATIENCE, TOLERANCE)."""
    return CellSpec(d_model=P["D_MODEL"], d_value=P["D_VALUE"], steps=P["STEPS"], eval_every=P["EVAL_EVERY"],
                  patience=P["PATIENCE"], tolerance=P["TOLERANCE"])


def d_star_text(row) -> str:
    """A cell's accuracy saturation as the trained widths allow: "4", "5 to 8" (5 to 7 not trained), "≤ 1"."""
    return saturation.bracket_text(row.d_qk_trained, row.d_star, bool(row.d_star_at_first))


def interval_of(row, table: bool = False) -> str:
    """A cell's 95 % interval over models as `saturation.interval_text` writes it: "3 to 6", or "3 of 3 seeds give
    it alone" ("3 of 3 seeds" in a `table`) where the 2.5 and 97.5 % quantiles of the bootstrap resamples
    coincide."""
    return saturation.interval_text(row.d_star_low, row.d_star_high, row.spread, row.seeds_at_d_star, row.seed_count,
                                    table=table)


def curve_text(cells: pd.DataFrame, task: str) -> str:
    """"3, 4 and 5 to 8 at n = 16, 32 and 64 (95 % interval 3 to 6 at n = 32; in the others every seed gives it
    alone)": the accuracy saturation d_qk of the usable cells as brackets of trained widths, with the bootstrap
    intervals over models where they have width and the seeds behind a width where they do not."""
    part = cells[(cells.task == task) & cells.usable].sort_values("n")
    if part.empty:
        return "no usable sequence length"
    text = f"{join([d_star_text(r) for r in part.itertuples()])} at n = {join([str(n) for n in part.n])}"
    intervals = [f"{interval_of(r)} at n = {r.n}" for r in part.itertuples() if r.spread]
    counts = [f"{interval_of(r)} at n = {r.n}" for r in part.itertuples()
              if not r.spread and r.seeds_at_d_star < r.seed_count]
    if not intervals and not counts:
        return text + (" (each of its seeds gives it alone)" if len(part) == 1 else
                       " (in each cell every seed gives it alone)")
    notes = ([f"95 % {'interval' if len(intervals) == 1 else 'intervals'} {join(intervals, separator='; ')}"]
             if intervals else []) + counts
    rest = "" if len(intervals) + len(counts) == len(part) else "; in the others every seed gives it alone"
    return text + f" ({'; '.join(notes)}{rest})"


def robustness_text(verdict: Verdict) -> str:
    """What the robustness check of a verdict found, in words: "none of the 11 perturbations (each seed left out,
    each smallest width moved one grid step) changes it", "2 of the 11 change it", or "not checked (untestable
    before it)"."""
    check = verdict.evidence.get("robustness")
    if not check or not check["perturbations"]:
        return "not checked: the verdict was untestable before it"
    tried = f"the {plural(check['perturbations'], 'perturbation')} (each seed left out, each smallest width moved one grid step)"
    flips = len(check["flips"])
    if not flips:
        return f"none of {tried} changes it"
    return f"{flips} of {tried} {'changes' if flips == 1 else 'change'} it"


def exhaustive_count(cells: pd.DataFrame, grid) -> int:
    """Grid points an exhaustive search would have trained over the same cells (for the search's saving)."""
    return len(cells) * len(list(grid))


ANSWER_WORDS = {"log": "a width of order log n", "linear": "a width of order n",
                "sqrt": "a width growing like the square root of n", "full": "a full-rank head"}


def headline(verdicts: dict) -> str:
    """One sentence over every task's verdict, e.g. "copy supports a width of order log n; qsa is untestable"."""
    if not verdicts:
        return "No task was run."
    groups: dict = {}                  # tasks with the same answer are named together, in their order
    for task, v in verdicts.items():
        groups.setdefault(v.outcome, []).append(task)
    parts = []
    for outcome, tasks in groups.items():
        verb = "is" if len(tasks) == 1 else "are"
        if outcome == "untestable":
            subject = join(tasks) if len(tasks) < len(verdicts) or len(tasks) == 1 else \
                f"all {plural(len(tasks), 'task')} ({join(tasks)})"
            parts.append(f"{subject} {verb} untestable at this budget")
        else:
            parts.append(f"{join(tasks)} {'supports' if len(tasks) == 1 else 'support'} {ANSWER_WORDS[outcome]}")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def prediction_text(verdicts: dict) -> str:
    """How the answers compare with the literature's prediction for every task here (`tbl-ch5-tasks`): each solving
    pattern is sparse, so a width of order log n suffices to express it; an answer that grows faster means the
    trained models need more width than expressing the pattern does, at this budget."""
    tested = {task: v.outcome for task, v in verdicts.items() if v.outcome != "untestable"}
    if not tested:
        return "No task is testable at this budget, so none is compared with the literature's prediction"
    agree = [task for task, outcome in tested.items() if outcome == "log"]
    faster = [f"{task} needs {ANSWER_WORDS[outcome]}" for task, outcome in tested.items() if outcome != "log"]
    prediction = "the literature's prediction, a width of order log n, which suffices to express any sparse pattern"
    if not faster:
        return f"{join(agree)} {'agrees' if len(agree) == 1 else 'agree'} with {prediction}"
    if not agree:
        return f"No task agrees with {prediction}: at this budget, {join(faster)}"
    return (f"{join(agree)} {'agrees' if len(agree) == 1 else 'agree'} with {prediction}; at this budget, "
            f"{join(faster)}, although {'its' if len(faster) == 1 else 'each'} solving pattern is sparse too")


def excluded_text(cells: pd.DataFrame, task: str) -> str:
    """"none", or "n = 128: 3 of 3 models at d_qk = 32 did not converge ..." for every excluded cell of a task."""
    part = cells[(cells.task == task) & ~cells.usable].sort_values("n")
    return join([f"n = {r.n}: {r.reason}" for r in part.itertuples()], separator="; ")


def lr_text(tasks) -> str:
    """"0.003 for copy and reversal and 0.01 for high_rank": each task's learning rate (TASK_SPECS), grouped."""
    by_lr: dict = {}
    for task in tasks:
        by_lr.setdefault(TASK_SPECS[task].lr, []).append(task)
    if len(by_lr) == 1:
        return number(next(iter(by_lr)))
    return join([f"{number(lr)} for {join(names)}" for lr, names in sorted(by_lr.items())])


def batch_text(P) -> str:
    """"about 1,024 tokens (8 sequences at least, so 2,048 tokens at n = 256)": the tokens of one training step."""
    spec = cell_spec(P)
    longer = [n for n in all_n_values(P) if spec.batch_size(n) * n > spec.tokens_per_step]
    text = f"about {spec.tokens_per_step:,} tokens"
    if not longer:
        return text
    tokens = join([f"{spec.batch_size(n) * n:,}" for n in longer])
    return (f"{text} ({spec.batch_size(longer[0])} sequences at least, so {tokens} tokens at n = "
            f"{join([str(n) for n in longer])})")


def stack_text(P) -> str:
    """"6 MiB: 96, 48, 24, 12 and 3 models at n = 16, 32, 64, 128 and 256": how many models one stack holds."""
    spec, ns = cell_spec(P), all_n_values(P)
    return (f"{training.buckets.SCORE_BUDGET_BYTES / 2**20:g} MiB: {join([str(stack_size(n, spec)) for n in ns])} "
            f"{'model' if stack_size(ns[-1], spec) == 1 else 'models'} at n = {join([str(n) for n in ns])}")


def cells_meeting_bars(usable: int, cells: int) -> str:
    """"None of the 9 (task, n) cells meets its quality bar", "1 of the 9 ... meets its ...", "7 of the 9 ... meet
    their ..." (a sentence's start)."""
    what = f"the {cells} (task, n) {'cell' if cells == 1 else 'cells'}"
    if usable == 0:
        return f"None of {what} meets its quality bar" if cells > 1 else "The one (task, n) cell misses its quality bar"
    return f"{usable} of {what} {'meets its' if usable == 1 else 'meet their'} quality bar"


def quote_numbers(result: ChapterResult, P, frame, cells, verdicts, above) -> None:
    """Quote every number the chapter's prose pastes."""
    converged = counted(frame)   # every model that trained to the end counts, here as in the curves
    q = result.quote
    q("ch5_models", len(frame), "d")
    q("ch5_converged", int(frame.converged.sum()), "d")
    q("ch5_not_converged", int((~frame.converged).sum()), "d")
    q("ch5_cells", len(cells), "d")
    q("ch5_cells_usable", int(cells.usable.sum()), "d")
    q("ch5_cells_meet", cells_meeting_bars(int(cells.usable.sum()), len(cells)))
    q("ch5_cells_excluded", int((~cells.usable).sum()), "d")
    q("ch5_models_in_excluded", int(cells.loc[~cells.usable, "models"].sum()), "d")
    q("ch5_points_trained", int(frame.groupby(["task", "n", "d_qk"]).ngroups), "d")
    q("ch5_points_exhaustive", exhaustive_count(cells, P["D_QK"]), "d")
    per_width = frame.groupby(["task", "n", "d_qk"]).size()
    q("ch5_n_seeds", span_short(int(per_width.min()), int(per_width.max())) if len(per_width) else "no")
    q("ch5_min_seeds", MIN_SEEDS, "d")
    usable = cells[cells.usable]
    q("ch5_cells_unmoved", count_of(int((~usable.spread.astype(bool)).sum()), len(usable), "usable cell")
      if len(usable) else "none: no cell is usable")
    # the rule of three: k of k seeds agreeing bound the share of seeds that would not at 1 - 0.05^(1/k) (95 %)
    q("ch5_agree_bound", 100 * (1 - 0.05 ** (1 / MIN_SEEDS)), digits=2)
    q("ch5_min_points", scaling.VERDICT_MIN_POINTS, "d")
    q("ch5_steps", P["STEPS"], ",d")
    q("ch5_lr_text", lr_text(P["TASKS"]))
    q("ch5_batch_text", batch_text(P))
    q("ch5_stack_text", stack_text(P))
    q("ch5_tolerance", 100 * P["TOLERANCE"], digits=2)
    q("ch5_patience", P["PATIENCE"], "d")
    q("ch5_eval_every", P["EVAL_EVERY"], "d")
    q("ch5_d_model", P["D_MODEL"], "d")
    q("ch5_d_value", P["D_VALUE"], "d")
    q("ch5_grid", join([str(d) for d in P["D_QK"]]))
    q("ch5_level", 100 * LEVEL, digits=2)
    q("ch5_ceiling", CEILING, ".3f")
    q("ch5_heads_total", int(sum(len(v) for v in converged.hardmax_rank)), "d")
    q("ch5_heads_above", len(above), "d")
    q("ch5_heads_above_hardmax", int((above.hardmax_over_n > CEILING).sum()), "d")
    q("ch5_heads_above_numerical", int((above.numerical_over_n > CEILING).sum()), "d")
    q("ch5_max_hardmax_over_n", float((converged.hardmax_rank_max / converged.n).max()), ".2f")   # "1.00 n", not "1 n"
    q("ch5_max_numerical_over_n", float((converged.numerical_rank_max / converged.n).max()), ".2f")
    q("ch5_stop_step_median", float(converged.stop_step.median()) if len(converged) else math.nan, digits=3)
    q("ch5_stop_step_max", int(converged.stop_step.max()) if len(converged) else 0, ",d")
    q("ch5_n_max", max(all_n_values(P)), "d")
    q("ch5_n_list", join([str(n) for n in P["N_VALUES"]]))
    q("ch5_long_text", long_text(P))
    q("ch5_headline", headline(verdicts))
    q("ch5_prediction", prediction_text(verdicts))
    for task in P["TASKS"]:
        part = cells[cells.task == task]
        q(f"ch5_{task}_robustness", robustness_text(verdicts[task]))
        q(f"ch5_{task}_answer", verdicts[task].outcome)
        q(f"ch5_{task}_curve", curve_text(cells, task))
        q(f"ch5_{task}_usable", int(part.usable.sum()), "d")
        q(f"ch5_{task}_cells", len(part), "d")
        q(f"ch5_{task}_excluded_reasons", excluded_text(cells, task))
        q(f"ch5_{task}_top_accuracy_min", float(part.top_accuracy.min()), ".3f")


def ceiling_verdict(above: pd.DataFrame, cells: pd.DataFrame, heads: int) -> Verdict:
    """Do trained heads stay under the 0.63 n ceiling (hardmax rank)? "below" when no head is above it,
    "pattern_forced" when every head above it is in a cell whose solving pattern itself has rank above it (solving
    the task requires it), "above" when some head above it is on a task whose pattern stays below."""
    rule = f"hardmax rank of every head of the models that count against {CEILING:.3f} n"
    over = above[above.hardmax_over_n > CEILING]
    needs = {(c.task, c.n) for c in cells.itertuples() if c.pattern_hardmax_rank > CEILING * c.n}
    forced = [h for h in over.itertuples() if (h.task, h.n) in needs]
    evidence = {"heads": heads, "above": len(over), "forced": len(forced)}
    if heads == 0:
        return Verdict("untestable", "no trained head was measured", rule, evidence)
    sentence = f"{count_of(len(over), heads, 'trained head')} above {CEILING:.2f} n by the hardmax rank"
    if over.empty:
        return Verdict("below", sentence, rule, evidence)
    if len(forced) == len(over):
        tasks = join(sorted({h.task for h in forced}))
        return Verdict("pattern_forced", sentence + f", all on tasks whose solving pattern itself has rank above it "
                       f"({tasks})", rule, evidence)
    return Verdict("above", sentence + f", {len(over) - len(forced)} of them on tasks whose pattern stays below it",
                   rule, evidence)


def permutation_verdict(above: pd.DataFrame, cells: pd.DataFrame) -> Verdict:
    """Does training find heads above the ceiling when the task is a permutation? Over the usable cells (quality bar
    met) of tasks whose solving pattern has hardmax rank above CEILING n: "breaks" when a head there is above the
    ceiling, "holds" when none is, "untestable" without such a cell."""
    rule = f"a head above {CEILING:.3f} n by the hardmax rank in a cell that meets its quality bar"
    usable = {(c.task, c.n) for c in cells.itertuples() if c.usable and c.pattern_hardmax_rank > CEILING * c.n}
    if not usable:
        return Verdict("untestable", "no permutation task meets its quality bar", rule, {"cells": 0})
    inside = np.array([(h.task, h.n) in usable for h in above.itertuples()], dtype=bool)
    over = above[inside & (above.hardmax_over_n > CEILING).to_numpy()] if len(above) else above
    tasks = sorted({t for t, _ in usable})
    sentence = (f"{plural(len(over), 'head')} above {CEILING:.2f} n by the hardmax rank in the "
                f"{plural(len(usable), 'cell')} of {join(tasks)} that meet the quality bar")
    if len(over):
        low, high = int(over.d_qk.min()), int(over.d_qk.max())
        sentence += (f", at query/key {'width' if low == high else 'widths'} {span_short(low, high)}, up to "
                     f"{over.hardmax_over_n.max():.2f} n")
    return Verdict("breaks" if len(over) else "holds", sentence, rule,
                   {"cells": len(usable), "heads_above": len(over)})


def fits_table(fits: dict) -> pd.DataFrame:
    """One row per (task, form): coefficients with intervals, loss with interval, best / indistinguishable."""
    rows = []
    for task, fit in fits.items():
        if fit is None:
            continue
        for form in scaling.FORMS:
            point = fit.point[form]
            row = {"task": task, "form": form, "label": FORM_WORDS[form], "loss": point.loss,
                   "loss_low": fit.loss_ci[form][0], "loss_high": fit.loss_ci[form][1],
                   "best": form == fit.best, "indistinguishable": form in fit.indistinguishable}
            if form not in scaling.CLASS_FORMS:   # the power law is reported for its exponent only
                row["indistinguishable"] = None
            for name, value in point.coefficients.items():
                row[name] = value
                row[f"{name}_low"], row[f"{name}_high"] = fit.coefficient_ci[form][name]
            rows.append(row)
    return pd.DataFrame(rows)


MODEL_COLUMNS = ["task", "n", "d_qk", "model_seed", "data_seed", "test_loss", "test_accuracy", "converged",
                 "diverged", "stop_step", "hardmax_rank", "numerical_rank", "hardmax_rank_targets", "logit_scale",
                 "logit_half_range", "target_mass", "target_mass_min"]


def analyse(P, progress: bool = True) -> ChapterResult:
    """Train the phase diagram of P (TASKS, N_VALUES, D_QK, N_SEEDS, SEED and the spec) and, in the same sweep,
    copy and reversal at SSMAX_N_VALUES with the scalable softmax, and judge them; and the fresh-seed check of the
    learning rates (`fresh_seed_check`)."""
    result = ChapterResult()
    spec = cell_spec(P)
    both = phase_diagram(P["TASKS"], P["N_VALUES"], P["D_QK"], P["N_SEEDS"], P["SEED"], spec, progress=progress,
                         max_seeds=P.get("MAX_SEEDS"), long_cells=long_cells(P), ssmax_cells=ssmax_cells(P),
                         ssmax_s=P["SSMAX_S"])
    frame, scaled = split_arms(both)
    cells, _ = cell_table(add_head_summaries(frame), replicates=2, seed=P["SEED"])
    fresh = fresh_seed_check(P, spec, decisive_widths(cells, P), progress=progress)
    return judge(P, frame, spec, result=result, fresh=fresh, scaled=scaled)


def task_n_values(P, task: str) -> list[int]:
    """The sequence lengths `task` is trained at: N_VALUES, and LONG_N_VALUES for copy and reversal."""
    return list(P["N_VALUES"]) + (list(P["LONG_N_VALUES"]) if task in LONG_TASKS else [])


def all_n_values(P) -> list[int]:
    """Every sequence length some task of TASKS is trained at, in increasing order."""
    return sorted({n for task in P["TASKS"] for n in task_n_values(P, task)})


def long_cells(P) -> list[tuple[str, int]]:
    """The (task, n) cells beyond N_VALUES: copy and reversal among TASKS, at each of LONG_N_VALUES."""
    return [(task, n) for task in P["TASKS"] if task in LONG_TASKS for n in P["LONG_N_VALUES"]]


def long_text(P) -> str:
    """"copy and reversal are also trained at n = 256", or why no task is."""
    tasks = [t for t in P["TASKS"] if t in LONG_TASKS]
    if not tasks or not P["LONG_N_VALUES"]:
        return "no task is trained beyond them (LONG_N_VALUES is empty, or TASKS has neither copy nor reversal)"
    return (f"{join(tasks)} {'is' if len(tasks) == 1 else 'are'} also trained at n = "
            f"{join([str(n) for n in P['LONG_N_VALUES']])}")


def ssmax_cells(P) -> list[tuple[str, int]]:
    """The (task, n) cells trained again with the scalable softmax: copy and reversal among TASKS, at each of
    SSMAX_N_VALUES (none when it is empty)."""
    return [(t, n) for t in P["TASKS"] if t in ssmax.SSMAX_TASKS for n in P["SSMAX_N_VALUES"]]


def decisive_widths(cells: pd.DataFrame, P) -> dict:
    """{task: (n, widths)}: the cell a fresh-seed check retrains, the largest n that meets its bar (else the largest
    n), and its widths: the largest of the grid and, where the cell saturates inside the grid, the saturation width
    and the trained width just below it (the two widths its bracket rests on)."""
    out = {}
    for task in P["TASKS"]:
        part = cells[(cells.task == task) & cells.usable & cells.d_star.notna()].sort_values("n")
        if part.empty:
            out[task] = (max(task_n_values(P, task)), [max(P["D_QK"])])
            continue
        row = part.iloc[-1]
        below = [d for d in row.d_qk_trained if d < row.d_star]
        out[task] = (int(row.n), sorted({max(P["D_QK"]), int(row.d_star)} | ({int(max(below))} if below else set())))
    return out


def fresh_seed_check(P, spec: CellSpec, widths: dict, progress: bool = True) -> pd.DataFrame:
    """The learning rates were chosen in trial runs on the chapter's own seeds, so each task's decisive widths
    (`decisive_widths`) are trained again on fresh data and model seeds (SEED + FRESH_SEED_OFFSET on); one row per
    model (`train_models`). Each cell's widths train in the stacks of `stack_buckets` (a narrow model padded to
    d_qk 32 would pay for 32), cut to `stack_size` models (a stack whose attention scores outgrow the caches runs
    slower), the largest n first, so that two workers finish together."""
    fresh = P["SEED"] + FRESH_SEED_OFFSET
    seeds = [fresh + i for i in range(P["N_SEEDS"])]
    configs = [{"task": task, "n": n, "spec": spec.__dict__, "data_seed": fresh,
                "members": [{"d_qk": d, "seed": s} for d, s in piece]}
               for task, (n, d_qks) in widths.items() for bucket in stack_buckets(d_qks, n, spec)
               for piece in training.cut_stack([(d, s) for d in bucket for s in seeds], stack_size(n, spec))]
    # the largest n first, and there the narrowest stacks, which run longest
    configs.sort(key=lambda config: (-config["n"], sorted({m["d_qk"] for m in config["members"]})))
    frame = run_sweep(EXPERIMENT_FRESH, stack_point, configs, [0], progress=progress)
    order = {task: i for i, task in enumerate(widths)}
    frame = frame.rename(columns={"seed": "model_seed"})
    frame = frame.sort_values(["task", "d_qk", "model_seed"], key=lambda c: c.map(order) if c.name == "task" else c)
    return frame.drop(columns=["members", "spec"]).reset_index(drop=True)


def fresh_seed_table(fresh: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Per (task, n, d_qk) of the fresh-seed check: the fresh and the chapter's seed-mean accuracy, the chapter's
    saturation target at that n (LEVEL of its rise), whether each reaches it, and how many fresh models meet the
    bar."""
    rows = []
    for (task, n, d_qk), part in counted(fresh).groupby(["task", "n", "d_qk"], sort=False):
        main = seed_table(frame[(frame.task == task) & (frame.n == n)], "test_accuracy").mean(axis=1)
        first, last = float(main.iloc[0]), float(main.iloc[-1])
        target = first + LEVEL * (last - first)
        fresh_mean = float(part.test_accuracy.mean())
        chapter_mean = float(main.get(d_qk, math.nan))
        rows.append({"task": task, "n": int(n), "d_qk": int(d_qk), "fresh_mean": fresh_mean,
                     "chapter_mean": chapter_mean, "target": target, "fresh_reaches": fresh_mean >= target,
                     "chapter_reaches": chapter_mean >= target,
                     "meets_bar": int((part.test_accuracy >= TASK_SPECS[task].bar).sum()), "models": len(part)})
    return pd.DataFrame(rows)


def fresh_seed_summary(table: pd.DataFrame) -> str:
    """One sentence over the fresh-seed table: at how many retrained (task, width) points fresh seeds agree with the
    chapter on reaching the saturation target, and how many fresh models meet the bar at the largest width."""
    if table.empty:
        return "no width was retrained"
    agree = int((table.fresh_reaches == table.chapter_reaches).sum())
    tops = table.loc[table.groupby(["task", "n"]).d_qk.idxmax()]
    where = join([f"{task} at n = {n}" for task, n in zip(tops.task, tops.n)])
    return (f"they agree at {count_of(agree, len(table), 'retrained width')} ({where}), and at the largest width "
            f"{count_of(int(tops.meets_bar.sum()), int(tops.models.sum()), 'fresh model')} meet the bar")


def judge_ssmax(result: ChapterResult, P, frame: pd.DataFrame, cells: pd.DataFrame, scaled: pd.DataFrame | None,
                replicates: int) -> None:
    """The scalable-softmax comparison (`ch05_ssmax`) against the standard models `frame` and their `cells`: its
    table, a verdict per task (ch5_ssmax_<task>) and the numbers its section quotes (also when `scaled` is None:
    nothing was compared)."""
    def cells_of(models, relaxed):   # only d_star is read: two resamples are enough
        return cell_table(add_head_summaries(models), 2, P["SEED"], MIN_SEEDS - int(relaxed))[0]

    n_values = list(P["SSMAX_N_VALUES"]) if scaled is not None else []
    verdicts, table = {}, pd.DataFrame()
    if scaled is not None:
        scaled = add_head_summaries(scaled)
        tasks = sorted(set(scaled.task), key=list(P["TASKS"]).index)
        standard = frame[frame.task.isin(tasks) & frame.n.isin(n_values)]
        table = ssmax.comparison_table(cells[cells.task.isin(tasks) & cells.n.isin(n_values)],
                                       cell_table(scaled, replicates, P["SEED"])[0],
                                       bridge.law_rows(standard), bridge.law_rows(scaled))
        verdicts = {task: result.verdict(f"ch5_ssmax_{task}",
                                         ssmax.ssmax_verdict(task, standard, scaled, cells_of, P["D_QK"]))
                    for task in tasks}
        result.frames["ssmax_models"] = scaled[MODEL_COLUMNS]
        result.frames["ssmax"] = table
    result.data["ssmax"] = table
    q = result.quote
    q("ch5_ssmax_s", P["SSMAX_S"], digits=3)
    q("ch5_ssmax_n_list", join([str(n) for n in n_values]) or "no n (SSMAX_N_VALUES is empty)")
    q("ch5_ssmax_models", 0 if scaled is None else len(scaled), "d")
    q("ch5_ssmax_factor", span_short(*(P["SSMAX_S"] * math.log(n) for n in (min(n_values), max(n_values))), 3)
      if n_values else "–")
    q("ch5_ssmax_conclusion", ssmax.conclusion(verdicts))
    q("ch5_ssmax_scale", ssmax.scale_sentence(table))


def judge(P, frame: pd.DataFrame, spec: CellSpec | None = None, replicates: int = BOOTSTRAP,
          result: ChapterResult | None = None, fresh: pd.DataFrame | None = None,
          scaled: pd.DataFrame | None = None) -> ChapterResult:
    """Cells, fits, verdicts and prose numbers from the per-model rows of a phase diagram (see `train_models`).

    result.data: models (with head summaries), cells, fits ({task: BootstrapForms or None}), fits_table, above;
    result.frames (recorded): models, cells, fits, verdicts ({task: answer, sentence, ...}), above_ceiling, spec;
    result.verdicts: ch5_<task>_verdict for every task. `fresh`: the rows of `fresh_seed_check`, recorded and quoted
    when given. `scaled`: the scalable-softmax rows of `phase_diagram` (`split_arms`), judged by
    `judge_ssmax` when given."""
    result = result or ChapterResult()
    if fresh is not None:
        table = fresh_seed_table(fresh, frame)
        result.frames["fresh_seed_check"] = fresh
        result.frames["fresh_seed_table"] = table
        result.quote("ch5_fresh_seed", P["SEED"] + FRESH_SEED_OFFSET, "d")
        result.quote("ch5_fresh_text", fresh_seed_summary(table))
        result.data["fresh_seed_table"] = table
    frame = add_head_summaries(frame)
    cells, boots = cell_table(frame, replicates=replicates, seed=P["SEED"])
    fits = {task: fit_task(task, cells, boots) for task in P["TASKS"]}
    verdicts, heldout_tables = {}, {}
    for task in P["TASKS"]:
        trials = perturbations(task, frame, cells, boots, P, replicates)
        first = task_verdict(task, cells, fits[task], P["N_SEEDS"], max(P["D_QK"]), P["D_MODEL"])
        verdicts[task] = result.verdict(f"ch5_{task}_verdict", robust_verdict(task, first, trials, P))
        held, heldout_tables[task] = heldout_verdict(task, cells, boots, trials)
        result.verdict(f"ch5_{task}_heldout", held)
    result.data["heldout"] = heldout_tables
    result.frames["heldout"] = pd.concat([t for t in heldout_tables.values() if not t.empty] or [pd.DataFrame()])
    result.quote("ch5_heldout_spread", heldout.spread_text(heldout_tables))
    result.quote("ch5_heldout_summary", heldout.summary(heldout_tables))
    above = heads_above_ceiling(frame)
    heads = int(sum(len(v) for v in counted(frame).hardmax_rank))
    result.verdict("ch5_ceiling_verdict", ceiling_verdict(above, cells, heads))
    result.verdict("ch5_permutation_verdict", permutation_verdict(above, cells))
    laws = bridge.law_rows(frame)                    # the margin law of chapter 03c on every one-target head
    bridge_cells = bridge.bridge_table(laws, cells)
    result.verdict("ch5_bridge_bound", bridge.bound_verdict(laws))
    law_verdicts = {task: result.verdict(f"ch5_{task}_law", bridge.law_verdict(task, laws, bridge_cells, P["D_QK"]))
                    for task in P["TASKS"] if task in bridge.BRIDGE_TASKS}
    bridge.quote_bridge(result, laws, bridge_cells, law_verdicts)
    table = fits_table(fits)
    result.data.update(models=frame, cells=cells, fits=fits, fits_table=table, above=above, laws=laws,
                       bridge=bridge_cells)
    result.frames.update(
        models=frame[MODEL_COLUMNS], cells=cells, fits=table, above_ceiling=above, bridge=bridge_cells,
        verdicts={t: {"answer": v.outcome, "sentence": v.sentence, **v.evidence} for t, v in verdicts.items()},
        spec=(spec or cell_spec(P)).__dict__)
    quote_numbers(result, P, frame, cells, verdicts, above)
    judge_ssmax(result, P, frame, cells, scaled, replicates)
    return result.done()


# ---- tables for the page ----

# Per task: the attention pattern that solves it, and what the literature predicts for its smallest d_qk.
TASK_WORDS = {
    "copy": ("a shift: the query at position i reads the key at i - ceil(n/2)",
             "a width of order log n (a sparse pattern: Likhosherstov et al. 2023)"),
    "qsa": ("q-sparse averaging: each query spreads its weight evenly over the q = 2 positions it names",
            "a width of order q log n (Sanford et al. 2023)"),
    "mq_recall": ("content matching: the query for key k reads the one slot that stores key k",
                  "a width of order log n to separate n / 2 keys (Likhosherstov et al. 2023)"),
    "reversal": ("the anti-diagonal permutation: position i reads key n - 1 - i",
                 "a width of order log n (a sparse pattern: Likhosherstov et al. 2023)"),
    "high_rank": ("a fixed random permutation pi of the positions: position i reads key pi(i)",
                  "a width of order log n (a sparse pattern: Likhosherstov et al. 2023)"),
}


def tasks_table(P) -> pd.DataFrame:
    """`tbl-ch5-tasks`: per task, the pattern that solves it, the literature's prediction, its hardmax rank at every
    n of the run in one column ("8, 16, 32", a dash where the task is not trained: one column, however many n), the
    bar."""
    n_values = all_n_values(P)

    def ranks(task):
        return ", ".join(str(datasets.pattern_hardmax_rank(task, n, **TASK_SPECS[task].options))
                         if n in task_n_values(P, task) else "–" for n in n_values)

    return pd.DataFrame([
        {"task": task, "the pattern that solves it": TASK_WORDS[task][0],
         "what the literature predicts": TASK_WORDS[task][1],
         f"hardmax rank at n = {', '.join(map(str, n_values))}": ranks(task), "accuracy bar": TASK_SPECS[task].bar}
        for task in P["TASKS"]])


def cells_view(cells: pd.DataFrame) -> pd.DataFrame:
    """`tbl-ch5-cells`: one row per (task, n) cell with its accuracy, saturation widths and its models meeting
    the bar."""
    view = pd.DataFrame({
        "task": cells.task, "n": cells.n, "used": cells.usable.map({True: "yes", False: "no"}),
        "accuracy at the largest width": cells.top_accuracy,
        "smallest width (accuracy)": [d_star_text(r) if r.usable else "–" for r in cells.itertuples()],
        "95 % interval, or the seeds that agree": [interval_of(r, table=True) if r.usable else "–"
                                                   for r in cells.itertuples()],
        "smallest width (hardmax rank)": cells.d_star_hardmax_rank.where(cells.usable),
        "smallest width (numerical rank)": cells.d_star_numerical_rank.where(cells.usable),
        "models meeting the bar at the largest width": [f"{p} of {m}" for p, m in zip(cells.top_passing, cells.top_models)],
        "widths trained": cells.d_qk_trained.map(lambda d: ", ".join(map(str, d)))})
    return view.set_index(["task", "n"]).rename_axis(index=[None, None])


def _tiny(loss: float) -> float:
    """A loss of a form that fits exactly (rounding error, about 1e-30) shown as 0, not as 32 decimals."""
    return round(loss, 6)


COEFFICIENT_WORDS = {"a": "a", "b": "b", "c": "c", "alpha": "α"}


def fits_view(table: pd.DataFrame) -> pd.DataFrame:
    """`tbl-ch5-fits`: per task and form, the coefficients and the loss with their 95 % intervals."""
    if table.empty:
        return pd.DataFrame({"fit": ["no task has enough usable n for a fit"]}).set_index("fit").rename_axis(index=None)
    rows = []
    for r in table.to_dict(orient="records"):
        coefficients = join([f"{COEFFICIENT_WORDS[k]} = {number(r[k], 2)} ({span_short(r[k + '_low'], r[k + '_high'], 2)})"
                             for k in COEFFICIENT_WORDS if k in r and not pd.isna(r[k])])
        rows.append({"task": r["task"], "form": r["label"].replace(" ", "\u00a0"),   # a form never breaks a line
                     "coefficients (95 % interval)": coefficients,
                     "loss (95 % interval)": f"{number(_tiny(r['loss']), 2)} ({span_short(_tiny(r['loss_low']), _tiny(r['loss_high']), 2)})",
                     "best": "yes" if r["best"] else "", "indistinguishable from the best":
                         "–" if r["indistinguishable"] is None else "yes" if r["indistinguishable"] else "no"})
    return pd.DataFrame(rows).set_index(["task", "form"]).rename_axis(index=[None, None])


def above_view(above: pd.DataFrame, models: pd.DataFrame) -> pd.DataFrame:
    """`tbl-ch5-above`: one row per (task, n) with models that count: how many of their heads end above the 0.63 n
    ceiling (by either measure), the d_qk those heads have, and the smallest hardmax and numerical rank / n among
    them (NaN when no head is above)."""
    converged = counted(models)
    if converged.empty:
        return pd.DataFrame({"heads above 0.63 n": ["no trained model"]}).set_index("heads above 0.63 n") \
            .rename_axis(index=None)
    rows = []
    for (task, n), part in converged.groupby(["task", "n"]):
        heads = int(sum(len(v) for v in part.hardmax_rank))
        over = above[(above.task == task) & (above.n == n)]
        rows.append({"task": task, "n": f"n\u00a0=\u00a0{n}",   # no line break inside "n = 128"
                     "heads above 0.63 n": f"{len(over)} of {heads}",
                     "their widths": ", ".join(map(str, sorted(over.d_qk.unique()))) or "–",
                     "smallest hardmax rank / n": over.hardmax_over_n.min() if len(over) else math.nan,
                     "smallest numerical rank / n": over.numerical_over_n.min() if len(over) else math.nan})
    return pd.DataFrame(rows).set_index(["task", "n"]).rename_axis(index=[None, None])


def verdicts_view(result: ChapterResult, cells: pd.DataFrame, tasks) -> pd.DataFrame:
    """`tbl-ch5-verdicts`: one row per (task, finding) and the finding in words: the task's growth verdict, its smallest
    d_qk per n with the 95 % intervals, the cells it leaves out, what the robustness check found, the held-out test
    of the forms (`ch05_heldout`) and what the margin law read off the widest heads says. Long rather than wide:
    each finding is a sentence, and one wide column reads better than six narrow ones."""
    rows = []
    for task in tasks:
        verdict = result.verdicts[f"ch5_{task}_verdict"]
        law = result.verdicts.get(f"ch5_{task}_law")
        held = result.verdicts.get(f"ch5_{task}_heldout")
        findings = {"growth verdict": verdict.sentence, "smallest width per n": curve_text(cells, task),
                    "cells left out": excluded_text(cells, task), "robustness": robustness_text(verdict),
                    "the largest n held out": held.sentence if held else "–",
                    "the margin law (widest heads)": law.sentence if law else "–"}
        rows += [{"task": task, "finding": what, "what the data say": text} for what, text in findings.items()]
    return pd.DataFrame(rows).set_index(["task", "finding"]).rename_axis(index=[None, None])


def fresh_view(table: pd.DataFrame) -> pd.DataFrame:
    """`tbl-ch5-fresh`: the fresh-seed check per retrained (task, n, d_qk): the fresh and the chapter's seed-mean
    accuracy, the chapter's saturation target, whether each reaches it, and the fresh models meeting the bar."""
    if table.empty:
        return pd.DataFrame({"fresh seeds": ["no width was retrained"]}).set_index("fresh seeds").rename_axis(index=None)
    yes = {True: "yes", False: "no"}
    view = pd.DataFrame({"task": table.task, "n": [f"n\u00a0=\u00a0{n}" for n in table.n], "d_qk": table.d_qk,
                         "fresh mean accuracy": table.fresh_mean, "chapter mean accuracy": table.chapter_mean,
                         "saturation target": table.target, "fresh reach it": table.fresh_reaches.map(yes),
                         "chapter reaches it": table.chapter_reaches.map(yes),
                         "fresh models meeting the bar": [f"{m} of {k}" for m, k in zip(table.meets_bar, table.models)]})
    return view.set_index(["task", "n", "d_qk"]).rename_axis(index=[None, None, None])
