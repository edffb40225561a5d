"""The constructed heads of chapter 8 against their closed-form ranks, and the bounds on random cases."""

import math

import pytest
import torch

from helpers import attention, counterexamples as cx, models, rank, seeding
from helpers.experiments import ch08_where_it_breaks

MEASURES = ("hardmax", "numerical", "effective", "stable")


def all_measures(matrix):
    values = rank.measures(matrix, MEASURES)          # numerical at rank.DEFAULT_RTOL, keyed back to bare names
    return {m: float(values[rank.label(m, rank.DEFAULT_RTOL) if m == "numerical" else m]) for m in MEASURES}


@pytest.mark.parametrize("n, d_head", [(8, 2), (32, 16), (64, 8)])
def test_identity_head_is_full_rank_under_every_measure_at_low_temperature(n, d_head):
    logits = cx.identity_head_logits(n, d_head, seeding.torch_generator(n + d_head))
    assert int(rank.hardmax_rank(logits)) == n, "every row picks itself, even at d_head = 2"
    assert torch.equal(logits.argmax(-1), torch.arange(n))
    t_star = cx.certified_temperature(logits)
    assert t_star > 0
    ranks = all_measures(attention.softmax_attention(logits, t_star))
    assert ranks["hardmax"] == n and ranks["numerical"] == n
    assert ranks["effective"] == pytest.approx(n, rel=1e-3)
    assert ranks["stable"] == pytest.approx(n, rel=1e-3)


@pytest.mark.parametrize("d", [8, 16, 64])
def test_shift_matrix_maps_each_position_to_the_previous_one(d):
    p = attention.sinusoidal_table(30, d)
    shifted = p @ cx.shift_matrix(d, 1)
    assert torch.allclose(shifted[1:], p[:-1], atol=1e-12)
    assert torch.allclose(cx.shift_matrix(d) @ cx.shift_matrix(d).T, torch.eye(d, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("n, d_head", [(16, 16), (64, 16), (128, 32)])
def test_previous_token_head_has_its_closed_form_ranks(n, d_head):
    assert cx.previous_token_condition(n, d_head)
    logits = cx.previous_token_logits(n, d_head)
    winners = logits.argmax(-1)
    assert int(winners[0]) == 0 and torch.equal(winners[1:], torch.arange(n - 1))
    assert int(rank.hardmax_rank(logits)) == n - 1
    form = cx.hardmax_closed_form(cx.previous_token_counts(n))
    assert form["hardmax"] == n - 1 and form["stable"] == pytest.approx(n / 2)
    expected_eff = math.exp(-sum(p * math.log(p) for p in
                                 [math.sqrt(2) / (math.sqrt(2) + n - 2)] + [1 / (math.sqrt(2) + n - 2)] * (n - 2)))
    assert form["effective"] == pytest.approx(expected_eff)
    measured = all_measures(attention.hardmax_attention(logits))
    for m in MEASURES:
        assert measured[m] == pytest.approx(form[m]), m
    cold = all_measures(attention.softmax_attention(logits, cx.certified_temperature(logits)))
    assert cold["numerical"] == n - 1 and cold["hardmax"] == n - 1
    assert cold["stable"] == pytest.approx(n / 2, rel=1e-3)
    causal = cx.causal_attention(logits, cx.certified_temperature(logits))
    assert int(rank.hardmax_rank(causal)) == n - 1, "the causal mask gives the same pattern"


@pytest.mark.parametrize("temperature", [0.05, 1.0, 4.0, 100.0])
def test_causal_softmax_is_exactly_full_rank(temperature):
    n = 24
    logits = attention.random_logits(n, 4, generator=seeding.torch_generator(3))[0]
    a = cx.causal_attention(logits, temperature)
    assert torch.equal(a, torch.tril(a)), "lower triangular"
    diagonal = torch.diagonal(a)
    assert bool((diagonal > 0).all())
    assert float(torch.linalg.det(a)) == pytest.approx(float(diagonal.prod()), rel=1e-6)
    assert int(rank.numerical_rank(a, rtol=1e-12)) == n
    assert torch.allclose(a.sum(-1), torch.ones(n, dtype=torch.float64))


def test_uniform_causal_limit_is_invertible_with_hardmax_rank_one():
    n = 50
    c = cx.uniform_causal(n)
    assert torch.allclose(c @ cx.uniform_causal_inverse(n), torch.eye(n, dtype=torch.float64), atol=1e-12)
    assert int(rank.numerical_rank(c, rtol=1e-8)) == n
    assert int(rank.hardmax_rank(c)) == 1
    logits = attention.random_logits(n, 4, generator=seeding.torch_generator(0))[0]
    assert torch.allclose(cx.causal_attention(logits, 1e7), c, atol=1e-6), "T -> infinity limit"


def test_expected_causal_hardmax_rank_is_half_n_plus_one():
    n, trials = 20, 4000
    logits = torch.randn(trials, n, n, generator=seeding.torch_generator(1), dtype=torch.float64)
    logits = logits.masked_fill(cx.causal_mask(n), float("-inf"))
    mean = float(rank.hardmax_rank(logits).double().mean())
    assert cx.expected_causal_hardmax_rank(n) == (n + 1) / 2
    assert mean == pytest.approx((n + 1) / 2, abs=0.15)


def test_uniform_limit_has_rank_one_under_every_measure():
    u = cx.uniform_attention(32)
    ranks = all_measures(u)
    for m in MEASURES:
        assert ranks[m] == pytest.approx(1.0), m
    logits = attention.random_logits(32, 8, generator=seeding.torch_generator(2))[0]
    hot = attention.softmax_attention(logits, 1e6)
    assert int(rank.numerical_rank(hot, rtol=1e-3)) == 1


@pytest.mark.parametrize("seed", range(6))
def test_gap_bounds_hold_on_random_cases(seed):
    gen = seeding.torch_generator(seed)
    n = [8, 16, 33, 64, 20, 40][seed]
    logits = attention.random_logits(n, [1, 2, 4, 16, 64, 8][seed], batch=4, generator=gen)
    logits = logits * [1.0, 10.0, 100.0, 1.0, 30.0, 3.0][seed]
    hard = attention.hardmax_attention(logits)
    for temperature in [1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 1e3]:
        soft = attention.softmax_attention(logits, temperature)
        gap = (soft - hard).norm(dim=(-2, -1))
        bound = cx.gap_bound(logits, temperature)
        crude = cx.gap_bound(logits, temperature, crude=True)
        assert bool((gap <= bound * (1 + 1e-9) + 1e-12).all()), (temperature, gap, bound)
        assert bool((bound <= crude * (1 + 1e-9) + 1e-12).all())
        sigma_diff = rank.singular_values(soft) - rank.singular_values(hard)
        assert bool((sigma_diff.norm(dim=-1) <= gap * (1 + 1e-9) + 1e-12).all()), "Mirsky"
        assert bool((torch.linalg.matrix_norm(soft - hard, 2) <= gap * (1 + 1e-9) + 1e-12).all())
        hot = (soft - cx.uniform_attention(n)).norm(dim=(-2, -1))
        assert bool((hot <= cx.hot_bound(logits, temperature) * (1 + 1e-9) + 1e-12).all()), temperature


@pytest.mark.parametrize("seed", range(4))
def test_below_the_certified_temperature_numerical_rank_equals_hardmax_rank(seed):
    logits = attention.random_logits(24, 4, generator=seeding.torch_generator(seed))[0] * 10
    t_star = cx.certified_temperature(logits)
    assert t_star > 0
    for factor in (1.0, 0.5, 0.1):
        soft = attention.softmax_attention(logits, factor * t_star)
        assert int(rank.numerical_rank(soft, rtol=1e-3)) == int(rank.hardmax_rank(logits))


def test_gap_bound_is_tight_as_temperature_goes_to_zero():
    logits = attention.random_logits(16, 4, generator=seeding.torch_generator(5))[0] * 20
    t = 0.3 * float(cx.margins(logits).min())
    gap = float((attention.softmax_attention(logits, t) - attention.hardmax_attention(logits)).norm())
    assert gap > 0.5 * float(cx.gap_bound(logits, t))


def test_dong_residual_is_zero_for_rank_one_token_states():
    x = torch.randn(1, 7, generator=seeding.torch_generator(0), dtype=torch.float64)
    collapsed = torch.ones(12, 1, dtype=torch.float64) @ x  # 1 x^T
    assert float(cx.collapse_residual(collapsed)) == pytest.approx(0.0, abs=1e-14)
    noisy = torch.randn(12, 7, generator=seeding.torch_generator(1), dtype=torch.float64)
    value = float(cx.collapse_residual(noisy))
    assert 0.5 < value <= 1.0
    assert float(cx.collapse_residual(3.0 * noisy)) == pytest.approx(value), "scale-free"
    batch = torch.stack([collapsed, noisy])
    assert cx.collapse_residual(batch).shape == (2,)


def test_pure_attention_collapses_and_residual_connections_prevent_it():
    pure = ch08_where_it_breaks.depth_point("sinusoidal", "attn", "none", 16, 4, 32, 2, 8, 2, seed=0)
    skip = ch08_where_it_breaks.depth_point("sinusoidal", "attn+res", "none", 16, 4, 32, 2, 8, 2, seed=0)
    assert pure[-1]["residual"] < 1e-3 < skip[-1]["residual"]
    assert pure[-1]["rank_numerical"] == pytest.approx(1.0)


def test_counterexample_point_matches_every_closed_form():
    rows = ch08_where_it_breaks.counterexample_point(n=20, d_head=8, seed=0)
    checked = [r for r in rows if r["closed_form"] is not None]
    assert len(checked) >= 20
    for row in checked:
        assert row["rank"] == pytest.approx(row["closed_form"], rel=1e-3, abs=1e-3), row
