"""Chapter 3b's module and helpers.hardmax_sampling: the certified float32 Monte Carlo, knees and fits, every verdict rule, and analyse at tiny sizes."""

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import hardmax_sampling as sampling
from helpers import book, parameters, rank
from helpers.english import number
from helpers.experiments import ch03b_predicting_rank as chapter
from helpers.experiments import ch03b_predicting_rank_points as points


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


def test_identity_point_agrees_with_its_own_prediction():
    row = points.identity_point(32, 3, "gaussian", queries=50_000, replicates=400, seed=0)
    assert abs(row["measured"] - row["predicted"]) < 4 * row["combined_se"]
    assert row["measured_var"] == pytest.approx(row["predicted_var"], rel=0.3)


def test_measured_knees_use_the_plateau_and_bootstrap():
    plateau = 1 - (15 / 16) ** 16
    rows = [{"keys": "gaussian", "n": 16, "d_head": d, "trial": t, "fraction": 0.99 * plateau * min(1.0, d / 8) + 0.001 * (t - 2.5)}
            for d in (1, 2, 4, 8, 16) for t in range(6)]
    knees = chapter.measured_knees(pd.DataFrame(rows), [0.5, 0.001], bootstrap=20, seed=0).set_index("eps")
    assert knees.knee[0.5] == pytest.approx(8 * 2 ** (math.log2(0.5 / 0.99) - 0), rel=0.02) and knees.status[0.5] == "inside"
    assert knees.knee_low[0.5] <= knees.knee[0.5] <= knees.knee_high[0.5]
    assert math.isnan(knees.knee[0.001]) and knees.status[0.001] == "not_reached"


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
    v = chapter.identity_verdict(table)
    assert v.outcome == "agrees" and "agrees" in v.sentence
    table.loc[1, "measured"] = 21.0
    v = chapter.identity_verdict(table)
    assert v.outcome == "misses" and "1 of 2" in v.sentence and v.evidence["largest_z"] == pytest.approx(11.0)


def test_accuracy_verdict_names_the_worst_point():
    errors = pd.DataFrame({"n": [16, 16, 64], "d_head": [1, 4, 8], "error": [0.001, -0.015, 0.012]})
    v = chapter.accuracy_verdict(errors, 0.02, "Gaussian")
    assert v.outcome == "meets" and "n = 16 and head dimension 4" in v.sentence and "below" in v.sentence and "within" in v.sentence
    errors.loc[2, "error"] = 0.03
    v = chapter.accuracy_verdict(errors, 0.02, "Gaussian")
    assert v.outcome == "misses" and "n = 64 and head dimension 8" in v.sentence and "above the goal" in v.sentence


def test_flat_knee_verdict_three_outcomes():
    flat = pd.DataFrame({"n": [16, 256, 4096], "knee": [2.0, 2.4, 2.6]})
    grows = pd.DataFrame({"n": [16, 256, 4096], "knee": [2.0, 6.0, 20.0]})
    assert chapter.flat_knee_verdict(flat).outcome == "flat" and "does not grow" in chapter.flat_knee_verdict(flat).sentence
    assert chapter.flat_knee_verdict(grows).outcome == "grows" and "grows with n" in chapter.flat_knee_verdict(grows).sentence
    assert chapter.flat_knee_verdict(pd.DataFrame({"n": [16], "knee": [2.0]})).outcome == "undetermined"


def test_predicted_growth_verdict_reports_the_exponent():
    v = chapter.predicted_growth_verdict(0.27, 1e3, 1e5)
    assert v.outcome == "grows" and "power 0.27" in v.sentence and "from 1,000 to 100,000" in v.sentence
    assert chapter.predicted_growth_verdict(0.0, 1e3, 1e5).outcome == "flat"


def test_resolve_fills_defaults_and_rejects_calibration_on_the_grid():
    P = chapter.resolve(parameters.Params(MODE="quick", SEED=0, N_VALUES=None, D_HEADS=None, CALIB_N_VALUES=None,
                                          TRIALS=None, IDENTITY_QUERIES=None, IDENTITY_REPLICATES=None,
                                          EPS_VALUES=[0.1], BOOTSTRAP=None, CRIT_N_MAX=1000, GOAL=0.02))
    assert P.N_VALUES == [16, 64, 256] and P.CRIT_N[-1] == 1000 and "N_VALUES" in P.resolved
    with pytest.raises(parameters.ParameterError) as err:
        chapter.resolve(parameters.Params(dict(P, N_VALUES=[16, 64], CALIB_N_VALUES=[64])))
    assert err.value.name == "CALIB_N_VALUES"


def test_analyse_at_tiny_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    P = parameters.Params(MODE="quick", SEED=0, N_VALUES=[16, 32], D_HEADS=[1, 2, 8, 64], CALIB_N_VALUES=[24], TRIALS=16,
                          IDENTITY_CASES=[(32, 2)], IDENTITY_QUERIES=8192, IDENTITY_REPLICATES=50,
                          EPS_VALUES=[0.1, 0.05], BOOTSTRAP=10, CRIT_N=[16, 1000], GOAL=0.02, HELDOUT_D=[3])
    result = chapter.analyse(P)
    grid = result.frames["grid"]
    assert len(grid) == 2 * 2 * 4 and grid.error.notna().all()
    assert result.quotes["ch3b_bridge"].value in {number(b) for b in chapter.BRIDGE_CANDIDATES} | {"∞"}
    assert set(result.verdicts) == {"ch3b_identity_verdict", "ch3b_accuracy_gaussian", "ch3b_accuracy_sphere",
                                    "ch3b_sphere_flat_verdict", "ch3b_growth_verdict", "ch3b_noise_gaussian",
                                    "ch3b_knee_growth",
                                    "ch3b_noise_sphere", "ch3b_accuracy_heldout_dh"}
    heldout = result.frames["heldout_dh"]
    assert set(heldout.d_head) == {3} and not set(heldout.d_head) & set(P.D_HEADS), "off the reported grid"
    assert result.verdicts["ch3b_accuracy_heldout_dh"].evidence["points"] == 2
    crit = result.frames["critical_dh"].set_index(["eps", "n"]).d_star
    assert crit[0.05, 1000] > crit[0.1, 1000] > crit[0.1, 16]
    assert (result.frames["sphere_critical_dh"].d_star < 20).all()
    source = (book.paths.NBS_DIR / "03b_predicting_rank.ipynb").read_text()
    pasted = set(re.findall(r"\{glue:text\}`([^`]+)`", source))
    produced = set(result.quotes) | set(result.verdicts)
    assert pasted <= produced, "every glue name the prose pastes is produced"
    # the two families' verdicts are pasted together, in one passage each, so that shared words are said once
    combined = {"ch3b_accuracy_gaussian", "ch3b_accuracy_sphere", "ch3b_noise_gaussian", "ch3b_noise_sphere"}
    assert produced - pasted == combined
    for family in ("gaussian", "sphere"):
        worst = result.verdicts[f"ch3b_accuracy_{family}"].evidence["max_error"]
        assert f"{worst:.3f}" in result.quotes["ch3b_accuracy_text"].value
        largest = result.verdicts[f"ch3b_noise_{family}"].evidence["largest_z"]
        assert number(largest, 2) in result.quotes["ch3b_noise_text"].value


def test_noise_verdict_tells_systematic_errors_from_monte_carlo_noise():
    import pandas as pd

    rng = np.random.default_rng(0)
    se = np.full(200, 0.01)
    noise = pd.DataFrame({"n": 64, "d_head": 4, "error": rng.normal(0, 0.01, 200), "se": se})
    assert chapter.noise_verdict(noise, "Gaussian").outcome == "noise"
    biased = noise.assign(error=noise.error + np.where(np.arange(200) < 20, 0.07, 0.0))   # 20 points 7 SE off
    verdict = chapter.noise_verdict(biased, "Gaussian")
    assert verdict.outcome == "systematic" and verdict.evidence["beyond"] >= 19
    assert "where Monte Carlo noise alone would put about 0.5" in verdict.sentence


def test_noise_text_says_a_shared_place_and_reading_once():
    from helpers.results import Verdict

    def verdict(outcome, beyond, z, n=4096, d=8):
        return Verdict(outcome, "", "", {"beyond": beyond, "points": 90, "expected": 0.243, "largest_z": z, "n": n,
                                         "d_head": d})
    same = chapter.noise_text(verdict("systematic", 14, 7.3), verdict("systematic", 5, 11.0))
    assert same.endswith("for Gaussian keys 14 lie beyond, the largest at 7.3 standard errors, and for unit-sphere "
                         "keys 5 lie beyond, the largest at 11 standard errors, both at n = 4096, head dimension 8: "
                         "both systematic, a bias of the approximation")
    assert same.count("n = 4096") == 1 and same.count("a bias of") == 1
    apart = chapter.noise_text(verdict("systematic", 14, 7.3), verdict("noise", 1, 3.2, n=256, d=2))
    assert "(n = 4096, head dimension 8): systematic, a bias of the approximation; " in apart
    assert apart.endswith("for unit-sphere keys 1 lies beyond, the largest at 3.2 standard errors (n = 256, head "
                          "dimension 2): consistent with noise")
