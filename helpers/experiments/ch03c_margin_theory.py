"""Chapter 3c (why log n: a margin theory): Monte Carlo checks of the random-code law, optimised codes between the
two bounds, and how the needed dimension grows at a fixed logit scale and at one that grows like ln n.

The grid points live in `ch03c_margin_theory_points`; the theory in `helpers.margin`, the optimiser in
`helpers.code_search`. `analyse(P)` runs the sweeps and returns the chapter's `ChapterResult`.
"""

import math

import numpy as np
import pandas as pd

from .. import explorer, familywise, margin, parameters, scaling, seeding
from ..english import count_of, join, number
from ..results import ChapterResult, Verdict
from . import run_sweep
from .ch03c_margin_theory_points import code_point, convergence_point, mgf_point, prediction_point, random_code_point

DEFAULTS = {  # (quick, full)
    "N_VALUES": ([16, 64, 256], [16 * 2**k for k in range(9)]),
    "STEPS": (150, 300),
    "D_MAX": (32, 64),
    "PATTERN_N": ([64], [64, 256]),
    "MGF_SAMPLES": (200000, 1000000),
    "CODES": (4, 8),
    "SCHEDULER": (None, "processes"),   # where the optimiser's sweeps run: full mode on one worker per core
}
MGF_CASES = [(d, L) for d in (2, 4, 8, 16) for L in (2.0, 4.0, 9.0)]   # where Monte Carlo of exp(L u.v) is informative
RANDOM_CODE_N = (16, 64, 256)
PATTERN_L = 16.0
SPARSE_K = (2, 4)
UNSEEN_MAX = 0.05    # a Monte Carlo case is judged only when less than this share of its mean is beyond its draws' reach


def resolve(P):
    """Fill the mode defaults of `P` and check the constraints that link parameters."""
    P.fill_mode_defaults(DEFAULTS)
    parameters.require(len(P.SEEDS) >= 3, "SEEDS", P.SEEDS, "at least 3 seeds (a verdict rests on 3)")
    return P


def log_scale(n: int, c: float) -> float:
    """The logit scale c ln n of the series that grows with n."""
    return c * math.log(n)


# ------------------------------------------------------------------------------------------------ verdicts
def codes_for(n: int, codes: int, pairs: int) -> int:
    """Random codes of n keys for one Monte Carlo check: at least `codes`, and enough for `pairs` off-target pairs
    (a code has n (n - 1)), so that a small n is not checked on a few hundred draws."""
    return max(codes, math.ceil(pairs / (n * (n - 1))))


def unseen_share(L: float, d: int, draws: float) -> float:
    """The share of E[exp(L t)] (t = u.v of independent uniform unit vectors in d dimensions) that comes from t above
    its 1 - 1/draws quantile: events rarer than one in `draws`, which a Monte Carlo mean of that many draws mostly
    never sees. Large L and small d put much of the mean there (the heavy tail of exp(L t)).

    t has density proportional to (1 - t^2)^((d - 3)/2) on (-1, 1) (d = 1: t = +-1 with probability 1/2 each),
    and P(t > x) = I_{1 - x^2}((d - 1)/2, 1/2) / 2 for x >= 0."""
    from scipy import integrate, special

    if d == 1 or draws <= 2:
        return 0.0 if d == 1 else 1.0   # d = 1: every draw is +-1, and +1 comes every other draw
    x = math.sqrt(1 - special.betaincinv((d - 1) / 2, 0.5, 2 / draws))
    a = (d - 3) / 2   # the integrand is e^{L (t - 1)} (1 - t)^a (1 + t)^a (e^{-L} keeps it finite)
    # quad's algebraic weight takes the factor that is singular at an end: (1 - t)^a on (x, 1), (1 + t)^a on (-1, x)
    tail = integrate.quad(lambda t: math.exp(L * (t - 1)) * (1 + t) ** a, x, 1.0, weight="alg", wvar=(0, a),
                          limit=200)[0]
    body = integrate.quad(lambda t: math.exp(L * (t - 1)) * (1 - t) ** a, -1.0, x, weight="alg", wvar=(a, 0),
                          limit=200)[0]
    return tail / (tail + body)


def thresholds(table: pd.DataFrame, alpha: float = familywise.ALPHA) -> np.ndarray:
    """Each case's two-sided Bonferroni threshold over the len(table) cases of `table` (column dof: Student's t)."""
    return np.array([familywise.threshold(len(table), alpha, two_sided=True, dof=dof) for dof in table.dof])


def agreement_rule(alpha: float = familywise.ALPHA) -> str:
    """The rule of `agreement_verdict`, in words."""
    return (f"every |z| below its two-sided Bonferroni threshold at family-wise level {alpha:g} (Student's t); a case "
            f"is judged when less than {UNSEEN_MAX:g} of the mean comes from events rarer than one in its draws")


def agreement_verdict(table: pd.DataFrame, what: str, alpha: float = familywise.ALPHA) -> Verdict:
    """"agrees" when every judged case has |z| = |mc - exact| / se below its Bonferroni threshold at family-wise
    level `alpha` (Student's t with the case's `dof`: its standard error comes from dof + 1 draws), else "misses";
    "untestable" with no judged case. `table` has columns mc, exact, se, dof, and optionally `unseen`
    (`unseen_share` at the case's draws): a case with unseen >= UNSEEN_MAX is beyond Monte Carlo's reach, counted
    and named but not judged."""
    reach = table.unseen < UNSEEN_MAX if "unseen" in table else pd.Series(True, index=table.index)
    judged = table[reach]
    beyond = int((~reach).sum())
    rule = agreement_rule(alpha)
    left_out = "" if not beyond else (
        f"; {count_of(beyond, len(table), 'case')} {'is' if beyond == 1 else 'are'} beyond the reach of "
        f"{'its' if beyond == 1 else 'their'} draws (at least {number(100 * UNSEEN_MAX)} % of the mean from events "
        "rarer than one draw in all of them) and not judged")
    if judged.empty:
        return Verdict("untestable", f"{what} has no case Monte Carlo can judge{left_out}", rule,
                       {"cases": 0, "failed": 0, "beyond_reach": beyond})
    z = ((judged.mc - judged.exact) / judged.se).abs()
    limits = thresholds(judged, alpha)
    bad = int((z.to_numpy() >= limits).sum())
    worst = int(np.argmax(z.to_numpy() / limits))
    sentence = (f"{what} {'agrees with' if bad == 0 else 'misses'} Monte Carlo in "
                f"{count_of(len(z) - bad, len(z), 'case')} (largest deviation {number(float(z.iloc[worst]), 2)} "
                f"standard errors, against a threshold of {number(float(limits[worst]), 2)}){left_out}")
    return Verdict("agrees" if bad == 0 else "misses", sentence, rule,
                   {"cases": len(z), "failed": bad, "largest_z": float(z.max()), "beyond_reach": beyond,
                    "threshold_at_largest": float(limits[worst])})


def bounds_verdict(codes: pd.DataFrame) -> Verdict:
    """"holds" when every optimised d* of a free code lies between the bounds: at least the rank lower bound (every
    pattern here is a permutation or k-regular) and, for the permutation, at most ceil(d_rand) (the random code is a
    free permutation code; tied codes and spread patterns have no such upper bound)."""
    found = codes[codes.d_star.notna() & (codes.pattern != "tied")]
    perm = found.pattern == "permutation"
    upper = np.where(perm & np.isfinite(found.d_rand), np.ceil(found.d_rand), np.inf)
    inside = (found.d_star >= found.d_lower) & (found.d_star <= upper)
    held, total = int(inside.sum()), len(found)
    below_rand = int((found.d_star < upper)[perm].sum())
    searches = count_of(held, total, "search", "searches")
    sentence = (f"every free code's optimised smallest dimension lies between the two bounds ({searches})"
                if held == total else f"only {searches} put the optimised dimension between the two bounds")
    sentence += (f", and {count_of(below_rand, int(perm.sum()), 'permutation search', 'permutation searches')} "
                 "need fewer dimensions than the random code")
    return Verdict("holds" if held == total else "fails", sentence,
                   "rank_lower_bound <= d* (and d* <= ceil(random_code_dim) for the permutation)",
                   {"held": held, "searches": total, "below_random": below_rand})


def convergence_verdict(checks: pd.DataFrame, eps: float) -> Verdict:
    """"stable" when doubling the steps keeps every checked d*: the code at d* still reaches 1 - eps and the code at
    d* - 1 still does not; else "unstable", naming how many moved."""
    ok = (checks.mass_at >= 1 - eps) & (checks.mass_below < 1 - eps)
    held, total = int(ok.sum()), len(checks)
    sentence = (f"doubling the optimiser's steps leaves the smallest dimension unchanged in "
                f"{count_of(held, total, 'checked search', 'checked searches')}")
    if held < total:
        sentence += ("; in the others twice the steps reach the target one dimension lower, so the optimised "
                     "dimensions are upper bounds on the optimum, by at most about one dimension where checked")
    return Verdict("stable" if held == total else "unstable", sentence,
                   "with twice the steps, d* still reaches and d* - 1 still does not", {"held": held,
                                                                                     "checked": total})


def divergence_verdict(codes: pd.DataFrame, L: float, eps: float, d_max: int) -> Verdict:
    """At the fixed logit scale L: "diverges" when no optimised code of dimension <= d_max reaches 1 - eps at any n
    beyond the random code's divergence point, while every n below it is reached; "reaches" when an optimised code
    reaches beyond it; "untestable" when the grid has no n beyond it."""
    cut = margin.divergence_n(L, eps)
    part = codes[(codes.L == L) & (codes.pattern == "permutation")]
    beyond, before = part[part.n > cut], part[part.n <= cut]
    rule = f"at L = {number(L)}, no d <= d_max reaches 1 - eps for n > 1 + e^L eps/(1 - eps)"
    if beyond.empty:
        return Verdict("untestable", f"at L = {number(L)} the grid has no n beyond the random code's divergence point "
                       f"n = {number(cut, 4)}", rule, {"divergence_n": cut})
    reached = int(beyond.d_star.notna().sum())
    below_ok = int(before.d_star.notna().sum())
    evidence = {"divergence_n": cut, "beyond": len(beyond), "reached_beyond": reached, "before": len(before),
                "reached_before": below_ok, "d_max": d_max}
    if reached == 0:
        return Verdict("diverges", f"at L = {number(L)} no optimised code of dimension up to {d_max} reaches mean target "
                       f"mass {number(1 - eps)} for n beyond {number(cut, 4)} (0 of {len(beyond)} searches), where "
                       f"the random code's dimension becomes infinite; "
                       + ("the grid has no n below it" if before.empty else
                          f"below it {count_of(below_ok, len(before), 'search', 'searches')} "
                          f"{'reaches' if len(before) == 1 else 'reach'} it"),
                       rule, evidence)
    return Verdict("reaches", f"at L = {number(L)} optimised codes reach mean target mass {number(1 - eps)} beyond the "
                   f"random code's divergence point n = {number(cut, 4)} in "
                   f"{count_of(reached, len(beyond), 'search', 'searches')}",
                   rule, evidence)


def span_text(low, high, digits: int = 3) -> str:
    """"0.65 to 0.89", or one number when both ends agree at the digits shown."""
    a, b = number(float(low), digits), number(float(high), digits)
    return a if a == b else f"{a} to {b}"


def summary_table(codes: pd.DataFrame) -> pd.DataFrame:
    """Optimised d* per n (rows) and permutation series (columns), as "d* (lower bound to random code)" text:
    the seeds' range where they differ, "–" where no d up to d_max reached, "∞" for an infinite random code."""
    perm = codes[codes.pattern == "permutation"]
    rows = {}
    for (series, n), part in perm.groupby(["series", "n"]):
        d = part.d_star.dropna()
        found = "–" if d.empty else span_text(d.min(), d.max())   # "8 to 9", like the bounds after it
        rand = part.d_rand.iloc[0]
        upper = "∞" if not np.isfinite(rand) else number(math.ceil(rand))
        rows.setdefault(int(n), {})[series] = f"{found} ({number(part.d_lower.iloc[0])} to {upper})"
    order = sorted({s for r in rows.values() for s in r}, key=lambda s: (s.endswith("ln n"), len(s), s))
    return pd.DataFrame.from_dict(rows, orient="index")[order].rename_axis("n")


# ------------------------------------------------------------------------------------------------ the chapter
def analyse(P) -> ChapterResult:
    """Run every sweep of the chapter for resolved parameters `P` and return its frames, quotes and verdicts."""
    result = ChapterResult()
    q = result.quote
    q("ch3c_eps", P.EPS, digits=2)
    q("ch3c_eps_mass", 1 - P.EPS, digits=2)
    q("ch3c_l_values", join([number(L) for L in P.L_VALUES]))
    q("ch3c_n_min", min(P.N_VALUES), ",d")
    q("ch3c_n_max", max(P.N_VALUES), ",d")
    q("ch3c_seeds", len(P.SEEDS), "d")
    q("ch3c_steps", P.STEPS, ",d")
    q("ch3c_d_max", P.D_MAX, "d")
    q("ch3c_c", P.LOG_C, digits=3)
    q("ch3c_familywise_percent", 100 * familywise.ALPHA, digits=2)
    q("ch3c_unseen_percent", 100 * UNSEEN_MAX, digits=2)
    result.frames["definitions"] = {"logit_scale": "max |q . k| after the head's own scaling",
                                    "target_mass": "mean over rows of the softmax mass on the row's target keys "
                                                   "(minimum over rows reported too)", "eps": P.EPS}
    _monte_carlo(P, result)
    _codes(P, result)
    _explorer(P, result)
    return result.done()


def _explorer(P, result) -> None:
    """The explorer's grids: chapter 3b's predictor at every n of the chapter and d_h from 1 to D_MAX, and the
    random-code width on the explorer's L grid; recorded, so the page's readouts can be checked against them."""
    predictions = run_sweep("ch3c_predictions", prediction_point,
                            [{"n": n, "d_max": P.D_MAX, "eps": P.EPS} for n in P.N_VALUES], seeds=[0])
    codes = explorer.random_code_rows(P.N_VALUES, P.EPS)
    result.frames["explorer_predictions"] = predictions[["n", "d_head", "fraction", "critical"]]
    result.frames["explorer_codes"] = codes
    result.data["explorer"] = explorer.data(predictions, codes, P.EPS)


def _monte_carlo(P, result) -> None:
    mgf = run_sweep("ch3c_mgf", mgf_point, [{"d": d, "L": L, "samples": P.MGF_SAMPLES} for d, L in MGF_CASES],
                    seeds=[P.SEED])
    mgf["dof"] = mgf.samples - 1
    mgf["threshold"] = thresholds(mgf)   # every MGF case is judged (MGF_CASES: within Monte Carlo's reach)
    result.frames["mgf"] = mgf
    result.verdict("ch3c_mgf_verdict", agreement_verdict(mgf, "the closed form of the moment generating function"))
    rc = run_sweep("ch3c_random_code", random_code_point,
                   [{"n": n, "L": L, "eps": P.EPS, "codes": codes_for(n, P.CODES, P.MGF_SAMPLES)}
                    for n in RANDOM_CODE_N for L in P.L_VALUES], seeds=[P.SEED])
    rc = rc[rc.d.notna()].copy()
    rc["unseen"] = [unseen_share(L, int(d), codes * n * (n - 1)) for L, d, codes, n in zip(rc.L, rc.d, rc.codes, rc.n)]
    result.frames["random_code"] = rc
    ratio, mass = random_code_verdicts(rc, P.EPS, P.L_VALUES)
    result.verdict("ch3c_random_code_ratio", ratio)
    result.verdict("ch3c_random_code_mass", mass)


def random_code_verdicts(rc: pd.DataFrame, eps: float, L_values) -> tuple[Verdict, Verdict]:
    """The law's off-target ratio against Monte Carlo (`agreement_verdict`), and the target mass of random codes at
    the integer dimension above the law's reach, from the random-code cases `rc` with a finite dimension (columns
    n, L, codes, ratio, ratio_se, formula_ratio, mass, mass_se, unseen). Both untestable without a case."""
    mass_rule = "mean target mass + 3 s.e. >= 1 - eps"
    if rc.empty:   # every (n, L) is beyond the divergence point: no dimension is enough for a random code
        why = (f"no random code of any dimension reaches mean target mass {number(1 - eps)} at "
               f"L = {join([number(L) for L in L_values])} and n = {join(RANDOM_CODE_N)} (each n is beyond "
               "the divergence point), so there is no case to check")
        return (Verdict("untestable", f"the law's off-target ratio of random codes: {why}", agreement_rule(),
                        {"cases": 0, "failed": 0, "beyond_reach": 0}),
                Verdict("untestable", f"the target mass of random codes: {why}", mass_rule, {"cases": 0, "short": 0}))
    table = pd.DataFrame({"mc": rc.ratio, "exact": rc.formula_ratio, "se": rc.ratio_se, "dof": rc.codes - 1,
                          "unseen": rc.unseen})
    ratio = agreement_verdict(table, "the law's off-target ratio of random codes")
    short = rc[rc.mass + 3 * rc.mass_se < 1 - eps]
    mass = Verdict("holds" if short.empty else "fails",
                   (f"random codes at the integer dimension above the law's reach mean target mass at least "
                    f"{number(1 - eps)} in {count_of(len(rc) - len(short), len(rc), 'case')} "
                    f"(lowest {number(float(rc.mass.min()), 3)})"), mass_rule, {"cases": len(rc), "short": len(short)})
    return ratio, mass


def _codes(P, result) -> None:
    configs = [{"n": n, "L": float(L), "eps": P.EPS, "pattern": "permutation", "k": 1, "steps": P.STEPS,
                "d_max": P.D_MAX} for L in P.L_VALUES for n in P.N_VALUES]
    configs += [{"n": n, "L": round(log_scale(n, P.LOG_C), 6), "eps": P.EPS, "pattern": "permutation", "k": 1,
                 "steps": P.STEPS, "d_max": P.D_MAX} for n in P.N_VALUES]
    configs += [{"n": n, "L": PATTERN_L, "eps": P.EPS, "pattern": pattern, "k": k, "steps": P.STEPS,
                 "d_max": P.D_MAX} for n in P.PATTERN_N for pattern, k in
                [("sparse", k) for k in SPARSE_K] + [("tied", 1)]]
    codes = run_sweep("ch3c_codes", code_point, configs, seeds=list(P.SEEDS), executor=P.SCHEDULER)
    codes["series"] = np.where(codes.pattern != "permutation", codes.pattern + np.where(codes.k > 1, " k=" +
                               codes.k.astype(str), ""), np.where(codes.L.isin([float(L) for L in P.L_VALUES]),
                                                                 "L = " + codes.L.map(number), "L = c ln n"))
    result.frames["codes"] = codes.drop(columns=["tried"])
    result.data["tried"] = codes
    result.verdict("ch3c_bounds_verdict", bounds_verdict(codes))
    # the doubled-steps check: the first seed of the permutation cells at every other n (the first, third, ...
    # and the last), at every L, that found a d*
    checked_n = sorted(set(P.N_VALUES[::2]) | {max(P.N_VALUES)})
    first = codes[(codes.pattern == "permutation") & (codes.seed == P.SEEDS[0]) & codes.d_star.notna()
                  & codes.n.isin(checked_n)]
    check_configs = [{"n": int(r.n), "L": float(r.L), "eps": P.EPS, "pattern": "permutation", "k": 1,
                      "steps": 2 * P.STEPS, "d": int(r.d_star) + shift} for r in first.itertuples() for shift in (0, -1)]
    checks = run_sweep("ch3c_convergence", convergence_point, check_configs, seeds=[int(P.SEEDS[0])],
                       executor=P.SCHEDULER)
    mass = {(int(r.n), float(r.L), int(r.d)): float(r.mass) for r in checks.itertuples()}
    pairs = first[["n", "L", "d_star"]].assign(
        mass_at=[mass[(int(r.n), float(r.L), int(r.d_star))] for r in first.itertuples()],
        mass_below=[mass[(int(r.n), float(r.L), int(r.d_star) - 1)] for r in first.itertuples()])
    result.frames["convergence"] = pairs
    result.verdict("ch3c_convergence_verdict", convergence_verdict(pairs, P.EPS))
    result.verdict("ch3c_divergence_verdict", divergence_verdict(codes, float(min(P.L_VALUES)), P.EPS, P.D_MAX))
    # how d* grows with n at L = c ln n: the book's one knee verdict, a bootstrap over seeds, integer grid steps
    log_series = codes[codes.series == "L = c ln n"].pivot_table(index="seed", columns="n", values="d_star")
    ns = np.array(log_series.columns, dtype=float)
    gen = np.random.default_rng(seeding.derive_seed(P.SEED, "ch3c_log_series"))
    values = log_series.to_numpy()
    reps = np.stack([np.nanmean(values[gen.integers(0, len(values), len(values)), :], axis=0) for _ in range(200)])
    result.verdict("ch3c_log_scale_growth", scaling.knee_verdict(ns, np.nanmean(values, axis=0), reps,
                                                                 np.arange(1, P.D_MAX + 1),
                                                                 subject="the optimised dimension",
                                                                 points_word="sequence lengths"))
    ratio = codes[codes.d_star.notna() & np.isfinite(codes.d_rand) & (codes.pattern == "permutation")]
    ratio = ratio.d_star / np.ceil(ratio.d_rand)
    result.quote("ch3c_ratio_range", span_text(ratio.min(), ratio.max(), 2))
    low = codes[codes.d_star.notna() & (codes.pattern != "tied")]
    tied = codes[codes.pattern == "tied"]
    free = codes[(codes.pattern == "permutation") & (codes.L == PATTERN_L)].groupby("n").d_star.mean()
    tied_ratio = (tied.groupby("n").d_star.mean() / free).dropna()
    result.quote("ch3c_tied_ratio", span_text(tied_ratio.min(), tied_ratio.max(), 2) if len(tied_ratio)
                 else "not measured")
    result.data["summary"] = summary_table(codes)
    result.quote("ch3c_tied_range", span_text(tied.d_star.min(), tied.d_star.max())
                 if tied.d_star.notna().any() else "beyond the largest dimension tried")
    result.quote("ch3c_lower_gap", number(float((low.d_star / low.d_lower.clip(lower=1)).median()), 2))
