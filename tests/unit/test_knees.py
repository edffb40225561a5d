"""Knee definitions and scaling fits of helpers.experiments.saturation."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers.experiments import saturation


def test_knee_interpolates_in_log_d_and_reports_missing():
    d = [1, 2, 4, 8]
    assert saturation.knee(d, [0.1, 0.5, 0.8, 1.0], 0.9) == pytest.approx(math.exp(math.log(4) + 0.5 * math.log(2)))
    assert saturation.knee(d, [0.95, 0.96, 0.97, 0.99], 0.9) == 1.0
    assert math.isnan(saturation.knee(d, [0.1, 0.2, 0.3, 0.4], 0.9))


def test_fits_recover_exact_forms():
    n = np.array([16, 32, 64, 128, 256, 512, 1024])
    for form, y in [("a + b log n", 3 + 2 * np.log(n)), ("a + b (log n)^2", 1 + 0.5 * np.log(n) ** 2),
                    ("c n^alpha", 2 * n**0.6)]:
        fits = {f["form"]: f for f in saturation.fit_knee_scaling(n, y)}
        assert fits[form]["r2"] == pytest.approx(1.0)
        assert fits[form]["rms_log"] == pytest.approx(0.0, abs=1e-9)
        assert min(fits.values(), key=lambda f: f["rms_log"])["form"] == form
    assert saturation.log_slope_trend(n, 3 + 2 * np.log(n)) == pytest.approx(1.0)
    assert saturation.log_slope_trend(n, 2 * n**0.6) > 1.5


def test_knees_from_trials_with_bootstrap():
    rows = []
    for n in (16, 64):
        for d in (1, 2, 4, 8, 16):
            for t in range(5):
                rows.append({"n": n, "d_head": d, "trial": t, "rank": n * min(1.0, d / 8) + 0.01 * t})
    knees = saturation.knees_from_trials(pd.DataFrame(rows), "rank", lambda n, means: n, {"loose": 0.5},
                                         bootstrap=10)
    assert knees.knee.to_numpy() == pytest.approx([4.0, 4.0], abs=0.05)
    assert (knees.knee_low <= knees.knee).all() and (knees.knee <= knees.knee_high).all()
