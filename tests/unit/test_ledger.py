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


def test_numbers_never_use_e_notation():
    assert ledger.number(3.7e-7) == r"$3.7 \times 10^{-7}$"
    assert ledger.number(64.0) == "64"
    assert ledger.number(0.6321) == "0.63"
    assert ledger.number(1234.5) == "1234"
    assert "e" not in ledger.number(12345.678)


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


@pytest.mark.parametrize("needed, status", [("2 of 2", ledger.HOLDS), ("1 of 2", ledger.CONDITIONAL),
                                             ("0 of 2", ledger.FAILS), ("0 of 0", ledger.UNTESTABLE)])
def test_counted_claims_follow_their_counts(needed, status):
    metrics = {"07_model_reduction": {"values": {"ch7_needed_below_n": needed}}}
    assert ledger.evaluate(rule("07_model_reduction"), metrics).status == status
