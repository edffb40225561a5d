"""Knee definitions and scaling fits of helpers.experiments.ch03_saturation."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers import scaling
from helpers.errors import ArgumentError
from helpers.experiments import ch03_saturation


def test_fits_recover_exact_forms():
    n = np.array([16, 32, 64, 128, 256, 512, 1024])
    for form, y in [("a + b log n", 3 + 2 * np.log(n)), ("a + b (log n)^2", 1 + 0.5 * np.log(n) ** 2),
                    ("c n^alpha", 2 * n**0.6)]:
        fits = {f["form"]: f for f in ch03_saturation.fit_knee_scaling(n, y)}
        assert fits[form]["r2"] == pytest.approx(1.0)
        assert fits[form]["rms_log"] == pytest.approx(0.0, abs=1e-9)
        assert min(fits.values(), key=lambda f: f["rms_log"])["form"] == form
    assert ch03_saturation.log_slope_trend(n, 3 + 2 * np.log(n)) == pytest.approx(1.0)
    assert ch03_saturation.log_slope_trend(n, 2 * n**0.6) > 1.5


def test_knees_from_trials_with_bootstrap():
    rows = []
    for n in (16, 64):
        for d in (1, 2, 4, 8, 16):
            for t in range(5):
                rows.append({"n": n, "d_head": d, "trial": t, "rank": n * min(1.0, d / 8) + 0.01 * t})
    frame = pd.DataFrame(rows)
    knees = ch03_saturation.knees_from_trials(frame, "rank", {16: 16, 64: 64}, {"loose": 0.5}, bootstrap=10)
    # mean ratio d/8 + 0.02/n: crosses 0.5 between d = 2 (0.25) and d = 4 (0.5 + 0.02/n), log-interpolated
    for n, knee in zip(knees.n, knees.knee):
        share = (0.5 - (0.25 + 0.02 / n)) / (0.25)
        assert knee == pytest.approx(2 * 2**share, rel=1e-12)
    assert (knees.knee_low <= knees.knee).all() and (knees.knee <= knees.knee_high).all()
    assert (knees.status == "inside").all()
    # the plateau at the largest d_h ("last") is n + 0.02 here: the same crossing, a hair later
    last = ch03_saturation.knees_from_trials(frame, "rank", "last", {"loose": 0.5})
    assert (last.knee > knees.knee).all() and last.knee_low.isna().all()
    assert last.plateau.to_numpy() == pytest.approx([16.02, 64.02])


def test_knee_beyond_the_grid_is_nan_and_a_saturated_first_point_is_the_first_d():
    rows = [{"n": 16, "d_head": d, "trial": 0, "rank": r} for d, r in [(1, 2.0), (2, 4.0), (4, 8.0)]]
    knees = ch03_saturation.knees_from_trials(pd.DataFrame(rows), "rank", {16: 16}, {"loose": 0.9, "low": 0.1})
    loose, low = knees.set_index("definition").loc[["loose", "low"]].to_dict(orient="records")
    assert math.isnan(loose["knee"]) and loose["status"] == "not_reached"
    assert low["knee"] == 1.0 and low["status"] == "at_first"


GRID = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
N = np.array([16, 32, 64, 128, 256, 512, 1024], dtype=float)


def replicates_of(knees, spread, count=200, seed=0):
    """Bootstrap-like replicates: each knee times a log-normal factor of width `spread`, independent per n."""
    gen = np.random.default_rng(seed)
    return knees * np.exp(spread * gen.standard_normal((count, len(knees))))


@pytest.mark.parametrize("make_knees, expected, best", [
    (lambda n: 2.0 + 3.0 * np.log(n), "log", "a + b log n"),
    (lambda n: 1.0 + 0.5 * np.log(n) ** 2, "faster", "a + b (log n)^2"),
    (lambda n: 0.8 * n**0.6, "faster", "c n^alpha"),
])
def test_knee_verdict_names_the_form_the_knees_were_made_from(make_knees, expected, best):
    # tight replicates (0.1 % spread), knees far from any grid point's influence only through the form
    knees = make_knees(N)
    verdict = scaling.knee_verdict(N, knees, replicates_of(knees, 0.001), GRID)
    assert verdict.evidence["best_form"] == best
    assert verdict.outcome in (expected, "untestable")
    if verdict.outcome == "untestable":      # only a grid step may have undone it, and the sentence says which
        assert "moved from" in verdict.sentence and verdict.evidence["undecided_outcome"] == expected
    assert verdict.sentence.startswith(("the knee grows", "the knee is untestable", "the knee does not decide"))


def test_knee_verdict_is_decided_on_a_fine_grid_and_undecided_when_a_grid_step_flips_it():
    knees = 2.0 + 3.0 * np.log(N)                       # 10.3 to 22.8: between grid points 8 and 32
    fine = np.arange(1, 200)                            # every integer: one step moves a knee by under 1
    assert scaling.knee_verdict(N, knees, replicates_of(knees, 0.001), fine).outcome == "log"
    coarse = [1, 2, 4, 8, 16, 32, 64, 128]              # moving 22.8 to 16 or 32 changes the form
    verdict = scaling.knee_verdict(N, knees, replicates_of(knees, 0.001), coarse)
    assert verdict.outcome == "untestable" and "moved from" in verdict.sentence
    assert verdict.evidence["robustness"]["flips"]


def test_knee_verdict_is_untestable_when_the_bootstrap_cannot_tell_the_forms_apart():
    knees = 2.0 + 3.0 * np.log(N)
    verdict = scaling.knee_verdict(N, knees, replicates_of(knees, 0.3), np.arange(1, 200))
    assert verdict.outcome == "untestable" and verdict.sentence.startswith("the knee does not decide between log n and faster growth")
    assert len(verdict.evidence["indistinguishable"]) >= 2


def test_knee_verdict_needs_four_knees_and_drops_nan_knees():
    knees = np.array([3.0, 4.0, 5.0, np.nan, np.nan, np.nan, np.nan])
    verdict = scaling.knee_verdict(N, knees, replicates_of(np.nan_to_num(knees, nan=1.0), 0.01), GRID)
    assert verdict.outcome == "untestable" and "cannot be judged with 3 knees (a verdict needs 4)" in verdict.sentence
    with pytest.raises(ArgumentError, match="replicates"):
        scaling.knee_verdict(N, knees, np.ones((10, 3)), GRID)


def test_knee_outcome_reads_the_indistinguishable_set():
    def boot(together):
        return scaling.BootstrapForms({}, {}, {}, together[0], together, 10)
    assert scaling.knee_outcome(boot(("log",))) == "log"
    assert scaling.knee_outcome(boot(("log2",))) == "faster"
    assert scaling.knee_outcome(boot(("power", "log2"))) == "faster"
    assert scaling.knee_outcome(boot(("log", "log2"))) == "untestable"


def test_log_loss_bootstrap_recovers_the_replicates_by_hand():
    # the excess log loss of the log form over (log n)^2, recomputed per replicate with fit_forms, must match
    knees = 1.0 + 0.5 * np.log(N) ** 2
    reps = replicates_of(knees, 0.02, count=30)
    boot = scaling.bootstrap_forms(N, knees, reps, loss="log", forms=scaling.KNEE_FORMS, decide=scaling.KNEE_FORMS)
    by_hand = [scaling.fit_forms(N, r, "log", scaling.KNEE_FORMS)["log"].loss for r in reps]
    assert boot.loss_ci["log"] == pytest.approx(tuple(np.quantile(by_hand, [0.025, 0.975])), rel=1e-9)
