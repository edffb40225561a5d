"""Chapter 5's recorded numbers: training lowers the loss, ranks stay in bounds, saturation d_h are swept values."""

import math

import pytest

pytestmark = pytest.mark.notebooks

NOTEBOOK = "05_trained_synthetic"
MEASURES = ("hardmax", "numerical", "effective")


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics(NOTEBOOK)


@pytest.fixture(scope="module")
def summary(metrics):
    return metrics["values"]["summary"]


def test_every_task_n_and_d_head_was_trained(metrics, summary):
    values = metrics["values"]
    points = {(row["task"], row["n"], row["d_head"]) for row in summary}
    tasks = metrics["params"]["TASKS"]
    assert {task for task, _, _ in points} == set(tasks)
    assert len(points) * values["ch5_n_seeds"] == len(summary) == values["ch5_n_models"]
    assert values["ch5_n_min"] < values["ch5_n_max"] and values["ch5_dh_min"] < values["ch5_dh_max"]


def test_training_lowers_the_loss(summary):
    below_init = [row["test_loss"] < row["init_loss"] for row in summary]
    assert sum(below_init) >= 0.9 * len(summary), "training must lower the test loss for (almost) every model"
    best = {}
    for row in summary:
        key = (row["task"], row["n"])
        best[key] = min(best.get(key, math.inf), row["test_loss"])
    chance = summary[0]["chance_loss"]
    assert all(loss < chance for loss in best.values()), "the best model of each (task, n) beats a uniform guess"


def test_ranks_lie_between_one_and_n(summary):
    for row in summary:
        for measure in MEASURES:
            for stage in ("init", "final", "final_max"):
                assert 1.0 <= row[f"{measure}_{stage}"] <= row["n"] + 1e-9, (measure, stage, row)
            assert row[f"{measure}_final_max"] >= row[f"{measure}_final"] - 1e-9


def test_saturation_d_head_is_a_swept_value(metrics, summary):
    swept = {float(row["d_head"]) for row in summary}
    table = metrics["values"]["saturation"]
    assert {(row["task"], row["n"]) for row in table} == {(row["task"], row["n"]) for row in summary}
    for row in table:
        assert row["rank_saturation_d_head"] in swept
        assert row["hardmax_rank_saturation_d_head"] in swept
        if row["learned"]:
            assert row["accuracy_saturation_d_head"] in swept
            assert row["best_accuracy"] >= row["baseline_accuracy"] + 0.05
        else:
            assert row["accuracy_saturation_d_head"] is None  # NaN is stored as null
        assert row["log2_n"] == pytest.approx(math.log2(row["n"]))


def test_rank_over_n_at_largest_d_head_and_change(metrics, summary):
    values = metrics["values"]
    for row in values["rank_over_n_at_largest_d_head"]:
        for measure in MEASURES:
            assert 0 < row[f"{measure}_over_n"] <= 1
    for row in values["rank_change"]:
        for measure in MEASURES:
            assert -1 < row[f"{measure}_change_mean"] < 1
            assert row[f"{measure}_change_min"] <= row[f"{measure}_change_mean"] <= row[f"{measure}_change_max"]
    verdict = values["ch5_barrier_headline"]
    broken = values["ch5_barrier_broken_cases"]
    assert verdict in {"Yes, on average over heads", "For single heads only", "Not here, by the hardmax rank"}
    assert verdict.startswith("Yes") == (broken > 0)
    largest_head = max(row["hardmax_max_head_over_n"] for row in values["rank_over_n_at_largest_d_head"])
    assert (largest_head > values["ch5_barrier"]) == (broken > 0)


def test_ablation_varies_width_heads_and_layers(metrics):
    ablation = metrics["values"]["ablation"]
    params = metrics["params"]
    assert {row["factor"] for row in ablation} == {"width", "heads", "layers"}
    for factor, key in (("width", "d_model"), ("heads", "n_heads"), ("layers", "n_layers")):
        knobs = {row[key] for row in ablation if row["factor"] == factor}
        assert len(knobs) >= 2, factor
    for row in ablation:
        assert row["n"] == params["ABLATION_N"] and row["d_head"] == params["ABLATION_D_HEAD"]
    heads = metrics["values"]["per_head_deepest"]
    depth = max(row["n_layers"] for row in ablation)
    assert {row["layer"] for row in heads} == set(range(depth))
