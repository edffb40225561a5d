"""Chapter 07's recorded numbers: compression at full rank is lossless, interventions behave as constructed."""

import pytest

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("07_model_reduction")


def test_compression_at_full_rank_leaves_the_loss_unchanged(metrics):
    curve = metrics["values"]["compression_curve"]
    r_max = max(row["r"] for row in curve)
    for row in curve:
        assert row["qk_rank_max"] <= row["r"], "a truncated W_q W_k^T has rank above r"
        if row["r"] == r_max:
            assert row["loss"] == pytest.approx(row["base_loss"], abs=1e-4)


def test_uncompressed_models_beat_chance(metrics):
    for row in metrics["values"]["controlled_summary"]:
        assert row["base_loss"] < row["chance_loss"]


def test_compression_curve_per_task_and_summary(metrics):
    tasks = {(r["domain"], r["n"]) for r in metrics["values"]["compression_curve"]}
    assert len(tasks) >= 2, "at least two tasks"
    assert {(r["domain"], r["n"]) for r in metrics["values"]["compression_summary"]} == tasks
    assert {(r["domain"], r["n"]) for r in metrics["values"]["controlled_summary"]} == tasks


def test_controlled_interventions_are_no_ops_at_full_rank_and_unit_temperature(metrics):
    for row in metrics["values"]["controlled_curve"]:
        if (row["intervention"] == "attention_rank" and row["level"] == row["n"]) or \
                (row["intervention"] == "temperature" and row["level"] == 1.0):
            assert abs(row["increase"]) < 1e-4, row


def test_rank_limit_really_limits_the_rank_of_bidirectional_attention(metrics):
    rows = [r for r in metrics["values"]["controlled_curve"]
            if r["intervention"] == "attention_rank" and r["domain"] in ("mnist", "digits")]
    if not rows:
        pytest.skip("no bidirectional (image) task in this run")
    for row in rows:
        assert row["numerical"] <= row["level"] + 1e-9


def test_uniform_attention_has_effective_rank_one_without_a_mask(metrics):
    rows = [r for r in metrics["values"]["controlled_curve"]
            if r["intervention"] == "temperature" and r["level"] == 0.0 and r["domain"] in ("mnist", "digits")]
    tasks = metrics["params"]["TASKS"] or metrics["resolved"]["TASKS"]
    assert bool(rows) == any(t.split("/")[0] in ("mnist", "digits") for t in tasks), "an image task ran: rows expected"
    for row in rows:
        assert row["effective"] == pytest.approx(1.0, abs=1e-6)


def test_forcing_rank_one_attention_hurts_some_task(metrics):
    assert max(r["rank1_increase"] for r in metrics["values"]["controlled_summary"]) > 0


def test_needed_rank_and_pareto_rule_are_within_their_grids(metrics):
    d_heads = {r["d_head"] for r in metrics["values"]["scratch_curves"]}
    for row in metrics["values"]["pareto_rule"]:
        assert row["enough_d_head"] in d_heads
        assert row["params_enough"] <= row["params_max"]
    for row in metrics["values"]["controlled_summary"]:
        assert 1 <= row["needed_rank"] <= row["n"]
