"""Chapter 3c's verdict rules on constructed tables (each outcome), and the mode defaults."""

import math

import pandas as pd
import pytest

from helpers import familywise, margin, parameters
from helpers.experiments import ch03c_margin_theory as chapter


def test_agreement_verdict_counts_cases_beyond_the_threshold():
    table = pd.DataFrame({"mc": [1.0, 2.0, 3.5], "exact": [1.0, 2.1, 3.0], "se": [0.1, 0.1, 0.1], "dof": 10**6})
    v = chapter.agreement_verdict(table, "the form")
    assert v.outcome == "misses" and v.evidence["failed"] == 1 and "2 of 3 cases" in v.sentence
    assert chapter.agreement_verdict(table.iloc[:2], "the form").outcome == "agrees"


def test_agreement_threshold_is_student_t_with_each_cases_degrees_of_freedom():
    """z = 4.5 of 3 cases: beyond the normal Bonferroni threshold (2.39), within Student's t with 3 dof (4.86)."""
    table = pd.DataFrame({"mc": [1.45, 1.0, 1.0], "exact": [1.0, 1.0, 1.0], "se": [0.1, 0.1, 0.1], "dof": 10**6})
    assert chapter.agreement_verdict(table, "the form").outcome == "misses"
    assert chapter.agreement_verdict(table.assign(dof=3), "the form").outcome == "agrees"
    v = chapter.agreement_verdict(table.assign(dof=3), "the form")
    assert v.evidence["threshold_at_largest"] == pytest.approx(familywise.threshold(3, two_sided=True, dof=3))


def test_cases_beyond_monte_carlos_reach_are_named_and_not_judged():
    table = pd.DataFrame({"mc": [1.0, 3.5], "exact": [1.0, 3.0], "se": [0.1, 0.1], "dof": 10**6,
                          "unseen": [0.001, chapter.UNSEEN_MAX]})
    v = chapter.agreement_verdict(table, "the form")
    assert v.outcome == "agrees" and v.evidence["beyond_reach"] == 1 and "1 of 1 case" in v.sentence
    assert "1 of 2 cases is beyond the reach" in v.sentence
    assert chapter.agreement_verdict(table.assign(unseen=0.5), "the form").outcome == "untestable"
    assert chapter.agreement_verdict(table.iloc[:0], "the form").outcome == "untestable"


@pytest.mark.parametrize("L, draws", [(2.0, 1000), (9.0, 1000), (25.0, 10**6)])
def test_unseen_share_at_three_dimensions_matches_the_closed_form(L, draws):
    """d = 3: u.v is uniform on (-1, 1), so the 1 - 1/N quantile is 1 - 2/N and the share has a closed form."""
    x = 1 - 2 / draws
    exact = (math.exp(L) - math.exp(L * x)) / (math.exp(L) - math.exp(-L))
    # quad is asked for 1.49e-8 relative (its default) on each of the two integrals: at most twice that on the ratio
    assert chapter.unseen_share(L, 3, draws) == pytest.approx(exact, rel=2 * 1.49e-8)


@pytest.mark.parametrize("L, draws", [(4.0, 1000), (16.0, 10**5)])
def test_unseen_share_at_two_dimensions_matches_an_integral_over_the_angle(L, draws):
    """d = 2: u.v = cos(theta), theta uniform on (0, pi): P(u.v > cos a) = a / pi, and the share is the integral of
    e^{L cos theta} over (0, a) against (0, pi), computed here over the angle, not over u.v as the book does."""
    from scipy import integrate

    a = math.pi / draws
    f = lambda th: math.exp(L * (math.cos(th) - 1))   # noqa: E731
    exact = integrate.quad(f, 0, a, epsabs=0, epsrel=1e-12)[0] / integrate.quad(f, 0, math.pi, epsabs=0,
                                                                               epsrel=1e-12)[0]
    # both sides ask quad for 1.49e-8 relative or better per integral; 1e-6 leaves room for the singular end at t = 1
    assert chapter.unseen_share(L, 2, draws) == pytest.approx(exact, rel=1e-6)


def test_unseen_share_grows_with_the_logit_scale_and_shrinks_with_the_draws():
    assert chapter.unseen_share(60.0, 5, 1000) > chapter.unseen_share(9.0, 5, 1000)
    assert chapter.unseen_share(16.0, 5, 10**6) < chapter.unseen_share(16.0, 5, 1000)
    assert chapter.unseen_share(16.0, 1, 10) == 0.0


def test_codes_for_draws_at_least_the_pairs_asked_for():
    assert chapter.codes_for(16, 8, 10**6) == math.ceil(10**6 / 240)
    assert chapter.codes_for(256, 8, 10**6) == 16 and chapter.codes_for(256, 20, 10**6) == 20


def codes_table(d_stars, pattern="permutation", n=64, L=16.0):
    return pd.DataFrame({"n": n, "L": L, "pattern": pattern, "k": 1, "seed": range(len(d_stars)), "d_star": d_stars,
                         "d_rand": margin.random_code_dim(n, L), "d_lower": margin.rank_lower_bound(n, L)})


def test_bounds_verdict_checks_both_bounds_and_leaves_tied_codes_out():
    upper = math.ceil(margin.random_code_dim(64, 16.0))
    assert chapter.bounds_verdict(codes_table([upper - 1, upper])).outcome == "holds"
    assert chapter.bounds_verdict(codes_table([upper + 1, upper])).outcome == "fails"
    both = pd.concat([codes_table([upper - 1]), codes_table([upper + 10], pattern="tied")])
    assert chapter.bounds_verdict(both).outcome == "holds"


def test_summary_table_writes_ranges_one_way():
    """A cell of the codes table: the seeds' d* range and the two bounds, both as "a to b" (a dash for one of them and
    "to" for the other read as two kinds of range)."""
    codes = codes_table([8.0, 9.0, 8.0]).assign(series="L = 16")
    upper = math.ceil(margin.random_code_dim(64, 16.0))
    lower = margin.rank_lower_bound(64, 16.0)
    assert chapter.summary_table(codes).loc[64, "L = 16"] == f"8 to 9 ({lower:g} to {upper})"
    assert chapter.summary_table(codes.assign(d_star=8.0)).loc[64, "L = 16"] == f"8 ({lower:g} to {upper})"


def test_convergence_and_divergence_verdicts():
    checks = pd.DataFrame({"mass_at": [0.95, 0.91], "mass_below": [0.85, 0.92]})
    assert chapter.convergence_verdict(checks, 0.1).outcome == "unstable"
    assert chapter.convergence_verdict(checks.iloc[:1], 0.1).outcome == "stable"
    cut = margin.divergence_n(9.0)
    rows = pd.concat([codes_table([5.0], n=64, L=9.0), codes_table([math.nan], n=int(cut) + 100, L=9.0)])
    v = chapter.divergence_verdict(rows, 9.0, 0.1, 64)
    assert v.outcome == "diverges" and "below it 1 of 1 search reaches it" in v.sentence
    beyond = chapter.divergence_verdict(rows[rows.n > cut], 9.0, 0.1, 64)
    assert beyond.outcome == "diverges" and beyond.sentence.endswith("the grid has no n below it")
    rows.loc[rows.n > cut, "d_star"] = 40.0
    assert chapter.divergence_verdict(rows, 9.0, 0.1, 64).outcome == "reaches"
    assert chapter.divergence_verdict(rows[rows.n < cut], 9.0, 0.1, 64).outcome == "untestable"


def _params(**overrides):
    return parameters.Params(**{**dict(MODE="quick", SEED=0, SEEDS=[0, 1, 2], N_VALUES=None, L_VALUES=[9.0],
                                       EPS=0.1, LOG_C=2.0, STEPS=None, D_MAX=None, PATTERN_N=None,
                                       MGF_SAMPLES=None, CODES=None, SCHEDULER=None), **overrides})


def test_resolve_fills_the_mode_defaults():
    P = chapter.resolve(_params())
    assert P.N_VALUES == [16, 64, 256] and P.STEPS == 150 and P.D_MAX == 32
    assert P.SCHEDULER is None                                              # quick: in-process
    assert chapter.resolve(_params(MODE="full")).SCHEDULER == "processes"   # full: one worker per core
    assert chapter.resolve(_params(MODE="full", SCHEDULER="local")).SCHEDULER == "local"


def test_the_optimiser_sweeps_run_on_the_chosen_scheduler(monkeypatch):
    """The optimised codes and their doubled-steps check go to `P.SCHEDULER` (a process pool in full mode: in the
    notebook's process torch would run the small products on two threads that wait on each other)."""
    sent = {}
    real = chapter.run_sweep

    def spy(name, point, configs, seeds, **options):
        sent[name] = options.get("executor")
        return real(name, point, configs, seeds, **{**options, "executor": None})

    monkeypatch.setattr(chapter, "run_sweep", spy)
    P = chapter.resolve(_params(N_VALUES=[16, 32, 64], L_VALUES=[9.0], STEPS=50, D_MAX=8, PATTERN_N=[16],
                                MGF_SAMPLES=10000, CODES=2, SCHEDULER="local"))
    chapter._codes(P, chapter.ChapterResult())
    assert sent == {"ch3c_codes": "local", "ch3c_convergence": "local"}


def test_random_code_verdicts_are_untestable_without_a_case():
    empty = pd.DataFrame(columns=["n", "L", "codes", "ratio", "ratio_se", "formula_ratio", "mass", "mass_se",
                                  "unseen"])
    ratio, mass = chapter.random_code_verdicts(empty, 0.1, [1.0])
    assert ratio.outcome == mass.outcome == "untestable" and "beyond the divergence point" in mass.sentence
    one = pd.DataFrame({"n": [16], "L": [9.0], "codes": [8], "ratio": [0.1], "ratio_se": [0.01],
                        "formula_ratio": [0.1], "mass": [0.85], "mass_se": [0.01], "unseen": [0.0]})
    ratio, mass = chapter.random_code_verdicts(one, 0.1, [9.0])
    assert ratio.outcome == "agrees" and mass.outcome == "fails"
