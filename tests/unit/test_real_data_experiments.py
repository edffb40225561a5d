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
from helpers.training import evaluate

TINY = pts.DomainSpec(d_model=8, n_heads=2, n_layers=1, d_value=4, lr=3e-3, max_steps=12, eval_every=4, patience=1,
                     text_batch_tokens=64, text_train_tokens=4096, test_tokens=256, probe_tokens=32).as_config()


def _params(**overrides):
    values = dict(MODE="quick", SEED=0, DOMAINS=None, TEXT_N=None, BBC_N=None, IMAGE_N=None, PROTEIN_N=None,
                  D_QK=None, N_SEEDS=None, MAX_SEEDS=None, MAX_STEPS=None, PATIENCE=None, MIN_IMPROVEMENT=None,
                  SCHEDULER=None)
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
    assert [t["n"] for t in ch.setting_configs(P)] == [32, 16, 32]  # one setting per (domain, n)
    assert ch.design(P).grid == (1, 2, 8) and (ch.design(P).seeds, ch.design(P).max_seeds) == (3, 3)
    with pytest.raises(ParameterError, match="MAX_SEEDS"):
        ch.resolve(_params(N_SEEDS=4, MAX_SEEDS=3))


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


def _saturation_by_hand(d, y):
    """The first grid d at which y has made 95 % of its rise from y[0] to y[-1] (no interpolation)."""
    target = y[0] + 0.95 * (y[-1] - y[0])
    return d[next(i for i in range(len(y)) if y[i] >= target)]


def test_saturation_of_loss_and_rank_matches_a_hand_computation():
    d = [1, 2, 4, 8]
    loss = np.array([[2.0, 1.6, 1.5, 1.5], [2.2, 1.7, 1.52, 1.5], [2.1, 1.65, 1.49, 1.5]])
    ranks = np.array([[2.0, 5.0, 9.0, 10.0], [2.0, 4.0, 10.0, 10.0], [3.0, 5.0, 9.5, 10.5]])
    table = ch.saturation_table(_models(loss.tolist(), ranks.tolist()), resamples=200).set_index("quantity")
    assert table.loc["loss", "value"] == _saturation_by_hand(d, list(-loss.mean(0))) == 4
    mean_rank = ranks.mean(0)
    # one convention: the rank's rise is measured from its value at the smallest d_qk too, not from 0
    assert table.loc["hardmax", "value"] == _saturation_by_hand(d, mean_rank) == 8
    assert table.loc["numerical@1e-03", "value"] == _saturation_by_hand(d, mean_rank + 1)
    assert table.loc["loss", "low"] <= table.loc["loss", "value"] <= table.loc["loss", "high"]
    assert {table.loc[q, k] for q in ch.QUANTITIES for k in ("value", "low", "high")} <= set(d), "grid readings"
    assert set(table.status) == {"inside"} and table.loc["loss", "grid"] == d
    # each seed's own curve, by hand: where an interval's ends coincide, these seeds are what the table shows
    for quantity, curves in (("loss", -loss), ("hardmax", ranks)):
        own = [_saturation_by_hand(d, list(c)) for c in curves]
        assert table.loc[quantity, "agreeing"] == own.count(table.loc[quantity, "value"])
        assert table.loc[quantity, "seeds"] == 3


def test_saturation_with_an_excluded_model_uses_the_remaining_seeds():
    loss = [[2.0, 1.6, 1.5, 1.5]] * 3
    table = ch.saturation_table(_models(loss, [[1, 2, 3, 3]] * 3, diverged={(1, 4)}), resamples=50)
    assert np.isfinite(table.set_index("quantity").loc["loss", "value"])
    assert table.set_index("quantity").loc["loss", "seeds"] == 2    # seed 1 has no valid model at d_qk = 4


@pytest.mark.parametrize("loss, rank, included, outcome", [
    ((4.0, 16.0), (16.0, 16.0), True, "together"),     # 3 to 16 and 5 to 16: the untrained 5 .. 15 are shared
    ((4.0, 4.0), (16.0, 16.0), True, "rank_later"),    # 3 to 4 against 5 to 16
    ((16.0, 16.0), (1.0, 2.0), True, "loss_later"),    # 5 to 16 against at most 2
    ((2.0, 2.0), (1.0, 4.0), True, "together"),        # at most 4 contains 2
    ((4.0, 16.0), (16.0, 16.0), False, "untestable"),
    ((4.0, math.nan), (16.0, 16.0), True, "untestable"),
])
def test_together_outcome_compares_the_widths_the_intervals_allow(loss, rank, included, outcome):
    as_row = lambda lo_hi: {"low": lo_hi[0], "high": lo_hi[1], "grid": [1, 2, 4, 16]}  # noqa: E731
    assert ch.together_outcome(as_row(loss), as_row(rank), included) == outcome


def _checked(models):
    q, sat = ch.quality(models), ch.saturation_table(models, resamples=400)
    outcomes, _ = ch.together_outcomes(sat, q)
    verdicts = {label: ch.together_verdict(outcomes[label], label) for label in ch.RANK_LABELS}
    return ch.robust_together(models, sat, q, verdicts, resamples=400, seed=0)["hardmax"]


def test_a_together_verdict_that_one_seed_flips_is_untestable():
    # three settings; in each, seeds 0 and 1 need d = 4 for the loss, seed 2 only d = 2, and the rank saturates at 2.
    # With seed 2 the loss's interval reaches down to 2 (together); without it, the loss saturates later.
    rank = [[1.0, 3.0, 3.0, 3.0]] * 3
    loss = [[2.0, 1.8, 1.5, 1.5], [2.0, 1.8, 1.5, 1.5], [2.0, 1.5, 1.5, 1.5]]
    models = pd.concat([_models(loss, rank, n=n) for n in (32, 64, 128)], ignore_index=True)
    checked = _checked(models)
    assert checked.outcome == "untestable" and checked.evidence["undecided_outcome"] == "together"
    flips = checked.evidence["robustness"]["flips"]
    assert {"perturbation": "seed 2 left out", "outcome": "loss_later"} in flips
    assert "but one perturbation changes the answer (with seed 2 left out" in checked.sentence


def test_a_together_verdict_of_three_agreeing_settings_survives_every_perturbation():
    # loss and rank both saturate at d = 2 with three agreeing seeds: one grid step changes one setting, not the count
    calm = pd.concat([_models([[2.0, 1.5, 1.5, 1.5]] * 3, [[1.0, 3.0, 3.0, 3.0]] * 3, n=n) for n in (32, 64, 128)],
                     ignore_index=True)
    checked = _checked(calm)
    assert checked.outcome == "together" and checked.evidence["robustness"]["flips"] == []
    assert checked.evidence["robustness"]["perturbations"] == 3 + 3 * 2 * 2   # seeds; (loss, rank) x up, down


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
    assert all(pts.weights_path("shakespeare", 8, TINY, m["d_head"], m["seed"]).exists() for m in members)
    monkeypatch.setattr(pts, "train_models", lambda *a: pytest.fail("a stored model was trained again"))
    pairs = [pts.trained_model("shakespeare", 8, TINY, m["d_head"], m["seed"]) for m in members]   # read back
    models, data = [m for m, _ in pairs], pairs[0][1]
    for model, (_, row) in zip(models, rows.iterrows()):
        assert model.cfg.head_dim == row.d_head and model.cfg.value_dim == 4
        assert evaluate(model, data.test_x, data.test_y)["loss"] == pytest.approx(row.test_loss, rel=1e-5)
    with torch.no_grad():
        q_rows = models[0].attentions[0].qkv.weight.shape[0]
    assert q_rows == 2 * (2 * 1 + 4)  # heads x (2 d_qk + d_value): the value width is fixed


def test_saturation_display_names_the_edge_cases():
    grid = [1, 2, 4, 16]
    sat = pd.DataFrame([
        {"domain": "bbc", "n": 64, "quantity": "loss", "value": 16.0, "status": "inside", "low": 4.0, "high": 16.0},
        {"domain": "bbc", "n": 64, "quantity": "hardmax", "value": 1.0, "status": "at_first", "low": 1.0, "high": 1.0},
        {"domain": "bbc", "n": 64, "quantity": "numerical@1e-03", "value": math.nan, "status": "flat",
         "low": math.nan, "high": math.nan}]).assign(grid=[grid] * 3, spread=[True, False, True],
                                                     agreeing=[0, 3, 0], seeds=[3, 3, 0])
    row = ch.saturation_display(sat).loc["bbc, n\u00a0=\u00a064"]
    assert row.tolist() == ["5–\u206016\u00a0(3–\u206016)", "≤\u00a01\u00a0(3\u00a0of\u00a03\u00a0seeds)", "–"]
    together = pd.DataFrame([{"domain": "bbc", "n": 64, "hardmax": "loss_later", "numerical@1e-03": "untestable"}])
    row = ch.saturation_display(sat, together).loc["bbc, n\u00a0=\u00a064"]
    assert row.tolist()[3:] == ["loss later", "cannot decide"]
    # an interval with coinciding ends: the seeds behind the width, never an interval of one value "4 (4)"
    one = sat.iloc[[0]].assign(value=4.0, low=4.0, high=4.0, grid=[[1, 2, 3, 4, 16]], spread=False, agreeing=3,
                               seeds=3)
    assert ch.saturation_display(one).loc["bbc, n\u00a0=\u00a064", "loss"] == "4\u00a0(3\u00a0of\u00a03\u00a0seeds)"
    none = one.assign(agreeing=0, seeds=0)                       # no seed valid at every width: no curve to count
    assert ch.saturation_display(none).loc["bbc, n\u00a0=\u00a064", "loss"] == "4\u00a0(no\u00a0seed\u00a0at\u00a0every\u00a0width)"


def _quality(*settings):
    """The quality table of constructed settings: (domain, n, metric value, uniform gap) each, three seeds."""
    frames = [_models([[2.0, 1.8, 1.7, 1.7]] * 3, [[2, 4, 6, 6]] * 3, uniform_gap=gap, metric_value=value,
                      domain=domain, n=n) for domain, n, value, gap in settings]
    for frame, (domain, *_rest) in zip(frames, settings):
        if domain == "mnist":
            frame["test_accuracy"] = frame["bits_per_token"]
    return ch.quality(pd.concat(frames, ignore_index=True))


def test_bars_summary_gives_the_ranges_and_names_each_excluded_setting():
    good = _quality(("shakespeare", 32, 2.69, 1.08), ("shakespeare", 64, 2.64, 1.3), ("mnist", 16, 0.96, 6.2))
    assert ch.bars_summary(good) == (
        "All 3 settings meet their bars (seed means at query/key width 8): 1.83 to 1.86 nats per character on Shakespeare "
        "and a test accuracy of 0.96 on MNIST, and uniform attention in place of the trained one raises the test "
        "loss by 1.1 to 6.2 nats")
    mixed = _quality(("shakespeare", 32, 2.69, 1.08), ("bbc", 64, 2.9, 1.3), ("mnist", 16, 0.96, 0.01))
    text = ch.bars_summary(mixed)
    # bits shown in nats, the unit of the page's losses: 2.64, 2.69 and 2.9 bits times ln 2 = 1.830, 1.865, 2.010
    assert text.startswith("1 of 3 settings meets their bars") and "1.86 to 2.01 nats per character on Shakespeare " \
        "and BBC News" in text
    assert text.endswith("untestable at this budget: bbc at n = 64 (misses its bar); mnist at n = 16 (uniform "
                         "attention costs less than 0.05 nats)")
    none = _quality(("bbc", 32, 3.8, 0.02), ("bbc", 64, 3.9, 0.02))
    assert ch.bars_summary(none).startswith("None of the 2 settings meets its bar")
    assert ch.bars_summary(none).endswith("; both are untestable at this budget")
    three = _quality(("bbc", 32, 3.8, 0.02), ("bbc", 64, 3.9, 0.02), ("bbc", 128, 3.9, 0.02))
    assert ch.bars_summary(three).endswith("; all 3 are untestable at this budget")
    alone = ch.bars_summary(none.iloc[:1])
    assert alone.startswith("The one setting misses its bar") and alone.endswith("; it is untestable at this budget")


def test_bars_rule_and_quality_view_say_the_bars_in_words():
    assert ch.bars_rule(["shakespeare", "mnist", "bbc"]) == (
        "at most 1.94 nats per character (2.8 bits) on Shakespeare and BBC News and at "
        "least 0.95 test accuracy on MNIST")   # 2.8 ln 2 = 1.9408
    view = ch.quality_view(_quality(("shakespeare", 32, 2.69, 1.08), ("mnist", 16, 0.94, 6.2)))
    assert view.loc["shakespeare, n\u00a0=\u00a032", "bar"] == "≤\u00a01.94\u00a0(2.8\u00a0bits)"   # unit: the caption's
    assert view.loc["shakespeare, n\u00a0=\u00a032", "seed mean at the largest query/key width"] == pytest.approx(2.69 * 0.6931472)
    assert view.loc["mnist, n\u00a0=\u00a016", "seed mean at the largest query/key width"] == pytest.approx(0.94)
    assert view.loc["mnist, n\u00a0=\u00a016", "bar"] == "≥\u00a00.95"
    assert view.included.tolist() == ["yes", "no"] and view["models at the step cap"].tolist() == ["0 of 12"] * 2


def test_cap_where_names_the_fewer_side():
    q = pd.DataFrame([{"domain": "shakespeare", "n": 64, "models": 12, "not_converged": 7},
                      {"domain": "mnist", "n": 16, "models": 12, "not_converged": 0},
                      {"domain": "bbc", "n": 128, "models": 12, "not_converged": 12}])
    assert ch.cap_where(q) == "Most models ran to the step cap in every setting but mnist at n = 16"
    assert ch.cap_where(q.assign(not_converged=[7, 0, 6])) == "Most models ran to the step cap in shakespeare at n = 64"
    assert ch.cap_where(q.assign(not_converged=12)) == "Most models ran to the step cap in every setting"
    assert ch.cap_where(q.assign(not_converged=6)).startswith("In every setting most models were stopped by the")


def _sat(domain, n, loss, hardmax, numerical, grid=(1, 2, 4, 8, 16)):
    """Saturation rows of one setting: (value, status, low, high) per quantity, read on `grid`."""
    return [{"domain": domain, "n": n, "quantity": quantity, "value": v, "status": st, "low": lo, "high": hi,
             "grid": list(grid)} for quantity, (v, st, lo, hi) in zip(ch.QUANTITIES, (loss, hardmax, numerical))]


def test_saturation_summary_and_headline_read_the_outcomes_of_every_setting():
    q = _quality(("shakespeare", 32, 2.69, 1.08), ("shakespeare", 64, 2.64, 1.3), ("mnist", 16, 0.96, 6.2),
                 ("bbc", 128, 3.5, 1.0))
    flat = (math.nan, "flat", math.nan, math.nan)
    sat = pd.DataFrame(_sat("shakespeare", 32, (16, "inside", 16, 16), (4, "inside", 4, 8), (1, "at_first", 1, 1))
                       + _sat("shakespeare", 64, (16, "inside", 16, 16), (8, "inside", 4, 16), (1, "at_first", 1, 1))
                       + _sat("mnist", 16, flat, (8, "inside", 4, 16), (4, "inside", 2, 4))
                       + _sat("bbc", 128, (8, "inside", 8, 8), (8, "inside", 8, 8), (1, "at_first", 1, 1)))
    assert ch.saturation_summary(sat, q) == (
        "In the 3 settings that meet their bars, the loss saturates at query/key width 9 to 16 in 2 and nowhere in mnist at "
        "n = 16 (its seed-mean curve has a missing value); the hardmax rank saturates at query/key width 3 to 8 in all 3; the "
        "numerical rank saturates already at the smallest query/key width in 2 and at query/key width 3 to 4 in mnist at n = 16")
    included = dict(zip(zip(q.domain, q.n), q.included))
    outcomes, reasons = {}, {}
    for label in ch.RANK_LABELS:
        outcomes[label] = []
        for (domain, n), part in sat.groupby(["domain", "n"], sort=False):
            by = part.set_index("quantity")
            outcome = ch.together_outcome(by.loc["loss"], by.loc[label], included[(domain, n)])
            outcomes[label].append(outcome)
            if outcome == "untestable":
                reasons[ch.setting_name(domain, n)] = ch.untestable_reason(by.loc["loss"], by.loc[label],
                                                                           included[(domain, n)])
    assert outcomes["hardmax"] == ["loss_later", "together", "untestable", "untestable"]
    assert outcomes["numerical@1e-03"] == ["loss_later", "loss_later", "untestable", "untestable"]
    assert ch.headline(q, outcomes, reasons, "3 seeds") == (
        "3 of 4 settings meet their quality bars, and 2 of the 4 can decide whether loss and rank saturate together; "
        "mnist at n = 16 cannot (a curve has a missing value); bbc at "
        "n = 128 cannot (below the quality bar: untestable at this budget). By the hardmax rank, the two saturate "
        "together in 1 and the loss saturates at a larger query/key width in 1; by the numerical rank, the loss saturates at a "
        "larger query/key width in both (95 % bootstrap intervals over 3 seeds).")
    nobody = q.assign(included=False)
    assert ch.headline(nobody, outcomes, reasons, "3 seeds") == (
        "None of the 4 settings meets its quality bar, so whether loss and rank saturate together is untestable at "
        "this budget.")
    assert ch.saturation_summary(sat, nobody).startswith("No setting meets its quality bar")


def test_text_validation_set_is_val_tokens_long_and_at_most_a_tenth_of_training():
    spec = pts.DomainSpec()
    assert pts.val_examples("shakespeare", 128, spec) == spec.val_tokens // 128
    small = pts.DomainSpec(text_train_tokens=40960, val_tokens=16384)
    assert pts.val_examples("bbc", 32, small) == 4096 // 32      # a tenth of the training tokens
    assert pts.val_examples("shakespeare", 1024, pts.DomainSpec(val_tokens=1024)) == 2
    assert pts.val_examples("mnist", 16, spec) is None


def test_learning_rate_is_per_domain_kind_and_said_in_words():
    spec = pts.DomainSpec(lr=1e-2, image_lr=3e-3)
    assert pts.learning_rate("shakespeare", spec) == 1e-2 and pts.learning_rate("mnist", spec) == 3e-3
    assert ch.lr_text(["shakespeare", "mnist", "bbc"], spec) == "0.01 for text and 0.003 for images"
    assert ch.lr_text(["bbc"], spec, ratio=0.3) == "0.003 for text"


def test_bigram_bits_match_counting_by_hand():
    from types import SimpleNamespace

    x = torch.tensor([[0, 1, 2, 1], [2, 2, 0, 1]])
    y = torch.tensor([[1, 2, 1, 0], [2, 0, 1, 1]])
    tx, ty = torch.tensor([[0, 2, 1]]), torch.tensor([[1, 2, 0]])
    data = SimpleNamespace(vocab_size=3, train_x=x, train_y=y, test_x=tx, test_y=ty)
    pairs = list(zip(x.flatten().tolist(), y.flatten().tolist()))
    bits = []
    for a, b in zip(tx.flatten().tolist(), ty.flatten().tolist()):
        p = (pairs.count((a, b)) + 1) / (sum(1 for p in pairs if p[0] == a) + 3)   # add-one smoothing
        bits.append(-math.log2(p))
    assert ch.bigram_bits(data) == pytest.approx(np.mean(bits), rel=1e-12)


def test_linear_accuracy_separates_what_a_hyperplane_separates():
    from types import SimpleNamespace

    gen = torch.Generator().manual_seed(0)
    def split(count):
        images = torch.rand(count, 1, 4, 4, generator=gen)
        return images, (images[:, 0, 0, 0] > images[:, 0, 3, 3]).long()       # a linear rule of two pixels
    (x, y), (tx, ty) = split(400), split(200)
    data = SimpleNamespace(train_x=x, train_y=y, test_x=tx, test_y=ty, n_classes=2)
    assert ch.linear_accuracy(data) >= 0.95
    shuffled = SimpleNamespace(train_x=x, train_y=y[torch.randperm(400, generator=gen)], test_x=tx, test_y=ty,
                               n_classes=2)
    assert ch.linear_accuracy(shuffled) < 0.8                                    # nothing to learn: near chance


def test_baselines_text_groups_the_domains_by_metric():
    base = pd.DataFrame([{"domain": "shakespeare", "n": 32, "metric": "bits_per_token", "value": 3.6477},
                         {"domain": "mnist", "n": 16, "metric": "test_accuracy", "value": 0.892},
                         {"domain": "bbc", "n": 128, "metric": "bits_per_token", "value": 3.6586}])
    # 3.6477 and 3.6586 bits times ln 2 = 2.5284 and 2.5360 nats
    assert ch.baselines_text(base) == ("a character bigram table reaches 2.53 nats per character on Shakespeare and "
                                       "2.54 on BBC News; a linear classifier on the pixels reaches a test accuracy "
                                       "of 0.892 on MNIST")


def test_the_headline_names_the_seeds_each_width_rests_on():
    models = pd.DataFrame([{"domain": "bbc", "n": 128, "d_head": d, "seed": s, "valid": True}
                           for d in (1, 16) for s in range(3 if d == 1 else 5)])
    q = pd.DataFrame([{"domain": "bbc", "n": 128, "included": True}])
    assert ch.seeds_text(models, q, 3) == "3 to 5 seeds"
    assert ch.seeds_text(models[models.seed < 3], q, 3) == "3 seeds"
    assert ch.seeds_text(models[models.seed < 2], q, 3) == "at least 2 seeds"


def test_loss_drop_text_names_a_setting_whose_loss_rises_and_reads_nothing_without_a_setting():
    """The change of the seed-mean test loss from the smallest to the largest width, recomputed by hand: 2.0 -> 1.8
    is a 10 % fall, 2.0 -> 1.9 a 5 % fall, 0.300 -> 0.307 a 2.3 % rise (never "falls by -2.3 %")."""
    losses = {("shakespeare", 32): (2.0, 1.8), ("mnist", 16): (0.300, 0.307), ("bbc", 128): (2.0, 1.9)}
    models = pd.DataFrame([{"domain": d, "n": n, "d_head": width, "test_loss": loss, "valid": True, "seed": seed}
                           for (d, n), ends in losses.items() for width, loss in zip((1, 16), ends)
                           for seed in range(3)])
    q = pd.DataFrame([{"domain": d, "n": n, "included": True} for d, n in losses])
    assert ch.loss_drop_text(models, q) == ("falls by 5 % to 10 % of its value in 2 of 3 settings that meet their "
                                            "bars, and rises by 2.3 % in mnist at n = 16")
    assert ch.loss_drop_text(models, q.assign(included=[True, False, True])) == \
        "falls by 5 % to 10 % of its value in the 2 settings that meet their bars"
    assert ch.loss_drop_text(models, q.assign(included=[False, True, False])) == \
        "rises in the one setting that meets its bar: by 2.3 % in mnist at n = 16"
    assert ch.loss_drop_text(models, q.assign(included=False)) == "is not read, since no setting meets its bar"


def test_at_max_text_counts_the_settings_below_the_barrier_and_reads_nothing_without_a_setting():
    inc = pd.DataFrame({"domain": ["shakespeare", "mnist"], "n": [32, 16], "hardmax_over_n": [0.58, 0.70]})
    inc = inc.assign(**{f"{label}_over_n": [0.51, 0.94] for label in ch.RANK_LABELS[1:]})
    assert ch.at_max_text(inc) == ("At the largest query/key width, in the 2 settings that meet their bars, the hardmax "
                                   "rank is from 0.58 to 0.7 n and the numerical rank from 0.51 to 0.94 n; the "
                                   "hardmax rank is below the barrier (1 − 1/e) n ≈ 0.63 n in 1 of 2 settings")
    assert ch.at_max_text(inc.iloc[:0]) == "No setting meets its bars, so no rank at the largest query/key width is read"
