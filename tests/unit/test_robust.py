"""helpers.robust: a verdict is decided only if no seed left out and no decisive width moved one grid step flips it."""

import math
import sys

import numpy as np
import pytest

from helpers import robust, scaling
from helpers.errors import ArgumentError
from helpers.results import Verdict

GRID = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
N = [16, 32, 64, 128]


def test_perturbations_are_named_and_complete():
    assert robust.leave_one_out([0, 1, 2]) == [("seed 0 left out", 0), ("seed 1 left out", 1), ("seed 2 left out", 2)]
    with pytest.raises(ArgumentError, match="seeds"):
        robust.leave_one_out([5])
    assert robust.neighbours(GRID, 4) == [3.0, 6.0]
    assert robust.neighbours(GRID, 1) == [2.0] and robust.neighbours(GRID, 32) == [24.0]
    assert robust.neighbours(GRID, 5) == [4.0, 6.0], "off the grid: the grid points around it"
    assert (robust.step(GRID, 4, 1), robust.step(GRID, 4, -1), robust.step(GRID, 32, 1)) == (6.0, 3.0, 32)
    assert math.isnan(robust.step(GRID, math.nan, 1))
    steps = robust.grid_steps({"n = 16": 4.0, "n = 32": math.nan, "n = 64": 1.0}, GRID)
    assert [label for label, _ in steps] == ["the width at n = 16 moved from 4 to 3",
                                            "the width at n = 16 moved from 4 to 6",
                                            "the width at n = 64 moved from 1 to 2"]
    assert steps[1][1] == {"n = 16": 6.0, "n = 32": steps[1][1]["n = 32"], "n = 64": 1.0}


def _widths(table: dict) -> dict:
    """Per n, the smallest width whose seed-mean accuracy reaches 0.95 (brute force over the grid)."""
    out = {}
    for n, per_seed in table.items():
        curve = np.mean(per_seed, axis=1)
        out[n] = float(GRID[int(np.argmax(curve >= 0.95))])
    return out


def _growth(widths: dict) -> str:
    """The chapter-style decision: the growth class of the forms that fit d*(n) (one point per n)."""
    n, y = np.array(list(widths)), np.array(list(widths.values()))
    fits = scaling.fit_forms(n, y)
    best = min(scaling.CLASS_FORMS, key=lambda f: fits[f].loss)
    return scaling.growth_class((best,))


def _table(needs: dict) -> dict:
    """Accuracy tables (width, seed): seed s solves n at every width >= needs[n][s]."""
    return {n: np.array([[1.0 if w >= need else 0.0 for need in seeds] for w in GRID]) for n, seeds in needs.items()}


def _check(table: dict) -> robust.Robustness:
    outcome = _growth(_widths(table))
    seeds = range(len(next(iter(table.values()))[0]))
    perturbed = [(label, _growth(_widths({n: np.delete(t, s, axis=1) for n, t in table.items()})))
                 for label, s in robust.leave_one_out(seeds)]
    perturbed += [(label, _growth(w)) for label, w in robust.grid_steps(_widths(table), GRID)]
    return robust.Robustness.of(outcome, perturbed)


def test_one_seed_that_alone_makes_the_growth_linear_flips_the_verdict():
    # seeds 0 and 1 need 2, 3, 3, 4 (log-like); seed 2 needs 32 at n = 128, which drags the seed mean down there
    needs = {16: [2, 2, 2], 32: [3, 3, 3], 64: [3, 3, 3], 128: [4, 4, 32]}
    check = _check(_table(needs))
    assert check.outcome == "linear" and not check.robust
    assert ("seed 2 left out", "log") in check.flips
    verdict = check.apply(Verdict("linear", "copy supports order n.", "fit", {"n": N}), subject="copy")
    assert verdict.outcome == "untestable" and verdict.sentence.startswith("copy is untestable at this budget")
    assert "with seed 2 left out, they point to log" in verdict.sentence
    assert verdict.evidence["undecided_outcome"] == "linear" and verdict.evidence["robustness"]["flips"]


def test_four_points_of_a_logarithm_on_a_coarse_grid_do_not_decide():
    # 2, 4, 6, 8 at n = 16 .. 1024 is exactly 2 log4(n) - 2, but 8 moved to 12 makes sqrt(n) fit better
    needs = {16: [2, 2, 2], 64: [4, 4, 4], 256: [6, 6, 6], 1024: [8, 8, 8]}
    check = _check(_table(needs))
    assert check.outcome == "log" and ("the width at 1024 moved from 8 to 12", "sqrt") in check.flips


def test_a_clear_logarithm_on_a_fine_grid_survives_every_perturbation(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "GRID", list(range(1, 33)))
    needs = {2 ** k: [k, k, k] for k in range(4, 13)}            # d = log2 n over nine octaves, seeds agree
    check = _check(_table(needs))
    assert check.outcome == "log" and check.robust and check.checked == 3 + 2 * 9
    verdict = Verdict("log", "copy supports order log n.", "fit")
    kept = check.apply(verdict, subject="copy")
    assert (kept.outcome, kept.sentence) == ("log", verdict.sentence)
    assert kept.evidence["robustness"] == {"perturbations": 21, "flips": []}


def test_an_untestable_verdict_stays_untestable_and_nothing_tried_changes_nothing():
    flips = robust.Robustness.of("log", [("seed 0 left out", "linear")])
    untestable = Verdict("untestable", "too few n.", "fit")
    assert flips.apply(untestable).sentence == "too few n."
    nothing = robust.Robustness.of("log", [])
    assert not nothing.robust and nothing.apply(Verdict("log", "s.", "r")).outcome == "log"


def test_a_flip_reads_as_a_noun_phrase_or_as_no_decided_answer():
    check = robust.Robustness.of("log", [("seed 0 left out", "linear"), ("seed 1 left out", "untestable")])
    text = check.flip_text({"linear": "growth like n"})
    assert text == "with seed 0 left out, they point to growth like n and with seed 1 left out, no answer is decided"
