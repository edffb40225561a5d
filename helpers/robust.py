"""Is a verdict robust? Recompute it under the perturbations a hostile referee would try first.

A verdict that decides between growth laws or saturation orders rests on a few seeds and on widths read on a grid.
It is *decided* only when it survives both:

    (a) each seed left out in turn (the chapter's minimum number of seeds relaxed by one for this check only);
    (b) each decisive width (a per-n smallest width, a saturation point) moved, one at a time, to its lower and
        to its upper neighbour on the grid.

    perturbed = [(label, decide(data without seed s)) for label, s in leave_one_out(seeds)]
    perturbed += [(label, decide_from_widths(w)) for label, w in grid_steps(widths, grid)]
    check = Robustness.of(decide(data), perturbed)
    verdict = check.apply(verdict, subject="copy")     # "untestable" naming the perturbation that flips it

`decide` is the chapter's own rule returning an outcome word; this module knows nothing of what it decides.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from .english import join
from .errors import ArgumentError
from .results import Verdict

UNTESTABLE = "untestable"


def leave_one_out(seeds) -> list[tuple[str, object]]:
    """[("seed 3 left out", 3), ...]: one perturbation per seed, in the order given."""
    seeds = list(dict.fromkeys(seeds))
    if len(seeds) < 2:
        raise ArgumentError("seeds", seeds, "at least 2 distinct seeds (one is left out at a time)")
    return [(f"seed {s} left out", s) for s in seeds]


def neighbours(grid, x: float) -> list[float]:
    """The grid points just below and just above `x` (`x` need not be on the grid; none beyond the ends)."""
    values = sorted(float(g) for g in grid)
    below = [g for g in values if g < x]
    above = [g for g in values if g > x]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def step(grid, x: float, direction: int) -> float:
    """`x` moved one step along the grid (-1 down, +1 up); `x` itself at the end it would pass, or when NaN."""
    moved = [g for g in neighbours(grid, x) if (g - x) * direction > 0]
    return moved[0] if moved else x


def grid_steps(points: dict, grid, name: str = "width") -> list[tuple[str, dict]]:
    """Every copy of `points` {key: x} with one x moved to one of its grid neighbours, labelled
    "the width at n = 64 moved from 4 to 6" (keys are written as given: pass "n = 64", not 64, to read well).
    NaN points are left alone."""
    from .english import number

    out = []
    for key, x in points.items():
        if x != x:   # NaN: nothing decided there to move
            continue
        for step in neighbours(grid, x):
            out.append((f"the {name} at {key} moved from {number(x)} to {number(step)}", {**points, key: step}))
    return out


@dataclass(frozen=True)
class Robustness:
    """The outcome on all the data, how many perturbations were tried, and those that changed it
    (`flips`: (perturbation in words, the outcome it gave))."""

    outcome: str
    checked: int
    flips: tuple = ()

    @classmethod
    def of(cls, outcome: str, perturbed: Iterable[tuple[str, str]]) -> "Robustness":
        perturbed = list(perturbed)
        return cls(outcome, len(perturbed), tuple((label, o) for label, o in perturbed if o != outcome))

    @property
    def robust(self) -> bool:
        """True when no perturbation changed the outcome (and at least one was tried)."""
        return self.checked > 0 and not self.flips

    def evidence(self) -> dict:
        """JSON-able: the perturbations tried, and each one that flipped the outcome with what it gave."""
        return {"perturbations": self.checked, "flips": [{"perturbation": p, "outcome": o} for p, o in self.flips]}

    def flip_text(self, words: dict | None = None, most: int = 2) -> str:
        """"with seed 2 left out, they point to linear": the first `most` flips in words (`words` maps outcomes to
        noun phrases, as in "all the data point to ..."; an untestable flip reads "no answer is decided")."""
        words = words or {}
        parts = [f"with {label}, no answer is decided" if o == UNTESTABLE else
                 f"with {label}, they point to {words.get(o, o)}" for label, o in self.flips[:most]]
        more = len(self.flips) - most
        if more > 0:
            parts.append(f"{more} more {'perturbation changes' if more == 1 else 'perturbations change'} it")
        return join(parts, separator="; ")

    def apply(self, verdict: Verdict, subject: str = "", words: dict | None = None) -> Verdict:
        """`verdict` unchanged (with this check in its evidence) when robust or already untestable; otherwise
        "untestable at this budget", saying what the data point to and the perturbation that flips it."""
        evidence = {**verdict.evidence, "robustness": self.evidence()}
        rule = verdict.rule + ("; decided only if no seed left out and no decisive width moved by one grid step "
                               "changes the answer")
        if verdict.outcome == UNTESTABLE or self.robust or self.checked == 0:
            return Verdict(verdict.outcome, verdict.sentence, rule, evidence)
        words = words or {}
        lead = f"{subject} is untestable at this budget" if subject else "untestable at this budget"
        end = "." if verdict.sentence.endswith(".") else ""   # the prose around a glued clause has its own stop
        sentence = (f"{lead}: all the data point to {words.get(self.outcome, self.outcome)}, but one perturbation "
                    f"changes the answer ({self.flip_text(words)}){end}")
        return Verdict(UNTESTABLE, sentence, rule, {**evidence, "undecided_outcome": self.outcome})
