"""Chapter 08's analyse(P) at tiny sizes, and every verdict rule on inputs built for each outcome."""

import math

import pytest
from chapter_checks import analyse_in_private_store, check_notebook_against

from helpers import parameters, theory
from helpers.experiments import ch08_where_it_breaks as chapter
from helpers.parameters import ParameterError


def tiny_params(**overrides):
    P = parameters.validate(MODE=("quick", parameters.mode), SEED=(0, parameters.seed))
    P.update(N=16, D_HEAD=16, TEMPERATURES=[1e-4, 1.0, 100.0], TRIALS=2, DEPTH=2, TASKS=["reversal"],
             TRAIN_STEPS=3, TRAIN_SEEDS=1, SCHEDULER=None)
    P.update(overrides)
    return chapter.resolve(P)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return analyse_in_private_store(chapter, tiny_params(), tmp_path_factory)


def test_analyse_quotes_every_number_the_prose_pastes(result):
    check_notebook_against("08_where_it_breaks", result, left_out=("ch8_copy_",))  # TASKS=["reversal"] here
    assert not any(name.startswith("ch8_copy_") for name in result.quotes), "a task not run is not quoted"


def test_analyse_numbers_agree_with_their_frames_and_closed_forms(result):
    q = {k: v.value for k, v in result.quotes.items()}
    assert q["ch8_barrier"] == pytest.approx(theory.expected_hardmax_rank(16))
    assert q["ch8_id_hm"] == 16 and q["ch8_prev_hm"] == 15, "identity: n, previous-token: n - 1"
    assert q["ch8_prev_st"] == pytest.approx(8.0, rel=1e-3), "stable rank n / 2"
    assert q["ch8_ucausal_hm"] == 1 and q["ch8_ucausal_num8"] == 16, "uniform causal: hardmax 1, invertible"
    assert q["ch8_causal_hm_expected"] == pytest.approx(17 / 2)
    assert result.verdicts["ch8_closed_match"].outcome == "match"
    assert result.verdicts["ch8_bounds"].outcome == "hold" and q["ch8_bound_holds"] == 100
    trained = result.frames["trained_heads"]
    assert len(trained) == 2 * 2 * 2, "init and trained x 2 layers x 2 heads"
    assert q["ch8_heads_total"] == 4 and 0 <= q["ch8_break_trained"] <= 4
    assert q["ch8_threshold_over_n"] * 16 == pytest.approx(chapter.breaking_threshold(16, 32))
    depth = result.frames["depth"]
    assert len(depth) == len(chapter.POSITIONS) * len(chapter.ARCHS) * 2 * (2 + 1)
    assert (depth.residual >= 0).all() and (depth.residual <= 1 + 1e-9).all()
    assert set(result.frames["rank_vs_temperature"].ratio) == {1e-4, 1.0, 100.0}


def test_resolve_checks_linked_parameters_before_any_work():
    with pytest.raises(ParameterError, match="D_HEAD"):
        tiny_params(D_HEAD=15)                              # odd: no sin/cos pairs
    with pytest.raises(ParameterError, match="D_HEAD"):
        tiny_params(D_HEAD=2, N=64)                         # the previous-token head's row 0 misses column 0


def test_closed_form_verdict():
    assert chapter.closed_form_verdict([16, 8.0], [16, 8.0]).outcome == "match"
    assert chapter.closed_form_verdict([16, 8.0 + 5e-3], [16, 8.0]).outcome == "match"     # within 1e-3 (1 + 8)
    assert chapter.closed_form_verdict([8.02], [8.0]).outcome == "mismatch", "off by 0.02 > 1e-3 (1 + 8)"
    bad = chapter.closed_form_verdict([16, 8.2], [16, 8.0])
    assert bad.outcome == "mismatch" and "only 1 of 2 entries" in bad.sentence
    assert chapter.closed_form_verdict([], []).outcome == "mismatch"


def test_bounds_verdict():
    assert chapter.bounds_verdict(1.0).outcome == "hold"
    failed = chapter.bounds_verdict(0.75)
    assert failed.outcome == "violated" and "25 %" in failed.sentence


def test_lukewarm_verdict():
    assert chapter.lukewarm_verdict(45.0, 40.6).outcome == "exceeds"
    assert chapter.lukewarm_verdict(30.0, 40.6).outcome == "below"


def test_breaking_threshold_is_three_standard_errors_above_the_mean():
    n, examples = 16, 32
    se = math.sqrt(theory.hardmax_rank_variance(n) / examples)
    assert chapter.breaking_threshold(n, examples) == pytest.approx(theory.expected_hardmax_rank(n) + 3 * se)


def test_trained_verdict():
    one = chapter.trained_verdict({"reversal": 3, "copy": 0}, 16)
    assert one.outcome == "breaks" and one.sentence == "3 of 16 trained heads break the barrier, all of them on reversal"
    two = chapter.trained_verdict({"reversal": 3, "sorting": 1}, 16)
    assert two.sentence.endswith("on reversal and sorting")
    none = chapter.trained_verdict({"reversal": 0}, 8)
    assert none.outcome == "holds" and none.sentence == "none of the 8 trained heads breaks the barrier"


def test_unlearned_sentence_names_the_tasks_below_the_bar():
    assert chapter.unlearned_sentence({"copy": 1.0, "reversal": 0.95}) == "every task was learned (at least 90 % test accuracy)"
    one = chapter.unlearned_sentence({"copy": 1.0, "recall": 0.188})
    assert one.startswith("recall (19 % test accuracy) was not learned (the bar is 90 %)") and "that task" in one
    two = chapter.unlearned_sentence({"sorting": 0.5, "recall": 0.2, "copy": 0.9})   # 0.9 is at the bar: learned
    assert two.startswith("sorting (50 % test accuracy) and recall (20 % test accuracy) were not learned")
    assert "copy" not in two and "those tasks" in two


def test_where_broken_sentence_separates_permutation_tasks_from_the_others():
    assert chapter.where_broken_sentence({"reversal": 4, "copy": 0}) == (
        "heads broke the barrier only on reversal, whose solution is a permutation of the positions")
    assert chapter.where_broken_sentence({"reversal": 0, "copy": 0}) == "no trained head broke the barrier"
    assert chapter.where_broken_sentence({"reversal": 2, "copy": 1}) == (
        "heads broke the barrier on reversal and copy, not only where the solution is a permutation")


def test_collapse_verdict():
    assert chapter.collapse_verdict(1e-12, 0.5).outcome == "prevented"
    assert chapter.collapse_verdict(1e-12, 0.01).outcome == "collapses"
    assert chapter.collapse_verdict(0.2, 0.5).outcome == "no_collapse"
    assert "e-" not in chapter.collapse_verdict(3.7e-7, 0.5).sentence, "no e-notation in prose"


def test_trained_verdict_counts_only_tasks_that_were_learned():
    gated = chapter.trained_verdict({"reversal": 3, "copy": 1}, 16, {"reversal": 0.5, "copy": 0.95})
    assert gated.outcome == "breaks" and gated.evidence["breaking"] == 1, "reversal did not learn: its heads do not count"
    none = chapter.trained_verdict({"reversal": 3}, 8, {"reversal": 0.5})
    assert none.outcome == "untestable" and "untestable at this budget" in none.sentence
    # per-task heads: the unlearned task's heads leave the denominator too (1 of 8 copy heads, not 1 of 16)
    per_task = chapter.trained_verdict({"reversal": 3, "copy": 1}, {"reversal": 8, "copy": 8},
                                       {"reversal": 0.5, "copy": 0.95})
    assert per_task.evidence["heads"] == 8 and per_task.sentence.startswith("1 of 8 trained heads")


def test_general_barrier_and_causal_verdicts():
    holds = chapter.general_barrier_verdict({"identity": 30.0, "previous-token": 35.0}, 40.6, 64)
    assert holds.outcome == "holds"
    refuted = chapter.general_barrier_verdict({"identity": 64.0, "previous-token": 35.0}, 40.6, 64)
    assert refuted.outcome == "fails" and "identity head is above it" in refuted.sentence
    assert chapter.causal_verdict(64.0, 32.0, 64).outcome == "full_rank"
    assert chapter.causal_verdict(63.0, 32.0, 64).outcome == "not_full"
