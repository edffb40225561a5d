"""Chapter 4's recorded numbers (quick mode) against exact limits and the balls-in-bins bound."""

import math

import pytest

import figure_checks
from helpers import plotting, theory
from helpers.experiments import ch04_random_attention as ri

NUM3 = ri.NUM3
pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("04_random_attention")


@pytest.fixture(scope="module")
def curves(metrics):
    return metrics["values"]["curves"]


def pick(rows, **where):
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


def test_quick_mode_resolves_the_documented_defaults(metrics):
    p = metrics["params"]
    assert metrics["mode"] == "quick"
    assert p["N_VALUES"] == [32, 64] and p["D_MODEL"] == 128 and p["TRIALS"] == 12
    assert p["D_HEADS"][0] == 1 and p["INPUTS"] == ["gaussian", "orthonormal", "near_orthonormal", "anisotropic", "sphere"]


def test_every_condition_has_rank_over_n_at_the_largest_d_head(metrics):
    p, rows = metrics["params"], metrics["values"]["rank_over_n_at_largest_d_head"]
    assert {r["d_head"] for r in rows} == {max(p["D_HEADS"])}
    conditions = {(r["attention"], r["scale"], r["measure"]) for r in rows}
    assert ("hardmax", "unit", "hardmax") in conditions
    assert len(conditions) == 1 + len(ri.SCALES) * (len(ri.RANK_MEASURES) - 1)
    assert len(rows) == len(conditions) * len(p["N_VALUES"]) * len(p["INPUTS"])


def test_hardmax_rank_stays_below_the_exact_bound(metrics):
    for r in pick(metrics["values"]["rank_over_n_at_largest_d_head"], measure="hardmax"):
        bound = theory.expected_hardmax_rank(r["n"]) / r["n"]
        assert r["bound"] == pytest.approx(bound)
        assert r["rank_over_n"] <= bound + 3 * r["se_over_n"] + 1e-12, r
        assert r["rank_over_n"] > 0.3, "at the largest d_h most keys are hull vertices"


def test_hardmax_rank_at_d_head_one_is_at_most_two(curves):
    rows = pick(curves, attention="hardmax", measure="hardmax", d_head=1)
    assert rows and all(1.0 <= r["mean"] <= 2.0 for r in rows)


def test_numerical_rank_at_d_head_one_is_small(curves):
    for r in pick(curves, attention="softmax", measure=NUM3, d_head=1):
        assert r["mean"] <= 0.3 * r["n"], r
        if r["scale"] == "init":
            assert r["mean"] <= 2.0 + 1e-9, "rank-one logits, near-uniform softmax: at most d_h + 1"


def test_init_scale_numerical_rank_is_at_most_d_head_plus_one(curves):
    rows = pick(curves, attention="softmax", scale="init", measure=NUM3)
    assert rows and all(r["mean"] <= min(r["d_head"] + 1, r["n"]) + 1e-9 for r in rows)


def test_unit_scale_numerical_rank_breaks_the_barrier(metrics):
    rows = pick(metrics["values"]["rank_over_n_at_largest_d_head"], scale="unit", measure=NUM3, attention="softmax")
    assert rows and all(r["verdict"] == "above" and r["rank_over_n"] > 0.9 for r in rows)


def test_raw_scale_softmax_is_close_to_hardmax_at_the_largest_sizes(metrics):
    rows = metrics["values"]["rank_over_n_at_largest_d_head"]
    n_max = max(metrics["params"]["N_VALUES"])
    for kind in metrics["params"]["INPUTS"]:
        hard = pick(rows, measure="hardmax", n=n_max, inputs=kind)[0]["rank_over_n"]
        soft = pick(rows, attention="softmax", scale="raw", measure=NUM3, n=n_max, inputs=kind)[0]["rank_over_n"]
        assert soft == pytest.approx(hard, abs=0.06)


def test_weight_scales_set_the_logit_size(curves, metrics):
    d_model = metrics["params"]["D_MODEL"]
    for r in pick(curves, measure="logit_sd", d_head=max(metrics["params"]["D_HEADS"])):
        expected = {"init": 1 / d_model, "unit": 1.0, "raw": d_model}[r["scale"]]
        assert r["mean"] == pytest.approx(expected, rel=0.25), r
    for r in pick(curves, measure="peak_n", scale="init"):
        assert r["mean"] < 1.1, "init-scale rows are almost uniform"


def test_hardmax_rank_grows_with_d_head_and_saturates_inside_the_grid(metrics, curves):
    p = metrics["params"]
    for n in p["N_VALUES"]:
        for kind in p["INPUTS"]:
            line = sorted(pick(curves, attention="hardmax", n=n, inputs=kind), key=lambda r: r["d_head"])
            assert line[-1]["mean"] > 4 * line[0]["mean"]
    for row in metrics["values"]["saturation_d_head"]:
        if row["condition"].startswith("hardmax"):
            assert 1 < row["saturation_d_head"] <= max(p["D_HEADS"])
            assert row["ln_n"] == pytest.approx(math.log(row["n"]))


def test_layout_comparison_uses_the_stated_widths(metrics):
    p, rows = metrics["params"], metrics["values"]["layout_comparison"]
    assert {r["layout"] for r in rows} == set(ri.LAYOUTS)
    for r in rows:
        if r["layout"] == "heads_fixed":
            assert r["d_model"] == p["HEADS"] * r["d_head"] and r["heads"] == p["HEADS"]
        else:
            assert r["d_model"] == p["D_MODEL"] and r["heads"] * r["d_head"] == p["D_MODEL"]


def test_summary_says_the_barrier_holds_for_hardmax_only_where_it_should(metrics):
    table = {r["condition"]: r for r in metrics["values"]["summary_table"]}
    assert table["hardmax rank (any scale)"]["barrier holds?"] == "yes (below)"
    assert table[ri.condition_name("softmax", NUM3, "unit")]["barrier holds?"] == "no (above)"
    assert "softmax numerical, tol 10⁻³, unit" in table, "condition names in words, without e-notation"


def test_the_claims_ledger_row_reads_the_hardmax_exceedance(metrics):
    v = metrics["values"]
    assert v["ch4_hard_exceed"] == v["ch4_hard_exceedance"]["evidence"]["exceeding"] == 0
    assert v["ch4_hard_points"] == len(pick(v["curves"], attention="hardmax"))
    assert v["ch4_hard_max_z"] == v["ch4_hard_exceedance"]["evidence"]["max_z"] < 3.0


def test_verdicts_are_recorded_with_their_rule_and_evidence(metrics):
    v = metrics["values"]
    exceed = v["ch4_hard_exceedance"]
    assert exceed["outcome"] == "never" and exceed["evidence"]["exceeding"] == 0
    assert exceed["evidence"]["points"] == len(pick(v["curves"], attention="hardmax"))
    assert exceed["evidence"]["max_z"] <= 3.0 and "-" not in exceed["sentence"]
    assert v["ch4_init_trend"]["outcome"] in {"falls", "flat"} and v["ch4_init_trend"]["rule"]
    assert v["ch4_sat_edges"]["evidence"]["curves"] == len(v["saturation_d_head"])
    statuses = {row["status"] for row in v["saturation_d_head"]}
    assert statuses <= {"inside", "at_first"}


def test_small_width_figure_plots_the_recorded_mean_ranks(quick_book, metrics, curves):
    """Figure 4.3's CSV: per scale, each curve is the recorded mean rank by d_h <= 16 of the reference inputs at the
    largest n (hardmax rank of hardmax attention, which no scale changes and the chapter records once, at "unit";
    the other measures of softmax attention at the panel's scale)."""
    frame = figure_checks.load(quick_book, "fig-ch4-small")
    inputs = ri.reference_input(metrics["params"]["INPUTS"])
    n = max(metrics["params"]["N_VALUES"])
    for scale in ri.SCALES:
        drawn = figure_checks.series(frame, "line", panel=f"scale {scale}")
        for measure in ("hardmax", NUM3, "effective"):
            hard = measure == "hardmax"
            rows = pick(curves, inputs=inputs, n=n, scale="unit" if hard else scale, measure=measure,
                        attention="hardmax" if hard else "softmax")
            expected = sorted((r["d_head"], r["mean"]) for r in rows if r["d_head"] <= 16)
            points = drawn[plotting.measure_text(measure, powers=True)]
            figure_checks.assert_points(points[points[:, 0].argsort()], expected, f"{scale}, {measure}")
