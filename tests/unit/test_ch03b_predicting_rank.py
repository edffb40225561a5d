"""Chapter 3b's module and helpers.hardmax_sampling: the certified float32 Monte Carlo, knees and fits, every verdict rule, and analyse at tiny sizes."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import hardmax_sampling as sampling
from helpers import parameters, rank
from helpers.experiments import ch03b_predicting_rank as chapter


@pytest.mark.parametrize("keys, n, d", [("gaussian", 300, 2), ("gaussian", 128, 64), ("sphere", 200, 1),
                                        ("sphere", 257, 3), ("gaussian", 64, 1)])
def test_certified_float32_argmax_equals_float64(keys, n, d, monkeypatch):
    monkeypatch.setattr(sampling, "_BLOCK", 4096)  # several row blocks per head
    gen = torch.Generator().manual_seed(n + d)
    for _ in range(5):
        k = sampling.sample_keys(n, d, keys, gen)
        q = torch.randn(3 * n, d, generator=gen)
        winners, fallback = sampling.argmax_winners(q, k)
        exact = (q.double() @ k.double().T).argmax(1)
        assert torch.equal(winners, exact)
        assert torch.unique(winners[:n]).numel() == int(rank.hardmax_rank(q[:n].double() @ k.double().T))
    if keys == "sphere" and d == 1:
        assert fallback == 3 * n, "exact ties (d = 1 sphere keys) must all go to float64"


def test_batched_heads_match_one_head_at_a_time():
    gen = torch.Generator().manual_seed(0)
    k = sampling.sample_keys(24, 3, "sphere", gen, heads=7)
    q = torch.randn(7, 24, 3, generator=gen)
    batched, _ = sampling.argmax_winners(q, k)
    for b in range(7):
        assert torch.equal(batched[b], sampling.argmax_winners(q[b], k[b])[0])
        assert sampling.distinct_counts(batched, 24)[b] == int(rank.hardmax_rank(q[b].double() @ k[b].double().T))


def test_hardmax_point_is_seeded_and_counts_distinct_winners():
    a = sampling.hardmax_point(32, 4, "gaussian", trials=3, seed=7)
    b = sampling.hardmax_point(32, 4, "gaussian", trials=3, seed=7)
    assert a == b and len(a) == 3 and all(1 <= r["rank"] <= 32 for r in a)
    assert sampling.hardmax_point(32, 4, "gaussian", trials=3, seed=8) != a
    assert chapter.trials_for_rows(16, 2048) == 128 and chapter.trials_for_rows(4096, 2048) == 4


def test_identity_point_agrees_with_its_own_prediction():
    row = chapter.identity_point(32, 3, "gaussian", queries=50_000, replicates=400, seed=0)
    assert abs(row["measured"] - row["predicted"]) < 4 * row["combined_se"]
    assert row["measured_var"] == pytest.approx(row["predicted_var"], rel=0.3)


def test_knee_and_measured_knees_with_bootstrap():
    assert chapter.knee_from_curve([1, 2, 4, 8], [0.1, 0.5, 0.8, 1.0], 0.9) == pytest.approx(math.exp(math.log(4) + 0.5 * math.log(2)))
    assert math.isnan(chapter.knee_from_curve([1, 2], [0.1, 0.2], 0.9))
    rows = [{"keys": "gaussian", "n": 16, "d_head": d, "trial": t,
             "fraction": (1 - (15 / 16) ** 16) * min(1.0, d / 8) + 0.001 * t} for d in (1, 2, 4, 8, 16) for t in range(6)]
    knees = chapter.measured_knees(pd.DataFrame(rows), [0.5], bootstrap=20, seed=0)
    assert knees.knee.iloc[0] == pytest.approx(4.0, rel=0.02)
    assert knees.knee_low.iloc[0] <= knees.knee.iloc[0] <= knees.knee_high.iloc[0]


@pytest.mark.parametrize("form, make", [("a + b log n", lambda n: 3 + 2 * np.log(n)),
                                        ("a + b (log n)^2", lambda n: 1 + 0.5 * np.log(n) ** 2),
                                        ("c n^alpha", lambda n: 2 * n**0.6)])
def test_one_loss_fits_recover_the_form_they_were_made_from(form, make):
    n = np.array([16, 32, 64, 128, 256, 512, 1024], dtype=float)
    fits = {f["form"]: f for f in chapter.fit_forms(n, make(n))}
    assert fits[form]["rms_log"] == pytest.approx(0.0, abs=1e-6)
    assert min(fits.values(), key=lambda f: f["rms_log"])["form"] == form
    assert chapter.fit_forms([16, 32], [1.0, 2.0])[0]["rms_log"] is None


def test_effective_exponent():
    n = np.array([1e3, 1e4, 1e5])
    assert chapter.effective_exponent(n, 5 * n**0.3) == pytest.approx(0.3)


def test_identity_verdict_pass_and_fail():
    table = pd.DataFrame({"measured": [10.0, 20.0], "predicted": [10.1, 19.9], "combined_se": [0.1, 0.1]})
    assert chapter.identity_verdict(table).passed
    assert "agrees" in chapter.identity_verdict(table).text
    table.loc[1, "measured"] = 21.0
    v = chapter.identity_verdict(table)
    assert not v.passed and "misses" in v.text and "1 of 2" in v.text and v.value == pytest.approx(11.0)


def test_accuracy_verdict_names_the_worst_point():
    errors = pd.DataFrame({"n": [16, 16, 64], "d_head": [1, 4, 8], "error": [0.001, -0.015, 0.012]})
    v = chapter.accuracy_verdict(errors, 0.02, "Gaussian")
    assert v.passed and "n = 16, d_h = 4" in v.text and "below" in v.text and "within" in v.text
    errors.loc[2, "error"] = 0.03
    v = chapter.accuracy_verdict(errors, 0.02, "Gaussian")
    assert not v.passed and "n = 64, d_h = 8" in v.text and "above the goal" in v.text


def test_flat_knee_verdict_three_outcomes():
    flat = pd.DataFrame({"n": [16, 256, 4096], "knee": [2.0, 2.4, 2.6]})
    grows = pd.DataFrame({"n": [16, 256, 4096], "knee": [2.0, 6.0, 20.0]})
    assert chapter.flat_knee_verdict(flat).passed and "does not grow" in chapter.flat_knee_verdict(flat).text
    assert not chapter.flat_knee_verdict(grows).passed and "grows with n" in chapter.flat_knee_verdict(grows).text
    assert "cannot be judged" in chapter.flat_knee_verdict(pd.DataFrame({"n": [16], "knee": [2.0]})).text


def test_growth_verdict_reports_exponent_and_best_form():
    fits = [{"form": "a + b log n", "rms_log": 0.2}, {"form": "c n^alpha", "rms_log": 0.05},
            {"form": "a + b (log n)^2", "rms_log": 0.1}]
    v = chapter.growth_verdict(0.27, 1e3, 1e5, fits)
    assert v.passed and "n^0.27" in v.text and "c n^alpha fits best" in v.text
    assert not chapter.growth_verdict(0.0, 1e3, 1e5, [{"form": "c n^alpha", "rms_log": None}]).passed


def test_text_helpers():
    assert chapter.list_text(["10", "5", "2"]) == "10, 5 and 2"
    assert chapter.span_text([5, 5]) == "5" and chapter.span_text([10, 11]) == "10 to 11"


def test_analyse_at_tiny_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    P = parameters.Params(MODE="quick", SEED=0, N_GRID=[16, 32], D_GRID=[1, 2, 8, 64], CALIB_N=[24], ROWS=512,
                          IDENTITY_CASES=[(32, 2)], IDENTITY_QUERIES=8192, IDENTITY_REPLICATES=50,
                          EPS_VALUES=[0.1, 0.05], BOOTSTRAP=10, CRIT_N=[16, 1000], GOAL=0.02)
    result = chapter.analyse(P)
    assert len(result.grid) == 2 * 2 * 4 and result.grid.error.notna().all()
    assert result.bridge in chapter.BRIDGE_CANDIDATES
    assert set(result.verdicts) == {"identity", "accuracy_gaussian", "accuracy_sphere", "sphere_flat", "growth"}
    crit = result.critical.set_index(["eps", "n"]).d_star
    assert crit[0.05, 1000] > crit[0.1, 1000] > crit[0.1, 16]
    assert (result.sphere_critical.d_star < 20).all()
