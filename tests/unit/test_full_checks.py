"""helpers.full_checks on synthetic metrics: each check passes a build that keeps the chapters' promises and names
the broken promise otherwise (so `make check-full` is exercised in CI, where there is no full build)."""

import copy

import pandas as pd

from helpers import cache, full_checks, record
from helpers.experiments import ch05_trained_synthetic as ch05

from test_ch05_analyse import params, rows


def as_metrics(result, mode="full") -> dict:
    """The metrics JSON `record.publish` would write for `result` (values only)."""
    values = {name: record._tabular(frame) for name, frame in result.frames.items()}
    values.update({name: quote.value for name, quote in result.quotes.items()})
    values.update({name: {"outcome": v.outcome, "sentence": v.sentence, "rule": v.rule, "evidence": v.evidence}
                   for name, v in result.verdicts.items()})
    return cache.to_jsonable({"mode": mode, "values": values})


def chapter_05() -> dict:
    frame = rows("copy", {16: 2, 32: 4, 64: 6, 128: 8}, grid=[1, 2, 3, 4, 6, 8, 12, 16])
    return as_metrics(ch05.judge(params(N_VALUES=[16, 32, 64, 128], D_QK=[1, 2, 3, 4, 6, 8, 12, 16], D_MODEL=16),
                                 frame, replicates=50))


def chapter_06() -> dict:
    grid = [1, 2, 4, 16]
    sat = [{"domain": "bbc", "n": 128, "quantity": q, "grid": grid, "value": 16.0, "low": 4.0, "high": 16.0}
           for q in ("loss", "hardmax", "numerical@1e-03")]
    robust = {"perturbations": 7, "flips": []}
    together = {"outcome": "together", "sentence": "s", "rule": "r", "evidence": {"robustness": robust}}
    return {"mode": "full", "values": {
        "quality": [{"domain": "bbc", "n": 128, "included": True, "fewest_valid_seeds": 3, "value": 2.6}],
        "baselines": [{"domain": "bbc", "n": 128, "metric": "bits_per_token", "value": 3.65}],
        "saturation": sat, "ch6_together_hardmax": together, "ch6_together_numerical": copy.deepcopy(together)}}


def chapter_07() -> dict:
    verdict = {"outcome": "untestable", "sentence": "s", "rule": "r", "evidence": {}}
    return {"mode": "full", "values": {"scaling_fit": {"domain": "shakespeare", "n": [32, 64, 128],
                                                      "smallest_r": [11.0, 13.0, 16.0]},
                                       "ch7_scaling": verdict, "ch7_d_max": 16}}


def build() -> dict:
    return {"05_trained_synthetic": chapter_05(), "06_real_data": chapter_06(), "07_model_reduction": chapter_07()}


def test_a_build_that_keeps_its_promises_has_no_problem():
    problems = full_checks.run_all(build())
    assert set(problems) == {"modes", "05", "06", "07"} and not any(problems.values()), problems


def test_a_quick_run_or_a_missing_chapter_is_named():
    metrics = build()
    metrics["06_real_data"]["mode"] = "quick"
    del metrics["07_model_reduction"]
    problems = full_checks.check_modes(metrics)
    assert "06_real_data ran in mode 'quick', not 'full'" in problems
    assert "07_model_reduction is missing from the build" in problems


def test_chapter_05_broken_promises_are_named():
    metrics = build()
    cell = next(c for c in metrics["05_trained_synthetic"]["values"]["cells"] if c["n"] == 64)
    cell["d_star"] = 5.0                                         # an interpolated width: never trained
    top = [m for m in metrics["05_trained_synthetic"]["values"]["models"] if m["n"] == 32 and m["d_qk"] == 16]
    top[0]["test_accuracy"] = 0.5                                # a used cell whose top model misses its bar
    verdict = metrics["05_trained_synthetic"]["values"]["verdicts"]["copy"]
    verdict["answer"] = "log"
    verdict["robustness"] = {"perturbations": 9, "flips": [{"perturbation": "seed 1 left out", "outcome": "sqrt"}]}
    held_out = metrics["05_trained_synthetic"]["values"]["ch5_copy_heldout"]
    held_out["outcome"] = "log"                                  # decided, though a perturbation flips it
    held_out["evidence"]["robustness"] = {"perturbations": 9, "flips": [{"perturbation": "seed 2 left out",
                                                                         "outcome": "untestable"}]}
    assert metrics["05_trained_synthetic"]["values"]["heldout"], "the synthetic build holds a held-out table"
    row = metrics["05_trained_synthetic"]["values"]["heldout"][0]
    row["predicted_low"] = row["predicted_high"]                 # an interval of one value
    cells = metrics["05_trained_synthetic"]["values"]["cells"]
    moved = next(c for c in cells if c["n"] == 32)
    moved.update(spread=True, d_star_low=moved["d_star"], d_star_high=moved["d_star"])   # moved, yet one value
    still = next(c for c in cells if c["n"] == 128)
    still.update(spread=False, seed_count=2)                     # one value, and too few seeds to count instead
    problems = " | ".join(full_checks.check_trained_synthetic(metrics))
    assert "copy at n = 32: an interval of one value shown as an interval" in problems
    assert "copy at n = 128: its interval has one value, and only 2 seeds are counted in its place" in problems
    assert "ch5_copy_heldout: decided (log) although seed 2 left out flips it" in problems
    assert f"copy held out at n = 128: the {row['form']} prediction's interval has zero width" in problems
    assert "copy at n = 64: saturation width 5.0 was never trained" in problems
    assert "copy at n = 32: used, but not every model at d_qk = 16 meets the bar" in problems
    assert "copy: decided (log) although seed 1 left out flips it" in problems


def test_chapter_06_broken_promises_are_named():
    metrics = build()
    values = metrics["06_real_data"]["values"]
    values["quality"][0]["value"] = 3.9                          # worse than the bigram table's 3.65
    values["saturation"][0]["value"] = 13.1                      # interpolated between 4 and 16
    values["ch6_together_hardmax"]["evidence"]["robustness"]["flips"] = [
        {"perturbation": "seed 0 left out", "outcome": "loss_later"}]
    problems = " | ".join(full_checks.check_real_data(metrics))
    assert "does not beat the baseline 3.65" in problems
    assert "loss value 13.1 is not a trained width" in problems
    assert "ch6_together_hardmax: decided (together) although seed 0 left out flips it" in problems


def test_chapter_07_a_censored_width_cannot_decide():
    metrics = build()
    metrics["07_model_reduction"]["values"]["ch7_scaling"]["outcome"] = "log"
    assert full_checks.check_model_reduction(metrics) == [
        "chapter 07 growth: decided on fewer than 3 n or on a censored full-width r"]
    metrics["07_model_reduction"]["values"]["scaling_fit"] = {}
    assert full_checks.run_all(metrics)["07"][0].startswith("chapter 07: metrics layout changed"), "never a crash"


def test_chapter_05_frames_are_tidy_tables():
    assert isinstance(pd.DataFrame(chapter_05()["values"]["cells"]), pd.DataFrame)
