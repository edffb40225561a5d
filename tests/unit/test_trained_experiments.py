"""helpers.experiments.ch05_trained_synthetic: one tiny training point, its caching, and the summaries built on it."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers.cache import ResultStore
from helpers.experiments import run_sweep, ch05_trained_synthetic

TINY = dict(n=12, d_head=2, d_model=16, n_heads=2, n_layers=1, steps=2)


@pytest.fixture(scope="module")
def tiny_rows():
    return ch05_trained_synthetic.train_point("copy", seed=0, **TINY)


def frame(rows, task="copy", seed=0, **config):
    config = {**TINY, **config}
    return pd.DataFrame([{"task": task, **config, "seed": seed, **row} for row in rows])


def test_point_returns_plain_rows_with_every_metric(tiny_rows):
    assert all(set(row) == {"step", "metric", "value", "layer", "head"} for row in tiny_rows)
    assert all(isinstance(row["value"], float) and isinstance(row["layer"], int) for row in tiny_rows)
    metrics = {row["metric"] for row in tiny_rows}
    assert {f"rank_{m}" for m in ch05_trained_synthetic.RANK_MEASURES} <= metrics
    assert {"test_loss", "test_accuracy", "chance_loss", "baseline_accuracy"} <= metrics
    steps = {row["step"] for row in tiny_rows if row["metric"] == "rank_hardmax"}
    assert {0, TINY["steps"]} <= steps, "rank at initialization and after training"
    heads = {(row["layer"], row["head"]) for row in tiny_rows if row["metric"] == "rank_numerical"}
    assert heads == {(0, 0), (0, 1)}


def test_ranks_are_within_one_and_n(tiny_rows):
    n = TINY["n"]
    for row in tiny_rows:
        if row["metric"].startswith("rank_"):
            assert 1.0 <= row["value"] <= n, row


def test_same_seed_same_numbers_other_seed_other_numbers(tiny_rows):
    again = ch05_trained_synthetic.train_point("copy", seed=0, **TINY)
    assert again == tiny_rows
    other = ch05_trained_synthetic.train_point("copy", seed=1, **TINY)
    assert [r["value"] for r in other] != [r["value"] for r in tiny_rows]


def test_reference_levels(tiny_rows):
    chance = next(r["value"] for r in tiny_rows if r["metric"] == "chance_loss")
    assert chance == pytest.approx(math.log(17))  # 16 tokens and the separator
    base = next(r["value"] for r in tiny_rows if r["metric"] == "baseline_accuracy")
    assert 0.0 <= base <= 0.5


def test_sorting_baseline_beats_chance():
    data, _ = ch05_trained_synthetic.build("sorting", 32, 2, 16, 1, 1, seed=0)
    assert ch05_trained_synthetic.position_baseline(data) > 2 / 16, "sorted outputs are predictable from the position"


def test_point_is_cached_through_run_sweep(tmp_path):
    store = ResultStore(tmp_path)
    configs = [{"task": "sorting", **TINY}]
    first = run_sweep(ch05_trained_synthetic.EXPERIMENT, ch05_trained_synthetic.train_point, configs, [0], store=store, progress=False)
    assert len(list((tmp_path / ch05_trained_synthetic.EXPERIMENT).glob("*.json"))) == 1
    second = run_sweep(ch05_trained_synthetic.EXPERIMENT, ch05_trained_synthetic.train_point, configs, [0], store=store, progress=False)
    pd.testing.assert_frame_equal(first, second, check_like=True)


def test_summaries(tiny_rows):
    df = pd.concat([frame(tiny_rows), frame(tiny_rows, d_head=4)], ignore_index=True)
    summary = ch05_trained_synthetic.summarise(df)
    assert len(summary) == 2
    for m in ch05_trained_synthetic.RANK_MEASURES:
        assert (summary[f"{m}_final_max"] >= summary[f"{m}_final"] - 1e-12).all()
        assert np.allclose(summary[f"{m}_change"], (summary[f"{m}_final"] - summary[f"{m}_init"]) / summary.n)
    table = ch05_trained_synthetic.saturation_table(summary)
    assert set(table.rank_saturation_d_head) <= {2.0, 4.0}
    traj = ch05_trained_synthetic.rank_trajectories(df)
    assert traj.rank_over_n.between(0, 1).all()
    heads = ch05_trained_synthetic.per_head_final(df)
    assert set(heads.step) == {TINY["steps"]}


def test_saturation_d_head():
    assert ch05_trained_synthetic.saturation_d_head([1, 2, 4, 8], [1.0, 5.0, 9.6, 10.0]) == 4
    assert ch05_trained_synthetic.saturation_d_head([8, 1, 4, 2], [10.0, 1.0, 9.6, 5.0]) == 4, "order of the sweep does not matter"
    assert ch05_trained_synthetic.saturation_d_head([1, 2], [0.3, 0.5], floor=0.3) == 2
    assert math.isnan(ch05_trained_synthetic.saturation_d_head([1, 2], [0.2, 0.2], floor=0.3))


def test_ablation_configs_vary_one_knob_at_a_time():
    base = {"d_model": 32, "n_heads": 2, "n_layers": 1}
    labelled = ch05_trained_synthetic.ablation_configs(["copy"], 16, 4, base, [16, 32], [1, 2], [1, 4], steps=5)
    assert len(labelled) == 6
    for config in labelled:
        changed = [k for k in base if config[k] != base[k]]
        assert len(changed) <= 1
    assert {c["n_layers"] for c in labelled if c["factor"] == "layers"} == {1, 4}


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="task must be one of"):
        ch05_trained_synthetic.build("nope", 16, 2, 16, 2, 1, seed=0)
