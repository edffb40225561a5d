"""Chapter 03's analyse(P) at tiny sizes, and every verdict rule on inputs built for each outcome."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers import theory
from helpers.experiments import ch03_saturation as chapter
from helpers.parameters import ParameterError

from chapter_pattern import analyse_in_private_store, assert_notebook_follows_the_pattern, resolved_params


def tiny_params(**overrides):
    tiny = dict(N_VALUES=[8, 16, 32, 64], D_HEADS=[1, 2, 4, 8, 16, 64], TRIALS=2, SVD_TRIALS=1, RTOL=1e-3,
                LOOSE=0.9, TIGHT=0.98, HULL_N_VALUES=[16], HULL_DIMS=[1, 2, 4], HULL_TRIALS=1, SCHEDULER=None)
    return resolved_params(chapter, **{**tiny, **overrides})


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return analyse_in_private_store(tmp_path_factory, chapter.analyse, tiny_params())


def test_analyse_quotes_every_number_the_prose_pastes(result):
    assert_notebook_follows_the_pattern("03_saturation", result)


def test_analyse_numbers_agree_with_their_frames_and_closed_forms(result):
    q = {k: v.value for k, v in result.quotes.items()}
    assert q["ch3_d1_max"] <= 2, "d_h = 1: each row picks the largest or the smallest key"
    assert q["ch3_hull_d2_asym"] == pytest.approx(2 * math.sqrt(2 * math.pi * math.log(16)))
    hull = result.frames["hull"]
    assert hull.loc[hull.d == 1, "fraction"].iloc[0] == pytest.approx(2 / 16), "points on a line: two vertices"
    curves = result.frames["rank_vs_dh"]
    gauss = curves[curves.series == chapter.GAUSS]
    assert (gauss.plateau == gauss.n.map(lambda n: theory.expected_hardmax_rank(int(n)))).all()
    assert q["ch3_pred_mae"] == pytest.approx(np.mean(np.abs((gauss.ratio - gauss.predicted)[gauss.d_head >= 16])))
    knees = result.frames["knees"]
    assert set(knees.series) == set(chapter.SERIES) and len(knees) == 4 * 4 * 2      # series x n x definitions
    loose = knees[(knees.series == chapter.GAUSS) & (knees.definition == "loose")].sort_values("n")
    assert q["ch3_knee_nmin"] == loose.knee.iloc[0] and q["ch3_knee_nmax"] == loose.knee.iloc[-1]
    assert q["ch3_loose_points"] == loose.knee.notna().sum()
    assert result.verdicts["ch3_verdict_loose"].outcome in {"faster", "log", "untestable"}
    assert result.data["fit_table"].shape == (6, 4)
    assert np.isfinite(result.data["fit_table"].fillna(0).to_numpy()).all(), "no inf cell in the table"


def test_resolve_checks_linked_parameters_before_any_work():
    with pytest.raises(ParameterError, match="TIGHT"):
        tiny_params(LOOSE=0.95, TIGHT=0.9)


def test_hull_bound_verdict_counts_points_below_the_bound():
    lb = np.array([0.2, 0.5, 0.9])
    n, trials = 100, 4
    se = np.sqrt(lb * (1 - lb) / (n * trials))
    frame = pd.DataFrame({"n": n, "d": [1, 2, 3], "fraction": lb - 2.9 * se, "lower_bound": lb})
    held = chapter.hull_bound_verdict(frame, trials)
    assert held.outcome == "holds" and held.sentence == "at every point"
    frame.loc[1, "fraction"] = lb[1] - 3.1 * se[1]       # one point beyond 3 standard errors below
    failed = chapter.hull_bound_verdict(frame, trials)
    assert failed.outcome == "fails" and failed.sentence == "at only 2 of 3 points"
    assert failed.evidence == {"held": 2, "points": 3, "z": 3.0}


@pytest.mark.parametrize("trend, text", [(1.4237, "changes by a factor 1.42"), (1.0, "changes by a factor 1"),
                                         (float("nan"), "cannot be measured (it needs at least four knees on the grid)"),
                                         (None, "cannot be measured (it needs at least four knees on the grid)")])
def test_trend_text(trend, text):
    assert chapter.trend_text(trend) == text


def test_trend_sentence_reads_without_dangling_labels():
    assert chapter.trend_sentence(1.92, 1.97).endswith("changes by a factor 1.92 (loose) and changes by a factor 1.97 "
                                                      "(tight), where a factor of 1 means a straight line in log n")
    both_missing = chapter.trend_sentence(float("nan"), None)
    assert "(loose)" not in both_missing and "four knees" in both_missing
    assert "cannot be measured (it needs at least four knees on the grid) (tight)" in chapter.trend_sentence(1.5, None)


def test_dimension_text():
    assert chapter.dimension_text(6.0, [1, 2, 6, 8]) == "from dimension 6 on"
    assert chapter.dimension_text(None, [1, 2, 6, 8]) == "only beyond the largest dimension measured (8)"
