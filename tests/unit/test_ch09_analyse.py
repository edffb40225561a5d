"""Chapter 09's analyse(P) at tiny sizes (one short window of the real model), and every verdict rule on inputs
built for each outcome."""

import pytest
from chapter_checks import analyse_in_private_store, check_notebook_against

from helpers import parameters, theory
from helpers.experiments import ch09_pretrained_model as chapter


def tiny_params(**overrides):
    P = parameters.validate(MODE=("quick", parameters.mode), SEED=(0, parameters.seed))
    P.update(CORPORA=["shakespeare"], N_VALUES=[32, 16], WINDOWS=1, TOLERANCES=[1e-2], SCHEDULER=None)
    P.update(overrides)
    return chapter.resolve(P)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return analyse_in_private_store(chapter, tiny_params(), tmp_path_factory)


def test_resolve_sorts_n_and_always_adds_the_headline_tolerance():
    P = tiny_params()
    assert P.N_VALUES == [16, 32] and P.TOLERANCES == [1e-2, 1e-3]
    assert tiny_params(TOLERANCES=None).TOLERANCES == [1e-2, 1e-3, 1e-5, 1e-8]


def test_full_mode_runs_its_sweep_on_a_process_pool():
    assert tiny_params().SCHEDULER is None                                          # quick: in-process
    assert tiny_params(MODE="full", SCHEDULER=None).SCHEDULER == "processes"       # full: one worker per core
    assert tiny_params(MODE="full", SCHEDULER="local").SCHEDULER == "local"


def test_analyse_quotes_every_number_the_prose_pastes(result):
    check_notebook_against("09_pretrained_model", result)


def test_analyse_numbers_agree_with_their_frames(result):
    q = {k: v.value for k, v in result.quotes.items()}
    df = result.data["df"]
    assert len(df) == q["ch9_matrices"] == 2 * 2 * 6 * 12, "weights x n x layers x heads, one window"
    assert q["ch9_heads_total"] == 72 and 0 <= q["ch9_heads_above_top"] <= 72
    top = df[(df.n == 32) & (df.weights == "pretrained")]
    assert q["ch9_hm_head_max"] == pytest.approx((top.groupby(["layer", "head"]).hardmax.mean() / 32).max())
    bound = theory.expected_hardmax_rank(32) / 32
    assert q["ch9_heads_above_top"] == int(((top.groupby(["layer", "head"]).hardmax.mean() / 32) > bound).sum())
    barrier = result.verdicts["ch9_verdict_barrier"]
    assert barrier.evidence["points"] == q["ch9_layer_points"] == 2 * 6, "n x layers"
    assert (barrier.outcome == "holds") == (q["ch9_hm_layers_above"] == 0)
    assert q["ch9_sr_random_top"] >= 1.0, "the stable rank of a non-zero matrix is at least 1"
    assert q["ch9_example_n"] == 32
    examples = result.data["examples"]
    assert examples["low"]["hardmax"] <= examples["high"]["hardmax"] <= 32
    assert q["ch9_tol_smallest"] == "0.001" and "e-" not in q["ch9_tol_largest"]


def test_barrier_verdict():
    assert chapter.barrier_verdict(0, 12).outcome == "holds"
    failed = chapter.barrier_verdict(2, 12)
    assert failed.outcome == "fails" and failed.sentence == "fails for some layer means"


def test_numerical_verdict():
    assert chapter.numerical_verdict(7, 12).outcome == "mostly_above"
    assert chapter.numerical_verdict(7, 12).sentence == "mostly above the 0.63 n line"   # not "well above": 5 are below
    assert chapter.numerical_verdict(6, 12).outcome == "some_above"      # exactly half is not "more than half"
    assert chapter.numerical_verdict(0, 12).sentence == "below the 0.63 n line everywhere"


def test_scaling_verdict_uses_a_quarter_of_the_small_n_value():
    assert chapter.scaling_verdict(0.4, 0.49).outcome == "proportional"
    assert chapter.scaling_verdict(0.4, 0.29).outcome == "slower"
    assert chapter.scaling_verdict(0.4, 0.51).outcome == "faster"
    assert chapter.scaling_verdict(0.0, 0.0).outcome == "proportional", "a flat zero curve is proportional"


def test_layer_trend_verdict():
    assert chapter.layer_trend_verdict(0.5, 0.2).outcome == "falls"
    assert chapter.layer_trend_verdict(0.2, 0.2).outcome == "flat"


def test_offset_name():
    assert chapter.offset_name(-1) == "the previous token"
    assert chapter.offset_name(1) == "the next token"
    assert chapter.offset_name(0) == "its own token"
    assert chapter.offset_name(-3) == "the token 3 places before it"
