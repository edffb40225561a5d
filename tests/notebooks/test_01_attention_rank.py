"""Chapter 1's recorded numbers against their closed forms."""

import math

import pytest

import figure_checks
from helpers import plotting, theory

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("01_attention_rank")


def test_known_matrices_have_their_closed_form_ranks(metrics):
    n = metrics["params"]["N"]
    known = {row["matrix"]: row for row in metrics["values"]["known_matrices"]}
    for measure in ("numerical@1e-03", "numerical@1e-08", "hardmax", "effective", "stable"):
        assert known["uniform"][measure] == pytest.approx(1.0)
        assert known["identity"][measure] == pytest.approx(n)
    assert known["causal softmax"]["numerical@1e-08"] == n, "lower-triangular, positive diagonal: full rank"
    assert known["random hardmax"]["numerical@1e-03"] == known["random hardmax"]["hardmax"]


def test_hardmax_rank_equals_distinct_columns_everywhere(metrics):
    assert metrics["values"]["ch1_hardmax_agreement"] == 100.0


def test_softmax_is_numerically_full_rank_at_a_tight_tolerance(metrics):
    values = metrics["values"]
    assert values["sigma_ratio"] > 1e-14
    assert values["ch1_rank_tol_1e8"] >= values["ch1_rank_tol_1e3"]
    assert values["det_exact"] > 0


def test_bound_fraction_is_the_exact_formula(metrics):
    n = metrics["params"]["N"]
    assert metrics["values"]["ch1_bound_fraction"] == pytest.approx(theory.expected_hardmax_rank(n) / n)


def test_numerical_rank_approaches_hardmax_rank_when_cold(metrics):
    values = metrics["values"]
    sweep = values["tolerance_sweep"]
    coldest = max(row["scale"] for row in sweep)
    cold = {row["measure"]: row["rank_over_n"] for row in sweep if row["scale"] == coldest}
    hottest = min(row["scale"] for row in sweep)
    hot = {row["measure"]: row["rank_over_n"] for row in sweep if row["scale"] == hottest}
    assert abs(cold["numerical@1e-03"] - values["ch1_hardmax_fraction"]) < 0.15
    assert hot["numerical@1e-01"] < cold["numerical@1e-01"]


def test_near_uniform_attention_counts_at_most_d_h_plus_one_directions(metrics):
    """Standard scale, d_model = n = 64: second-order terms stay under 1e-3, so rank_1e-3 <= d_h + 1, with equality
    far below d_h* = (s / 1e-3)^2 (about 250 here, with s about 1 / 64)."""
    values = metrics["values"]
    table = {row["d_head"]: row for row in values["d_head_rule"]}
    assert all(row["max"] <= row["ceiling"] == min(d + 1, metrics["params"]["N"]) for d, row in table.items())
    assert all(row["min"] == row["ceiling"] for d, row in table.items() if d <= 4)
    assert 120 < values["ch1_dstar"] < 500, "s within a factor sqrt(2) of 1 / d_model"
    assert values["ch1_dh_rule"]["outcome"] in {"about", "about for small d_h"}


def test_tolerance_figure_plots_the_recorded_sweep(quick_book, metrics):
    """Figure 1.3's CSV: each curve is the recorded mean rank / n per logit scale of its measure, the red line the
    recorded hardmax fraction, and the grey line 1 - 1/e."""
    frame = figure_checks.load(quick_book, "fig-ch1-tolerance")
    drawn = figure_checks.series(frame, "line")
    sweep = metrics["values"]["tolerance_sweep"]
    measures = dict.fromkeys(row["measure"] for row in sweep)
    assert len(drawn) == len(measures)
    for measure in measures:
        rows = [(r["scale"], r["rank_over_n"]) for r in sweep if r["measure"] == measure]
        figure_checks.assert_points(drawn[plotting.measure_text(measure, powers=True)], rows, measure)
    lines = figure_checks.series(frame, "hline")
    assert lines["hardmax rank (any scale)"][0, 1] == pytest.approx(metrics["values"]["ch1_hardmax_fraction"],
                                                                      rel=figure_checks.CSV_RTOL)
    assert lines["$1 - 1/e$"][0, 1] == pytest.approx(1 - math.exp(-1), rel=figure_checks.CSV_RTOL)
