"""Chapter 07: truncating W_q W_k^T to rank r, energy ranks, and the comparison and verdict rules."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.experiments import ch07_model_reduction as ch
from helpers.experiments import ch07_model_reduction_points as pts
from helpers.models import ModelConfig, build_model


def _model(d_head=6, d_value=4, bias=True, causal=True, seed=1):
    cfg = ModelConfig(d_model=16, n_heads=2, d_head=d_head, d_value=d_value, n_layers=2, vocab_size=11, task="lm",
                      causal=causal, max_len=12, bias=bias)
    model = build_model(cfg, seed=seed)
    with torch.no_grad():  # larger logits than at initialisation, so a truncation error would show
        for attn in model.attentions:
            attn.qkv.weight.mul_(3.0)
    return model.eval()


def _padded_reference(model, r):
    """Independent route: numpy's SVD of each head's folded form, factors zero-padded at the original width d."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for attn in ref.attentions:
            h, d = attn.n_heads, attn.d_head
            w = attn.qkv.weight.detach().double().numpy()
            b = attn.qkv.bias.detach().double().numpy() if attn.qkv.bias is not None else np.zeros(w.shape[0])
            for head in range(h):
                rq, rk = slice(head * d, (head + 1) * d), slice(h * d + head * d, h * d + (head + 1) * d)
                q = np.concatenate([w[rq], b[rq, None]], axis=1)
                k = np.concatenate([w[rk], b[rk, None]], axis=1)
                u, s, vt = np.linalg.svd(q.T @ k)
                fq = np.zeros_like(q)
                fk = np.zeros_like(k)
                fq[:r] = (u[:, :r] * np.sqrt(s[:r])).T
                fk[:r] = (vt[:r].T * np.sqrt(s[:r])).T
                attn.qkv.weight[rq] = torch.from_numpy(fq[:, :-1]).float()
                attn.qkv.weight[rk] = torch.from_numpy(fk[:, :-1]).float()
                if attn.qkv.bias is not None:
                    attn.qkv.bias[rq] = torch.from_numpy(fq[:, -1]).float()
                    attn.qkv.bias[rk] = torch.from_numpy(fk[:, -1]).float()
    return ref


@pytest.mark.parametrize("bias", [True, False])
def test_full_rank_reduction_is_the_same_model(bias):
    model = _model(bias=bias)
    x = torch.randint(0, 11, (3, 12))
    assert torch.equal(pts.reduce_model(model, 6)(x), model(x))
    assert torch.equal(pts.reduce_model(model, 9)(x), model(x))


@pytest.mark.parametrize("r", [1, 2, 5])
@pytest.mark.parametrize("causal", [True, False])
def test_reduced_model_computes_the_numpy_truncation_at_width_r(r, causal):
    model = _model(causal=causal)
    x = torch.randint(0, 11, (4, 12))
    small = pts.reduce_model(model, r)
    assert small.cfg.head_dim == r and small.cfg.value_dim == 4
    assert torch.allclose(small(x), _padded_reference(model, r)(x), atol=2e-5)
    for attn in small.attentions:
        for head in range(attn.n_heads):
            assert np.linalg.matrix_rank(pts.bilinear(attn, head).numpy(), tol=1e-9) <= r


def test_reduction_keeps_the_original_and_the_value_path():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    small = pts.reduce_model(model, 2)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    for big, little in zip(model.attentions, small.attentions):
        assert torch.equal(little.qkv.weight[2 * 2 * 2:], big.qkv.weight[2 * 2 * 6:])  # value rows
        assert torch.equal(little.out.weight, big.out.weight)
    assert pts.qk_parameters(small) == 2 * 2 * 2 * 2 * 17 and pts.qk_parameters(model) == 2 * 2 * 2 * 6 * 17
    with pytest.raises(ValueError, match="positive integer"):
        pts.reduce_model(model, 0)


def test_energy_rank_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        sigma = np.sort(rng.exponential(size=7))[::-1]
        share = np.cumsum(sigma**2) / np.sum(sigma**2)
        expected = int(np.argmax(share >= 0.9 - 1e-12)) + 1
        assert int(pts.energy_rank(torch.from_numpy(sigma.copy()))) == expected
    assert int(pts.energy_rank(torch.tensor([1.0, 0.0, 0.0]))) == 1
    assert int(pts.energy_rank(torch.ones(10))) == 9  # 9 of 10 equal values hold exactly 90 %


def test_smallest_within_and_reference_of_fine_tuned_rows():
    assert ch.smallest_within([4, 1, 2], [1.0, 1.5, 1.005], 1.0) == 2
    assert math.isnan(ch.smallest_within([1, 2], [2.0, 1.5], 1.0))
    rows = pd.DataFrame({"stage": "finetuned", "seed": [0, 0, 1, 1], "r": [1, 4, 1, 4],
                         "test_loss": [1.2, 1.0, 1.3, 1.1], "base_loss": [1.5] * 4})
    assert ch.reference_loss(rows).tolist() == [1.0, 1.0, 1.1, 1.1]  # the fine-tuned control, not the base


def _comp(losses, base=1.0, stage="truncated", seeds=3):
    rows = []
    for s in range(seeds):
        for r, loss in losses.items():
            rows.append({"domain": "bbc", "n": 64, "stage": stage, "seed": s, "r": r, "test_loss": loss + 0.001 * s,
                         "base_loss": base + 0.001 * s, "test_accuracy": 0.5, "steps": 0})
    return pd.DataFrame(rows)


def test_smallest_r_table_from_constructed_losses():
    table = ch.smallest_r_table(_comp({1: 1.2, 2: 1.02, 3: 1.009, 4: 1.0}))
    row = table.iloc[0]
    assert row.smallest_r == 3 and row.seed_low == 3 and row.seed_high == 3
    assert row.rank1_increase == pytest.approx(0.2)


def test_an_answer_above_a_grid_gap_is_a_range():
    # fine-tuned grid 1, 2, 4, 16: only the control (16) is within 1 %, so the answer is 5 to 16, not 16
    table = ch.smallest_r_table(_comp({1: 1.5, 2: 1.3, 4: 1.1, 16: 1.0}, stage="finetuned"))
    row = table.iloc[0]
    assert row.smallest_r == 16 and row.r_low == 5 and ch.r_cell(row) == "5 to 16"
    dense = ch.smallest_r_table(_comp({1: 1.2, 2: 1.02, 3: 1.009, 4: 1.0})).iloc[0]
    assert dense.r_low == dense.smallest_r == 3 and ch.r_cell(dense) == "3"
    # brute force over every answer on a gappy grid: the range is (the grid point below, answer]
    grid = [1, 2, 4, 16]
    for answer in grid:
        below = [g for g in range(1, answer) if g in grid]
        assert ch.untried_below(grid, answer) == (below[-1] + 1 if below else answer)
    assert math.isnan(ch.untried_below(grid, math.nan))


def test_chapter_table_and_summary_read_from_the_smallest_r_table():
    table = pd.concat([ch.smallest_r_table(_comp({1: 1.5, 2: 1.3, 4: 1.1, 16: 1.0}, stage="finetuned")),
                       ch.smallest_r_table(_comp({1: 1.2, 2: 1.02, 3: 1.009, 4: 1.0}))])
    shown = ch.smallest_display(table).iloc[0]
    assert shown["smallest r, no fine-tuning"] == "3" and shown["smallest r, fine-tuned"] == "5 to 16"
    assert shown["loss at rank 1, no fine-tuning"] == "+20 %"
    table["included"] = True
    assert ch.smallest_summary(table, 4).startswith("r = 3 of the 4 dimensions")
    table["included"] = False
    assert ch.smallest_summary(table, 4).startswith("untestable at this budget")


@pytest.mark.parametrize("a, b, seeds, outcome", [
    (1.0, 1.5, 3, "compressed"), (1.5, 1.0, 3, "scratch"), (1.0, 1.01, 3, "indistinguishable"),
    (1.0, 1.5, 2, "untestable")])
def test_better_outcome(a, b, seeds, outcome):
    assert ch.better_outcome(a, 0.02, b, 0.02, seeds) == outcome


def test_scaling_fits_recover_c_and_decide_only_with_three_n():
    n = np.array([16, 64, 256, 1024])
    frame = pd.DataFrame({"n": n, "smallest_r": 2.0 * np.log(n)})
    fit = ch.scaling_fits(frame)
    assert fit["c_log"] == pytest.approx(2.0) and fit["rmse_log"] == pytest.approx(0, abs=1e-9)
    assert fit["decides"] and ch.scaling_verdict(fit).outcome == "log"
    assert not ch.scaling_fits(frame.iloc[:2])["decides"]
    assert ch.scaling_verdict(ch.scaling_fits(frame.iloc[:2])).outcome == "untestable"


def test_scaling_verdict_without_points_says_so_in_words():
    fit = ch.scaling_fits(pd.DataFrame({"domain": [], "n": [], "smallest_r": []}))
    verdict = ch.scaling_verdict(fit)
    assert verdict.outcome == "untestable" and "n/a" not in verdict.sentence and "0 settings" not in verdict.sentence


def test_scaling_is_fitted_within_one_domain():
    """Two domains with two n each do not make three distinct n: across domains the task changes with n."""
    frame = pd.DataFrame({"domain": ["mnist", "text", "text", "text"], "n": [16, 64, 128, 128],
                          "smallest_r": [8.0, 13.0, 14.0, 15.0]})
    fit = ch.scaling_fits(frame)
    assert fit["domain"] == "text" and fit["distinct_n"] == 2 and fit["points"] == 3 and not fit["decides"]
    assert ch.scaling_verdict(fit).outcome == "untestable" and "of text" in ch.scaling_verdict(fit).sentence
    three = pd.concat([frame, pd.DataFrame({"domain": ["text"], "n": [256], "smallest_r": [2 * np.log(256)]})])
    three.loc[three.domain == "text", "smallest_r"] = 2 * np.log(three[three.domain == "text"].n)
    fit = ch.scaling_fits(three)
    assert fit["domain"] == "text" and fit["decides"] and fit["c_log"] == pytest.approx(2.0)


def test_rule_verdict_outcomes():
    table = ch.smallest_r_table(pd.concat([_comp({1: 1.005, 2: 1.0}), _comp({1: 1.3, 2: 1.0}).assign(n=128)]))
    share = {("bbc", 64): 0.5, ("bbc", 128): 0.5}
    assert ch.rule_verdict(table, {("bbc", 64)}, share).outcome == "supported"
    withdrawn = ch.rule_verdict(table, {("bbc", 64), ("bbc", 128)}, share)
    assert withdrawn.outcome == "withdrawn" and "1 of 2 settings" in withdrawn.sentence
    assert ch.rule_verdict(table, set(), share).outcome == "untestable"
