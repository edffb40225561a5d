"""Coarse-to-fine search for the saturation point of a score over a grid of widths (`helpers.saturation`'s rule
for trained models, `saturation.RISE`: the smallest trained width that makes `level` of the rise from the smallest
to the largest width).

Training a model at every point of a dense grid of query/key widths (1, 2, 3, 4, 6, 8, 12, ...) is wasteful
when only the saturation point is wanted. The search trains the powers of two of the grid first (its
`coarse` points), finds the saturation point among the trained x, and then trains the untrained grid points strictly between that x and the trained point below it; it repeats until
no such point is left, so the answer is resolved to the grid's spacing around it:

    points = coarse(grid)                                   # train these first
    while (more := refine(grid, scores, level)):            # scores: {x: score of the points trained so far}
        ...train `more`, add them to scores...
    smallest_reaching(scores, level)                        # the answer

For a score that rises monotonically with x this equals the exhaustive answer (`exhaustive`), with fewer
points trained (a test checks both on synthetic objectives).

`bisect` is the cheaper search: train both ends of the grid (the rule's baseline and reference), then one point
per round, the middle of the untrained grid points between the current answer and the trained point
below it, until none is left (about log2 of the grid's length rounds, one point each):

    scores = {grid[0]: score(grid[0]), grid[-1]: score(grid[-1])}
    while (more := bisect(grid, scores, level)):
        ...train `more` (one point), add it to scores...
"""

from collections.abc import Callable

import numpy as np

from . import saturation
from .errors import ArgumentError

LEVEL = saturation.LEVEL


def _check_grid(grid) -> list:
    values = list(grid)
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 for v in values):
        raise ArgumentError("grid", grid, "a non-empty list of positive numbers")
    if sorted(set(values)) != values:
        raise ArgumentError("grid", grid, "increasing values without repeats")
    return values


def coarse(grid) -> list:
    """The grid's powers of two, plus its smallest and largest values: the first points to train."""
    values = _check_grid(grid)
    powers = [v for v in values if float(v).is_integer() and int(v) & (int(v) - 1) == 0]
    return sorted(set(powers) | {values[0], values[-1]})


def smallest_reaching(scores: dict, level: float = LEVEL) -> float:
    """The saturation point of `scores` {x: score} by `saturation.RISE` at `level`: the smallest trained x whose
    score makes `level` of the rise from the smallest to the largest trained x (the smallest x when nothing
    rises); NaN when a score is NaN."""
    if not scores:
        raise ArgumentError("scores", scores, "at least one {x: score} entry")
    xs = sorted(scores)
    rule = {**saturation.RISE, "level": level}
    return saturation.saturation_point(xs, [scores[x] for x in xs], **rule).value


def refine(grid, scores: dict, level: float = LEVEL) -> list:
    """The untrained grid points strictly between the current answer and the trained point just below it
    (none when there is no answer yet: no scores, or no positive best score)."""
    values = _check_grid(grid)
    answer = smallest_reaching(scores, level) if scores else float("nan")
    if np.isnan(answer):
        return []
    below = [x for x in scores if x < answer]
    low = max(below) if below else -np.inf
    return [v for v in values if low < v < answer and v not in scores]


def bisect(grid, scores: dict, level: float = LEVEL) -> list:
    """The next point of a bisection on the grid: the middle one of the untrained grid points strictly between
    the current answer and the trained point just below it (`[]` when none is left, or there is no answer yet)."""
    between = refine(grid, scores, level)
    return [between[len(between) // 2]] if between else []


def search(objective: Callable[[float], float], grid, level: float = LEVEL,
           method: str = "coarse") -> tuple[float, list]:
    """Run the search on a cheap `objective(x) -> score`; returns (answer, points evaluated). method: "coarse"
    (powers of two, then `refine`) or "bisect" (the top of the grid, then `bisect`)."""
    if method not in ("coarse", "bisect"):
        raise ArgumentError("method", method, '"coarse" or "bisect"')
    values = _check_grid(grid)
    step = refine if method == "coarse" else bisect
    first = coarse(values) if method == "coarse" else sorted({values[0], values[-1]})
    scores = {x: float(objective(x)) for x in first}
    while more := step(values, scores, level):
        scores.update({x: float(objective(x)) for x in more})
    return smallest_reaching(scores, level), sorted(scores)


def exhaustive(objective: Callable[[float], float], grid, level: float = LEVEL) -> float:
    """The answer with every grid point evaluated (the reference the search is tested against)."""
    return smallest_reaching({x: float(objective(x)) for x in _check_grid(grid)}, level)
