"""Chapter 04's analyse(P) at tiny sizes, and every verdict rule on inputs built for each outcome."""


import numpy as np
import pandas as pd
import pytest

from helpers import english, parameters, theory
from helpers.experiments import ch04_random_attention as chapter
from helpers.parameters import ParameterError

from chapter_pattern import resolved_params, analyse_in_private_store, assert_notebook_follows_the_pattern


def tiny_params(**overrides):
    tiny = dict(N_VALUES=[16, 32], D_HEADS=[1, 2, 4, 8], INPUTS=None, D_MODEL=32, TRIALS=4, HEADS=2,
                LAYOUT_INPUT="gaussian", SCHEDULER=None)
    return resolved_params(chapter, **{**tiny, **overrides})


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return analyse_in_private_store(tmp_path_factory, chapter.analyse, tiny_params())


def test_analyse_quotes_every_number_the_prose_pastes(result):
    assert_notebook_follows_the_pattern("04_random_attention", result)


def test_analyse_numbers_agree_with_their_frames_and_closed_forms(result):
    q = {k: v.value for k, v in result.quotes.items()}
    assert q["ch4_n_holds"] + q["ch4_n_fails"] + q["ch4_n_mixed"] == q["ch4_n_conditions"]
    assert q["ch4_bound_top"] == pytest.approx(theory.expected_hardmax_rank(32) / 32)
    assert q["ch4_hard_gap"] == pytest.approx(q["ch4_bound_top"] - q["ch4_hard_ref_top"])
    assert q["ch4_hard_dmin_max"] <= 2.0, "d_h = 1: each row picks the largest or the smallest key"
    summary = result.frames["summary_table"].set_index("condition")
    assert summary.loc["hardmax rank (any scale)", "barrier holds?"] in {"yes (below)", "mixed"}
    # the counts cover only the conditions that can test the barrier: rank counts away from the near-uniform init scale
    names = {"hardmax rank (any scale)"} | {chapter.condition_name("softmax", m, s)
                                            for m in ("numerical@1e-02", "numerical@1e-03", "numerical@1e-05",
                                                      "numerical@1e-08") for s in ("unit", "raw")}
    tested = summary[~summary["barrier holds?"].str.startswith("not a test")]
    assert set(tested.index) == names and q["ch4_n_conditions"] == len(names) == 9
    assert q["ch4_n_not_tests"] == len(summary) - 9 == 10     # 4 init tolerances + effective and stable at 3 scales
    assert summary.loc[chapter.condition_name("softmax", "effective", "raw"), "barrier holds?"] == "not a test: soft measure"
    assert (summary.loc[chapter.condition_name("softmax", "numerical@1e-08", "init"), "barrier holds?"]
            == "not a test: near-uniform softmax")
    view = chapter.summary_view(result.frames["summary_table"])   # the chapter's table: the same cells, shorter labels
    nb = english.NO_BREAK   # a label stays on one line
    assert list(view.index) == [c.removeprefix("softmax ").replace(", tol", "").replace("hardmax rank", "hardmax")
                                .replace(" ", nb) for c in summary.index]
    assert "bound" not in view and view.shape == (len(summary), summary.shape[1] - 1)
    assert view.loc[f"numerical{nb}10⁻⁸,{nb}init", "barrier holds?"] == "not a test: near\u2011uniform"
    assert view.loc[f"effective{nb}rank,{nb}raw", "barrier holds?"] == f"not a test: soft{nb}measure"
    assert (view.loc[f"hardmax{nb}(any{nb}scale)", "barrier holds?"]
            == summary.loc["hardmax rank (any scale)", "barrier holds?"].replace(" (", nb + "("))
    top = result.frames["rank_over_n_at_largest_d_head"]
    assert set(top.d_head) == {8} and set(top.verdict) <= {"below", "above", "at"}
    exceed = result.verdicts["ch4_hard_exceedance"]
    assert exceed.evidence["points"] == len(result.data["hard"]) == 2 * 4 * 5     # n x d_h x inputs
    sat = result.frames["saturation_d_head"]
    assert set(sat.status) <= {"inside", "at_first"} and (sat.saturation_d_head <= 8).all()
    assert 0 <= q["ch4_init_violations"] <= q["ch4_init_points"]


def test_resolve_checks_linked_parameters_before_any_work():
    with pytest.raises(ParameterError, match="D_MODEL"):
        tiny_params(D_MODEL=4)                            # below the largest d_h
    with pytest.raises(ParameterError, match="D_HEADS"):
        tiny_params(D_HEADS=[3, 5], D_MODEL=32)            # fewer than two divisors of d_model


def test_full_mode_runs_its_sweeps_on_a_process_pool():
    assert tiny_params().SCHEDULER is None                                          # quick: in-process
    assert tiny_params(MODE="full", SCHEDULER=None).SCHEDULER == "processes"       # full: one worker per core
    assert tiny_params(MODE="full", SCHEDULER="local").SCHEDULER == "local"


def test_each_sweep_covers_every_n_at_once(monkeypatch, tmp_path):
    """One sweep per call (per layout for the layouts), so that a process pool or a cluster starts once."""
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    calls, real = [], chapter.run_sweep
    monkeypatch.setattr(chapter, "run_sweep", lambda name, point, configs, seeds, **options: calls.append(configs)
                        or real(name, point, configs, seeds, **options))
    chapter.rank_sweep([12, 16], [1, 2], ["gaussian"], 16, 8, [0])
    assert len(calls) == 1 and {c["n"] for c in calls[0]} == {12, 16}
    calls.clear()
    chapter.layout_sweep([12, 16], [1, 2], 2, 4, "gaussian", 8, [0])
    assert len(calls) == 2 and all({c["n"] for c in configs} == {12, 16} for configs in calls)


@pytest.mark.parametrize("value, se, outcome", [(0.55, 0.01, "below"), (0.62, 0.01, "at"), (0.70, 0.01, "above"),
                                                (0.611, 0.01, "below"), (0.613, 0.01, "at")])
def test_bound_verdict_uses_a_two_standard_error_margin(value, se, outcome):
    assert chapter.verdict(value, se, 0.632) == outcome


def test_condition_verdict():
    assert chapter.condition_verdict(["below", "below"]) == "below"
    assert chapter.condition_verdict(["above"] * 3) == "above"
    assert chapter.condition_verdict(["below", "above"]) == "mixed"
    assert chapter.condition_verdict(["at", "at"]) == "mixed"
    with pytest.raises(ValueError):
        chapter.condition_verdict([])


def test_falls_back_needs_three_standard_errors_plus_half_a_rank():
    assert chapter.falls_back(peak=10.0, peak_se=0.1, last=9.0)          # 1.0 > 0.3 + 0.5
    assert not chapter.falls_back(peak=10.0, peak_se=0.1, last=9.3)      # 0.7 < 0.8
    assert not chapter.falls_back(peak=10.0, peak_se=1.0, last=7.0)      # 3.0 < 3.5
    verdicts = [chapter.init_trend_verdict(10.0, 0.1, last) for last in (9.0, 9.9)]
    assert [v.outcome for v in verdicts] == ["falls", "flat"] and verdicts[0].sentence.startswith("falls back")


def test_running_maximum_drop_rule():
    se = np.full(4, 0.1)
    assert chapter.falls_below_running_max([1.0, 5.0, 4.0, 6.0], se)           # drop 1.0 > 3 sqrt2 0.1 + 0.5
    assert not chapter.falls_below_running_max([1.0, 5.0, 4.6, 6.0], se)       # drop 0.4
    assert not chapter.falls_below_running_max([1.0, 5.0, 4.15, 6.0], se)      # 0.85 < 0.92 (sqrt 2: a difference)
    assert not chapter.falls_below_running_max([1.0, 2.0, 3.0], np.zeros(3))    # rising


def test_exceedance_verdict_in_words():
    none = chapter.exceedance_verdict([-2.0, -0.5, 1.2])
    assert none.outcome == "never" and none.evidence["exceeding"] == 0
    assert none.sentence == ("none of the 3 points lies more than 3 standard errors above the bound for its sequence length "
                             "(the highest is 1.2 standard errors above it)")
    some = chapter.exceedance_verdict([4.0, -1.0])
    assert some.outcome == "exceeds" and some.sentence.startswith("1 of 2 points lie more than 3")
    below = chapter.exceedance_verdict([-1.5, -2.0])
    assert "1.5 standard errors below it" in below.sentence and "-" not in below.sentence


def test_saturation_edges_verdict():
    inside = pd.DataFrame({"condition": ["a", "a"], "n": [16, 32], "status": ["inside", "inside"]})
    assert chapter.saturation_edges_verdict(inside).outcome == "inside"
    edge = pd.DataFrame({"condition": ["a", "b"], "n": [16, 32], "status": ["inside", "at_first"]})
    verdict = chapter.saturation_edges_verdict(edge)
    assert verdict.outcome == "edge" and "b at n = 32" in verdict.sentence and verdict.evidence["at_edge"] == 1
