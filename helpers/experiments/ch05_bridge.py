"""Chapter 5's bridge to the margin law of chapter 03c: does the logit scale a trained head reaches predict the
width it needs?

    laws = law_rows(models)            # one row per model of a one-target task: L, eps, the law's two widths
    table = bridge_table(laws, cells)  # one row per usable cell: measured smallest d_qk beside the predicted band
    bound_verdict(laws), law_verdict(table)

**The law's inputs**, measured by `ch05_training.head_measures` on the target rows of the test inputs: the logit
scale L (the largest |q.k| after the head's scale) and the mean mass on the target key, 1 - eps. For a head that
reaches mass 1 - eps with logits within +-L, chapter 03c gives two widths (`helpers.margin`):

- `lower`: no code of any kind with those two numbers has fewer dimensions (`margin.rank_lower_bound`, over the
  cell's target rows, each reading a different key). A trained head below it would contradict a theorem.
- `d_rand`: random codes on the sphere reach that mass at that scale from this width on
  (`margin.random_code_dim`, over the n keys); infinite when L is too small for any random code.

**One-target tasks only** (copy, reversal, high_rank): each target row reads one key and different rows read
different keys, the patterns both bounds cover. The models are one layer with one head.
"""

import math

import numpy as np
import pandas as pd

from .. import margin, robust
from ..english import count_of, join, number, span_short
from ..results import Verdict

BRIDGE_TASKS = ("copy", "reversal", "high_rank")
EPS_FLOOR = 1e-6   # a head whose off-target mass rounds below this is read at it (float32 softmax: about 1e-7)


def target_rows(task: str, n: int) -> int:
    """Rows that carry a target: the second half for copy (n - ceil(n/2)), every row for the permutations."""
    return n - math.ceil(n / 2) if task == "copy" else n


def law_rows(models: pd.DataFrame) -> pd.DataFrame:
    """One row per model of a bridge task that trained to the end (diverged ones left out): task, n, d_qk,
    model_seed, test_accuracy, L (`logit_scale`), `half_range`, `mass` (mean target mass), `eps` = 1 - mass (at
    least EPS_FLOOR), `lower`, `d_rand` (at L), `d_rand_half` (at the half range: the smallest scale of a head with the
    same attention), and `ratio` = d_qk / d_rand (0 when d_rand is infinite)."""
    rows = []
    part = models[models.task.isin(BRIDGE_TASKS)]
    if "diverged" in part:
        part = part[~part.diverged.astype(bool)]
    for m in part.itertuples(index=False):
        if len(m.logit_scale) != 1:
            raise ValueError(f"{m.task}: the bridge reads one head per model, got {len(m.logit_scale)}")
        L, half, mass = float(m.logit_scale[0]), float(m.logit_half_range[0]), float(m.target_mass[0])
        eps = min(max(1.0 - mass, EPS_FLOOR), 1 - EPS_FLOOR)
        d_rand = margin.random_code_dim(int(m.n), L, eps)
        rows.append({"task": m.task, "n": int(m.n), "d_qk": int(m.d_qk), "model_seed": int(m.model_seed),
                     "test_accuracy": float(m.test_accuracy), "L": L, "half_range": half, "mass": mass, "eps": eps,
                     "lower": margin.rank_lower_bound(target_rows(m.task, int(m.n)), L, eps),
                     "d_rand": d_rand, "d_rand_half": margin.random_code_dim(int(m.n), half, eps),
                     "ratio": int(m.d_qk) / d_rand})
    columns = ["task", "n", "d_qk", "model_seed", "test_accuracy", "L", "half_range", "mass", "eps", "lower",
               "d_rand", "d_rand_half", "ratio"]
    return pd.DataFrame(rows, columns=columns)


def _spread(values: pd.Series) -> tuple[float, float, float]:
    """(median, smallest, largest) over the seeds of a cell."""
    values = values.astype(float)
    return float(values.median()), float(values.min()), float(values.max())


def bridge_table(laws: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """One row per usable cell of a bridge task: the measured smallest d_qk (`d_star`, a trained width, and
    `d_star_lowest`, the smallest it can be), and for the models at d_star (one per seed) the median and range over
    seeds of L, eps, the lower bound, d_rand and d_star / d_rand; `inside`: seeds whose band [lower, ceil(d_rand)]
    meets the bracket of trained widths [d_star_lowest, d_star]. The same from the models at the largest trained width (`wide_*`: what the law predicts from heads that
    had every dimension they wanted)."""
    rows = []
    usable = cells[cells.task.isin(BRIDGE_TASKS) & cells.usable & cells.d_star.notna()]
    for cell in usable.sort_values(["task", "n"]).itertuples():
        mine = laws[(laws.task == cell.task) & (laws.n == cell.n)]
        at = mine[mine.d_qk == int(cell.d_star)]
        wide = mine[mine.d_qk == int(cell.top_d_qk)]
        if at.empty:
            continue
        row = {"task": cell.task, "n": int(cell.n), "d_star": int(cell.d_star), "d_star_lowest": cell.d_star_lowest,
               "d_qk_trained": cell.d_qk_trained, "d_star_at_first": bool(cell.d_star_at_first),
               "seeds": len(at), "top_d_qk": int(cell.top_d_qk)}
        for name in ("L", "eps", "lower", "d_rand", "ratio"):
            row[name], row[f"{name}_min"], row[f"{name}_max"] = _spread(at[name])
        # the bracket (d_star_lowest .. d_star) of the trained widths meets the band (lower .. ceil(d_rand))
        row["inside"] = int(((at.lower <= cell.d_star) & (cell.d_star_lowest <= np.ceil(at.d_rand))).sum())
        for name in ("L", "eps", "lower", "d_rand"):
            row[f"wide_{name}"], row[f"wide_{name}_min"], row[f"wide_{name}_max"] = _spread(wide[name])
        rows.append(row)
    return pd.DataFrame(rows, columns=BRIDGE_COLUMNS)


_LAW = [f"{name}{end}" for name in ("L", "eps", "lower", "d_rand", "ratio") for end in ("", "_min", "_max")]
BRIDGE_COLUMNS = (["task", "n", "d_star", "d_star_lowest", "d_qk_trained", "d_star_at_first", "seeds", "top_d_qk"]
                  + _LAW + ["inside"] + [f"wide_{c}" for c in _LAW if not c.startswith("ratio")])


BOUND_RULE = ("every model that trained to the end, of copy, reversal and high_rank: its width d_qk against the "
              "smallest width any code can have at the logit scale and target mass its head reaches "
              "(margin.rank_lower_bound over the target rows)")


def bound_verdict(laws: pd.DataFrame) -> Verdict:
    """The theorem as a check of the measurements: "holds" when no model is narrower than its lower bound,
    "violated" when one is (a measurement or the bound is wrong), "untestable" without models."""
    if laws.empty:
        return Verdict("untestable", "no model of a one-target task was trained", BOUND_RULE, {"models": 0})
    below = laws[laws.d_qk < laws.lower]
    forcing = int((laws.lower > 0).sum())
    evidence = {"models": len(laws), "below": len(below), "forcing": forcing,
                "lower_max": int(laws.lower.max())}
    sentence = (f"{count_of(len(below), len(laws), 'trained head')} {'is' if len(below) == 1 else 'are'} narrower "
                f"than the lower bound of any code at its own logit scale and target mass; the bound forces at "
                f"least one dimension for {count_of(forcing, len(laws), 'head')}, and at most "
                f"{int(laws.lower.max())}")
    return Verdict("violated" if len(below) else "holds", sentence, BOUND_RULE, evidence)


def band_text(row) -> str:
    """"1 to 6.2": a cell's band [lower bound, d_rand] at the seed medians ("1 to ∞" when no random code reaches)."""
    top = "∞" if math.isinf(row.d_rand) else number(row.d_rand, 2)
    return f"{int(row.lower)} to {top}"


def ratio_text(table: pd.DataFrame) -> str:
    """"0.31 to 0.88 (median over seeds, per cell)": the range of the cells' d_star / d_rand."""
    ratio = table.ratio.astype(float)
    finite = ratio[np.isfinite(ratio)]
    if finite.empty:
        return "not defined (no cell's random-code width is finite)"
    return span_short(float(finite.min()), float(finite.max()), 2)


# ---- does the law, read off the widest heads, predict the smallest width? ----

LAW_WORDS = {"tracks": "the law ahead of the best constant", "no_better": "the constant as good as the law or better"}
LAW_RULE = ("per task, over the usable cells: the RMS of ln(d_star / d_rand) with d_rand the random-code width at the "
            "seed-median logit scale and target mass of the heads at the largest trained width (a prediction with no "
            "fitted parameter, from heads that had every dimension they wanted), against the RMS of ln d_star about "
            "its own geometric mean (the best constant, fitted to the same cells); 'tracks' when the law's error is "
            "the smaller; at least 3 cells; the smallest widths held, the law's medians recomputed, with each seed "
            "left out")


def prediction_errors(d_star, predicted) -> tuple[float, float]:
    """(RMS log error of `predicted` against `d_star`, RMS log error of the best constant, exp(mean ln d_star))."""
    d_star, predicted = np.asarray(d_star, float), np.asarray(predicted, float)
    logs = np.log(d_star)
    law = float(np.sqrt(np.mean((logs - np.log(predicted)) ** 2))) if np.all(np.isfinite(predicted)) else math.inf
    return law, float(np.sqrt(np.mean((logs - logs.mean()) ** 2)))


def _wide_prediction(laws: pd.DataFrame, task: str, cells: pd.DataFrame) -> np.ndarray:
    """Per cell of `cells` (one task): the seed median of the random-code width of the heads at the largest trained
    width (`d_rand` of `law_rows`), NaN without such heads."""
    out = []
    for cell in cells.itertuples():
        wide = laws[(laws.task == task) & (laws.n == cell.n) & (laws.d_qk == cell.top_d_qk)]
        out.append(float(wide.d_rand.median()) if len(wide) else math.nan)
    return np.array(out)


def law_verdict(task: str, laws: pd.DataFrame, table: pd.DataFrame, grid, min_cells: int = 3) -> Verdict:
    """Does the margin law, read off the widest heads, predict the task's smallest width across n better than the
    best constant? (LAW_RULE; robust to each seed left out and each smallest width moved one step of `grid`.)"""
    cells = table[table.task == task].sort_values("n")
    evidence = {"cells": len(cells)}
    if len(cells) < min_cells:
        return Verdict("untestable", f"for {task} the law is untestable at this budget: {len(cells)} usable "
                       f"{'cell' if len(cells) == 1 else 'cells'}, at least {min_cells} needed", LAW_RULE, evidence)
    predicted = _wide_prediction(laws, task, cells)
    law, constant = prediction_errors(cells.d_star, predicted)

    def outcome(d_star, prediction):
        mine, best = prediction_errors(d_star, prediction)
        return "tracks" if mine < best else "no_better"

    first = outcome(cells.d_star, predicted)
    perturbed = []
    for label, seed in robust_seeds(laws, task):
        perturbed.append((label, outcome(cells.d_star, _wide_prediction(laws[laws.model_seed != seed], task, cells))))
    points = {f"n = {int(c.n)}": float(c.d_star) for c in cells.itertuples()}
    for label, moved in robust.grid_steps(points, grid):
        perturbed.append((label, outcome([moved[k] for k in points], predicted)))
    evidence.update(law_rms=law, constant_rms=constant, predicted=predicted.tolist(),
                    d_star=cells.d_star.astype(float).tolist(), n=cells.n.astype(int).tolist())
    verb = "predicts" if first == "tracks" else "predicts no better than the best constant"
    sentence = (f"for {task} the law {verb} (RMS log error {number(law, 2)} with no fitted parameter, against "
                f"{number(constant, 2)} for the constant)")
    verdict = Verdict(first, sentence, LAW_RULE, evidence)
    return robust.Robustness.of(first, perturbed).apply(verdict, subject=task, words=LAW_WORDS)


def robust_seeds(laws: pd.DataFrame, task: str) -> list:
    """The leave-one-out perturbations over the task's model seeds (none with fewer than 2 seeds)."""
    seeds = sorted(laws[laws.task == task].model_seed.unique())
    return robust.leave_one_out(seeds) if len(seeds) >= 2 else []


# ---- the numbers the page quotes ----

def up_to_saturation(laws: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The seed medians of d_qk / d_rand per (task, n, d_qk) for the widths up to each usable cell's d_star."""
    limit = {(r.task, r.n): r.d_star for r in table.itertuples()}
    # a boolean array, not a list: an empty list would select no columns instead of no rows
    keep = laws[np.array([limit.get((t, n), -1) >= d for t, n, d in zip(laws.task, laws.n, laws.d_qk)], dtype=bool)]
    return keep.groupby(["task", "n", "d_qk"]).ratio.median().reset_index()


def quote_bridge(result, laws: pd.DataFrame, table: pd.DataFrame, verdicts: dict) -> None:
    """Quote every number of the bridge section (ch5_bridge_*)."""
    q = result.quote
    below = up_to_saturation(laws, table)
    q("ch5_bridge_cells", len(table), "d")
    q("ch5_bridge_ratio", ratio_text(table))
    q("ch5_bridge_lower_max", int(laws.lower.max()) if len(laws) else 0, "d")
    half = laws.d_rand_half / laws.d_rand
    q("ch5_bridge_half_change", float(100 * (half[np.isfinite(half)] - 1).abs().max()) if len(laws) else math.nan,
      digits=2)
    q("ch5_bridge_summary", summary_text(table))
    q("ch5_bridge_efficiency", efficiency_sentence(table, below))
    q("ch5_bridge_efficiency_words", efficiency_text(table))
    q("ch5_bridge_conclusion", law_conclusion(verdicts, table))


def bridge_view(table: pd.DataFrame) -> pd.DataFrame:
    """The bridge table (`tbl-ch5-bridge`): per usable cell, the measured smallest d_qk beside the law's widths
    (seed medians; for the law's widths the range over seeds in brackets), and in how many of the cell's seeds the
    law's band meets the bracket ("3 of 4": also the cell's seed count)."""
    if table.empty:
        return pd.DataFrame({"bridge": ["no usable cell of copy, reversal or high_rank"]}).set_index("bridge") \
            .rename_axis(index=None)

    def spread(r, name, digits=2):
        def show(x):
            return "∞" if math.isinf(x) else number(x, digits)
        # "2.6 (2.3–3)", a line break allowed only before the bracket (a word joiner after the dash): narrow columns
        return f"{show(getattr(r, name))} ({show(getattr(r, name + '_min'))}–\u2060{show(getattr(r, name + '_max'))})"

    from ..saturation import bracket_text
    rows = [{"task": r.task, "n": f"n\u00a0=\u00a0{r.n}",
             "smallest width": bracket_text(r.d_qk_trained, r.d_star, r.d_star_at_first),
             "logit scale L": number(r.L, 3), "target mass": number(1 - r.eps, 2),
             "lower bound": int(r.lower), "random-code width": spread(r, "d_rand"),
             "smallest / random-code width": spread(r, "ratio"),
             "bracket meets the band": f"{r.inside} of {r.seeds}",
             "random-code width of the widest heads": spread(r, "wide_d_rand")}
            for r in table.itertuples()]
    return pd.DataFrame(rows).set_index(["task", "n"]).rename_axis(index=[None, None])


FACTOR = 2   # "about as efficient as random codes": every cell's d_star / d_rand within a factor of 2 of 1


def efficiency_text(table: pd.DataFrame) -> str:
    """How the trained heads at the smallest width compare with random codes, from the cells' seed medians of
    d_star / d_rand: "about as efficient as" (all within FACTOR of 1), "more efficient than" (all below 1/FACTOR),
    "less efficient than" (all above FACTOR), else "sometimes more and sometimes less efficient than"."""
    ratio = table.ratio.to_numpy(float) if len(table) else np.array([])
    if ratio.size == 0:
        return "not compared with"
    if np.all((ratio >= 1 / FACTOR) & (ratio <= FACTOR)):
        return "about as efficient as"
    if np.all(ratio < 1 / FACTOR):
        return "more efficient than"
    if np.all(ratio > FACTOR):
        return "less efficient than"
    return "sometimes more and sometimes less efficient than"


def law_conclusion(verdicts: dict, table: pd.DataFrame) -> str:
    """What the law verdicts add up to, in one or two sentences (with the masses behind a "no_better")."""
    outcomes = {task: v.outcome for task, v in verdicts.items()}
    if not outcomes:
        return "No task of the bridge was run."
    if all(o == "tracks" for o in outcomes.values()):
        return (f"For {join(list(outcomes))} the law read off unconstrained heads predicts the growth of the smallest "
                "width with n better than a constant fitted to it.")
    parts = []
    undecided = [t for t, o in outcomes.items() if o == "untestable"]
    if undecided:
        parts.append(f"for {join(undecided)} the data cannot decide (the table says why)")
    for task in [t for t, o in outcomes.items() if o == "no_better"]:
        part = table[table.task == task]
        parts.append(f"for {task} the widest heads put a median {number(1 - float(part.wide_eps.median()), 2)} of "
                     f"their attention on the target, against {number(1 - float(part.eps.median()), 2)} at the "
                     "smallest width, so they ask for more width than the narrow heads use")
    rest = "; ".join(parts)   # each part has commas of its own
    tracks = [t for t, o in outcomes.items() if o == "tracks"]
    if tracks:
        return (f"For {join(tracks)} the law read off unconstrained heads predicts the growth of the smallest width "
                f"with n better than a constant fitted to it; it is not a tested predictor for every task: {rest}.")
    return ("So the law read off unconstrained heads is not a tested predictor of the width a trained head needs at "
            f"this budget: {rest}.")


def summary_text(table: pd.DataFrame) -> str:
    """The scale and mass of the heads at the smallest width, or why there are none."""
    if table.empty:
        return ("No cell of copy, reversal or high_rank meets its quality bar in this run, so there is no smallest "
                "width to read the law at, and the table and figure below are empty.")
    return (f"At the smallest width of the {len(table)} usable {'cell' if len(table) == 1 else 'cells'}, the heads have "
            f"logit scales from {span_short(float(table.L.min()), float(table.L.max()), 3)} and put "
            f"{span_short(float(1 - table.eps.max()), float(1 - table.eps.min()), 2)} of their attention on the "
            "target (seed medians per cell); the value path and the MLP turn that into the right answer.")


def efficiency_sentence(table: pd.DataFrame, below: pd.DataFrame) -> str:
    """How the heads compare with random codes (`efficiency_text`, FACTOR), with the numbers behind it."""
    if table.empty:
        return "With no usable cell, the trained heads are not compared with random codes in this run."
    heads = int(table.seeds.sum())
    return (f"At the width they need, trained heads are {efficiency_text(table)} random codes (within a factor of "
            f"{FACTOR} counts as about as): at the smallest width, the ratio of that width to the random-code width "
            f"runs from {ratio_text(table)} over the cells (seed medians), and for "
            f"{count_of(int(table.inside.sum()), heads, 'head')} there the bracket of trained widths meets the band "
            "from the lower bound to the random-code width rounded up. Over all the "
            f"{len(below)} (task, n, width) points up to the smallest width, narrower heads included, the seed median "
            "of the width over the random-code width lies in the range "
            f"{span_short(float(below.ratio.min()), float(below.ratio.max()), 2)}.")
