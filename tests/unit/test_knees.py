"""Knee definitions and scaling fits of helpers.experiments.ch03_saturation."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers.experiments import ch03_saturation


def test_fits_recover_exact_forms():
    n = np.array([16, 32, 64, 128, 256, 512, 1024])
    for form, y in [("a + b log n", 3 + 2 * np.log(n)), ("a + b (log n)^2", 1 + 0.5 * np.log(n) ** 2),
                    ("c n^alpha", 2 * n**0.6)]:
        fits = {f["form"]: f for f in ch03_saturation.fit_knee_scaling(n, y)}
        assert fits[form]["r2"] == pytest.approx(1.0)
        assert fits[form]["rms_log"] == pytest.approx(0.0, abs=1e-9)
        assert min(fits.values(), key=lambda f: f["rms_log"])["form"] == form
    assert ch03_saturation.log_slope_trend(n, 3 + 2 * np.log(n)) == pytest.approx(1.0)
    assert ch03_saturation.log_slope_trend(n, 2 * n**0.6) > 1.5


def test_knees_from_trials_with_bootstrap():
    rows = []
    for n in (16, 64):
        for d in (1, 2, 4, 8, 16):
            for t in range(5):
                rows.append({"n": n, "d_head": d, "trial": t, "rank": n * min(1.0, d / 8) + 0.01 * t})
    frame = pd.DataFrame(rows)
    knees = ch03_saturation.knees_from_trials(frame, "rank", {16: 16, 64: 64}, {"loose": 0.5}, bootstrap=10)
    # mean ratio d/8 + 0.02/n: crosses 0.5 between d = 2 (0.25) and d = 4 (0.5 + 0.02/n), log-interpolated
    for n, knee in zip(knees.n, knees.knee):
        share = (0.5 - (0.25 + 0.02 / n)) / (0.25)
        assert knee == pytest.approx(2 * 2**share, rel=1e-12)
    assert (knees.knee_low <= knees.knee).all() and (knees.knee <= knees.knee_high).all()
    assert (knees.status == "inside").all()
    # the plateau at the largest d_h ("last") is n + 0.02 here: the same crossing, a hair later
    last = ch03_saturation.knees_from_trials(frame, "rank", "last", {"loose": 0.5})
    assert (last.knee > knees.knee).all() and last.knee_low.isna().all()
    assert last.plateau.to_numpy() == pytest.approx([16.02, 64.02])


def test_knee_beyond_the_grid_is_nan_and_a_saturated_first_point_is_the_first_d():
    rows = [{"n": 16, "d_head": d, "trial": 0, "rank": r} for d, r in [(1, 2.0), (2, 4.0), (4, 8.0)]]
    knees = ch03_saturation.knees_from_trials(pd.DataFrame(rows), "rank", {16: 16}, {"loose": 0.9, "low": 0.1})
    loose, low = knees.set_index("definition").loc[["loose", "low"]].to_dict(orient="records")
    assert math.isnan(loose["knee"]) and loose["status"] == "not_reached"
    assert low["knee"] == 1.0 and low["status"] == "at_first"


@pytest.mark.parametrize("make_knees, expected, best", [
    (lambda n: 2.0 + 3.0 * np.log(n), "log", "a + b log n"),
    (lambda n: 1.0 + 0.5 * np.log(n) ** 2, "faster", "a + b (log n)^2"),
    (lambda n: 0.8 * n**0.6, "faster", "c n^alpha"),
])
def test_growth_verdict_names_the_form_the_knees_were_made_from(make_knees, expected, best):
    n = np.array([16, 32, 64, 128, 256, 512, 1024], dtype=float)
    knees = make_knees(n)
    verdict = ch03_saturation.growth_verdict(ch03_saturation.fit_knee_scaling(n, knees), ch03_saturation.log_slope_trend(n, knees))
    assert verdict.outcome == expected and verdict.evidence["best_form"] == best
    assert f"RMS log error is {ch03_saturation.FORM_WORDS[best]}" in verdict.sentence


def test_growth_verdict_calls_a_growing_log_slope_faster_even_when_the_log_form_fits_best():
    fits = [{"form": "a + b log n", "rms_log": 0.01}, {"form": "a + b (log n)^2", "rms_log": 0.02},
            {"form": "c n^alpha", "rms_log": 0.03}]
    assert ch03_saturation.growth_verdict(fits, 1.5).outcome == "faster"
    assert ch03_saturation.growth_verdict(fits, 1.1).outcome == "log"
    assert "too few knees" in ch03_saturation.growth_verdict(fits, float("nan")).sentence


def test_growth_verdict_with_too_few_knees():
    fits = ch03_saturation.fit_knee_scaling([16, 32], [3.0, 4.0])
    assert ch03_saturation.growth_verdict(fits, None).sentence.startswith("cannot be judged")
