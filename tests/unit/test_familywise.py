"""Bonferroni thresholds against closed forms of the normal and Student's t quantiles, and against simulation."""

import math

import numpy as np
import pytest

from helpers import familywise


def test_normal_threshold_is_the_known_quantile():
    assert familywise.threshold(1, two_sided=True) == pytest.approx(1.959963984540054, rel=1e-12)
    # 10 one-sided comparisons at 5 %: the normal quantile at 0.005 (tables: 2.5758293035489)
    assert familywise.threshold(10) == pytest.approx(2.5758293035489004, rel=1e-12)


@pytest.mark.parametrize("comparisons", [1, 3, 12])
def test_student_threshold_matches_the_closed_forms_at_one_and_two_degrees_of_freedom(comparisons):
    p = 0.05 / comparisons / 2
    cauchy = math.tan(math.pi * (0.5 - p))                       # t with 1 degree of freedom
    a = 1 - 2 * p                                                # t with 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    two = a * math.sqrt(2 / (1 - a * a))
    assert familywise.threshold(comparisons, two_sided=True, dof=1) == pytest.approx(cauchy, rel=1e-9)
    assert familywise.threshold(comparisons, two_sided=True, dof=2) == pytest.approx(two, rel=1e-9)


def test_student_threshold_tends_to_the_normal_one_and_exceeds_it():
    normal = familywise.threshold(9, two_sided=True)
    assert familywise.threshold(9, two_sided=True, dof=3) > familywise.threshold(9, two_sided=True, dof=7) > normal
    assert familywise.threshold(9, two_sided=True, dof=10**7) == pytest.approx(normal, rel=1e-5)


def test_t_scores_from_four_draws_cross_the_threshold_at_the_promised_rate():
    """z = mean / (s / sqrt(4)) of 4 normal draws crosses threshold(1, 0.1, two_sided, dof=3) 10 % of the time."""
    gen = np.random.default_rng(0)
    draws = gen.standard_normal((200_000, 4))
    z = draws.mean(1) / (draws.std(1, ddof=1) / 2)
    rate = float(np.mean(np.abs(z) >= familywise.threshold(1, alpha=0.1, two_sided=True, dof=3)))
    assert abs(rate - 0.1) < 4 * math.sqrt(0.1 * 0.9 / len(z))   # 4 binomial standard errors
    normal_rate = float(np.mean(np.abs(z) >= familywise.threshold(1, alpha=0.1, two_sided=True)))
    assert normal_rate > 0.15   # the normal threshold would be crossed far more often


@pytest.mark.parametrize("kwargs", [{"comparisons": 0}, {"comparisons": 3, "alpha": 0.0}, {"comparisons": 3, "dof": 0}])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError):
        familywise.threshold(**kwargs)
