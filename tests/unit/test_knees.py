"""Knee definitions and scaling fits of helpers.experiments.ch03_saturation."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers.experiments import ch03_saturation


def test_knee_interpolates_in_log_d_and_reports_missing():
    d = [1, 2, 4, 8]
    assert ch03_saturation.knee(d, [0.1, 0.5, 0.8, 1.0], 0.9) == pytest.approx(math.exp(math.log(4) + 0.5 * math.log(2)))
    assert ch03_saturation.knee(d, [0.95, 0.96, 0.97, 0.99], 0.9) == 1.0
    assert math.isnan(ch03_saturation.knee(d, [0.1, 0.2, 0.3, 0.4], 0.9))


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
    knees = ch03_saturation.knees_from_trials(pd.DataFrame(rows), "rank", lambda n, means: n, {"loose": 0.5},
                                         bootstrap=10)
    assert knees.knee.to_numpy() == pytest.approx([4.0, 4.0], abs=0.05)
    assert (knees.knee_low <= knees.knee).all() and (knees.knee <= knees.knee_high).all()


@pytest.mark.parametrize("make_knees, expected, best", [
    (lambda n: 2.0 + 3.0 * np.log(n), "consistent with Θ(log n)", "a + b log n"),
    (lambda n: 1.0 + 0.5 * np.log(n) ** 2, "grows faster than a + b log n", "a + b (log n)^2"),
    (lambda n: 0.8 * n**0.6, "grows faster than a + b log n", "c n^alpha"),
])
def test_growth_verdict_names_the_form_the_knees_were_made_from(make_knees, expected, best):
    n = np.array([16, 32, 64, 128, 256, 512, 1024], dtype=float)
    knees = make_knees(n)
    verdict = ch03_saturation.growth_verdict(ch03_saturation.fit_knee_scaling(n, knees), ch03_saturation.log_slope_trend(n, knees))
    assert expected in verdict and f"RMS log error: {best}" in verdict


def test_growth_verdict_calls_a_growing_log_slope_faster_even_when_the_log_form_fits_best():
    fits = [{"form": "a + b log n", "rms_log": 0.01}, {"form": "a + b (log n)^2", "rms_log": 0.02},
            {"form": "c n^alpha", "rms_log": 0.03}]
    assert "grows faster" in ch03_saturation.growth_verdict(fits, 1.5)
    assert "consistent with" in ch03_saturation.growth_verdict(fits, 1.1)
    assert "too few knees" in ch03_saturation.growth_verdict(fits, float("nan"))


def test_growth_verdict_with_too_few_knees():
    fits = ch03_saturation.fit_knee_scaling([16, 32], [3.0, 4.0])
    assert ch03_saturation.growth_verdict(fits, None).startswith("cannot be judged")
