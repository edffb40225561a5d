"""Chapter 5's scalable-softmax comparison: the decision rule and its robustness, on constructed models whose
smallest widths are worked out by hand (read by a simple stand-in for the chapter's cell table)."""

import math

import pandas as pd
import pytest

from helpers.experiments import ch05_ssmax as ssmax

GRID = [1, 2, 3, 4, 6, 8, 12, 16]
BAR = 0.99


def models(task="copy", curves=None, seeds=(0, 1, 2)):
    """Rows of one arm: curves {n: {d_qk: accuracy or per-seed accuracies}}."""
    rows = []
    for n, curve in curves.items():
        for d, acc in curve.items():
            per_seed = acc if isinstance(acc, (list, tuple)) else [acc] * len(seeds)
            rows += [{"task": task, "n": n, "d_qk": d, "model_seed": s, "test_accuracy": a}
                     for s, a in zip(seeds, per_seed)]
    return pd.DataFrame(rows)


def cells_of(frame, relaxed):
    """Stand-in for the chapter's cell table: d_star is the smallest trained width whose seed mean reaches BAR;
    a cell is usable when its largest width does, with at least 3 seeds (2 when relaxed)."""
    rows = []
    for (task, n), part in frame.groupby(["task", "n"]):
        mean = part.groupby("d_qk").test_accuracy.mean()
        seeds = part.model_seed.nunique()
        usable = bool(mean.iloc[-1] >= BAR and seeds >= 3 - int(relaxed))
        d_star = float(mean[mean >= BAR].index.min()) if usable else math.nan
        rows.append({"task": task, "n": n, "usable": usable, "d_star": d_star, "d_star_at_first": False,
                     "d_qk_trained": sorted(mean.index), "d_star_low": d_star, "d_star_high": d_star,
                     "spread": False, "seeds_at_d_star": seeds, "seed_count": seeds,
                     "top_passing": 3, "top_models": 3, "top_d_qk": int(mean.index.max())})
    return pd.DataFrame(rows)


def curve(d_star, widths=(1, 3, 4, 6, 8, 12, 16)):
    """Chance below d_star, solved from it on."""
    return {d: (1.0 if d >= d_star else 0.5) for d in widths}


def verdict(standard, scaled):
    return ssmax.ssmax_verdict("copy", models(curves=standard), models(curves=scaled), cells_of, GRID)


def test_decide_reads_every_n():
    assert ssmax.decide({64: 8, 128: 12}, {64: 3, 128: 4}) == "narrower"
    assert ssmax.decide({64: 8, 128: 12}, {64: 8, 128: 16}) == "not_narrower"   # equal counts as not narrower
    assert ssmax.decide({64: 8, 128: 12}, {64: 3, 128: 12}) == "untestable"     # mixed
    assert ssmax.decide({64: math.nan}, {64: 3}) == "untestable"
    assert ssmax.decide({}, {}) == "untestable"


def test_narrower_by_two_grid_steps_at_every_n_is_decided():
    v = verdict({64: curve(8), 128: curve(12)}, {64: curve(3), 128: curve(4)})
    assert v.outcome == "narrower"
    assert v.evidence["standard"] == [8, 12] and v.evidence["scaled"] == [3, 4]
    # 3 seeds left out + each of the 4 widths moved down and up (all have both neighbours on GRID)
    assert v.evidence["robustness"]["perturbations"] == 3 + 4 * 2
    assert v.sentence == ("copy needs a narrower width with the scalable softmax at every n compared (2 to 3 "
                          "against 7 to 8 at n = 64 and 4 against 9 to 12 at n = 128)")


def test_one_grid_step_never_decides():
    v = verdict({64: curve(8), 128: curve(12)}, {64: curve(6), 128: curve(4)})
    assert v.outcome == "untestable"
    assert v.evidence["undecided_outcome"] == "narrower"
    flips = [f["perturbation"] for f in v.evidence["robustness"]["flips"]]
    assert flips == ["the width at n = 64 (without the scalable softmax) moved from 8 to 6",
                     "the width at n = 64 (with the scalable softmax) moved from 6 to 8"]
    assert ssmax.conclusion({"copy": v}) == (
        "For copy the data cannot decide (the smallest width with the scalable softmax is narrower at 2 of 2 n for "
        "copy; a seed left out, a grid step or a missed quality bar changes the answer).")
    missed = verdict({64: curve(8)}, {64: {1: 0.5, 16: 0.8}})
    assert ssmax.conclusion({"copy": missed, "reversal": missed}) == (
        "For copy and reversal the data cannot decide (the smallest width with the scalable softmax is not compared, "
        "since a cell misses its quality bar, for copy and reversal; a seed left out, a grid step or a missed quality "
        "bar changes the answer).")


def test_a_seed_that_carries_the_difference_makes_it_untestable():
    scaled = {64: {1: 0.5, 3: 0.5, 4: (1.0, 1.0, 0.975), 6: 0.9, 8: 0.9, 12: 1.0, 16: 1.0}, 128: curve(4)}
    v = verdict({64: curve(8), 128: curve(12)}, scaled)
    assert v.evidence["scaled"] == [4, 4]                          # mean 0.9917 at 4 reaches the bar
    assert v.outcome == "untestable"
    # without seed 0 or 1 the mean at 4 is 0.9875: the smallest width jumps to 12, above the standard 8
    assert {f["perturbation"] for f in v.evidence["robustness"]["flips"]} == {"seed 0 left out", "seed 1 left out"}


def test_wider_heads_with_the_scalable_softmax_refute_the_prediction():
    v = verdict({64: curve(4), 128: curve(4)}, {64: curve(12), 128: curve(16)})
    assert v.outcome == "not_narrower"
    assert ssmax.conclusion({"copy": v}) == ("It fails for copy: the scalable softmax does not make the head "
                                             "narrower.")


def test_a_cell_that_misses_its_bar_is_named():
    v = verdict({64: curve(8), 128: {1: 0.5, 16: 0.9}}, {64: curve(3), 128: {1: 0.5, 16: 0.8}})
    assert v.outcome == "untestable"
    assert v.sentence.endswith("at n = 128 neither arm meets its quality bar")
    v = verdict({64: curve(8)}, {64: {1: 0.5, 16: 0.8}})
    assert v.sentence.endswith("at n = 64 only the standard softmax meets the quality bar")


def test_comparison_table_pairs_the_arms_with_their_logit_scales():
    standard, scaled = cells_of(models(curves={64: curve(8)}), False), cells_of(models(curves={64: curve(3)}), False)
    laws = pd.DataFrame([{"task": "copy", "n": 64, "d_qk": d, "L": L} for d, L in ((8, 10.0), (8, 12.0), (8, 30.0),
                                                                                   (16, 40.0))])
    scaled_laws = pd.DataFrame([{"task": "copy", "n": 64, "d_qk": 3, "L": 20.0}, {"task": "copy", "n": 64,
                                                                                  "d_qk": 16, "L": 50.0}])
    table = ssmax.comparison_table(standard, scaled, laws, scaled_laws)
    row = table.iloc[0]
    assert (row.standard_d_star, row.scaled_d_star) == (8, 3)
    assert (row.standard_L, row.standard_L_top, row.scaled_L, row.scaled_L_top) == (12.0, 40.0, 20.0, 50.0)
    assert ssmax.comparison_view(table, 1.0).shape == (1, 6)
    v = ssmax.ssmax_verdict("copy", models(curves={64: curve(8)}), models(curves={64: curve(3)}), cells_of, GRID)
    assert ssmax.verdicts_view({"copy": v}).loc["copy", "verdict"] == v.sentence
    assert ssmax.verdicts_view({}).index[0] == "no task was compared"
    assert "a logit scale 1.67 times that of" in ssmax.scale_sentence(table)   # 20 / 12, the seed medians
    assert "not run" in ssmax.comparison_view(pd.DataFrame(), 1.0).index[0]


@pytest.mark.parametrize("n_values", [[64, 128], [64]])
def test_compared_n_are_those_of_both_arms(n_values):
    standard = cells_of(models(curves={n: curve(8) for n in (32, 64, 128)}), False)
    scaled = cells_of(models(curves={n: curve(3) for n in n_values}), False)
    assert ssmax.compared_n(standard, scaled, "copy") == n_values
