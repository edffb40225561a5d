"""Chapter 3 (where the rank saturates): rank against d_h, hull vertices, knees and their fits.

Random heads here use i.i.d. standard Gaussian queries and keys, q, k ~ N(0, I_{d_h}). For hardmax this
is exactly the orthonormal-input model of chapter 2 (X W with orthonormal rows X and Gaussian W has
i.i.d. Gaussian entries); for softmax it is the scale of LayerNorm-ed tokens with 1/sqrt(d_model)
weights, and the temperature is T = sqrt(d_h), so the logits have unit variance for every d_h.
"""

import math

import numpy as np
import torch

from .. import geometry, rank, seeding
from ..saturation import bootstrap_saturation, saturation_point

KEY_KINDS = ("gaussian", "sphere")
FIT_FORMS = ("a + b log n", "a + b (log n)^2", "c n^alpha")
TRIALS_REFERENCE_N = 256  # `trials` matrices per point from this n up, proportionally more below (as in chapter 02)


def _keys_queries(n, d_head, count, keys, gen):
    q = torch.randn(count, n, d_head, generator=gen, dtype=torch.float64)
    k = torch.randn(count, n, d_head, generator=gen, dtype=torch.float64)
    if keys == "sphere":
        k = k / k.norm(dim=-1, keepdim=True)
    return q, k


def hardmax_point(n: int, d_head: int, keys: str, trials: int, seed: int) -> list[dict]:
    """Hardmax rank of random heads (Gaussian queries; Gaussian or unit-sphere keys), one row per matrix."""
    if keys not in KEY_KINDS:
        raise ValueError(f"keys must be one of {KEY_KINDS}; got {keys!r}")
    gen = seeding.torch_generator(seeding.derive_seed(seed, "sat_hardmax", n, d_head, keys))
    count = seeding.trials_for(n, trials, reference_n=TRIALS_REFERENCE_N, minimum=trials)
    per_chunk = max(1, 2**22 // (n * max(n, d_head)))
    ranks = []
    done = 0
    while done < count:
        size = min(per_chunk, count - done)
        q, k = _keys_queries(n, d_head, size, keys, gen)
        ranks.extend(rank.hardmax_rank(q @ k.transpose(-1, -2)).tolist())  # (size,)
        done += size
    return [{"trial": i, "rank": float(r)} for i, r in enumerate(ranks)]


def softmax_point(n: int, d_head: int, trials: int, rtol: float, seed: int) -> list[dict]:
    """Softmax at T = sqrt(d_h) with Gaussian q, k: numerical rank (rtol), effective and hardmax rank per matrix."""
    gen = seeding.torch_generator(seeding.derive_seed(seed, "sat_softmax", n, d_head))
    count = seeding.trials_for(n, trials, reference_n=TRIALS_REFERENCE_N, minimum=trials)
    q, k = _keys_queries(n, d_head, count, "gaussian", gen)
    logits = q @ k.transpose(-1, -2) / math.sqrt(d_head)  # (count, n, n), unit-variance logits
    probs = torch.softmax(logits, dim=-1)
    ranks = rank.measures(probs, ("numerical", "effective", "hardmax"), (rtol,))
    numerical = ranks[rank.label("numerical", rtol)]
    return [{"trial": i, "numerical": float(numerical[i]), "effective": float(ranks["effective"][i]),
             "hardmax": float(ranks["hardmax"][i])} for i in range(count)]


def hull_point(n: int, d: int, trials: int, seed: int) -> list[dict]:
    """Hull vertices of n standard Gaussian points in R^d (exact LP test), and their norm spread."""
    rng = seeding.numpy_generator(seeding.derive_seed(seed, "sat_hull", n, d))
    rows = []
    for i in range(trials):
        points = rng.standard_normal((n, d))
        mask, stats = geometry.hull_vertex_mask(points, rng=rng, return_stats=True)
        rows.append({"trial": i, "vertices": int(mask.sum()), "fraction": float(mask.mean()),
                     "lp_calls": stats["lp_small"] + stats["lp_full"], **geometry.key_norm_stats(points)})
    return rows


# ------------------------------------------------------------------------------------------------
# Knees (the book's saturation point) and their fits
# ------------------------------------------------------------------------------------------------


def knees_from_trials(df, value: str, reference, levels: dict, bootstrap: int = 0, seed: int = 0):
    """Knees per n for each named level, from per-trial rows (columns n, d_head, trial, value).

    The knee at `level` is the book's saturation point (`helpers.saturation`) of the mean curve over d_head:
    the smallest d_h whose mean reaches `level` times the plateau, interpolated in log d_h, NaN beyond the grid.
    `reference`: the plateau, a dict {n: number} (a bound known in advance) or "last" (the mean at the largest
    d_h). With `bootstrap > 0`, trials are resampled within each (n, d_head) point for a 95% interval.
    """
    import pandas as pd

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
                point, low, high = interval.point, interval.low, interval.high
            else:
                point, low, high = saturation_point(ds, means, **rule), math.nan, math.nan
            rows.append({"n": int(n), "definition": name, "level": level,
                         "plateau": float(means[-1] if plateau == "last" else plateau),
                         "knee": point.value, "status": point.status, "knee_low": float(low), "knee_high": float(high)})
    return pd.DataFrame(rows)


def fit_knee_scaling(n_values, knees) -> list[dict]:
    """Least-squares fits of knee(n) against a + b log n, a + b (log n)^2 and c n^alpha.

    Goodness of fit: R^2 on the knee itself, and the RMS of log(knee / fit) (a relative error). The
    power law is fitted in log-log coordinates. Points with a NaN knee (beyond the grid) are left out.
    """
    n = np.asarray(n_values, dtype=float)
    y = np.asarray(knees, dtype=float)
    ok = np.isfinite(y) & (y > 0)
    n, y = n[ok], y[ok]
    results = []
    if n.size < 3:
        return [{"form": f, "points": int(n.size), "a": None, "b": None, "r2": None, "rms_log": None}
                for f in FIT_FORMS]
    ln = np.log(n)
    for form in FIT_FORMS:
        if form == "c n^alpha":
            slope, intercept = np.polyfit(ln, np.log(y), 1)
            pred = np.exp(intercept) * n**slope
            a, b = float(np.exp(intercept)), float(slope)
        else:
            x = ln if form == "a + b log n" else ln**2
            b, a = np.polyfit(x, y, 1)
            pred = a + b * x
            a, b = float(a), float(b)
        resid = y - pred
        r2 = 1.0 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2)
        rms_log = float(np.sqrt(np.mean(np.log(np.maximum(y, 1e-12) / np.maximum(pred, 1e-12)) ** 2))) \
            if np.all(pred > 0) else float("inf")
        results.append({"form": form, "points": int(n.size), "a": a, "b": b, "r2": float(r2), "rms_log": rms_log})
    return results


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


LOG_FORM = "a + b log n"
TREND_FASTER = 1.3  # a slope in log n that grows by more than this factor across the range is not a + b log n


def growth_verdict(fits: list[dict], trend: float) -> str:
    """How knee(n) grows, in words, from `fit_knee_scaling` rows and the `log_slope_trend`.

    Faster than logarithmic when another form fits better (lower RMS log error) than a + b log n,
    or when the slope in log n grows by more than TREND_FASTER across the range.
    """
    trend = float("nan") if trend is None else float(trend)
    judged = [f for f in fits if f["form"] in FIT_FORMS and f["rms_log"] is not None and not np.isnan(f["rms_log"])]
    if not judged:
        return "cannot be judged (fewer than three knees on the grid)"
    best = min(judged, key=lambda f: f["rms_log"])["form"]
    trend_text = ("too few knees to measure how the slope changes" if np.isnan(trend) else
                  f"the slope in log n changes by a factor {trend:.2f} across the range")
    if best != LOG_FORM or (not np.isnan(trend) and trend > TREND_FASTER):
        return (f"grows faster than a + b log n (best of the three forms by RMS log error: {best}; {trend_text}), "
                "so the data support the lower bound Ω(log n) but not Θ(log n)")
    return (f"is consistent with Θ(log n) on this grid (best form by RMS log error: {best}; {trend_text}); "
            "with few n values this cannot exclude faster growth")
