"""Chapter 07: truncating W_q W_k^T to rank r, energy ranks, and the comparison and verdict rules."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import saturation
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
        assert saturation.lowest_possible(grid, answer) == (below[-1] + 1 if below else answer)
    assert math.isnan(saturation.lowest_possible(grid, math.nan))


def test_chapter_table_and_summary_read_from_the_smallest_r_table():
    table = pd.concat([ch.smallest_r_table(_comp({1: 1.5, 2: 1.3, 4: 1.1, 16: 1.0}, stage="finetuned")),
                       ch.smallest_r_table(_comp({1: 1.2, 2: 1.02, 3: 1.009, 4: 1.0}))])
    shown = ch.smallest_display(table).iloc[0]
    assert shown["smallest r, no fine-tuning"] == "3" and shown["smallest r, fine-tuned"] == "5 to 16"
    assert shown["loss at rank 1, no fine-tuning"] == "+20 %"
    assert list(shown.index) == ["smallest r, no fine-tuning", "range over seeds", "smallest r, fine-tuned",
                                 "loss at rank 1, no fine-tuning"]
    table["included"] = True
    assert ch.smallest_summary(table, 4).startswith("r = 3 of the 4 dimensions")
    table["included"] = False
    assert ch.smallest_summary(table, 4).startswith("untestable at this budget")


@pytest.mark.parametrize("a, b, seeds, outcome", [
    (1.0, 1.5, 3, "compressed"), (1.5, 1.0, 3, "scratch"), (1.0, 1.01, 3, "indistinguishable"),
    (1.0, 1.5, 2, "untestable")])
def test_better_outcome(a, b, seeds, outcome):
    assert ch.better_outcome(a, 0.02, b, 0.02, seeds) == outcome


def _growth_comp(targets: dict, domain="shakespeare", d_max=16, seeds=3, late_seed=None):
    """Truncated rows whose smallest r within 1 % is targets[n] for every seed (or, for `late_seed` (seed, n, r),
    r for that one seed at that n)."""
    rows = []
    for n, target in targets.items():
        for s in range(seeds):
            need = late_seed[2] if late_seed and (s, n) == late_seed[:2] else target
            for r in range(1, d_max + 1):
                rows.append({"domain": domain, "n": n, "stage": "truncated", "seed": s, "r": r,
                             "test_loss": 1.0 if r >= need else 1.2, "base_loss": 1.0, "test_accuracy": 0.5, "steps": 0})
    return pd.DataFrame(rows)


def _growth(comp, d_max=16):
    smallest = ch.smallest_r_table(comp).assign(included=True)
    return ch.scaling_check(comp, smallest, d_max, replicates=200)


def test_a_clear_logarithm_is_decided_and_survives_every_perturbation():
    comp = _growth_comp({16: 4, 64: 6, 256: 8, 1024: 10})           # r = log2 n exactly, seeds agree
    fit, verdict = _growth(comp)
    assert verdict.outcome == "log", verdict.sentence
    assert fit["smallest_r"] == [4.0, 6.0, 8.0, 10.0] and fit["best"] == "log"
    assert fit["forms"]["log"]["b"] == pytest.approx(1 / math.log(2), rel=1e-9)   # d = log2(n) = ln(n) / ln 2
    assert verdict.evidence["robustness"]["flips"] == [] and verdict.evidence["robustness"]["perturbations"] == 3 + 8
    assert verdict.sentence.startswith("growth of order log n or slower: smallest r 4, 6, 8 and 10 at n = 16")


def test_too_few_n_a_censored_width_and_one_seed_make_it_untestable():
    three = _growth(_growth_comp({32: 11, 64: 13, 128: 13}))[1]       # the values the issue called an overclaim
    assert three.outcome == "untestable" and "3 values of n in shakespeare" in three.sentence
    assert "at least 4 within one domain" in three.sentence
    assert "at 4 or more n" in three.rule, "the recorded rule states the rule the code applies"
    capped = _growth(_growth_comp({16: 9, 32: 11, 64: 13, 128: 16}))[1]
    assert capped.outcome == "untestable" and "is the full width 16 at n = 128" in capped.sentence
    # seed 2 alone needs r = 24 at n = 1024 (the seed mean is within 1 % only where every seed is): 4, 6, 10, 24
    # fits c sqrt(n) best, 4, 6, 10, 10 without seed 2 a logarithm; the verdict must not pick either
    late = _growth_comp({16: 4, 64: 6, 256: 10, 1024: 10}, d_max=32, late_seed=(2, 1024, 24))
    fit, flipped = _growth(late, d_max=32)
    assert fit["smallest_r"] == [4.0, 6.0, 10.0, 24.0] and fit["best"] == "sqrt"
    assert flipped.outcome == "untestable", flipped.sentence
    assert _growth(late[late.seed != 2], d_max=32)[1].outcome == "log"


def test_scaling_is_fitted_within_one_domain():
    """Two domains with two n each do not make three distinct n: across domains the task changes with n."""
    comp = pd.concat([_growth_comp({16: 8}, domain="mnist"), _growth_comp({64: 4, 128: 5})], ignore_index=True)
    fit, verdict = _growth(comp)
    assert fit["domain"] == "shakespeare" and verdict.outcome == "untestable" and "2 values of n in shakespeare" \
        in verdict.sentence


def test_the_scratch_comparison_takes_the_restarts_own_effect_off_the_compressed_loss():
    # the fine-tuning raises the full-rank control from 1.0 to 1.1 for every seed; the truncated r = 4 ends at 1.15
    rows = []
    for s in range(3):
        for r, loss in ((4, 1.15 + 0.01 * s), (16, 1.1 + 0.01 * s)):
            rows.append({"domain": "bbc", "n": 64, "stage": "finetuned", "seed": s, "r": r, "test_loss": loss,
                         "base_loss": 1.0 + 0.01 * s, "test_accuracy": 0.5, "steps": 100})
    models = pd.DataFrame([{"domain": "bbc", "n": 64, "d_head": d, "seed": s, "test_loss": loss + 0.01 * s,
                            "stop_step": 2000, "valid": True} for s in range(3) for d, loss in ((4, 1.08), (16, 1.0))])
    table = ch.scratch_comparison(pd.DataFrame(rows), models).set_index("r")
    assert table.loc[4, "compressed_loss_raw"] == pytest.approx(1.16)
    assert table.loc[4, "compressed_loss"] == pytest.approx(1.16 - 0.1), "the control's 0.1 nats are taken off"
    assert table.loc[4, "outcome"] == "compressed"   # 1.06 against 1.08 from scratch; raw, 1.16 would lose
    assert table.loc[16, "compressed_loss"] == pytest.approx(table.loc[16, "scratch_loss"])


def test_rule_verdict_outcomes():
    table = ch.smallest_r_table(pd.concat([_comp({1: 1.005, 2: 1.0}), _comp({1: 1.3, 2: 1.0}).assign(n=128)]))
    share = {("bbc", 64): 0.5, ("bbc", 128): 0.5}
    assert ch.rule_verdict(table, {("bbc", 64)}, share).outcome == "supported"
    withdrawn = ch.rule_verdict(table, {("bbc", 64), ("bbc", 128)}, share)
    assert withdrawn.outcome == "withdrawn" and "1 of 2 settings" in withdrawn.sentence
    untestable = ch.rule_verdict(table, set(), share)
    # the prose reads "After training, <sentence>.", so every sentence names what it is about
    assert untestable.outcome == "untestable" and untestable.sentence.startswith("the rule that one query/key")
    assert withdrawn.sentence.startswith("one query/key dimension is not enough")


def test_scaling_text_gives_the_growth_verdict_its_subject():
    from helpers.results import Verdict

    log = Verdict("log", "growth of order log n or slower: smallest r 5, 6 and 7 at n = 32, 64 and 128", "r", {})
    assert ch.scaling_text(log) == ("the needed rank shows growth of order log n or slower: smallest r 5, 6 and 7 at "
                                    "n = 32, 64 and 128")
    none = Verdict("untestable", "untestable at this budget: too few n", "r", {})
    assert ch.scaling_text(none) == "how the needed rank grows is untestable at this budget: too few n"
