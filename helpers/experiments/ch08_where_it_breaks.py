"""Chapter 8, "Where the barrier breaks": counterexamples, temperature, positions and depth, trained heads.

The grid points (`counterexample_point`, `temperature_point`, `depth_point`, `trained_point`) live in
`ch08_where_it_breaks_points`, so that edits here (the analysis, verdict rules and sentences) keep the cached
sweeps and trained models. This module runs the sweeps (`run_*`, tidy DataFrames), and `analyse(P)` turns them into
the chapter's `ChapterResult`: the recorded frames, the numbers the prose quotes and the verdicts with their rules.
"""

import math

import numpy as np
import pandas as pd

from .. import counterexamples as cx, english, parameters, seeding, theory
from ..results import ChapterResult, Verdict
from ..threads import torch_threads
from . import grid, run_sweep
from .ch08_where_it_breaks_points import (ARCHS, EXAMPLES, MEASURES, ORDER, POSITIONS, RTOLS,  # noqa: F401
                                          TEMPERATURE_HEADS, arch_fields, counterexample_point, depth_point,
                                          head_logits, layer_states, measure_all, temperature_point, trained_point)

# (quick, full) defaults of the parameters left at None
DEFAULTS = {"N": (32, 64), "TEMPERATURES": (np.logspace(-5, 3, 17).tolist(), np.logspace(-5, 3, 33).tolist()),
            "TRIALS": (4, 8), "DEPTH": (4, 8), "TASKS": (["reversal", "copy"], ["reversal", "copy", "sorting", "recall"]),
            "TRAIN_STEPS": (150, 400), "TRAIN_SEEDS": (1, 2)}
DEPTH_N, DEPTH_VOCAB, DEPTH_D_MODEL, DEPTH_HEADS, DEPTH_BATCH = 32, 16, 64, 4, (4, 8)   # (quick, full) batch
TRAIN_N, TRAIN_D_MODEL, TRAIN_HEADS, TRAIN_LAYERS, TRAIN_EXAMPLES = 16, 32, 2, 2, 32
NUM3, NUM8 = MEASURES[2], MEASURES[4]     # "numerical@1e-03" (headline), "numerical@1e-08"
SHORT = {"identity": "id", "previous_token": "prev", "causal_random": "causal", "uniform_causal": "ucausal",
         "random_softmax": "rand"}
TAGS = {"hardmax": "hm", NUM3: "num3", "effective": "eff", "stable": "st", NUM8: "num8"}
# how the page's tables name the heads, the depth study's factors and the trained-model summary (data keys stay as is)
HEAD_NAMES = {"identity": "identity", "previous_token": "previous-token", "causal_random": "causal, random logits",
              "uniform_causal": "causal, uniform limit C", "uniform": "uniform limit", "random_softmax": "random, softmax",
              "random_hardmax": "random, hardmax", "random": "random (mean)"}
DEPTH_FACTORS = {"pos": "positions", "arch": "blocks", "norm": "LayerNorm"}
TRAINED_COLUMNS = {"accuracy": "test accuracy", "heads": "heads", "breaking": "heads breaking the barrier",
                   "max_hardmax_over_n": "largest hardmax rank / n", "mean_hardmax_over_n": "mean hardmax rank / n"}

# ------------------------------------------------------------------------------------------------ verdict rules
CLOSED_RTOL = 1e-3      # a measured rank matches its closed form within 1e-3 (relative and absolute)
BREAK_SDS = 3.0         # a head breaks the barrier above E[rank] + 3 standard errors of a mean of i.i.d. draws
SOLVED = 0.9            # a task counts as learned at this mean test accuracy
COLLAPSED = 1e-3        # token states count as collapsed below this relative residual
KEPT = 0.1              # ... and as kept apart above this one


def closed_form_verdict(ranks, forms, rtol: float = CLOSED_RTOL) -> Verdict:
    """Whether every measured rank with a closed form matches it (|rank - form| <= rtol + rtol |form|)."""
    ranks, forms = np.asarray(ranks, dtype=float), np.asarray(forms, dtype=float)
    ok = np.isclose(ranks, forms, rtol=rtol, atol=rtol)
    matches, total = int(ok.sum()), int(ok.size)
    tolerance = english.number(rtol, 1, power=True)
    if total and matches == total:
        sentence = f"all {total} entries that have a closed form match it to within {tolerance}"
    else:
        sentence = (f"only {english.count_of(matches, total, 'entry', 'entries')} that have a closed form match it to "
                    f"within {tolerance}")
    return Verdict("match" if total and matches == total else "mismatch", sentence,
                   rule=f"a rank matches its closed form when |rank - form| <= {rtol:g} (1 + |form|)",
                   evidence={"entries": total, "matching": matches, "rtol": rtol})


def general_barrier_verdict(hardmax_ranks: dict, barrier: float, n: int) -> Verdict:
    """Does the barrier bind heads in general? `hardmax_ranks`: {head name: hardmax rank} of constructed heads.
    One head above the barrier refutes it ("fails"); otherwise "holds"."""
    above = [name for name, r in hardmax_ranks.items() if r > barrier]
    ranks = english.join([f"{english.number(r)} ({name} head)" for name, r in hardmax_ranks.items()])
    sentence = f"hardmax rank {ranks} at n = {n}, against the barrier {english.number(barrier, 3)}"
    if above:
        sentence += (f"; the {english.join(above)} {'heads are' if len(above) > 1 else 'head is'} above it, so the "
                     "barrier is a statement about random heads")
    return Verdict("fails" if above else "holds", sentence, rule="one constructed head above the barrier refutes it",
                   evidence={"ranks": hardmax_ranks, "barrier": barrier, "n": n})


def causal_verdict(exact_rank: float, hardmax_rank: float, n: int) -> Verdict:
    """A random causal head: "full_rank" when its numerical rank at 1e-8 is n (lower triangular with a positive
    diagonal), "not_full" otherwise."""
    sentence = (f"numerical rank {english.number(exact_rank)} of n = {n} at tolerance {english.number(1e-8, power=True)}, "
                f"hardmax rank {english.number(hardmax_rank)}")
    return Verdict("full_rank" if exact_rank == n else "not_full", sentence,
                   rule="the numerical rank at relative tolerance 1e-8 equals n",
                   evidence={"numerical_rank": exact_rank, "hardmax_rank": hardmax_rank, "n": n})


def bounds_verdict(share: float) -> Verdict:
    """Whether the cold-gap and hot-gap bounds held on every matrix (`share` = fraction of checks that held)."""
    if share == 1.0:
        return Verdict("hold", "Both bounds held on every matrix of the sweep",
                       rule="both bounds hold on every matrix", evidence={"share": share})
    return Verdict("violated", f"The bounds failed on {english.percent(1 - share)} of the checks",
                   rule="both bounds hold on every matrix", evidence={"share": share})


def lukewarm_verdict(peak: float, barrier: float) -> Verdict:
    """Whether a random head's numerical rank at 1e-3 rises above the barrier somewhere between the two limits."""
    exceeds = peak > barrier
    sentence = ("the softmax of a random head exceeds the barrier under the numerical measure" if exceeds else
                "the softmax of a random head stays below the barrier under the numerical measure, even at its peak")
    return Verdict("exceeds" if exceeds else "below", sentence, rule="the peak over temperature > the barrier",
                   evidence={"peak": peak, "barrier": barrier})


def breaking_threshold(n: int, examples: int, sds: float = BREAK_SDS) -> float:
    """Mean hardmax rank over `examples` inputs above which a head is said to break the barrier:
    E[rank] of the balls-in-bins bound plus `sds` standard errors of a mean of `examples` i.i.d. draws."""
    return theory.expected_hardmax_rank(n) + sds * math.sqrt(theory.hardmax_rank_variance(n) / examples)


def trained_verdict(breaking_by_task: dict[str, int], heads: int | dict[str, int],
                    accuracy_by_task: dict | None = None) -> Verdict:
    """How many trained heads break the barrier, and on which tasks (`breaking_by_task`: task -> breaking heads;
    `heads`: all trained heads, or task -> heads). With `accuracy_by_task`, only the tasks whose models learned
    (mean test accuracy at least SOLVED) count, in the breaking heads and, when `heads` is per task, in the heads
    they are counted out of; the verdict is "untestable" when no task was learned."""
    learned = None if accuracy_by_task is None else {t for t, a in accuracy_by_task.items() if a >= SOLVED}
    if isinstance(heads, dict):
        heads = int(sum(k for t, k in heads.items() if learned is None or t in learned))
    if learned is not None:
        if not learned:
            return Verdict("untestable", f"untestable at this budget: no task's models reached a test accuracy of "
                           f"{english.percent(SOLVED)}", rule=f"only tasks learned to {SOLVED:g} accuracy count",
                           evidence={"heads": heads, "learned": 0})
        breaking_by_task = {t: k for t, k in breaking_by_task.items() if t in learned}
    total = int(sum(breaking_by_task.values()))
    tasks = [task for task, k in breaking_by_task.items() if k > 0]
    if total == 0:
        sentence = f"none of the {english.plural(heads, 'trained head')} breaks the barrier"
    else:
        where = f"all of them on {tasks[0]}" if len(tasks) == 1 else f"on {english.join(tasks)}"
        sentence = f"{english.count_of(total, heads, 'trained head')} break the barrier, {where}"
    return Verdict("breaks" if total else "holds", sentence,
                   rule=f"a head breaks the barrier when its mean hardmax rank exceeds E[rank] by more than "
                        f"{BREAK_SDS:g} standard errors of a mean of i.i.d. draws",
                   evidence={"heads": heads, "breaking": total, "by_task": dict(breaking_by_task)})


PERMUTATION_TASKS = ("reversal",)   # tasks whose solution reads every position once: a permutation pattern


def where_broken_sentence(breaking_by_task: dict[str, int]) -> str:
    """On which tasks trained heads broke the barrier, said against the tasks whose solution is a permutation."""
    tasks = [task for task, k in breaking_by_task.items() if k > 0]
    if not tasks:
        return "no trained head broke the barrier"
    if set(tasks) <= set(PERMUTATION_TASKS):
        return f"heads broke the barrier only on {english.join(tasks)}, whose solution is a permutation of the positions"
    return f"heads broke the barrier on {english.join(tasks)}, not only where the solution is a permutation"


def unlearned_sentence(accuracy_by_task: dict[str, float], bar: float = SOLVED) -> str:
    """Which tasks the models did not learn (mean test accuracy below `bar`), as a clause for the prose."""
    missed = [f"{task} ({english.percent(acc)} test accuracy)" for task, acc in accuracy_by_task.items() if acc < bar]
    if not missed:
        return f"every task was learned (at least {english.percent(bar)} test accuracy)"
    verb = "was" if len(missed) == 1 else "were"
    return (f"{english.join(missed)} {verb} not learned (the bar is {english.percent(bar)}), so the heads of "
            f"{'that task say' if len(missed) == 1 else 'those tasks say'} nothing about what a solution needs and "
            "are left out of the count at the top of this chapter")


def collapse_verdict(pure_max: float, residual_min: float) -> Verdict:
    """Rank collapse with depth: do pure-attention stacks collapse (largest relative residual below COLLAPSED) while
    stacks with skip connections keep their tokens apart (smallest above KEPT)?"""
    collapses, kept = pure_max < COLLAPSED, residual_min > KEPT
    pure, res = english.number(pure_max, 2, power=True), english.number(residual_min, 2, power=True)
    if collapses and kept:
        outcome, sentence = "prevented", (f"without skip connections the token states collapse (relative residual at "
                                          f"most {pure}) and residual connections prevent it (at least {res})")
    elif collapses:
        outcome, sentence = "collapses", (f"the token states collapse without skip connections (relative residual at "
                                          f"most {pure}), and residual connections do not keep them apart either "
                                          f"(down to {res})")
    else:
        outcome, sentence = "no_collapse", (f"the token states of pure attention stacks do not collapse on this grid "
                                            f"(relative residual up to {pure})")
    return Verdict(outcome, sentence, rule=f"collapsed below a relative residual of {COLLAPSED:g}, kept apart above "
                                           f"{KEPT:g}", evidence={"pure_max": pure_max, "residual_min": residual_min})


# ------------------------------------------------------------------------------------------------ the sweeps
def run_counterexamples(n: int, d_head: int, seeds: list[int]):
    return run_sweep("ch8_counterexamples", counterexample_point, grid(n=[n], d_head=[d_head]), seeds, progress=False)


def run_temperature(heads: list[str], n: int, d_head: int, ratios: list[float], trials: int, seeds: list[int]):
    return run_sweep("ch8_temperature", temperature_point,
                     grid(head=heads, n=[n], d_head=[d_head], ratios=[list(ratios)], trials=[trials]), seeds, progress=False)


def run_depth(positions, archs, norms, n, depth, d_model, n_heads, vocab, batch, seeds):
    return run_sweep("ch8_depth", depth_point,
                     grid(pos=positions, arch=archs, norm=norms, n=[n], depth=[depth], d_model=[d_model],
                          n_heads=[n_heads], vocab=[vocab], batch=[batch]), seeds, progress=False)


def run_trained(tasks, n, steps, d_model, n_heads, n_layers, examples, seeds):
    return run_sweep("ch8_trained", trained_point,
                     grid(task=tasks, n=[n], steps=[steps], d_model=[d_model], n_heads=[n_heads],
                          n_layers=[n_layers], examples=[examples]), seeds, progress=False)


# ------------------------------------------------------------------------------------------------ the chapter
def resolve(P):
    """Fill the mode defaults of `P` (recorded as resolved) and check the constraints that link parameters."""
    P.fill_mode_defaults(DEFAULTS)
    parameters.require(P.D_HEAD % 2 == 0, "D_HEAD", P.D_HEAD,
                       "an even integer (sinusoidal positions come in sin/cos pairs)")
    parameters.require(cx.previous_token_condition(P.N, P.D_HEAD), "D_HEAD", P.D_HEAD,
                       "a value for which the previous-token head's first row picks column 0 "
                       "(f(1) > f(m) for 2 <= m <= n; true for D_HEAD >= 12 at every allowed N)")
    return P


def analyse(P) -> ChapterResult:
    """Run every sweep of the chapter for resolved parameters `P` (one torch thread: every matrix and model here
    is tiny) and return its frames, quotes and verdicts."""
    result = ChapterResult()
    result.quote("ch8_n", P.N, "d")
    result.quote("ch8_d_head", P.D_HEAD, "d")
    result.quote("ch8_barrier", theory.expected_hardmax_rank(P.N), ".1f")
    result.quote("ch8_sqrt_dh", math.sqrt(P.D_HEAD), ".1f")
    with torch_threads(1):
        _counterexamples(P, result)
        _temperature(P, result)
        _depth(P, result)
        _trained(P, result)
    return result.done()


def _counterexamples(P, result) -> None:
    examples = run_counterexamples(P.N, P.D_HEAD, [P.SEED])
    result.frames["counterexample_ranks"] = examples
    table = examples.pivot_table(index="example", columns="measure", values="rank", sort=False)
    ranks = table[list(MEASURES)]
    result.data["ranks_table"] = ranks
    closed = examples.dropna(subset=["closed_form"])
    result.verdict("ch8_closed_match", closed_form_verdict(closed["rank"], closed["closed_form"]))
    barrier = theory.expected_hardmax_rank(P.N)
    result.verdict("ch8_barrier_general", general_barrier_verdict(
        {HEAD_NAMES[e]: float(ranks.loc[e, "hardmax"]) for e in ("identity", "previous_token")}, barrier, P.N))
    result.verdict("ch8_causal_full_rank", causal_verdict(float(ranks.loc["causal_random", NUM8]),
                                                          float(ranks.loc["causal_random", "hardmax"]), P.N))
    for example, short in SHORT.items():
        for measure, tag in TAGS.items():
            result.quote(f"ch8_{short}_{tag}", float(ranks.loc[example, measure]), ".1f" if tag in ("eff", "st") else ".0f")
    result.quote("ch8_causal_hm_logits", float(table.loc["causal_random", "hardmax_of_logits"]), ".0f")
    result.quote("ch8_causal_hm_expected", cx.expected_causal_hardmax_rank(P.N), ".1f")
    temperature = examples.groupby("example").temperature.first()
    result.quote("ch8_t_id", float(temperature["identity"]), ".3f")
    result.quote("ch8_t_prev", float(temperature["previous_token"]), ".3f")


def _temperature(P, result) -> None:
    sweep = run_temperature(list(TEMPERATURE_HEADS), P.N, P.D_HEAD, P.TEMPERATURES, P.TRIALS, [P.SEED])
    curves = sweep.dropna(subset=["ratio"])
    columns = ["head", "ratio", "temperature", "quantity", "value"]
    is_rank = curves.quantity.isin(MEASURES)
    result.frames["rank_vs_temperature"] = curves[is_rank][columns].rename(columns={"quantity": "measure", "value": "rank"})
    result.frames["gap_vs_temperature"] = curves[~is_rank][columns]
    wide = curves.pivot_table(index=["head", "ratio"], columns="quantity", values="value")
    special = sweep[sweep.ratio.isna()].pivot_table(index="head", columns="quantity", values="value")
    result.frames["certified_temperature"] = special.reset_index()
    result.data.update(wide=wide, special=special)

    share = float(wide["bound_holds"].dropna().min())
    result.quote("ch8_bound_holds", 100 * share, ".0f")
    result.verdict("ch8_bounds", bounds_verdict(share))
    result.quote("ch8_ratio_min", english.number(min(P.TEMPERATURES), 1, power=True))
    result.quote("ch8_ratio_max", english.number(max(P.TEMPERATURES), 1, power=True))
    rand, causal = wide.loc["random"], wide.loc["causal_random"]
    coldest, hottest = rand.index.min(), rand.index.max()
    one = min(rand.index, key=lambda r: abs(math.log(r)))      # the ratio nearest to T = sqrt(d_h)
    result.quote("ch8_rand_hm_T", float(rand["hardmax"].mean()), ".1f")
    result.quote("ch8_rand_num3_cold", float(rand.loc[coldest, NUM3]), ".1f")
    result.quote("ch8_rand_num3_hot", float(rand.loc[hottest, NUM3]), ".1f")
    result.quote("ch8_rand_num3_peak", float(rand[NUM3].max()), ".1f")
    result.quote("ch8_rand_num3_peak_ratio", english.number(float(rand[NUM3].idxmax()), 1, power=True))
    result.verdict("ch8_lukewarm", lukewarm_verdict(float(rand[NUM3].max()), theory.expected_hardmax_rank(P.N)))
    result.quote("ch8_rand_num3_at1", float(rand.loc[one, NUM3]), ".1f")
    result.quote("ch8_rand_eff_at1", float(rand.loc[one, "effective"]), ".1f")
    result.quote("ch8_rand_num8_hot", float(rand.loc[hottest, NUM8]), ".0f")
    result.quote("ch8_causal_num3_cold", float(causal.loc[coldest, NUM3]), ".1f")
    result.quote("ch8_causal_num3_hot", float(causal.loc[hottest, NUM3]), ".1f")
    ratio = float(special.loc["random", "certified_temperature"]) / math.sqrt(P.D_HEAD)
    result.quote("ch8_tcert_random_ratio", english.number(ratio, 2, power=True))
    result.quote("ch8_margin_random", english.number(float(special.loc["random", "margin_min"]), 2, power=True))
    ratios = wide.index.get_level_values("ratio")
    hot = wide[ratios >= 10].dropna(subset=["hot_bound"])
    result.quote("ch8_hot_tightness", float((hot["hot_gap"] / hot["hot_bound"]).min()) if len(hot) else math.nan, ".2f")
    cold = wide[(wide["gap_frobenius"] > 1e-6) & (ratios <= 1e-3)].dropna(subset=["gap_bound"])
    result.quote("ch8_gap_tightness", float((cold["gap_frobenius"] / cold["gap_bound"]).min()) if len(cold) else math.nan,
                 ".2f")
    shown = wide.loc[(slice(None), [coldest, one, hottest]), list(MEASURES)]
    result.data["temperature_table"] = shown.rename_axis(index=["head", "T / √d_h"])


def _depth(P, result) -> None:
    depth_df = run_depth(list(POSITIONS), list(ARCHS), ["none", "pre"], DEPTH_N, P.DEPTH, DEPTH_D_MODEL, DEPTH_HEADS,
                         DEPTH_VOCAB, parameters.by_mode(P.MODE, *DEPTH_BATCH), [P.SEED])
    result.frames["depth"] = depth_df.drop(columns=["seed"])
    result.data["depth"] = depth_df
    result.quote("ch8_depth", P.DEPTH, "d")
    result.quote("ch8_depth_n", DEPTH_N, "d")
    for name, value in (("d_model", DEPTH_D_MODEL), ("heads", DEPTH_HEADS), ("d_head", DEPTH_D_MODEL // DEPTH_HEADS),
                        ("vocab", DEPTH_VOCAB)):   # the stacks' set-up, as the prose states it
        result.quote(f"ch8_depth_{name}", value, "d")
    keys = ["pos", "arch", "norm"]
    last = depth_df[depth_df.layer == P.DEPTH].set_index(keys)
    first = depth_df[depth_df.layer == 1].set_index(keys)
    pure = last.xs("attn", level="arch")
    with_res = last[last.index.get_level_values("arch").str.contains("res")]
    layer2 = depth_df[(depth_df.layer == min(2, P.DEPTH)) & (depth_df.arch == "attn")]
    result.quote("ch8_pure_residual_max", english.number(float(pure["residual"].max()), 2, power=True))
    result.quote("ch8_pure_num_max", float(pure.drop(index="rope", level="pos")["rank_numerical"].max()), ".1f")
    result.quote("ch8_mlp_residual_max", english.number(float(last.xs("attn+mlp", level="arch")["residual"].max()), 2, power=True))
    result.quote("ch8_res_residual_min", float(with_res["residual"].min()), ".2f")
    result.quote("ch8_res_num_min", float(with_res["rank_numerical"].min()), ".1f")
    result.quote("ch8_pure_residual_l2", english.number(float(layer2["residual"].max()), 2, power=True))
    result.verdict("ch8_collapse", collapse_verdict(float(pure["residual"].max()), float(with_res["residual"].min())))
    result.quote("ch8_distinct_tokens", float(depth_df["distinct_tokens"].iloc[0]), ".1f")
    result.quote("ch8_none_num_l1", float(first.xs("none", level="pos")["rank_numerical"].max()), ".1f")
    result.quote("ch8_sin_num_l1", float(first.xs("sinusoidal", level="pos")["rank_numerical"].min()), ".1f")
    result.quote("ch8_rope_num_l1", float(first.xs("rope", level="pos")["rank_numerical"].min()), ".1f")
    result.quote("ch8_learned_num_l1", float(first.xs("learned", level="pos")["rank_numerical"].max()), ".1f")
    result.quote("ch8_rope_pure_hm_last", float(pure.xs("rope", level="pos")["rank_hardmax"].max()), ".1f")
    summary = last[["residual", "rank_numerical", "rank_hardmax", "rank_effective"]].unstack("norm")
    result.data["depth_table"] = summary.rename(
        columns=lambda c: c.replace("rank_", "") + (" rank" if c.startswith("rank_") else ""), level=0)


def _trained(P, result) -> None:
    seeds = [seeding.derive_seed(P.SEED, "train", i) for i in range(P.TRAIN_SEEDS)]
    trained = run_trained(P.TASKS, TRAIN_N, P.TRAIN_STEPS, TRAIN_D_MODEL, TRAIN_HEADS, TRAIN_LAYERS, TRAIN_EXAMPLES,
                          seeds)
    threshold = trained.length.map(lambda length: breaking_threshold(int(length), TRAIN_EXAMPLES))
    trained["breaks"] = trained.rank_hardmax > threshold
    trained["hardmax_over_n"] = trained.rank_hardmax / trained.length
    result.frames["trained_heads"] = trained
    result.data["trained"] = trained
    by_stage = trained.groupby("stage")["breaks"]
    result.quote("ch8_heads_total", int(by_stage.size()["trained"]), "d")
    result.quote("ch8_break_trained", int(by_stage.sum()["trained"]), "d")
    result.quote("ch8_break_init", int(by_stage.sum()["init"]), "d")
    result.quote("ch8_break_trained_pct", 100 * float(by_stage.mean()["trained"]), ".1f")   # 4 of 32: 12.5, not 12
    per_task = trained[trained.stage == "trained"].groupby("task").agg(
        accuracy=("test_accuracy", "mean"), heads=("breaks", "size"), breaking=("breaks", "sum"),
        max_hardmax_over_n=("hardmax_over_n", "max"), mean_hardmax_over_n=("hardmax_over_n", "mean"))
    result.frames["trained_summary"] = per_task.reset_index()
    result.data["trained_table"] = per_task
    result.verdict("ch8_trained_breaks", trained_verdict(per_task.breaking.astype(int).to_dict(),
                                                         per_task.heads.astype(int).to_dict(),
                                                         per_task.accuracy.to_dict()))
    result.quote("ch8_tasks", english.join(P.TASKS))
    result.quote("ch8_train_steps", P.TRAIN_STEPS, "d")
    result.quote("ch8_train_models", len(P.TASKS) * len(seeds), "d")
    result.quote("ch8_train_seeds", len(seeds), "d")
    for name, value in (("n", TRAIN_N), ("d_model", TRAIN_D_MODEL), ("layers", TRAIN_LAYERS), ("heads", TRAIN_HEADS),
                        ("d_head", TRAIN_D_MODEL // TRAIN_HEADS)):   # the trained models' set-up, as the prose states it
        result.quote(f"ch8_train_{name}", value, "d")
    result.quote("ch8_unlearned", unlearned_sentence(per_task.accuracy.to_dict()))
    result.quote("ch8_where_broken", where_broken_sentence(per_task.breaking.astype(int).to_dict()))
    result.quote("ch8_init_max_over_n", float(trained[trained.stage == "init"].hardmax_over_n.max()), ".2f")
    result.quote("ch8_threshold_over_n", breaking_threshold(TRAIN_N, TRAIN_EXAMPLES) / TRAIN_N, ".3f")
    for task in ("reversal", "copy"):
        if task not in per_task.index:  # left out by TASKS: the prose's numbers for it read "(not run)"
            continue
        row = per_task.loc[task]
        result.quote(f"ch8_{task}_acc", 100 * float(row.accuracy), ".0f")
        result.quote(f"ch8_{task}_max", float(row.max_hardmax_over_n), ".2f")
        result.quote(f"ch8_{task}_breaking", int(row.breaking), "d")
        result.quote(f"ch8_{task}_heads", int(row.heads), "d")
