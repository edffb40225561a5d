"""The book's one saturation definition, against hand-computed crossings, a dense brute-force search, and
chapter 03's former knee (an independent implementation of the same rule, kept here as a reference)."""

import math

import numpy as np
import pytest

from helpers import saturation as sat
from helpers.errors import ArgumentError


def test_log_interpolation_between_the_grid_points_around_the_first_crossing():
    point = sat.saturation_point([1, 4, 16], [0.0, 50.0, 100.0])           # target 95: 90 % of the way from 4 to 16
    assert point.status == sat.INSIDE and point.value == pytest.approx(4 ** 1.9)
    assert sat.saturation_point([16, 1, 4], [100.0, 0.0, 50.0]).value == pytest.approx(4 ** 1.9)   # any order
    assert sat.saturation_point([1, 4, 16], [0.0, 50.0, 100.0], interpolate="linear").value == pytest.approx(14.8)
    assert sat.saturation_point([1, 4, 16], [0.0, 50.0, 100.0], interpolate="none").value == 16.0
    assert sat.saturation_point([1, 2, 4], [0.0, 9.5, 10.0]).value == pytest.approx(2.0)   # exactly on a grid point


@pytest.mark.parametrize("reference, baseline, level, expected_target", [
    ("last", 0.0, 0.95, 9.5), ("max", 0.0, 0.5, 6.0), ("last", "first", 0.5, 6.0), (20.0, 0.0, 0.5, 10.0),
    ("max", 2.0, 0.5, 7.0)])
def test_reference_baseline_and_level_set_the_target(reference, baseline, level, expected_target):
    x = np.arange(1, 8, dtype=float)
    y = np.array([2.0, 4.0, 6.0, 8.0, 12.0, 11.0, 10.0])
    point = sat.saturation_point(x, y, reference=reference, baseline=baseline, level=level, interpolate="linear")
    crossing = np.interp(expected_target, y[:5], x[:5])                    # the rising part is increasing
    assert point.status == sat.INSIDE and point.value == pytest.approx(crossing)


def test_within_is_an_absolute_distance_below_the_reference():
    point = sat.saturation_point([1, 2, 4, 8], [1.0, 3.0, 3.9, 4.0], reference="max", within=0.5, interpolate="none")
    assert point.value == 4.0
    losses = np.array([2.3, 1.9, 1.52, 1.5])                                # a falling loss, passed as -loss
    best = sat.saturation_point([1, 2, 4, 8], -losses, reference="max", within=0.05, interpolate="none")
    assert (best.status, best.value) == (sat.INSIDE, 4.0), "negative values: the baseline plays no part"
    with pytest.raises(ArgumentError, match="within"):
        sat.saturation_point([1, 2], [0.0, 1.0], level=0.9, within=0.1)


def test_the_four_edge_statuses():
    at_first = sat.saturation_point([1, 2, 4], [10.0, 10.0, 10.0])
    assert (at_first.status, at_first.value) == (sat.AT_FIRST, 1.0)
    missing = sat.saturation_point([1, 2, 4], [1.0, 2.0, 3.0], reference=10.0)
    assert missing.status == sat.NOT_REACHED and math.isnan(missing.value)
    falling = sat.saturation_point([1, 2, 4], [3.0, 2.0, 1.0], baseline="first")
    assert (falling.status, falling.value) == (sat.AT_FIRST, 1.0), "nothing rises: the smallest x is enough"
    undefined = sat.saturation_point([1, 2, 4], [0.0, float("nan"), 1.0])
    assert undefined.status == sat.FLAT and math.isnan(undefined.value)
    assert sat.saturation_point([1, 2, 4], [0.0, 0.0, 0.0]).status == sat.AT_FIRST
    assert "undefined" in undefined.describe()
    assert at_first.describe() == "d_h ≤ 1 (saturated at the smallest d_h)"
    assert missing.describe() == "d_h > 4 (not reached on the grid)"
    assert sat.saturation_point([1, 4, 16], [0.0, 50.0, 100.0]).describe() == "d_h ≈ 14"


def test_matches_a_dense_search_on_random_rising_curves():
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = np.sort(rng.choice(np.arange(1, 300), size=rng.integers(2, 9), replace=False)).astype(float)
        y = np.cumsum(rng.exponential(size=x.size)) * rng.choice([1.0, 0.0], size=x.size, p=[0.8, 0.2])
        level = rng.uniform(0.3, 1.0)
        point = sat.saturation_point(x, y, reference="max", level=level, interpolate="linear")
        dense = np.linspace(x[0], x[-1], 200001)
        curve = np.interp(dense, x, y) if np.all(np.diff(y) >= 0) else None
        if point.status != sat.INSIDE or curve is None:
            continue
        expected = dense[np.argmax(curve >= level * y.max() - 1e-12)]
        assert point.value == pytest.approx(expected, abs=(x[-1] - x[0]) / 100000 + 1e-9)


def _chapter_03_knee(d_values, ratios, level):
    """Chapter 03's knee as it was written before it moved to `saturation_point` (independent reference)."""
    d, r = np.asarray(d_values, dtype=float), np.asarray(ratios, dtype=float)
    above = np.where(r >= level)[0]
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(d[0])
    frac = (level - r[i - 1]) / (r[i] - r[i - 1])
    return float(math.exp(math.log(d[i - 1]) + frac * (math.log(d[i]) - math.log(d[i - 1]))))


def test_expresses_chapter_03s_knee_exactly():
    rng = np.random.default_rng(1)
    d = np.array([1, 2, 3, 4, 6, 8, 16, 32], dtype=float)
    for _ in range(300):
        ratios = np.sort(rng.uniform(0, 1.2, d.size)) * rng.uniform(0.5, 1.2)
        level = rng.uniform(0.5, 1.0)
        knee = _chapter_03_knee(d, ratios, level)
        point = sat.saturation_point(d, ratios, reference=1.0, level=level)
        assert (math.isnan(knee) and point.status == sat.NOT_REACHED) or point.value == pytest.approx(knee)


def test_bootstrap_interval_over_seeds():
    x = [1, 2, 4, 8, 16]
    same = np.tile([0.0, 5.0, 9.0, 10.0, 10.0], (6, 1))                   # six identical seeds: no spread
    interval = sat.bootstrap_saturation(x, same, resamples=50)
    assert interval.low == interval.high == pytest.approx(interval.point.value) and interval.defined == 1.0
    rng = np.random.default_rng(2)
    noisy = same + rng.normal(0, 0.8, same.shape)
    interval = sat.bootstrap_saturation(x, noisy, resamples=300, seed=1)
    assert interval.low <= interval.point.value <= interval.high and interval.high > interval.low
    again = sat.bootstrap_saturation(x, noisy, resamples=300, seed=1)
    assert (again.low, again.high) == (interval.low, interval.high)               # seeded
    ragged = [np.array([0.0, 0.1]), np.array([5.0]), np.array([9.0, 9.2, 8.8]), np.array([10.0]), np.array([10.0])]
    assert sat.bootstrap_saturation(x, ragged, resamples=100).defined == 1.0


def test_an_interval_whose_ends_coincide_is_written_as_the_seeds_that_give_it_alone():
    x = [1, 2, 4, 8]
    # rise from 0 to 10; 95 % of it is reached at d = 4 by seeds 0 and 1, at 8 by seed 2 (by hand: 9.5 > 9 at 4)
    seeds = np.array([[0.0, 5.0, 10.0, 10.0], [0.0, 4.0, 9.9, 10.0], [0.0, 4.0, 9.0, 10.0]])
    wide = sat.bootstrap_saturation(x, seeds, resamples=400, seed=0, **sat.RISE)
    assert wide.spread and (wide.low, wide.high) == (4.0, 8.0)
    alike = sat.bootstrap_saturation(x, seeds[:2], resamples=400, seed=0, **sat.RISE)
    assert not alike.spread and alike.low == alike.high == 4.0
    assert sat.interval_text(alike.low, alike.high, alike.spread, 2, 2) == "2 of 2 seeds give it alone"
    assert sat.interval_text(4.0, 4.0, False, 1, 3, table=True) == "1 of 3 seeds"
    assert sat.interval_text(3.0, 8.0, True, 2, 3) == "3 to 8" and sat.interval_text(math.nan, 8.0, True, 0, 3) == "–"
    undefined = sat.bootstrap_saturation([1, 2], np.array([[0.0, 1.0], [0.0, 1.0]]), resamples=20, reference=5.0,
                                         level=1.0)
    assert math.isnan(undefined.low) and undefined.spread        # undefined is not "ends coincide"


def test_bootstrap_hides_no_undefined_resamples():
    x = [1, 2, 4]
    seeds = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 30.0]])                    # one seed reaches 20, one does not
    interval = sat.bootstrap_saturation(x, seeds, resamples=200, reference=20.0, level=1.0)
    assert 0 < interval.defined < 0.975 and math.isnan(interval.low) and math.isnan(interval.high)


@pytest.mark.parametrize("kwargs, name", [({"level": 0.0}, "level"), ({"level": 1.5}, "level"),
                                           ({"interpolate": "cubic"}, "interpolate"), ({"reference": "mean"}, "reference"),
                                           ({"within": -1.0}, "within")])
def test_bad_options_name_the_argument(kwargs, name):
    with pytest.raises(ArgumentError, match=name):
        sat.saturation_point([1, 2, 4], [0.0, 1.0, 2.0], **kwargs)
    with pytest.raises(ArgumentError, match="x"):
        sat.saturation_point([0, 1, 2], [0.0, 1.0, 2.0])


def test_rise_convention_reads_grid_points_and_brackets_them():
    # the rise from 0.5 (smallest width) to 1.0 (largest): target 0.975, first reached at 16 on this coarse grid
    grid, acc = [1, 2, 4, 16], [0.5, 0.6, 0.9, 1.0]
    point = sat.saturation_point(grid, acc, **sat.RISE)
    assert (point.status, point.value) == (sat.INSIDE, 16.0), "a grid point, never an interpolated 13"
    assert sat.lowest_possible(grid, point.value) == 5.0
    assert sat.bracket_text(grid, point.value) == "5 to 16"
    assert sat.bracket_text([1, 2, 3, 4], 4.0) == "4", "the width below was trained and falls short"
    assert sat.bracket_text(grid, 1.0, at_first=True) == "≤ 1"
    assert sat.bracket_text(grid, math.nan) == "–" and math.isnan(sat.lowest_possible(grid, math.nan))
    # one convention for a falling loss and a rising rank: both measured from the smallest width
    loss = np.array([3.0, 2.9, 2.6, 2.5])
    assert sat.saturation_point(grid, -loss, **sat.RISE).value == 16.0   # 2.6 > 3.0 - 0.95 * 0.5 = 2.525


def test_bootstrap_of_grid_readings_stays_on_the_grid():
    rng = np.random.default_rng(3)
    x = [1, 2, 4, 16]
    seeds = np.array([[0.0, 5.0, 9.0, 10.0]]) + rng.normal(0, 1.0, (5, 4))
    interval = sat.bootstrap_saturation(x, seeds, resamples=300, seed=2, **sat.RISE)
    assert interval.low in x and interval.high in x and interval.point.value in x
