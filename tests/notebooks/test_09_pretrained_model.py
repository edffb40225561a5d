"""Chapter 09: claims about all-MiniLM-L6-v2 checked on the numbers its quick run recorded."""

import math

import numpy as np
import pytest

import figure_checks
from helpers import plotting, rank

NOTEBOOK = "09_pretrained_model"
pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics(NOTEBOOK)


def test_runs_offline_in_quick_mode_within_budget(metrics):
    assert metrics["mode"] == "quick"
    assert metrics["wall_time_s"] < 180, "quick budget is 60 s on 2 free cores; loose here because test cores are shared"


def test_per_layer_table_covers_every_n_tolerance_and_both_weights(metrics):
    v = metrics["values"]
    table = v["per_layer_rank_over_n"]
    assert set(v["n_values"]) <= set(range(16, 513))
    assert any(m == "numerical@1e-03" for m in v["measures"]), "the headline tolerance 1e-3 is always measured"
    for corpus, by_measure in table.items():
        assert set(by_measure) == set(v["measures"])
        for measure, by_n in by_measure.items():
            assert sorted(int(n) for n in by_n) == sorted(v["n_values"])
            for n, by_weights in by_n.items():
                for weights in ("pretrained", "random"):
                    values = by_weights[weights]
                    assert len(values) == v["ch9_layers"] == 6
                    assert all(0 < x <= 1 + 1e-12 for x in values), (corpus, measure, n, weights)


def test_numerical_rank_grows_as_the_tolerance_shrinks(metrics):
    v = metrics["values"]
    tols = sorted((float(m.split("@")[1]), m) for m in v["measures"] if m.startswith("numerical@"))
    for corpus, by_measure in v["per_layer_rank_over_n"].items():
        for n in by_measure["hardmax"]:
            for weights in ("pretrained", "random"):
                for (_, small), (_, big) in zip(tols, tols[1:]):
                    lo, hi = by_measure[big][n][weights], by_measure[small][n][weights]
                    assert all(a <= b + 1e-12 for a, b in zip(lo, hi))


def test_model_facts(metrics):
    v = metrics["values"]
    assert (v["ch9_d_head"], v["ch9_heads"], v["ch9_layers"], v["ch9_max_positions"]) == (32, 12, 6, 512)
    assert v["ch9_log_n_min"] == pytest.approx(math.log(min(v["n_values"])))
    assert v["ch9_d_head"] > 5 * v["ch9_log_n_max"]


def test_hardmax_layer_means_stay_below_the_balls_in_bins_bound(metrics):
    v = metrics["values"]
    assert v["verdict"]["hardmax_layers_above_bound"] == v["ch9_hm_layers_above"] == 0
    assert v["ch9_hm_layer_mean_max"] < 1 - math.exp(-1)
    assert v["ch9_verdict_barrier"]["outcome"] == "holds"
    assert v["ch9_verdict_barrier"]["sentence"].startswith("holds")


def test_numerical_rank_at_1e3_exceeds_the_barrier_in_most_layers(metrics):
    v = metrics["values"]
    assert v["ch9_nr_layers_above"] > v["ch9_layer_points"] / 2
    assert v["ch9_verdict_numerical"]["outcome"] == "mostly_above"
    assert v["ch9_nr_pre_top"] > v["ch9_nr_random_top"], "pretrained heads are far from uniform; random ones are not"


def test_sinks_take_the_argmax_in_deep_pretrained_layers(metrics):
    v = metrics["values"]
    assert v["ch9_sink_argmax_pre"] > 2 * v["ch9_sink_argmax_random"]
    assert v["ch9_sink_mass_special_pre"] > 10 * v["ch9_sink_mass_special_random"]
    assert v["ch9_sink_corr"] < -0.3, "heads that send more rows to sinks have a lower hardmax rank"
    for row in v["sinks_per_layer"]:
        bound = row["hardmax_sink"] + row["n"] * (1 - row["argmax_sink"])
        assert row["hardmax_over_n"] * row["n"] <= bound + 1e-9


def test_random_baseline_is_near_uniform_and_below_barrier(metrics):
    v = metrics["values"]
    assert v["ch9_random_hm_max"] < 1 - math.exp(-1)
    assert v["ch9_sr_random_top"] < 1.2, "random-weight attention is close to the rank-one uniform matrix"


def test_tolerance_figure_plots_the_recorded_layer_means(quick_book, metrics):
    """Figure 9.2's CSV: in each measure's panel, layer k's curve is the recorded mean rank / n of the pretrained
    weights averaged over the corpora, and the random-weights curve that mean averaged over layers too."""
    frame = figure_checks.load(quick_book, "fig-ch9-tolerances")
    table = metrics["values"]["per_layer_table"]
    measures = ["hardmax"] + [rank.label("numerical", t) for t in metrics["params"]["TOLERANCES"]] + ["effective"]
    for measure in measures:
        drawn = figure_checks.series(frame, "line", panel=plotting.measure_text(measure, powers=True))
        means = {}
        for r in table:
            if r["measure"] == measure:
                means.setdefault((r["weights"], r["n"], r["layer"]), []).append(r["mean"])
        means = {key: sum(v) / len(v) for key, v in means.items()}
        layers = sorted({layer for (_, _, layer) in means})
        n_values = sorted({n for (_, n, _) in means})
        for layer in layers:
            figure_checks.assert_points(drawn[f"layer {layer}"], [(n, means["pretrained", n, layer]) for n in n_values],
                                        f"{measure}, layer {layer}")
        random = [(n, float(np.mean([v for (w, m, _), v in means.items() if (w, m) == ("random", n)])))
                  for n in n_values]
        figure_checks.assert_points(drawn["random weights"], random, f"{measure}, random weights")
