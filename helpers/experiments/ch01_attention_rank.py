"""Chapter 1 (what is the rank of an attention matrix?): one random head under every measure, matrices whose rank
is known, the hardmax rank as a column count, the numerical rank against tolerance and logit scale, and the
d_h + 1 rule of near-uniform attention at the standard initialization scale.

Everything here is small (one n x n head, a few dozen more), so nothing goes through the result store; every draw
comes from generators seeded by `SEED`. `analyse(P)` returns the chapter's `ChapterResult`.
"""

import math

import mpmath
import numpy as np
import pandas as pd
import torch

from .. import attention, english, parameters, rank, seeding, theory
from ..results import ChapterResult, Verdict

DEFAULTS = {"TRIALS": (8, 64), "SCALES": (11, 21)}            # (quick, full): matrices per point, logit scales
TOLERANCES = (1e-1, 1e-2, 1e-3, 1e-5, 1e-8, 1e-12)             # relative tolerances of the numerical rank
HEADLINE, PAPER = rank.label("numerical", 1e-3), rank.label("numerical", 1e-8)   # the book's, the paper's earlier
SCALE_RANGE = (-1, 4)                                            # log10 of the logit scale beta = sqrt(d_h) / T
DET_N, DET_D_HEAD, DET_DIGITS = 8, 2, 60                         # the exact determinant check
HEATMAP_TOKENS = 16                                              # queries and keys shown in the heat maps
RULE_MAX_D_HEAD = 64                                             # the d_h + 1 rule: powers of two up to this, below n


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved) and check that the scale grid contains beta = 1."""
    P.fill_mode_defaults(DEFAULTS)
    decades = SCALE_RANGE[1] - SCALE_RANGE[0]
    parameters.require((P.SCALES - 1) % decades == 0, "SCALES", P.SCALES,
                       f"1 + {decades:g} k for an integer k (so that the grid contains the usual scale 1)")
    return P


def rule_d_heads(n: int, d_head: int) -> list[int]:
    """The head dimensions of the d_h + 1 check: powers of two below n (at most RULE_MAX_D_HEAD), and the chapter's d_h."""
    grid = {2**k for k in range(int(math.log2(RULE_MAX_D_HEAD)) + 1) if 2**k < n}
    return sorted(grid | ({d_head} if d_head < n else set()))


def power_text(x: float) -> str:
    """A number for the prose without e-notation: "3.7 × 10⁻⁷" when tiny, "0.042" otherwise."""
    return english.number(x, 2, power=True)


# ------------------------------------------------------------------------------------------------ verdict rules
RULE_CLOSE = 0.9     # "about d_h + 1": the mean rank is at least 90 % of d_h + 1 at every d_h of the check


def agreement_verdict(agree: int, total: int) -> Verdict:
    """Does counting distinct argmax columns give the SVD rank of the one-hot matrix, matrix by matrix?"""
    outcome = "agree" if agree == total else "disagree"
    sentence = (f"the two computations agree on all {english.plural(total, 'random matrix', 'random matrices')}"
                if agree == total else
                f"the two computations agree on only {english.count_of(agree, total, 'random matrix', 'random matrices')}")
    return Verdict(outcome, sentence, rule="agree when the counts are equal for every matrix",
                   evidence={"agree": int(agree), "matrices": int(total)})


def _dims(low: int, high: int) -> str:
    """"from 1 to 16" or "= 4": a range of head dimensions after "dₕ"."""
    text = english.span(low, high)
    return text if text.startswith("from") else f"= {text}"


def _share_text(shares) -> str:
    """"67 %" or "from 40 % to 67 %": shares of d_h + 1 in words."""
    low, high = english.percent(min(shares)), english.percent(max(shares))
    return low if low == high else f"from {low} to {high}"


def d_head_rule_verdict(table: pd.DataFrame) -> Verdict:
    """Is the numerical rank at 1e-3 of near-uniform attention "about d_h + 1"?

    `table` has one row per d_h (ascending) with `ceiling` (min(d_h + 1, n)), `mean`, `max` and `draws`. A d_h is
    "close" when its mean rank is at least RULE_CLOSE of the ceiling. Outcomes: "exceeds" (some draw is above its
    ceiling), "about" (no draw above, every d_h close), "about for small d_h" (the close d_h are the smallest ones),
    "at most" (no draw above, no d_h close), "mixed" (close and far d_h interleave).
    """
    table = table.sort_values("d_head")
    share = (table["mean"] / table.ceiling).to_numpy()
    close = share >= RULE_CLOSE
    above = int((table["max"] > table.ceiling).sum())
    draws = int(table.draws.sum())
    d_heads = table.d_head.astype(int).tolist()
    near = [d for d, c in zip(d_heads, close) if c]
    far = [(d, s) for d, s, c in zip(d_heads, share, close) if not c]
    evidence = {"draws": draws, "d_heads_above": above, "close": near, "shares": dict(zip(d_heads, share.tolist()))}
    rule = (f"no draw may exceed min(d_h + 1, n); a d_h is close when its mean rank is >= {RULE_CLOSE:g} of it")
    if above:
        sentence = (f"at {english.count_of(above, len(table), 'head dimension')} some draw has a numerical rank at "
                    f"tolerance 10⁻³ above dₕ + 1")
        return Verdict("exceeds", sentence, rule, evidence)
    start = f"in none of the {english.plural(draws, 'draw')} is the numerical rank at tolerance 10⁻³ above dₕ + 1"
    within = f"within {english.percent(1 - RULE_CLOSE)} of dₕ + 1"
    far_text = (f"at dₕ = {english.join([d for d, _ in far])} it is {_share_text([s for _, s in far])} of it"
                if far else "")
    if not far:
        outcome, sentence = "about", f"{start}, and its mean is {within} at every dₕ {_dims(d_heads[0], d_heads[-1])}"
    elif not near:
        outcome, sentence = "at most", f"{start}, but its mean is never {within} ({far_text})"
    elif near == d_heads[:len(near)]:
        outcome = "about for small d_h"
        sentence = f"{start}, and its mean is {within} for dₕ {_dims(near[0], near[-1])} ({far_text})"
    else:
        outcome = "mixed"
        sentence = f"{start}; its mean is {within} at dₕ = {english.join(near)} ({far_text})"
    return Verdict(outcome, sentence, rule, evidence)


# ------------------------------------------------------------------------------------------------ the chapter
def analyse(P) -> ChapterResult:
    """Every number, table and verdict of chapter 1 for resolved parameters `P`."""
    result = ChapterResult()
    gen = seeding.torch_generator(P.SEED)          # one stream, drawn in page order
    logits = attention.random_logits(P.N, P.D_HEAD, generator=gen)[0]           # (n, n)
    result.data["logits"] = logits
    result.quote("ch1_n", P.N, "d")
    result.quote("ch1_d_head", P.D_HEAD, "d")
    _spectrum(P, logits, result)
    _determinant(gen, result)
    _known(P, logits, result)
    _hardmax_count(P, gen, result)
    _tolerance_sweep(P, gen, result)
    _d_head_rule(P, result)
    return result.done()


def temperature(P) -> float:
    """The usual temperature, T = sqrt(d_h)."""
    return math.sqrt(P.D_HEAD)


def _spectrum(P, logits, result) -> None:
    A = attention.softmax_attention(logits, temperature(P))                        # (n, n), rows sum to 1
    sigma = rank.singular_values(A)                                                 # (n,)
    values = rank.measures_from_sigma(sigma, ("numerical", "effective"), TOLERANCES)
    result.data.update(A=A, relative=(sigma / sigma[0]).numpy())
    result.frames["spectrum_ranks"] = {label: int(v) for label, v in values.items() if label.startswith("numerical")}
    ratio = float(sigma[-1] / sigma[0])
    result.frames["sigma_ratio"] = ratio
    result.quote("ch1_sigma_ratio", power_text(ratio))
    result.quote("ch1_rank_tol_1e3", int(values[HEADLINE]), "d")
    result.quote("ch1_rank_tol_1e8", int(values[PAPER]), "d")
    result.quote("ch1_erank_single", float(values["effective"]), ".1f")
    result.quote("ch1_hardmax_single", int(rank.hardmax_rank(A)), "d")


def _determinant(gen, result) -> None:
    """|det softmax(L)| of a small head (n = 8, d_h = 2) in 60-digit arithmetic: not zero."""
    small = attention.random_logits(DET_N, DET_D_HEAD, generator=gen)[0].numpy()     # (8, 8)
    with mpmath.workdps(DET_DIGITS):
        exact = mpmath.matrix([[mpmath.e ** mpmath.mpf(float(v)) for v in row] for row in small])
        for i in range(exact.rows):
            total = sum(exact[i, j] for j in range(exact.cols))
            for j in range(exact.cols):
                exact[i, j] /= total
        det = float(abs(mpmath.det(exact)))
    result.frames["det_exact"] = det
    result.quote("ch1_det_exact", power_text(det))
    result.quote("ch1_det_n", DET_N, "d")
    result.quote("ch1_det_d_head", DET_D_HEAD, "d")
    result.quote("ch1_det_digits", DET_DIGITS, "d")
    result.quote("ch1_hardmax_small", int(rank.hardmax_rank(torch.as_tensor(small))), "d")


def known_matrices(logits: torch.Tensor, T: float) -> dict[str, torch.Tensor]:
    """Four constructed matrices and one random head `(n, n)`, by name."""
    n = logits.shape[-1]
    causal_logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return {"uniform": torch.full((n, n), 1.0 / n, dtype=torch.float64),        # T -> infinity
            "identity": torch.eye(n, dtype=torch.float64),                      # each token attends to itself
            "causal softmax": attention.softmax_attention(causal_logits, T),     # lower triangular, positive diagonal
            "random softmax": attention.softmax_attention(logits, T),
            "random hardmax": attention.hardmax_attention(logits)}              # T -> 0


def _known(P, logits, result) -> None:
    matrices = known_matrices(logits, temperature(P))
    rows = [{"matrix": name, **{m: float(v) for m, v in rank.measures(matrix, rank.MEASURES, (1e-3, 1e-8)).items()}}
            for name, matrix in matrices.items()]
    known = pd.DataFrame(rows)
    result.frames["known_matrices"] = known
    result.data["known"] = known.set_index("matrix")
    causal = matrices["causal softmax"]
    result.quote("ch1_causal_min_diag", power_text(float(torch.diagonal(causal).min())))
    result.quote("ch1_causal_numerical", int(result.data["known"].loc["causal softmax", HEADLINE]), "d")
    result.quote("ch1_causal_hardmax", int(result.data["known"].loc["causal softmax", "hardmax"]), "d")


def _hardmax_count(P, gen, result) -> None:
    batch = attention.random_logits(P.N, P.D_HEAD, batch=P.TRIALS, generator=gen)          # (trials, n, n)
    by_counting = rank.hardmax_rank(batch)                                                  # (trials,)
    one_hot = attention.hardmax_attention(batch)
    by_svd = rank.numerical_rank_from_sigma(rank.singular_values(one_hot), rtol=1e-9)     # sigma_j = sqrt(m_j)
    agree = int((by_counting == by_svd).sum())
    result.quote("ch1_hardmax_agreement", 100 * agree / P.TRIALS, ".0f")
    result.quote("ch1_trials", P.TRIALS, "d")
    result.verdict("ch1_agreement", agreement_verdict(agree, P.TRIALS))


def _tolerance_sweep(P, gen, result) -> None:
    scales = np.logspace(*SCALE_RANGE, P.SCALES)
    logits = attention.random_logits(P.N, P.D_HEAD, batch=P.TRIALS, generator=gen)         # (trials, n, n)
    rows = []
    for beta in scales:
        sigma = rank.singular_values(attention.softmax_attention(logits, temperature(P) / beta))   # (trials, n)
        for label, values in rank.measures_from_sigma(sigma, ("numerical", "effective", "stable"), TOLERANCES).items():
            rows.append({"scale": float(beta), "measure": label, "rank": float(values.mean()),
                         "rank_over_n": float(values.mean()) / P.N})
    sweep = pd.DataFrame(rows)
    hardmax = float(rank.hardmax_rank(logits).double().mean())
    result.frames["tolerance_sweep"] = sweep
    result.data.update(tolerance_sweep=sweep, hardmax_fraction=hardmax / P.N)
    at_one = sweep[np.isclose(sweep.scale, 1.0)].set_index("measure")
    coldest = sweep[sweep.scale == scales.max()].set_index("measure").rank_over_n
    result.quote("ch1_hardmax_fraction", hardmax / P.N, ".3f")
    for key, tol in (("1e8", 1e-8), ("1e3", 1e-3), ("1e1", 1e-1)):
        result.quote(f"ch1_frac_tol{key}_at1", float(at_one.loc[rank.label("numerical", tol), "rank_over_n"]), ".2f")
    result.quote("ch1_frac_erank_at1", float(at_one.loc["effective", "rank_over_n"]), ".2f")
    result.quote("ch1_rank_tol1e3_at1", float(at_one.loc[HEADLINE, "rank"]), ".1f")
    result.quote("ch1_frac_tol1e3_hot", float(coldest[HEADLINE]), ".2f")
    result.quote("ch1_scale_max", float(scales.max()), ".0f")
    # the hot end: a loose tolerance already counts one direction while a tight one still counts most
    hottest = sweep[sweep.scale == scales.min()].set_index("measure").rank_over_n
    result.quote("ch1_scale_min", float(scales.min()), ".1f")
    for key, tol in (("1e3", 1e-3), ("1e8", 1e-8)):
        result.quote(f"ch1_frac_tol{key}_hottest", float(hottest[rank.label("numerical", tol)]), ".2f")
    result.quote("ch1_bound_fraction", theory.expected_hardmax_rank(P.N) / P.N, ".3f")


def _d_head_rule(P, result) -> None:
    """Numerical rank at 1e-3 against d_h at the standard scale, next to d_h + 1; and the crossover d_h*."""
    gen = seeding.torch_generator(seeding.derive_seed(P.SEED, "d_h + 1"))   # its own stream: the page's draws stay
    rows, logit_sd = [], {}
    for d in rule_d_heads(P.N, P.D_HEAD):
        logits = attention.random_logits(P.N, d, batch=P.TRIALS, generator=gen)            # (trials, n, n)
        scaled = logits / math.sqrt(d)                                                      # S = L / T
        logit_sd[d] = float(scaled.std())
        ranks = rank.numerical_rank(attention.softmax_attention(logits, math.sqrt(d)), rtol=1e-3).double()
        rows.append({"d_head": d, "ceiling": min(d + 1, P.N), "mean": float(ranks.mean()), "min": int(ranks.min()),
                     "max": int(ranks.max()), "draws": int(ranks.numel()), "logit_sd": logit_sd[d]})
    table = pd.DataFrame(rows)
    result.frames["d_head_rule"] = table
    result.data["d_head_rule"] = table
    s = float(np.mean(list(logit_sd.values())))
    # d_h singular values of about s / sqrt(d_h) each stay above the tolerance while d_h < (s / tol)^2
    result.quote("ch1_logit_sd", s, digits=2)
    result.quote("ch1_dstar", (s / 1e-3) ** 2, ".0f")
    result.verdict("ch1_dh_rule", d_head_rule_verdict(table))
