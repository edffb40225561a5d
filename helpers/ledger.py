"""The claims ledger: one row per claim of the paper and per main finding of the book, with a status computed
from the chapters' metrics JSON.

Each `Rule` names the chapter whose metrics it reads, the metric keys it reads (`reads`), and a `judge` that maps
those values to a `Verdict` (status and the count or interval it rests on). A chapter without a metrics file, or a
metrics file without one of the keys, gives NOT_RUN instead of an error, so a chapter that renames its metrics
turns its rows to "not run" until the rule's `reads` are updated. Rules are listed in `RULES`, in page order.

    ledger = evaluate_all(load_all())   # a list of Row, one per rule
"""

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import english, paths, theory

HOLDS = "holds"
FAILS = "fails"
CONDITIONAL = "holds only under stated conditions"
UNTESTABLE = "untestable at this budget"
NOT_RUN = "not run"
STATUSES = (HOLDS, FAILS, CONDITIONAL, UNTESTABLE, NOT_RUN)


@dataclass(frozen=True)
class Verdict:
    status: str
    evidence: str  # the count, interval or numbers the status rests on, as a sentence fragment

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}; got {self.status!r}")


@dataclass(frozen=True)
class Rule:
    """One row of the ledger: a claim, where it was tested, and how its status follows from the metrics."""

    claim: str
    source: str        # "paper" or "book"
    conditions: str    # the conditions under which it was tested
    notebook: str      # the chapter whose metrics JSON the rule reads
    reads: tuple       # the keys of that file's "values" that `judge` reads
    figure: str        # the figure name (`mystnb.figure.name`) with the evidence
    judge: Callable[[dict], Verdict]


@dataclass(frozen=True)
class Row:
    rule: Rule
    verdict: Verdict


def _number(x, digits: int = 2) -> str:
    """A number on the ledger page (MyST): `english.number` with powers of ten as typeset maths."""
    return english.number(x, digits, power=True, maths=True)


def count(k: int, total: int, noun: str) -> str:
    """"3 of 4 points", "1 of 1 point" (the noun in the plural unless `total` is 1)."""
    return f"{k} of {total} {noun if total == 1 else noun + 's'}"


# ---- the rules ------------------------------------------------------------------------------------------------

def _barrier(v: dict) -> Verdict:
    points = [r for r in v["mc_rank_over_n_vs_bound"] if r["model"] == "orthonormal"]
    if not points:
        return Verdict(UNTESTABLE, "no orthonormal-input points in this run")
    below = [r for r in points if r["ci_low_over_n"] <= r["bound_over_n"]]
    top = max(points, key=lambda r: r["mc_rank_over_n"] / r["bound_over_n"])
    evidence = (f"{count(len(below), len(points), '$(n, d_h)$ point')} have a 95 % interval reaching down to the exact "
                f"bound $B(n)/n$; highest mean relative to its bound: {_number(top['mc_rank_over_n'], 3)} $n$ against "
                f"{_number(top['bound_over_n'], 3)} $n$ at $n = {top['n']}$, $d_h = {top['d_head']}$")
    return Verdict(HOLDS if len(below) == len(points) else FAILS, evidence)


def _barrier_conditions(v: dict) -> Verdict:
    ranks = {(r["example"], r["measure"]): r["rank"] for r in v["counterexample_ranks"]}
    n, barrier = v["ch8_n"], v["ch8_barrier"]
    identity, previous = ranks.get(("identity", "hardmax")), ranks.get(("previous_token", "hardmax"))
    if identity is None or previous is None:
        return Verdict(NOT_RUN, "the identity and previous-token heads were not measured")
    broken = [name for name, r in (("identity", identity), ("previous-token", previous)) if r > barrier]
    evidence = (f"hardmax rank {_number(identity)} (identity head) and {_number(previous)} (previous-token head) at "
                f"$n = {n}$, against the barrier {_number(barrier, 3)}")
    if broken:
        evidence += f"; {english.join(broken)} {'heads are' if len(broken) > 1 else 'head is'} above it, so the barrier " \
                    "is a statement about random heads"
    # The claim is that the barrier binds every head: one constructed head above it refutes it.
    return Verdict(FAILS if broken else HOLDS, evidence)


def _saturation_log_n(v: dict) -> Verdict:
    curves: dict = {}
    for k in v["knees"]:
        if k["series"].startswith("hardmax") and k["knee"] is not None and not math.isnan(k["knee"]):
            curves.setdefault((k["series"], k["definition"]), []).append((k["n"], k["knee"]))
    spreads = {}
    for key, points in curves.items():
        if len(points) >= 3:
            ratios = [knee / math.log(n) for n, knee in sorted(points)]
            spreads[key] = (max(ratios) / min(ratios), sorted(points))
    if not spreads:
        return Verdict(UNTESTABLE, "fewer than three sequence lengths with a measured saturation point")
    # Saturation at d_h of order log n: the knee over ln n stays within a factor 1.5 across the grid of n.
    bounded = {key: spread <= 1.5 for key, (spread, _) in spreads.items()}
    low, high = min(s for s, _ in spreads.values()), max(s for s, _ in spreads.values())
    ns = sorted({n for _, points in spreads.values() for n, _ in points})
    within = sorted(s.replace('hardmax, ', '') + ' (' + d + ')' for (s, d), ok in bounded.items() if ok)
    evidence = (f"over $n$ = {ns[0]} to {ns[-1]}, knee$/\\ln n$ changes by a factor {_number(low)} to {_number(high)} "
                f"({count(len(within), len(spreads), 'curve')} within a factor 1.5"
                + (f": {', '.join(within)})" if within else ")"))
    if all(bounded.values()):
        return Verdict(HOLDS, evidence)
    return Verdict(CONDITIONAL if any(bounded.values()) else FAILS, evidence)


def _reduction_init(v: dict) -> Verdict:
    # Chapter 4's hardmax points at initialization against the exact bound; z < 3 counts as below.
    exceed, total = int(v["ch4_hard_exceed"]), int(v["ch4_hard_points"])
    evidence = (f"{count(exceed, total, 'point')} more than 3 standard errors above the bound; the highest is "
                f"{english.signed(v['ch4_hard_max_z'], 'standard error')} it")
    return Verdict(HOLDS if exceed == 0 else FAILS, evidence)


CH5_CEILING = 1 - 1 / math.e  # chapter 5's ceiling on rank / n (the paper's 0.63 n)


def _width_grows_like_log_n(v: dict) -> Verdict:
    # Chapter 5's per-task answers: how the smallest d_qk reaching 95 % of the best accuracy grows with n.
    answers = {task: verdict["answer"] for task, verdict in v["verdicts"].items()}
    tested = {task: a for task, a in answers.items() if a != "untestable"}
    untested = sorted(set(answers) - set(tested))
    if not tested:
        return Verdict(UNTESTABLE, f"no task has enough sequence lengths that meet the quality bar "
                                   f"({count(0, len(answers), 'task')} testable)")
    log = sorted(t for t, a in tested.items() if a == "log")
    other = sorted(f"`{t}` ({a})" for t, a in tested.items() if a != "log")
    evidence = (f"{count(len(log), len(tested), 'testable task')} support $O(\\log n)$"
                + (f" ({', '.join(f'`{t}`' for t in log)})" if log else "")
                + (f"; {'the other' if len(other) == 1 else 'the others'}: {', '.join(other)}" if other else "")
                + (f"; untestable at this budget: {', '.join(f'`{t}`' for t in untested)}" if untested else ""))
    return Verdict(HOLDS if not other else FAILS if not log else CONDITIONAL, evidence)


def _trained_synthetic(v: dict) -> Verdict:
    # By the hardmax rank; a head above the ceiling on a task whose solving pattern itself has rank above it
    # (reversal: a permutation) is what solving that task requires, so the claim then holds only for the others.
    total = int(v["ch5_heads_total"])
    if total == 0:
        return Verdict(UNTESTABLE, "no model converged, so no trained head was measured")
    above = [h for h in v["above_ceiling"] if h["hardmax_over_n"] > CH5_CEILING]
    needs = {(c["task"], c["n"]) for c in v["cells"] if c["pattern_hardmax_rank"] > CH5_CEILING * c["n"]}
    forced = [h for h in above if (h["task"], h["n"]) in needs]
    evidence = f"{count(len(above), total, 'trained head')} above {_number(CH5_CEILING)} $n$ by the hardmax rank"
    if not above:
        return Verdict(HOLDS, evidence)
    if len(forced) == len(above):
        tasks = ", ".join(sorted({f"`{h['task']}`" for h in forced}))
        return Verdict(CONDITIONAL, evidence + f", all on tasks whose solving pattern itself has rank above it ({tasks})")
    return Verdict(FAILS, evidence + f", {len(above) - len(forced)} of them on tasks whose pattern stays below it")


def _trained_break(v: dict) -> Verdict:
    summary = {r["task"]: r for r in v["trained_summary"]}
    reversal = summary.get("reversal")
    if reversal is None:
        return Verdict(NOT_RUN, "the reversal task was not trained")
    if reversal["accuracy"] < 0.9:  # the quality bar of chapter 8: the model must solve the task
        return Verdict(UNTESTABLE, f"reversal models reached only {_number(100 * reversal['accuracy'], 2)} % test "
                                   f"accuracy (bar: 90 %)")
    breaking, heads = int(reversal["breaking"]), int(reversal["heads"])
    evidence = (f"{count(breaking, heads, 'reversal head')} above the breaking threshold, largest hardmax rank "
                f"{reversal['max_hardmax_over_n']:.2f} $n$, at {_number(100 * reversal['accuracy'], 2)} % accuracy")
    return Verdict(HOLDS if breaking > 0 else FAILS, evidence)


def _temperature(v: dict) -> Verdict:
    rows = [r for r in v["rank_vs_temperature"] if r["head"] == "random" and r["measure"] == "numerical@1e-03"]
    if not rows:
        return Verdict(NOT_RUN, "no random heads in the temperature sweep")
    n = v["ch8_n"]
    peak = max(rows, key=lambda r: r["rank"])
    barrier = theory.expected_hardmax_rank(n)
    evidence = (f"peak numerical rank {_number(peak['rank'], 3)} at $T/\\sqrt{{d_h}}$ = {_number(peak['ratio'])}, "
                f"against the barrier {_number(barrier, 3)} ($n = {n}$)")
    return Verdict(HOLDS if peak["rank"] > barrier else FAILS, evidence)


def _causal(v: dict) -> Verdict:
    ranks = {(r["example"], r["measure"]): r["rank"] for r in v["counterexample_ranks"]}
    n = v["ch8_n"]
    exact, hardmax = ranks.get(("causal_random", "numerical@1e-08")), ranks.get(("causal_random", "hardmax"))
    if exact is None:
        return Verdict(NOT_RUN, "the causal head was not measured")
    evidence = f"numerical rank {_number(exact)} of $n = {n}$ at tolerance $10^{{-8}}$, hardmax rank {_number(hardmax)}"
    return Verdict(HOLDS if exact == n else FAILS, evidence)


def _depth(v: dict) -> Verdict:
    rows = v["depth"]
    last = max(r["layer"] for r in rows)
    final = [r for r in rows if r["layer"] == last]
    pure = max(r["residual"] for r in final if "res" not in r["arch"])
    skip = min(r["residual"] for r in final if "res" in r["arch"])
    evidence = (f"after {last} layers the relative residual is at most {_number(pure)} without skip connections and "
                f"at least {_number(skip)} with them")
    return Verdict(HOLDS if pure < 1e-3 and skip > 0.1 else FAILS, evidence)


def _k_of_m(text: str) -> tuple[int, int]:
    """"3 of 4" -> (3, 4): the count format the chapters glue."""
    k, m = str(text).split(" of ")
    return int(k), int(m)


def _share_status(k: int, m: int) -> str:
    """All -> holds; none -> fails; some -> holds only under stated conditions."""
    return HOLDS if k == m else FAILS if k == 0 else CONDITIONAL


def _real_data_barrier(v: dict) -> Verdict:
    k, m = _k_of_m(v["ch6_barrier_count"])
    if m == 0:
        return Verdict(UNTESTABLE, "no trained real-data setting")
    return Verdict(_share_status(k, m), f"{count(k, m, 'setting')} below the barrier; largest hardmax rank "
                                        f"{_number(v['ch6_hardmax_frac_max'])} $n$")


def _reduction(v: dict) -> Verdict:
    # Chapter 7's smallest rank r within its tolerance, without fine-tuning, per setting that met its bars: some
    # query/key dimension is redundant where r is below the trained width.
    rows = [r for r in v["smallest_r"] if r["stage"] == "truncated" and r["included"]]
    if not rows:
        return Verdict(UNTESTABLE, "no setting on which the models learned")
    width = int(v["ch7_d_max"])
    ranks = [r["smallest_r"] for r in rows if r["smallest_r"] is not None and math.isfinite(r["smallest_r"])]
    below = sum(r < width for r in ranks)
    reach = (f"; the smallest $r$ is {english.span_short(min(ranks), max(ranks))}" if ranks else "")
    return Verdict(_share_status(below, len(rows)),
                   f"each head's $W_q W_k^\\top$ cut below its trained width {width} with the test loss within "
                   f"{_number(v['ch7_tolerance_pct'])} % in {count(below, len(rows), 'setting')}{reach}")


def _pretrained(v: dict) -> Verdict:
    above, points = int(v["ch9_hm_layers_above"]), int(v["ch9_layer_points"])
    return Verdict(HOLDS if above == 0 else FAILS,
                   f"{count(points - above, points, 'layer mean')} below the barrier; the highest single head at "
                   f"{_number(v['ch9_hm_head_max'])} $n$")


def _predictor(v: dict) -> Verdict:
    # Chapter 3b's predictor against Monte Carlo on its held-out grid, per key family: the largest |error| in
    # rank / n within the chapter's goal counts as "meets".
    families = {"Gaussian": v["ch3b_accuracy_gaussian"], "unit-sphere": v["ch3b_accuracy_sphere"]}
    met = [name for name, verdict in families.items() if verdict["outcome"] == "meets"]
    goal = families["Gaussian"]["evidence"]["goal"]
    evidence = (f"largest error in rank$/n$ {_number(families['Gaussian']['evidence']['max_error'], 2)} for Gaussian "
                f"keys and {_number(families['unit-sphere']['evidence']['max_error'], 2)} for unit-sphere keys, over "
                f"{families['Gaussian']['evidence']['points']} held-out grid points each (goal: at most {_number(goal)})")
    if len(met) == len(families):
        return Verdict(HOLDS, evidence)
    return Verdict(CONDITIONAL if met else FAILS, evidence + (f"; met for {english.join(met)} keys only" if met else ""))


def _sphere_flat(v: dict) -> Verdict:
    # Chapter 3b's sphere-key knee at the loosest level: "flat" when knee(n_max) / knee(n_min) is below its threshold.
    verdict = v["ch3b_sphere_flat_verdict"]
    e = verdict["evidence"]
    if verdict["outcome"] not in ("flat", "grows"):
        return Verdict(UNTESTABLE, "fewer than two sphere-key knees on the grid")
    evidence = (f"the knee changes by a factor {_number(e['ratio'], 3)} from $n = {e['n_min']}$ to $n = {e['n_max']}$ "
                f"(flat below a factor {_number(e['threshold'])})")
    return Verdict(HOLDS if verdict["outcome"] == "flat" else FAILS, evidence)


RULES: tuple[Rule, ...] = (
    Rule(r"The expected rank of a hardmax attention head is at most about $0.63\,n$, whatever $d_h$.", "paper",
         "hardmax; orthonormal inputs; independent Gaussian $W_q, W_k$; Monte Carlo over $n$ and $d_h$",
         "02_low_rank_barrier", ("mc_rank_over_n_vs_bound",), "fig-barrier", _barrier),
    Rule("The barrier binds attention heads in general, not only random ones.", "paper",
         "constructed identity and previous-token heads, at their certified temperature",
         "08_where_it_breaks", ("counterexample_ranks", "ch8_n", "ch8_barrier"), "fig-ch8-temperature",
         _barrier_conditions),
    Rule(r"The rank saturates once $d_h$ is of order $\log n$.", "paper",
         "hardmax rank of random queries with Gaussian or unit-sphere keys; saturation point (knee) per $n$, two definitions",
         "03_saturation", ("knees",), "fig-ch3-knees", _saturation_log_n),
    Rule("A first-principles predictor gives the expected hardmax rank of random heads over the whole grid of $n$ "
         "and $d_h$.", "book",
         "hardmax rank of random heads with Gaussian or unit-sphere keys; Monte Carlo on a held-out grid of $n$ and $d_h$",
         "03b_predicting_rank", ("ch3b_accuracy_gaussian", "ch3b_accuracy_sphere"), "fig-3b-heatmap", _predictor),
    Rule("With keys on the unit sphere (QK-normalised heads) the saturation point does not grow with $n$.", "book",
         "hardmax rank of random heads with unit-sphere keys; knee at the loosest level, smallest against largest $n$",
         "03b_predicting_rank", ("ch3b_sphere_flat_verdict",), "fig-3b-sphere", _sphere_flat),
    Rule("Random attention at initialization stays under the barrier.", "paper",
         "hardmax rank of randomly initialised heads; several input distributions and scales",
         "04_random_attention", ("ch4_hard_exceed", "ch4_hard_points", "ch4_hard_max_z"), "fig-ch4-hardmax",
         _reduction_init),
    Rule("Extra head dimension is redundant: after training, part of each head's query/key dimension can be "
         "removed without loss (model reduction).", "paper",
         "SVD truncation of every head's $W_q W_k^\\top$ in the trained text and image models of chapter 6, no "
         "fine-tuning; test loss within 1 %",
         "07_model_reduction", ("smallest_r", "ch7_d_max", "ch7_tolerance_pct"), "fig-ch7-compression",
         _reduction),
    Rule(r"The head dimension a trained model needs grows only like $\log n$ (extra head dimension is redundant).",
         "paper", "small transformers trained to convergence on synthetic tasks with known attention patterns; the "
         "smallest $d_{qk}$ reaching 95 % of the best accuracy, fitted against $n$ per task",
         "05_trained_synthetic", ("verdicts",), "fig-ch5-fits", _width_grows_like_log_n),
    Rule("Trained heads on synthetic tasks stay under the barrier.", "book",
         "hardmax rank of every head of the converged models of chapter 5, against $0.63 n$",
         "05_trained_synthetic", ("ch5_heads_total", "above_ceiling", "cells"), "fig-ch5-phase", _trained_synthetic),
    Rule("On real data (text and images) trained heads stay under the barrier.", "book",
         "small transformers trained on the character text and MNIST patches of chapter 6; hardmax rank",
         "06_real_data", ("ch6_barrier_count", "ch6_hardmax_frac_max"), "fig-ch6-rank", _real_data_barrier),
    Rule("A real pretrained transformer (all-MiniLM-L6-v2) stays under the barrier on average.", "book",
         "every layer's mean hardmax rank over heads and text windows, two corpora",
         "09_pretrained_model", ("ch9_hm_layers_above", "ch9_layer_points", "ch9_hm_head_max"), "fig-ch9-heads",
         _pretrained),
    Rule("Training finds heads above the barrier when the task is a permutation.", "book",
         "reversal models that solve their task (at least 90 % test accuracy)",
         "08_where_it_breaks", ("trained_summary",), "fig-ch8-trained", _trained_break),
    Rule("At finite temperature the numerical rank of a random head exceeds the barrier.", "book",
         r"random heads; numerical rank at relative tolerance $10^{-3}$; $T/\sqrt{d_h}$ over eight decades",
         "08_where_it_breaks", ("rank_vs_temperature", "ch8_n"), "fig-ch8-temperature", _temperature),
    Rule("Under a causal mask the softmax is exactly full rank, while its hardmax rank is about $n/2$.", "book",
         r"one random causal head at $T = \sqrt{d_h}$",
         "08_where_it_breaks", ("counterexample_ranks", "ch8_n"), "fig-ch8-temperature", _causal),
    Rule("Without skip connections the token states collapse with depth; residual connections prevent it.",
         "book", "randomly initialised stacks; four positional encodings; with and without MLP and LayerNorm",
         "08_where_it_breaks", ("depth",), "fig-ch8-depth", _depth),
)


# ---- evaluation -----------------------------------------------------------------------------------------------

def load_all(metrics_dir: Path | None = None) -> dict:
    """Every chapter's metrics file in `metrics_dir` (default: the book's), by notebook name."""
    folder = Path(metrics_dir or paths.metrics_dir())
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("[0-9][0-9]*_*.json"))}


def evaluate(rule: Rule, metrics: dict) -> Verdict:
    """The rule's verdict on `metrics` ({notebook: metrics JSON}); NOT_RUN when a chapter or a key is missing."""
    run = metrics.get(rule.notebook)
    if run is None:
        return Verdict(NOT_RUN, f"chapter {rule.notebook} has no metrics file in this build")
    values = run.get("values", {})
    missing = [k for k in rule.reads if k not in values or k in run.get("not_run", [])]
    if missing:
        return Verdict(NOT_RUN, f"not recorded by chapter {rule.notebook}: {', '.join(missing)}")
    try:
        return rule.judge({k: values[k] for k in rule.reads})
    except (KeyError, TypeError, IndexError) as err:  # a metric whose layout changed: say so, never crash the page
        return Verdict(NOT_RUN, f"metrics of chapter {rule.notebook} have an unexpected layout "
                                f"({type(err).__name__}: {err})")


def evaluate_all(metrics: dict, rules: tuple[Rule, ...] = RULES) -> list[Row]:
    return [Row(rule, evaluate(rule, metrics)) for rule in rules]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[Row], figures: dict) -> str:
    """The ledger as a MyST table; `figures` maps a notebook to its figure names, so a row links its figure with
    {numref} when the chapter has it and the chapter page otherwise (a renamed figure never breaks the build)."""
    lines = ["| | Claim | Tested under | Status | Evidence | Shown in |", "|---|---|---|---|---|---|"]
    for i, row in enumerate(rows, 1):
        rule = row.rule
        link = (f"{{numref}}`{rule.figure}`" if rule.figure in figures.get(rule.notebook, ())
                else f"{{doc}}`{rule.notebook}`")
        lines.append(f"| {i} | {_cell(rule.claim)} ({rule.source}) | {_cell(rule.conditions)} | "
                     f"**{row.verdict.status}** | {_cell(row.verdict.evidence)} | {link} |")
    return "\n".join(lines)


def tally_sentence(tally: dict) -> str:
    """"3 hold, 1 fails and 2 were not run": the statuses in STATUSES order, grammatical for any counts."""
    verbs = {HOLDS: ("holds", "hold"), FAILS: ("fails", "fail"),
             CONDITIONAL: ("holds only under stated conditions", "hold only under stated conditions"),
             UNTESTABLE: ("is untestable at this budget", "are untestable at this budget"),
             NOT_RUN: ("was not run", "were not run")}
    parts = [f"{tally[s]} {verbs[s][0] if tally[s] == 1 else verbs[s][1]}" for s in STATUSES if tally.get(s)]
    if not parts:
        return "none was evaluated"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
