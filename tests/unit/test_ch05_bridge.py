"""Chapter 5's bridge to the margin law: the law's widths per model, the cell table, and its verdict, on
constructed models whose answers are worked out by hand."""

import math

import pandas as pd
import pytest

from helpers import margin
from helpers.experiments import ch05_bridge as bridge


def model(task="reversal", n=64, d_qk=8, seed=0, L=20.0, half=15.0, mass=0.9, heads=1, diverged=False):
    return {"task": task, "n": n, "d_qk": d_qk, "model_seed": seed, "test_accuracy": 1.0, "diverged": diverged,
            "logit_scale": [L] * heads, "logit_half_range": [half] * heads, "target_mass": [mass] * heads}


def test_target_rows_are_the_rows_that_read_a_key():
    assert [bridge.target_rows("copy", n) for n in (15, 16, 17)] == [7, 8, 8]   # positions ceil(n/2) .. n-1
    assert bridge.target_rows("reversal", 16) == bridge.target_rows("high_rank", 16) == 16


def test_law_rows_read_each_models_own_scale_and_mass():
    laws = bridge.law_rows(pd.DataFrame([model(mass=0.9), model(task="copy", L=3.0, mass=0.95),
                                         model(task="mq_recall"), model(diverged=True)]))
    assert list(laws.task) == ["reversal", "copy"]                  # other tasks and diverged models left out
    rev, cp = laws.iloc[0], laws.iloc[1]
    assert rev.eps == pytest.approx(0.1, rel=1e-12)
    assert rev.d_rand == margin.random_code_dim(64, 20.0, rev.eps)
    assert rev.lower == margin.rank_lower_bound(64, 20.0, rev.eps)
    assert rev.ratio == pytest.approx(8 / rev.d_rand, rel=1e-12)
    # at L = 3 no random code puts 0.95 on one key of 64: (n - 1) e^-L = 3.1 > eps / (1 - eps) = 0.053
    assert math.isinf(cp.d_rand) and cp.ratio == 0
    assert cp.lower == margin.rank_lower_bound(32, 3.0, cp.eps)   # copy: its 32 target rows
    with pytest.raises(ValueError, match="one head"):
        bridge.law_rows(pd.DataFrame([model(heads=2)]))


def test_a_mass_that_rounds_to_one_is_read_at_the_floor():
    laws = bridge.law_rows(pd.DataFrame([model(mass=1.0)]))
    assert laws.eps.iloc[0] == bridge.EPS_FLOOR


def cell(task="reversal", n=64, d_star=8, top=32, usable=True):
    return {"task": task, "n": n, "usable": usable, "d_star": float(d_star), "d_star_lowest": float(d_star),
            "d_star_at_first": False, "d_qk_trained": [1, d_star, top], "top_d_qk": top}


def test_bridge_table_takes_the_models_at_the_smallest_width_and_at_the_top():
    models = [model(d_qk=8, seed=s, L=L, mass=0.9) for s, L in enumerate((18.0, 20.0, 30.0))]
    models += [model(d_qk=32, seed=s, L=40.0, mass=0.99) for s in range(3)]
    models += [model(d_qk=1, seed=0, L=5.0, mass=0.2)]
    table = bridge.bridge_table(bridge.law_rows(pd.DataFrame(models)),
                                pd.DataFrame([cell(), cell(n=128, usable=False)]))
    assert len(table) == 1                                           # the unusable cell has no row
    row = table.iloc[0]
    assert (row.L, row.L_min, row.L_max, row.seeds) == (20.0, 18.0, 30.0, 3)
    d_rands = sorted(margin.random_code_dim(64, L, 0.1) for L in (18.0, 20.0, 30.0))
    assert row.d_rand == pytest.approx(d_rands[1]) and row.d_rand_min == pytest.approx(d_rands[0])
    assert row.ratio_max == pytest.approx(8 / d_rands[0])
    expected_inside = sum(margin.rank_lower_bound(64, L, 0.1) <= 8 <= math.ceil(margin.random_code_dim(64, L, 0.1))
                          for L in (18.0, 20.0, 30.0))
    assert row.inside == expected_inside
    # a bracket "5 to 8" (5 to 7 not trained) meets a band that ends at 5 or above
    bracket = bridge.bridge_table(bridge.law_rows(pd.DataFrame(models)), pd.DataFrame([{**cell(), "d_star_lowest": 5.0}]))
    assert bracket.inside.iloc[0] == sum(margin.rank_lower_bound(64, L, 0.1) <= 8 and
                                         5 <= math.ceil(margin.random_code_dim(64, L, 0.1)) for L in (18.0, 20.0, 30.0))
    assert row.wide_L == 40.0 and row.wide_eps == pytest.approx(0.01)


def test_bound_verdict_fails_when_a_head_is_narrower_than_any_code_can_be():
    # at L = 8 and mass 0.9 on one key of 64, the bound forces 2 dimensions (margin's own tests check the bound)
    assert margin.rank_lower_bound(64, 8.0, 0.1) == 2
    assert bridge.bound_verdict(bridge.law_rows(pd.DataFrame([model(d_qk=2, L=8.0)]))).outcome == "holds"
    verdict = bridge.bound_verdict(bridge.law_rows(pd.DataFrame([model(d_qk=2, L=8.0), model(d_qk=1, L=8.0)])))
    assert verdict.outcome == "violated" and "1 of 2 trained heads is narrower" in verdict.sentence
    assert bridge.bound_verdict(bridge.law_rows(pd.DataFrame([model(task="qsa")]))).outcome == "untestable"


def law_case(d_stars: dict, wide: dict, task="copy", top=32):
    """Constructed laws and bridge table: the smallest width per n, and the widest heads' d_rand per seed."""
    laws = pd.DataFrame([{"task": task, "n": n, "d_qk": top, "model_seed": s, "d_rand": r}
                         for n, rands in wide.items() for s, r in enumerate(rands)])
    table = pd.DataFrame([{"task": task, "n": n, "d_star": float(d), "top_d_qk": top} for n, d in d_stars.items()])
    return laws, table


FINE = list(range(1, 65))


def test_the_law_tracks_when_the_widest_heads_predict_the_growth_and_survives_every_perturbation():
    laws, table = law_case({16: 2, 64: 4, 256: 8}, {16: [2, 2, 2], 64: [4, 4, 4], 256: [8, 8, 8]})
    verdict = bridge.law_verdict("copy", laws, table, FINE)
    assert verdict.outcome == "tracks", verdict.sentence
    law, constant = bridge.prediction_errors([2, 4, 8], [2, 4, 8])
    assert law == 0 and constant == pytest.approx(math.log(2) * math.sqrt(2 / 3), rel=1e-12)   # by hand
    assert verdict.evidence["robustness"]["perturbations"] == 3 + 6    # 3 seeds left out, 3 widths moved both ways
    assert not verdict.evidence["robustness"]["flips"]


def test_one_seed_that_carries_the_prediction_makes_it_untestable():
    laws, table = law_case({16: 2, 64: 4, 256: 8}, {16: [2, 2, 2], 64: [4, 4, 4], 256: [8, 8, 100]})
    verdict = bridge.law_verdict("copy", laws, table, FINE)          # median 8 with all; 54 without seed 0 or 1
    assert verdict.outcome == "untestable" and "seed 0 left out" in verdict.sentence


def test_a_flat_prediction_does_no_better_than_the_constant():
    laws, table = law_case({16: 2, 64: 4, 256: 8}, {16: [4, 4, 4], 64: [4, 4, 4], 256: [4, 4, 4]})
    verdict = bridge.law_verdict("copy", laws, table, FINE)
    assert verdict.outcome == "no_better" and "no better than the best constant" in verdict.sentence
    assert bridge.law_verdict("copy", *law_case({16: 2, 64: 4}, {16: [2] * 3, 64: [4] * 3}), FINE).outcome == \
        "untestable"                                                   # two cells are too few


def test_efficiency_and_conclusion_follow_the_numbers():
    assert bridge.efficiency_text(pd.DataFrame({"ratio": [0.8, 1.3]})) == "about as efficient as"
    assert bridge.efficiency_text(pd.DataFrame({"ratio": [0.2, 0.3]})) == "more efficient than"
    assert bridge.efficiency_text(pd.DataFrame({"ratio": [3.0, 4.0]})) == "less efficient than"
    assert bridge.efficiency_text(pd.DataFrame({"ratio": [0.2, 4.0]})).startswith("sometimes")
    from helpers.results import Verdict
    table = pd.DataFrame({"task": ["high_rank"] * 2, "eps": [0.2, 0.3], "wide_eps": [0.01, 0.03]})
    text = bridge.law_conclusion({"copy": Verdict("untestable", "", "", {}),
                                  "high_rank": Verdict("no_better", "", "", {})}, table)
    assert "for copy the data cannot decide" in text and "a median 0.98 of their attention" in text
    assert "against 0.75 at the smallest width" in text
    assert bridge.law_conclusion({"copy": Verdict("tracks", "", "", {})}, table).startswith("For copy the law")
    mixed = bridge.law_conclusion({"copy": Verdict("untestable", "", "", {}), "reversal": Verdict("tracks", "", "", {}),
                                   "high_rank": Verdict("no_better", "", "", {})}, table)
    assert mixed.startswith("For reversal the law read off unconstrained heads predicts the growth")
    assert mixed.endswith("not a tested predictor for every task: for copy the data cannot decide (the table says "
                          "why); for high_rank the widest heads put a median 0.98 of their attention on the target, "
                          "against 0.75 at the smallest width, so they ask for more width than the narrow heads use.")


def test_the_bridge_table_shows_each_law_width_with_its_range_over_seeds_on_one_line():
    nb = "\u00a0"
    row = {"task": "copy", "n": 128, "d_qk_trained": [1, 4, 6, 32], "d_star": 6.0, "d_star_at_first": False,
           "seeds": 5, "L": 22.93, "eps": 0.27, "lower": 1.0, "inside": 5,
           **{f"{name}{end}": value for name, values in {"d_rand": (4.9, 4.34, 5.3), "ratio": (1.22, 1.1, 1.4),
                                                       "wide_d_rand": (5.7, 5.4, math.inf)}.items()
              for end, value in zip(("", "_min", "_max"), values)}}
    view = bridge.bridge_view(pd.DataFrame([row]))
    shown = view.loc[("copy", f"n{nb}={nb}128")]
    assert shown["smallest width"] == "5 to 6"            # width 5 was not trained: the bracket, not a point
    wj = "\u2060"   # a word joiner: no line break after the dash, only before the bracket
    assert shown["random-code width"] == f"4.9 (4.3–{wj}5.3)"
    assert shown["smallest / random-code width"] == f"1.2 (1.1–{wj}1.4)"
    assert shown["random-code width of the widest heads"] == f"5.7 (5.4–{wj}∞)"
    assert shown["target mass"] == "0.73" and shown["bracket meets the band"] == "5 of 5"   # 5 seeds
    assert "seeds" not in view


def test_up_to_saturation_keeps_the_widths_up_to_each_cells_smallest_width_and_nothing_without_a_model():
    models = [model(d_qk=d, seed=s, L=20.0 + s, mass=0.9) for d in (1, 8, 32) for s in range(3)]
    laws = bridge.law_rows(pd.DataFrame(models))
    kept = bridge.up_to_saturation(laws, pd.DataFrame([{"task": "reversal", "n": 64, "d_star": 8.0}]))
    assert list(kept.d_qk) == [1, 8]
    assert kept.ratio.iloc[1] == pytest.approx(sorted(8 / margin.random_code_dim(64, 20.0 + s, 0.1)
                                                      for s in range(3))[1])   # the seed median
    # no model of a bridge task (TASKS without copy, reversal and high_rank): no rows, the same columns
    empty = bridge.up_to_saturation(bridge.law_rows(pd.DataFrame([model(task="qsa")])), pd.DataFrame(
        columns=["task", "n", "d_star"]))
    assert empty.empty and list(empty.columns) == ["task", "n", "d_qk", "ratio"]
