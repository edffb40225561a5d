"""Chapter 06's recorded numbers: ranks within their bounds, causal attention full rank, models better than chance."""

import math

import pytest

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("06_real_data")


def test_every_domain_and_n_has_its_saturation_and_rank_fraction(metrics):
    summary = metrics["values"]["summary"]
    assert summary, "no (domain, n) summary recorded"
    for row in summary:
        for key in ("saturation_hardmax", "saturation_numerical", "saturation_effective", "saturation_loss",
                    "hardmax_over_n_at_max", "numerical_over_n_at_max", "effective_over_n_at_max"):
            assert key in row, f"{key} missing for {row['domain']}, n = {row['n']}"
        for m in ("hardmax", "numerical", "effective"):
            assert 0 < row[f"{m}_over_n_at_max"] <= 1.0 + 1e-9
            sat = row[f"saturation_{m}"]
            assert sat is None or 1 <= sat <= row["d_head_max"]
    n_seeds = metrics["params"]["N_SEEDS"] or metrics["resolved"]["N_SEEDS"]
    assert n_seeds >= (3 if metrics["mode"] == "full" else 1)
    assert all(row["seeds"] == n_seeds for row in summary), "every point averages all the run's seeds"


def test_ranks_of_every_layer_are_between_one_and_n(metrics):
    for row in metrics["values"]["ranks_per_layer"]:
        for m in ("hardmax", "numerical", "effective"):
            assert 1 - 1e-9 <= row[m] <= row["n"] + 1e-9, (m, row)


def test_trained_models_beat_chance(metrics):
    for row in metrics["values"]["curves_first_block"]:
        assert row["test_loss"] < row["chance_loss"], f"{row['domain']} n={row['n']} d_h={row['d_head']}"


def test_image_models_learn_to_classify(metrics):
    images = [r for r in metrics["values"]["curves_first_block"] if r["domain"] in ("mnist", "digits")]
    if not images:
        pytest.skip("no image domain in this run")
    assert max(r["test_accuracy"] for r in images) > 0.3  # chance is 0.1


def test_causal_attention_is_lower_triangular_with_positive_diagonal(metrics):
    causal = metrics["values"].get("causal_diagnostics")
    if not causal:
        pytest.skip("no language-model domain in this run")
    assert causal["upper_max"] == 0.0
    assert causal["diag_min"] > 0.0
    assert math.isfinite(causal["log10_det_mean"])
    assert causal["numerical@1e-03"] <= causal["numerical@1e-08"] <= causal["numerical@1e-12"] <= causal["n"]
    assert 1 <= causal["hardmax"] <= causal["n"]


def test_data_licences_are_stated(metrics):
    licences = {row["domain"]: row["source and licence"] for row in metrics["values"]["licences"]}
    assert set(licences) == {row["domain"] for row in metrics["values"]["summary"]}
    for domain, text in licences.items():
        assert {"shakespeare": "public domain", "mnist": "CC BY-SA", "digits": "BSD",
                "proteins": "ENA"}[domain] in text
