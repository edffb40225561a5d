"""Chapter 4: rank of random attention at initialization, swept over n, d_h, inputs, weight scale and layout.

The grid point (`rank_point`: random heads, every measure, three weight scales, hardmax and softmax) lives in
`ch04_random_attention_points`, so that edits here (the analysis, verdict rules and sentences) keep the cached
sweeps. This module runs the sweeps, pools seeds, and `analyse(P)` turns them into the chapter's `ChapterResult`.

A multi-head layer with `h` heads of size `d_h` has i.i.d. heads given the inputs, so the per-head rank depends
on the layout only through `d_model`: "heads_fixed" uses d_model = h * d_h, "dmodel_fixed" uses a fixed d_model.
"""

import math
import time

import numpy as np
import pandas as pd

from .. import attention, english, parameters, plotting, rank, saturation, seeding, theory
from ..results import ChapterResult, Verdict
from ..threads import torch_threads
from . import grid, run_sweep
from .ch04_random_attention_points import (DIAGNOSTICS, LAYOUTS, ORDER, RANK_MEASURES, RTOLS, SCALES,  # noqa: F401
                                          layout_d_model, rank_point, weight_std)

SATURATION_FRACTION = 0.95
LAYOUT_NAMES = {"heads_fixed": "heads fixed", "dmodel_fixed": r"$d_\mathrm{model}$ fixed"}   # for legends


def rank_sweep(n_values, d_heads, inputs, d_model: int, trials: int, seeds, progress: bool = False,
               threads: int | None = 1) -> pd.DataFrame:
    """Rank against d_h at a fixed d_model for every n and input kind (points cached in the result store). One sweep
    over every n, so that a process pool or cluster starts once."""
    configs = [c for n in n_values for c in grid(n=[n], d_head=list(d_heads), d_model=[d_model], inputs=list(inputs),
                                                 trials=[seeding.trials_for(n, trials)])]
    with torch_threads(threads):
        return _tidy(run_sweep("random_init_rank", rank_point, configs, list(seeds), progress=progress))


def layout_sweep(n_values, d_heads, heads: int, d_model: int, inputs: str, trials: int, seeds,
                 progress: bool = False, threads: int | None = 1) -> pd.DataFrame:
    """Rank against d_h in both multi-head layouts (d_h must divide d_model); one input kind.

    The "dmodel_fixed" points are the same configs as `rank_sweep` at this d_model, so they come from the store.
    """
    frames = []
    with torch_threads(threads):
        for layout in LAYOUTS:   # one sweep per layout over every n (a config can belong to both layouts)
            configs = [dict(n=n, d_head=d, d_model=layout_d_model(layout, d, heads, d_model), inputs=inputs,
                            trials=seeding.trials_for(n, trials)) for n in n_values for d in d_heads]
            df = run_sweep("random_init_rank", rank_point, configs, list(seeds), progress=progress)
            frames.append(df.assign(layout=layout, heads=[d_model // d if layout == "dmodel_fixed" else heads
                                                          for d in df.d_head]))
    return _tidy(pd.concat(frames, ignore_index=True))


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["rank_over_n"] = np.where(df.measure.isin(RANK_MEASURES), df["mean"] / df.n, np.nan)
    df["se_over_n"] = np.where(df.measure.isin(RANK_MEASURES), df.sd / np.sqrt(df.trials) / df.n, np.nan)
    return df


def pooled(df: pd.DataFrame, keys=("n", "d_head", "d_model", "inputs", "attention", "scale", "measure")) -> pd.DataFrame:
    """Average seeds: mean of the per-seed means, and a standard error from all heads."""
    keys = [k for k in keys if k in df.columns]
    out = df.groupby(keys, sort=True).agg(mean=("mean", "mean"), sd=("sd", "mean"), trials=("trials", "sum"),
                                          n_seeds=("seed", "nunique")).reset_index()
    return _tidy(out)


def saturation_d_head(d_heads, ranks, level: float = SATURATION_FRACTION) -> saturation.Saturation:
    """Where a mean-rank curve saturates: the first d_h at `level` of its value at the largest d_h of the grid
    (reference "last", baseline 0, interpolated in log d_h); see `helpers.saturation`."""
    return saturation.saturation_point(d_heads, ranks, reference="last", level=level, interpolate="log")


def select(frame: pd.DataFrame, **where) -> pd.DataFrame:
    """Rows of `frame` whose columns equal the given values, e.g. `select(df, attention="hardmax", n=64)`."""
    mask = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        mask &= frame[column].to_numpy() == value
    return frame[mask]


# ------------------------------------------------------------------------------------------------ verdict rules
Z_BOUND = 2.0        # a point is below / above the bound when more than 2 standard errors away
Z_EXCEED = 3.0       # a hardmax point "exceeds" the bound when more than 3 standard errors above it
FALL_Z, FALL_SLACK = 3.0, 0.5   # a curve "falls" when it drops more than 3 standard errors + 0.5 (in rank units)


def verdict(value: float, se: float, bound: float, z: float = Z_BOUND) -> str:
    """"below", "above" or "at" the bound, with a margin of `z` standard errors."""
    if value + z * se < bound:
        return "below"
    if value - z * se > bound:
        return "above"
    return "at"


def condition_verdict(outcomes) -> str:
    """One condition over its input kinds: "below" (all below), "above" (all above), else "mixed"."""
    outcomes = list(outcomes)
    if not outcomes:
        raise ValueError("condition_verdict needs at least one outcome")
    if all(o == "below" for o in outcomes):
        return "below"
    if all(o == "above" for o in outcomes):
        return "above"
    return "mixed"


RANK_LOWER_BOUNDS = ("effective", "stable")   # at most the rank, and they move with the logit scale


def why_not_a_test(measure: str, scale: str) -> str | None:
    """Why a condition cannot test the barrier, or None when it can.

    The barrier bounds a count of independent rows. A soft measure (effective or stable rank) is at most that count and
    moves with the logit scale, so being below the bound proves nothing. At the `init` scale the softmax is nearly
    uniform and its numerical rank is set by d_h + 1 and the tolerance, not by which key each row picks.
    """
    if measure in RANK_LOWER_BOUNDS:
        return "soft measure"
    if scale == "init" and measure != "hardmax":
        return "near-uniform softmax"
    return None


def falls_back(peak: float, peak_se: float, last: float, z: float = FALL_Z, slack: float = FALL_SLACK) -> bool:
    """Whether a curve's last value lies clearly below its peak: by more than `z` standard errors + `slack`."""
    return peak - last > z * peak_se + slack


def falls_below_running_max(means, ses, z: float = FALL_Z, slack: float = FALL_SLACK) -> bool:
    """Whether a curve (in d_h order) ever drops below its running maximum by more than z sqrt(2) se + slack
    (sqrt(2): the difference of two independent means)."""
    means, ses = np.asarray(means, dtype=float), np.asarray(ses, dtype=float)
    drop = np.maximum.accumulate(means) - means
    return bool((drop > z * math.sqrt(2) * ses + slack).any())


def exceedance_verdict(z_scores, z: float = Z_EXCEED) -> Verdict:
    """How many hardmax points lie more than `z` standard errors above their bound, and how close the nearest is."""
    z_scores = np.asarray(z_scores, dtype=float)
    count, worst = int((z_scores > z).sum()), float(z_scores.max())
    closest = english.signed(worst, "standard error", above="above", below="below")
    if count == 0:
        sentence = (f"none of the {english.plural(z_scores.size, 'point')} lies more than {english.number(z)} standard "
                    f"errors above the bound for its sequence length (the highest is {closest} it)")
    else:
        sentence = (f"{english.count_of(count, z_scores.size, 'point')} lie more than {english.number(z)} standard "
                    f"errors above the bound for their sequence length (the highest is {closest} it)")
    return Verdict("never" if count == 0 else "exceeds", sentence,
                   rule=f"a point exceeds the bound when it is more than {z:g} standard errors above it",
                   evidence={"points": int(z_scores.size), "exceeding": count, "max_z": worst, "z": z})


def init_trend_verdict(peak: float, peak_se: float, last: float) -> Verdict:
    """Whether the init-scale numerical rank at the largest n falls back from its peak as d_h grows."""
    falls = falls_back(peak, peak_se, last)
    sentence = ("falls back: more head dimension gives less numerical rank, because the logit energy is spread over "
                "more directions" if falls else
                "has not yet fallen back on this grid, because the largest dₕ is below or near dₕ*")
    return Verdict("falls" if falls else "flat", sentence,
                   rule=f"falls when peak - last > {FALL_Z:g} s.e. of the peak + {FALL_SLACK:g}",
                   evidence={"peak": peak, "peak_se": peak_se, "last": last})


# ------------------------------------------------------------------------------------------------ the chapter
DEFAULTS = {"N_VALUES": ([32, 64], [64, 128, 256, 512]), "D_HEADS": ([1, 2, 3, 4, 8, 16, 32, 64],
            [1, 2, 3, 4, 6, 8, 16, 32, 64, 128, 256]), "D_MODEL": (128, 512), "TRIALS": (12, 48),
            "SCHEDULER": (None, "processes")}   # (quick, full); full mode: one worker per core
NUM3, NUM8, NUM2 = (rank.label("numerical", t) for t in (1e-3, 1e-8, 1e-2))   # headline, paper's old, coarse
SOFT_MEASURES = (NUM3, NUM8, "effective")
LAYOUT_PANELS = (("hardmax", "unit", "hardmax"), ("softmax", "unit", NUM3), ("softmax", "init", NUM3))
SAT_CONDITIONS = (("hardmax", "unit", "hardmax", None), ("hardmax", "unit", "hardmax", "gaussian"),
                  ("softmax", "unit", NUM3, None), ("softmax", "unit", "effective", None), ("softmax", "raw", NUM3, None))


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved) and check the constraints that link parameters."""
    P.fill_mode_defaults(DEFAULTS)
    P["INPUTS"] = P.default("INPUTS", list(attention.INPUT_KINDS))
    parameters.require(P.D_MODEL >= max(P.D_HEADS), "D_MODEL", P.D_MODEL,
                       f"an integer >= the largest d_h ({max(P.D_HEADS)})")
    if {"orthonormal", "near_orthonormal"} & set(P.INPUTS):
        parameters.require(P.D_MODEL >= max(P.N_VALUES), "D_MODEL", P.D_MODEL,
                           f"an integer >= the largest n ({max(P.N_VALUES)}), since orthonormal inputs need d_model >= n")
    parameters.require(len(layout_d_heads(P)) >= 2, "D_HEADS", P.D_HEADS,
                       f"a list with at least two divisors of D_MODEL = {P.D_MODEL} (for the d_model-fixed layout)")
    return P


def layout_d_heads(P) -> list[int]:
    """The d_h of the grid that divide D_MODEL: the layout comparison's grid."""
    return [d for d in P.D_HEADS if P.D_MODEL % d == 0]


def reference_input(inputs) -> str:
    """The paper's idealized input kind when it is swept, else the first kind."""
    return "orthonormal" if "orthonormal" in inputs else inputs[0]


def analyse(P) -> ChapterResult:
    """Run every sweep of the chapter for resolved parameters `P` and return its frames, quotes and verdicts."""
    result = ChapterResult()
    started = time.perf_counter()
    raw = rank_sweep(P.N_VALUES, P.D_HEADS, P.INPUTS, P.D_MODEL, P.TRIALS, [P.SEED])
    curves = pooled(raw)                       # one row per (n, d_h, input, attention, scale, measure)
    result.frames["sweep_seconds"] = time.perf_counter() - started
    result.data.update(raw=raw, curves=curves, bound={n: theory.expected_hardmax_rank(n) / n for n in P.N_VALUES})
    _grid(P, curves, result)
    _hardmax(P, curves, result)
    _softmax(P, curves, result)
    _init_scale(P, curves, result)
    _small_d_head(P, curves, result)
    _saturation(P, curves, result)
    _layouts(P, result)
    _summary(P, curves, result)
    return result.done()


def _grid(P, curves, result) -> None:
    keep = (((curves.attention == "softmax") & (curves.measure != "hardmax"))
            | ((curves.attention == "hardmax") & (curves.measure == "hardmax") & (curves.scale == "unit")))
    result.frames["curves"] = curves[keep][["n", "d_head", "d_model", "inputs", "attention", "scale", "measure", "mean",
                                            "sd", "trials", "rank_over_n", "se_over_n"]]
    n_max, n_min, ref = max(P.N_VALUES), min(P.N_VALUES), reference_input(P.INPUTS)
    for name, value in [("d_model", P.D_MODEL), ("n_max", n_max), ("n_min", n_min), ("d_max", max(P.D_HEADS)),
                        ("d_min", min(P.D_HEADS)), ("heads_at_nmax", seeding.trials_for(n_max, P.TRIALS)),
                        ("heads_at_nmin", seeding.trials_for(n_min, P.TRIALS)), ("heads", P.HEADS),
                        ("layout_d_max", max(layout_d_heads(P)))]:
        result.quote(f"ch4_{name}", int(value), "d")
    result.quote("ch4_ref_input", ref)
    result.quote("ch4_layout_input", P.LAYOUT_INPUT)
    diag = select(curves, attention="softmax", n=n_max, d_head=max(P.D_HEADS), inputs=ref).set_index(["scale", "measure"])
    for scale in SCALES:
        result.quote(f"ch4_logit_sd_{scale}", float(diag.loc[(scale, "logit_sd"), "mean"]), digits=2)
        result.quote(f"ch4_peak_{scale}", float(diag.loc[(scale, "peak_n"), "mean"]), digits=3)
    result.data["logit_sd_init"] = float(diag.loc[("init", "logit_sd"), "mean"])


def _hardmax(P, curves, result) -> None:
    n_max, d_max, ref, bound = max(P.N_VALUES), max(P.D_HEADS), reference_input(P.INPUTS), result.data["bound"]
    hard = select(curves, attention="hardmax", scale="unit", measure="hardmax").copy()
    hard["bound"] = hard.n.map(bound)
    hard["z"] = (hard.rank_over_n - hard.bound) / hard.se_over_n.clip(lower=1e-12)
    result.data["hard"] = hard
    top = select(hard, d_head=d_max, n=n_max).set_index("inputs")
    result.quote("ch4_hard_ref_top", float(top.loc[ref, "rank_over_n"]), ".3f")
    result.quote("ch4_hard_ref_top_se", float(top.loc[ref, "se_over_n"]), ".3f")
    result.quote("ch4_bound_top", bound[n_max], ".4f")
    result.quote("ch4_hard_gap", bound[n_max] - float(top.loc[ref, "rank_over_n"]), ".3f")
    result.quote("ch4_hard_low_input", str(top.rank_over_n.idxmin()))
    result.quote("ch4_hard_low_top", float(top.rank_over_n.min()), ".3f")
    result.quote("ch4_hard_high_input", str(top.rank_over_n.idxmax()))
    result.quote("ch4_hard_high_top", float(top.rank_over_n.max()), ".3f")
    exceedance = result.verdict("ch4_hard_exceedance", exceedance_verdict(hard.z))
    # the claims ledger's row for random attention at initialization reads these three
    result.frames["ch4_hard_exceed"] = exceedance.evidence["exceeding"]
    result.frames["ch4_hard_points"] = exceedance.evidence["points"]
    result.frames["ch4_hard_max_z"] = exceedance.evidence["max_z"]
    result.quote("ch4_hard_dmin_max", float(select(hard, d_head=min(P.D_HEADS))["mean"].max()), ".2f")


def _softmax(P, curves, result) -> None:
    n_max, d_max, ref, bound = max(P.N_VALUES), max(P.D_HEADS), reference_input(P.INPUTS), result.data["bound"]
    soft = select(curves, attention="softmax", inputs=ref)
    result.data["soft"] = soft
    for scale in SCALES:
        at_top = select(soft, scale=scale, n=n_max, d_head=d_max).set_index("measure")
        for key, measure in [("num3", NUM3), ("num8", NUM8), ("num2", NUM2), ("eff", "effective"), ("stable", "stable")]:
            result.quote(f"ch4_soft_{scale}_{key}", float(at_top.loc[measure, "rank_over_n"]), ".3f")
    unit3 = select(soft, scale="unit", measure=NUM3, d_head=d_max)
    result.quote("ch4_unit_num3_min_over_n", float(unit3.rank_over_n.min()), ".3f")
    excess = float(select(unit3, n=n_max).rank_over_n.iloc[0]) - bound[n_max]
    result.frames["unit_excess_over_n"] = excess
    result.quote("ch4_unit_excess", english.signed(excess, "n", above="above", below="below", digits=2))
    gap = (select(soft, scale="raw", measure=NUM3).set_index(["n", "d_head"]).rank_over_n
           - select(result.data["hard"], inputs=ref).set_index(["n", "d_head"]).rank_over_n)
    result.quote("ch4_raw_vs_hard_maxdiff", float(gap.abs().max()), ".3f")
    result.quote("ch4_raw_vs_hard_maxdiff_dh", int(gap.abs().idxmax()[1]), "d")
    result.quote("ch4_raw_vs_hard_top", abs(float(gap.loc[(n_max, d_max)])), ".3f")


def _init_scale(P, curves, result) -> None:
    n_max, ref = max(P.N_VALUES), reference_input(P.INPUTS)
    init = select(curves, attention="softmax", scale="init", measure=NUM3, inputs=ref).copy()
    init["dh_plus_1"] = np.minimum(init.d_head + 1, init.n)
    result.quote("ch4_init_dstar", (result.data["logit_sd_init"] / 1e-3) ** 2, ".1f")
    result.quote("ch4_init_violations", int((init["mean"] > init.dh_plus_1 + 1e-9).sum()), "d")
    result.quote("ch4_init_points", len(init), "d")
    peak = select(init, n=n_max).sort_values("d_head")
    best = peak.loc[peak["mean"].idxmax()]
    result.quote("ch4_init_peak_rank", float(best["mean"]), ".2f")
    result.quote("ch4_init_peak_dh", int(best.d_head), "d")
    result.quote("ch4_init_top_rank", float(peak["mean"].iloc[-1]), ".2f")
    result.verdict("ch4_init_trend", init_trend_verdict(float(best["mean"]), float(best.sd / np.sqrt(best.trials)),
                                                        float(peak["mean"].iloc[-1])))


def _small_d_head(P, curves, result) -> None:
    n_max, ref = max(P.N_VALUES), reference_input(P.INPUTS)
    at_n = select(curves, inputs=ref, n=n_max)
    result.data["small"] = at_n[(at_n.d_head <= 16) & at_n.measure.isin(["hardmax", NUM3, "effective"])]
    falling = []
    for (attn, scale, measure), part in at_n.groupby(["attention", "scale", "measure"]):
        if measure not in RANK_MEASURES or (attn == "hardmax" and scale != "unit"):
            continue
        part = part.sort_values("d_head")
        if falls_below_running_max(part["mean"], part["sd"] / np.sqrt(part["trials"])):
            falling.append(f"softmax {plotting.measure_text(measure, powers=True)} ({scale})" if attn == "softmax" else "hardmax rank")
    result.frames["non_monotone_at_n_max"] = falling
    result.quote("ch4_nonmono_list", english.join(falling))
    dmin = select(curves, inputs=ref, n=n_max, d_head=min(P.D_HEADS), attention="softmax").set_index(["scale", "measure"])
    for scale in SCALES:
        result.quote(f"ch4_dmin_{scale}_num3", float(dmin.loc[(scale, NUM3), "mean"]), ".1f")
    result.quote("ch4_dmin_hard", float(dmin.loc[("unit", "hardmax"), "mean"]), ".2f")


def _saturation(P, curves, result) -> None:
    ref, n_max, n_min = reference_input(P.INPUTS), max(P.N_VALUES), min(P.N_VALUES)
    rows = []
    for attn, scale, measure, kind in SAT_CONDITIONS:
        kind = kind or ref
        if kind not in P.INPUTS:
            continue
        label = saturation_label(attn, scale, measure, kind)
        for n in P.N_VALUES:
            part = select(curves, attention=attn, scale=scale, measure=measure, inputs=kind, n=n)
            point = saturation_d_head(part.d_head, part["mean"])
            rows.append({"condition": label, "n": n, "ln_n": math.log(n), "saturation_d_head": point.value,
                         "status": point.status, "ratio_to_ln_n": point.value / math.log(n)})
    table = pd.DataFrame(rows)
    result.frames["saturation_d_head"] = table
    hard = table[table.condition == saturation_label("hardmax", "unit", "hardmax", ref)].set_index("n").saturation_d_head
    unit = table[table.condition == saturation_label("softmax", "unit", NUM3, ref)].set_index("n").saturation_d_head
    result.quote("ch4_sat_level", f"{100 * SATURATION_FRACTION:g} %")
    result.quote("ch4_sat_hard_nmin", float(hard[n_min]), ".1f")
    result.quote("ch4_sat_hard_nmax", float(hard[n_max]), ".1f")
    result.quote("ch4_sat_hard_growth", float(hard[n_max] / hard[n_min]), ".2f")
    result.quote("ch4_ln_growth", math.log(n_max) / math.log(n_min), ".2f")
    result.quote("ch4_n_growth", n_max / n_min, ".0f")
    result.quote("ch4_sat_moves", "moves up" if hard[n_max] > hard[n_min] else "does not move up")
    result.quote("ch4_sat_hard_ratio_nmax", float(hard[n_max] / math.log(n_max)), ".1f")
    result.quote("ch4_sat_unit_nmin", float(unit[n_min]), ".1f")
    result.quote("ch4_sat_unit_nmax", float(unit[n_max]), ".1f")
    result.verdict("ch4_sat_edges", saturation_edges_verdict(table))


def saturation_label(attention_kind: str, scale: str, measure: str, inputs: str) -> str:
    """A saturation curve's name: "hardmax rank (orthonormal)", "softmax numerical, tol 10⁻³ (unit, orthonormal)"."""
    if attention_kind == "hardmax":
        return f"hardmax rank ({inputs})"
    return f"softmax {plotting.measure_text(measure, powers=True)} ({scale}, {inputs})"


def saturation_edges_verdict(table: pd.DataFrame) -> Verdict:
    """Which saturation points are not inside the grid (saturated at the smallest d_h already)."""
    edge = table[table.status != saturation.INSIDE]
    names = [f"{r.condition} at n = {r.n}" for r in edge.itertuples()]
    sentence = ("Every one of these curves saturates inside the grid." if not names else
                f"Already saturated at the smallest dₕ (so the value is an upper bound): {english.join(names, separator='; ')}.")
    return Verdict("inside" if not names else "edge", sentence,
                   rule="a curve saturated at its first grid point reports that point as an upper bound",
                   evidence={"curves": len(table), "at_edge": len(names)})


def _layouts(P, result) -> None:
    n_max = max(P.N_VALUES)
    layouts = layout_sweep(P.N_VALUES, layout_d_heads(P), P.HEADS, P.D_MODEL, P.LAYOUT_INPUT, P.TRIALS, [P.SEED])
    layouts = layouts.groupby(["layout", "n", "d_head", "d_model", "heads", "attention", "scale", "measure"],
                              as_index=False).agg(mean=("mean", "mean"), sd=("sd", "mean"), trials=("trials", "sum"))
    layouts["rank_over_n"] = layouts["mean"] / layouts.n
    layouts["se_over_n"] = layouts.sd / np.sqrt(layouts.trials) / layouts.n
    result.data["layouts"] = layouts
    result.frames["layout_comparison"] = layouts[layouts.measure.isin(["hardmax", NUM3, "effective"])][
        ["layout", "n", "d_head", "d_model", "heads", "attention", "scale", "measure", "rank_over_n", "se_over_n"]]
    wide = layouts.pivot_table(index=["attention", "scale", "measure", "n", "d_head"], columns="layout",
                               values="rank_over_n").reset_index()
    wide["diff"] = wide.heads_fixed - wide.dmodel_fixed
    for key, (attn, scale, measure) in zip(["hard", "unit3", "init3"], LAYOUT_PANELS):
        part = select(wide, attention=attn, scale=scale, measure=measure)
        worst = part.loc[part["diff"].abs().idxmax()]
        result.quote(f"ch4_layout_{key}_maxdiff", float(worst["diff"]), "+.3f")
        result.quote(f"ch4_layout_{key}_maxabs", abs(float(worst["diff"])), ".3f")
        result.quote(f"ch4_layout_{key}_maxdiff_dh", int(worst.d_head), "d")
        result.quote(f"ch4_layout_{key}_maxdiff_n", int(worst.n), "d")
        big = select(part, n=n_max, d_head=max(layout_d_heads(P))).iloc[0]
        result.quote(f"ch4_layout_{key}_top_hf", float(big.heads_fixed), ".3f")
        result.quote(f"ch4_layout_{key}_top_df", float(big.dmodel_fixed), ".3f")


def condition_name(attention_kind: str, measure: str, scale: str) -> str:
    """A summary row's name: "hardmax rank (any scale)" or "softmax numerical, tol 10⁻³, unit" (no e-notation)."""
    return "hardmax rank (any scale)" if attention_kind == "hardmax" else f"softmax {plotting.measure_text(measure, powers=True)}, {scale}"


def _summary(P, curves, result) -> None:
    n_max, bound = max(P.N_VALUES), result.data["bound"]
    top = curves[(curves.d_head == max(P.D_HEADS)) & curves.measure.isin(RANK_MEASURES)]
    top = top[((top.attention == "softmax") & (top.measure != "hardmax"))
              | ((top.attention == "hardmax") & (top.measure == "hardmax") & (top.scale == "unit"))].copy()
    top["condition"] = [condition_name(a, m, s) for a, m, s in zip(top.attention, top.measure, top.scale)]
    top["bound"] = top.n.map(bound)
    top["verdict"] = [verdict(v, s, b) for v, s, b in zip(top.rank_over_n, top.se_over_n, top.bound)]
    result.frames["rank_over_n_at_largest_d_head"] = top[["condition", "attention", "scale", "measure", "inputs", "n",
                                                          "d_head", "rank_over_n", "se_over_n", "bound", "verdict"]]
    last = top[top.n == n_max]
    outcome = last.groupby("condition").verdict.agg(condition_verdict)
    reasons = {c: why_not_a_test(m, s) for c, m, s in zip(last.condition, last.measure, last.scale)}
    table = last.pivot(index="condition", columns="inputs", values="rank_over_n")
    table["bound"] = bound[n_max]
    table["barrier holds?"] = outcome.map({"below": "yes (below)", "above": "no (above)", "mixed": "mixed"})
    table["barrier holds?"] = [f"not a test: {reasons[c]}" if reasons[c] else holds
                               for c, holds in zip(table.index, table["barrier holds?"])]
    order = {"yes (below)": 0, "no (above)": 1, "mixed": 2}     # the tests first, then the conditions that are not
    table = table.assign(_order=table["barrier holds?"].map(order).fillna(3))
    table = table.sort_values(["_order", "barrier holds?", "condition"]).drop(columns="_order")
    result.frames["summary_table"] = table.reset_index()
    tests = outcome[[reasons[c] is None for c in outcome.index]]   # the counts: only conditions that can test it
    groups = {kind: sorted(tests[tests == kind].index) for kind in ("below", "above", "mixed")}
    result.quote("ch4_n_conditions", len(tests), "d")
    result.quote("ch4_n_not_tests", len(outcome) - len(tests), "d")
    result.quote("ch4_n_holds", len(groups["below"]), "d")
    result.quote("ch4_n_fails", len(groups["above"]), "d")
    result.quote("ch4_n_mixed", len(groups["mixed"]), "d")
    unit_numerical = [c for c in outcome.index if c.endswith(", unit") and "numerical" in c]
    result.quote("ch4_unit_numerical_fails", sum(c in groups["above"] for c in unit_numerical), "d")
    result.quote("ch4_unit_numerical_total", len(unit_numerical), "d")


def summary_view(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary table as the chapter shows it, narrow enough for the page: one row per condition, named on one line
    and without the words the caption says ("numerical 10⁻³, unit", "hardmax (any scale)"),
    one column per input kind, and whether the barrier holds; the bound, one value at this n, goes to the caption."""
    view = summary.set_index("condition").drop(columns="bound").rename(columns=lambda c: c.replace("_", " "))
    names = [c.removeprefix("softmax ").replace(", tol", "").replace("hardmax rank", "hardmax") for c in view.index]
    view.index = [english.on_one_line(name) for name in names]
    # each answer and each reason on one line, the reason after "not a test:" free to start a line
    shown = {"not a test: near-uniform softmax": "not a test: near\u2011uniform",   # a no-break hyphen
             "not a test: soft measure": "not a test: " + english.on_one_line("soft measure")}
    view["barrier holds?"] = [shown.get(v, english.on_one_line(v)) for v in view["barrier holds?"]]
    return view.rename_axis(index=None, columns=None)
