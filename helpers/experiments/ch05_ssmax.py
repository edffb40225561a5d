"""Chapter 5's prediction to falsify: with the scalable softmax, does a trained head need a narrower width?

    table = comparison_table(standard_cells, scaled_cells, standard_laws, scaled_laws)   # one row per (task, n)
    verdict = ssmax_verdict("copy", standard_models, scaled_models, cells_of, grid)

**The prediction** (issue "Why log n", from the margin law of chapter 03c): a head must reach a logit scale L of
order ln n to put most of its attention on one key among n. A head whose logits are multiplied by s ln n (the
scalable softmax of Nakanishi 2025; `ch05_training.logit_factor`) gets that factor from the softmax instead of from
its weights, so the law predicts that it needs a narrower query/key width than the same head without it.

**The rule.** Per task, over the compared n (cells that meet their quality bar in both arms): "narrower" when the
smallest width with the scalable softmax is below the standard one at every n, "not_narrower" when it is at or
above it at every n, else untestable (mixed). The answer must survive each seed left out (both arms recomputed) and
each smallest width of either arm moved one grid step (`helpers.robust`); a one-step difference therefore never
decides.
"""

import math
from collections.abc import Callable

import pandas as pd

from .. import robust
from ..english import join, number, span_short
from ..results import Verdict
from ..saturation import bracket_text, interval_text

SSMAX_TASKS = ("copy", "reversal")
OUTCOME_WORDS = {"narrower": "narrower heads with the scalable softmax",
                 "not_narrower": "no narrower heads with the scalable softmax"}
RULE = ("per task, over the n whose cells meet the quality bar with and without the scalable softmax: the smallest "
        "trained width (accuracy saturation, every model counted) with the scalable softmax against the one without; "
        "'narrower' when it is smaller at every n, 'not_narrower' when it is at least as large at every n, else "
        "untestable")


def _cell(cells: pd.DataFrame, task: str, n: int):
    """The row of (task, n), or None."""
    part = cells[(cells.task == task) & (cells.n == n)]
    return part.iloc[0] if len(part) else None


def compared_n(standard_cells: pd.DataFrame, scaled_cells: pd.DataFrame, task: str) -> list[int]:
    """The n of `task` trained in both arms."""
    return sorted(set(scaled_cells[scaled_cells.task == task].n) & set(standard_cells[standard_cells.task == task].n))


def decide(standard: dict, scaled: dict) -> str:
    """The outcome from {n: smallest width} of both arms (NaN: the cell misses its bar): see RULE."""
    if not scaled or any(math.isnan(standard[n]) or math.isnan(scaled[n]) for n in scaled):
        return "untestable"
    if all(scaled[n] < standard[n] for n in scaled):
        return "narrower"
    if all(scaled[n] >= standard[n] for n in scaled):
        return "not_narrower"
    return "untestable"


def smallest_widths(cells: pd.DataFrame, task: str, n_values) -> dict:
    """{n: the smallest trained width d_star}, NaN where the cell is missing or misses its quality bar."""
    out = {}
    for n in n_values:
        row = _cell(cells, task, n)
        out[int(n)] = float(row.d_star) if row is not None and row.usable else math.nan
    return out


def ssmax_verdict(task: str, standard_models: pd.DataFrame, scaled_models: pd.DataFrame,
                  cells_of: Callable[[pd.DataFrame, bool], pd.DataFrame], grid) -> Verdict:
    """Does the scalable softmax make the task's heads narrower? (RULE, robust to each seed left out of both arms
    and each smallest width of either arm moved one step of `grid`.) `cells_of(models, relaxed)` is the chapter's
    cell table (relaxed: its minimum number of seeds lowered by one, when a seed is left out)."""
    standard_models = standard_models[standard_models.task == task]
    scaled_models = scaled_models[scaled_models.task == task]
    standard_cells, scaled_cells = cells_of(standard_models, False), cells_of(scaled_models, False)
    n_values = compared_n(standard_cells, scaled_cells, task)
    standard, scaled = (smallest_widths(c, task, n_values) for c in (standard_cells, scaled_cells))
    first = decide(standard, scaled)
    evidence = {"n": n_values, "standard": list(standard.values()), "scaled": list(scaled.values())}
    pairs = join([f"{_width(scaled_cells, task, n)} against {_width(standard_cells, task, n)} at n = {n}"
                  for n in n_values]) or "no n compared"
    if first == "untestable":
        missed = [_missed(standard[n], scaled[n], n) for n in n_values if _missed(standard[n], scaled[n], n)]
        why = (join(missed, separator="; ") if missed else "no n was compared" if not n_values else
               f"it is narrower at some n and not at others ({pairs})")
        return Verdict("untestable", f"for {task} the prediction is untestable at this budget: {why}", RULE,
                       evidence)
    perturbed = []
    seeds = sorted(set(standard_models.model_seed) & set(scaled_models.model_seed))
    if len(seeds) >= 2:
        for label, seed in robust.leave_one_out(seeds):
            a = smallest_widths(cells_of(standard_models[standard_models.model_seed != seed], True), task, n_values)
            b = smallest_widths(cells_of(scaled_models[scaled_models.model_seed != seed], True), task, n_values)
            perturbed.append((label, decide(a, b)))
    for arm, widths in (("standard", standard), ("scaled", scaled)):
        points = {f"n = {n} ({'with' if arm == 'scaled' else 'without'} the scalable softmax)": w
                  for n, w in widths.items()}
        for label, moved in robust.grid_steps(points, grid):
            new = dict(zip(widths, moved.values()))
            perturbed.append((label, decide(new, scaled) if arm == "standard" else decide(standard, new)))
    verb = "needs a narrower" if first == "narrower" else "needs no narrower"
    sentence = f"{task} {verb} width with the scalable softmax at every n compared ({pairs})"
    verdict = Verdict(first, sentence, RULE, evidence)
    return robust.Robustness.of(first, perturbed).apply(verdict, subject=task, words=OUTCOME_WORDS)


def _missed(standard: float, scaled: float, n: int) -> str:
    """"at n = 12 neither arm meets its quality bar" (or only one does), "" when both do."""
    if math.isnan(standard) and math.isnan(scaled):
        return f"at n = {n} neither arm meets its quality bar"
    if math.isnan(standard) or math.isnan(scaled):
        return (f"at n = {n} only the {'standard softmax' if math.isnan(scaled) else 'scalable softmax'} meets the "
                "quality bar")
    return ""


def _width(cells: pd.DataFrame, task: str, n: int) -> str:
    row = _cell(cells, task, n)
    if row is None:
        return "not trained"
    if not row.usable:
        return "the bar missed"
    return bracket_text(row.d_qk_trained, row.d_star, bool(row.d_star_at_first))


def _median_L(laws: pd.DataFrame, task: str, n: int, d_qk: float) -> float:
    """The seed median of the logit scale L of the heads of (task, n) at width d_qk (NaN without them)."""
    part = laws[(laws.task == task) & (laws.n == n) & (laws.d_qk == d_qk)]
    return float(part.L.median()) if len(part) else math.nan


def comparison_table(standard_cells: pd.DataFrame, scaled_cells: pd.DataFrame, standard_laws: pd.DataFrame,
                     scaled_laws: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, n) trained with the scalable softmax: both arms' smallest width (as a bracket of trained
    widths, and its 95 % interval over models or the seeds that agree), models meeting the bar at the largest
    width, and the seed-median logit scale L of the heads at each arm's smallest width and at the largest width."""
    rows = []
    for task in [t for t in SSMAX_TASKS if t in set(scaled_cells.task)]:
        for n in compared_n(standard_cells, scaled_cells, task):
            row = {"task": task, "n": int(n)}
            arms = (("standard", standard_cells, standard_laws), ("scaled", scaled_cells, scaled_laws))
            for arm, cells, laws in arms:
                cell = _cell(cells, task, n)
                row[f"{arm}_usable"] = bool(cell.usable)
                row[f"{arm}_d_star"] = float(cell.d_star) if cell.usable else math.nan
                row[f"{arm}_width"] = _width(cells, task, n)
                row[f"{arm}_interval"] = (interval_text(cell.d_star_low, cell.d_star_high, cell.spread,
                                                        cell.seeds_at_d_star, cell.seed_count, table=True)
                                          if cell.usable else "–")
                row[f"{arm}_passing"] = f"{int(cell.top_passing)} of {int(cell.top_models)}"
                row[f"{arm}_L"] = _median_L(laws, task, n, cell.d_star) if cell.usable else math.nan
                row[f"{arm}_L_top"] = _median_L(laws, task, n, cell.top_d_qk)
            rows.append(row)
    return pd.DataFrame(rows)


def comparison_view(table: pd.DataFrame, s: float) -> pd.DataFrame:
    """The comparison table (`tbl-ch5-ssmax`): the comparison per (task, n), for the page."""
    if table.empty:
        return pd.DataFrame({"scalable softmax": ["not run (SSMAX_N_VALUES is empty)"]}) \
            .set_index("scalable softmax").rename_axis(index=None)
    label = f"with s\u00a0ln\u00a0n (s\u00a0=\u00a0{number(s)})"
    rows = [{"task": r.task, "n": f"n\u00a0=\u00a0{r.n}",
             "smallest width, standard": r.standard_width, f"smallest width, {label}": r.scaled_width,
             "95 % intervals, or the seeds that agree (standard; scaled)":
                 f"{r.standard_interval}; {r.scaled_interval}",
             "L at the smallest width (standard; scaled)": f"{number(r.standard_L, 3)}; {number(r.scaled_L, 3)}",
             "L at the largest width (standard; scaled)": f"{number(r.standard_L_top, 3)}; {number(r.scaled_L_top, 3)}",
             "meeting the bar at the largest width (standard; scaled)": f"{r.standard_passing}; {r.scaled_passing}"}
            for r in table.itertuples()]
    return pd.DataFrame(rows).set_index(["task", "n"]).rename_axis(index=[None, None])


def verdicts_view(verdicts: dict) -> pd.DataFrame:
    """`tbl-ch5-ssmax-verdicts`: each task's verdict on the prediction ({task: Verdict}), one row per task."""
    if not verdicts:
        return pd.DataFrame({"verdict": ["no task was compared"]}).set_index("verdict").rename_axis(index=None)
    return pd.DataFrame({"verdict": [v.sentence for v in verdicts.values()]}, index=list(verdicts))


def _where(verdict: Verdict) -> str:
    """"narrower at 2 of 2 n" / "the same at 1 of 2 n and narrower at 1": how the arms compare, from the evidence."""
    ev = verdict.evidence
    pairs = [(a, b) for a, b in zip(ev.get("standard", []), ev.get("scaled", [])) if a == a and b == b]
    if not pairs:
        return "not compared, since a cell misses its quality bar,"
    counts = {"narrower": sum(b < a for a, b in pairs), "the same": sum(b == a for a, b in pairs),
              "wider": sum(b > a for a, b in pairs)}
    parts = [f"{word} at {k} of {len(pairs)} n" if i == 0 else f"{word} at {k}"
             for i, (word, k) in enumerate((w, k) for w, k in counts.items() if k)]
    return join(parts)


def conclusion(verdicts: dict) -> str:
    """What the prediction's verdicts add up to, in one sentence; for undecided tasks, where the data point."""
    if not verdicts:
        return "The prediction was not tested in this run (no n was given for it)."
    outcomes = {task: v.outcome for task, v in verdicts.items()}
    held = [t for t, o in outcomes.items() if o == "narrower"]
    failed = [t for t, o in outcomes.items() if o == "not_narrower"]
    open_ = [t for t, o in outcomes.items() if o == "untestable"]
    parts = []
    if held:
        parts.append(f"the prediction holds for {join(held)}")
    if failed:
        parts.append(f"it fails for {join(failed)}: the scalable softmax does not make the head narrower")
    if open_:
        groups: dict = {}   # tasks that compare the same way are named together, so no clause is said twice
        for t in open_:
            groups.setdefault(_where(verdicts[t]), []).append(t)
        where = join([f"{w} for {join(ts)}" for w, ts in groups.items()])
        parts.append(f"for {join(open_)} the data cannot decide (the smallest width with the scalable softmax is "
                     f"{where}; a seed left out, a grid step or a missed quality bar changes the answer)")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def scale_sentence(table: pd.DataFrame) -> str:
    """How the logit scale of the heads at their smallest width compares with and without the scalable softmax: the
    range over the compared cells of the ratio of the seed medians, or why it is not compared."""
    if table.empty:
        return "No logit scales were compared (no cell was trained with the scalable softmax)."
    ratio = (table.scaled_L / table.standard_L).astype(float)
    ratio = ratio[ratio.notna() & (ratio > 0)]
    if ratio.empty:
        return "No logit scales were compared: no cell meets its quality bar in both arms."
    return (f"At their smallest width, heads with the scalable softmax reach a logit scale "
            f"{span_short(float(ratio.min()), float(ratio.max()), 3)} times that of the standard heads (seed medians "
            "per cell).")
