"""Chapter 5's held-out test of the growth forms, on smallest widths whose fits are worked out independently
(numpy's polyfit and the normal equations by hand)."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers import scaling
from helpers.experiments import ch05_heldout as heldout

N = [16, 32, 64, 128]


def cells(d_stars, low=None, high=None, task="copy", usable=None):
    usable = usable or [True] * len(d_stars)
    return pd.DataFrame([{"task": task, "n": n, "usable": u, "d_star": float(d), "d_star_lowest": float(d),
                          "d_star_at_first": False,
                          "d_star_low": float(low if low is not None and n == N[-1] else d),
                          "d_star_high": float(high if high is not None and n == N[-1] else d),
                          "spread": low != high and n == N[-1], "seeds_at_d_star": 3, "seed_count": 3}
                         for n, d, u in zip(N, d_stars, usable)])


def boots(d_stars, spread=0.0, replicates=200, seed=0):
    rng = np.random.default_rng(seed)
    return {("copy", n): d + spread * rng.standard_normal(replicates) for n, d in zip(N, d_stars)}


@pytest.mark.parametrize("form", heldout.FORMS)
def test_predictions_are_the_least_squares_fits(form):
    n, y = np.array(N[:3], float), np.array([2.0, 3.5, 4.0])
    x = {"log": np.log(n), "log2": np.log(n) ** 2, "sqrt": np.sqrt(n), "linear": n}[form]
    x_test = {"log": math.log(128), "log2": math.log(128) ** 2, "sqrt": math.sqrt(128), "linear": 128.0}[form]
    if form in ("log", "log2"):
        b, a = np.polyfit(x, y, 1)
        expected = a + b * x_test
    else:
        expected = (x * y).sum() / (x * x).sum() * x_test        # the normal equation of y = c x
    got = heldout.predictions(form, n, np.stack([y, 2 * y]), 128)
    # a handful of float64 operations on O(10) numbers: relative rounding of order 1e-15
    assert got == pytest.approx([expected, 2 * expected], rel=1e-12)
    assert got[0] == pytest.approx(float(scaling.fit_form(form, n, y).predict(128)), rel=1e-12)


# Held out at n = 128 from n = 16, 32, 64 (x = ln n equally spaced, one step apart), the straight line's prediction
# one step beyond is mean(y) + 2 (y3 - y1) / 2, that is the weights (-2/3, 1/3, 4/3) on (y1, y2, y3); c sqrt(n) has
# the weights sqrt(n_i) sqrt(128) / sum(n_i), with sum(n_i) = 112. Each width y_i is known to (y_i - 1, y_i].
LOG_WEIGHTS = np.array([-2, 1, 4]) / 3
SQRT_WEIGHTS = np.sqrt([16, 32, 64]) * math.sqrt(128) / 112


def by_hand(weights, low, high):
    low, high = np.asarray(low, float), np.asarray(high, float)
    return (float(np.where(weights > 0, weights * low, weights * high).sum()),
            float(np.where(weights > 0, weights * high, weights * low).sum()))


def test_an_exact_logarithm_is_predicted_only_by_the_logarithmic_forms():
    d = [2, 3, 4, 5]                                              # log2(n) - 2: a + b ln n exactly
    table = heldout.heldout_table(cells(d, low=4, high=6), boots(d, spread=0.1), "copy")
    assert list(table.form) == list(heldout.FORMS) and set(table.fitted_n.map(tuple)) == {(16, 32, 64)}
    log = table.set_index("form").loc["log"]
    assert log.predicted == pytest.approx(5.0, rel=1e-9)
    # each width known to a unit step: (1, 2], (2, 3], (3, 4] -> -2/3 2 + 1/3 2 + 4/3 3 = 10/3 to 17/3
    assert (log.predicted_low, log.predicted_high) == pytest.approx((10 / 3, 17 / 3), rel=1e-12)
    # c sqrt(n): c = sum(sqrt(n) d) / sum(n) over 16, 32, 64 = 56.97 / 112, times sqrt(128): 5.75, inside 4 to 6
    sqrt = table.set_index("form").loc["sqrt"]
    assert sqrt.predicted == pytest.approx((8 + 3 * math.sqrt(32) + 32) / 112 * math.sqrt(128), rel=1e-12)
    assert table.set_index("form").predicts.to_dict() == {"log": True, "log2": True, "sqrt": True, "linear": False}
    assert heldout.decide(table) == "untestable"                 # both classes predict 4 to 6
    # a slow logarithm far from the origin: c sqrt(n) through 20, 21, 22 cannot bend that flat
    d = [20, 21, 22, 23]
    narrow = heldout.heldout_table(cells(d, low=23, high=23), boots(d, spread=0.01), "copy").set_index("form")
    assert (narrow.loc["log", "predicted_low"], narrow.loc["log", "predicted_high"]) == pytest.approx(
        by_hand(LOG_WEIGHTS, [19, 20, 21], [20, 21, 22]), rel=1e-12)               # 21.33 to 23.67: asks 22 to 24
    sqrt_low = by_hand(SQRT_WEIGHTS, [19, 20, 21], [20, 21, 22])[0]
    assert sqrt_low > 23 and narrow.loc["sqrt", "predicted_low"] == pytest.approx(sqrt_low, rel=1e-12)  # 36.1
    assert narrow.predicts.to_dict() == {"log": True, "log2": True, "sqrt": False, "linear": False}
    narrow = narrow.reset_index()
    assert heldout.decide(narrow) == "log"
    assert "only logarithmic growth extrapolates" in heldout.sentence("copy", narrow)
    assert "a + b·ln n and a + b·(ln n)² predict it and c·√n and c·n do not" in heldout.sentence("copy", narrow)
    # the measured 23 has an interval of one value: the seeds behind it are named instead
    assert "measured 23 (3 of 3 seeds give it alone) at n = 128" in heldout.sentence("copy", narrow)
    assert heldout.heldout_view({"copy": narrow}).iloc[0]["measured (95 % interval, or the seeds that agree)"] == \
        "23 (3 of 3 seeds)"
    moved = heldout.heldout_table(cells(d, low=22, high=23), boots(d, spread=0.01), "copy")
    assert "measured 23 (95 % interval 22 to 23) at n = 128" in heldout.sentence("copy", moved)
    assert heldout.heldout_view({"copy": moved}).iloc[0]["measured (95 % interval, or the seeds that agree)"] == \
        "23 (22 to 23)"
    gap = cells(d, low=21, high=23).assign(d_star_lowest=[20.0, 21.0, 22.0, 22.0])   # 22 not trained at n = 128
    assert heldout.heldout_table(gap, boots(d, spread=0.01), "copy").measured_text.iloc[0] == \
        "22 to 23 (95 % interval 21 to 23)"                        # the bracket, never the point alone
    first = cells(d).assign(d_star_at_first=True)
    assert heldout.heldout_table(first, boots(d, spread=0.01), "copy").measured_cell.iloc[0] == "≤ 23 (3 of 3 seeds)"
    assert heldout.summary({"copy": narrow, "reversal": table}) == (
        "Held out at n = 128, the largest n is predicted for every task by "
        "a + b·ln n and a + b·(ln n)²; c·√n misses it for copy and c·n misses it for copy and reversal.")


def test_each_width_counts_as_its_unit_step_bracket():
    """No interval of one value: where every resample agrees, the widths' unit-step brackets still spread the
    prediction (the zero-width intervals a referee would reject)."""
    d = [2, 3, 4, 5]
    c = cells(d, low=5, high=5)
    c["d_star_lowest"] = [2.0, 3.0, 3.0, 5.0]                     # 4 at n = 64 might be 3 (3 not trained)
    table = heldout.heldout_table(c, boots(d, spread=0.0), "copy").set_index("form")
    # (1, 2], (2, 3], (2, 4]: -2/3 2 + 1/3 2 + 4/3 2 = 2 to -2/3 1 + 1/3 3 + 4/3 4 = 17/3
    assert (table.loc["log", "predicted_low"], table.loc["log", "predicted_high"]) == pytest.approx((2, 17 / 3),
                                                                                                    rel=1e-12)
    assert (table.predicted_high - table.predicted_low > 0.5).all()
    c["d_star_at_first"] = [True, False, False, False]            # saturated at the grid's first width: (0, 2]
    first = heldout.heldout_table(c, boots(d, spread=0.0), "copy").set_index("form")
    assert first.loc["log", "predicted_high"] == pytest.approx(by_hand(LOG_WEIGHTS, [0, 2, 2], [2, 3, 4])[1],
                                                               rel=1e-12)   # the negative weight meets 0
    assert heldout.dimensions_above(2.0) == 3 and heldout.dimensions_above(2.5) == 3
    assert heldout.dimensions(2.0) == 2 and heldout.dimensions(2.5) == 3


def test_linear_growth_is_predicted_only_by_the_power_forms():
    d = [2, 4, 8, 16]                                             # n / 8
    table = heldout.heldout_table(cells(d, low=15, high=17), boots(d, spread=0.05), "copy")
    assert table.set_index("form").loc["linear"].predicted == pytest.approx(16.0, rel=1e-12)
    assert heldout.decide(table) == "power"


def test_too_few_usable_n_is_untestable():
    d = [2, 3, 4, 5]
    table = heldout.heldout_table(cells(d, usable=[True, False, True, True]), boots(d), "copy")
    assert table.empty and heldout.decide(table) == "untestable"
    assert "fewer than 4 usable n" in heldout.sentence("copy", table)
    assert heldout.heldout_view({"copy": table}).index[0].startswith("no task has")
