"""Chapter 8's recorded numbers: counterexamples at their closed forms, temperature limits, bounds, depth, training."""

import math

import pytest

import figure_checks
from helpers import theory

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("08_where_it_breaks")


@pytest.fixture(scope="module")
def n(metrics):
    return metrics["values"]["ch8_n"]


def ranks_of(metrics, example):
    return {r["measure"]: r["rank"] for r in metrics["values"]["counterexample_ranks"] if r["example"] == example}


def test_every_counterexample_is_recorded_under_every_measure(metrics):
    measures = {"hardmax", "numerical@1e-02", "numerical@1e-03", "numerical@1e-05", "numerical@1e-08", "effective",
                "stable"}
    for example in ("identity", "previous_token", "causal_random", "uniform_causal", "uniform"):
        assert measures <= set(ranks_of(metrics, example)), example


def test_counterexamples_have_their_closed_form_ranks(metrics, n):
    identity = ranks_of(metrics, "identity")
    for measure, value in identity.items():
        assert value == pytest.approx(n, rel=1e-3), measure
    previous = ranks_of(metrics, "previous_token")
    assert previous["hardmax"] == n - 1
    assert previous["numerical@1e-03"] == n - 1
    assert previous["stable"] == pytest.approx(n / 2, rel=1e-3)
    for measure, value in ranks_of(metrics, "uniform").items():
        assert value == pytest.approx(1.0), measure
    assert ranks_of(metrics, "causal_random")["numerical@1e-08"] == n, "causal softmax is exactly full rank"
    uniform_causal = ranks_of(metrics, "uniform_causal")
    assert uniform_causal["numerical@1e-08"] == n and uniform_causal["hardmax"] == 1
    closed = metrics["values"]["ch8_closed_match"]
    assert closed["outcome"] == "match" and closed["evidence"]["matching"] == closed["evidence"]["entries"] >= 20


def test_constructed_heads_break_the_barrier(metrics, n):
    barrier = theory.expected_hardmax_rank(n)
    assert ranks_of(metrics, "identity")["hardmax"] > barrier
    assert ranks_of(metrics, "previous_token")["hardmax"] > barrier
    assert ranks_of(metrics, "random_hardmax")["hardmax"] < n


def test_rank_against_temperature_has_both_limits(metrics, n):
    curves = metrics["values"]["rank_vs_temperature"]
    ratios = sorted({r["ratio"] for r in curves})
    assert ratios[0] < 1e-3 and ratios[-1] > 1e2, "the sweep spans far below to far above sqrt(d_h)"

    def value(head, ratio, measure):
        return next(r["rank"] for r in curves if r["head"] == head and r["ratio"] == ratio and r["measure"] == measure)

    for head in ("random", "identity", "previous_token"):
        hardmax = {value(head, r, "hardmax") for r in ratios}
        assert len(hardmax) == 1, "the hardmax rank does not depend on T"
        assert value(head, ratios[0], "numerical@1e-03") == pytest.approx(hardmax.pop(), abs=1.0)
        assert value(head, ratios[-1], "numerical@1e-02") == 1.0, "uniform limit"
        assert value(head, ratios[-1], "effective") < 1.1
    assert value("identity", ratios[0], "numerical@1e-03") == n
    assert value("causal_random", ratios[-1], "numerical@1e-03") == n, "no uniform limit under a causal mask"
    # between the limits the numerical rank of random heads rises above its hardmax rank
    peak = max(value("random", r, "numerical@1e-03") for r in ratios)
    assert peak > value("random", ratios[0], "hardmax")


def test_softmax_hardmax_and_uniform_gap_bounds_hold(metrics):
    values = metrics["values"]
    assert values["ch8_bound_holds"] == 100.0
    gaps = [r for r in values["gap_vs_temperature"]]
    by = {}
    for r in gaps:
        by.setdefault((r["head"], r["ratio"]), {})[r["quantity"]] = r["value"]
    for key, q in by.items():
        assert q["gap_frobenius"] <= q["gap_bound"] * (1 + 1e-9) + 1e-12, key
        assert q["mirsky_sigma_diff"] <= q["gap_frobenius"] * (1 + 1e-9) + 1e-12, key
        assert q["weyl_max_sigma_diff"] <= q["gap_spectral"] * (1 + 1e-9) + 1e-12, key
        assert q["hot_gap"] <= q["hot_bound"] * (1 + 1e-9) + 1e-12, key
    assert 0.5 < values["ch8_gap_tightness"] <= 1.0 and 0.5 < values["ch8_hot_tightness"] <= 1.0
    certified = {r["head"]: r["certified_temperature"] for r in values["certified_temperature"]}
    assert 0 < certified["random"] < certified["identity"]


def test_pure_attention_collapses_and_skip_connections_prevent_it(metrics):
    values = metrics["values"]
    depth = values["ch8_depth"]
    rows = values["depth"]
    last = [r for r in rows if r["layer"] == depth]
    for r in last:
        if r["arch"] in ("attn", "attn+mlp"):
            assert r["residual"] < 1e-2, r
        else:
            assert r["residual"] > 0.3, r
    first = [r for r in rows if r["layer"] == 1 and r["pos"] == "none"]
    for r in first:
        assert r["rank_numerical"] <= r["distinct_tokens"] + 1, "no positions: rank <= distinct tokens"
    assert values["ch8_collapse"]["outcome"] == "prevented"


def test_trained_heads_break_the_barrier_more_often_than_initial_heads(metrics):
    values = metrics["values"]
    assert values["ch8_break_trained"] > values["ch8_break_init"]
    verdict = values["ch8_trained_breaks"]
    assert verdict["outcome"] == "breaks" and verdict["evidence"]["breaking"] == values["ch8_break_trained"]
    assert verdict["evidence"]["by_task"]["reversal"] >= 1
    heads = values["trained_heads"]
    # counted out of the heads of the tasks that were learned (mean test accuracy >= 0.9), recounted here
    trained = [h for h in heads if h["stage"] == "trained"]
    by_task = {}
    for h in trained:
        by_task.setdefault(h["task"], []).append(h["test_accuracy"])
    accuracy = {task: sum(values) / len(values) for task, values in by_task.items()}
    assert verdict["evidence"]["heads"] == sum(1 for h in trained if accuracy[h["task"]] >= 0.9)
    reversal = [h for h in heads if h["task"] == "reversal" and h["stage"] == "trained"]
    assert reversal and reversal[0]["test_accuracy"] > 0.9
    assert max(h["rank_hardmax"] / h["length"] for h in reversal) > 1 - 1 / math.e


def test_trained_figure_plots_each_head_before_and_after_training(quick_book, metrics):
    """Figure 8.4's CSV: one marker per recorded head of each task at (hardmax rank / n at initialisation, after
    training), and the barrier line at 1 - (1 - 1/n)^n computed here."""
    frame = figure_checks.load(quick_book, "fig-ch8-trained")
    heads = metrics["values"]["trained_heads"]
    drawn = figure_checks.series(frame, "points")
    for task in dict.fromkeys(r["task"] for r in heads):
        stages = {}
        for r in heads:
            if r["task"] == task:
                stages.setdefault((r["seed"], r["layer"], r["head"]), {})[r["stage"]] = r["hardmax_over_n"]
        expected = sorted((s["init"], s["trained"]) for s in stages.values())
        figure_checks.assert_points(sorted(map(tuple, drawn[task])), expected, task)
    n = heads[0]["n"]
    barrier = figure_checks.series(frame, "hline")[r"barrier $1-(1-1/n)^n$"]
    assert barrier[0, 1] == pytest.approx(1 - (1 - 1 / n) ** n, rel=figure_checks.CSV_RTOL)
