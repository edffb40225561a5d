"""Random attention: shapes, row sums, input distributions and seeding."""

import math

import numpy as np
import pytest
import torch

from helpers import attention, seeding


@pytest.mark.parametrize("kind", attention.INPUT_KINDS)
def test_inputs_shapes_and_norms(kind):
    x = attention.random_inputs(16, 32, kind, batch=3, generator=seeding.torch_generator(0))
    assert x.shape == (3, 16, 32) and x.dtype == torch.float64
    norms = x.norm(dim=-1)
    assert float((norms - 1).abs().mean()) < 0.35


def test_orthonormal_inputs_are_orthonormal():
    x = attention.random_inputs(10, 12, "orthonormal", generator=seeding.torch_generator(1))[0]
    assert torch.allclose(x @ x.T, torch.eye(10, dtype=torch.float64), atol=1e-12)
    with pytest.raises(ValueError, match="d_model >= n"):
        attention.random_inputs(10, 5, "orthonormal")


def test_logits_match_a_numpy_recomputation():
    gen = seeding.torch_generator(2)
    logits = attention.random_logits(6, 3, d_model=8, weight_std=0.7, generator=gen)
    gen = seeding.torch_generator(2)
    x = (torch.randn(1, 6, 8, generator=gen, dtype=torch.float64) / math.sqrt(8)).numpy()[0]
    wq = 0.7 * torch.randn(1, 8, 3, generator=gen, dtype=torch.float64).numpy()[0]
    wk = 0.7 * torch.randn(1, 8, 3, generator=gen, dtype=torch.float64).numpy()[0]
    assert np.allclose(logits[0].numpy(), x @ wq @ wk.T @ x.T)


def test_softmax_rows_sum_to_one_and_hardmax_is_one_hot():
    a = attention.random_attention(20, 4, batch=2, generator=seeding.torch_generator(3))
    assert torch.allclose(a.sum(-1), torch.ones(2, 20, dtype=torch.float64))
    h = attention.random_attention(20, 4, hardmax=True, batch=2, generator=seeding.torch_generator(3))
    assert torch.equal(h.sum(-1), torch.ones(2, 20, dtype=torch.float64))
    assert set(h.unique().tolist()) == {0.0, 1.0}
    with pytest.raises(ValueError, match="temperature"):
        attention.softmax_attention(torch.zeros(2, 2), 0.0)


def test_same_seed_same_matrix_and_global_state_untouched():
    state = torch.random.get_rng_state()
    a = attention.random_attention(8, 2, generator=seeding.torch_generator(5))
    b = attention.random_attention(8, 2, generator=seeding.torch_generator(5))
    assert torch.equal(a, b)
    assert torch.equal(state, torch.random.get_rng_state())


@pytest.mark.parametrize("length, dim, base", [(50, 6, 10000.0), (17, 7, 10000.0), (9, 4, 100.0)])
def test_sinusoidal_table_against_the_closed_form(length, dim, base):
    table = attention.sinusoidal_table(length, dim, base)
    assert table.shape == (length, dim) and table.dtype == torch.float64
    for i in range(length):
        for j in range(dim):
            angle = i * base ** (-(j - j % 2) / dim)                     # w_k = base^(-2k/d) for columns 2k, 2k+1
            assert table[i, j].item() == pytest.approx(math.sin(angle) if j % 2 == 0 else math.cos(angle), abs=1e-12)


def test_the_models_float32_table_is_the_same_table_and_the_old_float32_recipe_bit_for_bit():
    from helpers.models import build_model

    wide = attention.sinusoidal_table(40, 16)
    narrow = attention.sinusoidal_table(40, 16, dtype=torch.float32)
    assert torch.allclose(narrow.double(), wide, atol=1e-5)
    # the recipe models.py used before the table moved here: cached trained models stay valid
    position = torch.arange(40, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, 16, 2, dtype=torch.float32) * (-math.log(10000.0) / 16))
    assert torch.equal(narrow[:, 0::2], torch.sin(position * freq)) and torch.equal(narrow[:, 1::2], torch.cos(position * freq))
    model = build_model(vocab_size=5, d_model=16, n_heads=2, pos="sinusoidal", max_len=40, seed=0)
    assert torch.equal(model.pos_table, narrow)
