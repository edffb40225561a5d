"""The claims ledger: one row per claim of the paper and per main finding of the book, with a status read from
the verdicts the chapters recorded.

The ledger never re-judges: each chapter decides its claims with its own tested rules and thresholds and records
the decision as a `helpers.results.Verdict` (outcome, sentence, rule, evidence) in its metrics file. A ledger `Rule`
names the recorded verdicts it reads (`verdicts`: (notebook, glue name) pairs) and maps their outcome words to a
status (`statuses`); the row's evidence is the chapters' own sentences. A chapter without a metrics file, or a
metrics file without the verdict, gives NOT_RUN instead of an error, so a chapter that renames a verdict turns its
rows to "not run" until the rule is updated. Rules are listed in `RULES`, in page order.

    ledger = evaluate_all(load_all())   # a list of Row, one per rule; row.verdict.outcome is the status
"""

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .results import Verdict

HOLDS = "holds"
FAILS = "fails"
CONDITIONAL = "holds only under stated conditions"
UNTESTABLE = "untestable at this budget"
NOT_RUN = "not run"
STATUSES = (HOLDS, FAILS, CONDITIONAL, UNTESTABLE, NOT_RUN)
LEDGER_RULE = "the chapter's recorded verdict, its outcome word mapped to a status"


@dataclass(frozen=True)
class Finding:
    """A row the introduction states as a finding: glue name `finding_<key>`, the `lead` words naming it and the
    `condition` (measure and setting) it was tested under, both plain text (glued text shows no maths)."""

    key: str
    lead: str
    condition: str


@dataclass(frozen=True)
class Rule:
    """One row of the ledger: a claim, where it was tested, and which recorded verdicts decide it.

    `verdicts`: (notebook, glue name) pairs; a recorded value is one verdict ({"outcome", "sentence", ...}) or a
    table of verdicts by name (chapter 05's per-task {"answer", "sentence", ...}). `statuses`: outcome word ->
    status; "untestable" is always UNTESTABLE. Several verdicts combine: the same status everywhere gives that
    status; holds next to fails gives CONDITIONAL; untestable ones are left out unless every one is. A verdict
    whose sentence does not name its measure or model gets one of `labels` before it, so that a reader can tell
    the sentences of one row apart."""

    claim: str
    source: str        # "paper" or "book"
    conditions: str    # the conditions under which it was tested
    verdicts: tuple    # ((notebook, glue name), ...)
    statuses: dict     # outcome word -> status
    figure: str        # the figure name (`mystnb.figure.name`) with the evidence
    finding: Finding | None = None   # set when the introduction states this row as a finding
    labels: tuple = ()  # per verdict, words that say whose sentence it is ("by the hardmax rank"); "" or none: no label

    def __post_init__(self):
        if self.labels and len(self.labels) != len(self.verdicts):
            raise ValueError(f"labels: one per verdict ({len(self.verdicts)}) or none, got {len(self.labels)} "
                             f"for the row {self.claim!r}")

    @property
    def notebook(self) -> str:
        """The chapter the row links to: the one of its first verdict."""
        return self.verdicts[0][0]


@dataclass(frozen=True)
class Row:
    rule: Rule
    verdict: Verdict   # outcome: one of STATUSES; sentence: the evidence


def _recorded(value, name: str) -> list[tuple[str, str, str]]:
    """[(name, outcome, sentence)] of one recorded value: a verdict, or a table of verdicts by name."""
    if "outcome" in value:
        return [(name, value["outcome"], value["sentence"])]
    return [(key, v.get("outcome", v.get("answer")), v["sentence"]) for key, v in value.items()]


def combine(statuses: list[str]) -> str:
    """One status from several (see `Rule`)."""
    tested = [s for s in statuses if s != UNTESTABLE] or statuses
    if len(set(tested)) == 1:
        return tested[0]
    return CONDITIONAL


def _sentence(text: str) -> str:
    return text.rstrip(".")


def judge(rule: Rule, values: dict) -> Verdict:
    """The row's status from the recorded verdicts `values` {(notebook, name): recorded value}."""
    labels = dict(zip(rule.verdicts, rule.labels))
    found = [(name, outcome, f"{labels[key]}, {sentence}" if labels.get(key) else sentence)
             for key in rule.verdicts for name, outcome, sentence in _recorded(values[key], key[1])]
    unknown = [o for _, o, _ in found if o != "untestable" and o not in rule.statuses]
    if unknown:
        return Verdict(NOT_RUN, f"the chapter recorded an outcome this row does not know ({', '.join(unknown)})",
                       LEDGER_RULE)
    statuses = [UNTESTABLE if o == "untestable" else rule.statuses[o] for _, o, _ in found]
    evidence = "; ".join(_sentence(sentence) for _, _, sentence in found)
    return Verdict(combine(statuses), evidence, LEDGER_RULE,
                   {"outcomes": {name: o for name, o, _ in found}, "sentences": [_sentence(t) for _, _, t in found],
                    "statuses": statuses})


def _paper(claim, conditions, verdicts, statuses, figure, finding=None, labels=()) -> Rule:
    return Rule(claim, "paper", conditions, verdicts, statuses, figure, finding, labels)


def _book(claim, conditions, verdicts, statuses, figure, finding=None, labels=()) -> Rule:
    return Rule(claim, "book", conditions, verdicts, statuses, figure, finding, labels)


YES = {"holds": HOLDS, "fails": FAILS}
SOME = {**YES, "some": CONDITIONAL}    # for verdicts over several settings that can split

RULES: tuple[Rule, ...] = (
    _paper(r"The expected rank of a hardmax attention head is at most about $0.63\,n$, whatever $d_h$.",
           "hardmax; orthonormal inputs; independent Gaussian $W_q, W_k$; Monte Carlo over $n$ and $d_h$",
           (("02_low_rank_barrier", "ch2_barrier_verdict"),), YES, "fig-barrier",
           Finding("barrier", "The paper's low-rank barrier, rank at most about 0.63 n",
                   "hardmax rank of random heads, orthonormal inputs, Gaussian weights")),
    _paper("The barrier binds attention heads in general, not only random ones.",
           "constructed identity and previous-token heads, at their certified temperature",
           (("08_where_it_breaks", "ch8_barrier_general"),), YES, "fig-ch8-temperature"),
    _paper(r"The rank saturates once $d_h$ is of order $\log n$.",
           "hardmax rank of random queries with Gaussian keys; saturation point (knee) per $n$, two definitions, "
           "fitted against $n$ with a bootstrap over trials, robust to a knee moved by a grid step (chapter 3, and its "
           "section on predicting the rank with more trials and a longer range of $n$)",
           (("03_saturation", "ch3_verdict_loose"), ("03_saturation", "ch3_verdict_tight"),
            ("03b_predicting_rank", "ch3b_knee_growth")),
           {"log": HOLDS, "faster": FAILS}, "fig-ch3-knees",
           Finding("saturation", "The paper's saturation of the rank once dₕ is of order log n",
                   "knee of the hardmax rank of random heads with Gaussian keys against n")),
    _book("A first-principles predictor gives the expected hardmax rank of random heads over the whole grid of $n$ "
          "and $d_h$.",
          "hardmax rank of random heads with Gaussian or unit-sphere keys; Monte Carlo on held-out $n$, and on head "
          "dimensions off the grid for Gaussian keys; accuracy goal in rank$/n$",
          (("03b_predicting_rank", "ch3b_accuracy_gaussian"), ("03b_predicting_rank", "ch3b_accuracy_sphere"),
           ("03b_predicting_rank", "ch3b_accuracy_heldout_dh")),
          {"meets": HOLDS, "misses": FAILS}, "fig-3b-heatmap"),
    _book("With keys on the unit sphere (QK-normalised heads) the saturation point does not grow with $n$.",
          "hardmax rank of random heads with unit-sphere keys; knee at the loosest level, smallest against largest $n$",
          (("03b_predicting_rank", "ch3b_sphere_flat_verdict"),), {"flat": HOLDS, "grows": FAILS,
                                                                   "undetermined": UNTESTABLE}, "fig-3b-sphere"),
    _book(r"A random code of query and key vectors puts mass $1 - \varepsilon$ on one key among $n$ at the dimension "
          "the margin law predicts.",
          r"queries and keys on the sphere of radius $\sqrt L$; the moment generating function and the off-target ratio "
          "against Monte Carlo",
          (("03c_margin_theory", "ch3c_mgf_verdict"), ("03c_margin_theory", "ch3c_random_code_ratio"),
           ("03c_margin_theory", "ch3c_random_code_mass")),
          {"agrees": HOLDS, "misses": FAILS, "holds": HOLDS, "fails": FAILS}, "fig-3c-checks"),
    _book(r"When the logit scale grows like $c \ln n$, the dimension a head needs grows only like $\log n$.",
          r"optimised free codes for a permutation pattern, $L = c \ln n$, mean target mass $1 - \varepsilon$; the book's "
          "knee rule with a bootstrap over seeds, robust to one dimension more or less",
          (("03c_margin_theory", "ch3c_log_scale_growth"),), {"log": HOLDS, "faster": FAILS}, "fig-3c-log",
          Finding("margin", "The book's margin law, a needed dimension of order log n when the logit scale grows "
                  "like c ln n", "optimised query and key codes for a permutation, mean target mass 0.9")),
    _paper("Random attention at initialization stays under the barrier.",
           "hardmax rank of randomly initialised heads; several input distributions and scales",
           (("04_random_attention", "ch4_hard_exceedance"),), {"never": HOLDS, "exceeds": FAILS}, "fig-ch4-hardmax"),
    _paper(r"Head dimension beyond about $\log n$ is redundant: after training it can be removed without loss "
           "(model reduction).",
           r"SVD truncation of every head's $W_q W_k^\top$ in the trained text and image models of chapter 6 (loss "
           "within 1 %, no fine-tuning) and in all-MiniLM-L6-v2 (output cosine 0.99); every head of the decoder "
           "SmolLM2-135M-Instruct cut at once (perplexity within 5 %, n = 256 to 2,048); against "
           r"$\lceil \log_2 n \rceil$ dimensions",
           (("07_model_reduction", "ch7_redundancy"), ("10_decoder_llm", "ch10_redundancy")), SOME,
           "fig-ch7-compression",
           Finding("redundancy", "The paper's redundancy of head dimension beyond about log n",
                   "SVD truncation of trained heads and of all-MiniLM-L6-v2, and a query/key cut of the decoder "
                   "SmolLM2-135M-Instruct judged by perplexity, against ⌈log₂ n⌉ dimensions"),
           labels=("", "in chapter 10's decoder")),
    _paper(r"The head dimension a trained model needs grows only like $\log n$.",
           "small transformers trained on synthetic tasks with known attention patterns, at the logit scales their "
           r"heads reach in training (unconstrained; chapter 3 shows that $\log n$ needs a scale growing like "
           r"$c \ln n$); the saturation width of the accuracy per $n$ (by default $n$ = 16 to 128, and copy and "
           "reversal to 256), fitted against $n$ per task, and the largest $n$ held out and predicted from the "
           "others; robust to a seed left out and a grid step",
           (("05_trained_synthetic", "verdicts"), ("05_trained_synthetic", "ch5_copy_heldout"),
            ("05_trained_synthetic", "ch5_reversal_heldout"), ("05_trained_synthetic", "ch5_high_rank_heldout")),
           {"log": HOLDS, "linear": FAILS, "sqrt": FAILS, "full": FAILS, "power": FAILS}, "fig-ch5-fits",
           Finding("trained_width", "The paper's claim that a trained head needs a width growing only like log n",
                   "smallest query/key width meeting the accuracy bar on synthetic tasks at the logit scales training reaches, "
                   "fitted against n and the largest n predicted from the others, robust to a seed left out and a "
                   "grid step")),
    _book("The margin law, read off the widest trained heads, predicts the smallest width a trained head needs.",
          "copy, reversal and high_rank models of chapter 5: the random-code width at the logit scale and target mass "
          "of the heads at the largest trained width, with no fitted parameter, against the best constant fitted to "
          "the measured smallest widths (RMS log error over n), robust to a seed left out and a grid step",
          (("05_trained_synthetic", "ch5_copy_law"), ("05_trained_synthetic", "ch5_reversal_law"),
           ("05_trained_synthetic", "ch5_high_rank_law")),
          {"tracks": HOLDS, "no_better": FAILS}, "fig-ch5-bridge"),
    _book(r"A head whose logits are scaled by $s \ln n$ (the scalable softmax) needs a narrower width, as the margin "
          "law predicts.",
          r"copy and reversal of chapter 5 trained again with logits times $s \ln n$, $s = 1$ held fixed, same data, "
          r"seeds, recipe and search (by default at $n$ = 64 and 128); the smallest width by accuracy saturation "
          "against the standard softmax at every $n$, robust to a seed left out and a grid step of either arm",
          (("05_trained_synthetic", "ch5_ssmax_copy"), ("05_trained_synthetic", "ch5_ssmax_reversal")),
          {"narrower": HOLDS, "not_narrower": FAILS}, "fig-ch5-ssmax"),
    _paper("Learning performance saturates at the same head dimension as the rank.",
           "small transformers trained on character text and MNIST patches (chapter 6); the loss and the hardmax and "
           "numerical ranks by one saturation rule, 95 % intervals over seeds, robust to a seed left out and a grid "
           "step",
           (("06_real_data", "ch6_together_hardmax"), ("06_real_data", "ch6_together_numerical")),
           {"together": HOLDS, "loss_later": FAILS, "rank_later": FAILS}, "fig-ch6-rank",
           Finding("together", "The paper's claim that the loss saturates where the rank does",
                   "validation loss against hardmax and numerical rank of trained heads on text and images"),
           labels=("by the hardmax rank", "by the numerical rank")),
    _book("Trained heads on synthetic tasks stay under the barrier.",
          "hardmax rank of every head of the trained models of chapter 5, against $0.63 n$",
          (("05_trained_synthetic", "ch5_ceiling_verdict"),),
          {"below": HOLDS, "pattern_forced": CONDITIONAL, "above": FAILS}, "fig-ch5-phase"),
    _book("On real data (text and images) trained heads stay under the rank a random head of the same kind reaches.",
          "small transformers trained on the character text and MNIST patches of chapter 6; hardmax rank at the "
          r"largest $d_{qk}$ against $(n + 1)/2$ for causal text models and $B(n) \approx 0.63\,n$ for images",
          (("06_real_data", "ch6_barrier_verdict"),), SOME, "fig-ch6-rank"),
    _book("A real pretrained transformer (all-MiniLM-L6-v2) stays under the barrier on average.",
          "every layer's mean hardmax rank over heads and text windows, two corpora",
          (("09_pretrained_model", "ch9_verdict_barrier"),), YES, "fig-ch9-heads"),
    _book("A real decoder language model (SmolLM2-135M-Instruct) stays under the barrier in every head.",
          "hardmax rank of every head (causal, rotary positions, grouped-query attention) on Shakespeare and BBC "
          "text windows of 64 to 2,048 tokens, against $0.63\\,n$",
          (("10_decoder_llm", "ch10_barrier"),), YES, "fig-ch10-ranks"),
    _book("The query/key rank a real decoder needs to stay within 5 % of its perplexity does not grow with n.",
          "every head of SmolLM2-135M-Instruct cut at once to rank $r$ after RoPE (principal directions of "
          "calibration keys), perplexity at $n$ = 256 to 2,048, each test window left out in turn",
          (("10_decoder_llm", "ch10_growth_5pct"),), {"flat": HOLDS, "shrinks": HOLDS, "grows": FAILS},
          "fig-ch10-compression"),
    _book("Training finds heads above the barrier when the task is a permutation.",
          "reversal and high_rank models of chapter 5 that meet their quality bar, and the reversal models of "
          "chapter 8",
          (("05_trained_synthetic", "ch5_permutation_verdict"), ("08_where_it_breaks", "ch8_trained_breaks")),
          {"breaks": HOLDS, "holds": FAILS}, "fig-ch5-phase", labels=("in chapter 5", "in chapter 8")),
    _book("At finite temperature the numerical rank of a random head exceeds the barrier.",
          r"random heads; numerical rank at relative tolerance $10^{-3}$; $T/\sqrt{d_h}$ over eight decades",
          (("08_where_it_breaks", "ch8_lukewarm"),), {"exceeds": HOLDS, "below": FAILS}, "fig-ch8-temperature"),
    _book("Under a causal mask the softmax is exactly full rank, while its hardmax rank is about $n/2$.",
          r"one random causal head at $T = \sqrt{d_h}$",
          (("08_where_it_breaks", "ch8_causal_full_rank"),), {"full_rank": HOLDS, "not_full": FAILS},
          "fig-ch8-temperature"),
    _book("Without skip connections the token states collapse with depth; residual connections prevent it.",
          "randomly initialised stacks; four positional encodings; with and without MLP and LayerNorm",
          (("08_where_it_breaks", "ch8_collapse"),),
          {"prevented": HOLDS, "collapses": CONDITIONAL, "no_collapse": FAILS}, "fig-ch8-depth"),
)


# ---- evaluation -----------------------------------------------------------------------------------------------

def load_all(metrics_dir: Path | None = None) -> dict:
    """Every chapter's metrics file in `metrics_dir` (default: the book's), by notebook name."""
    folder = Path(metrics_dir or paths.metrics_dir())
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("[0-9][0-9]*_*.json"))}


def evaluate(rule: Rule, metrics: dict) -> Verdict:
    """The rule's verdict on `metrics` ({notebook: metrics JSON}); NOT_RUN when a chapter or a verdict is missing."""
    values = {}
    for notebook, name in rule.verdicts:
        run = metrics.get(notebook)
        if run is None:
            return Verdict(NOT_RUN, f"chapter {notebook} has no metrics file in this build", LEDGER_RULE)
        recorded = run.get("values", {})
        if name not in recorded or name in run.get("not_run", []):
            return Verdict(NOT_RUN, f"not recorded by chapter {notebook}: {name}", LEDGER_RULE)
        values[(notebook, name)] = recorded[name]
    try:
        return judge(rule, values)
    except (KeyError, TypeError, AttributeError) as err:  # a verdict whose layout changed: say so, never crash the page
        return Verdict(NOT_RUN, f"the verdicts of chapter {rule.notebook} have an unexpected layout "
                                f"({type(err).__name__}: {err})", LEDGER_RULE)


def evaluate_all(metrics: dict, rules: tuple[Rule, ...] = RULES) -> list[Row]:
    return [Row(rule, evaluate(rule, metrics)) for rule in rules]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[Row], figures: dict, first: int = 1) -> str:
    """The ledger as a MyST table, rows numbered from `first`; `figures` maps a notebook to its figure names, so a
    row links its figure with {numref} when the chapter has it and the chapter page otherwise (a renamed figure
    never breaks the build)."""
    lines = ["| | Claim | Tested under | Status | Evidence | Shown in |", "|---|---|---|---|---|---|"]
    for i, row in enumerate(rows, first):
        rule = row.rule
        link = (f"{{numref}}`{rule.figure}`" if rule.figure in figures.get(rule.notebook, ())
                else f"{{doc}}`{rule.notebook}`")
        lines.append(f"| {i} | {_cell(rule.claim)} | {_cell(rule.conditions)} | "
                     f"**{row.verdict.outcome}** | {_cell(row.verdict.sentence)} | {link} |")
    return "\n".join(lines)


STATUS_VERBS = {HOLDS: "holds", FAILS: "fails", CONDITIONAL: "holds only under stated conditions",
                UNTESTABLE: "is untestable at this budget", NOT_RUN: "was not run in this build"}


def without_status(evidence: str, outcome: str) -> str:
    """A chapter verdict's sentence without the status the finding has just stated: "copy is untestable at this
    budget: all the data ..." -> "for copy, all the data ...", "untestable at this budget: ..." -> "...",
    "by the hardmax rank, untestable at this budget: ..." -> "by the hardmax rank, ..."; any other sentence
    unchanged."""
    if outcome != UNTESTABLE:
        return evidence
    subject, mark, rest = evidence.partition("untestable at this budget: ")
    if mark and subject.endswith(", "):     # a row's label before the sentence: "by the hardmax rank, untestable ..."
        return subject + rest
    if not mark or (subject and not subject.endswith(" is ")):
        return evidence
    subject = subject.removesuffix(" is ")
    return f"for {subject}, {rest}" if subject else rest


def finding_sentence(row: Row) -> str:
    """The introduction's sentence for a row with a finding: its lead, its status, the condition and the evidence
    of the chapter verdict that decided the status (with its numbers), e.g. "The paper's low-rank barrier ... holds (hardmax rank of ...): 24 of 24
    (n, dₕ) points ...". Plain text (Unicode subscripts, no TeX), since it is glued into running prose."""
    finding = row.rule.finding
    if finding is None:
        raise ValueError(f"the row {row.rule.claim!r} has no finding")
    sentences = row.verdict.evidence.get("sentences") or [row.verdict.sentence.rstrip(".")]
    statuses = row.verdict.evidence.get("statuses") or [row.verdict.outcome]
    # the introduction quotes one verdict, the first that decided the row's status (else the first); the ledger
    # row has them all
    deciding = [i for i, status in enumerate(statuses) if status == row.verdict.outcome]
    quoted = (deciding or [0])[0]
    evidence = without_status(sentences[quoted], row.verdict.outcome)
    # the verdicts not quoted are counted with their statuses, so that a row that holds on one measure does not
    # hide another that could not decide
    rest = [status for i, status in enumerate(statuses) if i != quoted]
    if not rest:
        tail = ""
    elif len(rest) == 1:
        tail = f"; 1 more verdict is in the claims ledger, and it {STATUS_VERBS[rest[0]]}"
    else:
        tail = f"; {len(rest)} more verdicts are in the claims ledger: {tally_sentence(Counter(rest))}"
    return f"{finding.lead} {STATUS_VERBS[row.verdict.outcome]} ({finding.condition}): {evidence}{tail}."


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
