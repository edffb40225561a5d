"""Chapter 3b's recorded numbers (quick mode): the identity, the predictor's error per grid point, the critical d_h."""

import pytest

import figure_checks
from helpers import theory

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("03b_predicting_rank")


def test_identity_holds_for_every_key_set(metrics):
    rows = metrics["values"]["identity"]
    assert len(rows) >= 6
    for r in rows:
        assert abs(r["measured"] - r["predicted"]) < 4 * r["combined_se"], r
    assert metrics["values"]["ch3b_identity_verdict"]["outcome"] == "agrees"


def test_predictor_error_recorded_per_grid_point_and_small(metrics):
    grid = metrics["values"]["grid"]
    assert {g["keys"] for g in grid} == {"gaussian", "sphere"}
    for g in grid:
        assert g["error"] == pytest.approx(g["predicted"] - g["mc"])
        # quick mode has few heads per point: allow the goal plus four standard errors of the Monte Carlo mean
        assert abs(g["error"]) < 0.02 + 4 * g["se"], g
    for g in grid:
        if g["d_head"] == 1:  # exact for both key families
            assert g["predicted"] == pytest.approx(theory.predicted_rank_fraction(g["n"], 1, g["keys"]))


def test_critical_dh_grows_with_n_for_gaussian_keys_and_not_for_sphere_keys(metrics):
    crit = metrics["values"]["critical_dh"]
    for eps in {c["eps"] for c in crit}:
        series = [c["d_star"] for c in sorted(crit, key=lambda c: c["n"]) if c["eps"] == eps]
        assert series == sorted(series) and series[-1] > 4 * series[0]
        for c in crit:  # the asymptotic form kappa(n) / (2 (e - 1) eps) is within a factor 1.5 of the search
            assert 1 / 1.5 < c["d_star"] / c["asymptotic"] < 1.5, c
    sphere = metrics["values"]["sphere_critical_dh"]
    for eps in {c["eps"] for c in sphere}:
        values = [c["d_star"] for c in sphere if c["eps"] == eps]
        assert max(values) - min(values) <= 1
    assert metrics["values"]["sphere_knees"], "the sphere-key knees are recorded"


def test_critical_figure_plots_the_recorded_critical_widths(quick_book, metrics):
    """Figure 3b.5's CSV: the curve of each ε in each panel is the recorded critical d_h by n, for Gaussian keys
    (left) and sphere keys (right)."""
    frame = figure_checks.load(quick_book, "fig-3b-critical")
    values = metrics["values"]
    for panel, key in (("Gaussian keys", "critical_dh"), ("sphere keys", "sphere_critical_dh")):
        drawn = figure_checks.series(frame, "line", panel=panel)
        for eps in dict.fromkeys(r["eps"] for r in values[key]):
            rows = [(r["n"], r["d_star"]) for r in values[key] if r["eps"] == eps]
            figure_checks.assert_points(drawn[f"ε = {100 * eps:g} %"], rows, f"{panel}, ε = {eps}")
