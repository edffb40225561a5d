"""The claims ledger: statuses follow the metrics, and a missing chapter or key reads "not run", never a crash."""

import math

import pytest

from helpers import ledger, theory


def barrier_metrics(ci_lows):
    """Chapter 2's metrics with one orthonormal point per entry of `ci_lows` (rank / n), against the exact bound."""
    n = 64
    bound = theory.expected_hardmax_rank(n) / n
    points = [{"model": "orthonormal", "n": n, "d_head": 16, "mc_rank_over_n": low + 0.01, "ci_low_over_n": low,
               "ci_high_over_n": low + 0.02, "bound_over_n": bound} for low in ci_lows]
    return {"02_low_rank_barrier": {"values": {"mc_rank_over_n_vs_bound": points}, "not_run": []}}, bound


def rule(notebook, figure=None):
    return next(r for r in ledger.RULES if r.notebook == notebook and (figure is None or r.figure == figure))


def test_changing_one_metric_changes_the_status():
    metrics, bound = barrier_metrics([0.50, 0.55])
    first = rule("02_low_rank_barrier")
    assert ledger.evaluate(first, metrics).status == ledger.HOLDS
    assert "2 of 2" in ledger.evaluate(first, metrics).evidence
    # one interval now lies entirely above the bound: the claim fails at that point
    metrics["02_low_rank_barrier"]["values"]["mc_rank_over_n_vs_bound"][1]["ci_low_over_n"] = bound + 0.01
    verdict = ledger.evaluate(first, metrics)
    assert verdict.status == ledger.FAILS and "1 of 2" in verdict.evidence


def test_one_constructed_head_above_the_barrier_refutes_binding_in_general():
    general = next(r for r in ledger.RULES if r.notebook == "08_where_it_breaks" and "in general" in r.claim)

    def metrics(identity, previous):
        ranks = [{"example": "identity", "measure": "hardmax", "rank": identity},
                 {"example": "previous_token", "measure": "hardmax", "rank": previous}]
        return {"08_where_it_breaks": {"values": {"counterexample_ranks": ranks, "ch8_n": 64, "ch8_barrier": 40.6},
                                       "not_run": []}}
    assert ledger.evaluate(general, metrics(30, 35)).status == ledger.HOLDS
    refuted = ledger.evaluate(general, metrics(64, 35))
    assert refuted.status == ledger.FAILS and "identity head is above it" in refuted.evidence
    assert "identity and previous-token heads are" in ledger.evaluate(general, metrics(64, 63)).evidence


def test_missing_chapter_key_or_layout_reads_not_run():
    first = rule("02_low_rank_barrier")
    assert ledger.evaluate(first, {}).status == ledger.NOT_RUN
    assert ledger.evaluate(first, {"02_low_rank_barrier": {"values": {}}}).status == ledger.NOT_RUN
    renamed = {"02_low_rank_barrier": {"values": {"mc_rank_over_n_vs_bound": [{"model": "orthonormal"}]}}}
    assert ledger.evaluate(first, renamed).status == ledger.NOT_RUN
    rows = ledger.evaluate_all({})
    assert len(rows) == len(ledger.RULES) and all(r.verdict.status == ledger.NOT_RUN for r in rows)


@pytest.mark.parametrize("growth, status", [(lambda n: 3 * math.log(n), ledger.HOLDS),
                                             (lambda n: n / 2, ledger.FAILS)])
def test_saturation_rule_compares_knees_with_log_n(growth, status):
    knees = [{"series": "hardmax, gaussian keys", "definition": "loose", "n": n, "knee": growth(n)}
             for n in (16, 64, 256, 1024)]
    verdict = ledger.evaluate(rule("03_saturation"), {"03_saturation": {"values": {"knees": knees}}})
    assert verdict.status == status
    within = "(1 of 1 curve within a factor 1.5: gaussian keys (loose))" if status == ledger.HOLDS else \
        "(0 of 1 curve within a factor 1.5)"
    assert within in verdict.evidence, verdict.evidence
    two_points = {"03_saturation": {"values": {"knees": knees[:2]}}}
    assert ledger.evaluate(rule("03_saturation"), two_points).status == ledger.UNTESTABLE


def test_a_model_below_its_quality_bar_is_untestable():
    summary = [{"task": "reversal", "accuracy": 0.5, "heads": 4, "breaking": 3, "max_hardmax_over_n": 0.9}]
    metrics = {"08_where_it_breaks": {"values": {"trained_summary": summary}}}
    breaking = rule("08_where_it_breaks", "fig-ch8-trained")
    assert ledger.evaluate(breaking, metrics).status == ledger.UNTESTABLE
    summary[0]["accuracy"] = 0.99
    assert ledger.evaluate(breaking, metrics).status == ledger.HOLDS
    summary[0]["breaking"] = 0
    assert ledger.evaluate(breaking, metrics).status == ledger.FAILS


def test_every_rule_reads_only_its_listed_keys():
    for r in ledger.RULES:
        assert r.reads and r.source in ("paper", "book") and r.figure.startswith("fig-")


def test_table_links_a_figure_only_when_the_chapter_declares_it():
    metrics, _ = barrier_metrics([0.5])
    rows = ledger.evaluate_all(metrics)
    with_figure = ledger.markdown_table(rows, {"02_low_rank_barrier": {"fig-barrier"}})
    assert "{numref}`fig-barrier`" in with_figure
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


@pytest.mark.parametrize("ranks, status", [([11, 6], ledger.HOLDS), ([16, 6], ledger.CONDITIONAL),
                                           ([16, 16], ledger.FAILS), ([], ledger.UNTESTABLE)])
def test_counted_claims_follow_their_counts(ranks, status):
    rows = [{"stage": "truncated", "included": True, "smallest_r": r} for r in ranks]
    rows += [{"stage": "finetuned", "included": True, "smallest_r": 2},          # other stage: not counted
             {"stage": "truncated", "included": False, "smallest_r": 2}]        # missed its bars: not counted
    metrics = {"07_model_reduction": {"values": {"smallest_r": rows, "ch7_d_max": 16, "ch7_tolerance_pct": 1}}}
    verdict = ledger.evaluate(rule("07_model_reduction"), metrics)
    assert verdict.status == status
    if ranks:
        assert f"{sum(r < 16 for r in ranks)} of {len(ranks)} setting" in verdict.evidence


def ch5(values):
    return {"05_trained_synthetic": {"values": values}}


@pytest.mark.parametrize("answers, status, words", [
    ({"copy": "log", "qsa": "log", "mq_recall": "untestable"}, ledger.HOLDS, "2 of 2 testable tasks support $O(\\log n)$"),
    ({"copy": "log", "reversal": "linear"}, ledger.CONDITIONAL, "1 of 2 testable tasks support $O(\\log n)$ (`copy`); "
                                                                "the other: `reversal` (linear)"),
    ({"reversal": "linear", "qsa": "full"}, ledger.FAILS, "0 of 2 testable tasks support $O(\\log n)$; the others: "
                                                          "`qsa` (full), `reversal` (linear)"),
    ({"copy": "untestable", "qsa": "untestable"}, ledger.UNTESTABLE, "0 of 2 tasks testable"),
])
def test_chapter_5_width_rule_follows_the_per_task_answers(answers, status, words):
    verdicts = {task: {"answer": a, "sentence": "", "usable_n": [], "best": None, "indistinguishable": []}
                for task, a in answers.items()}
    verdict = ledger.evaluate(rule("05_trained_synthetic", "fig-ch5-fits"), ch5({"verdicts": verdicts}))
    assert verdict.status == status and words in verdict.evidence, verdict


def heads_metrics(above):
    """Two cells: copy (pattern rank n/2, below 0.63 n) and reversal (a permutation, rank n), 40 heads in all."""
    cells = [{"task": "copy", "n": 16, "pattern_hardmax_rank": 8}, {"task": "reversal", "n": 16, "pattern_hardmax_rank": 16}]
    rows = [{"task": t, "n": 16, "d_qk": 4, "model_seed": 0, "head": 0, "hardmax_over_n": h, "numerical_over_n": 0.7}
            for t, h in above]
    return ch5({"ch5_heads_total": 40, "above_ceiling": rows, "cells": cells})


@pytest.mark.parametrize("above, status, words", [
    ([], ledger.HOLDS, "0 of 40 trained heads above 0.63 $n$"),
    ([("copy", 0.5)], ledger.HOLDS, "0 of 40"),                        # above only by the numerical rank
    ([("reversal", 0.9), ("reversal", 1.0)], ledger.CONDITIONAL, "2 of 40 trained heads above 0.63 $n$ by the hardmax "
                                                                 "rank, all on tasks whose solving pattern"),
    ([("reversal", 0.9), ("copy", 0.7)], ledger.FAILS, "1 of them on tasks whose pattern stays below it"),
])
def test_chapter_5_heads_rule_separates_heads_that_the_task_forces_above_the_ceiling(above, status, words):
    verdict = ledger.evaluate(rule("05_trained_synthetic", "fig-ch5-phase"), heads_metrics(above))
    assert verdict.status == status and words in verdict.evidence, verdict
    none = ch5({"ch5_heads_total": 0, "above_ceiling": [], "cells": []})
    assert ledger.evaluate(rule("05_trained_synthetic", "fig-ch5-phase"), none).status == ledger.UNTESTABLE


def predictor_metrics(gaussian_error, sphere_error, goal=0.02):
    def accuracy(error):
        return {"outcome": "meets" if error <= goal else "misses", "sentence": "...", "rule": "...",
                "evidence": {"max_error": error, "n": 256, "d_head": 8, "points": 40, "goal": goal}}
    return {"03b_predicting_rank": {"values": {"ch3b_accuracy_gaussian": accuracy(gaussian_error),
                                               "ch3b_accuracy_sphere": accuracy(sphere_error)}}}


@pytest.mark.parametrize("gaussian, sphere, status", [(0.01, 0.015, ledger.HOLDS), (0.03, 0.01, ledger.CONDITIONAL),
                                                      (0.03, 0.05, ledger.FAILS)])
def test_predictor_row_follows_the_accuracy_verdicts(gaussian, sphere, status):
    verdict = ledger.evaluate(rule("03b_predicting_rank", "fig-3b-heatmap"), predictor_metrics(gaussian, sphere))
    assert verdict.status == status
    assert "40 held-out grid points" in verdict.evidence
    assert ("unit-sphere keys only" in verdict.evidence) == (status == ledger.CONDITIONAL)


def test_changing_the_sphere_knee_metric_changes_the_status():
    flat = {"outcome": "flat", "sentence": "...", "rule": "...",
            "evidence": {"ratio": 1.1, "n_min": 16, "n_max": 4096, "threshold": 1.5}}
    metrics = {"03b_predicting_rank": {"values": {"ch3b_sphere_flat_verdict": flat}}}
    sphere = rule("03b_predicting_rank", "fig-3b-sphere")
    assert ledger.evaluate(sphere, metrics).status == ledger.HOLDS
    flat.update(outcome="grows", evidence={**flat["evidence"], "ratio": 2.4})
    verdict = ledger.evaluate(sphere, metrics)
    assert verdict.status == ledger.FAILS and "2.4" in verdict.evidence
    flat.update(outcome="undetermined", evidence={"knees": 1})
    assert ledger.evaluate(sphere, metrics).status == ledger.UNTESTABLE
    assert ledger.evaluate(sphere, {"03b_predicting_rank": {"values": {}}}).status == ledger.NOT_RUN


@pytest.mark.parametrize("exceed, max_z, status, words", [
    (0, -0.76, ledger.HOLDS, "0 of 220 points more than 3 standard errors above the bound; the highest is "
                             "0.76 standard errors below it"),
    (2, 4.5, ledger.FAILS, "2 of 220 points more than 3 standard errors above the bound; the highest is "
                           "4.5 standard errors above it"),
])
def test_chapter_4_rule_counts_points_above_the_bound_and_names_the_highest(exceed, max_z, status, words):
    values = {"ch4_hard_exceed": exceed, "ch4_hard_points": 220, "ch4_hard_max_z": max_z}
    verdict = ledger.evaluate(rule("04_random_attention"), {"04_random_attention": {"values": values}})
    assert verdict.status == status and verdict.evidence == words, verdict.evidence
