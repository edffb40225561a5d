"""Which widths and seeds to train next, so that models are trained only where a saturation answer depends on them.

A setting (a task or a domain at one n) has a grid of query/key widths and, for each trained (width, seed), the
scores of the quantities whose saturation point is wanted (oriented so that higher is better: pass minus the loss).
`plan` reads what is trained so far and returns what to train next, `[]` when the setting is finished:

    design = Design(grid=(1, 2, 3, 4, 6, 8, 12, 16), seeds=3, max_seeds=5)
    while (more := design.plan(scores)):        # scores: {quantity: {(width, seed): score}}
        ...train `more` [(width, seed), ...], add their scores...

1. **Both ends first**, with the first `seeds` seeds: the saturation rule's baseline and reference
   (`gridsearch.smallest_reaching`: LEVEL of the rise from the smallest to the largest trained width).
2. **Coarse to fine**: for every quantity, one bisection step on the grid between its current answer and the
   trained width below it (`gridsearch.bisect`), until each answer is resolved to the grid's spacing. New widths
   are trained with every seed the setting has so far.
3. **Sequential seeds**: an answer is *undecided* when leaving one seed out moves it (the robustness rule of
   `helpers.robust`). While one is, the widths it rests on (both ends, the answer and the trained width below it)
   get one more seed, up to `max_seeds`; then step 2 resumes with the new means.

The plan is a function of the scores alone, so a killed sweep that replays it on its stored results asks for
exactly what is missing.
"""

from dataclasses import dataclass

import numpy as np

from . import gridsearch
from .errors import ArgumentError

LEVEL = gridsearch.LEVEL


def means(table: dict, seeds=None) -> dict:
    """{width: mean score} from {(width, seed): score}, over `seeds` (all when None), NaN scores left out; widths
    with no finite score are absent."""
    per_width: dict = {}
    for (width, seed), value in table.items():
        if (seeds is None or seed in seeds) and value is not None and np.isfinite(value):
            per_width.setdefault(width, []).append(float(value))
    return {w: float(np.mean(v)) for w, v in per_width.items()}


def answer(table: dict, level: float = LEVEL, seeds=None) -> float:
    """The saturation width of the seed means (`gridsearch.smallest_reaching`); NaN with nothing trained."""
    values = means(table, seeds)
    return gridsearch.smallest_reaching(values, level) if values else float("nan")


def seeds_of(table: dict) -> list:
    return sorted({seed for _, seed in table})


def undecided(table: dict, level: float = LEVEL) -> bool:
    """True when leaving one seed out moves the answer (NaN and NaN count as the same answer)."""
    everything = answer(table, level)
    seeds = seeds_of(table)
    if len(seeds) < 2:
        return False
    for left_out in seeds:
        other = answer(table, level, [s for s in seeds if s != left_out])
        if not (other == everything or (np.isnan(other) and np.isnan(everything))):
            return True
    return False


@dataclass(frozen=True)
class Design:
    """The width grid, the seeds every width starts with, the cap on seeds, and the saturation level."""

    grid: tuple
    seeds: int = 3
    max_seeds: int = 5
    level: float = LEVEL
    first_seed: int = 0

    def __post_init__(self):
        grid = gridsearch._check_grid(self.grid)
        object.__setattr__(self, "grid", tuple(grid))
        if len(grid) < 2:
            raise ArgumentError("grid", self.grid, "at least two widths (the rule's baseline and reference)")
        for name, value, low in (("seeds", self.seeds, 1), ("max_seeds", self.max_seeds, self.seeds),
                                 ("first_seed", self.first_seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(name, value, f"an integer >= {low}"
                                    + (" (the seeds every width starts with)" if name == "max_seeds" else ""))
        if not 0 < self.level < 1:
            raise ArgumentError("level", self.level, "a number strictly between 0 and 1")

    def seed_list(self, count: int) -> list[int]:
        return [self.first_seed + i for i in range(count)]

    def decisive(self, table: dict) -> set:
        """The widths an answer rests on: both ends, the answer and the trained width just below it."""
        widths = {self.grid[0], self.grid[-1]}
        point = answer(table, self.level)
        if np.isfinite(point):
            widths.add(self.grid[self.grid.index(point)])   # the grid's own value (the rule returns a float)
            below = [w for w in means(table) if w < point]
            if below:
                widths.add(max(below))
        return widths

    def plan(self, scores: dict, keep_going: bool = True) -> list[tuple]:
        """The (width, seed) pairs to train next, `[]` when finished. `scores`: {quantity: {(width, seed): score}}
        for every trained model (the same pairs in every quantity); `keep_going=False` (for example: the largest
        width misses the quality bar) stops the setting once its ends are trained."""
        tables = list(scores.values()) or [{}]
        trained = set(tables[0])
        count = max(self.seeds, len(seeds_of(tables[0])))
        seeds = self.seed_list(count)

        def missing(widths, with_seeds):
            return sorted((w, s) for w in widths for s in with_seeds if (w, s) not in trained)

        ends = missing({self.grid[0], self.grid[-1]}, self.seed_list(self.seeds))
        if ends or not keep_going:
            return ends
        new = set()
        for table in tables:
            new.update(gridsearch.bisect(list(self.grid), means(table), self.level))
        if todo := missing(new, seeds):   # (a width whose every model diverged has no mean: not asked again)
            return todo
        open_ = [table for table in tables if undecided(table, self.level)]
        if not open_:
            return []
        decisive = set().union(*(self.decisive(table) for table in open_))
        if gaps := missing(decisive, seeds):
            return gaps
        if count >= self.max_seeds:
            return []
        return missing(decisive, [self.first_seed + count])

    def status(self, scores: dict) -> dict:
        """Per quantity: its answer, whether leaving a seed out moves it, and the seeds it rests on."""
        return {q: {"answer": answer(t, self.level), "undecided": undecided(t, self.level),
                    "seeds": len(seeds_of(t))} for q, t in scores.items()}
