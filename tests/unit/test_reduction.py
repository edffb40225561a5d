"""Chapter 07's interventions: SVD truncation of W_q W_k^T, attention-rank limits and logit scaling (tiny models)."""

import numpy as np
import pytest
import torch

from helpers import capture, rank
from helpers.experiments import ch07_model_reduction as red
from helpers.models import ModelConfig, build_model


def tiny(causal=False, d_head=6, bias=True):
    cfg = ModelConfig(d_model=16, n_heads=2, d_head=d_head, n_layers=2, vocab_size=11, task="lm", causal=causal,
                      bias=bias, max_len=32)
    return build_model(cfg, seed=3, device="cpu").eval()


def tokens(n=12, batch=3):
    return torch.randint(0, 11, (batch, n), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("bias", [True, False])
def test_truncation_at_full_rank_leaves_the_output_unchanged(bias):
    model, x = tiny(bias=bias), tokens()
    with torch.no_grad():
        before = model(x)
        after = red.truncate_qk(model, model.cfg.head_dim)(x)
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("r", [1, 2, 4])
def test_truncated_bilinear_form_is_the_numpy_best_rank_r_approximation(r):
    model = tiny()
    small = red.truncate_qk(model, r)
    for attn, cut in zip(model.attentions, small.attentions):
        for head in range(attn.n_heads):
            m = red.bilinear(attn, head).numpy()
            u, s, vt = np.linalg.svd(m)
            expected = (u[:, :r] * s[:r]) @ vt[:r]
            got = red.bilinear(cut, head).numpy()
            np.testing.assert_allclose(got, expected, atol=1e-5)
            assert np.linalg.matrix_rank(got, tol=1e-6 * s[0]) == r


def test_truncation_does_not_touch_the_original_or_the_values():
    model = tiny()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    small = red.truncate_qk(model, 1)
    for key, value in model.state_dict().items():
        assert torch.equal(value, weights[key])
    for attn, cut in zip(model.attentions, small.attentions):
        h, d = attn.n_heads, attn.d_head
        torch.testing.assert_close(cut.qkv.weight[2 * h * d:], attn.qkv.weight[2 * h * d:])


def test_qk_parameter_count():
    model = tiny(d_head=6)
    assert red.qk_parameters(model) == 2 * 2 * 2 * 6 * 17
    assert red.qk_parameters(model, 2) == 2 * 2 * 2 * 2 * 17


@pytest.mark.parametrize("causal", [False, True])
def test_attention_rank_limit_at_n_is_a_no_op_and_is_removed(causal):
    model, x = tiny(causal=causal), tokens()
    with torch.no_grad():
        before = model(x)
        with red.limit_attention_rank(model, x.shape[1]):
            during = model(x)
        after = model(x)
    torch.testing.assert_close(during, before, atol=1e-5, rtol=1e-5)
    assert torch.equal(after, before)
    assert all("probabilities" not in attn.__dict__ and attn.path == "fast" for attn in model.attentions)


def test_attention_rank_limit_gives_rank_r_matrices():
    model, x = tiny(), tokens()
    with red.limit_attention_rank(model, 3), torch.no_grad(), capture.capture(model) as cap:
        model(x)
    probs = cap.probs  # (layer, batch, head, n, n)
    assert int(rank.numerical_rank(probs, rtol=1e-6).max()) == 3


def test_causal_rank_limit_keeps_the_mask():
    model, x = tiny(causal=True), tokens()
    with red.limit_attention_rank(model, 2), torch.no_grad(), capture.capture(model) as cap:
        model(x)
    assert float(cap.probs.triu(1).abs().max()) == 0.0


def test_low_rank_matches_numpy():
    a = torch.rand(7, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    u, s, vt = np.linalg.svd(a.numpy())
    np.testing.assert_allclose(red.low_rank(a, 2, causal=False).numpy(), (u[:, :2] * s[:2]) @ vt[:2], atol=1e-12)


def test_zero_logit_scale_is_uniform_attention_and_scale_one_is_a_no_op():
    model, x = tiny(), tokens()
    with torch.no_grad():
        before = model(x)
        with red.scale_logits(model, 1.0):
            same = model(x)
        with red.scale_logits(model, 0.0), capture.capture(model) as cap:
            model(x)
        after = model(x)
    torch.testing.assert_close(same, before, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cap.probs, torch.full_like(cap.probs, 1 / x.shape[1]))
    assert torch.equal(after, before)


def test_rank_levels():
    assert red.rank_levels(16) == [1, 2, 4, 8, 16]
    assert red.rank_levels(49) == [1, 2, 4, 8, 16, 32, 49]
