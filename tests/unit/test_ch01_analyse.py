"""Chapter 01's analyse(P) at tiny sizes, and every verdict rule on inputs built for each outcome."""

import math
import re

import pandas as pd
import pytest
import torch

from helpers import attention, parameters, rank, theory
from helpers.experiments import ch01_attention_rank as chapter
from helpers.parameters import ParameterError

from chapter_pattern import resolved_params, assert_notebook_follows_the_pattern


def tiny_params(**overrides):
    return resolved_params(chapter, **{**dict(N=64, D_HEAD=8, TRIALS=4, SCALES=6), **overrides})


@pytest.fixture(scope="module")
def result():
    return chapter.analyse(tiny_params())


def test_analyse_quotes_every_number_the_prose_pastes(result):
    assert_notebook_follows_the_pattern("01_attention_rank", result)
    texts = [q.text() for q in result.quotes.values()] + [v.sentence for v in result.verdicts.values()]
    assert not [t for t in texts if re.search(r"\d ?e-?\d|\$", t)], "no e-notation and no maths in glued text"


def test_known_matrices_have_their_closed_form_ranks(result):
    known = result.data["known"]
    for measure in ("numerical@1e-03", "numerical@1e-08", "hardmax", "effective", "stable"):
        assert known.loc["uniform", measure] == pytest.approx(1.0)
        assert known.loc["identity", measure] == pytest.approx(64)
    assert known.loc["causal softmax", "numerical@1e-08"] == 64, "lower triangular, positive diagonal: full rank"
    assert known.loc["random hardmax", "numerical@1e-03"] == known.loc["random hardmax", "hardmax"]


def test_spectrum_and_sweep_agree_with_an_independent_numpy_count(result):
    A = result.data["A"].numpy()
    import numpy as np

    sigma = np.linalg.svd(A, compute_uv=False)
    assert result.quotes["ch1_rank_tol_1e3"].value == int((sigma > 1e-3 * sigma[0]).sum())
    assert result.frames["sigma_ratio"] == pytest.approx(sigma[-1] / sigma[0], rel=1e-6)
    assert result.quotes["ch1_sigma_ratio"].value == chapter.power_text(sigma[-1] / sigma[0]), "the ratio, as glued"
    sweep = result.frames["tolerance_sweep"]
    assert set(sweep.measure) == set(rank.labels(("numerical", "effective", "stable"), chapter.TOLERANCES))
    assert sweep.scale.nunique() == 6 and (sweep.scale == 1.0).any(), "the usual scale is on the grid"
    cold = sweep[sweep.scale == sweep.scale.max()].set_index("measure").rank_over_n
    assert abs(cold["numerical@1e-03"] - result.quotes["ch1_hardmax_fraction"].value) < 0.2
    assert result.quotes["ch1_bound_fraction"].value == pytest.approx(theory.expected_hardmax_rank(64) / 64)
    assert result.quotes["ch1_hardmax_agreement"].value == 100.0 and result.verdicts["ch1_agreement"].outcome == "agree"


def test_d_head_rule_table_and_crossover(result):
    table = result.frames["d_head_rule"]
    assert list(table.d_head) == [1, 2, 4, 8, 16, 32]             # powers of two below n = 64 (d_h = 8 among them)
    assert (table.ceiling == table.d_head + 1).all() and (table.draws == 4).all()
    # d_model = 64: second-order terms (size s^2 / 2, about 1e-4) stay below 1e-3, so at most d_h + 1 count
    assert (table["max"] <= table.ceiling).all(), "first order: at most d_h + 1 directions above 10^-3"
    assert (table.loc[table.d_head <= 8, "min"] == table.ceiling[table.d_head <= 8]).all(), "exactly d_h + 1 << d_h*"
    assert result.verdicts["ch1_dh_rule"].outcome in {"about", "about for small d_h"}
    # standard scale, d_model = n: the entries of L / T have standard deviation about 1 / d_model
    assert result.quotes["ch1_logit_sd"].value == pytest.approx(1 / 64, rel=0.3)
    assert result.quotes["ch1_dstar"].value == pytest.approx((result.quotes["ch1_logit_sd"].value / 1e-3) ** 2)


def test_rank_rule_grid():
    assert chapter.rule_d_heads(64, 16) == [1, 2, 4, 8, 16, 32]
    assert chapter.rule_d_heads(64, 24) == [1, 2, 4, 8, 16, 24, 32]
    assert chapter.rule_d_heads(16, 16) == [1, 2, 4, 8]
    assert chapter.rule_d_heads(1024, 16)[-1] == chapter.RULE_MAX_D_HEAD


def test_resolve_checks_that_the_usual_scale_is_on_the_grid():
    assert tiny_params(SCALES=11).SCALES == 11
    with pytest.raises(ParameterError, match="SCALES"):
        tiny_params(SCALES=10)


def rule_table(means, maxima, ceilings=(2, 3, 5)):
    return pd.DataFrame({"d_head": [c - 1 for c in ceilings], "ceiling": list(ceilings), "mean": means,
                         "max": maxima, "draws": [8] * len(ceilings)})


def test_d_head_rule_verdict_outcomes():
    about = chapter.d_head_rule_verdict(rule_table([2.0, 3.0, 4.8], [2, 3, 5]))
    assert about.outcome == "about" and about.evidence["d_heads_above"] == 0
    assert about.sentence == ("in none of the 24 draws is the numerical rank at tolerance 10⁻³ above dₕ + 1, and its "
                              "mean is within 10 % of dₕ + 1 at every dₕ from 1 to 4")
    small = chapter.d_head_rule_verdict(rule_table([2.0, 3.0, 3.5], [2, 3, 4]))
    assert small.outcome == "about for small d_h"
    assert small.sentence.endswith("within 10 % of dₕ + 1 for dₕ from 1 to 2 (at dₕ = 4 it is 70 % of it)")
    at_most = chapter.d_head_rule_verdict(rule_table([1.5, 2.0, 3.0], [2, 3, 4]))
    assert at_most.outcome == "at most" and "(at dₕ = 1, 2 and 4 it is from 60 % to 75 % of it)" in at_most.sentence
    mixed = chapter.d_head_rule_verdict(rule_table([1.5, 3.0, 3.0], [2, 3, 4]))
    assert mixed.outcome == "mixed" and "at dₕ = 2 (" in mixed.sentence
    exceeds = chapter.d_head_rule_verdict(rule_table([2.0, 3.0, 4.9], [2, 4, 5]))
    assert exceeds.outcome == "exceeds" and exceeds.sentence.startswith("at 1 of 3 head dimensions some draw")
    one = chapter.d_head_rule_verdict(rule_table([2.0, 1.0], [2, 2], ceilings=(2, 3)))
    assert "for dₕ = 1 (at dₕ = 2 it is 33 % of it)" in one.sentence


def test_agreement_verdict():
    assert chapter.agreement_verdict(8, 8).sentence == "the two computations agree on all 8 random matrices"
    some = chapter.agreement_verdict(7, 8)
    assert some.outcome == "disagree" and some.sentence.endswith("only 7 of 8 random matrices")


def test_first_order_rule_on_a_constructed_head():
    """Logits of rank 1 and size 1e-4: the softmax is uniform plus a rank-1 term, so exactly 2 directions count."""
    a = torch.linspace(-1, 1, 12, dtype=torch.float64)
    logits = 1e-2 * torch.outer(a, a.flip(0))                                  # (12, 12), rank 1, entries <= 0.01
    A = attention.softmax_attention(logits, 1.0)
    assert int(rank.numerical_rank(A, rtol=1e-3)) == 2 == 1 + 1
    assert int(rank.numerical_rank(A, rtol=1e-12)) > 2, "yet the matrix is not exactly of rank 2"
    assert math.isclose(float(A.sum()), 12.0)


def test_hot_end_and_causal_quotes_match_an_independent_count(result):
    """The prose: hotter softmax drives every count towards 1, a tight tolerance later; the causal hardmax rank."""
    import numpy as np

    sweep = result.frames["tolerance_sweep"]
    hottest = sweep[sweep.scale == sweep.scale.min()].set_index("measure").rank_over_n
    assert result.quotes["ch1_scale_min"].value == pytest.approx(0.1)
    assert result.quotes["ch1_frac_tol1e3_hottest"].value == hottest["numerical@1e-03"]
    # beta = 0.1, d_h = 8: first-order singular values about 0.1 s / sqrt(8), below 1e-3, so only the uniform direction
    assert result.quotes["ch1_frac_tol1e3_hottest"].value * 64 == pytest.approx(1.0)
    # second-order terms (about (0.1 s)^2, above 1e-8) still count: more than d_h + 1 directions at 1e-8
    assert result.quotes["ch1_frac_tol1e8_hottest"].value * 64 > 8 + 1
    logits = result.data["logits"].numpy()
    masked = np.where(np.tril(np.ones_like(logits, dtype=bool)), logits, -np.inf)   # row i sees keys 0..i
    assert result.quotes["ch1_causal_hardmax"].value == len(set(masked.argmax(axis=1)))


def test_d_head_rule_falls_short_before_the_crossover(result):
    """The prose: the smallest of the d_h singular values spreads, so the rank misses d_h + 1 long before d_h*."""
    table = result.frames["d_head_rule"].set_index("d_head")
    assert 32 < result.quotes["ch1_dstar"].value
    assert table.loc[32, "max"] < table.loc[32, "ceiling"], "at d_h = n / 2 no draw reaches d_h + 1"
