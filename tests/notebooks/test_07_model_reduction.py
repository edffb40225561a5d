"""Chapter 07's recorded numbers, checked against recomputations from the recorded per-model rows."""

import math

import numpy as np
import pytest

import figure_checks

pytestmark = pytest.mark.notebooks


@pytest.fixture(scope="module")
def metrics(quick_book):
    return quick_book.metrics("07_model_reduction")


def _groups(rows, *keys):
    out = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def test_truncation_at_full_rank_is_lossless_and_every_r_is_scored(metrics):
    rows = [r for r in metrics["values"]["compression_rows"] if r["stage"] == "truncated"]
    assert rows, "no compression rows"
    for (domain, n, seed), part in _groups(rows, "domain", "n", "seed").items():
        ranks = sorted(r["r"] for r in part)
        assert ranks == list(range(1, ranks[-1] + 1)), "r = 1 .. d_qk"
        top = next(r for r in part if r["r"] == ranks[-1])
        assert top["test_loss"] == pytest.approx(top["base_loss"], abs=1e-5)


def test_smallest_r_is_recomputed_from_the_rows(metrics):
    rows = metrics["values"]["compression_rows"]
    for s in metrics["values"]["smallest_r"]:
        part = [r for r in rows if r["domain"] == s["domain"] and r["n"] == s["n"] and r["stage"] == s["stage"]]
        seeds = sorted({r["seed"] for r in part})
        if s["stage"] == "finetuned":   # compared with the full-rank control fine-tuned the same way
            top = max(r["r"] for r in part)
            ref = {sd: next(r["test_loss"] for r in part if r["seed"] == sd and r["r"] == top) for sd in seeds}
        else:
            ref = {sd: next(r["base_loss"] for r in part if r["seed"] == sd) for sd in seeds}
        base = float(np.mean(list(ref.values())))
        ranks = sorted({r["r"] for r in part})
        means = [float(np.mean([r["test_loss"] for r in part if r["r"] == k])) for k in ranks]
        expected = next((k for k, m in zip(ranks, means) if m <= 1.01 * base), math.nan)
        if math.isnan(expected):
            assert s["smallest_r"] is None or math.isnan(s["smallest_r"])
        else:
            assert s["smallest_r"] == expected
            per_seed = [next(k for k in ranks if next(r["test_loss"] for r in part if r["seed"] == sd and r["r"] == k)
                             <= 1.01 * ref[sd]) for sd in seeds]
            assert s["seed_low"] == min(per_seed) and s["seed_high"] == max(per_seed)
            below = [k for k in ranks if k < expected]  # an answer above untried ranks is a range
            assert s["r_low"] == (below[-1] + 1 if below else expected)
        assert s["seeds"] >= 3


def test_scratch_comparison_uses_chapter_06_models(metrics):
    models = metrics["values"]["scratch_models"]
    for c in metrics["values"]["scratch"]:
        scratch = [m["test_loss"] for m in models if m["domain"] == c["domain"] and m["n"] == c["n"]
                   and m["d_head"] == c["r"] and m["valid"]]
        assert c["scratch_loss"] == pytest.approx(float(np.mean(scratch)), rel=1e-9)
        assert c["seeds"] >= 3


def test_scratch_verdict_counts_only_compressed_ranks(metrics):
    values = metrics["values"]
    included = {(q["domain"], q["n"]) for q in values["quality"] if q["included"]}
    d_max = max(r["r"] for r in values["compression_rows"])
    expected = {}
    for c in values["scratch"]:
        if (c["domain"], c["n"]) in included and c["r"] < d_max:  # the full-rank control is not compressed
            expected[c["outcome"]] = expected.get(c["outcome"], 0) + 1
    counts = {k: v for k, v in values["ch7_scratch"]["evidence"].items() if v}
    assert counts == expected


def test_minilm_compression_and_head_ranks(metrics):
    comp = sorted(metrics["values"]["minilm_compression"], key=lambda r: r["r"])
    assert comp[-1]["r"] == 32 and comp[-1]["cosine_mean"] == pytest.approx(1.0, abs=1e-9)
    assert comp[0]["cosine_mean"] < comp[-1]["cosine_mean"]
    heads = metrics["values"]["minilm_heads"]
    assert len(heads) == 72
    for h in heads:
        assert 1 <= h["energy_rank_weights"] <= h["weights_rank"] <= h["d_head"]
        assert 1 <= h["energy_rank_logits"] <= min(h["n"], h["d_head"] + 1)
        assert 1 <= h["hardmax"] <= h["n"] and 1 <= h["numerical@1e-03"] <= h["n"]


def test_rule_verdict_rests_on_included_settings(metrics):
    rule = metrics["values"]["ch7_rule"]
    included = sum(q["included"] for q in metrics["values"]["quality"])
    assert rule["evidence"]["settings"] == included
    if included == 0:
        assert rule["outcome"] == "untestable"
    else:
        ok = rule["evidence"]["rank1_ok"]
        assert rule["outcome"] == ("supported" if ok == included else "withdrawn")


def test_scaling_verdict_follows_its_rule(metrics):
    values = metrics["values"]
    fit, verdict = values["scaling_fit"], values["ch7_scaling"]
    d_max = max(r["r"] for r in values["compression_rows"])
    if len(set(fit["n"])) < 3 or any(r >= d_max for r in fit["smallest_r"]):
        assert verdict["outcome"] == "untestable" and "untestable at this budget" in verdict["sentence"]
        return
    assert verdict["outcome"] in {"log", "sqrt", "linear", "untestable"}
    if fit["robustness"]["flips"]:
        assert verdict["outcome"] == "untestable"


def test_the_scratch_comparison_credits_back_the_controls_fine_tuning(metrics):
    rows = metrics["values"]["compression_rows"]
    for c in metrics["values"]["scratch"]:
        tuned = [r for r in rows if r["stage"] == "finetuned" and r["domain"] == c["domain"] and r["n"] == c["n"]]
        top = max(r["r"] for r in tuned)
        change = {r["seed"]: r["test_loss"] - r["base_loss"] for r in tuned if r["r"] == top}
        at_r = [r for r in tuned if r["r"] == c["r"]]
        expected = float(np.mean([r["test_loss"] - change[r["seed"]] for r in at_r]))
        assert c["compressed_loss"] == pytest.approx(expected, rel=1e-9)
        assert c["compressed_loss_raw"] == pytest.approx(float(np.mean([r["test_loss"] for r in at_r])), rel=1e-9)


def test_minilm_fine_tuning_is_recorded_with_its_budget(metrics):
    tuned = metrics["values"]["minilm_finetuned"]
    assert {int(r["r"]) for r in tuned} == {1, 4, 8}
    comp = {int(r["r"]): r["cosine_mean"] for r in metrics["values"]["minilm_compression"]}
    for r in tuned:
        assert r["steps"] == metrics["values"]["ch7_minilm_ft_steps"] >= 1
        if int(r["r"]) in comp:   # the truncated float32 copy starts where the float64 truncation is
            assert r["cosine_before"] == pytest.approx(comp[int(r["r"])], abs=1e-4)
        assert -1 <= r["cosine_after"] <= 1 and r["cosine_after"] != r["cosine_before"], "the fine-tuning ran"


def test_minilm_figure_plots_the_recorded_cosines(quick_book, metrics):
    """Figure 7.3's CSV: the mean and the worst snippet's cosine by kept rank r are the recorded ones, and the
    error bars span the recorded SD on each side."""
    frame = figure_checks.load(quick_book, "fig-ch7-minilm")
    rows = metrics["values"]["minilm_compression"]
    drawn = figure_checks.series(frame, "line")
    figure_checks.assert_points(drawn["mean over snippets"], [(r["r"], r["cosine_mean"]) for r in rows], "mean")
    figure_checks.assert_points(drawn["worst snippet"], [(r["r"], r["cosine_min"]) for r in rows], "worst")
    bars = frame[(frame.kind == "segment") & (frame.series == "mean over snippets")]
    # both ends are cosines of at most 1 in size, each kept to 10 significant digits in the CSV
    np.testing.assert_allclose(bars.y_end - bars.y, [2 * r["cosine_sd"] for r in rows], rtol=0,
                               atol=2 * figure_checks.CSV_RTOL)
