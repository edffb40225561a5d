"""Chapter 5's held-out test of the growth forms: fitted to the smallest widths at every n but the largest, which
form predicts the width measured at the largest n?

    table = heldout_table(cells, boots, "copy")       # one row per form: prediction and its interval, measured
    outcome = decide(table)                           # "log", "power" or "untestable"

A fit over all n (the chapter's `fit_task`) can tell forms apart only by how they bend between the points; a
prediction of a point the fit never saw is the test a referee asks for, and it says how far the forms separate over
the octaves trained. The forms are the growth-class forms of `helpers.scaling` (a + b ln n and a + b (ln n)^2:
the logarithmic class; c sqrt(n) and c n: the power class), fitted by least squares in closed form, to the point
estimates and to every bootstrap replicate of the smaller n (the chapter's resamples over models).

**Resolution.** A smallest width is a whole number of dimensions: a law w(n) asks for ceil(w(n)) of them, so a
measured d_star at n_i says only that w(n_i) lies in (b_i, d_star_i], where b_i is the largest trained width below
that failed (0 when the smallest width of the grid already saturates). The prediction is linear in the fitted widths,
so its range over every set of widths inside these brackets takes each width at one end, by the sign of its weight
(`resolution_range`). Where every resample agrees (the widths are trained widths, and often all seeds agree), this
range is what keeps the interval honest: a fit to three unit-step measurements cannot pin its extrapolation to a
point.

**The rule.** A form predicts the largest n when its interval (the 95 % interval over the replicates joined with the
resolution range), rounded to whole dimensions, meets the measured 95 % interval there (a bracket of trained
widths). "log" when some logarithmic form predicts it and no power form does, "power" the other way round, else
untestable (both classes, or neither). The chapter makes it robust (`ch05_trained_synthetic.heldout_verdict`):
each seed left out, each smallest width moved one grid step.
"""

import math

import numpy as np
import pandas as pd

from .. import saturation, scaling
from ..english import join, number, span_short

FORMS = scaling.CLASS_FORMS
CLASS_OF = {"log": "log", "log2": "log", "sqrt": "power", "linear": "power"}
OUTCOME_WORDS = {"log": "only the logarithmic forms predicting the largest n",
                 "power": "only the power forms predicting the largest n"}
RULE = ("per task with at least 4 usable n: each growth-class form (a + b ln n, a + b (ln n)^2, c sqrt(n), c n) "
        "fitted by least squares to the smallest widths at every usable n but the largest, to the point estimates "
        "and each bootstrap replicate over models; its interval joins the 95 % interval over the replicates with "
        "the range over every width inside its unit-step bracket (b_i, d_star_i]; a form predicts the largest n "
        "when that interval, rounded to whole dimensions, meets the measured 95 % interval there; 'log' when only "
        "logarithmic forms predict it, 'power' when only power forms do, else untestable")


def predictions(form: str, n_train, ys: np.ndarray, n_test: float) -> np.ndarray:
    """The least-squares fit of `form` to each row of `ys` `(B, m)` at `n_train` `(m,)`, evaluated at `n_test`:
    `(B,)`. The same fits as `scaling.fit_form` (squared loss), all rows at once."""
    x = scaling._feature(form, np.asarray(n_train, dtype=float))
    x_test = float(scaling._feature(form, np.array([float(n_test)]))[0])
    ys = np.atleast_2d(np.asarray(ys, dtype=float))
    if form in scaling.LOG_FORMS:
        design = np.stack([np.ones_like(x), x], axis=1)               # (m, 2)
        coefficients, *_ = np.linalg.lstsq(design, ys.T, rcond=None)   # (2, B)
        return coefficients[0] + coefficients[1] * x_test
    return (ys @ x) / (x @ x) * x_test


ROUNDING = 1e-9   # a prediction within this of a whole number is that number (float residue of an exact fit)


def dimensions(width: float) -> int:
    """The whole dimensions a predicted width asks for: rounded up."""
    return math.ceil(width - ROUNDING)


def dimensions_above(width: float) -> int:
    """The fewest whole dimensions of a width known only to exceed `width` (an open lower end)."""
    return math.floor(width + ROUNDING) + 1


def failed_below(cells: pd.DataFrame) -> np.ndarray:
    """Per cell, b: the largest trained width below d_star, which failed (one below `d_star_lowest`), or 0 where
    the grid's smallest width already saturates. The needed width lies in (b, d_star]."""
    return np.where(cells.d_star_at_first.astype(bool), 0.0, cells.d_star_lowest.to_numpy(float) - 1)


def resolution_range(form: str, n_train, low, high, n_test: float) -> tuple[float, float]:
    """(smallest, largest) least-squares prediction of `form` at `n_test` over every set of widths y_i in
    [low_i, high_i] `(m,)`. The prediction is sum_i w_i y_i with weights w_i (the fit of unit vectors), so each
    extreme takes y_i at one end of its bracket, by the sign of w_i."""
    weights = predictions(form, n_train, np.eye(len(low)), n_test)   # (m,)
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    return (float(np.where(weights > 0, weights * low, weights * high).sum()),
            float(np.where(weights > 0, weights * high, weights * low).sum()))


def measured_text(cell, table: bool = False) -> str:
    """The measured width as a bracket of trained widths with its 95 % interval, or the seeds that agree where
    the interval's ends coincide: "5 to 6 (95 % interval 3 to 6)", "5 to 6 (3 of 3 seeds give it alone)"; in a
    `table`, whose header says the rest, "5 to 6 (3 to 6)" and "5 to 6 (3 of 3 seeds)"."""
    width = (f"≤ {number(cell.d_star)}" if cell.d_star_at_first else span_short(cell.d_star_lowest, cell.d_star))
    text = saturation.interval_text(cell.d_star_low, cell.d_star_high, cell.spread, cell.seeds_at_d_star,
                                    cell.seed_count, table=table)
    return f"{width} ({'95 % interval ' if cell.spread and not table else ''}{text})"


def heldout_table(cells: pd.DataFrame, boots: dict, task: str) -> pd.DataFrame:
    """One row per form (FORMS) for `task`: the n fitted and the held-out n, the prediction at the point estimates
    and its 95 % interval over the replicates, the measured width there (`d_star`, its bracket's lower end
    `d_star_lowest`, its 95 % interval; `measured_text` in words, `measured_cell` for the table), and `predicts`.
    Empty with fewer than MIN_POINTS + 1 usable n."""
    usable = cells[(cells.task == task) & cells.usable & cells.d_star.notna()].sort_values("n")
    if len(usable) < scaling.MIN_POINTS + 1:
        return pd.DataFrame()
    train, test = usable.iloc[:-1], usable.iloc[-1]
    reps = np.stack([boots[(task, int(n))] for n in train.n], axis=1)   # (B, m)
    rows = []
    for form in FORMS:
        point = float(predictions(form, train.n, train.d_star.to_numpy(float)[None], test.n)[0])
        spread = predictions(form, train.n, reps, test.n)
        low, high = (float(np.quantile(spread, q)) for q in (0.025, 0.975))
        # the resamples draw trained widths; each width is known only to its unit-step bracket (b_i, d_star_i]
        box_low, box_high = resolution_range(form, train.n, failed_below(train), train.d_star, test.n)
        fewest = min(dimensions(low), dimensions_above(box_low))     # the box's lower end is open
        low, high = min(low, box_low), max(high, box_high)
        rows.append({"task": task, "form": form, "class": CLASS_OF[form], "fitted_n": [int(n) for n in train.n],
                     "n": int(test.n), "predicted": point, "predicted_low": low, "predicted_high": high,
                     "d_star": float(test.d_star), "d_star_lowest": float(test.d_star_lowest),
                     "measured_low": float(test.d_star_low), "measured_high": float(test.d_star_high),
                     "measured_text": measured_text(test), "measured_cell": measured_text(test, table=True),
                     "predicts": bool(fewest <= test.d_star_high and dimensions(high) >= test.d_star_low)})
    return pd.DataFrame(rows)


def decide(table: pd.DataFrame) -> str:
    """"log", "power" or "untestable" from a task's held-out table (RULE)."""
    if table.empty:
        return "untestable"
    classes = set(table[table.predicts]["class"])
    return next(iter(classes)) if len(classes) == 1 else "untestable"


def sentence(task: str, table: pd.DataFrame) -> str:
    """What the held-out test found for one task, with its numbers."""
    if table.empty:
        return (f"for {task} the held-out test is untestable at this budget: fewer than {scaling.MIN_POINTS + 1} "
                "usable n")
    first = table.iloc[0]
    fitted = join([str(n) for n in first.fitted_n])
    good = [scaling.FORM_WORDS[f] for f in table[table.predicts].form]
    bad = [scaling.FORM_WORDS[f] for f in table[~table.predicts].form]
    measured = first.measured_text
    found = (f"{join(good)} {'predicts' if len(good) == 1 else 'predict'} it" if good else "no form predicts it")
    if good and bad:
        found += f" and {join(bad)} {'does' if len(bad) == 1 else 'do'} not"
    outcome = decide(table)
    lead = {"log": "only logarithmic growth", "power": "only power-law growth"}.get(outcome)
    tail = (f": {lead} extrapolates" if lead else
            ": both classes extrapolate, so the largest n does not separate them" if len(good) else
            ": no form extrapolates")
    return f"for {task}, fitted to n = {fitted} and measured {measured} at n = {first.n}, {found}{tail}"


def heldout_view(tables: dict) -> pd.DataFrame:
    """The held-out table (`tbl-ch5-heldout`): per task and form, the prediction at the largest n with its
    interval, the measured width, and whether the form predicts it."""
    rows = [{"task": r.task, "form": scaling.FORM_WORDS[r.form].replace(" ", "\u00a0"),
             "fitted to n": ", ".join(map(str, r.fitted_n)), "held-out n": r.n,
             "predicted width (95 % interval)":
                 f"{number(r.predicted, 2)} ({span_short(r.predicted_low, r.predicted_high, 2)})",
             "measured (95 % interval, or the seeds that agree)": r.measured_cell,
             "predicts it": "yes" if r.predicts else "no"}
            for table in tables.values() if not table.empty for r in table.itertuples()]
    if not rows:
        return pd.DataFrame({"held-out test": [f"no task has {scaling.MIN_POINTS + 1} usable n"]}) \
            .set_index("held-out test").rename_axis(index=None)
    return pd.DataFrame(rows).set_index(["task", "form"]).rename_axis(index=[None, None])


def spread_text(tables: dict) -> str:
    """How far apart the forms' predictions at the held-out n are, per task: "copy 4.9 to 9.1; reversal ..."."""
    parts = [f"{task} {span_short(float(t.predicted.min()), float(t.predicted.max()), 2)} at n = {int(t.n.iloc[0])}"
             for task, t in tables.items() if not t.empty and math.isfinite(float(t.predicted.min()))]
    return join(parts, separator="; ") or "none (no task has enough usable n)"


def summary(tables: dict) -> str:
    """One sentence over the tasks: the forms that predict the held-out n for every task, and those ruled out."""
    tested = {task: t for task, t in tables.items() if not t.empty}
    if not tested:
        return "No task has enough usable n for the held-out test."
    always = [f for f in FORMS if all(t.set_index("form").predicts[f] for t in tested.values())]
    out = {f: [task for task, t in tested.items() if not t.set_index("form").predicts[f]] for f in FORMS}
    ns = {task: int(t.n.iloc[0]) for task, t in tested.items()}
    held = (f"at n = {next(iter(ns.values()))}" if len(set(ns.values())) == 1 else
            f"({join([f'n = {n} for {task}' for task, n in ns.items()])})")
    parts = [f"Held out {held}, the largest n is predicted for every task by "
             f"{join([scaling.FORM_WORDS[f] for f in always]) or 'no single form'}"]
    missed = [f"{scaling.FORM_WORDS[f]} misses it for {join(tasks)}" for f, tasks in out.items() if tasks]
    if missed:
        parts.append(join(missed, separator="; "))
    return "; ".join(parts) + "."
