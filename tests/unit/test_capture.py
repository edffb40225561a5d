"""helpers.capture: probabilities against a manual recomputation, invariants, cleanup, on-the-fly ranks."""

import pytest
import torch

from helpers import rank
from helpers.capture import attention_logits, attention_probs, attention_ranks, capture
from helpers.errors import ArgumentError
from helpers.models import build_model


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest


def tokens(batch=2, n=9, vocab=11):
    return torch.randint(0, vocab, (batch, n), generator=torch.Generator().manual_seed(0))


def manual_probs(model, x):
    """Recompute each layer's probabilities, and the whole forward pass between layers, from the weights by hand:
    `(layer, batch, head, n, n)` (MLP with GELU, LayerNorm before or after each part, as the config says)."""
    return manual_attention(model, x)[1]


def manual_attention(model, x):
    """(logits, probabilities) of every layer, recomputed by hand as `manual_probs` says."""
    cfg = model.cfg
    h = model.embed.weight[x] + (model.pos_table[: x.shape[1]] if model.pos_table is not None else 0)
    norm = lambda t, ln: torch.nn.functional.layer_norm(t, t.shape[-1:], ln.weight, ln.bias)
    heads = lambda t, width: t.view(*t.shape[:2], cfg.n_heads, width).transpose(1, 2)  # (B, H, n, width)
    out, all_logits = [], []
    for block in model.blocks:
        a = norm(h, block.norm1) if cfg.norm == "pre" else h
        w, b = block.attn.qkv.weight, block.attn.qkv.bias
        q, k, v = (a @ w.T + b).split([cfg.n_heads * cfg.head_dim] * 2 + [cfg.n_heads * cfg.value_dim], dim=-1)
        logits = heads(q, cfg.head_dim) @ heads(k, cfg.head_dim).transpose(-1, -2) * cfg.attn_scale
        if cfg.causal:
            logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).triu(1), float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        out.append(probs)
        all_logits.append(logits)
        mixed = (probs @ heads(v, cfg.value_dim)).transpose(1, 2).reshape(*h.shape[:2], -1)
        h = h + block.attn.out(mixed) if cfg.norm == "pre" else norm(h + block.attn.out(mixed), block.norm1)
        first, second = block.mlp[0], block.mlp[2]
        mlp = lambda t: torch.nn.functional.gelu(t @ first.weight.T + first.bias) @ second.weight.T + second.bias
        h = h + mlp(norm(h, block.norm2)) if cfg.norm == "pre" else norm(h + mlp(h), block.norm2)
    return torch.stack(all_logits), torch.stack(out)


@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("options", [dict(d_head=4), dict(causal=True, temperature=0.3, d_head=5, norm="post")])
def test_capture_matches_manual_recomputation(n_layers, options):
    model = build_model(vocab_size=11, d_model=16, n_heads=3, n_layers=n_layers, seed=1, **options).eval()
    x = tokens()
    with torch.no_grad(), capture(model) as cap:
        model(x)
    with torch.no_grad():
        expected = manual_probs(model, x)
    assert cap.probs.shape == (n_layers, 2, 3, 9, 9)
    assert torch.allclose(cap.probs, expected, atol=1e-6)


@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("options", [dict(d_head=4, pos="sinusoidal"), dict(causal=True, temperature=0.3, d_head=5,
                                                                             norm="post")])
def test_logits_match_manual_recomputation_and_the_captured_softmax(n_layers, options):
    # float64 throughout: both paths round only at about 1e-16 relative per operation, over a few hundred
    # operations on O(1) values, so 1e-12 separates a wrong formula from rounding with room to spare
    model = build_model(vocab_size=11, d_model=16, n_heads=3, n_layers=n_layers, seed=1, **options).double()
    x = tokens()
    logits = attention_logits(model, x)
    with torch.no_grad():
        expected, probs = manual_attention(model, x)
    assert logits.shape == (n_layers, 2, 3, 9, 9) and logits.dtype == torch.float64
    finite = torch.isfinite(expected)
    assert torch.equal(torch.isfinite(logits), finite)            # the causal entries, and only they, are -inf
    assert torch.allclose(logits[finite], expected[finite], rtol=0, atol=1e-12)
    assert torch.allclose(torch.softmax(logits, -1), attention_probs(model, x), rtol=0, atol=1e-12)
    assert model.training                                         # put back as it was


@pytest.mark.parametrize("path", ["fast", "explicit"])
def test_output_identical_with_and_without_capture(path):
    model = build_model(vocab_size=11, d_model=16, n_heads=2, n_layers=2, seed=2).set_attention_path(path).eval()
    x = tokens()
    plain = model(x)
    with capture(model) as cap:
        captured = model(x)
    assert torch.equal(plain, captured)
    assert cap.probs.shape == (2, 2, 2, 9, 9)
    model.train()  # gradients unchanged too
    grad = lambda: torch.autograd.grad(model(x).sum(), model.embed.weight)[0]
    plain_grad = grad()
    with capture(model, layers=[1]):
        assert torch.equal(grad(), plain_grad)


def test_rows_sum_to_one_and_causal_zeros():
    model = build_model(vocab_size=11, d_model=16, n_heads=2, n_layers=2, causal=True, seed=0)
    probs = attention_probs(model, tokens(n=12))
    assert torch.allclose(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-5)
    upper = torch.ones(12, 12, dtype=torch.bool).triu(1)
    assert torch.all(probs[..., upper] == 0)
    assert torch.all(probs[..., ~upper] > 0)
    assert model.training  # attention_probs restores the mode


def test_no_probe_left_after_an_exception():
    model = build_model(vocab_size=11, d_model=16, n_heads=2, n_layers=3)
    with pytest.raises(ZeroDivisionError):
        with capture(model, layers=[0, 2]):
            model(tokens())
            1 / 0
    assert all(attn.probe is None for attn in model.attentions)
    with pytest.raises(ValueError):  # an error inside the forward pass too
        with capture(model):
            model(tokens(n=2000))
    assert all(attn.probe is None for attn in model.attentions)
    with capture(model) as cap:  # and capture works again afterwards
        model(tokens())
    assert cap.probs.shape[0] == 3


def test_chosen_layers_several_passes_and_errors():
    model = build_model(vocab_size=11, d_model=16, n_heads=2, n_layers=3, seed=0).eval()
    x = tokens()
    full = attention_probs(model, x)
    with capture(model, layers=-1) as cap:
        model(x[:1])
        model(x[1:])
    assert cap.layers == [2]
    assert torch.allclose(cap.probs[0], full[2], atol=1e-6)
    for bad in ([3], [], [0, 0]):
        with pytest.raises(ArgumentError, match="layers"):
            with capture(model, layers=bad):
                pass
    with pytest.raises(ArgumentError, match="measures"):
        with capture(model, measures=("trace",)):
            pass
    with pytest.raises(ArgumentError, match="model"):
        with capture(torch.nn.Linear(2, 2)):
            pass
    with pytest.raises(RuntimeError, match="nothing was captured"):
        with capture(model) as cap:
            pass
        cap.probs


def test_on_the_fly_ranks_match_stored_matrices():
    model = build_model(vocab_size=11, d_model=16, n_heads=2, n_layers=2, d_head=2, seed=4).eval()
    x = tokens(n=20)
    probs = attention_probs(model, x)
    ranks = attention_ranks(model, x, rtol=1e-2)
    assert set(ranks) == set(rank.MEASURES)
    assert ranks["numerical"].shape == (2, 2, 2)
    assert torch.equal(ranks["numerical"], rank.numerical_rank(probs, rtol=1e-2).double())
    assert torch.equal(ranks["hardmax"], rank.hardmax_rank(probs).double())
    assert torch.allclose(ranks["effective"], rank.effective_rank(probs))
    assert torch.allclose(ranks["stable"], rank.stable_rank(probs))
    with torch.no_grad(), capture(model, measures=("hardmax",)) as cap:
        model(x)
    assert cap.probs is None and set(cap.ranks) == {"hardmax"}
