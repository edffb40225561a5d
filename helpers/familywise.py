"""Bonferroni thresholds: how many standard errors each of m comparisons may be off before the family, at
family-wise error rate alpha, counts as a miss.

    threshold(9, two_sided=True)          # |z| of one of 9 comparisons, normal errors, 5 % for the family
    threshold(9, two_sided=True, dof=7)   # the same with each standard error estimated from 8 draws (Student's t)

A standard error estimated from a few draws is itself noisy, so its z-score has Student's t distribution with
dof = draws - 1; with the normal threshold, 4 draws would cross 4 standard errors 2.8 % of the time by chance.
"""

from scipy.stats import norm, t as student_t

ALPHA = 0.05   # the book's family-wise error rate


def threshold(comparisons: int, alpha: float = ALPHA, two_sided: bool = False, dof: float | None = None) -> float:
    """The score one of `comparisons` comparisons must exceed for a Bonferroni family-wise level `alpha`:
    normal when `dof` is None, else Student's t with `dof` degrees of freedom."""
    if comparisons < 1:
        raise ValueError(f"comparisons must be >= 1; got {comparisons}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1); got {alpha}")
    if dof is not None and not dof > 0:
        raise ValueError(f"dof must be None or > 0; got {dof}")
    tail = alpha / comparisons / (2 if two_sided else 1)
    return float(norm.isf(tail) if dof is None else student_t.isf(tail, dof))
