"""Chapter 06's recorded numbers, checked against recomputations from the recorded per-model rows."""

import math

import numpy as np
import pytest

import figure_checks

pytestmark = pytest.mark.notebooks

BARS = {"shakespeare": ("bits_per_token", "<=", 2.8), "bbc": ("bits_per_token", "<=", 2.8),
        "proteins": ("bits_per_token", "<=", 4.0), "mnist": ("test_accuracy", ">=", 0.95)}


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("06_real_data")


def _setting(rows, domain, n):
    return [r for r in rows if r["domain"] == domain and r["n"] == n]


def _first_crossing(d, y, target):
    """The first grid d with y >= target (d ascending), never interpolated; NaN when none is."""
    return next((k for k, v in zip(d, y) if v >= target), math.nan)


def test_every_point_has_at_least_three_seeds_and_ranks_within_bounds(metrics):
    models = metrics["values"]["models"]
    assert models, "no models recorded"
    points = {}
    for m in models:
        points.setdefault((m["domain"], m["n"], m["d_head"]), set()).add(m["seed"])
        if m["valid"]:
            assert 1 - 1e-9 <= m["hardmax"] <= m["n"] + 1e-9
            assert 1 - 1e-9 <= m["numerical@1e-03"] <= m["n"] + 1e-9
            assert m["uniform_loss"] - m["test_loss"] == pytest.approx(m["uniform_increase"], abs=1e-9)
            assert m["test_loss"] < m["chance_loss"], "a valid model must beat chance"
    assert min(len(s) for s in points.values()) >= 3


def test_quality_table_is_recomputed_from_the_model_rows(metrics):
    models = metrics["values"]["models"]
    for q in metrics["values"]["quality"]:
        rows = _setting(models, q["domain"], q["n"])
        top = [m for m in rows if m["d_head"] == max(r["d_head"] for r in rows) and m["valid"]]
        metric, comparison, bar = BARS[q["domain"]]
        value = float(np.mean([m[metric] for m in top]))
        assert q["value"] == pytest.approx(value, rel=1e-9)
        assert q["meets_bar"] == (value <= bar if comparison == "<=" else value >= bar)
        gap = float(np.mean([m["uniform_increase"] for m in top]))
        assert q["uniform_increase"] == pytest.approx(gap, rel=1e-9)
        assert q["load_bearing"] == (gap >= 0.05)
        assert q["included"] == (q["meets_bar"] and q["load_bearing"] and q["fewest_valid_seeds"] >= 3)
        assert q["diverged"] == sum(m["diverged"] for m in rows)


def test_saturation_points_are_recomputed_from_the_model_rows(metrics):
    models = metrics["values"]["models"]
    checked = 0
    for s in metrics["values"]["saturation"]:
        rows = [m for m in _setting(models, s["domain"], s["n"]) if m["valid"]]
        d = sorted({m["d_head"] for m in rows})
        column = "test_loss" if s["quantity"] == "loss" else s["quantity"]
        y = [float(np.mean([m[column] for m in rows if m["d_head"] == k])) for k in d]
        if s["quantity"] == "loss":
            y = [-v for v in y]
        # one rule for loss and ranks: 95 % of the rise from the smallest d_qk, read at a trained width
        expected = d[0] if not y[-1] > y[0] else _first_crossing(d, y, y[0] + 0.95 * (y[-1] - y[0]))
        assert s["value"] == expected and s["value"] in d, s
        assert s["status"] == ("at_first" if expected == d[0] else "inside")
        assert s["grid"] == d
        if s["low"] is not None and not math.isnan(s["low"]):
            assert d[0] <= s["low"] <= s["high"] <= d[-1] and s["low"] in d and s["high"] in d
        checked += 1
    assert checked >= 1


def test_rank_over_n_at_the_largest_d_qk(metrics):
    models = metrics["values"]["models"]
    for row in metrics["values"]["rank_at_max"]:
        rows = _setting(models, row["domain"], row["n"])
        top = [m for m in rows if m["d_head"] == max(r["d_head"] for r in rows) and m["valid"]]
        for label in ("hardmax", "numerical@1e-03"):
            assert row[f"{label}_over_n"] == pytest.approx(np.mean([m[label] for m in top]) / row["n"], rel=1e-9)
            assert 0 < row[f"{label}_over_n"] <= 1


def test_verdicts_count_every_setting(metrics):
    settings = len(metrics["values"]["quality"])
    included = sum(q["included"] for q in metrics["values"]["quality"])
    for key in ("ch6_together_hardmax", "ch6_together_numerical"):
        evidence = metrics["values"][key]["evidence"]
        assert evidence["settings"] == settings
        assert evidence["together"] + evidence["rank_later"] + evidence["loss_later"] <= included
        label = "hardmax" if key.endswith("hardmax") else "numerical@1e-03"
        per_setting = [row[label] for row in metrics["values"]["together"]]
        counts = {k: per_setting.count(k) for k in ("together", "rank_later", "loss_later", "untestable")}
        assert {k: evidence[k] for k in counts} == counts
        outcome = metrics["values"][key]["outcome"]
        if included == 0 or counts["untestable"] == settings:
            assert outcome == "untestable"
            continue
        majority = max(("together", "rank_later", "loss_later"), key=lambda k: counts[k])
        if evidence["robustness"]["flips"]:      # a seed left out or a grid step changed it
            assert outcome == "untestable" and evidence["undecided_outcome"] == majority
        else:
            assert outcome == majority and evidence["robustness"]["perturbations"] >= 3


def test_the_prose_pastes_only_names_the_run_recorded(metrics):
    from helpers import paths, record

    pasted = record.glue_references(paths.NBS_DIR / "06_real_data.ipynb")
    assert pasted and pasted <= set(metrics["values"]), sorted(pasted - set(metrics["values"]))
    assert metrics["not_run"] == []


def test_the_headline_counts_agree_with_the_verdicts(metrics):
    values = metrics["values"]
    settings = len(values["quality"])
    included = sum(q["included"] for q in values["quality"])
    headline = values["ch6_headline"]
    if included == 0:
        assert headline.startswith(f"None of the {settings} settings meets its quality bar")
        assert "untestable at this budget" in headline
        return
    testable = {settings - values[key]["evidence"]["untestable"] for key in ("ch6_together_hardmax",
                                                                            "ch6_together_numerical")}
    if len(testable) == 1:
        assert f"{testable.pop()} of the {settings} can decide" in headline
    else:
        for key, words in (("ch6_together_hardmax", "hardmax rank"), ("ch6_together_numerical", "numerical rank")):
            assert f"{settings - values[key]['evidence']['untestable']} by the {words}" in headline


def test_rank_figure_plots_the_seed_means_and_sds_of_the_valid_models(quick_book, metrics):
    """Figure 6.2's CSV: per domain and rank measure, each n's curve is the mean over the valid models' rank / n by
    d_qk, recomputed here, and its error bar spans the seeds' sample SD on each side."""
    frame = figure_checks.load(quick_book, "fig-ch6-rank")
    models = [r for r in metrics["values"]["models"] if r["valid"]]
    rows = {"hardmax rank / n": "hardmax_over_n", "numerical rank / n (rtol 10⁻³)": "numerical@1e-03_over_n"}
    checked = 0
    for domain in sorted(set(frame.panel)):
        for y_label, column in rows.items():
            curves = figure_checks.series(frame, "line", panel=domain, y_label=y_label)
            for label, points in curves.items():
                n = int(label.removeprefix("n = "))
                by_d = {}
                for r in _setting(models, domain, n):
                    by_d.setdefault(r["d_head"], []).append(r[column])
                means = [(d, float(np.mean(v))) for d, v in sorted(by_d.items())]
                figure_checks.assert_points(points, means, f"{domain}, n = {n}, {column}")
                seg = frame[(frame.kind == "segment") & (frame.panel == domain) & (frame.y_label == y_label)
                            & (frame.series == label)]
                sds = [float(np.std(v, ddof=1)) for _, v in sorted(by_d.items())]
                # both ends are ranks / n at most 1.05, each kept to 10 significant digits in the CSV
                np.testing.assert_allclose(seg.y_end - seg.y, 2 * np.array(sds), rtol=0,
                                           atol=2 * 1.05 * figure_checks.CSV_RTOL)
                checked += 1
    assert checked >= 2 * len(set(frame.panel)) > 0, "a panel without a curve"
