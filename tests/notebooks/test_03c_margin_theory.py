"""Chapter 3c's recorded numbers (quick mode): the Monte Carlo checks, the optimised codes and their bounds."""

import math

import pytest

import figure_checks
from helpers import margin

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("03c_margin_theory")


def test_definitions_are_recorded(metrics):
    definitions = metrics["values"]["definitions"]
    assert definitions["eps"] == metrics["params"]["EPS"] == margin.EPS
    assert "max |q . k|" in definitions["logit_scale"] and "mean over rows" in definitions["target_mass"]


def test_monte_carlo_rows_recompute_to_their_verdicts(metrics):
    v = metrics["values"]
    for row in v["mgf"]:     # the recorded closed form is the library's, and Monte Carlo lies within 4 s.e.
        assert row["exact"] == pytest.approx(margin.sphere_mgf(row["L"], row["d"]), rel=1e-12)
        assert abs(row["mc"] - row["exact"]) < 4 * row["se"], row
    assert v["ch3c_mgf_verdict"]["outcome"] == "agrees"
    for row in v["random_code"]:
        assert row["d"] == math.ceil(margin.random_code_dim(row["n"], row["L"], row["eps"]))
        assert row["formula_ratio"] == pytest.approx(margin.off_target_ratio(row["n"], row["L"], row["d"]), rel=1e-12)
        assert row["formula_ratio"] <= margin.odds(row["eps"]) * (1 + 1e-9)


def test_optimised_codes_respect_the_bounds_the_verdict_reports(metrics):
    v = metrics["values"]
    codes = v["codes"]
    free = [c for c in codes if c["pattern"] != "tied" and c["d_star"] is not None and not math.isnan(c["d_star"])]
    inside = [c for c in free if c["d_star"] >= c["d_lower"] and (c["pattern"] != "permutation" or
                                                                  c["d_star"] <= math.ceil(c["d_rand"]))]
    assert v["ch3c_bounds_verdict"]["evidence"]["held"] == len(inside)
    assert v["ch3c_bounds_verdict"]["outcome"] == ("holds" if len(inside) == len(free) else "fails")
    seeds = {c["seed"] for c in codes}
    assert len(seeds) >= 3
    for c in codes:
        assert c["d_lower"] == margin.rank_lower_bound(c["n"], c["L"], c["eps"], c["k"])


def test_growth_verdict_at_a_log_scale_needs_four_n(metrics):
    v = metrics["values"]
    ns = {c["n"] for c in v["codes"] if c["series"] == "L = c ln n"}
    verdict = v["ch3c_log_scale_growth"]
    if len(ns) < 4:
        assert verdict["outcome"] == "untestable" and "a verdict needs 4" in verdict["sentence"]
    else:
        assert verdict["outcome"] in {"log", "faster", "untestable"}


def test_log_figure_plots_the_recorded_widths_and_the_closed_form_slope(quick_book, metrics):
    """Figure 3c.3's CSV: the markers are the seed means of the recorded optimised widths at L = c ln n, against
    ln n, and the dashed line is c² ln n / (2 (c - 1)) computed here from the run's c."""
    frame = figure_checks.load(quick_book, "fig-3c-log")
    codes = [r for r in metrics["values"]["codes"] if r["series"] == "L = c ln n"]
    by_n = {}
    for r in codes:
        by_n.setdefault(r["n"], []).append(r["d_star"])
    means = [(math.log(n), sum(d) / len(d)) for n, d in sorted(by_n.items())]
    figure_checks.assert_points(figure_checks.series(frame, "points")["optimised"], means, "optimised widths")
    c = metrics["params"]["LOG_C"]
    line = figure_checks.series(frame, "line")["c² ln n / (2 (c - 1))"]
    figure_checks.assert_points(line[:, 1], c**2 / (2 * (c - 1)) * line[:, 0], "closed-form line")
    assert sorted(math.exp(x) for x in line[:, 0]) == pytest.approx(sorted(by_n), rel=1e-9)
