"""helpers.train: the loss falls on synthetic tasks, the NaN guard, the schedule, the history table."""

import math

import pytest
import torch

from helpers import data
from helpers.errors import ArgumentError
from helpers.models import build_model
from helpers.train import TrainingDiverged, evaluate, final, lr_factor, train


def tiny(d, **options):
    return build_model(d_model=32, n_heads=2, n_layers=2, pos="learned", seed=0, **{**d.model_fields(), **options})


@pytest.mark.parametrize("name", ["sorting", "copy"])
def test_loss_falls_within_a_small_budget(name):
    d = data.load(name, 12, n_train=512, n_test=64)
    model = tiny(d)
    history = train(model, d, steps=120, batch_size=32, lr=3e-3, eval_every=0, progress=False)
    losses = history[history.metric == "test_loss"].value.tolist()
    assert len(losses) == 2
    assert losses[1] < 0.8 * losses[0], losses
    assert final(history, "test_accuracy") > 0.2
    assert evaluate(model, d.test_x, d.test_y)["loss"] == pytest.approx(losses[1], rel=1e-5)


def test_image_classification_runs():
    d = data.load("digits", 16, n_train=64, n_test=32)
    model = build_model(d_model=16, n_heads=2, n_layers=1, seed=0, **d.model_fields())
    history = train(model, d, steps=5, batch_size=16, progress=False, rank_every=5, rank_measures=("hardmax",))
    assert set(history.metric) >= {"train_loss", "lr", "test_loss", "test_accuracy", "rank_hardmax"}


def test_nan_guard_fires_on_a_huge_learning_rate():
    d = data.load("reversal", 8, n_train=64, n_test=8)
    model = tiny(d)
    with pytest.raises(TrainingDiverged, match=r"loss became (nan|inf).*lower lr"):
        train(model, d, steps=50, batch_size=16, lr=1e30, warmup=0, clip=None, progress=False)


def test_history_is_tidy_with_ranks_and_deterministic():
    d = data.load("reversal", 8, n_train=64, n_test=8)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    runs = []
    for _ in range(2):
        model = tiny(d, dropout=0.1)
        runs.append(train(model, d, steps=10, batch_size=16, eval_every=5, rank_every=5, seed=3, progress=False,
                          callbacks=[lambda step, m: [{"metric": "custom", "value": step}]]))
    assert torch.equal(torch.get_rng_state(), state)
    a, b = runs
    assert list(a.columns) == ["step", "metric", "value", "layer", "head"]
    assert a.equals(b)
    ranks = a[a.metric == "rank_numerical"]
    assert sorted(ranks.step.unique()) == [0, 5, 10]
    assert len(ranks) == 3 * 2 * 2  # steps x layers x heads
    assert ranks.value.between(1, 8).all()
    assert a[a.metric == "test_loss"].layer.isna().all()
    assert a[a.metric == "custom"].value.tolist() == [0, 5, 10]
    assert torch.get_num_threads() >= 1


def test_schedule_warms_up_then_decays():
    factors = [lr_factor(s, 100, 10) for s in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert all(x >= y for x, y in zip(factors[10:], factors[11:]))
    assert factors[-1] < 0.01
    assert lr_factor(100, 100, 10, final=0.1) == pytest.approx(0.1)
    assert math.isclose(lr_factor(55, 100, 10), 0.5, abs_tol=1e-9)


@pytest.mark.parametrize("options,name", [
    (dict(steps=0), "steps"), (dict(lr=-1.0), "lr"), (dict(batch_size=2.0), "batch_size"),
    (dict(rank_measures=("trace",)), "rank_measures"), (dict(clip=0), "clip"), (dict(threads=0), "threads"),
])
def test_bad_arguments_fail_before_training(options, name):
    d = data.load("reversal", 8, n_train=8, n_test=8)
    with pytest.raises(ArgumentError, match=f"Argument {name}:"):
        train(tiny(d), d, progress=False, **options)
