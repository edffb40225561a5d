"""Chapter 3b (predicting the rank): the identity E[rank | K] = sum_j 1 - (1 - g_j)^n, keys on the sphere,
and a predictor of E[hardmax rank] / n checked against Monte Carlo over a grid of (n, d_h).

Random heads: queries i.i.d. N(0, I_{d_h}), independent of the keys; keys i.i.d. N(0, I_{d_h}) ("gaussian")
or uniform on the unit sphere ("sphere"). Every rank here is the hardmax rank (distinct argmax columns).

`analyse(P)` runs everything the chapter shows and returns a `Result`: tidy frames, the numbers the prose
quotes and the verdicts as data. The verdict sentences are written by the functions at the end of this module.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import seeding, theory
from ..hardmax_sampling import KEY_KINDS, argmax_winners, distinct_counts, hardmax_point, sample_keys
from . import run_sweep

BRIDGE_CANDIDATES = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, math.inf)  # exponents q of the blend weight pi^q


# ------------------------------------------------------------------------------------------------
# Monte Carlo grid (the sampling itself is in helpers.hardmax_sampling, so predictor edits keep it cached)
# ------------------------------------------------------------------------------------------------


def trials_for_rows(n: int, rows: int, minimum: int = 4) -> int:
    """Heads per grid point so that every n gets about `rows` query rows in total (at least `minimum` heads)."""
    return max(minimum, -(-rows // n))


def grid_mc(name: str, n_values, d_values, keys_kinds, rows: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (keys, n, d_head): mean hardmax rank / n, its standard error and trials; and the per-head rows."""
    configs = [{"n": int(n), "d_head": int(d), "keys": k, "trials": trials_for_rows(int(n), rows)}
               for k in keys_kinds for n in n_values for d in d_values]
    raw = run_sweep(name, hardmax_point, configs, seeds=[seed])
    raw["fraction"] = raw["rank"] / raw["n"]
    out = raw.groupby(["keys", "n", "d_head"]).agg(mc=("fraction", "mean"), sd=("fraction", "std"),
                                                   trials=("fraction", "size"),
                                                   fallback_rows=("fallback_rows", "sum")).reset_index()
    out["se"] = out["sd"] / np.sqrt(out["trials"])
    return out, raw


# ------------------------------------------------------------------------------------------------
# The identity, checked for fixed keys
# ------------------------------------------------------------------------------------------------


def win_probabilities(k: torch.Tensor, queries: int, gen: torch.Generator, chunk: int = 8192) -> np.ndarray:
    """Estimate g_j `(n,)`: the share of `queries` fresh Gaussian queries whose argmax is key j."""
    counts = torch.zeros(k.shape[0], dtype=torch.long)
    done = 0
    while done < queries:
        size = min(chunk, queries - done)
        winners, _ = argmax_winners(torch.randn(size, k.shape[1], generator=gen), k)
        counts += torch.bincount(winners, minlength=k.shape[0])
        done += size
    return counts.numpy() / queries


def identity_point(n: int, d_head: int, keys: str, queries: int, replicates: int, seed: int) -> dict:
    """For one fixed key set: E[rank | K] and Var[rank | K] from estimated g_j, against fresh query sets.

    The predicted mean's standard error comes from the multinomial error of the estimated g_j (delta method);
    its plug-in bias, of order n^2 g / queries, is removed to first order.
    """
    gen = seeding.torch_generator(seeding.derive_seed(seed, "ch3b_identity", n, d_head, keys))
    k = sample_keys(n, d_head, keys, gen)
    g = win_probabilities(k, queries, gen)
    missed = (1 - g) ** n
    bias = n * (n - 1) / 2 * (1 - g) ** max(n - 2, 0) * g * (1 - g) / queries  # E[(1 - g_hat)^n] - (1 - g)^n
    predicted = float(np.sum(1 - missed + bias))
    grad = n * (1 - g) ** (n - 1)
    pred_se = math.sqrt(max(np.sum(grad**2 * g) - np.sum(grad * g) ** 2, 0.0) / queries)
    ranks = []
    per_batch = max(1, 2**22 // (n * n))
    for start in range(0, replicates, per_batch):  # fresh query sets against the same keys, batched
        size = min(per_batch, replicates - start)
        winners, _ = argmax_winners(torch.randn(size, n, d_head, generator=gen), k.expand(size, n, d_head))
        ranks.extend(distinct_counts(winners, n).tolist())
    ranks = np.array(ranks, dtype=float)
    predicted_var = theory.hardmax_rank_variance_from_probs(g, rows=n)
    return {"predicted": predicted, "predicted_se": pred_se, "predicted_var": predicted_var,
            "measured": float(ranks.mean()), "measured_se": float(ranks.std(ddof=1) / math.sqrt(replicates)),
            "measured_var": float(ranks.var(ddof=1)), "vertices_hit": int((g > 0).sum()),
            # the spread of the measured mean under the identity itself (the sample spread can be 0 by chance)
            "combined_se": math.sqrt(predicted_var / replicates + pred_se**2)}


# ------------------------------------------------------------------------------------------------
# Knees (saturation points) and fits
# ------------------------------------------------------------------------------------------------

FIT_FORMS = ("a + b log n", "a + b (log n)^2", "c n^alpha")


def knee_from_curve(d_values, fractions, level: float) -> float:
    """Smallest d at which `fractions` (in d order) reaches `level`, interpolated linearly in log d; NaN if never."""
    d = np.asarray(d_values, dtype=float)
    r = np.asarray(fractions, dtype=float)
    order = np.argsort(d)
    d, r = d[order], r[order]
    above = np.flatnonzero(r >= level)
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(d[0])
    frac = (level - r[i - 1]) / (r[i] - r[i - 1])
    return float(math.exp(math.log(d[i - 1]) + frac * (math.log(d[i]) - math.log(d[i - 1]))))


def measured_knees(raw: pd.DataFrame, eps_values, bootstrap: int, seed: int) -> pd.DataFrame:
    """Knee d*(n, eps) of the Monte Carlo curves (plateau: the exact 1 - (1 - 1/n)^n), with 95 % bootstrap
    intervals that resample the heads at every grid point."""
    rng = np.random.default_rng(seed)
    rows = []
    for (keys, n), part in raw.groupby(["keys", "n"]):
        groups = {d: g["fraction"].to_numpy() for d, g in part.groupby("d_head")}
        ds = np.array(sorted(groups))
        plateau = theory.plateau_fraction(int(n))
        means = np.array([groups[d].mean() for d in ds])
        boots = np.array([[rng.choice(groups[d], groups[d].size).mean() for d in ds] for _ in range(bootstrap)])
        for eps in eps_values:
            level = (1 - eps) * plateau
            samples = np.array([knee_from_curve(ds, b, level) for b in boots]) if bootstrap else np.array([])
            low = high = float("nan")
            if samples.size and np.isfinite(samples).mean() >= 0.975:
                low, high = np.nanpercentile(samples, [2.5, 97.5])
            rows.append({"keys": keys, "n": int(n), "eps": eps, "knee": knee_from_curve(ds, means, level),
                         "knee_low": float(low), "knee_high": float(high)})
    return pd.DataFrame(rows)


def fit_forms(n_values, knees) -> list[dict]:
    """Fit a + b log n, a + b (log n)^2 and c n^alpha to knee(n) with one loss for all: the RMS of log(knee / fit).

    Nonlinear least squares on log(knee) (the linear forms must stay positive); NaN knees are left out.
    """
    from scipy.optimize import least_squares

    n = np.asarray(n_values, dtype=float)
    y = np.asarray(knees, dtype=float)
    ok = np.isfinite(y) & (y > 0)
    n, y = n[ok], y[ok]
    out = []
    for form in FIT_FORMS:
        if n.size < 3:
            out.append({"form": form, "points": int(n.size), "a": None, "b": None, "rms_log": None})
            continue
        x = np.log(n) if form != "a + b (log n)^2" else np.log(n) ** 2
        if form == "c n^alpha":
            b, log_c = np.polyfit(np.log(n), np.log(y), 1)  # exact minimiser of the log loss for this form
            a, rms = math.exp(log_c), float(np.sqrt(np.mean((np.log(y) - log_c - b * np.log(n)) ** 2)))
        else:
            b0, a0 = np.polyfit(x, y, 1)
            resid = lambda p: np.log(np.maximum(p[0] + p[1] * x, 1e-9)) - np.log(y)
            sol = least_squares(resid, [a0 if np.all(a0 + b0 * x > 0) else y.min(), max(b0, 1e-6)])
            a, b = sol.x
            rms = float(np.sqrt(np.mean(resid(sol.x) ** 2)))
        out.append({"form": form, "points": int(n.size), "a": float(a), "b": float(b), "rms_log": rms})
    return out


def effective_exponent(n_values, d_values) -> float:
    """Slope of log d* against log n (least squares): the power of n that d* looks like over this range."""
    n = np.asarray(n_values, dtype=float)
    d = np.asarray(d_values, dtype=float)
    ok = np.isfinite(d) & (d > 0)
    return float(np.polyfit(np.log(n[ok]), np.log(d[ok]), 1)[0]) if ok.sum() >= 2 else float("nan")


# ------------------------------------------------------------------------------------------------
# Verdicts: rules on data, sentences in plain English
# ------------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """A conclusion as data (`passed` against `threshold`, from `value`) and the sentence that states it."""

    name: str
    passed: bool
    value: float
    threshold: float
    text: str
    details: dict = field(default_factory=dict)


IDENTITY_Z = 3.0  # |measured - predicted| / combined standard error below this counts as agreement


def identity_verdict(table: pd.DataFrame, z_max: float = IDENTITY_Z) -> Verdict:
    """The identity holds when every case agrees within z_max combined standard errors.

    `table` has columns measured, predicted and combined_se (the standard error of the measured mean under
    the identity's own variance, plus the error of the estimated g_j).
    """
    z = (table["measured"] - table["predicted"]).abs() / table["combined_se"]
    worst = float(z.max())
    cases, bad = len(table), int((z >= z_max).sum())
    if bad == 0:
        text = (f"the predicted E[rank | K] agrees with the measured mean in all {cases} cases "
                f"(largest deviation {worst:.1f} standard errors, threshold {z_max:g})")
    else:
        text = (f"the predicted E[rank | K] misses the measured mean in {bad} of {cases} cases "
                f"(largest deviation {worst:.1f} standard errors, threshold {z_max:g})")
    return Verdict("identity", bad == 0, worst, z_max, text, {"cases": cases, "failed": bad})


def accuracy_verdict(errors: pd.DataFrame, goal: float, family: str) -> Verdict:
    """The predictor meets the goal for a key family when its largest absolute error on the held-out grid is <= goal.

    `errors` has columns n, d_head, error (predicted - measured, in rank / n).
    """
    i = errors["error"].abs().idxmax()
    worst, n, d = float(abs(errors.loc[i, "error"])), int(errors.loc[i, "n"]), int(errors.loc[i, "d_head"])
    sign = "above" if errors.loc[i, "error"] > 0 else "below"
    points = len(errors)
    met = worst <= goal
    text = (f"for {family} keys the largest error over the {points} held-out grid points is {worst:.3f} in rank / n "
            f"(the prediction is {sign} the measurement at n = {n}, d_h = {d}), "
            + ("within" if met else "above") + f" the goal of {goal:g}")
    return Verdict("accuracy", met, worst, goal, text, {"n": n, "d_head": d, "points": points})


FLAT_RATIO = 1.5  # sphere knees count as flat when the largest-n knee is below this multiple of the smallest-n knee


def flat_knee_verdict(knees: pd.DataFrame, ratio_max: float = FLAT_RATIO) -> Verdict:
    """Whether knee(n) stays flat: the knee at the largest n over the knee at the smallest n, below ratio_max.

    `knees` has columns n, knee for one key family and one eps.
    """
    part = knees.dropna(subset=["knee"]).sort_values("n")
    if len(part) < 2:
        return Verdict("sphere_flat", False, float("nan"), ratio_max,
                       "cannot be judged (fewer than two knees on the grid)")
    first, last = part.iloc[0], part.iloc[-1]
    ratio = float(last.knee / first.knee)
    flat = ratio < ratio_max
    text = (f"the knee goes from {first.knee:.2g} at n = {int(first.n)} to {last.knee:.2g} at n = {int(last.n)} "
            f"(a factor {ratio:.2f}), so it " + ("does not grow with n" if flat else "grows with n")
            + f" (threshold: a factor {ratio_max:g})")
    return Verdict("sphere_flat", flat, ratio, ratio_max, text, {"n_min": int(first.n), "n_max": int(last.n)})


def growth_verdict(exponent: float, n_low: float, n_high: float, fits: list[dict]) -> Verdict:
    """How the predicted critical d_h grows, in words: its effective power of n and the best fitted form."""
    judged = [f for f in fits if f.get("rms_log") is not None]
    best = min(judged, key=lambda f: f["rms_log"])["form"] if judged else None
    text = (f"over n from {n_low:.3g} to {n_high:.3g} the predicted critical d_h grows like n^{exponent:.2f}")
    if best is not None:
        text += f"; of the three forms fitted to the measured knees with one loss, {best} fits best"
    faster = exponent > 0 and best != "a + b log n"
    return Verdict("growth", faster, exponent, 0.0, text, {"best_form": best})


# ------------------------------------------------------------------------------------------------
# The chapter's analysis
# ------------------------------------------------------------------------------------------------


@dataclass
class Result:
    """Everything chapter 3b shows. Frames are tidy; `numbers` feed the prose; `verdicts` carry their data."""

    grid: pd.DataFrame          # keys, n, d_head, mc, se, trials, predicted, error
    calibration: pd.DataFrame   # bridge, max_error on the calibration n values (Gaussian keys)
    bridge: float
    identity: pd.DataFrame      # keys, n, d_head, predicted, predicted_se, measured, measured_se, variances
    sphere_d2: pd.DataFrame     # n, closed_form, mc, se
    knees: pd.DataFrame         # keys, n, eps, knee, knee_low, knee_high (Monte Carlo)
    critical: pd.DataFrame      # eps, n, d_star, kappa_form (predicted, Gaussian keys)
    sphere_critical: pd.DataFrame  # eps, n, d_star (predicted, sphere keys)
    fits: pd.DataFrame          # eps, form, a, b, rms_log (measured Gaussian knees)
    kappa: pd.DataFrame         # n, kappa, t4_half
    predictor_seconds: float
    numbers: dict
    verdicts: dict


def _predict_grid(mc: pd.DataFrame, bridge_values) -> tuple[pd.DataFrame, dict]:
    """Predictions for every row of `mc`; Gaussian closures once per point, blended for every bridge value."""
    import time

    rows, closures = [], {}
    start = time.perf_counter()
    for r in mc.itertuples():
        if r.keys == "gaussian" and r.d_head > 1:
            closures[(r.n, r.d_head)] = theory.gaussian_closures(int(r.n), int(r.d_head))
        rows.append(theory.predicted_rank_fraction(int(r.n), int(r.d_head), r.keys)
                    if (r.keys == "sphere" or r.d_head == 1) else None)
    seconds = (time.perf_counter() - start) / max(len(mc), 1)
    by_bridge = {}
    for bridge in bridge_values:
        by_bridge[bridge] = [rows[i] if rows[i] is not None
                             else theory.bridge_closures(closures[(r.n, r.d_head)], bridge)
                             for i, r in enumerate(mc.itertuples())]
    return by_bridge, {"seconds_per_point": seconds}


def analyse(P) -> Result:
    """Run chapter 3b with validated parameters P (see the notebook's parameters cell)."""
    import time

    numbers = {}
    # --- calibration of the single bridge constant, on n values that are not on the reported grid
    calib_mc, _ = grid_mc("ch3b_calibration", P.CALIB_N, P.D_GRID, ["gaussian"], P.ROWS, P.SEED + 1)
    preds, _ = _predict_grid(calib_mc, BRIDGE_CANDIDATES)
    calibration = pd.DataFrame([{"bridge": b, "max_error": float(np.max(np.abs(np.array(preds[b]) - calib_mc.mc)))}
                                for b in BRIDGE_CANDIDATES])
    bridge = float(calibration.sort_values(["max_error", "bridge"]).iloc[0].bridge)

    # --- the held-out grid
    mc, raw = grid_mc("ch3b_grid", P.N_GRID, P.D_GRID, KEY_KINDS, P.ROWS, P.SEED)
    t0 = time.perf_counter()
    preds, timing = _predict_grid(mc, [bridge])
    mc["predicted"] = preds[bridge]
    mc["error"] = mc["predicted"] - mc["mc"]
    grid = mc
    predictor_seconds = timing["seconds_per_point"]

    # --- the identity for fixed keys
    identity = run_sweep("ch3b_identity", identity_point,
                         [{"n": n, "d_head": d, "keys": k, "queries": P.IDENTITY_QUERIES,
                           "replicates": P.IDENTITY_REPLICATES} for k in KEY_KINDS for n, d in P.IDENTITY_CASES],
                         seeds=[P.SEED])

    # --- sphere keys, d_h = 2: closed form against the grid's Monte Carlo
    d2 = grid[(grid["keys"] == "sphere") & (grid.d_head == 2)]
    sphere_d2 = pd.DataFrame({"n": d2.n.to_numpy(), "closed_form": [theory.sphere_d2_rank_fraction(int(n)) for n in d2.n],
                              "mc": d2.mc.to_numpy(), "se": d2.se.to_numpy()})

    # --- knees measured on the grid, with bootstrap intervals
    knees = measured_knees(raw, P.EPS_VALUES, P.BOOTSTRAP, P.SEED)
    fits = pd.DataFrame([{"eps": eps, **f} for eps in P.EPS_VALUES
                         for f in fit_forms(*knees[(knees["keys"] == "gaussian") & (knees.eps == eps)][["n", "knee"]].T.to_numpy())])

    # --- the predicted critical d_h against n, and its asymptotic constant
    kappa = pd.DataFrame([{"n": int(n), "kappa": theory.norm_spread_constant(int(n)),
                           "t4_half": theory.gaussian_max_level(int(n)) ** 4 / 2} for n in P.CRIT_N])
    guess = {n: k for n, k in zip(kappa.n, kappa.kappa)}  # start the search at the asymptotic form
    critical = pd.DataFrame([{"eps": eps, "n": int(n), "d_star": theory.critical_head_dim(
        int(n), eps, "gaussian", bridge, guess=int(guess[int(n)] / (2 * (math.e - 1) * eps)))}
        for eps in P.EPS_VALUES for n in P.CRIT_N])
    sphere_critical = pd.DataFrame([{"eps": eps, "n": int(n), "d_star": theory.critical_head_dim(int(n), eps, "sphere")}
                                    for eps in P.EPS_VALUES for n in P.CRIT_N])
    critical = critical.merge(kappa, on="n")
    critical["asymptotic"] = critical.kappa / (2 * (math.e - 1) * critical.eps)

    # --- numbers and verdicts
    verdicts = {"identity": identity_verdict(identity)}
    for family in KEY_KINDS:
        part = grid[grid["keys"] == family]
        verdicts[f"accuracy_{family}"] = accuracy_verdict(part, P.GOAL, "Gaussian" if family == "gaussian" else "unit-sphere")
    sphere_knees = knees[(knees["keys"] == "sphere") & (knees.eps == P.EPS_VALUES[0])]
    verdicts["sphere_flat"] = flat_knee_verdict(sphere_knees)
    big = critical[(critical.eps == P.EPS_VALUES[1 if len(P.EPS_VALUES) > 1 else 0]) & (critical.n >= 1000)]
    exponent = effective_exponent(big.n, big.d_star)
    eps_mid = P.EPS_VALUES[1 if len(P.EPS_VALUES) > 1 else 0]
    verdicts["growth"] = growth_verdict(exponent, float(big.n.min()) if len(big) else float("nan"),
                                        float(big.n.max()) if len(big) else float("nan"),
                                        fits[fits.eps == eps_mid].to_dict(orient="records"))
    numbers.update({"bridge": bridge, "predictor_ms": 1e3 * predictor_seconds, "exponent": exponent,
                    "eps_mid": eps_mid, "fallback_rows": int(grid.fallback_rows.sum()),
                    "mc_rows": int((raw["n"]).sum()), "max_se": float(grid.se.max()),
                    "circle_limit": 5 / 9, "circle_ratio": (5 / 9) / theory.BARRIER_FRACTION})
    return Result(grid=grid, calibration=calibration, bridge=bridge, identity=identity, sphere_d2=sphere_d2,
                  knees=knees, critical=critical, sphere_critical=sphere_critical, fits=fits, kappa=kappa,
                  predictor_seconds=predictor_seconds, numbers=numbers, verdicts=verdicts)


# ------------------------------------------------------------------------------------------------
# Recording and gluing
# ------------------------------------------------------------------------------------------------


def list_text(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def span_text(values) -> str:
    """'5' when all values agree, else '5 to 6'."""
    lo, hi = int(min(values)), int(max(values))
    return f"{lo}" if lo == hi else f"{lo} to {hi}"


def record_and_glue(rec, result: Result, P) -> None:
    """Record the chapter's tables in the metrics JSON and glue every number and verdict its prose quotes."""
    from ..record import Formatted

    grid = result.grid
    rec.record("grid", grid[["keys", "n", "d_head", "mc", "se", "trials", "predicted", "error"]].to_dict(orient="records"))
    rec.record("calibration", result.calibration.to_dict(orient="records"))
    rec.record("identity", result.identity.to_dict(orient="records"))
    rec.record("sphere_d2", result.sphere_d2.to_dict(orient="records"))
    rec.record("critical_dh", result.critical.to_dict(orient="records"))
    rec.record("sphere_critical_dh", result.sphere_critical.to_dict(orient="records"))
    rec.record("knees", result.knees.to_dict(orient="records"))
    rec.record("sphere_knees", result.knees[result.knees["keys"] == "sphere"].to_dict(orient="records"))
    rec.record("knee_fits", result.fits.to_dict(orient="records"))
    rec.record("verdicts", {k: {"passed": v.passed, "value": v.value, "threshold": v.threshold, "text": v.text,
                                **v.details} for k, v in result.verdicts.items()})
    for family in KEY_KINDS:
        v = result.verdicts[f"accuracy_{family}"]
        rec.glue(f"ch3b_accuracy_{family}", Formatted(v.text))
        rec.record(f"max_error_{family}", v.value)
    rec.glue("ch3b_identity_verdict", Formatted(result.verdicts["identity"].text))
    rec.glue("ch3b_sphere_flat_verdict", Formatted(result.verdicts["sphere_flat"].text))
    rec.glue("ch3b_growth_verdict", Formatted(result.verdicts["growth"].text))
    rec.glue("ch3b_identity_queries", P.IDENTITY_QUERIES, "d")
    rec.glue("ch3b_identity_replicates", P.IDENTITY_REPLICATES, "d")
    rec.glue("ch3b_circle_ratio", result.numbers["circle_ratio"], ".3f")
    rec.glue("ch3b_eps_list_pct", Formatted(list_text([f"{100 * e:g}" for e in P.EPS_VALUES])))
    rec.glue("ch3b_eps_mid_pct", 100 * result.numbers["eps_mid"], "g")
    sph = result.sphere_critical
    rec.glue("ch3b_sphere_dstar", Formatted(list_text([span_text(sph[sph.eps == e].d_star) for e in P.EPS_VALUES])))
    rec.glue("ch3b_crit_n_min", min(P.CRIT_N), "d")
    rec.glue("ch3b_crit_n_max", max(P.CRIT_N), ",d")
    rec.glue("ch3b_bridge_candidates", Formatted("{" + ", ".join("∞" if math.isinf(b) else f"{b:g}"
                                                               for b in BRIDGE_CANDIDATES) + "}"))
    rec.glue("ch3b_calib_n", Formatted("{" + ", ".join(str(n) for n in P.CALIB_N) + "}"))
    rec.glue("ch3b_bridge", Formatted("∞" if math.isinf(result.bridge) else f"{result.bridge:g}"))
    rec.glue("ch3b_predictor_ms", result.numbers["predictor_ms"], ".0f")
    rec.glue("ch3b_rows", P.ROWS, ",d")
    rec.glue("ch3b_fallback_rows", result.numbers["fallback_rows"], ",d")
    rec.glue("ch3b_max_se", result.numbers["max_se"], ".3f")
    last = result.kappa.sort_values("n").iloc[-1]
    rec.glue("ch3b_kappa_ratio", float(last.kappa / last.t4_half), ".2f")
    rec.glue("ch3b_exponent", result.numbers["exponent"], ".2f")
    mid = result.critical[(result.critical.eps == result.numbers["eps_mid"]) & (result.critical.n >= 1000)]
    log2_form = np.log(mid.n) ** 2 / ((math.e - 1) * mid.eps)
    ratio = log2_form / mid.d_star
    rec.glue("ch3b_log2_n_low", int(mid.n.min()) if len(mid) else min(P.CRIT_N), ",d")
    rec.glue("ch3b_log2_overstate", Formatted(f"{ratio.min():.1f} to {ratio.max():.1f}" if len(mid) else "n/a"))
