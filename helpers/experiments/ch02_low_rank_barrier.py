"""Chapter 2 (the low-rank barrier): the bound's formulas against Monte Carlo, and the verdicts they support.

The grid points (hardmax ranks under four models of the rows' choices, the equivalence check, key wins by norm)
live in `ch02_low_rank_barrier_points`, so that edits here keep the cached sweeps. `analyse(P)` runs the sweeps
and returns the chapter's `ChapterResult`: frames for the metrics file, the numbers the prose quotes, and the
verdicts (formulas against simulation, the attention models against the bound, the two constructions of the
orthonormal model, the concentration band) with the rule and the numbers each rests on.
"""

import math

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp
from scipy.stats import norm as normal_dist

from .. import english, familywise, theory
from ..results import ChapterResult, Verdict
from . import run_sweep
from .ch02_low_rank_barrier_points import (MODELS, TRIALS_REFERENCE_N, barrier_point, equivalence_point,  # noqa: F401
                                           gaussian_input_logits, hardmax_ranks, win_by_norm_point)

DEFAULTS = {"N_VALUES": ([8, 32, 128, 512], [8, 16, 32, 64, 128, 256, 512, 1024]),
            "D_HEADS": ([16, 256], [16, 128, 1024]), "TRIALS": (8, 16)}       # (quick, full)
ATTENTION_MODELS = (("orthonormal", "orthonormal inputs"), ("gaussian", "Gaussian inputs"),
                    ("sphere_keys", "unit-sphere keys"))
UNIFORM_TRIALS_FACTOR = 16     # the uniform model costs nothing: 16 times the matrices
EQUIVALENCE_N = 64             # the largest n of the equivalence check (capped by the grid)
EQUIVALENCE_TRIALS_FACTOR = 4
WIN_N, WIN_QUERIES_PER_KEY, WIN_DRAWS = 256, 64, 4
CI_Z = 1.96                    # 95 % normal intervals for a mean


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved); lists sorted."""
    return P.fill_mode_defaults(DEFAULTS)


# ------------------------------------------------------------------------------------------------ verdict rules
FAMILYWISE_ALPHA = familywise.ALPHA   # family-wise error rate of the Bonferroni thresholds
EQUIVALENCE_Z, EQUIVALENCE_P = 3.0, 0.01   # the two constructions agree: |diff| <= 3 s.e. and KS p >= 0.01


def formulas_verdict(mean_z, variance_z, alpha: float = FAMILYWISE_ALPHA) -> Verdict:
    """Do the simulated means and variances of the uniform model match their exact formulas?

    "hold" when every |z| is within the two-sided Bonferroni threshold for all the comparisons, else "off".
    """
    z = np.abs(np.concatenate([np.asarray(mean_z, dtype=float), np.asarray(variance_z, dtype=float)]))
    threshold, worst = familywise.threshold(z.size, alpha, two_sided=True), float(z.max())
    hold = worst <= threshold
    tail = (f"the largest deviation of a simulated mean or variance from its formula is "
            f"{english.plural(worst, 'standard error', digits=2)}, {'within' if hold else 'beyond'} the "
            f"{english.percent(alpha)} family-wise threshold of {english.number(threshold, 2)} standard errors for "
            f"{english.plural(z.size, 'comparison')}")
    sentence = f"the formulas hold: {tail}" if hold else f"the simulation departs from the formulas: {tail}"
    return Verdict("hold" if hold else "off", sentence,
                   rule=f"hold when every |z| <= the two-sided Bonferroni threshold at family-wise level {alpha:g}",
                   evidence={"comparisons": int(z.size), "max_abs_z": worst, "threshold": threshold})


def excess_verdict(excess_z, alpha: float = FAMILYWISE_ALPHA) -> Verdict:
    """Are the attention models' mean ranks below the bound? "below" when no point's excess over the bound (in
    standard errors) passes the one-sided Bonferroni threshold for all the points, else "above"."""
    z = np.asarray(excess_z, dtype=float)
    threshold, worst = familywise.threshold(z.size, alpha), float(z.max())
    above = int((z > threshold).sum())
    closest = english.signed(worst, "standard error", above="above", below="below")
    where = "exactly at it" if closest == "exactly at" else f"{closest} it"
    if above == 0:
        sentence = (f"no point lies significantly above the bound: the highest is {where}, "
                    f"under the {english.percent(alpha)} family-wise threshold of {english.number(threshold, 3)} "
                    f"standard errors for {english.plural(z.size, 'comparison')}")
    else:
        sentence = (f"{english.count_of(above, z.size, 'point')} lie significantly above the bound: the highest is "
                    f"{where}, beyond the {english.percent(alpha)} family-wise threshold of "
                    f"{english.number(threshold, 3)} standard errors")
    return Verdict("below" if above == 0 else "above", sentence,
                   rule=f"a point is above when (mean - bound) / s.e. exceeds the one-sided Bonferroni threshold at "
                        f"family-wise level {alpha:g}",
                   evidence={"points": int(z.size), "above": above, "max_z": worst, "threshold": threshold})


def equivalence_verdict(n: int, diff: float, se: float, ks_p: float) -> Verdict:
    """Do the explicit construction (orthonormal X, Gaussian W) and direct Gaussian sampling agree?"""
    agree = abs(diff) <= EQUIVALENCE_Z * se and ks_p >= EQUIVALENCE_P
    numbers = (f"at n = {n} their mean ranks differ by {english.number(abs(diff), 2)} (standard error "
               f"{english.number(se, 2)}) and a two-sample Kolmogorov–Smirnov test gives p = {english.number(ks_p, 2)}")
    sentence = (f"The two constructions agree: {numbers}." if agree else
                f"The two constructions disagree: {numbers}.")
    return Verdict("agree" if agree else "disagree", sentence,
                   rule=f"agree when |difference of means| <= {EQUIVALENCE_Z:g} s.e. and the KS p-value >= "
                        f"{EQUIVALENCE_P:g}",
                   evidence={"n": int(n), "diff": float(diff), "se": float(se), "ks_p": float(ks_p)})


def concentration_verdict(coverage: float, delta: float) -> Verdict:
    """Does the McDiarmid band hold at least 1 - delta of the single matrices, as it promises?"""
    covers = coverage >= 1 - delta
    sentence = (f"{english.percent(coverage, 3)} of the matrices are, {'at least' if covers else 'fewer than'} the "
                f"promised {english.percent(1 - delta, 3)}")
    return Verdict("covers" if covers else "misses", sentence,
                   rule="covers when the empirical share within the band is >= 1 - delta",
                   evidence={"coverage": float(coverage), "delta": float(delta)})


# ------------------------------------------------------------------------------------------------ the chapter
def summarise(df: pd.DataFrame, bound_of_n) -> pd.DataFrame:
    """Per (model, n, d_head): mean rank / n with a 95% normal CI, variance with its standard error, ratio to bound."""
    rows = []
    for (model, n, d_head), part in df.groupby(["model", "n", "d_head"]):
        r = part["rank"].to_numpy()
        t = r.size
        mean, var = r.mean(), r.var(ddof=1)
        se = np.sqrt(var / t)
        m4 = np.mean((r - mean) ** 4)
        var_se = np.sqrt(max(m4 - var**2 * (t - 3) / (t - 1), 0.0) / t)
        bound = bound_of_n(n)
        rows.append({"model": model, "n": int(n), "d_head": int(d_head), "trials": int(t),
                     "mean_rank": mean, "ci_low": mean - CI_Z * se, "ci_high": mean + CI_Z * se,
                     "rank_over_n": mean / n, "ci_low_over_n": (mean - CI_Z * se) / n,
                     "ci_high_over_n": (mean + CI_Z * se) / n, "bound": bound, "bound_over_n": bound / n,
                     "ratio_to_bound": mean / bound, "variance": var, "variance_se": var_se})
    return pd.DataFrame(rows)


def z_of_mean(frame: pd.DataFrame) -> pd.Series:
    """(mean rank - bound) / standard error, the standard error read back from the 95 % interval."""
    return (frame.mean_rank - frame.bound) / ((frame.ci_high - frame.ci_low) / (2 * CI_Z))


def analyse(P) -> ChapterResult:
    """Run the chapter's sweeps for resolved parameters `P` and return its frames, quotes and verdicts."""
    result = ChapterResult()
    result.quote("ch2_n_min", min(P.N_VALUES), "d")
    result.quote("ch2_n_max", max(P.N_VALUES), "d")
    result.quote("ch2_d_list", english.join(P.D_HEADS))
    result.quote("ch2_trials", P.TRIALS, "d")
    _formulas(P, result)
    _equivalence(P, result)
    _barrier(P, result)
    _wins(P, result)
    _concentration(P, result)
    return result.done()


def _formulas(P, result) -> None:
    """The closed forms the prose quotes (the derivation itself is shown in the notebook)."""
    bound, variance = theory.sym_uniform_bound(), theory.sym_variance()
    result.quote("ch2_limit_fraction", float(bound["limit"]), ".4f")
    result.quote("ch2_gap_limit", float(bound["gap_limit"]), ".3f")
    result.quote("ch2_var_limit", float(variance["per_n_limit"]), ".4f")
    for name, n in (("nmin", min(P.N_VALUES)), ("nmax", max(P.N_VALUES))):
        result.quote(f"ch2_bound_frac_{name}", theory.expected_hardmax_rank(n) / n, ".4f")
    result.frames["enumeration_difference_n3"] = str(theory.sym_expected_rank_enumeration(3)["difference"])


def _equivalence(P, result) -> None:
    n = min(EQUIVALENCE_N, max(P.N_VALUES))
    eq = run_sweep("ch2_equivalence", equivalence_point,
                   [{"n": n, "d_head": min(P.D_HEADS), "trials": EQUIVALENCE_TRIALS_FACTOR * P.TRIALS}],
                   seeds=[P.SEED], progress=False)
    by = eq.groupby("construction")["rank"]
    table = by.agg(["count", "mean", "std"])
    table["ci95"] = CI_Z * table["std"] / np.sqrt(table["count"])
    diff = float(table["mean"].diff().iloc[-1])
    se = float(np.sqrt((table["std"] ** 2 / table["count"]).sum()))
    ks_p = float(ks_2samp(*[g.to_numpy() for _, g in by]).pvalue)
    result.frames["equivalence"] = table.reset_index()
    result.data["equivalence"] = table
    result.quote("ch2_eq_n", n, "d")
    result.quote("ch2_eq_diff", diff, ".2f")
    result.quote("ch2_eq_se", se, ".2f")
    result.quote("ch2_eq_ks_p", ks_p, ".2f")
    result.verdict("ch2_eq_verdict", equivalence_verdict(n, diff, se, ks_p))


def barrier_verdict(consistent: int, points: int) -> Verdict:
    """The paper's barrier in its own setting (hardmax, orthonormal inputs, Gaussian W_q, W_k): "holds" when every
    (n, d_h) point's 95 % interval reaches down to the exact bound B(n), "fails" otherwise, "untestable" without
    points."""
    rule = "every orthonormal-input point's 95 % interval over trials reaches down to the exact bound B(n)"
    if points == 0:
        return Verdict("untestable", "no orthonormal-input points in this run", rule, {"points": 0})
    sentence = (f"{english.count_of(consistent, points, '(n, dₕ) point')} of orthonormal inputs have a 95 % interval "
                "reaching down to the exact bound B(n)")
    return Verdict("holds" if consistent == points else "fails", sentence, rule,
                   {"consistent": consistent, "points": points})


def _barrier(P, result) -> None:
    configs = [{"model": "uniform", "n": n, "d_head": 0, "trials": UNIFORM_TRIALS_FACTOR * P.TRIALS}
               for n in P.N_VALUES]
    configs += [{"model": m, "n": n, "d_head": d, "trials": P.TRIALS}
                for m, _ in ATTENTION_MODELS for n in P.N_VALUES for d in P.D_HEADS]
    raw = run_sweep("ch2_barrier", barrier_point, configs, seeds=[P.SEED], progress=False)
    summary = summarise(raw, theory.expected_hardmax_rank)
    summary["exact_variance"] = [theory.hardmax_rank_variance(int(n)) for n in summary.n]
    uniform = summary[summary.model == "uniform"].set_index("n")
    uniform_z = z_of_mean(uniform)
    var_z = (uniform.variance - uniform.exact_variance) / uniform.variance_se
    result.data.update(raw=raw, summary=summary, uniform=uniform)
    result.frames["summary"] = summary
    result.frames["uniform_mean_z"] = {int(n): float(z) for n, z in uniform_z.items()}
    result.frames["uniform_variance_z"] = {int(n): float(z) for n, z in var_z.items()}
    result.frames["mc_rank_over_n_vs_bound"] = summary[["model", "n", "d_head", "rank_over_n", "ci_low_over_n",
                                                        "ci_high_over_n", "bound_over_n"]].rename(
        columns={"rank_over_n": "mc_rank_over_n"})
    ortho = summary[summary.model == "orthonormal"]
    result.verdict("ch2_barrier_verdict", barrier_verdict(int((ortho.ci_low <= ortho.bound).sum()), len(ortho)))
    inside = int(((uniform.ci_low <= uniform.bound) & (uniform.bound <= uniform.ci_high)).sum())
    result.quote("ch2_uniform_inside", inside, "d")
    result.quote("ch2_n_count", len(P.N_VALUES), "d")
    result.quote("ch2_uniform_factor", UNIFORM_TRIALS_FACTOR, "d")
    result.quote("ch2_uniform_max_absz", float(uniform_z.abs().max()), ".2f")
    result.quote("ch2_var_max_absz", float(var_z.abs().max()), ".2f")
    result.verdict("ch2_formulas", formulas_verdict(uniform_z, var_z))

    models = summary[summary.model != "uniform"]
    excess = z_of_mean(models)
    result.frames["ch2_models_max_z"] = float(excess.max())
    result.quote("ch2_points_total", len(models), "d")
    result.quote("ch2_points_consistent", int((models.ci_low <= models.bound).sum()), "d")
    result.verdict("ch2_excess_verdict", excess_verdict(excess))
    at_max = summary[summary.n == max(P.N_VALUES)].set_index(["model", "d_head"])
    result.quote("ch2_d_min", min(P.D_HEADS), "d")
    result.quote("ch2_d_max", max(P.D_HEADS), "d")
    for model, key in (("orthonormal", "ortho"), ("gaussian", "gauss"), ("sphere_keys", "sphere")):
        for end, d in (("dmin", min(P.D_HEADS)), ("dmax", max(P.D_HEADS))):
            result.quote(f"ch2_{key}_ratio_{end}", float(at_max.loc[(model, d), "ratio_to_bound"]), ".3f")


def _wins(P, result) -> None:
    n, d = min(WIN_N, max(P.N_VALUES)), min(P.D_HEADS)
    wins = run_sweep("ch2_win_by_norm", win_by_norm_point,
                     [{"n": n, "d_head": d, "queries_per_key": WIN_QUERIES_PER_KEY, "draws": WIN_DRAWS}],
                     seeds=[P.SEED], progress=False)
    t2 = theory.gaussian_max_level(n) ** 2
    sigma = theory.chi_relative_std(d)
    rho = np.linspace(wins.rel_norm.min(), wins.rel_norm.max(), 100)
    # the lognormal prediction of chapter 03: a key a factor rho of the mean norm wins exp(t_n^2 (rho - 1)) more
    result.data.update(wins=wins, win_curve=pd.DataFrame({"rel_norm": rho,
                                                          "win_share": np.exp(t2 * (rho - 1) - (t2 * sigma) ** 2 / 2)}))
    result.quote("ch2_win_n", n, "d")
    result.quote("ch2_win_d", d, "d")
    result.quote("ch2_win_corr", float(np.corrcoef(wins.rel_norm, wins.win_share)[0, 1]), ".2f")
    result.quote("ch2_win_top_decile", float(wins[wins.rel_norm >= wins.rel_norm.quantile(0.9)].win_share.mean()), ".2f")
    result.quote("ch2_win_bottom_decile", float(wins[wins.rel_norm <= wins.rel_norm.quantile(0.1)].win_share.mean()),
                 digits=2)   # significant digits: a small share must not print as "0.00"
    result.quote("ch2_t2", t2, ".2f")


def _concentration(P, result) -> None:
    n = max(P.N_VALUES)
    raw = result.data["raw"]
    ranks = raw[(raw.model == "uniform") & (raw.n == n)]["rank"].to_numpy()
    mean, var = theory.expected_hardmax_rank(n), theory.hardmax_rank_variance(n)
    halfwidths = {"McDiarmid": theory.mcdiarmid_halfwidth(n, P.DELTA), "Chebyshev": math.sqrt(var / P.DELTA),
                  "normal approximation": float(normal_dist.isf(P.DELTA / 2)) * math.sqrt(var)}
    coverage = pd.DataFrame([{"band": k, "half-width": v, "half-width / n": v / n,
                              "coverage": float(np.mean(np.abs(ranks - mean) <= v))} for k, v in halfwidths.items()])
    result.frames["concentration"] = coverage
    result.data["concentration"] = coverage.set_index("band")
    mcd = float(coverage.coverage[0])
    result.quote("ch2_delta", P.DELTA, "g")
    result.quote("ch2_conc_n", n, "d")
    result.quote("ch2_conc_trials", int(ranks.size), "d")
    result.quote("ch2_mcd_width", halfwidths["McDiarmid"] / n, ".3f")
    result.quote("ch2_mcd_cov", 100 * mcd, ".1f")
    result.quote("ch2_sd_over_n", math.sqrt(var) / n, ".4f")
    result.quote("ch2_mcd_over_sd", halfwidths["McDiarmid"] / math.sqrt(var), ".1f")
    result.verdict("ch2_conc_verdict", concentration_verdict(mcd, P.DELTA))
