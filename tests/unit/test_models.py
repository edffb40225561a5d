"""helpers.models: the two attention paths, d_head, positions, seeded construction, validation."""

import pytest
import torch

from helpers.errors import ArgumentError
from helpers.models import ModelConfig, build_model, count_parameters, pick_device, rotary_tables


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest


def tokens(batch=3, n=10, vocab=11, seed=0):
    return torch.randint(0, vocab, (batch, n), generator=torch.Generator().manual_seed(seed))


VARIANTS = [
    dict(pos="none"), dict(pos="sinusoidal", causal=True), dict(pos="learned", norm="post"),
    dict(pos="rope", d_head=6), dict(norm="none", residual=False, mlp=False, d_head=5),
    dict(temperature=0.5, causal=True), dict(scale=2.0, n_layers=3, activation="relu"),
]


@pytest.mark.parametrize("options", VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_fast_and_explicit_paths_agree(options):
    model = build_model(vocab_size=11, d_model=16, n_heads=2, seed=3, **options).eval()
    x = tokens()
    fast = model(x)
    explicit = model.set_attention_path("explicit")(x)
    assert torch.allclose(fast, explicit, atol=1e-5, rtol=1e-5)
    model.train()  # gradients agree too
    model.set_attention_path("fast")
    g_fast = torch.autograd.grad(model(x).square().sum(), model.blocks[0].attn.qkv.weight)[0]
    model.set_attention_path("explicit")
    g_expl = torch.autograd.grad(model(x).square().sum(), model.blocks[0].attn.qkv.weight)[0]
    assert torch.allclose(g_fast, g_expl, atol=1e-4, rtol=1e-4)


# the query/key width differs from the value width in most (torch has no fused kernel then), equals it in two
WIDTH_VARIANTS = [
    dict(d_head=3, d_value=16, pos="sinusoidal"), dict(d_head=8, d_value=16, pos="sinusoidal", causal=True),
    dict(d_head=6, d_value=4, pos="rope", causal=True), dict(d_head=2, d_value=5, pos="learned", n_layers=2),
    dict(d_head=16, d_value=16, pos="sinusoidal", causal=True), dict(d_head=4, pos="none"),
    dict(d_head=1, d_value=16, pos="sinusoidal", causal=True), dict(d_head=1, d_value=16, pos="learned"),
    dict(d_head=1, d_value=16, n_heads=1, pos="sinusoidal"),   # chapter 05's narrowest head
    dict(d_head=1, d_value=16, n_heads=1, pos="sinusoidal", causal=True),
]


@pytest.mark.parametrize("options", WIDTH_VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_fast_path_computes_what_torch_sdpa_computes_bit_for_bit(options, monkeypatch):
    # Where torch has no fused kernel the fast path writes out torch's math kernel without its checks for empty
    # rows, claiming the same bits: so the weights a model trains to do not depend on which one ran. Checked against
    # scaled_dot_product_attention itself, outputs and every gradient, with torch.equal (no tolerance).
    import torch.nn.functional as F
    from helpers import forward

    def run():
        model = build_model(**{"vocab_size": 11, "d_model": 16, "n_heads": 2, "seed": 3, **options})
        out = model(tokens(batch=4, n=40))
        grads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
        return [out.detach(), *grads]

    sdpa_calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: sdpa_calls.append(1) or sdpa(*a, **k))
    ours = run()
    fused = options["d_head"] == options.get("d_value", options["d_head"])
    assert bool(sdpa_calls) == fused   # torch's kernel ran exactly where it has a fused one
    monkeypatch.setattr(forward, "_fused_or_math", lambda q, k, v, causal: sdpa(
        q, k, v, is_causal=causal, scale=1.0))
    assert all(torch.equal(a, b) for a, b in zip(ours, run()))


@pytest.mark.parametrize("d_model,n_heads,d_head", [(32, 4, 3), (32, 4, 16), (30, 4, 2), (16, 1, 64)])
def test_d_head_independent_of_d_model_over_heads(d_model, n_heads, d_head):
    model = build_model(vocab_size=7, d_model=d_model, n_heads=n_heads, d_head=d_head)
    attn = model.blocks[0].attn
    assert attn.qkv.weight.shape == (3 * n_heads * d_head, d_model)
    assert attn.out.weight.shape == (d_model, n_heads * d_head)
    assert model(tokens(vocab=7)).shape == (3, 10, 7)
    assert model.cfg.attn_scale == pytest.approx(d_head**-0.5)


def test_default_d_head_and_indivisible_error():
    assert ModelConfig(vocab_size=5, d_model=32, n_heads=4).head_dim == 8
    with pytest.raises(ArgumentError, match="d_head"):
        ModelConfig(vocab_size=5, d_model=30, n_heads=4)


@pytest.mark.parametrize("pos", ["none", "sinusoidal", "learned", "rope"])
def test_each_positional_encoding(pos):
    """Without positions a non-causal model is permutation-equivariant; every encoding breaks that."""
    model = build_model(vocab_size=11, d_model=16, n_heads=2, pos=pos, task="features", seed=1).eval()
    x = tokens(batch=2, n=9)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(0))
    out, out_perm = model(x), model(x[:, perm])
    equivariant = torch.allclose(out[:, perm], out_perm, atol=1e-5)
    assert equivariant == (pos == "none")
    assert (pos == "learned") == any(name == "pos_table" for name, _ in model.named_parameters())


def test_rope_scores_depend_on_relative_position():
    cos, sin = rotary_tables(8, 12)
    rot = lambda t: t * cos + torch.cat([-t[..., 4:], t[..., :4]], dim=-1) * sin  # the rotate-half form
    q, k = torch.randn(1, 8), torch.randn(1, 8)
    scores = rot(q.expand(12, 8)) @ rot(k.expand(12, 8)).T  # (12, 12), depends on i - j only
    assert torch.allclose(scores[3, 1], scores[10, 8], atol=1e-5)
    assert torch.allclose(scores[0, 5], scores[6, 11], atol=1e-5)


def test_seeded_construction_is_deterministic_and_leaves_global_rng():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = build_model(vocab_size=9, d_model=16, n_heads=2, pos="learned", seed=7)
    b = build_model(vocab_size=9, d_model=16, n_heads=2, pos="learned", seed=7)
    c = build_model(vocab_size=9, d_model=16, n_heads=2, pos="learned", seed=8)
    assert torch.equal(torch.get_rng_state(), state)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name
    assert not torch.equal(a.embed.weight, c.embed.weight)


def test_heads_and_patch_embedding():
    lm = build_model(vocab_size=13, d_model=16, n_heads=2, causal=True)
    assert lm(tokens(vocab=13)).shape == (3, 10, 13)
    for patch, n in [(7, 16), (4, 49), (2, 196)]:
        vit = build_model(image_size=28, patch_size=patch, n_classes=10, task="classify", d_model=16, n_heads=2,
                          pos="learned")
        assert vit.cfg.n_patches == n
        assert vit.hidden(torch.rand(2, 1, 28, 28)).shape == (2, n, 16)
        assert vit(torch.rand(2, 28, 28)).shape == (2, 10)
    vec = build_model(input_dim=5, task="classify", n_classes=3, pool="last", d_model=16, n_heads=2, causal=True)
    assert vec(torch.randn(4, 6, 5)).shape == (4, 3)
    assert count_parameters(vec) > 0


def test_causal_model_ignores_the_future():
    model = build_model(vocab_size=11, d_model=16, n_heads=2, causal=True, seed=2).eval()
    x = tokens(batch=1, n=8)
    y = x.clone()
    y[0, 5:] = (y[0, 5:] + 1) % 11
    assert torch.allclose(model(x)[0, :5], model(y)[0, :5], atol=1e-6)


@pytest.mark.parametrize("bad,name", [
    (dict(d_model=0), "d_model"), (dict(n_heads=2.5), "n_heads"), (dict(pos="alibi"), "pos"),
    (dict(norm="rms"), "norm"), (dict(temperature=1.0, scale=1.0), "temperature"), (dict(temperature=0), "temperature"),
    (dict(pos="rope", d_head=3), "d_head"), (dict(task="classify"), "n_classes"),
    (dict(vocab_size=None), "vocab_size"), (dict(input_dim=4), "vocab_size"), (dict(residual="yes"), "residual"),
])
def test_config_errors_name_the_parameter(bad, name):
    options = {"vocab_size": 5, **bad}
    with pytest.raises(ArgumentError, match=f"Argument {name}:"):
        ModelConfig(**options)


def test_image_config_errors_and_long_input():
    with pytest.raises(ArgumentError, match="patch_size"):
        ModelConfig(image_size=28, patch_size=5, task="classify", n_classes=10)
    with pytest.raises(ArgumentError, match="max_len"):
        ModelConfig(image_size=28, patch_size=1, task="classify", n_classes=10, max_len=100)
    model = build_model(vocab_size=5, max_len=8)
    with pytest.raises(ValueError, match="max_len"):
        model(tokens(n=9, vocab=5))


def test_build_model_from_dict_and_device():
    cfg = ModelConfig(vocab_size=5, d_model=16, n_heads=2)
    assert build_model(cfg.to_dict(), d_head=3).cfg.head_dim == 3
    with pytest.raises(ArgumentError, match="colour"):
        build_model({**cfg.to_dict(), "colour": 1})
    assert pick_device("cpu").type == "cpu"
    assert pick_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ArgumentError, match="device"):
        pick_device("tpu")


@pytest.mark.parametrize("d_head", [1, 3, 8])
def test_value_width_is_separate_from_query_key_width(d_head):
    """rank(W_q W_k^T) per head <= d_head; the value path keeps width d_value and its parameter count."""
    d_model, heads, d_value = 16, 2, 4
    model = build_model(vocab_size=11, d_model=d_model, n_heads=heads, d_head=d_head, d_value=d_value, seed=2)
    attn = model.blocks[0].attn
    weight = attn.qkv.weight.detach().double()
    assert weight.shape == (heads * (2 * d_head + d_value), d_model)
    for h in range(heads):
        w_q = weight[h * d_head:(h + 1) * d_head]
        w_k = weight[(heads + h) * d_head:(heads + h + 1) * d_head]
        bilinear = w_q.T @ w_k  # (d_model, d_model): logits = x^T W_q^T W_k y
        assert torch.linalg.matrix_rank(bilinear).item() == min(d_head, d_model)
    assert attn.out.weight.shape == (d_model, heads * d_value)
    value_params = weight[2 * heads * d_head:].numel() + attn.out.weight.numel()
    assert value_params == heads * d_value * d_model * 2  # the same for every d_head
    x = tokens(vocab=11)
    assert model(x).shape == (3, 10, 11)
    explicit = build_model(model.cfg, seed=2).set_attention_path("explicit")
    assert torch.allclose(model(x), explicit(x), atol=1e-5)


def test_attention_with_a_separate_value_width_by_hand():
    """One attention layer recomputed in float64 numpy from its weights: out(softmax(s q k^T) v)."""
    import numpy as np

    model = build_model(input_dim=5, task="features", d_model=6, n_heads=2, d_head=3, d_value=2, n_layers=1,
                        mlp=False, norm="none", residual=False, pos="none", causal=True, seed=4).double()
    x = torch.randn(1, 7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    h = x[0].numpy() @ state["embed.weight"].T + state["embed.bias"]
    qkv = h @ state["blocks.0.attn.qkv.weight"].T + state["blocks.0.attn.qkv.bias"]
    q, k, v = qkv[:, :6].reshape(7, 2, 3), qkv[:, 6:12].reshape(7, 2, 3), qkv[:, 12:].reshape(7, 2, 2)
    heads = []
    for i in range(2):
        logits = q[:, i] @ k[:, i].T / np.sqrt(3) + np.triu(np.full((7, 7), -np.inf), 1)
        p = np.exp(logits - logits.max(1, keepdims=True))
        heads.append((p / p.sum(1, keepdims=True)) @ v[:, i])
    expected = np.concatenate(heads, 1) @ state["blocks.0.attn.out.weight"].T + state["blocks.0.attn.out.bias"]
    assert np.allclose(model(x)[0].detach().numpy(), expected, atol=1e-10)
    assert ModelConfig(vocab_size=5, d_head=3).value_dim == 3  # default: the query/key width
