"""Chapter 02's analyse(P) at tiny sizes, and every verdict rule on inputs built for each outcome."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from helpers import parameters, seeding, theory
from helpers.experiments import ch02_low_rank_barrier as chapter
from helpers.experiments import ch02_low_rank_barrier_points as points

from chapter_pattern import resolved_params, analyse_in_private_store, assert_notebook_follows_the_pattern


def tiny_params(**overrides):
    return resolved_params(chapter, **{**dict(N_VALUES=[8, 16, 32], D_HEADS=[2, 8], TRIALS=4, DELTA=0.05, SCHEDULER=None), **overrides})


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return analyse_in_private_store(tmp_path_factory, chapter.analyse, tiny_params())


def test_analyse_quotes_every_number_the_prose_pastes(result):
    assert_notebook_follows_the_pattern("02_low_rank_barrier", result)


def test_analyse_numbers_agree_with_their_frames_and_closed_forms(result):
    q = {k: v.value for k, v in result.quotes.items()}
    assert q["ch2_limit_fraction"] == pytest.approx(1 - math.exp(-1))
    assert q["ch2_gap_limit"] == pytest.approx(1 / (2 * math.e))
    assert q["ch2_var_limit"] == pytest.approx(math.exp(-1) - 2 * math.exp(-2))
    assert q["ch2_bound_frac_nmax"] == pytest.approx(theory.expected_hardmax_rank(32) / 32)
    assert result.frames["enumeration_difference_n3"] == "0"
    summary = result.data["summary"]
    # every (model, n, d_h) point, with chapter 02's trial rule: `TRIALS` for n >= 256, proportionally more below
    assert len(summary) == 3 + 3 * 3 * 2
    uniform = summary[summary.model == "uniform"].set_index("n")
    assert uniform.loc[8, "trials"] == chapter.UNIFORM_TRIALS_FACTOR * 4 * 256 // 8
    assert summary[(summary.model == "gaussian") & (summary.n == 32)].trials.iloc[0] == 4 * 256 // 32
    rows = result.frames["mc_rank_over_n_vs_bound"]
    assert {"model", "n", "d_head", "mc_rank_over_n", "ci_low_over_n", "ci_high_over_n", "bound_over_n"} <= set(rows)
    assert q["ch2_points_total"] == 18 and 0 <= q["ch2_points_consistent"] <= 18
    excess = result.verdicts["ch2_excess_verdict"]
    assert excess.evidence["points"] == 18
    assert excess.evidence["threshold"] == pytest.approx(norm.isf(0.05 / 18))
    # the concentration table: coverage is the share of single uniform matrices within each half-width
    cover = result.data["concentration"]
    ranks = result.data["raw"].query("model == 'uniform' and n == 32")["rank"].to_numpy()
    width = theory.mcdiarmid_halfwidth(32, 0.05)
    assert cover.loc["McDiarmid", "coverage"] == pytest.approx(np.mean(np.abs(ranks - theory.expected_hardmax_rank(32)) <= width))
    assert q["ch2_conc_trials"] == ranks.size
    assert q["ch2_win_top_decile"] > q["ch2_win_bottom_decile"], "long keys win more often"


def test_chapter_two_uses_the_one_trials_rule():
    for n in (4, 8, 16, 64, 256, 512):   # powers of two: the former rule 16 * max(1, 256 // n), so the same matrices
        assert len(points.barrier_point("uniform", n, 2, 16, seed=0)) == 16 * max(1, 256 // n)
        assert len(points.equivalence_point(n, 2, 16, seed=0)) == 2 * 16 * max(1, 256 // n)  # two constructions
    assert len(points.barrier_point("uniform", 100, 2, 16, seed=0)) == seeding.trials_for(100, 16, reference_n=256,
                                                                                          minimum=16)


def test_resolve_fills_the_mode_defaults():
    P = parameters.validate(MODE=("full", parameters.mode), SEED=(0, parameters.seed))
    P.update(N_VALUES=None, D_HEADS=[128, 16], TRIALS=None, DELTA=0.05, SCHEDULER=None)
    P = chapter.resolve(P)
    assert P.N_VALUES == [8, 16, 32, 64, 128, 256, 512, 1024] and P.D_HEADS == [16, 128] and P.TRIALS == 16
    assert set(P.resolved) == {"N_VALUES", "TRIALS"}


def test_formulas_verdict():
    hold = chapter.formulas_verdict([0.5, -1.2], [0.3, 2.0])
    assert hold.outcome == "hold" and hold.evidence["comparisons"] == 4
    assert hold.evidence["threshold"] == pytest.approx(norm.isf(0.05 / 8))        # two-sided, 4 comparisons
    assert hold.sentence.startswith("the formulas hold: the largest deviation") and "2 standard errors" in hold.sentence
    off = chapter.formulas_verdict([0.5, -4.0], [0.3, 0.1])
    assert off.outcome == "off" and "beyond" in off.sentence


def test_excess_verdict():
    below = chapter.excess_verdict([-3.0, -1.5, -0.2])
    assert below.outcome == "below" and below.evidence["above"] == 0
    assert "the highest is 0.2 standard errors below it" in below.sentence and "-0" not in below.sentence
    above = chapter.excess_verdict([5.0, 0.1, -1.0])
    assert above.outcome == "above" and above.sentence.startswith("1 of 3 points lie significantly above")
    near = chapter.excess_verdict([2.0, 0.0])            # 2 comparisons: threshold isf(0.025) = 1.96 < 2
    assert near.outcome == "above"
    assert chapter.excess_verdict([1.9, 0.0]).outcome == "below"


def test_equivalence_verdict():
    assert chapter.equivalence_verdict(64, 0.4, 0.2, 0.5).outcome == "agree"
    assert chapter.equivalence_verdict(64, 0.7, 0.2, 0.5).outcome == "disagree"      # 3.5 standard errors
    assert chapter.equivalence_verdict(64, 0.1, 0.2, 0.001).outcome == "disagree"    # the distributions differ
    sentence = chapter.equivalence_verdict(64, -0.4, 0.2, 0.5).sentence
    assert sentence.startswith("The two constructions agree: at n = 64") and "-0" not in sentence


def test_concentration_verdict():
    assert chapter.concentration_verdict(1.0, 0.05).outcome == "covers"
    assert chapter.concentration_verdict(0.95, 0.05).outcome == "covers"
    misses = chapter.concentration_verdict(0.9, 0.05)
    assert misses.outcome == "misses" and "fewer than the promised 95 %" in misses.sentence


def test_barrier_verdict_counts_points_against_the_bound(result):
    summary = result.frames["summary"]
    ortho = summary[summary.model == "orthonormal"]
    verdict = result.verdicts["ch2_barrier_verdict"]
    consistent = int((ortho.ci_low <= ortho.bound).sum())
    assert verdict.evidence == {"consistent": consistent, "points": len(ortho)}
    assert verdict.outcome == ("holds" if consistent == len(ortho) else "fails")
    assert chapter.barrier_verdict(3, 4).outcome == "fails" and chapter.barrier_verdict(4, 4).outcome == "holds"
    assert chapter.barrier_verdict(0, 0).outcome == "untestable"
