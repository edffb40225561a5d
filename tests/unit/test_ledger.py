"""The claims ledger: a row's status is read from the verdicts the chapters recorded (never re-judged here), a
missing chapter or verdict reads "not run", and helpers/ledger.py holds no threshold of its own."""

import ast
import inspect

import pytest

from helpers import ledger, scaling
from helpers.experiments import ch06_real_data as ch06
from helpers.experiments import ch07_model_reduction as ch07


def recorded(outcome, sentence="the chapter's sentence."):
    return {"outcome": outcome, "sentence": sentence, "rule": "r", "evidence": {}}


def metrics_for(rule, outcomes):
    """Metrics files holding one recorded verdict per (notebook, name) of `rule`, with the given outcomes."""
    out = {}
    for (notebook, name), outcome in zip(rule.verdicts, outcomes):
        out.setdefault(notebook, {"values": {}, "not_run": []})["values"][name] = recorded(outcome, f"{name} says so.")
    return out


def rule_reading(name):
    return next(r for r in ledger.RULES if any(key[1] == name for key in r.verdicts))


def test_a_status_follows_the_recorded_outcome_and_its_sentence():
    barrier = rule_reading("ch2_barrier_verdict")
    verdict = ledger.evaluate(barrier, metrics_for(barrier, ["holds"]))
    assert verdict.outcome == ledger.HOLDS and verdict.sentence == "ch2_barrier_verdict says so"
    assert ledger.evaluate(barrier, metrics_for(barrier, ["fails"])).outcome == ledger.FAILS
    assert ledger.evaluate(barrier, metrics_for(barrier, ["untestable"])).outcome == ledger.UNTESTABLE
    unknown = ledger.evaluate(barrier, metrics_for(barrier, ["sideways"]))
    assert unknown.outcome == ledger.NOT_RUN and "sideways" in unknown.sentence


@pytest.mark.parametrize("outcomes, status", [(["holds", "holds"], ledger.HOLDS), (["fails", "fails"], ledger.FAILS),
                                              (["holds", "fails"], ledger.CONDITIONAL),
                                              (["untestable", "fails"], ledger.FAILS),
                                              (["untestable", "untestable"], ledger.UNTESTABLE)])
def test_several_verdicts_combine(outcomes, status):
    assert ledger.combine([{"holds": ledger.HOLDS, "fails": ledger.FAILS, "untestable": ledger.UNTESTABLE}[o]
                           for o in outcomes]) == status


def test_every_row_maps_the_outcomes_its_chapter_can_record():
    """Each rule's outcome words are exactly ones the chapter's verdict functions return (read from their code)."""
    import importlib

    for rule in ledger.RULES:
        sources = []
        for notebook, _ in rule.verdicts:
            module = importlib.import_module(f"helpers.experiments.ch{notebook}")
            source = inspect.getsource(module)
            for part in vars(module).values():      # the chapter's own helper modules (chapter 05's bridge)
                if inspect.ismodule(part) and part.__name__.startswith(f"helpers.experiments.ch{notebook[:2]}"):
                    source += inspect.getsource(part)
            if "scaling.knee_verdict" in source:     # the book's one knee verdict returns these outcomes
                source += " ".join(f'"{o}"' for o in scaling.KNEE_OUTCOMES)
            sources.append(source)
        # a row that reads several chapters maps the union of their outcome words (chapter 07 can say "some")
        for outcome in rule.statuses:
            assert any(f'"{outcome}"' in src or f"'{outcome}'" in src for src in sources), (rule.claim, outcome)


def test_chapter_5_rows_read_the_per_task_table_and_the_robust_answers():
    width = rule_reading("verdicts")
    metrics = {"05_trained_synthetic": {"values": {"verdicts": {
        "copy": {"answer": "log", "sentence": "copy supports order log n."},
        "high_rank": {"answer": "untestable", "sentence": "high_rank is untestable at this budget: ... ."}},
        **{f"ch5_{task}_heldout": {"outcome": "untestable", "sentence": f"for {task} ..."}
           for task in ("copy", "reversal", "high_rank")}},
        "not_run": []}}
    verdict = ledger.evaluate(width, metrics)
    assert verdict.outcome == ledger.HOLDS and "high_rank is untestable" in verdict.sentence
    held_out = metrics["05_trained_synthetic"]["values"]["ch5_copy_heldout"]
    held_out["outcome"] = "power"                       # the largest n predicted only by power growth
    assert ledger.evaluate(width, metrics).outcome == ledger.CONDITIONAL
    held_out["outcome"] = "log"
    assert ledger.evaluate(width, metrics).outcome == ledger.HOLDS
    metrics["05_trained_synthetic"]["values"]["verdicts"]["reversal"] = {"answer": "linear", "sentence": "s."}
    assert ledger.evaluate(width, metrics).outcome == ledger.CONDITIONAL
    permutation = rule_reading("ch5_permutation_verdict")
    assert [k[0] for k in permutation.verdicts] == ["05_trained_synthetic", "08_where_it_breaks"]
    assert ledger.evaluate(permutation, metrics_for(permutation, ["breaks", "breaks"])).outcome == ledger.HOLDS
    assert ledger.evaluate(permutation, metrics_for(permutation, ["breaks", "holds"])).outcome == ledger.CONDITIONAL


def test_the_real_data_row_compares_causal_heads_with_the_causal_reference():
    import pandas as pd

    # a causal text model at 0.55 n is above the random causal reference (n + 1) / 2n, though below 0.63 n
    at_max = pd.DataFrame({"domain": ["shakespeare", "mnist"], "n": [64, 16], "hardmax_over_n": [0.55, 0.5]})
    verdict = ch06.barrier_verdict(at_max)
    assert verdict.outcome == "some" and "0.508 n (shakespeare at n = 64)" in verdict.sentence
    row = rule_reading("ch6_barrier_verdict")
    assert ledger.evaluate(row, metrics_for(row, [verdict.outcome])).outcome == ledger.CONDITIONAL


def test_the_redundancy_row_reads_the_log_n_budget_with_minilm_in_it():
    import pandas as pd

    smallest = pd.DataFrame({"stage": "truncated", "included": True, "domain": "shakespeare", "n": [32, 64, 128],
                             "smallest_r": [5.0, 13.0, 13.0]})
    verdict = ch07.redundancy_verdict(smallest, 28.0, 32)
    assert verdict.outcome == "some" and verdict.evidence == {"cases": 4, "within_log_n": 1}
    assert "28 against 5 (all-MiniLM-L6-v2 at n = 32)" in verdict.sentence
    assert ch07.redundancy_verdict(smallest.assign(smallest_r=4.0), 4.0, 32).outcome == "holds"
    assert ch07.redundancy_verdict(smallest.assign(smallest_r=16.0), 28.0, 32).outcome == "fails"
    row = rule_reading("ch7_redundancy")
    assert [key[0] for key in row.verdicts] == ["07_model_reduction", "10_decoder_llm"]
    assert ledger.evaluate(row, metrics_for(row, ["fails", "fails"])).outcome == ledger.FAILS
    assert ledger.evaluate(row, metrics_for(row, ["holds", "fails"])).outcome == ledger.CONDITIONAL
    assert ledger.evaluate(row, metrics_for(row, ["fails", "untestable"])).outcome == ledger.FAILS


def test_missing_chapter_verdict_or_layout_reads_not_run():
    barrier = rule_reading("ch2_barrier_verdict")
    assert ledger.evaluate(barrier, {}).outcome == ledger.NOT_RUN
    assert ledger.evaluate(barrier, {"02_low_rank_barrier": {"values": {}}}).outcome == ledger.NOT_RUN
    broken = {"02_low_rank_barrier": {"values": {"ch2_barrier_verdict": {"outcome": "holds"}}}}
    assert ledger.evaluate(barrier, broken).outcome == ledger.NOT_RUN
    rows = ledger.evaluate_all({})
    assert len(rows) == len(ledger.RULES) and all(r.verdict.outcome == ledger.NOT_RUN for r in rows)


def test_the_ledger_holds_no_threshold_and_no_numeric_comparison():
    """The ledger only maps recorded outcomes: no comparison with a number, no numeric literal but 0 and 1."""
    tree = ast.parse(inspect.getsource(ledger))
    numbers = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)]
    assert set(numbers) <= {0, 1}, numbers
    comparisons = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
                   and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in n.ops)]
    assert comparisons == [], comparisons


def test_table_links_a_figure_only_when_the_chapter_declares_it():
    barrier = rule_reading("ch2_barrier_verdict")
    rows = ledger.evaluate_all(metrics_for(barrier, ["holds"]))
    with_figure = ledger.markdown_table(rows, {"02_low_rank_barrier": {"fig-barrier"}})
    assert "{numref}`fig-barrier`" in with_figure and "**holds**" in with_figure
    assert "{doc}`02_low_rank_barrier`" in ledger.markdown_table(rows, {})
    assert with_figure.count("\n") == len(ledger.RULES) + 1


def test_tally_sentence_is_grammatical():
    assert ledger.tally_sentence({ledger.HOLDS: 1}) == "1 holds"
    assert ledger.tally_sentence({ledger.HOLDS: 2, ledger.FAILS: 1, ledger.NOT_RUN: 3}) == \
        "2 hold, 1 fails and 3 were not run"


def test_ledger_page_runs_after_the_chapters_and_reruns_when_their_metrics_change(tmp_path, monkeypatch):
    from helpers import book

    order = [p.stem for p in book.source_notebooks()]
    ledger_page = book.paths.NBS_DIR / "98_claims_ledger.ipynb"
    assert book.reads_metrics(ledger_page)
    chapters = [s for s in order if not book.reads_metrics(book.paths.NBS_DIR / f"{s}.ipynb")]
    assert order.index("98_claims_ledger") > max(order.index(c) for c in chapters)
    monkeypatch.setenv("BOOK_METRICS_DIR", str(tmp_path))
    (tmp_path / "02_low_rank_barrier.json").write_text('{"values": {"x": 1}}')
    (tmp_path / "99_reproducibility.json").write_text('{"wall_time_s": 1}')
    before = book.fingerprint(ledger_page, "quick", {})
    (tmp_path / "99_reproducibility.json").write_text('{"wall_time_s": 2}')  # another reading page: no re-run
    assert book.fingerprint(ledger_page, "quick", {}) == before
    (tmp_path / "02_low_rank_barrier.json").write_text('{"values": {"x": 2}}')  # a chapter's metrics: re-run
    assert book.fingerprint(ledger_page, "quick", {}) != before


def test_finding_sentence_quotes_the_first_verdict_and_counts_the_rest():
    rule = next(r for r in ledger.RULES if r.finding is not None and len(r.verdicts) > 1)
    values = {key: {"outcome": next(iter(rule.statuses)), "sentence": f"sentence {i}; with a clause."}
              for i, key in enumerate(rule.verdicts)}
    row = ledger.Row(rule, ledger.judge(rule, values))
    text = ledger.finding_sentence(row)
    assert text.startswith(rule.finding.lead) and rule.finding.condition in text
    assert "sentence 0; with a clause" in text and "sentence 1" not in text
    more = len(rule.verdicts) - 1
    status = rule.statuses[next(iter(rule.statuses))]
    counted = (f"1 more verdict is in the claims ledger, and it {ledger.STATUS_VERBS[status]}" if more == 1 else
               f"{more} more verdicts are in the claims ledger: {ledger.tally_sentence({status: more})}")
    assert text.endswith(f"sentence 0; with a clause; {counted}.")


def test_finding_sentence_says_the_status_of_each_verdict_it_does_not_quote():
    """The loss-and-rank row holds by one measure while the other cannot decide: the introduction says so."""
    rule = rule_reading("ch6_together_hardmax")
    values = {rule.verdicts[0]: recorded("untestable", "untestable at this budget: one seed flips it"),
              rule.verdicts[1]: recorded("together", "5 of 5 together")}
    text = ledger.finding_sentence(ledger.Row(rule, ledger.judge(rule, values)))
    assert text.endswith("holds (" + rule.finding.condition + "): by the numerical rank, 5 of 5 together; 1 more "
                         "verdict is in the claims ledger, and it is untestable at this budget.")
    three = rule_reading("ch3_verdict_loose")
    values = {three.verdicts[0]: recorded("faster"), three.verdicts[1]: recorded("untestable"),
              three.verdicts[2]: recorded("faster")}
    assert ledger.finding_sentence(ledger.Row(three, ledger.judge(three, values))).endswith(
        "; 2 more verdicts are in the claims ledger: 1 fails and 1 is untestable at this budget.")


def test_finding_sentence_quotes_the_verdict_that_decided_the_status():
    rule = next(r for r in ledger.RULES if r.finding is not None and len(r.verdicts) > 1)
    decided = next(iter(rule.statuses))
    values = {key: {"outcome": "untestable" if i == 0 else decided, "sentence": f"sentence {i}"}
              for i, key in enumerate(rule.verdicts)}
    text = ledger.finding_sentence(ledger.Row(rule, ledger.judge(rule, values)))
    assert "sentence 1" in text and "sentence 0" not in text


def test_a_finding_does_not_state_its_status_twice():
    untestable = ledger.UNTESTABLE
    assert (ledger.without_status("copy is untestable at this budget: all the data point to log n", untestable)
            == "for copy, all the data point to log n")
    assert ledger.without_status("untestable at this budget: too few n", untestable) == "too few n"
    assert (ledger.without_status("by the hardmax rank, untestable at this budget: too few seeds", untestable)
            == "by the hardmax rank, too few seeds")
    # other statuses, and a sentence where the words are not its opening status, are left as they are
    assert ledger.without_status("copy is untestable at this budget: x", ledger.HOLDS) == (
        "copy is untestable at this budget: x")
    assert ledger.without_status("3 of 4 are untestable at this budget: x", untestable) == (
        "3 of 4 are untestable at this budget: x")
    rule = next(r for r in ledger.RULES if r.finding is not None)
    values = {key: {"outcome": "untestable", "sentence": "copy is untestable at this budget: all the data point to x"}
              for key in rule.verdicts}    # a chapter records the word "untestable"
    text = ledger.finding_sentence(ledger.Row(rule, ledger.judge(rule, values)))
    assert text.count("untestable at this budget") == 1 and "for copy, all the data point to x" in text


def test_a_row_of_several_verdicts_names_whose_sentence_is_whose():
    """The loss-and-rank row reads a hardmax and a numerical verdict whose sentences do not name their measure: the
    ledger puts the measure before each, and an untestable one is left out of the status."""
    row = rule_reading("ch6_together_hardmax")
    verdict = ledger.evaluate(row, metrics_for(row, ["untestable", "together"]))
    assert verdict.sentence == ("by the hardmax rank, ch6_together_hardmax says so; "
                                "by the numerical rank, ch6_together_numerical says so")
    assert verdict.outcome == ledger.HOLDS
    # a row without labels quotes its sentences as they are
    barrier = rule_reading("ch2_barrier_verdict")
    assert ledger.evaluate(barrier, metrics_for(barrier, ["holds"])).sentence == "ch2_barrier_verdict says so"
    # a decoder sentence in the redundancy row says which model it is about
    redundancy = rule_reading("ch10_redundancy")
    assert ledger.evaluate(redundancy, metrics_for(redundancy, ["fails", "fails"])).sentence.endswith(
        "; in chapter 10's decoder, ch10_redundancy says so")


def test_labels_come_one_per_verdict_or_not_at_all():
    rule = rule_reading("ch6_together_hardmax")
    with pytest.raises(ValueError, match="labels: one per verdict"):
        ledger.Rule(rule.claim, rule.source, rule.conditions, rule.verdicts, rule.statuses, rule.figure,
                    labels=("by the hardmax rank",))


def test_the_real_data_barrier_sentence_names_the_settings_on_each_side_apart():
    import pandas as pd

    at_max = pd.DataFrame({"domain": ["shakespeare", "mnist", "shakespeare"], "n": [64, 16, 128],
                           "hardmax_over_n": [0.55, 0.5, 0.4]})
    sentence = ch06.barrier_verdict(at_max).sentence
    below, _, above = sentence.partition("; above it: ")
    assert below.startswith("2 of 3 settings below") and "(mnist at n = 16)" in below and "n = 128)" in below
    assert above == "0.55 n against 0.508 n (shakespeare at n = 64)"
    none_below = ch06.barrier_verdict(at_max.assign(hardmax_over_n=0.9)).sentence
    assert none_below.startswith("0 of 3 settings below the reference of its kind; above it: ")
    assert "above" not in ch06.barrier_verdict(at_max.assign(hardmax_over_n=0.1)).sentence
