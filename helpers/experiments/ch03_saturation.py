"""Chapter 3 (where the rank saturates): rank against d_h, hull vertices, knees, their fits and the verdicts.

The grid points (`hardmax_point`, `softmax_point`, `hull_point`) live in `ch03_saturation_points`, so that edits here
(the analysis, verdict rules and sentences) keep the cached sweeps. `analyse(P)` runs the sweeps and turns them into
the chapter's `ChapterResult`.
"""

import math

import numpy as np
import pandas as pd

from .. import english, parameters, scaling, seeding, theory
from ..results import ChapterResult, Verdict
from ..saturation import bootstrap_saturation, saturation_point
from . import run_sweep
from .ch03_saturation_points import KEY_KINDS, hardmax_point, hull_point, softmax_point  # noqa: F401

FIT_FORMS = tuple(scaling.KNEE_LABELS.values())   # the book's knee forms, named as the metrics record them
FORM_WORDS = {label: scaling.KNEE_WORDS[form] for form, label in scaling.KNEE_LABELS.items()}   # labels in words


# ------------------------------------------------------------------------------------------------
# Knees (the book's saturation point) and their fits
# ------------------------------------------------------------------------------------------------


def knees_from_trials(df, value: str, reference, levels: dict, bootstrap: int = 0, seed: int = 0) -> pd.DataFrame:
    """Knees per n for each named level, from per-trial rows (columns n, d_head, trial, value).

    The knee at `level` is the book's saturation point (`helpers.saturation`) of the mean curve over d_head:
    the smallest d_h whose mean reaches `level` times the plateau, interpolated in log d_h, NaN beyond the grid.
    `reference`: the plateau, a dict {n: number} (a bound known in advance) or "last" (the mean at the largest
    d_h). With `bootstrap > 0`, trials are resampled within each (n, d_head) point for a 95% interval, and the
    column `replicates` holds the knee of every resample (for the growth verdict, `scaling.knee_verdict`).
    """
    rows = []
    for n, part in df.groupby("n"):
        groups = {d: g[value].to_numpy() for d, g in part.groupby("d_head")}
        ds = np.array(sorted(groups), dtype=float)
        plateau = reference[n] if isinstance(reference, dict) else reference
        means = np.array([groups[d].mean() for d in sorted(groups)])
        for name, level in levels.items():
            rule = {"reference": plateau, "level": level}
            if bootstrap:
                interval = bootstrap_saturation(ds, [groups[d] for d in sorted(groups)], resamples=bootstrap,
                                                seed=seeding.derive_seed(seed, "ch3_knee", int(n), name), **rule)
                point, low, high, reps = interval.point, interval.low, interval.high, interval.values
            else:
                point, low, high, reps = saturation_point(ds, means, **rule), math.nan, math.nan, None
            rows.append({"n": int(n), "definition": name, "level": level,
                         "plateau": float(means[-1] if plateau == "last" else plateau),
                         "knee": point.value, "status": point.status, "knee_low": float(low), "knee_high": float(high),
                         **({"replicates": reps} if bootstrap else {})})
    return pd.DataFrame(rows)


def fit_knee_scaling(n_values, knees) -> list[dict]:
    """Fits of knee(n) against a + b log n, a + b (log n)^2 and c n^alpha: the book's one fit with the log loss
    (`scaling.knee_fits`: R^2 on the knee itself and the RMS of log(knee / fit)); NaN knees are left out."""
    return scaling.knee_fits(n_values, knees)


def log_slope_trend(n_values, knees) -> float:
    """Ratio of the last to the first local slope d knee / d log n (1 for exact a + b log n; > 1 is faster growth)."""
    n = np.asarray(n_values, dtype=float)
    y = np.asarray(knees, dtype=float)
    ok = np.isfinite(y)
    n, y = n[ok], y[ok]
    if n.size < 4:
        return float("nan")
    half = n.size // 2
    first = np.polyfit(np.log(n[: half + 1]), y[: half + 1], 1)[0]
    last = np.polyfit(np.log(n[half:]), y[half:], 1)[0]
    return float(last / first) if first > 0 else float("nan")


# ------------------------------------------------------------------------------------------------ verdict rules
HULL_Z = 3.0        # the hull fraction may fall this many binomial standard errors below the lower bound (MC error)


def trend_text(trend) -> str:
    """The change of the slope in log n in words: "changes by a factor 1.42", or why it cannot be measured."""
    if trend is None or np.isnan(trend):
        return "cannot be measured (it needs at least four knees on the grid)"
    return f"changes by a factor {english.number(trend, 3)}"


def trend_sentence(loose, tight) -> str:
    """Both definitions' slope trends as one sentence for the prose, without a dangling "cannot be measured (loose)"."""
    missing = [t is None or np.isnan(t) for t in (loose, tight)]
    if all(missing):
        return ("The change of the local slope of the knee against log n cannot be measured on this grid: it needs at "
                "least four knees per definition")
    words = [trend_text(t) + f" ({name})" for t, name in ((loose, "loose"), (tight, "tight"))]
    return ("From the first to the second half of the n range the local slope of the knee against log n "
            f"{english.join(words)}, where a factor of 1 means a straight line in log n")


def dimension_text(d99, dims) -> str:
    """Where the vertex share reaches 99 %: "from dimension 6 on", or that it lies beyond the largest dimension."""
    if d99 is None:
        return f"only beyond the largest dimension measured ({max(dims)})"
    return f"from dimension {int(d99)} on"


def hull_bound_verdict(hull_mean: pd.DataFrame, trials: int, z: float = HULL_Z) -> Verdict:
    """Whether the measured hull-vertex fraction respects the own-direction lower bound at every (n, d) point,
    within `z` binomial standard errors of the n * trials keys counted. Columns: n, d, fraction, lower_bound."""
    lb = hull_mean.lower_bound.to_numpy()
    se = np.sqrt(lb * (1 - lb) / (hull_mean.n.to_numpy() * trials))
    ok = hull_mean.fraction.to_numpy() >= lb - z * se - 1e-9
    total, held = len(ok), int(ok.sum())
    rule = f"the vertex fraction is at least the lower bound minus {z:g} binomial standard errors"
    evidence = {"held": held, "points": total, "z": z}
    if held == total:
        return Verdict("holds", "at every point", rule, evidence)
    return Verdict("fails", f"at only {english.count_of(held, total, 'point')}", rule, evidence)


# ------------------------------------------------------------------------------------------------ the chapter
DEFAULTS = {"N_VALUES": ([16, 64, 256], [16, 32, 64, 128, 256, 512, 1024]),
            "D_HEADS": ([2**k for k in range(11)],
                        [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048]),
            "TRIALS": (4, 8), "SVD_TRIALS": (1, 2), "HULL_N_VALUES": ([16, 64], [16, 64, 256]),
            "HULL_DIMS": ([1, 2, 3, 4, 6, 8], [1, 2, 3, 4, 5, 6, 8, 10, 12, 16]), "HULL_TRIALS": (2, 3)}   # (quick, full)
BOOTSTRAP = (40, 100)   # (quick, full) resamples of the knee intervals (not a parameter)
GAUSS, SPHERE = "hardmax, gaussian keys", "hardmax, sphere keys"
SERIES = (GAUSS, SPHERE, "softmax, numerical rank", "softmax, effective rank")
MODEL_FROM_DH = 16   # the norm-bias model's error is measured from this d_h up (it is an asymptotic model)
SPHERE_FROM_DH = 8   # the sphere-key ratio is quoted at the first grid d_h from this one up


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved) and check the constraints that link parameters."""
    P.fill_mode_defaults(DEFAULTS)
    P["BOOTSTRAP"] = parameters.by_mode(P.MODE, *BOOTSTRAP)
    parameters.require(P.TIGHT > P.LOOSE, "TIGHT", P.TIGHT, f"a number above LOOSE = {P.LOOSE}")
    return P


def analyse(P) -> ChapterResult:
    """Run every sweep of the chapter for resolved parameters `P` and return its frames, quotes and verdicts."""
    result = ChapterResult()
    for name, value in [("n_min", min(P.N_VALUES)), ("n_max", max(P.N_VALUES)), ("d_min", min(P.D_HEADS)),
                        ("d_max", max(P.D_HEADS))]:
        result.quote(f"ch3_{name}", int(value), "d")
    result.quote("ch3_loose_pct", 100 * P.LOOSE, digits=3)
    result.quote("ch3_tight_pct", 100 * (1 - P.TIGHT), digits=3)
    result.quote("ch3_rtol", P.RTOL, digits=2)
    _d1(P, result)
    _hull(P, result)
    _curves(P, result)
    _knees(P, result)
    _fits(P, result)
    return result.done()


def _d1(P, result) -> None:
    d1 = run_sweep("ch3_d1", hardmax_point, [{"n": n, "d_head": 1, "keys": "gaussian", "trials": 4 * P.TRIALS}
                                             for n in P.N_VALUES], seeds=[P.SEED])
    result.quote("ch3_d1_max", int(d1["rank"].max()), "d")
    result.quote("ch3_d1_count", int(len(d1)), ",d")
    result.frames["d1_max_rank_by_n"] = d1.groupby("n")["rank"].max().to_dict()


def _hull(P, result) -> None:
    hull = run_sweep("ch3_hull", hull_point, [{"n": n, "d": d, "trials": P.HULL_TRIALS} for n in P.HULL_N_VALUES
                                              for d in P.HULL_DIMS], seeds=[P.SEED])
    mean = hull.groupby(["n", "d"]).agg(fraction=("fraction", "mean"), vertices=("vertices", "mean"),
                                        rel_std=("norm_rel_std", "mean"), lp_calls=("lp_calls", "sum")).reset_index()
    mean["lower_bound"] = [theory.vertex_probability_lower_bound(int(n), int(d)) for n, d in zip(mean.n, mean.d)]
    result.frames["hull"] = mean
    result.data["hull_raw"] = hull
    result.verdict("ch3_hull_bound_ok", hull_bound_verdict(mean, P.HULL_TRIALS))
    result.quote("ch3_hull_lp_calls", int(mean.lp_calls.sum()), ",d")
    n_big = max(P.HULL_N_VALUES)
    row2 = mean[(mean.n == n_big) & (mean.d == 2)]
    result.quote("ch3_hull_d2_count", float(row2.vertices.iloc[0]) if len(row2) else "(not measured)",
                 ".1f" if len(row2) else "")
    result.quote("ch3_hull_d2_asym", 2 * math.sqrt(2 * math.pi * math.log(n_big)), ".1f")
    result.quote("ch3_hull_nbig", int(n_big), "d")
    full_at = mean[(mean.n == n_big) & (mean.fraction >= 0.99)].d
    result.quote("ch3_hull_d99", dimension_text(full_at.min() if len(full_at) else None, P.HULL_DIMS))
    result.quote("ch3_hull_crit_nbig", theory.hull_critical_dh(n_big, 0.01), ".1f")


def _curves(P, result) -> None:
    hard = run_sweep("ch3_hardmax", hardmax_point, [{"n": n, "d_head": d, "keys": k, "trials": P.TRIALS}
                                                    for k in KEY_KINDS for n in P.N_VALUES for d in P.D_HEADS],
                     seeds=[P.SEED])
    soft = run_sweep("ch3_softmax", softmax_point, [{"n": n, "d_head": d, "trials": P.SVD_TRIALS, "rtol": P.RTOL}
                                                    for n in P.N_VALUES for d in P.D_HEADS], seeds=[P.SEED])
    bound = {n: theory.expected_hardmax_rank(int(n)) for n in P.N_VALUES}
    rows = []
    for keys, part in hard.groupby("keys"):
        for (n, d), g in part.groupby(["n", "d_head"]):
            rows.append({"series": f"hardmax, {keys} keys", "n": n, "d_head": d, "mean": g["rank"].mean(),
                         "plateau": bound[n]})
    for measure in ("numerical", "effective"):
        for n, part in soft.groupby("n"):
            means = part.groupby("d_head")[measure].mean()
            rows.extend({"series": f"softmax, {measure} rank", "n": n, "d_head": d, "mean": m,
                         "plateau": means[max(P.D_HEADS)]} for d, m in means.items())
    curves = pd.DataFrame(rows)
    curves["ratio"] = curves["mean"] / curves["plateau"]
    curves["predicted"] = [theory.norm_bias_fraction(int(n), int(d)) if s == GAUSS else np.nan
                           for s, n, d in zip(curves.series, curves.n, curves.d_head)]
    result.frames["rank_vs_dh"] = curves
    result.data.update(hard=hard, soft=soft, bound=bound)
    gk = curves[(curves.series == GAUSS) & (curves.d_head >= MODEL_FROM_DH)]
    result.quote("ch3_pred_mae", float(np.mean(np.abs(gk.ratio - gk.predicted))), ".3f")
    d_sphere = min([d for d in P.D_HEADS if d >= SPHERE_FROM_DH] or [max(P.D_HEADS)])
    result.quote("ch3_sphere_d8", int(d_sphere), "d")
    result.quote("ch3_sphere_min_ratio_d8", float(curves[(curves.series == SPHERE) & (curves.d_head == d_sphere)]
                                                  .ratio.min()), ".3f")


def _knees(P, result) -> None:
    levels = {"loose": P.LOOSE, "tight": P.TIGHT}
    hard, soft, bound = result.data["hard"], result.data["soft"], result.data["bound"]
    tables = [knees_from_trials(hard[hard["keys"] == keys], "rank", bound, levels, bootstrap=P.BOOTSTRAP,
                                seed=P.SEED).assign(series=f"hardmax, {keys} keys") for keys in KEY_KINDS]
    tables += [knees_from_trials(soft, measure, "last", levels).assign(series=f"softmax, {measure} rank")
               for measure in ("numerical", "effective")]
    knees = pd.concat(tables, ignore_index=True)
    result.data["knee_replicates"] = knees.pop("replicates")     # arrays per row: kept out of the metrics
    for column, critical in (("predicted_norm", theory.norm_critical_dh), ("predicted_hull", theory.hull_critical_dh)):
        knees[column] = [critical(int(n), 1 - lv) if s == GAUSS else np.nan
                         for s, n, lv in zip(knees.series, knees.n, knees.level)]
    result.frames["knees"] = knees
    table = knees.pivot_table(index=["n", "definition"], columns="series", values="knee", dropna=False)
    result.data["knee_table"] = table.reindex(columns=list(SERIES)).rename(
        columns=lambda s: s.replace(", ", ": ").replace("gaussian", "Gaussian"))
    gauss = knees[(knees.series == GAUSS) & (knees.definition == "loose")].sort_values("n")
    result.quote("ch3_knee_nmin", float(gauss.knee.iloc[0]), digits=2)
    result.quote("ch3_knee_nmax", float(gauss.knee.iloc[-1]), digits=2)


def _fits(P, result) -> None:
    knees, rows = result.frames["knees"], []
    for (name, definition), part in knees.groupby(["series", "definition"]):
        rows.extend({"series": name, "definition": definition, **f} for f in fit_knee_scaling(part.n, part.knee))
        rows.append({"series": name, "definition": definition, "form": "slope trend",
                     "a": log_slope_trend(part.n, part.knee), "b": None, "r2": None, "rms_log": None,
                     "points": int(part.knee.notna().sum())})
    fits = pd.DataFrame(rows)
    result.frames["knee_fits"] = fits
    shown = fits[(fits.series == GAUSS) & fits.form.isin(FIT_FORMS)]
    result.data["fit_table"] = pd.DataFrame({
        "knee": shown.definition, "form": shown.form.map(FORM_WORDS), "a (or c)": shown.a.astype(float),
        "b (or α)": shown.b.astype(float), "R²": shown.r2.astype(float),
        "RMS log error": shown.rms_log.astype(float).replace(np.inf, np.nan)}).set_index(["knee", "form"])
    for definition in ("loose", "tight"):
        part = fits[(fits.series == GAUSS) & (fits.definition == definition)]
        trend = part[part.form == "slope trend"].a.iloc[0]
        result.frames[f"ch3_{definition}_trend"] = trend
        gk = knees[(knees.series == GAUSS) & (knees.definition == definition)].sort_values("n")
        reps = np.stack([result.data["knee_replicates"][i] for i in gk.index], axis=1)    # (resamples, n)
        result.verdict(f"ch3_verdict_{definition}", scaling.knee_verdict(gk.n, gk.knee, reps, P.D_HEADS,
                                                                                  subject=f"the {definition} knee"))
        result.quote(f"ch3_{definition}_points", int(gk.knee.notna().sum()), "d")
        for key, column, fmt in (("norm", "predicted_norm", ".2f"), ("hull", "predicted_hull", ".1f")):
            ratio = (gk.knee / gk[column]).dropna()
            result.quote(f"ch3_{definition}_vs_{key}", float(ratio.median()) if len(ratio) else None, fmt)
        sphere = knees[(knees.series == SPHERE) & (knees.definition == definition)].knee
        result.quote(f"ch3_{definition}_sphere_range", english.span(sphere.min(), sphere.max(), 2))   # as in the table
    result.quote("ch3_trend_sentence", trend_sentence(result.frames["ch3_loose_trend"], result.frames["ch3_tight_trend"]))
