"""Chapter 3c's verdict rules on constructed tables (each outcome), and the mode defaults."""

import math

import pandas as pd
import pytest

from helpers import margin, parameters
from helpers.experiments import ch03c_margin_theory as chapter


def test_agreement_verdict_counts_cases_beyond_the_threshold():
    table = pd.DataFrame({"mc": [1.0, 2.0, 3.5], "exact": [1.0, 2.1, 3.0], "se": [0.1, 0.1, 0.1]})
    v = chapter.agreement_verdict(table, "the form")
    assert v.outcome == "misses" and v.evidence["failed"] == 1 and "2 of 3 cases" in v.sentence
    assert chapter.agreement_verdict(table.iloc[:2], "the form").outcome == "agrees"


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
    assert chapter.divergence_verdict(rows, 9.0, 0.1, 64).outcome == "diverges"
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
