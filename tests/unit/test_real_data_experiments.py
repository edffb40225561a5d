"""Chapter 06: stacks of real-data models, quality bars, saturation of loss and rank, and the verdict rules."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import parameters
from helpers.experiments import ch06_real_data as ch
from helpers.experiments import ch06_real_data_points as pts
from helpers.parameters import ParameterError
from helpers.train import evaluate

TINY = pts.TrainSpec(d_model=8, n_heads=2, n_layers=1, d_value=4, lr=3e-3, max_steps=12, eval_every=4, patience=1,
                     text_batch_tokens=64, text_train_tokens=4096, test_tokens=256, probe_tokens=32).as_config()


def _params(**overrides):
    values = dict(MODE="quick", SEED=0, DOMAINS=None, TEXT_N=None, BBC_N=None, IMAGE_N=None, PROTEIN_N=None,
                  D_QK=None, N_SEEDS=None, MAX_STEPS=None, PATIENCE=None, MIN_IMPROVEMENT=None, SCHEDULER=None)
    values.update(overrides)
    return parameters.Params(values)


def test_n_is_checked_per_domain():
    with pytest.raises(ParameterError, match="16, 49, 196"):
        pts.check_n("mnist", 20)
    with pytest.raises(ParameterError, match="8 to 1024"):
        pts.check_n("shakespeare", 4)
    with pytest.raises(ParameterError, match="domain"):
        pts.domain_kind("cifar")
    assert pts.check_n("bbc", 64) == 64


def test_resolve_names_the_parameter_of_a_bad_n_and_a_patience_that_cannot_act():
    with pytest.raises(ParameterError, match="IMAGE_N"):
        ch.resolve(_params(DOMAINS=["mnist"], IMAGE_N=[20]))
    with pytest.raises(ParameterError, match="PATIENCE"):
        ch.resolve(_params(PATIENCE=100))
    P = ch.resolve(_params(MAX_STEPS=400, D_QK=[1, 2, 8]))
    assert P.SPEC["max_steps"] == 400 and P.D_QK == [1, 2, 8] and P.N_SEEDS == 3
    assert [t["n"] for t in ch.stack_tasks(P)] == [32, 16, 32]  # one stack per (domain, n), every d_qk x seed
    assert len(ch.stack_tasks(P)[0]["members"]) == 9


def test_full_mode_trains_its_stacks_on_a_process_pool_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("HELPERS_DASK_SCHEDULER", raising=False)
    assert ch.resolve(_params(MODE="full")).SCHEDULER == "processes"
    assert ch.resolve(_params()).SCHEDULER is None                  # quick: in-process
    assert ch.resolve(_params(MODE="full", SCHEDULER="local")).SCHEDULER == "local"
    monkeypatch.setenv("HELPERS_DASK_SCHEDULER", "tcp://host:8786")
    assert ch.resolve(_params(MODE="full")).SCHEDULER is None       # the environment's scheduler is used


def _models(loss, hardmax, uniform_gap=0.2, metric_value=None, domain="shakespeare", n=64, d=(1, 2, 4, 8),
            diverged=()):
    """A constructed per-model table: `loss[i][j]` and `hardmax[i][j]` for seed i at d[j]."""
    rows = []
    for i, (ls, hs) in enumerate(zip(loss, hardmax)):
        for j, dk in enumerate(d):
            rows.append({"domain": domain, "n": n, "d_head": dk, "seed": i, "test_loss": ls[j],
                         "bits_per_token": ls[j] / math.log(2) if metric_value is None else metric_value,
                         "test_accuracy": 0.5, "uniform_increase": uniform_gap, "hardmax": hs[j],
                         "numerical@1e-03": hs[j] + 1, "converged": True, "diverged": (i, dk) in diverged,
                         "stop_step": 100})
    df = pd.DataFrame(rows)
    df["valid"] = ~df.diverged
    for label in pts.RANK_LABELS:
        df[f"{label}_over_n"] = df[label] / df.n
    return df


def test_quality_bar_uniform_gap_and_seed_count_decide_inclusion():
    loss = [[2.0, 1.8, 1.7, 1.7]] * 3
    ranks = [[2, 4, 6, 6]] * 3
    good = ch.quality(_models(loss, ranks))
    assert good.included.item() and good.meets_bar.item() and good.load_bearing.item()
    assert good.value.item() == pytest.approx(1.7 / math.log(2))
    assert not ch.quality(_models(loss, ranks, metric_value=3.0)).included.item()      # misses 2.8 bits
    unused = ch.quality(_models(loss, ranks, uniform_gap=0.049))
    assert not unused.load_bearing.item() and not unused.included.item()
    short = ch.quality(_models(loss, ranks, diverged={(0, 2)}))
    assert short.diverged.item() == 1 and short.fewest_valid_seeds.item() == 2 and not short.included.item()


def _saturation_by_hand(d, y, baseline):
    """The first d at which y has made 95 % of its rise from `baseline` to y[-1], interpolated in log d."""
    target = baseline + 0.95 * (y[-1] - baseline)
    k = next(i for i in range(len(y)) if y[i] >= target)
    if k == 0:
        return d[0]
    t = (target - y[k - 1]) / (y[k] - y[k - 1])
    return math.exp(math.log(d[k - 1]) + t * (math.log(d[k]) - math.log(d[k - 1])))


def test_saturation_of_loss_and_rank_matches_a_hand_computation():
    d = [1, 2, 4, 8]
    loss = np.array([[2.0, 1.6, 1.5, 1.5], [2.2, 1.7, 1.52, 1.5], [2.1, 1.65, 1.49, 1.5]])
    ranks = np.array([[2.0, 5.0, 9.0, 10.0], [2.0, 4.0, 10.0, 10.0], [3.0, 5.0, 9.5, 10.5]])
    table = ch.saturation_table(_models(loss.tolist(), ranks.tolist()), resamples=200).set_index("quantity")
    neg = -loss.mean(0)
    assert table.loc["loss", "value"] == pytest.approx(_saturation_by_hand(d, list(neg), neg[0]))
    mean_rank = ranks.mean(0)
    assert table.loc["hardmax", "value"] == pytest.approx(_saturation_by_hand(d, mean_rank, 0.0))
    assert table.loc["numerical@1e-03", "value"] == pytest.approx(_saturation_by_hand(d, mean_rank + 1, 0.0))
    assert table.loc["loss", "low"] <= table.loc["loss", "value"] <= table.loc["loss", "high"]
    assert set(table.status) == {"inside"}


def test_saturation_with_an_excluded_model_uses_the_remaining_seeds():
    loss = [[2.0, 1.6, 1.5, 1.5]] * 3
    table = ch.saturation_table(_models(loss, [[1, 2, 3, 3]] * 3, diverged={(1, 4)}), resamples=50)
    assert np.isfinite(table.set_index("quantity").loc["loss", "value"])


@pytest.mark.parametrize("loss, rank, included, outcome", [
    ((2.0, 3.0), (2.5, 3.5), True, "together"),
    ((2.0, 3.0), (3.5, 5.0), True, "rank_later"),
    ((4.0, 5.0), (1.0, 2.0), True, "loss_later"),
    ((2.0, 3.0), (2.5, 3.5), False, "untestable"),
    ((2.0, math.nan), (2.5, 3.5), True, "untestable"),
])
def test_together_outcome(loss, rank, included, outcome):
    as_row = lambda lo_hi: {"low": lo_hi[0], "high": lo_hi[1]}  # noqa: E731
    assert ch.together_outcome(as_row(loss), as_row(rank), included) == outcome


def test_together_verdict_counts_and_untestable():
    v = ch.together_verdict(["together", "rank_later", "untestable"], "hardmax")
    assert v.evidence["together"] == 1 and v.evidence["rank_later"] == 1 and v.evidence["untestable"] == 1
    assert v.sentence.startswith("2 of 3 settings can decide: 1 together") and "untestable" in v.sentence
    assert "of 2 of 3" not in v.sentence
    assert ch.together_verdict(["untestable"] * 2, "hardmax").outcome == "untestable"


def test_meets_rejects_unknown_comparisons_and_nan():
    assert ch.meets(2.7, "<=", 2.8) and not ch.meets(2.9, "<=", 2.8) and ch.meets(0.96, ">=", 0.95)
    assert not ch.meets(math.nan, ">=", 0.95)
    with pytest.raises(ValueError):
        ch.meets(1.0, "<", 2.0)


def test_stack_point_rows_weights_and_reload(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    members = [{"d_head": d, "seed": s} for d in (1, 3) for s in (0, 1)]
    rows = pd.DataFrame(pts.stack_point("shakespeare", 8, TINY, members))
    assert len(rows) == len(members) * 1  # one layer
    assert set(zip(rows.d_head, rows.seed)) == {(m["d_head"], m["seed"]) for m in members}
    assert np.allclose(rows.uniform_increase, rows.uniform_loss - rows.test_loss)
    assert (rows.hardmax >= 1).all() and (rows.hardmax <= 8).all() and (rows["numerical@1e-03"] <= 8).all()
    assert pts.weights_path("shakespeare", 8, TINY, members).exists()
    models, data = pts.trained_models("shakespeare", 8, TINY, members)  # read back, not retrained
    for model, (_, row) in zip(models, rows.iterrows()):
        assert model.cfg.head_dim == row.d_head and model.cfg.value_dim == 4
        assert evaluate(model, data.test_x, data.test_y)["loss"] == pytest.approx(row.test_loss, rel=1e-5)
    with torch.no_grad():
        q_rows = models[0].attentions[0].qkv.weight.shape[0]
    assert q_rows == 2 * (2 * 1 + 4)  # heads x (2 d_qk + d_value): the value width is fixed


def test_saturation_display_names_the_edge_cases():
    sat = pd.DataFrame([
        {"domain": "bbc", "n": 64, "quantity": "loss", "value": 3.14, "status": "inside", "low": 2.4, "high": 4.0},
        {"domain": "bbc", "n": 64, "quantity": "hardmax", "value": 1.0, "status": "at_first", "low": 1.0, "high": 1.0},
        {"domain": "bbc", "n": 64, "quantity": "numerical@1e-03", "value": math.nan, "status": "flat",
         "low": math.nan, "high": math.nan}])
    row = ch.saturation_display(sat).loc["bbc, n = 64"]
    assert row.tolist() == ["3.1 (2.4–4)", "≤ 1 (1–1)", "–"]


def test_cap_sentence_counts_the_models_at_the_cap_and_warns_only_where_most_are():
    q = pd.DataFrame([{"domain": "shakespeare", "n": 64, "models": 12, "not_converged": 7},
                      {"domain": "mnist", "n": 16, "models": 12, "not_converged": 0},
                      {"domain": "bbc", "n": 128, "models": 12, "not_converged": 2}])
    text = ch.cap_sentence(q, patience=4, min_improvement=0.005)
    assert text.startswith("9 of 36 models ran to the step cap")
    assert "7 of 12 at shakespeare, n = 64 and 2 of 12 at bbc, n = 128" in text
    assert "mnist" not in text and "0.5 % within their last 4 evaluations" in text
    assert "Where most models of a setting ran to the cap (shakespeare at n = 64)" in text
    calm = ch.cap_sentence(q.assign(not_converged=[6, 0, 1]), patience=1, min_improvement=0.01)
    assert calm.startswith("7 of 36 models") and "last 1 evaluation," in calm
    assert "In every setting most models converged" in calm and "Where most" not in calm
    done = ch.cap_sentence(q.assign(not_converged=0), patience=4, min_improvement=0.005)
    assert done.startswith("Every one of the 36 models was stopped by the stopping rule")


def test_text_validation_set_is_val_tokens_long_and_at_most_a_tenth_of_training():
    spec = pts.TrainSpec()
    assert pts.val_examples("shakespeare", 128, spec) == spec.val_tokens // 128
    small = pts.TrainSpec(text_train_tokens=40960, val_tokens=16384)
    assert pts.val_examples("bbc", 32, small) == 4096 // 32      # a tenth of the training tokens
    assert pts.val_examples("shakespeare", 1024, pts.TrainSpec(val_tokens=1024)) == 2
    assert pts.val_examples("mnist", 16, spec) is None


def test_learning_rate_is_per_domain_kind_and_said_in_words():
    spec = pts.TrainSpec(lr=1e-2, image_lr=3e-3)
    assert pts.learning_rate("shakespeare", spec) == 1e-2 and pts.learning_rate("mnist", spec) == 3e-3
    assert ch.lr_text(["shakespeare", "mnist", "bbc"], spec) == "0.01 for text and 0.003 for images"
    assert ch.lr_text(["bbc"], spec, ratio=0.3) == "0.003 for text"
