"""The decoder probe (`helpers.decoder_attention`) on a tiny random Llama with grouped-query attention, the prefix
rank measure, and the model-path check of `helpers.decoder` (a tiny Llama accepted, a tiny GPT-2 refused)."""

import pytest
import torch

from helpers import decoder, rank
from helpers import decoder_attention as attention
from helpers.errors import ArgumentError
from tiny_models import tiny_llama, transformers

EPS64 = torch.finfo(torch.float64).eps
EPS32 = torch.finfo(torch.float32).eps


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 50, (2, 24), generator=torch.Generator().manual_seed(1))


def _probe_all(model, ids, **kwargs):
    seen = {}
    with attention.probing(model, on_layer=lambda a: seen.__setitem__(a.layer, a), **kwargs):
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=False).logits
    return seen, out


def test_probabilities_match_the_models_own_eager_attention(model, ids):
    with torch.no_grad():
        eager = model(input_ids=ids, output_attentions=True, use_cache=False)
    seen, out = _probe_all(model, ids)
    assert sorted(seen) == [0, 1]
    n = ids.shape[1]
    for layer, a in seen.items():
        assert a.probs.shape == (2, 6, n, n) and a.key.shape == (2, 2, n, 8) and a.groups == 3
        # Llama's eager attention takes its softmax in float32: each probability carries a relative error of at most
        # (n + 4) eps32 (n exponentials summed, a division, a cast). Our logits are the same float64 products, so
        # they add at most 2 d eps64 |q||k| scaling, and softmax moves a probability by at most 2 max|d logit|.
        logits_bound = 2 * 8 * EPS64 * float(a.query.norm(dim=-1).max() * a.key.norm(dim=-1).max()) * a.scaling
        assert (a.probs - eager.attentions[layer]).abs().max() <= (n + 4) * EPS32 + 2 * logits_bound
        assert torch.allclose(a.probs.sum(-1), torch.ones(()).double(), atol=(n + 4) * EPS64)
        assert (a.probs.triu(1) == 0).all(), "causal: no mass above the diagonal"
    assert max(a.probs.max() for a in seen.values()) > 0.9, "the test model has sharp heads, so it tests something"
    # the same comparison as the library function the chapter records (a share of the rounding bound)
    assert attention.eager_agreement(model, ids) <= 1.0
    assert model.config._attn_implementation == "eager", "the model's own setting is restored"


def test_probing_keeps_the_models_output(model, ids):
    model.set_attn_implementation("sdpa")
    try:
        with torch.no_grad():
            plain = model(input_ids=ids, use_cache=False).logits
        _, out = _probe_all(model, ids)
    finally:
        model.set_attn_implementation("eager")
    # both paths run float64 SDPA on the same projections; the kernels may sum in another order: each output is a
    # 2-layer path of about 48 + 64 + 24 accumulations per value, each adding at most eps of the running magnitude
    assert (out - plain).abs().max() <= 2 * (48 + 64 + 24) * 2 * EPS64 * float(plain.abs().max())


def test_rope_is_applied_and_gqa_groups_share_keys(model, ids):
    seen, _ = _probe_all(model, ids)
    a = seen[0]
    # RoPE rotates pairs of coordinates: norms are kept (up to cos and sin, which Llama computes in float32: each
    # off by at most eps32, so a norm by at most 2 eps32 of itself), position 0 is not rotated, later positions are
    assert torch.allclose(a.key.norm(dim=-1), a.key_pre.norm(dim=-1), rtol=4 * EPS32, atol=0)
    assert torch.equal(a.key[:, :, 0], a.key_pre[:, :, 0])
    assert not torch.allclose(a.key[:, :, 5], a.key_pre[:, :, 5])
    # heads 0..2 read key group 0 and heads 3..5 group 1: recompute head 4's logits by hand
    by_hand = (a.query[:, 4] @ a.key[:, 1].transpose(-1, -2)) * a.scaling
    visible = torch.ones(24, 24, dtype=torch.bool).tril()
    assert torch.allclose(a.logits[:, 4][:, visible], by_hand[:, visible], rtol=0, atol=1e3 * EPS64)


def test_probing_restores_the_modules_even_after_an_error(model, ids):
    def boom(a):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        with attention.probing(model, on_layer=boom):
            model(input_ids=ids, use_cache=False)
    assert all("forward" not in m.__dict__ for m in attention.attention_modules(model))
    seen, _ = _probe_all(model, ids, layers=[1])
    assert sorted(seen) == [1]


def test_key_cut_to_full_rank_is_the_uncut_model_and_rank_r_bounds_every_logit_matrix(model, ids):
    with torch.no_grad():
        uncut = attention.next_token_losses(model, ids)
    bases, grams = attention.key_principal_bases(model, ids)
    assert sorted(bases) == [0, 1] and bases[0].shape == (2, 8, 8)
    # the dropped share of the keys' energy is the sum of the smallest eigenvalues of their second moment
    eigenvalues = torch.linalg.eigvalsh(grams["keys"][0])                         # ascending, (KV, d)
    by_hand = eigenvalues[:, :5].sum(-1) / eigenvalues.sum(-1)
    # the basis is float32: B^T B = I up to about d eps32 per entry, which moves a share by at most 2 d eps32
    tol = 4 * 8 * EPS32
    assert torch.allclose(attention.dropped_share(grams["keys"][0], bases[0], 3), by_hand, rtol=tol, atol=tol)
    assert torch.allclose(attention.dropped_share(grams["queries"][0], bases[0], 8), torch.zeros(2, dtype=torch.float64),
                          atol=tol)
    # the queries' second moment, recomputed from one captured layer
    seen, _ = _probe_all(model, ids)
    q = seen[0].query.double()                                                    # (B, H, n, d), heads 0-2 in group 0
    assert torch.allclose(grams["queries"][0][0], torch.einsum("bhnd,bhne->de", q[:, :3], q[:, :3]), rtol=1e-12)
    full = {layer: basis.double() for layer, basis in bases.items()}
    with attention.probing(model, key_bases=full):
        same = attention.next_token_losses(model, ids)
    # B B^T = I up to the float32 rounding of the eigenvectors (about 8 eps32 per entry)
    assert (same - uncut).abs().max() < 1e-4 * float(uncut.abs().max())
    cut = {layer: basis[..., :3] for layer, basis in bases.items()}
    seen, _ = _probe_all(model, ids, key_bases=cut)
    for a in seen.values():
        logits = (a.query @ a.key.repeat_interleave(a.groups, 1).transpose(-1, -2))   # unmasked (B, H, n, n)
        assert int(torch.linalg.matrix_rank(logits).max()) <= 3
    with attention.probing(model, key_bases=cut):
        worse = attention.next_token_losses(model, ids)
    assert not torch.allclose(worse, uncut)


def test_bad_key_bases_are_refused(model):
    with pytest.raises(ArgumentError, match="key_bases"):
        attention.check_key_bases(model, {0: torch.ones(2, 8, 3)})            # not orthonormal
    with pytest.raises(ArgumentError, match="key_bases"):
        attention.check_key_bases(model, {0: torch.eye(8)[None].repeat(3, 1, 1)})   # 3 groups, the model has 2
    with pytest.raises(ArgumentError, match="key_bases"):
        attention.check_key_bases(model, {5: torch.eye(8)[None].repeat(2, 1, 1)})   # no layer 5


def test_prefix_hardmax_rank_equals_the_rank_of_each_leading_block():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4, 40, 40, generator=gen)
    logits[..., 7] += 2.0                                                          # a sink column, so ranks differ
    logits = logits.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
    sizes = [1, 5, 8, 17, 40]
    got = rank.hardmax_rank_prefixes(logits, sizes)
    for k, s in enumerate(sizes):
        assert torch.equal(got[..., k], rank.hardmax_rank(logits[..., :s, :s]))
    with pytest.raises(ArgumentError, match="causal"):
        rank.hardmax_rank_prefixes(torch.randn(6, 6, generator=gen), [3])
    with pytest.raises(ArgumentError, match="sizes"):
        rank.hardmax_rank_prefixes(logits, [41])


def test_prefix_means_and_losses(model, ids):
    values = torch.arange(1.0, 7.0)
    assert torch.allclose(attention.prefix_means(values, [1, 3, 6]), torch.tensor([1.0, 2.0, 3.5], dtype=torch.float64))
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits
    losses = attention.next_token_losses(model, ids)
    by_hand = -torch.log_softmax(logits[0, 3].float(), -1)[ids[0, 4]]
    assert torch.allclose(losses[0, 3], by_hand)
    with pytest.raises(ArgumentError, match="ids"):
        attention.next_token_losses(model, ids[:, :1])


# ---------------------------------------------------------------------------------------------- model paths
def test_model_path_checks(tmp_path):
    assert decoder.check_model_path("MODEL_PATH", None) is None
    with pytest.raises(decoder.UnsupportedModelError, match="MODEL_PATH.*existing path"):
        decoder.check_model_path("MODEL_PATH", str(tmp_path / "nothing"))
    with pytest.raises(decoder.UnsupportedModelError, match="config.json"):
        decoder.check_model_path("MODEL_PATH", str(tmp_path))
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=20))
    gpt2.save_pretrained(tmp_path / "gpt2")
    with pytest.raises(decoder.UnsupportedModelError, match="'gpt2'"):
        decoder.check_model_path("MODEL_PATH", str(tmp_path / "gpt2"))
    tiny_llama(dtype=torch.float32).save_pretrained(tmp_path / "llama")
    assert decoder.check_model_path("MODEL_PATH", str(tmp_path / "llama")) == str(tmp_path / "llama")


def test_weights_and_corpus_are_checked():
    with pytest.raises(ArgumentError, match="weights"):
        decoder.load_model("trained")
    with pytest.raises(ArgumentError, match="corpus"):
        decoder.corpus_text("wikipedia")


def test_loading_opens_each_gguf_file_once(monkeypatch):
    """transformers opens the .gguf file for the config, the tokenizer and the weights, parsing its header each time;
    `load` shares one reader per file. Counted here through transformers' own loader, called twice."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    built = []

    class Counting(gguf.GGUFReader):
        def __init__(self, *args, **kwargs):
            built.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    monkeypatch.setattr(decoder, "_READERS", {})
    path = str(decoder.default_model_path())
    with decoder._one_gguf_reader_per_file():
        first = load_gguf_checkpoint(path, return_tensors=False)
        assert gguf.GGUFReader(path) is gguf.GGUFReader(path)
    with decoder._one_gguf_reader_per_file():   # a later load (the tokenizer after the model) reuses it too
        second = load_gguf_checkpoint(path, return_tensors=False)
    assert len(built) == 1 and first["config"] == second["config"]
    assert gguf.GGUFReader is Counting, "the reader class is restored afterwards"


def test_load_lets_the_shared_reader_go_once_model_and_tokenizer_are_loaded(monkeypatch):
    monkeypatch.setattr(decoder, "_READERS", {("some.gguf", "r"): object()})
    monkeypatch.setattr(decoder, "load_model", lambda *args: "model")
    monkeypatch.setattr(decoder, "load_tokenizer", lambda *args: "tokenizer")
    assert decoder.load() == ("model", "tokenizer") and decoder._READERS == {}
