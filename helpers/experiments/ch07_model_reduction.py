"""Chapter 07: is extra query/key dimension redundant? Post-training truncation of W_q W_k^T on converged models.

    P = chapter.resolve(P)        # chapter 06's parameters (to find its models) and this chapter's own
    result = chapter.analyse(P)   # reads chapter 06's stored models, compresses them, fine-tunes, and MiniLM

For every chapter-06 setting (domain, n), the models at the largest d_qk (every seed) have each head's
W_q W_k^T (bias folded in) cut to rank r = 1 .. d_qk by SVD (`ch07_model_reduction_points`), scored with no
fine-tuning and, for the r of the chapter-06 grid, after a short fine-tuning. The comparison is the chapter-06 model
trained from scratch at d_qk = r (same architecture, value width fixed, trained to convergence by its stopping rule).

**Smallest r within 1 %**: the smallest r whose seed-mean test loss is at most (1 + `TOLERANCE`) times the seed-mean
uncompressed loss; its spread is the range of the same quantity per seed.
"""

import math
import time

import numpy as np
import pandas as pd

from .. import english, minilm, parameters, rank, robust, saturation, scaling
from ..results import ChapterResult, Verdict
from . import ch06_real_data as ch06
from . import run_sweep
from .ch07_model_reduction_points import ENERGY, RTOL, compression_point, minilm_point, qk_parameters  # noqa: F401

EXPERIMENT_COMPRESSION = "ch7_compression_converged"
EXPERIMENT_MINILM = "ch7_minilm_compression"
TOLERANCE = 0.01          # "within 1 %" of the uncompressed loss
Z = 2.0                   # two standard errors separate "better" from "indistinguishable"
MINILM_CORPORA = ["bbc", "shakespeare"]
DEFAULTS = {              # name -> (quick, full)
    "FINETUNE_STEPS": (20, 100),    # about 5 % of chapter 06's step cap
    "MINILM_SENTENCES": (4, 16),
    "MINILM_TOKENS": (32, 32),
    "MINILM_RANKS": ([1, 2, 4, 8, 16, 32], list(range(1, 33))),
    "MINILM_FINETUNE_STEPS": (3, 10),
}
MINILM_FINETUNE_RANKS = [1, 4, 8]
MINILM_FINETUNE_SENTENCES = 8   # per corpus, other snippets than the test ones
MINILM_FINETUNE_LR = 1e-4
FINETUNE_LR_RATIO = 0.3   # fine-tuning learning rate, as a share of chapter 06's


def resolve(P):
    """Chapter 06's defaults (the same models) and this chapter's own; checks between parameters."""
    P = ch06.resolve(P)
    P.fill_mode_defaults(DEFAULTS)
    parameters.require(max(P.MINILM_RANKS) <= 32, "MINILM_RANKS", P.MINILM_RANKS,
                       "integers 1 .. 32 (all-MiniLM-L6-v2 has query/key width 32)")
    return P


def finetune_lr(P, domain: str) -> float:
    """`FINETUNE_LR_RATIO` times chapter 06's peak learning rate for the domain."""
    return FINETUNE_LR_RATIO * ch06.learning_rate(domain, ch06.DomainSpec(**P.SPEC))


def finetune_widths(models: pd.DataFrame, d_max: int) -> dict:
    """{(domain, n): the widths below d_max at which chapter 06 trained models from scratch}: the ranks fine-tuned,
    so that every fine-tuned rank has its from-scratch comparison."""
    return {(d, int(n)): sorted(int(w) for w in part.d_head.unique() if w < d_max)
            for (d, n), part in models.groupby(["domain", "n"], sort=False)}


def compression_sweep(P, models: pd.DataFrame, progress: bool = True) -> pd.DataFrame:
    """Every chapter-06 setting's widest models (`models`: `ch06.model_table`) truncated to every r, and fine-tuned at
    the widths chapter 06 trained from scratch (stored)."""
    d_max = max(P.D_QK)
    ranks = list(range(1, d_max + 1))
    widths = finetune_widths(models, d_max)
    configs = []
    for config in ch06.setting_configs(P):
        part = models[(models.domain == config["domain"]) & (models.n == config["n"]) & (models.d_head == d_max)]
        configs.append(dict(**config, seeds=sorted(int(s) for s in part.seed), d_max=d_max, ranks=ranks,
                            finetune_ranks=widths[(config["domain"], config["n"])], finetune_steps=P.FINETUNE_STEPS,
                            finetune_lr=finetune_lr(P, config["domain"])))
    df = run_sweep(EXPERIMENT_COMPRESSION, compression_point, configs, [0], progress=progress)
    return df.drop(columns=["spec", "seeds", "ranks", "finetune_ranks"])


def minilm_sweep(P, progress: bool = True) -> pd.DataFrame:
    config = dict(corpora=MINILM_CORPORA, sentences=P.MINILM_SENTENCES, tokens=P.MINILM_TOKENS,
                  ranks=list(P.MINILM_RANKS), finetune_ranks=MINILM_FINETUNE_RANKS,
                  finetune_steps=P.MINILM_FINETUNE_STEPS, finetune_sentences=MINILM_FINETUNE_SENTENCES,
                  finetune_lr=MINILM_FINETUNE_LR)
    return run_sweep(EXPERIMENT_MINILM, minilm_point, [config], [P.SEED], progress=progress).drop(
        columns=["corpora", "ranks", "finetune_ranks"])


# ------------------------------------------------------------------------------------------------ tables

def smallest_within(r, loss, base: float, tolerance: float = TOLERANCE) -> float:
    """The smallest r (any order) whose loss is at most (1 + tolerance) * base; NaN when none is. The book's one
    saturation rule (`helpers.saturation`) with a known plateau: the reference is the uncompressed loss plus the
    tolerance, read at the ranks tried (no interpolation)."""
    point = saturation.saturation_point(r, -np.asarray(loss, dtype=float), reference=-(1 + tolerance) * base,
                                        within=0.0, interpolate="none")
    return point.value


def compression_curves(comp: pd.DataFrame) -> pd.DataFrame:
    """Per (domain, n, stage, r): mean and sd over seeds of the test loss, and the mean uncompressed loss."""
    return comp.groupby(["domain", "n", "stage", "r"], sort=False).agg(
        loss=("test_loss", "mean"), loss_sd=("test_loss", "std"), accuracy=("test_accuracy", "mean"),
        base_loss=("base_loss", "mean"), seeds=("test_loss", "size")).reset_index()


def reference_loss(part: pd.DataFrame) -> pd.Series:
    """The uncompressed loss each row is compared with: the trained model's for truncation alone; for fine-tuned
    rows the full-rank control fine-tuned the same way (same seed), so the extra steps get no credit."""
    if (part.stage == "finetuned").all():
        control = part[part.r == part.r.max()].set_index("seed").test_loss
        return part.seed.map(control)
    return part.base_loss


def smallest_r_table(comp: pd.DataFrame, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Per (domain, n, stage): the smallest r within `tolerance` of the uncompressed loss (seed means), the smallest
    value it could take on a grid with gaps (`r_low`, see `untried_below`), the range of the per-seed values, and the
    loss increase at that r."""
    rows = []
    for (domain, n, stage), part in comp.groupby(["domain", "n", "stage"], sort=False):
        part = part.assign(reference=reference_loss(part))
        means = part.groupby("r").test_loss.mean()
        base = float(part.groupby("seed").reference.first().mean())
        r_mean = smallest_within(means.index, means.to_numpy(), base, tolerance)
        per_seed = [smallest_within(g.r, g.test_loss, float(g.reference.iloc[0]), tolerance)
                    for _, g in part.groupby("seed")]
        rows.append({"domain": domain, "n": int(n), "stage": stage, "smallest_r": r_mean,
                     "r_low": saturation.lowest_possible(sorted(means.index), r_mean),
                     "seed_low": float(np.nanmin(per_seed)) if np.isfinite(per_seed).any() else math.nan,
                     "seed_high": float(np.nanmax(per_seed)) if np.isfinite(per_seed).any() else math.nan,
                     "base_loss": base, "loss_at_r": float(means.get(r_mean, math.nan)) if np.isfinite(r_mean) else math.nan,
                     "rank1_increase": float(means.get(1, math.nan) - base), "seeds": int(part.seed.nunique())})
    return pd.DataFrame(rows)


def scratch_comparison(comp: pd.DataFrame, models: pd.DataFrame, z: float = Z) -> pd.DataFrame:
    """Per (domain, n, r) of the fine-tuned grid: the fine-tuned truncated loss against the chapter-06 model
    trained from scratch at d_qk = r (means, standard errors over seeds, the steps each used, and the outcome of
    `better_outcome`).

    Fair to the compressed model: the short fine-tuning restarts the learning rate, which by itself changes the loss
    of the uncompressed full-rank control (per seed); that change is taken off the compressed
    model's loss of the same seed (`compressed_loss`), so neither side is credited or charged for the restart.
    `compressed_loss_raw` keeps the fine-tuned loss as measured."""
    tuned = comp[comp.stage == "finetuned"]
    rows = []
    for (domain, n), setting in tuned.groupby(["domain", "n"], sort=False):
        control = setting[setting.r == setting.r.max()].set_index("seed")
        change = control.test_loss - control.base_loss                      # the restart's own effect, per seed
        setting = setting.assign(adjusted=setting.test_loss - setting.seed.map(change).fillna(0.0))
        rows += _scratch_rows(domain, n, setting, models, z)
    return pd.DataFrame(rows)


def _scratch_rows(domain, n, setting: pd.DataFrame, models: pd.DataFrame, z: float) -> list[dict]:
    rows = []
    for r, part in setting.groupby("r", sort=False):
        scratch = models[(models.domain == domain) & (models.n == n) & (models.d_head == r) & models.valid]
        wide = models[(models.domain == domain) & (models.n == n) & (models.d_head == models.d_head.max()) & models.valid]
        if scratch.empty:
            continue
        a, b = part.adjusted.to_numpy(float), scratch.test_loss.to_numpy(float)
        row = {"domain": domain, "n": int(n), "r": int(r), "compressed_loss": a.mean(), "scratch_loss": b.mean(),
               "compressed_loss_raw": float(part.test_loss.mean()),
               "compressed_se": a.std(ddof=1) / math.sqrt(a.size) if a.size > 1 else math.nan,
               "scratch_se": b.std(ddof=1) / math.sqrt(b.size) if b.size > 1 else math.nan,
               "compressed_steps": float(wide.stop_step.mean()) + float(part.steps.iloc[0]),
               "scratch_steps": float(scratch.stop_step.mean()), "seeds": int(min(a.size, b.size))}
        row["outcome"] = better_outcome(row["compressed_loss"], row["compressed_se"], row["scratch_loss"],
                                        row["scratch_se"], row["seeds"], z)
        rows.append(row)
    return rows


def better_outcome(a: float, a_se: float, b: float, b_se: float, seeds: int, z: float = Z,
                   min_seeds: int = ch06.MIN_SEEDS) -> str:
    """"compressed" (a lower than b by more than z combined standard errors), "scratch" (the reverse),
    "indistinguishable", or "untestable" (fewer than `min_seeds` seeds or no standard error)."""
    if seeds < min_seeds or not (np.isfinite(a_se) and np.isfinite(b_se)):
        return "untestable"
    margin = z * math.hypot(a_se, b_se)
    if a < b - margin:
        return "compressed"
    if b < a - margin:
        return "scratch"
    return "indistinguishable"


BOOTSTRAP = 1000
GROWTH_WORDS = {"log": "growth of order log n or slower", "sqrt": "growth like the square root of n",
                "linear": "growth like n", "untestable": "no decided growth"}


def scaling_domain(smallest: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    """The domain with the most distinct n among the truncated rows of the settings that meet their bars, and its
    rows (a scaling in n is read inside a domain: across domains the task changes with n)."""
    part = smallest[(smallest.stage == "truncated") & smallest.included & np.isfinite(smallest.smallest_r)]
    if part.empty:
        return None, part
    counts = part.groupby("domain").n.agg(["nunique", "size"]).sort_values(["nunique", "size"], ascending=False)
    domain = str(counts.index[0])
    return domain, part[part.domain == domain].sort_values("n")


def seed_tables(comp: pd.DataFrame, domain: str, ns) -> list[np.ndarray]:
    """Per n, the truncated test losses as a `(ranks + 1, seeds)` array: one row per kept rank r (ascending), and a
    last row with each seed's uncompressed loss, so that a resample keeps a seed's curve and its reference together."""
    tables = []
    for n in ns:
        part = comp[(comp.stage == "truncated") & (comp.domain == domain) & (comp.n == n)]
        losses = part.pivot_table(index="r", columns="seed", values="test_loss").sort_index()
        base = part.groupby("seed").base_loss.first().reindex(losses.columns)
        tables.append(np.vstack([losses.to_numpy(float), base.to_numpy(float)[None, :]]))
    return tables


def _smallest_of(ranks):
    """The statistic for `scaling.resample_models`: the smallest r of a seed-mean curve whose last entry is the
    reference (the full width when none is within the tolerance, which truncation at full rank never misses)."""
    def statistic(curve):
        r = smallest_within(ranks, curve[:-1], curve[-1])
        return r if np.isfinite(r) else float(max(ranks))
    return statistic


def growth_fit(ns, tables, ranks, replicates: int, seed: int) -> tuple[np.ndarray, scaling.BootstrapForms]:
    """The smallest r per n (seed means) and the bootstrap fits of `helpers.scaling` over resampled seeds."""
    statistic = _smallest_of(ranks)
    ys = np.array([statistic(np.nanmean(t, axis=1)) for t in tables])
    reps = scaling.resample_models(tables, statistic, replicates, seed)
    return ys, scaling.bootstrap_forms(np.asarray(ns, float), ys, reps)


def scaling_check(comp: pd.DataFrame, smallest: pd.DataFrame, d_max: int, replicates: int = BOOTSTRAP,
                  seed: int = 0) -> tuple[dict, Verdict]:
    """How the smallest r within the tolerance (no fine-tuning) grows with n, within one domain: the forms of
    `helpers.scaling` fitted with a bootstrap over seeds, the growth class (`scaling.growth_outcome`), and the
    robustness check (`helpers.robust`: each seed left out, each n's smallest r moved by one rank). Untestable with
    fewer than `scaling.VERDICT_MIN_POINTS` distinct n, when a smallest r is the full width (censored: the grid
    cannot show more), when the forms cannot be told apart, or when a perturbation changes the answer. Returns (the
    fit as JSON-able data, the verdict)."""
    domain, part = scaling_domain(smallest)
    rule = (f"within one domain, the smallest r within {100 * TOLERANCE:g} % (no fine-tuning) at "
            f"{scaling.VERDICT_MIN_POINTS} or more n, none "
            "of them the full width, fitted with the forms of helpers.scaling and a bootstrap over seeds; decided "
            "only when no seed left out and no smallest r moved by one rank changes the answer")
    fit = {"domain": domain, "n": [int(n) for n in part.n], "smallest_r": [float(r) for r in part.smallest_r]}
    where = f" in {domain}" if domain else ""
    if part.empty:
        return fit, Verdict("untestable", "untestable at this budget: no setting that meets its bars has a smallest r "
                            "to fit", rule, fit)
    if part.n.nunique() < scaling.VERDICT_MIN_POINTS:
        sentence = (f"untestable at this budget: the settings that meet their bars give "
                    f"{english.plural(part.n.nunique(), 'value')} of n{where}, and a growth law needs at least "
                    f"{scaling.VERDICT_MIN_POINTS} within one domain")
        return fit, Verdict("untestable", sentence, rule, fit)
    ns = [int(n) for n in part.n]
    capped = [n for n, r in zip(ns, part.smallest_r) if r >= d_max]
    if capped:
        sentence = (f"untestable at this budget: the smallest r{where} is the full width {d_max} at n = "
                    f"{english.join([str(n) for n in capped])}, so the grid cannot show how much more it would need "
                    f"(smallest r {english.join([english.number(r) for r in part.smallest_r])} at n = "
                    f"{english.join([str(n) for n in ns])})")
        return fit, Verdict("untestable", sentence, rule, fit)
    ranks = sorted(comp[comp.stage == "truncated"].r.unique())
    ys, boot = growth_fit(ns, seed_tables(comp, domain, ns), ranks, replicates, seed)
    outcome = scaling.growth_outcome(boot)
    fit.update(best=boot.best, indistinguishable=list(boot.indistinguishable),
               forms={f: boot.point[f].coefficients for f in scaling.FORMS},
               loss={f: boot.point[f].loss for f in scaling.FORMS}, flat_slope=scaling.slope_is_flat(boot))
    values = (f"smallest r {english.join([english.number(r) for r in ys])} at n = {english.join([str(n) for n in ns])}"
              f"{where}")
    if outcome == "untestable":
        sentence = (f"untestable at this budget: {values}; the forms that fit as well as the best "
                    f"({english.join([scaling.FORM_LABELS[f] for f in boot.indistinguishable])}) include both a "
                    "logarithm and a power law")
    else:
        flat = "; its slope is not distinguishable from 0 (a constant fits as well)" if fit["flat_slope"] else ""
        sentence = f"{GROWTH_WORDS[outcome]}: {values}{flat}"
    verdict = Verdict(outcome, sentence, rule, fit)
    if outcome == "untestable":
        return fit, verdict
    perturbed = []
    seeds = sorted(comp[comp.stage == "truncated"].seed.unique())
    if len(seeds) >= 2:
        for label, s in robust.leave_one_out(seeds):
            rest = comp[comp.seed != s]
            perturbed.append((label, scaling.growth_outcome(
                growth_fit(ns, seed_tables(rest, domain, ns), ranks, replicates, seed)[1])))
    reps = scaling.resample_models(seed_tables(comp, domain, ns), _smallest_of(ranks), replicates, seed)
    for label, moved in robust.grid_steps({f"n = {n}": y for n, y in zip(ns, ys)}, ranks, name="smallest r"):
        shifted = reps + (np.array(list(moved.values())) - ys)[None, :]     # the replicates move with the point
        perturbed.append((label, scaling.growth_outcome(scaling.bootstrap_forms(
            np.asarray(ns, float), np.array(list(moved.values())), shifted))))
    verdict = robust.Robustness.of(outcome, perturbed).apply(verdict, words=GROWTH_WORDS)
    fit["robustness"] = verdict.evidence["robustness"]
    return fit, verdict


# ------------------------------------------------------------------------------------------------ verdict rules

def rule_verdict(smallest: pd.DataFrame, included: set, qk_share: dict) -> Verdict:
    """The practical rule "one query/key dimension is enough" (d_qk = 1): supported only if, in every setting that
    meets its bars, rank 1 is within 1 % of the uncompressed loss without fine-tuning; otherwise withdrawn, with the
    measured cost."""
    rows = smallest[(smallest.stage == "truncated") & smallest.apply(lambda r: (r.domain, r.n) in included, axis=1)]
    if rows.empty:
        return Verdict("untestable", "the rule that one query/key dimension is enough is untestable at this budget: no "
                       "setting meets its quality bars", rule="needs a setting that meets its bars",
                       evidence={"settings": 0})
    ok = rows[rows.smallest_r == 1]
    costs = english.span(*rank1_cost_pct(rows).agg(["min", "max"]), 2)
    if len(ok) == len(rows):
        sentence = (f"one query/key dimension is enough in {english.count_of(len(ok), len(rows), 'setting')}: cutting every head to rank 1 "
                    f"costs {costs} % of the loss and saves {english.percent(min(qk_share.values()))} or "
                    f"more of the query/key parameters")
        outcome = "supported"
    else:
        sentence = (f"one query/key dimension is not enough: rank 1 stays within 1 % of the uncompressed loss "
                    f"in only {english.count_of(len(ok), len(rows), 'setting')}, and costs {costs} % more loss")
        outcome = "withdrawn"
    return Verdict(outcome, sentence, rule="rank 1 within 1 % of the uncompressed seed-mean loss, no fine-tuning, in "
                   "every setting that meets its bars", evidence={"settings": int(len(rows)), "rank1_ok": int(len(ok))})


def scaling_text(growth: Verdict) -> str:
    """The growth verdict as a clause with its subject, for the prose ("By these rules, ..."): "the needed rank
    shows growth of order log n or slower: ..." or "how the needed rank grows is untestable at this budget: ..."."""
    if growth.outcome == "untestable":
        return f"how the needed rank grows is {growth.sentence}"
    return f"the needed rank shows {growth.sentence}"


def rank1_cost_pct(rows: pd.DataFrame) -> pd.Series:
    """The loss increase at rank 1, in % of the uncompressed loss, per row of `smallest_r_table`."""
    return 100 * rows.rank1_increase / rows.base_loss


def smallest_summary(smallest: pd.DataFrame, d_max: int) -> str:
    """One sentence for the chapter's summary: the span of the smallest r without fine-tuning over the settings that
    meet their bars (`smallest` has an `included` column)."""
    rows = smallest[(smallest.stage == "truncated") & smallest.included & np.isfinite(smallest.smallest_r)]
    if rows.empty:
        return "untestable at this budget: no setting that meets its quality bars has a smallest r on the grid"
    low, high = rows.smallest_r.min(), rows.smallest_r.max()
    first = rows.loc[rows.smallest_r.idxmin()]
    last = rows.loc[rows.smallest_r.idxmax()]
    if low == high:
        return (f"r = {english.number(low)} of the {d_max} dimensions without fine-tuning, in all "
                f"{english.plural(len(rows), 'setting')} that meet their bars")
    return (f"r = {english.number(low)} ({first.domain} at n = {first.n}) to {english.number(high)} "
            f"({last.domain} at n = {last.n}) of the {d_max} dimensions without fine-tuning, over the "
            f"{english.plural(len(rows), 'setting')} that meet their bars")


def scratch_verdict(table: pd.DataFrame) -> Verdict:
    """Counts of `better_outcome` over the (setting, r) comparisons."""
    counts = {k: int((table.outcome == k).sum()) if len(table) else 0
              for k in ("compressed", "scratch", "indistinguishable", "untestable")}
    total = sum(counts.values())
    testable = total - counts["untestable"]
    if testable == 0:
        sentence = "untestable at this budget (fewer than 3 seeds or no comparisons)"
        outcome = "untestable"
    else:
        sentence = (f"{english.count_of(testable, total, 'comparison')} could be judged; the truncated and fine-tuned "
                    f"wide model is better in {counts['compressed']}, the model trained from scratch in {counts['scratch']}, and "
                    f"they are indistinguishable (within {english.number(Z)} standard errors) in "
                    f"{counts['indistinguishable']}")
        outcome = max(("compressed", "scratch", "indistinguishable"), key=lambda k: counts[k])
    return Verdict(outcome, sentence, rule=f"better by more than {Z:g} combined standard errors over seeds",
                   evidence=counts)


# ------------------------------------------------------------------------------------------------ the chapter

def analyse(P) -> ChapterResult:
    """Read chapter 06's models (training any that are missing), compress, fine-tune, compare; and MiniLM."""
    result = ChapterResult()
    started = time.perf_counter()
    models = ch06.model_table(ch06.sweep(P))
    q = ch06.quality(models)
    comp = compression_sweep(P, models)
    result.frames["compression_seconds"] = time.perf_counter() - started
    curves = compression_curves(comp)
    smallest = smallest_r_table(comp)
    scratch = scratch_comparison(comp, models)
    included = {(r.domain, r.n) for _, r in q.iterrows() if r.included}
    smallest["included"] = [(r.domain, r.n) in included for _, r in smallest.iterrows()]
    fit, growth = scaling_check(comp, smallest, max(P.D_QK), seed=P.SEED)
    result.frames.update(compression_rows=comp, compression_curves=curves, smallest_r=smallest,
                         scratch=scratch, quality=q, scaling_fit=fit,
                         scratch_models=models[["domain", "n", "d_head", "seed", "test_loss", "stop_step", "valid"]])
    result.data.update(models=models, curves=curves)
    d_max = max(P.D_QK)
    qk_share = {}
    for (domain, n), part in comp[comp.stage == "truncated"].groupby(["domain", "n"]):
        row = part[part.r == 1].iloc[0]
        qk_share[(domain, n)] = 1 - row.qk_params / row.qk_params_full
    result.quote("ch7_d_max", d_max, "d")
    result.quote("ch7_finetune_steps", P.FINETUNE_STEPS, "d")
    result.quote("ch7_finetune_lr", ch06.lr_text(P.DOMAINS, ch06.DomainSpec(**P.SPEC), FINETUNE_LR_RATIO))
    tuned = sorted(set().union(*finetune_widths(models, d_max).values()))
    result.quote("ch7_finetune_ranks", f"the ranks at which chapter 06 trained models from scratch in the same setting "
                                       f"({english.join([str(r) for r in tuned])} across the settings) and at "
                                       f"r = {d_max}, the control")
    result.quote("ch7_tolerance_pct", 100 * TOLERANCE, "g")
    result.quote("ch7_included", english.count_of(len(included), len(q), "setting"))
    full_rank = curves[(curves.stage == "truncated") & (curves.r == d_max)]
    change = float((full_rank.loss - full_rank.base_loss).abs().max())
    result.quote("ch7_full_rank_change", change, digits=1)
    result.quote("ch7_full_rank_text", "leaves the loss exactly as it was" if change == 0 else
                 f"changes the loss by at most {english.number(change, 1)} nats (float rounding)")
    result.quote("ch7_smallest_summary", smallest_summary(smallest, d_max))
    control = curves[(curves.stage == "finetuned") & (curves.r == d_max)]
    change = 100 * (control.loss - control.base_loss) / control.base_loss
    result.quote("ch7_control_change", english.span(change.min(), change.max(), 2) + " %" if len(change) else "n/a")
    result.quote("ch7_control_direction", "raises" if (change > 0).all() else "lowers" if (change < 0).all() else "changes")
    result.verdict("ch7_rule", rule_verdict(smallest, included, qk_share))
    # the full-rank control is fine-tuned but not compressed: it is no comparison of compression with training small
    compared = scratch[[(r.domain, r.n) in included and r.r < d_max for _, r in scratch.iterrows()]] if len(scratch) \
        else scratch
    result.verdict("ch7_scratch", scratch_verdict(compared))
    result.verdict("ch7_scaling", growth)
    result.quote("ch7_scaling_text", scaling_text(growth))
    result.quote("ch7_min_points", scaling.VERDICT_MIN_POINTS, "d")
    minilm_r99 = _minilm(P, result)
    result.verdict("ch7_redundancy", redundancy_verdict(smallest, minilm_r99, P.MINILM_TOKENS))
    return result.done()


MINILM_COSINE = 0.99   # MiniLM's output counts as kept when its mean cosine to the uncut model is at least this


def log_budget(n: int) -> int:
    """The paper's critical head dimension read with constant 1: ceil(log2 n) dimensions."""
    return math.ceil(math.log2(n))


def redundancy_verdict(smallest: pd.DataFrame, minilm_r99: float, minilm_tokens: int) -> Verdict:
    """The paper's redundancy claim: head dimension beyond about log n can be removed. Per trained setting that meets
    its bars, the smallest r within the tolerance without fine-tuning, and for MiniLM the smallest r keeping the
    output's cosine at MINILM_COSINE, against `log_budget(n)`: "holds" when every one fits in it, "fails" when none
    does, "some" otherwise."""
    rule = (f"the smallest kept rank (loss within {100 * TOLERANCE:g} % without fine-tuning; MiniLM: output cosine at "
            f"least {MINILM_COSINE:g}) is at most ⌈log₂ n⌉")
    rows = smallest[(smallest.stage == "truncated") & smallest.included]
    cases = [(f"{r.domain} at n = {r.n}", float(r.smallest_r), log_budget(int(r.n))) for r in rows.itertuples()]
    if np.isfinite(minilm_r99):
        cases.append((f"all-MiniLM-L6-v2 at n = {minilm_tokens}", float(minilm_r99), log_budget(minilm_tokens)))
    if not cases:
        return Verdict("untestable", "untestable at this budget: no model to compress", rule, {"cases": 0})
    fits = [c for c in cases if np.isfinite(c[1]) and c[1] <= c[2]]
    parts = english.join([f"{english.number(r)} against {b} ({name})" for name, r, b in cases])
    sentence = (f"{english.count_of(len(fits), len(cases), 'model')} can be cut to about log n dimensions: the smallest "
                f"kept rank is {parts}")
    outcome = "holds" if len(fits) == len(cases) else "fails" if not fits else "some"
    return Verdict(outcome, sentence, rule, {"cases": len(cases), "within_log_n": len(fits)})


def r_cell(row) -> str:
    """The smallest r as a reader should take it: "5 to 16" when the grid leaves the ranks below it untried."""
    if not np.isfinite(row.smallest_r):
        return "none on the grid"
    return english.span_short(row.r_low, row.smallest_r)


def smallest_display(smallest: pd.DataFrame) -> pd.DataFrame:
    """`smallest_r_table` as the chapter's table: one row per setting (in run order) with the smallest r without
    fine-tuning, the range of the seeds' own answers, the smallest r after fine-tuning (`r_cell`) and the loss
    increase at rank 1."""
    rows = []
    for (domain, n), part in smallest.groupby(["domain", "n"], sort=False):
        by = {r.stage: r for _, r in part.iterrows()}
        t, f = by["truncated"], by.get("finetuned")
        rows.append({"setting": f"{domain}, n = {n}", "smallest r, no fine-tuning": r_cell(t),
                     "range over seeds": english.span_short(t.seed_low, t.seed_high),
                     "smallest r, fine-tuned": r_cell(f) if f is not None else "not run",
                     "loss at rank 1, no fine-tuning": f"+{english.number(float(rank1_cost_pct(part[part.stage == 'truncated']).iloc[0]), 2)} %"})
    return pd.DataFrame(rows).set_index("setting").rename_axis(index=None)   # the caption says "every setting"


def _minilm(P, result) -> None:
    df = minilm_sweep(P)
    comp = df[df.kind == "compression"].dropna(axis=1, how="all").sort_values("r")
    heads = df[df.kind == "head"].dropna(axis=1, how="all")
    tuned = df[df.kind == "finetuned"].dropna(axis=1, how="all").sort_values("r")
    result.frames.update(minilm_compression=comp, minilm_heads=heads, minilm_finetuned=tuned)
    result.data.update(minilm_compression=comp, minilm_heads=heads, minilm_finetuned=tuned)
    result.quote("ch7_minilm_ft_steps", P.MINILM_FINETUNE_STEPS, "d")
    result.quote("ch7_minilm_ft_sentences", int(tuned.train_sentences.iloc[0]), "d")
    result.quote("ch7_minilm_ft_lr", MINILM_FINETUNE_LR, "g")
    result.quote("ch7_minilm_ft_text", english.join(
        [f"r = {int(r.r)}: {r.cosine_before:.3f} before, {r.cosine_after:.3f} after" for _, r in tuned.iterrows()],
        separator="; "))
    facts = minilm.model_facts()
    result.quote("ch7_minilm_sentences", int(comp.sentences.iloc[0]), "d")
    result.quote("ch7_minilm_tokens", P.MINILM_TOKENS, "d")
    result.quote("ch7_minilm_dh", facts["d_head"], "d")
    for r in (1, 4, 8, 16):
        if r in set(comp.r):
            result.quote(f"ch7_minilm_cos_r{r}", float(comp[comp.r == r].cosine_mean.iloc[0]), ".3f")
    within = comp[comp.cosine_mean >= MINILM_COSINE]
    result.quote("ch7_minilm_r99", english.number(float(within.r.min())) if len(within) else "none on the grid")
    result.quote("ch7_energy_pct", 100 * ENERGY, ".0f")
    numerical = rank.label("numerical", RTOL)     # "numerical@1e-03", the book's one label format
    for col in ("energy_rank_logits", "energy_rank_weights", "hardmax", numerical, "weights_rank"):
        key = "numerical" if col == numerical else col
        result.quote(f"ch7_minilm_{key}_median", float(heads[col].median()), digits=3)
        result.quote(f"ch7_minilm_{key}_span", english.span(float(heads[col].min()), float(heads[col].max()), 3))
    return float(within.r.min()) if len(within) else math.nan
