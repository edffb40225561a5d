"""Chapter 3b (predicting the rank): the identity E[rank | K] = sum_j 1 - (1 - g_j)^n, keys on the sphere,
and a predictor of E[hardmax rank] / n checked against Monte Carlo over a grid of (n, d_h).

Random heads: queries i.i.d. N(0, I_{d_h}), independent of the keys; keys i.i.d. N(0, I_{d_h}) ("gaussian")
or uniform on the unit sphere ("sphere"). Every rank here is the hardmax rank (distinct argmax columns).

`resolve(P)` fills the mode defaults; `analyse(P)` runs everything the chapter shows and returns a
`ChapterResult`: tidy frames, the numbers the prose quotes and the verdicts as data, with sentences written
by the verdict functions below.
"""

import math
import time

import numpy as np
import pandas as pd

from .. import parameters, saturation, scaling, seeding, theory
from ..english import join, number, span
from ..hardmax_sampling import KEY_KINDS, hardmax_point
from ..results import ChapterResult, Verdict
from . import run_sweep
from .ch03b_predicting_rank_points import identity_point

BRIDGE_CANDIDATES = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, math.inf)  # exponents q of the blend weight pi^q


# ------------------------------------------------------------------------------------------------
# Monte Carlo grid (the sampling itself is in helpers.hardmax_sampling, so predictor edits keep it cached)
# ------------------------------------------------------------------------------------------------


def grid_mc(name: str, n_values, d_values, keys_kinds, trials: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (keys, n, d_head): mean hardmax rank / n, its standard error and heads; and the per-head rows.

    `trials` heads at n = 64, scaled like 1/n (the same query rows per point), at least 4 (`seeding.trials_for`).
    """
    configs = [{"n": int(n), "d_head": int(d), "keys": k, "trials": seeding.trials_for(int(n), trials)}
               for k in keys_kinds for n in n_values for d in d_values]
    raw = run_sweep(name, hardmax_point, configs, seeds=[seed])
    raw["fraction"] = raw["rank"] / raw["n"]
    out = raw.groupby(["keys", "n", "d_head"]).agg(mc=("fraction", "mean"), sd=("fraction", "std"),
                                                   trials=("fraction", "size"),
                                                   fallback_rows=("fallback_rows", "sum")).reset_index()
    out["se"] = out["sd"] / np.sqrt(out["trials"])
    return out, raw


# ------------------------------------------------------------------------------------------------
# Knees (saturation points: the plateau as reference, level 1 - eps) and fits
# ------------------------------------------------------------------------------------------------

FIT_FORMS = tuple(scaling.KNEE_LABELS.values())


def measured_knees(raw: pd.DataFrame, eps_values, bootstrap: int, seed: int) -> pd.DataFrame:
    """Knee d*(n, eps) of the Monte Carlo curves: `saturation.bootstrap_saturation` with the exact plateau
    1 - (1 - 1/n)^n as reference and level 1 - eps, interpolated in log d_h, heads resampled at every d_h. The
    column `replicates` holds the knee of every resample (for `scaling.knee_verdict`)."""
    rows = []
    for (keys, n), part in raw.groupby(["keys", "n"]):
        groups = {d: g["fraction"].to_numpy() for d, g in part.groupby("d_head")}
        ds = sorted(groups)
        plateau = theory.plateau_fraction(int(n))
        for eps in eps_values:
            found = saturation.bootstrap_saturation(ds, [groups[d] for d in ds], resamples=max(bootstrap, 1),
                                                    seed=seed, reference=plateau, level=1 - eps)
            has_interval = bootstrap > 0
            rows.append({"keys": keys, "n": int(n), "eps": eps, "knee": found.point.value, "status": found.point.status,
                         "knee_low": found.low if has_interval else math.nan,
                         "knee_high": found.high if has_interval else math.nan, "replicates": found.values})
    return pd.DataFrame(rows)


def fit_forms(n_values, knees) -> list[dict]:
    """Fit a + b log n, a + b (log n)^2 and c n^alpha to knee(n) with one loss for all, the RMS of log(knee / fit):
    the book's one fit (`scaling.knee_fits`); NaN knees are left out."""
    return scaling.knee_fits(n_values, knees)


def effective_exponent(n_values, d_values) -> float:
    """Slope of log d* against log n (least squares): the power of n that d* looks like over this range."""
    n = np.asarray(n_values, dtype=float)
    d = np.asarray(d_values, dtype=float)
    ok = np.isfinite(d) & (d > 0)
    return float(np.polyfit(np.log(n[ok]), np.log(d[ok]), 1)[0]) if ok.sum() >= 2 else float("nan")


# ------------------------------------------------------------------------------------------------
# Verdict rules: outcomes from data, sentences in plain English
# ------------------------------------------------------------------------------------------------

IDENTITY_Z = 3.0  # |measured - predicted| / combined standard error below this counts as agreement
FLAT_RATIO = 1.5  # sphere knees count as flat when the largest-n knee is below this multiple of the smallest-n knee


def identity_verdict(table: pd.DataFrame, z_max: float = IDENTITY_Z) -> Verdict:
    """"agrees" when every case is within z_max combined standard errors, else "misses".

    `table` has columns measured, predicted and combined_se (the standard error of the measured mean under
    the identity's own variance, plus the error of the estimated g_j).
    """
    z = (table["measured"] - table["predicted"]).abs() / table["combined_se"]
    worst, cases, bad = float(z.max()), len(table), int((z >= z_max).sum())
    if bad == 0:
        sentence = (f"the predicted E[rank | K] agrees with the measured mean in all {cases} cases "
                    f"(largest deviation {number(worst, 2)} standard errors; threshold {number(z_max)})")
    else:
        sentence = (f"the predicted E[rank | K] misses the measured mean in {bad} of {cases} cases "
                    f"(largest deviation {number(worst, 2)} standard errors; threshold {number(z_max)})")
    return Verdict("agrees" if bad == 0 else "misses", sentence, f"every |z| < {z_max:g}",
                   {"largest_z": worst, "cases": cases, "failed": bad, "threshold": z_max})


def accuracy_verdict(errors: pd.DataFrame, goal: float, family: str, where: str = "held-out grid points") -> Verdict:
    """"meets" when the largest absolute error on the held-out grid is <= goal, else "misses".

    `errors` has columns n, d_head, error (predicted - measured, in rank / n).
    """
    i = errors["error"].abs().idxmax()
    worst, n, d = float(abs(errors.loc[i, "error"])), int(errors.loc[i, "n"]), int(errors.loc[i, "d_head"])
    side = "above" if errors.loc[i, "error"] > 0 else "below"
    met = worst <= goal
    sentence = (f"for {family} keys the largest error over the {len(errors)} {where} is "
                f"{worst:.3f} in rank / n (the prediction is {side} the measurement at n = {n} and head dimension {d}), "
                + ("within" if met else "above") + f" the goal of {number(goal)}")
    return Verdict("meets" if met else "misses", sentence, f"max |error| <= {goal:g}",
                   {"max_error": worst, "n": n, "d_head": d, "points": len(errors), "goal": goal})


NOISE_Z = 3.0           # a point further than this many standard errors from its Monte Carlo value is no noise
NOISE_SHARE = 0.01      # pure noise puts 0.27 % of points beyond 3 standard errors; above 1 % the errors are systematic


def noise_verdict(errors: pd.DataFrame, family: str) -> Verdict:
    """Are the predictor's errors Monte Carlo noise? "systematic" when more than NOISE_SHARE of the points (and at
    least 2) lie further than NOISE_Z standard errors from their Monte Carlo value, else "noise". `errors` has
    columns n, d_head, error, se."""
    spread = errors[errors["se"] > 0]      # a point whose heads all gave one rank has no standard error to use
    z = (spread["error"] / spread["se"]).abs()
    beyond = int((z > NOISE_Z).sum())
    i = z.idxmax()
    expected = len(spread) * 2 * (1 - 0.5 * (1 + math.erf(NOISE_Z / math.sqrt(2))))
    systematic = beyond >= 2 and beyond > NOISE_SHARE * len(spread)
    sentence = (f"for {family} keys {beyond} of the {len(spread)} points with a Monte Carlo spread "
                f"{'lies' if beyond == 1 else 'lie'} more than {number(NOISE_Z)} standard "
                f"errors from their Monte Carlo value, where Monte Carlo noise alone would put about "
                f"{number(expected, 1)}; the largest deviation is {number(float(z.max()), 2)} standard errors, at "
                f"n = {int(spread.loc[i, 'n'])} and head dimension {int(spread.loc[i, 'd_head'])}: "
                + ("the predictor's errors are systematic, a bias of the approximation and not noise" if systematic
                   else "the errors are consistent with Monte Carlo noise"))
    return Verdict("systematic" if systematic else "noise", sentence,
                   f"systematic when more than {100 * NOISE_SHARE:g} % of the points lie beyond {NOISE_Z:g} standard errors",
                   {"beyond": beyond, "points": len(spread), "expected": expected, "largest_z": float(z.max()),
                    "n": int(spread.loc[i, "n"]), "d_head": int(spread.loc[i, "d_head"])})


def accuracy_text(gaussian: Verdict, sphere: Verdict) -> str:
    """The two families' accuracy verdicts in one sentence, the shared words said once."""
    g, s = gaussian.evidence, sphere.evidence

    def worst(e):
        return f"{e['max_error']:.3f} (at n = {e['n']}, head dimension {e['d_head']})"
    met = [name for name, v in (("Gaussian", gaussian), ("unit-sphere", sphere)) if v.outcome == "meets"]
    verdict = ("both within it" if len(met) == 2 else f"only {met[0]} keys within it" if met else "neither within it")
    return (f"the largest error in rank / n over the {g['points']} held-out grid points is {worst(g)} for Gaussian keys "
            f"and {worst(s)} for unit-sphere keys, against a goal of {number(g['goal'])}: {verdict}")


def noise_text(gaussian: Verdict, sphere: Verdict) -> str:
    """The two families' noise verdicts in one sentence, the shared words said once."""
    g, s = gaussian.evidence, sphere.evidence

    def reading(v):
        return "systematic, a bias of the approximation" if v.outcome == "systematic" else "consistent with noise"

    def count(name, e):
        return (f"for {name} keys {e['beyond']} {'lies' if e['beyond'] == 1 else 'lie'} beyond, the largest at "
                f"{number(e['largest_z'], 2)} standard errors")

    def where(e):
        return f"n = {e['n']}, head dimension {e['d_head']}"

    lead = (f"of the {g['points']} points with a Monte Carlo spread, noise alone would put about "
            f"{number(g['expected'], 1)} more than {number(NOISE_Z)} standard errors from their Monte Carlo value; ")
    if where(g) == where(s) and reading(gaussian) == reading(sphere):   # one place and one reading: say them once
        return f"{lead}{count('Gaussian', g)}, and {count('unit-sphere', s)}, both at {where(g)}: both {reading(gaussian)}"
    return (f"{lead}{count('Gaussian', g)} ({where(g)}): {reading(gaussian)}; "
            f"{count('unit-sphere', s)} ({where(s)}): {reading(sphere)}")


def flat_knee_verdict(knees: pd.DataFrame, ratio_max: float = FLAT_RATIO) -> Verdict:
    """"flat" when the knee at the largest n is below ratio_max times the knee at the smallest n, else "grows";
    "undetermined" with fewer than two knees. `knees` has columns n, knee for one key family and one eps."""
    part = knees.dropna(subset=["knee"]).sort_values("n")
    rule = f"knee(n_max) / knee(n_min) < {ratio_max:g}"
    if len(part) < 2:
        return Verdict("undetermined", "the knee cannot be judged (fewer than two knees on the grid)", rule,
                       {"knees": len(part)})
    first, last = part.iloc[0], part.iloc[-1]
    ratio = float(last.knee / first.knee)
    flat = ratio < ratio_max
    sentence = (f"the knee goes from {number(first.knee, 2)} at n = {int(first.n)} to {number(last.knee, 2)} at "
                f"n = {int(last.n)} (a factor {number(ratio, 3)}), so it "
                + ("does not grow with n" if flat else "grows with n") + f" (threshold: a factor {number(ratio_max)})")
    return Verdict("flat" if flat else "grows", sentence, rule,
                   {"ratio": ratio, "n_min": int(first.n), "n_max": int(last.n), "threshold": ratio_max})


def predicted_growth_verdict(exponent: float, n_low: float, n_high: float) -> Verdict:
    """The predicted critical d_h's effective power of n: "grows" when > 0, else "flat". (How the *measured* knees
    grow is the book's one knee verdict, `scaling.knee_verdict`.)"""
    sentence = (f"over n from {round(n_low):,} to {round(n_high):,} the predicted critical head dimension grows like "
                f"n to the power {number(exponent, 2)}")
    return Verdict("grows" if exponent > 0 else "flat", sentence, "slope of log d* against log n",
                   {"exponent": exponent, "n_low": n_low, "n_high": n_high})


# ------------------------------------------------------------------------------------------------
# The chapter
# ------------------------------------------------------------------------------------------------

DEFAULTS = {  # (quick, full)
    "N_VALUES": ([16, 64, 256], [16 * 2**k for k in range(9)]),
    "D_HEADS": ([2**k for k in range(9)], [2**k for k in range(11)]),
    "CALIB_N_VALUES": ([24, 96], [24 * 2**k for k in range(8)]),
    "TRIALS": (128, 256),
    "IDENTITY_QUERIES": (65536, 262144),
    "IDENTITY_REPLICATES": (100, 400),
    "BOOTSTRAP": (50, 200),
}
IDENTITY_CASES = ([(64, 2), (64, 8), (256, 4)], [(64, 2), (64, 8), (256, 4), (256, 32), (1024, 16)])
HELDOUT_D = ([3, 12], [3, 6, 12, 24, 48, 96])   # head dimensions off the power-of-two grid (Gaussian keys)
CRIT_N = ([16, 256, 4096], [16 * 4**k for k in range(8)])  # plus CRIT_N_MAX


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved), derive the fixed case lists, check that the
    calibration lengths are off the held-out grid."""
    P.fill_mode_defaults(DEFAULTS)
    parameters.require(not set(P.CALIB_N_VALUES) & set(P.N_VALUES), "CALIB_N_VALUES", P.CALIB_N_VALUES,
                       f"n values that are not on the held-out grid N_VALUES = {P.N_VALUES}")
    P["IDENTITY_CASES"] = parameters.by_mode(P.MODE, *IDENTITY_CASES)
    P["HELDOUT_D"] = parameters.by_mode(P.MODE, *HELDOUT_D)
    P["CRIT_N"] = sorted({n for n in parameters.by_mode(P.MODE, *CRIT_N) if n < P.CRIT_N_MAX} | {P.CRIT_N_MAX})
    return P


def _predict_grid(mc: pd.DataFrame, bridge_values) -> tuple[dict, float]:
    """Predictions for every row of `mc` and each bridge value (Gaussian closures computed once per point),
    and the mean seconds per predicted point."""
    fixed, closures = [], {}
    start = time.perf_counter()
    for r in mc.itertuples():
        if r.keys == "gaussian" and r.d_head > 1:
            closures[(r.n, r.d_head)] = theory.gaussian_closures(int(r.n), int(r.d_head))
            fixed.append(None)
        else:
            fixed.append(theory.predicted_rank_fraction(int(r.n), int(r.d_head), r.keys))
    seconds = (time.perf_counter() - start) / max(len(mc), 1)
    blended = {b: [f if f is not None else theory.bridge_closures(closures[(r.n, r.d_head)], b)
                   for f, r in zip(fixed, mc.itertuples())] for b in bridge_values}
    return blended, seconds


def analyse(P) -> ChapterResult:
    """Run chapter 3b for resolved parameters `P` and return its frames, quotes and verdicts."""
    result = ChapterResult()
    # the one bridge constant, calibrated on lengths that are not on the reported grid
    calib, _ = grid_mc("ch3b_calibration", P.CALIB_N_VALUES, P.D_HEADS, ["gaussian"], P.TRIALS, P.SEED + 1)
    preds, _ = _predict_grid(calib, BRIDGE_CANDIDATES)
    calibration = pd.DataFrame([{"bridge": b, "max_error": float(np.max(np.abs(np.array(preds[b]) - calib.mc)))}
                                for b in BRIDGE_CANDIDATES])
    bridge = float(calibration.sort_values(["max_error", "bridge"]).iloc[0].bridge)
    # the held-out grid
    grid, raw = grid_mc("ch3b_grid", P.N_VALUES, P.D_HEADS, KEY_KINDS, P.TRIALS, P.SEED)
    preds, seconds = _predict_grid(grid, [bridge])
    grid["predicted"] = preds[bridge]
    grid["error"] = grid["predicted"] - grid["mc"]
    # head dimensions that neither the calibration nor the reported grid used
    heldout, _ = grid_mc("ch3b_heldout_dh", P.N_VALUES, P.HELDOUT_D, ["gaussian"], P.TRIALS, P.SEED + 2)
    heldout["predicted"] = _predict_grid(heldout, [bridge])[0][bridge]
    heldout["error"] = heldout["predicted"] - heldout["mc"]
    # the identity for fixed keys
    identity = run_sweep("ch3b_identity", identity_point,
                         [{"n": n, "d_head": d, "keys": k, "queries": P.IDENTITY_QUERIES,
                           "replicates": P.IDENTITY_REPLICATES} for k in KEY_KINDS for n, d in P.IDENTITY_CASES],
                         seeds=[P.SEED])
    # sphere keys at d_h = 2: the closed form against the grid's Monte Carlo
    d2 = grid[(grid["keys"] == "sphere") & (grid.d_head == 2)]
    sphere_d2 = pd.DataFrame({"n": d2.n.to_numpy(), "mc": d2.mc.to_numpy(), "se": d2.se.to_numpy(),
                              "closed_form": [theory.sphere_d2_rank_fraction(int(n)) for n in d2.n]})
    # knees measured on the grid, and fits of the Gaussian-key knees with one loss
    knees = measured_knees(raw, P.EPS_VALUES, P.BOOTSTRAP, P.SEED)
    result.data["knee_replicates"] = knees.pop("replicates")     # arrays per row: kept out of the metrics
    fits = pd.DataFrame([{"eps": eps, **f} for eps in P.EPS_VALUES for f in fit_forms(
        *knees[(knees["keys"] == "gaussian") & (knees.eps == eps)][["n", "knee"]].T.to_numpy())])
    # the predicted critical d_h, started at its asymptotic form kappa(n) / (2 (e - 1) eps)
    kappa = pd.DataFrame([{"n": int(n), "kappa": theory.norm_spread_constant(int(n)),
                           "t4_half": theory.gaussian_max_level(int(n)) ** 4 / 2} for n in P.CRIT_N])
    critical = pd.DataFrame([{"eps": eps, "n": int(k.n), "d_star": theory.critical_head_dim(
        int(k.n), eps, "gaussian", bridge, guess=int(k.kappa / (2 * (math.e - 1) * eps)))}
        for eps in P.EPS_VALUES for k in kappa.itertuples()]).merge(kappa, on="n")
    critical["asymptotic"] = critical.kappa / (2 * (math.e - 1) * critical.eps)
    sphere_critical = pd.DataFrame([{"eps": eps, "n": int(n), "d_star": theory.critical_head_dim(int(n), eps, "sphere")}
                                    for eps in P.EPS_VALUES for n in P.CRIT_N])
    result.frames.update(grid=grid.drop(columns=["sd"]), heldout_dh=heldout.drop(columns=["sd"]),
                         calibration=calibration, identity=identity,
                         sphere_d2=sphere_d2, knees=knees, sphere_knees=knees[knees["keys"] == "sphere"],
                         knee_fits=fits, critical_dh=critical, sphere_critical_dh=sphere_critical, kappa=kappa)
    _verdicts(P, result, bridge)
    _quotes(P, result, bridge, seconds)
    return result.done()


def _eps_mid(P) -> float:
    """The middle tolerance of EPS_VALUES, the one the prose discusses."""
    return P.EPS_VALUES[len(P.EPS_VALUES) // 2]


def _verdicts(P, result, bridge) -> None:
    f = result.frames
    result.verdict("ch3b_identity_verdict", identity_verdict(f["identity"]))
    for family, name in (("gaussian", "Gaussian"), ("sphere", "unit-sphere")):
        result.verdict(f"ch3b_accuracy_{family}", accuracy_verdict(f["grid"][f["grid"]["keys"] == family], P.GOAL, name))
        result.verdict(f"ch3b_noise_{family}", noise_verdict(f["grid"][f["grid"]["keys"] == family], name))
    v = result.verdicts
    result.quote("ch3b_accuracy_text", accuracy_text(v["ch3b_accuracy_gaussian"], v["ch3b_accuracy_sphere"]))
    result.quote("ch3b_noise_text", noise_text(v["ch3b_noise_gaussian"], v["ch3b_noise_sphere"]))
    result.verdict("ch3b_accuracy_heldout_dh", accuracy_verdict(f["heldout_dh"], P.GOAL, "Gaussian",
                                                                "points at head dimensions off the grid"))
    result.quote("ch3b_heldout_d", join([str(d) for d in P.HELDOUT_D]))
    knees = f["knees"]
    result.verdict("ch3b_sphere_flat_verdict",
                   flat_knee_verdict(knees[(knees["keys"] == "sphere") & (knees.eps == P.EPS_VALUES[0])]))
    crit = f["critical_dh"]
    big = crit[(crit.eps == _eps_mid(P)) & (crit.n >= 1000)]
    exponent = effective_exponent(big.n, big.d_star)
    result.verdict("ch3b_growth_verdict", predicted_growth_verdict(
        exponent, float(big.n.min()) if len(big) else math.nan, float(big.n.max()) if len(big) else math.nan))
    gk = knees[(knees["keys"] == "gaussian") & (knees.eps == _eps_mid(P))].sort_values("n")
    reps = np.stack([result.data["knee_replicates"][i] for i in gk.index], axis=1)    # (resamples, n)
    result.verdict("ch3b_knee_growth", scaling.knee_verdict(gk.n, gk.knee, reps, P.D_HEADS,
                                                            subject="the measured knee (Gaussian keys)"))
    result.quote("ch3b_exponent", exponent, ".2f")


def _quotes(P, result, bridge, seconds) -> None:
    f = result.frames
    q = result.quote
    q("ch3b_identity_queries", P.IDENTITY_QUERIES, ",d")
    q("ch3b_identity_replicates", P.IDENTITY_REPLICATES, ",d")
    q("ch3b_circle_ratio", (5 / 9) / theory.BARRIER_FRACTION, ".3f")
    q("ch3b_eps_list_pct", join([number(100 * e) for e in P.EPS_VALUES]))
    q("ch3b_eps_mid_pct", number(100 * _eps_mid(P)))
    sph = f["sphere_critical_dh"]
    q("ch3b_sphere_dstar", join([span(sph[sph.eps == e].d_star.min(), sph[sph.eps == e].d_star.max()).replace("from ", "")
                                 for e in P.EPS_VALUES]))
    sk = f["knees"][f["knees"]["keys"] == "sphere"]
    q("ch3b_sphere_knees_measured", join([span(sk[sk.eps == e].knee.min(), sk[sk.eps == e].knee.max(), digits=2)
                                          .replace("from ", "") for e in P.EPS_VALUES]))
    q("ch3b_crit_n_min", min(P.CRIT_N), ",d")
    q("ch3b_crit_n_max", max(P.CRIT_N), ",d")
    q("ch3b_bridge_candidates", "{" + ", ".join("∞" if math.isinf(b) else number(b) for b in BRIDGE_CANDIDATES) + "}")
    q("ch3b_calib_n", "{" + ", ".join(str(n) for n in P.CALIB_N_VALUES) + "}")
    q("ch3b_bridge", "∞" if math.isinf(bridge) else number(bridge))
    q("ch3b_predictor_ms", 1e3 * seconds, ".0f")
    q("ch3b_trials", P.TRIALS, "d")
    q("ch3b_fallback_rows", int(f["grid"].fallback_rows.sum()), ",d")
    q("ch3b_max_se", float(f["grid"].se.max()), ".3f")
    last = f["kappa"].sort_values("n").iloc[-1]
    q("ch3b_kappa_ratio", float(last.kappa / last.t4_half), ".2f")
    crit = f["critical_dh"]
    mid = crit[(crit.eps == _eps_mid(P)) & (crit.n >= 1000)]
    ratio = np.log(mid.n) ** 2 / ((math.e - 1) * mid.eps) / mid.d_star
    q("ch3b_log2_n_low", int(mid.n.min()) if len(mid) else min(P.CRIT_N), ",d")
    q("ch3b_log2_overstate", span(ratio.min(), ratio.max(), digits=2).replace("from ", "") if len(mid) else "n/a")
