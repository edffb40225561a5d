"""Chapter 5's recorded numbers (quick mode), checked against an independent recomputation from the per-model rows
the notebook recorded: cells, saturation widths, counts, ceiling heads, fits and the verdict rules."""

import math

import numpy as np
import pytest

import figure_checks

NOTEBOOK = "05_trained_synthetic"
LEVEL = 0.95
CEILING = 1 - 1 / math.e
BARS = {"copy": 0.99, "reversal": 0.99, "qsa": 0.99, "mq_recall": 0.99, "high_rank": 0.99}

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics(NOTEBOOK)


@pytest.fixture(scope="module")
def values(metrics):
    return metrics["values"]


def task_n_values(p, task):
    """The lengths a task is trained at, as the parameters cell documents: LONG_N_VALUES for copy and reversal only."""
    return p["N_VALUES"] + (p["LONG_N_VALUES"] if task in ("copy", "reversal") else [])


def by_cell(models):
    cells = {}
    for row in models:
        cells.setdefault((row["task"], row["n"]), []).append(row)
    return cells


def recompute_cell(rows, bar):
    """(usable, saturation d_qk) from one cell's model rows, by hand: every model that did not diverge counts
    (stopped by its rule or at the step cap); the saturation width is the smallest trained width whose seed mean
    makes 95 % of the rise from the smallest to the largest trained width."""
    rows = [r for r in rows if not r["diverged"]]
    top = max(r["d_qk"] for r in rows)
    at_top = [r for r in rows if r["d_qk"] == top]
    usable = len(at_top) >= 3 and all(r["test_accuracy"] >= bar for r in at_top)
    means = {}
    for d in sorted({r["d_qk"] for r in rows}):
        accs = [r["test_accuracy"] for r in rows if r["d_qk"] == d]
        if len(accs) >= 3:
            means[d] = sum(accs) / len(accs)
    if not means:
        return usable, None
    widths = sorted(means)
    first, last = means[widths[0]], means[widths[-1]]
    if last <= first:
        return usable, float(widths[0])
    return usable, float(min(d for d in widths if means[d] >= first + LEVEL * (last - first)))


def test_quick_mode_resolves_the_documented_defaults(metrics):
    p = metrics["params"]
    assert metrics["mode"] == "quick"
    assert p["N_VALUES"] == [8, 12, 16] and p["D_QK"] == [1, 2, 4, 8] and p["N_SEEDS"] == 3
    assert p["LONG_N_VALUES"] == [24]
    assert p["STEPS"] == 200 and p["D_MODEL"] == 16 and p["PATIENCE"] == 4


def test_every_model_row_is_complete_and_in_bounds(metrics, values):
    p = metrics["params"]
    models = values["models"]
    assert {(r["task"], r["n"]) for r in models} == {(t, n) for t in p["TASKS"] for n in task_n_values(p, t)}
    for r in models:
        assert r["d_qk"] in p["D_QK"] and 0 <= r["test_accuracy"] <= 1 and r["stop_step"] <= p["STEPS"]
        assert r["model_seed"] in range(p["SEED"], p["SEED"] + p["N_SEEDS"])
        for measure in ("hardmax_rank", "numerical_rank"):
            assert all(1 <= v <= r["n"] + 1e-9 for v in r[measure]), (measure, r)
    for (task, n), rows in by_cell(models).items():
        widths = {r["d_qk"] for r in rows}
        assert {min(p["D_QK"]), max(p["D_QK"])} <= widths, "both ends of the grid are trained first"
        for d in widths:
            assert len([r for r in rows if r["d_qk"] == d]) == p["N_SEEDS"]


def test_cells_match_a_recomputation_from_the_model_rows(values):
    cells = {(c["task"], c["n"]): c for c in values["cells"]}
    recomputed = by_cell(values["models"])
    assert set(cells) == set(recomputed)
    for key, rows in recomputed.items():
        usable, star = recompute_cell(rows, BARS[key[0]])
        assert cells[key]["usable"] == usable, key
        assert cells[key]["d_star"] == star, key
        if usable:
            assert cells[key]["d_star_low"] <= star <= cells[key]["d_star_high"]
            assert star in cells[key]["d_qk_trained"], "a saturation width is a trained width, never interpolated"
        else:
            assert math.isnan(cells[key]["d_star_low"]) if isinstance(cells[key]["d_star_low"], float) else \
                cells[key]["d_star_low"] is None


def test_counts_match_the_model_rows(values):
    models, cells = values["models"], values["cells"]
    assert values["ch5_models"] == len(models)
    assert values["ch5_converged"] == sum(r["converged"] for r in models)
    assert values["ch5_not_converged"] == sum(not r["converged"] for r in models)
    excluded = [c for c in cells if not c["usable"]]
    assert values["ch5_cells_excluded"] == len(excluded)
    assert values["ch5_models_in_excluded"] == sum(len(rows) for key, rows in by_cell(models).items()
                                                   if key in {(c["task"], c["n"]) for c in excluded})
    assert values["ch5_points_trained"] == len({(r["task"], r["n"], r["d_qk"]) for r in models})
    usable = {key for key, rows in by_cell(models).items() if recompute_cell(rows, BARS[key[0]])[0]}
    assert values["ch5_cells_usable"] == len(usable) and values["ch5_cells"] == len(by_cell(models))
    for task in {r["task"] for r in models}:
        assert values[f"ch5_{task}_usable"] == len([k for k in usable if k[0] == task])


def test_heads_above_the_ceiling_match_the_model_rows(values):
    above = [(r["task"], r["n"], r["d_qk"], r["model_seed"], h) for r in values["models"] if not r["diverged"]
             for h, (hard, num) in enumerate(zip(r["hardmax_rank"], r["numerical_rank"]))
             if hard > CEILING * r["n"] or num > CEILING * r["n"]]
    assert values["ch5_heads_above"] == len(above) == len(values["above_ceiling"])


def test_fits_match_an_independent_least_squares(values):
    for task, verdict in values["verdicts"].items():
        usable = sorted((c["n"], c["d_star"]) for c in values["cells"] if c["task"] == task and c["usable"]
                        and c["d_star"] is not None)
        fits = {row["form"]: row for row in values["fits"] if row["task"] == task}
        if len(usable) < 3:
            assert not fits and verdict["answer"] == "untestable"
            continue
        n, y = np.array([u[0] for u in usable], float), np.array([u[1] for u in usable], float)
        b, a = np.polyfit(np.log(n), y, 1)
        assert fits["log"]["a"] == pytest.approx(a, abs=1e-6) and fits["log"]["b"] == pytest.approx(b, abs=1e-6)
        c = float(np.linalg.lstsq(n[:, None], y, rcond=None)[0][0])
        assert fits["linear"]["c"] == pytest.approx(c, rel=1e-6)
        c = float(np.linalg.lstsq(np.sqrt(n)[:, None], y, rcond=None)[0][0])
        assert fits["sqrt"]["c"] == pytest.approx(c, rel=1e-6)
        best = min(fits.values(), key=lambda row: row["loss"])
        assert best["best"] and best["loss"] == pytest.approx(min(r["loss"] for r in fits.values()))


def test_verdicts_follow_the_rules(metrics, values):
    growth = {frozenset({"log"}): "log", frozenset({"log2"}): "log", frozenset({"log", "log2"}): "log",
              frozenset({"linear"}): "linear", frozenset({"sqrt"}): "sqrt"}
    for task, verdict in values["verdicts"].items():
        assert verdict["answer"] in {"log", "linear", "sqrt", "full", "untestable"}
        assert values[f"ch5_{task}_answer"] == verdict["answer"]
        assert values[f"ch5_{task}_verdict"]["sentence"] == verdict["sentence"]
        assert values[f"ch5_{task}_verdict"]["outcome"] == verdict["answer"]
        usable = [c for c in values["cells"] if c["task"] == task and c["usable"]]
        if len(usable) < 3 or metrics["params"]["N_SEEDS"] < 3:
            assert verdict["answer"] == "untestable" and "untestable at this budget" in verdict["sentence"]
            continue
        together = frozenset(r["form"] for r in values["fits"] if r["task"] == task and r["indistinguishable"])
        flips = verdict["robustness"]["flips"]
        assert verdict["robustness"]["perturbations"] >= metrics["params"]["N_SEEDS"], "every seed left out once"
        if verdict["answer"] == "full":
            assert not flips
            continue
        expected = growth.get(together, "untestable")
        if flips:   # a perturbation changed the answer: untestable, and the undecided answer is the fit's
            assert verdict["answer"] == "untestable" and verdict["undecided_outcome"] == expected, (task, flips)
            assert flips[0]["perturbation"] in verdict["sentence"]
        else:
            assert verdict["answer"] == expected, (task, together)
    assert all(task in values["ch5_headline"].lower() for task in metrics["params"]["TASKS"])
    assert metrics["not_run"] == []


def test_fresh_seed_check_retrains_each_decisive_width_on_unused_seeds(metrics, values):
    p = metrics["params"]
    fresh = values["fresh_seed_check"]
    assert {r["task"] for r in fresh} == set(p["TASKS"])
    chapter_seeds = {r["model_seed"] for r in values["models"]} | {r["data_seed"] for r in values["models"]}
    for task in p["TASKS"]:
        rows = [r for r in fresh if r["task"] == task]
        usable = sorted((c["n"], c) for c in values["cells"] if c["task"] == task and c["usable"]
                        and c["d_star"] is not None)
        n = usable[-1][0] if usable else max(task_n_values(p, task))
        widths = {r["d_qk"] for r in rows}
        assert all(r["n"] == n for r in rows) and max(p["D_QK"]) in widths
        if usable:                       # the saturation width and the trained width below it are retrained
            cell = usable[-1][1]
            below = [d for d in cell["d_qk_trained"] if d < cell["d_star"]]
            assert {cell["d_star"], *below[-1:]} <= widths
        assert len(rows) == p["N_SEEDS"] * len(widths)
        assert not {r["model_seed"] for r in rows} & chapter_seeds  # fresh: never trained in the phase diagram
        assert f"{task} at n = {n}" in values["ch5_fresh_text"]
    table = values["fresh_seed_table"]
    agree = sum(r["fresh_reaches"] == r["chapter_reaches"] for r in table)
    assert values["ch5_fresh_text"].startswith(f"they agree at {agree} of {len(table)} retrained width")


def test_the_bridge_matches_the_law_recomputed_from_the_model_rows(values):
    """Every head's law inputs are in bounds, and each bridge row's widths are the law (`helpers.margin`, tested
    against closed forms and Monte Carlo in tests/unit/test_margin.py) recomputed from the recorded model rows."""
    from helpers import margin

    models = values["models"]
    for r in models:
        for L, half, mass, least in zip(r["logit_scale"], r["logit_half_range"], r["target_mass"],
                                        r["target_mass_min"]):
            assert 0 <= half <= L and 0 <= least <= mass <= 1 + 1e-6, r
    cells = {(c["task"], c["n"]): c for c in values["cells"]}
    bridge = values["bridge"]
    one_target = {k for k, c in cells.items() if k[0] in ("copy", "reversal", "high_rank") and c["usable"]}
    assert {(b["task"], b["n"]) for b in bridge} == one_target
    for b in bridge:
        at = [r for r in models if (r["task"], r["n"], r["d_qk"]) == (b["task"], b["n"], b["d_star"])]
        assert b["d_star"] == cells[(b["task"], b["n"])]["d_star"] and b["seeds"] == len(at)
        rand = [margin.random_code_dim(b["n"], r["logit_scale"][0], max(1 - r["target_mass"][0], 1e-6)) for r in at]
        assert b["d_rand"] == pytest.approx(float(np.median(rand)), rel=1e-9)
        assert b["ratio"] == pytest.approx(float(np.median([b["d_star"] / x for x in rand])), rel=1e-9)
        rows = b["n"] - math.ceil(b["n"] / 2) if b["task"] == "copy" else b["n"]
        lower = [margin.rank_lower_bound(rows, r["logit_scale"][0], max(1 - r["target_mass"][0], 1e-6)) for r in at]
        assert b["lower"] == float(np.median(lower)) and b["lower"] <= b["d_star"]
    for task in ("copy", "reversal", "high_rank"):
        assert values[f"ch5_{task}_law"]["outcome"] in {"tracks", "no_better", "untestable"}


def test_the_scalable_softmax_comparison_matches_the_model_rows(metrics, values):
    """Each compared cell's smallest width, in both arms, recomputed by hand from the recorded model rows; and each
    task's verdict follows the rule from them (a mixed or a missed-bar comparison is untestable)."""
    p = metrics["params"]
    assert p["SSMAX_N_VALUES"] == [12, 16] and p["SSMAX_S"] == 1.0
    scaled = by_cell(values["ssmax_models"])
    assert set(scaled) == {(t, n) for t in ("copy", "reversal") for n in (12, 16)}
    standard = by_cell(values["models"])
    rows = values["ssmax"]
    assert {(r["task"], r["n"]) for r in rows} == set(scaled)
    for row in rows:
        for arm, cells in (("standard", standard), ("scaled", scaled)):
            usable, d_star = recompute_cell(cells[(row["task"], row["n"])], BARS[row["task"]])
            assert row[f"{arm}_usable"] == usable
            assert row[f"{arm}_d_star"] == (d_star if usable else None)
    for task in ("copy", "reversal"):
        verdict = values[f"ch5_ssmax_{task}"]
        mine = [r for r in rows if r["task"] == task]
        if not all(r["standard_usable"] and r["scaled_usable"] for r in mine):
            assert verdict["outcome"] == "untestable" and "quality bar" in verdict["sentence"]
            continue
        narrower = [r["scaled_d_star"] < r["standard_d_star"] for r in mine]
        expected = "narrower" if all(narrower) else "not_narrower" if not any(narrower) else "untestable"
        flipped = verdict["evidence"].get("robustness", {}).get("flips")
        assert verdict["outcome"] == ("untestable" if flipped else expected)


def test_phase_figure_plots_the_seed_mean_accuracy_of_every_trained_cell(quick_book, metrics, values):
    """Figure 5.1's CSV: in each task's accuracy panel, the cell at (n, d_qk) is the mean test accuracy of the
    recorded models of that width (empty where none was trained)."""
    frame = figure_checks.load(quick_book, "fig-ch5-phase")
    p = metrics["params"]
    n_values, grid = sorted(set(p["N_VALUES"]) | set(p["LONG_N_VALUES"])), metrics["resolved"]["D_QK"]
    for task in metrics["params"]["TASKS"]:
        cells = figure_checks.cell_grid(frame, panel=f"{task}: accuracy")
        assert len(cells) == len(n_values) * len(grid)
        for i, n in enumerate(n_values):
            for j, d in enumerate(grid):
                accs = [r["test_accuracy"] for r in values["models"] if (r["task"], r["n"], r["d_qk"]) == (task, n, d)]
                expected = sum(accs) / len(accs) if accs else math.nan
                figure_checks.assert_points([cells[(i, j)]], [expected], f"{task}, n = {n}, d_qk = {d}")
