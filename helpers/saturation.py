"""Saturation: the smallest x (a head dimension d_h, say) at which a rising curve y(x) reaches its plateau.

One definition for the whole book:

    target = baseline + level * (reference - baseline)        (or reference - within, for an absolute margin)
    saturation = the smallest x with y(x) >= target, interpolated between the grid points around the first crossing

    reference  "last": y at the largest x (the grid's own plateau; a curve that keeps creeping up saturates later
                       on a longer grid), "max": the largest y, or a number (a plateau known in advance, e.g. n)
    baseline   0.0, "first" (y at the smallest x: "level of the rise over the grid") or a number (a floor such as
               a position-only accuracy)
    level      the share of the rise that counts as saturated (0.95 unless a chapter says otherwise)
    within     instead of level: saturated once y is within this absolute distance of the reference
    interpolate "log" (linear in log x, for d_h grids in powers of two), "linear", or "none" (the grid point itself)

A falling quantity (a loss) is passed as -y. Edges are explicit in `Saturation.status`:

    INSIDE       the curve crosses the target on the grid; `value` is the (interpolated) crossing
    AT_FIRST     y at the smallest x already reaches the target, or the curve does not rise at all (reference <=
                 baseline with `level`): `value` is x[0], an upper bound ("at or below x[0]")
    NOT_REACHED  no grid point reaches the target (only possible with a numeric reference): `value` is NaN and the
                 saturation lies beyond x[-1]
    FLAT         the curve is undefined (a NaN in y): `value` is NaN

**Trained models: one convention, no interpolation.** Chapters 05, 06 and 07 judge every quantity (accuracy, loss,
rank) by `RISE`: the share `LEVEL` of the rise (or drop) from the smallest trained width (baseline "first") to the
largest (reference "last"), read at the grid points (`interpolate="none"`). Between two trained widths nothing is
known, so such a saturation point is reported as the bracket of trained widths around it: `lowest_possible(grid, x)`
is the smallest integer width it can be (one above the trained width just below it), and the answer is "from
`lowest_possible` to `value`", e.g. "5 to 16" on the grid 1, 2, 4, 16, never an interpolated 13.

Chapter 03's knee "first d_h at which rank / plateau reaches `level`" is
`saturation_point(d, rank, reference=plateau, level=level)`; "first d_h within eps of the plateau" is
`saturation_point(d, rank, reference=plateau, within=eps)`.
"""

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import ArgumentError

INSIDE, AT_FIRST, NOT_REACHED, FLAT = "inside", "at_first", "not_reached", "flat"
STATUSES = (INSIDE, AT_FIRST, NOT_REACHED, FLAT)
LEVEL = 0.95
INTERPOLATIONS = ("log", "linear", "none")
RISE = {"reference": "last", "baseline": "first", "level": LEVEL, "interpolate": "none"}   # trained models


@dataclass(frozen=True)
class Saturation:
    """Where a curve saturates: `value` (see the module docstring for its meaning per `status`) and the grid ends."""

    value: float
    status: str
    x_first: float
    x_last: float

    def describe(self, name: str = "d_h", digits: int = 2) -> str:
        """The saturation point in words, e.g. "d_h ≈ 3.2", "d_h ≤ 1 (saturated at the smallest d_h)"."""
        from .english import number

        if self.status == INSIDE:
            return f"{name} ≈ {number(self.value, digits)}"
        if self.status == AT_FIRST:
            return f"{name} ≤ {number(self.x_first, digits)} (saturated at the smallest {name})"
        if self.status == NOT_REACHED:
            return f"{name} > {number(self.x_last, digits)} (not reached on the grid)"
        return "undefined (the curve does not rise)"


Reference = str | float | Callable[[np.ndarray, np.ndarray], float]


def _resolve(kind, x: np.ndarray, y: np.ndarray, name: str, named: dict) -> float:
    if callable(kind):
        return float(kind(x, y))
    if isinstance(kind, str):
        if kind not in named:
            raise ArgumentError(name, kind, f"one of {sorted(named)}, a number or a function (x, y) -> number")
        return float(named[kind])
    return float(kind)


def _check(level, within, interpolate) -> float | None:
    if interpolate not in INTERPOLATIONS:
        raise ArgumentError("interpolate", interpolate, f"one of {list(INTERPOLATIONS)}")
    if within is not None and level is not None:
        raise ArgumentError("within", within, "None when level is given (give one of level and within)")
    if within is not None:
        if not within >= 0:
            raise ArgumentError("within", within, "a number >= 0")
        return None
    level = LEVEL if level is None else level
    if not 0 < level <= 1:
        raise ArgumentError("level", level, "a number in (0, 1]")
    return level


def saturation_point(x, y, *, reference: Reference = "last", level: float | None = None,
                     within: float | None = None, baseline: Reference = 0.0,
                     interpolate: str = "log") -> Saturation:
    """The saturation point of the curve `y` `(k,)` over the grid `x` `(k,)` (any order; sorted here).

    See the module docstring for the rule, the options and the four statuses.
    """
    level = _check(level, within, interpolate)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 1:
        raise ArgumentError("x, y", (x.shape, y.shape), "two 1-D arrays of the same non-zero length")
    if interpolate == "log" and not (x > 0).all():
        raise ArgumentError("x", x.tolist(), 'positive grid values for interpolate="log"')
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if not np.isfinite(y).all():
        return Saturation(math.nan, FLAT, float(x[0]), float(x[-1]))
    top = _resolve(reference, x, y, "reference", {"last": y[-1], "max": y.max()})
    if within is not None:                        # an absolute margin: the baseline plays no part
        target = top - within
    else:
        floor = _resolve(baseline, x, y, "baseline", {"first": y[0]})
        if not top > floor:                      # nothing rises: the smallest x is as good as any
            return Saturation(float(x[0]), AT_FIRST, float(x[0]), float(x[-1]))
        target = floor + level * (top - floor)
    reached = np.nonzero(y >= target)[0]
    if reached.size == 0:
        return Saturation(math.nan, NOT_REACHED, float(x[0]), float(x[-1]))
    first = int(reached[0])
    if first == 0:
        return Saturation(float(x[0]), AT_FIRST, float(x[0]), float(x[-1]))
    lo, hi = first - 1, first
    share = (target - y[lo]) / (y[hi] - y[lo])  # in (0, 1]: y[lo] < target <= y[hi]
    if interpolate == "none":
        value = x[hi]
    elif interpolate == "log":
        value = math.exp(math.log(x[lo]) + share * (math.log(x[hi]) - math.log(x[lo])))
    else:
        value = x[lo] + share * (x[hi] - x[lo])
    return Saturation(float(value), INSIDE, float(x[0]), float(x[-1]))


def lowest_possible(grid, x: float) -> float:
    """The smallest integer width a saturation point `x` read on the trained `grid` can be: one above the grid
    point just below `x` (on 1, 2, 4, 16 an answer of 16 means 5 to 16), `x` itself at the bottom of the grid,
    NaN when `x` is NaN."""
    if not np.isfinite(x):
        return math.nan
    below = [float(g) for g in grid if g < x]
    return float(max(below) + 1) if below else float(x)


def bracket_text(grid, x: float, at_first: bool = False, digits: int = 3) -> str:
    """A saturation point read on a grid, as the trained widths allow: "4" (the width below was trained and does
    not reach), "5 to 16" (widths 5 to 15 were not trained), "≤ 1" (saturated at the smallest width), "–" for NaN."""
    from .english import number, span_short

    if not np.isfinite(x):
        return "–"
    if at_first:
        return f"≤ {number(x, digits)}"
    return span_short(lowest_possible(grid, x), x, digits)


def own_points(x, curves, **rule) -> np.ndarray:
    """The saturation point of each replicate's own curve, for the rows of `curves` `(replicates, k)` measured at
    every x (a row with a NaN, such as an extra seed trained at only some widths, has no curve of its own and is
    left out): `(complete replicates,)`. `rule`: the options of `saturation_point`."""
    curves = np.asarray(curves, dtype=np.float64)
    return np.array([saturation_point(x, row, **rule).value for row in curves[np.isfinite(curves).all(axis=1)]])


def interval_text(low: float, high: float, spread: bool, agreeing: int, seeds: int, digits: int = 3,
                  table: bool = False) -> str:
    """A bootstrap interval over seeds of a saturation point on a grid: "3 to 6" (`low` already the smallest width
    its lower end can be), or, where the resamples' 2.5 and 97.5 % quantiles coincide (`spread` False), the count
    behind it, "3 of 3 seeds give it alone" (`agreeing` of `seeds` seeds' own curves): an interval of one value
    from a few seeds would claim more than they show; "3 of 3 seeds" in a `table` whose caption says the rest.
    "–" for NaN."""
    from .english import count_of, span_short

    if not (np.isfinite(low) and np.isfinite(high)):
        return "–"
    if not spread:
        count = count_of(agreeing, seeds, 'seed')
        return count if table else f"{count} {'gives' if agreeing == 1 else 'give'} it alone"
    return span_short(low, high, digits)


@dataclass(frozen=True)
class SaturationInterval:
    """A saturation point of the mean curve and a bootstrap interval over replicates (seeds, trials).

    `low`/`high` are NaN when fewer than `1 - (1 - confidence) / 2` of the resamples have a defined saturation
    (NOT_REACHED or FLAT), since the interval would then hide that part of the distribution; `defined` is that share.
    `values` `(resamples,)` holds the saturation point of every resample (NaN where undefined), for statistics of
    several points at once (a growth fit over n, `helpers.scaling`).
    """

    point: Saturation
    low: float
    high: float
    defined: float
    resamples: int
    confidence: float
    values: np.ndarray | None = None

    @property
    def spread(self) -> bool:
        """Whether the interval has width: False when its ends coincide (every resample, or all but a tail of
        them, gives one value); True when it is undefined (NaN)."""
        return not self.low == self.high


def bootstrap_saturation(x, samples, *, resamples: int = 1000, confidence: float = 0.95, seed: int = 0,
                         **rule) -> SaturationInterval:
    """Saturation of the mean curve with a percentile bootstrap interval.

    samples: a 2-D array `(replicates, k)` when every replicate (a seed) is measured at every x; replicates are then
    resampled together (paired). Or a list of k 1-D arrays (replicates per x, e.g. independent trials), resampled
    separately at each x. `rule`: the keyword options of `saturation_point` (a callable reference or baseline
    sees the resampled mean curve).
    """
    if resamples < 1:
        raise ArgumentError("resamples", resamples, "an integer >= 1")
    if not 0 < confidence < 1:
        raise ArgumentError("confidence", confidence, "a number in (0, 1)")
    paired = isinstance(samples, np.ndarray) and samples.ndim == 2
    columns = [np.asarray(s, dtype=np.float64) for s in (samples.T if paired else samples)]
    if len(columns) != len(x) or any(c.size == 0 for c in columns):
        raise ArgumentError("samples", f"{len(columns)} columns", f"{len(x)} non-empty columns, one per x")
    point = saturation_point(x, [c.mean() for c in columns], **rule)
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    for b in range(resamples):
        if paired:
            pick = rng.integers(0, samples.shape[0], samples.shape[0])
            means = samples[pick].mean(0)
        else:
            means = [c[rng.integers(0, c.size, c.size)].mean() for c in columns]
        values[b] = saturation_point(x, means, **rule).value
    defined = float(np.isfinite(values).mean())
    low = high = math.nan
    if defined >= 1 - (1 - confidence) / 2:
        tail = 100 * (1 - confidence) / 2
        if rule.get("interpolate") == "none":   # grid readings: the interval's ends are grid points too
            low = float(np.nanpercentile(values, tail, method="lower"))
            high = float(np.nanpercentile(values, 100 - tail, method="higher"))
        else:
            low, high = (float(v) for v in np.nanpercentile(values, [tail, 100 - tail]))
    return SaturationInterval(point, low, high, defined, resamples, confidence, values)
