"""Chapter 1's recorded numbers against their closed forms."""

import pytest

from helpers import theory

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
    assert values["ch1_sigma_ratio"] > 1e-14
    assert values["ch1_rank_tol_1e8"] >= values["ch1_rank_tol_1e3"]
    assert values["ch1_det_exact"] > 0


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
    assert abs(cold["numerical, tol 0.001"] - values["ch1_hardmax_fraction"]) < 0.15
    assert hot["numerical, tol 0.1"] < cold["numerical, tol 0.1"]
