"""Chapter 2's recorded numbers: the barrier formulas against their own Monte Carlo checks (quick mode)."""

import math

import pytest

import figure_checks
from helpers import theory
from helpers.experiments import ch02_low_rank_barrier as chapter

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("02_low_rank_barrier")


def test_uniform_model_mean_within_its_confidence_interval(metrics):
    z = metrics["values"]["uniform_mean_z"]
    assert z, "no uniform-model points recorded"
    assert max(abs(v) for v in z.values()) < 4.0, z
    assert sum(abs(v) < 1.96 for v in z.values()) >= len(z) - 1, "at most one point outside its 95% interval"


def test_uniform_model_variance_matches_exact_formula(metrics):
    z = metrics["values"]["uniform_variance_z"]
    assert max(abs(v) for v in z.values()) < 4.0, z


def test_every_attention_model_is_below_the_bound(metrics):
    rows = metrics["values"]["mc_rank_over_n_vs_bound"]
    models = {r["model"] for r in rows}
    assert {"uniform", "orthonormal", "gaussian", "sphere_keys"} <= models
    for r in rows:
        assert r["bound_over_n"] == pytest.approx(theory.expected_hardmax_rank(r["n"]) / r["n"])
        if r["model"] != "uniform":
            se = (r["ci_high_over_n"] - r["ci_low_over_n"]) / (2 * 1.96)
            assert (r["mc_rank_over_n"] - r["bound_over_n"]) / se < 4.0, r
            assert r["mc_rank_over_n"] <= 1.03 * r["bound_over_n"], r


def test_gap_grows_with_n_for_gaussian_keys_at_small_dh(metrics):
    rows = [r for r in metrics["values"]["mc_rank_over_n_vs_bound"] if r["model"] == "orthonormal"]
    d_min = min(r["d_head"] for r in rows)
    curve = sorted((r["n"], r["mc_rank_over_n"] / r["bound_over_n"]) for r in rows if r["d_head"] == d_min)
    assert curve[-1][1] < curve[0][1] - 0.1, "the long-key bias lowers rank / bound as n grows"


def test_long_keys_win_more_and_concentration_band_covers(metrics):
    v = metrics["values"]
    assert v["ch2_win_corr"] > 0.5
    assert v["ch2_win_top_decile"] > 1.5 and v["ch2_win_bottom_decile"] < 0.5
    assert v["ch2_mcd_cov"] >= 100 * (1 - v["ch2_delta"]) - 5
    assert v["ch2_limit_fraction"] == pytest.approx(1 - math.exp(-1))
    assert v["ch2_var_limit"] == pytest.approx(math.exp(-1) - 2 * math.exp(-2))
    assert abs(v["ch2_eq_diff"]) < 4 * v["ch2_eq_se"] + 1e-9


def test_derivation_checked_by_enumeration(metrics):
    assert metrics["values"]["enumeration_difference_n3"] == "0"


def test_barrier_figure_plots_the_recorded_means_and_the_closed_form_bound(quick_book, metrics):
    """Figure 2.1's CSV: in each panel the bound curve is 1 - (1 - 1/n)^n at every plotted n (computed here by
    hand), and each d_h curve is the recorded mean hardmax rank / n of its attention model."""
    frame = figure_checks.load(quick_book, "fig-barrier")
    summary = metrics["values"]["summary"]
    for model, title in chapter.ATTENTION_MODELS:
        bound = figure_checks.series(frame, "line", panel=title)[r"bound $B(n)/n$"]
        figure_checks.assert_points(bound[:, 1], [1 - (1 - 1 / n) ** n for n in bound[:, 0]], f"{title}: bound")
        d_heads = sorted({r["d_head"] for r in summary if r["model"] == model})
        curves = figure_checks.series(frame, "line", panel=title)
        for d in d_heads:
            rows = sorted((r["n"], r["rank_over_n"]) for r in summary if r["model"] == model and r["d_head"] == d)
            figure_checks.assert_points(curves[f"$d_h$ = {d}"], rows, f"{title}, d_h = {d}")
