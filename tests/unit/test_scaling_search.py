"""helpers.scaling (fits of d*(n) against four forms) and helpers.gridsearch (coarse-to-fine search)."""

import math

import numpy as np
import pytest

from helpers import gridsearch, scaling
from helpers.errors import ArgumentError

N = np.array([16, 32, 64, 128, 256])


@pytest.mark.parametrize("form, truth", [
    ("log", lambda n: 3 + 2 * np.log(n)),
    ("log2", lambda n: 1 + 0.5 * np.log(n) ** 2),
    ("sqrt", lambda n: 1.5 * np.sqrt(n)),
    ("linear", lambda n: 0.25 * n),
])
def test_each_form_recovers_its_exact_curve_and_wins(form, truth):
    y = truth(N)
    fits = scaling.fit_forms(N, y)
    assert fits[form].loss == pytest.approx(0, abs=1e-18)
    assert np.allclose(fits[form].predict(N), y)
    assert all(fits[other].loss > 1e-3 for other in scaling.CLASS_FORMS if other != form)
    # the power law nests sqrt(n) and n: it recovers them exactly, with their exponents
    if form in ("sqrt", "linear"):
        assert fits["power"].coefficients["alpha"] == pytest.approx({"sqrt": 0.5, "linear": 1.0}[form], abs=1e-5)
        assert fits["power"].loss == pytest.approx(0, abs=1e-6 * np.mean(y ** 2))
    else:
        assert fits["power"].loss > 1e-3
    boot = scaling.bootstrap_forms(N, y, np.tile(y, (20, 1)))
    assert boot.best == form and boot.indistinguishable == (form,)


def test_coefficients_are_exact_so_a_factor_two_error_would_fail():
    fit = scaling.fit_form("log", N, 3 + 2 * np.log(N))
    assert fit.coefficients["a"] == pytest.approx(3, rel=1e-9) and fit.coefficients["b"] == pytest.approx(2, rel=1e-9)
    assert scaling.fit_form("linear", N, 0.25 * N).coefficients["c"] == pytest.approx(0.25, rel=1e-12)
    assert scaling.fit_form("sqrt", N, 2 * 1.5 * np.sqrt(N)).coefficients["c"] == pytest.approx(3.0, rel=1e-12)


def test_one_loss_for_every_form_is_the_mean_squared_error():
    y = np.array([4.0, 6.0, 8.0, 12.0, 12.0])
    for form, fit in scaling.fit_forms(N, y).items():
        assert fit.loss == pytest.approx(np.mean((fit.predict(N) - y) ** 2))
        # least squares: no nearby coefficients do better
        for name in fit.coefficients:
            for step in (-1e-3, 1e-3):
                moved = scaling.FormFit(form, {**fit.coefficients, name: fit.coefficients[name] + step}, 0)
                assert np.mean((moved.predict(N) - y) ** 2) >= fit.loss


def test_power_law_exponent_matches_a_brute_force_scan():
    y = np.array([3.0, 4.0, 4.0, 6.0, 7.0])
    fit = scaling.fit_form("power", N, y)
    alphas = np.linspace(0, scaling.POWER_MAX, 200001)        # brute force: c in closed form on a dense alpha grid
    x = N[None, :] ** alphas[:, None]
    c = (x @ y) / np.einsum("ij,ij->i", x, x)
    losses = np.mean((c[:, None] * x - y) ** 2, axis=1)
    assert fit.coefficients["alpha"] == pytest.approx(alphas[np.argmin(losses)], abs=2 * scaling.POWER_MAX / 200000)
    assert fit.loss == pytest.approx(losses.min(), rel=1e-6)
    assert scaling.growth_class(("log", "power")) == "log", "the power law takes no part in the class"


def test_resampling_models_keeps_every_seed_and_spreads_the_statistic():
    # two n; at n = 16 seeds disagree (one needs width 4, two need 2), at n = 32 they agree on 4
    widths = np.array([1, 2, 4, 8])
    n16 = np.array([[0.2, 0.2, 0.2], [1.0, 1.0, 0.3], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    n32 = np.array([[0.1, 0.1, 0.1], [0.2, 0.2, 0.2], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    def smallest(curve):
        return float(widths[np.argmax(curve >= curve[0] + 0.95 * (curve[-1] - curve[0]))])
    reps = scaling.resample_models([n16, n32], smallest, 2000, seed=1)
    assert reps.shape == (2000, 2) and set(np.unique(reps[:, 1])) == {4.0}
    # a resample gives 2 only if it never draws the third seed: (2/3)^3 = 8/27 of the time
    assert np.mean(reps[:, 0] == 2.0) == pytest.approx(8 / 27, abs=4 * math.sqrt(8 / 27 * 19 / 27 / 2000))
    again = scaling.resample_models([n16, n32], smallest, 2000, seed=1)
    assert np.array_equal(reps, again)


def test_noisy_replicates_make_close_forms_indistinguishable():
    gen = np.random.default_rng(0)
    y = 2 + 3 * np.log(N[:4])
    reps = y + gen.normal(0, 4, size=(400, 4))
    boot = scaling.bootstrap_forms(N[:4], y, reps)
    assert len(boot.indistinguishable) >= 2
    assert scaling.growth_class(boot.indistinguishable) == "mixed"
    low, high = boot.coefficient_ci["log"]["b"]
    assert low < 3 < high


def test_growth_classes_and_words():
    assert scaling.growth_class(("log", "log2")) == "log"
    assert scaling.growth_class(("linear",)) == "linear"
    assert scaling.growth_class(("sqrt",)) == "sqrt"
    assert scaling.growth_class(("log", "linear")) == "mixed"
    assert scaling.describe_forms(("linear", "log")) == "a + b ln n and c n"


def test_bad_points_are_refused():
    with pytest.raises(ArgumentError, match="n"):
        scaling.fit_form("log", [16, 16], [1, 2])
    with pytest.raises(ArgumentError, match="y"):
        scaling.fit_form("log", [16, 32], [1, math.nan])
    with pytest.raises(ArgumentError, match="form"):
        scaling.fit_form("cubic", [16, 32], [1, 2])
    with pytest.raises(ArgumentError, match="replicates"):
        scaling.bootstrap_forms([16, 32, 64], [1, 2, 3], [[1, 2]])


GRID = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]


def test_coarse_points_are_the_powers_of_two_and_the_ends():
    assert gridsearch.coarse(GRID) == [1, 2, 4, 8, 16, 32, 64]
    assert gridsearch.coarse([3, 6, 12, 24]) == [3, 24]


@pytest.mark.parametrize("knee", [1, 1.5, 2.5, 3, 5, 7, 10, 14, 20, 30, 40, 56, 64, 100])
@pytest.mark.parametrize("shape", ["step", "smooth"])
def test_search_equals_exhaustive_on_monotone_objectives_with_fewer_points(knee, shape):
    if shape == "step":
        def objective(x):
            return 1.0 if x >= knee else 0.2
    else:
        def objective(x):
            return 1 - math.exp(-x / knee)
    answer, evaluated = gridsearch.search(objective, GRID)
    assert answer == gridsearch.exhaustive(objective, GRID)
    assert len(evaluated) < len(GRID)
    assert set(gridsearch.coarse(GRID)) <= set(evaluated)


@pytest.mark.parametrize("knee", [1, 1.5, 2.5, 3, 5, 7, 10, 14, 20, 30, 40, 56, 64])
@pytest.mark.parametrize("shape", ["step", "smooth"])
def test_bisection_equals_exhaustive_on_monotone_objectives_in_log2_rounds(knee, shape):
    def objective(x):
        return (1.0 if x >= knee else 0.2) if shape == "step" else 1 - math.exp(-x / knee)
    answer, evaluated = gridsearch.search(objective, GRID, method="bisect")
    assert answer == gridsearch.exhaustive(objective, GRID)
    assert {GRID[0], GRID[-1]} <= set(evaluated) and len(evaluated) <= 2 + math.ceil(math.log2(len(GRID)))


def test_bisection_trains_the_middle_of_the_bracket_one_point_at_a_time():
    assert gridsearch.bisect(GRID, {64: 1.0}) == [8]                 # middle of 1 .. 48
    assert gridsearch.bisect(GRID, {64: 1.0, 8: 0.2}) == [24]        # middle of 12 .. 48
    assert gridsearch.bisect(GRID, {64: 1.0, 8: 0.2, 24: 0.2, 48: 0.99}) == [32]
    assert gridsearch.bisect(GRID, {64: 1.0, 8: 0.2, 24: 0.2, 32: 0.2, 48: 0.99}) == []
    assert gridsearch.bisect(GRID, {}) == []
    with pytest.raises(ArgumentError, match="method"):
        gridsearch.search(lambda x: x, GRID, method="binary")


def test_refine_trains_only_the_bracket():
    scores = {1: 0.1, 2: 0.2, 4: 0.5, 8: 0.97, 16: 1.0, 32: 1.0, 64: 1.0}
    assert gridsearch.refine(GRID, scores) == [6]
    assert gridsearch.refine(GRID, {**scores, 6: 0.99}) == []
    assert gridsearch.refine(GRID, {}) == []
    assert gridsearch.smallest_reaching({**scores, 6: 0.99}) == 6
    assert gridsearch.smallest_reaching({1: 0.0, 2: 0.0}) == 1, "nothing rises: the smallest width is enough"
    assert math.isnan(gridsearch.smallest_reaching({1: 0.0, 2: float("nan")}))
    # the rule measures the rise from the smallest width: 0.5 + 0.95 * 0.5 = 0.975, not 0.95 of the best
    assert gridsearch.smallest_reaching({1: 0.5, 2: 0.96, 4: 0.98, 8: 1.0}) == 4


def test_bad_grids_are_refused():
    for grid in ([], [2, 1], [1, 1, 2], [0, 1], [True, 2]):
        with pytest.raises(ArgumentError, match="grid"):
            gridsearch.coarse(grid)
