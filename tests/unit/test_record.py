"""The Recorder: parameters as given and as resolved, and prose numbers a run did not compute."""

import nbformat
import numpy as np

from helpers import parameters, record


def test_recorder_saves_the_given_and_the_resolved_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_METRICS_DIR", str(tmp_path))
    P = parameters.validate(MODE=("quick", parameters.mode), SEED=(3, parameters.seed),
                        TRIALS=(None, parameters.optional(parameters.integer(1, 99))))
    rec = record.Recorder("00_probe", P)
    P.mode_default("TRIALS", quick=4, full=8)  # resolved after the recorder was made: still saved
    rec.save()
    saved = record.load_metrics("00_probe")
    assert saved["params"] == {"MODE": "quick", "SEED": 3, "TRIALS": None}
    assert saved["resolved"] == {"TRIALS": 4}


def test_recorder_marks_prose_numbers_this_run_did_not_compute(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_METRICS_DIR", str(tmp_path))
    source = tmp_path / "00_probe.ipynb"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Copy reaches {glue:text}`copy_rank` n; sorting {glue:text}`sort_rank` n."),
        nbformat.v4.new_markdown_cell("Together: {glue:text}`both:.2f`; elsewhere {glue:text}`03_other.ipynb::x:s`."),
    ])
    nbformat.write(nb, source)
    assert record.glue_references(source) == {"copy_rank", "sort_rank", "both"}
    rec = record.Recorder("00_probe", {"MODE": "quick", "SEED": 0}, source=source)
    rec.glue("copy_rank", 0.5, ".2f")
    rec.save()
    saved = record.load_metrics("00_probe")
    assert saved["not_run"] == ["both", "sort_rank"]
    assert "sort_rank" not in saved["values"] and saved["values"]["copy_rank"] == 0.5


def test_text_or_na():
    assert record.text_or_na(0.12345, ".2f") == "0.12"
    assert record.text_or_na(None, ".2f") == "n/a"
    assert record.text_or_na(float("nan"), ".2f") == "n/a"
    assert record.text_or_na(np.float64("nan"), ".3g") == "n/a"


def test_publish_records_and_glues_a_chapter_result_in_one_call(tmp_path, monkeypatch):
    import math

    import pandas as pd
    import pytest

    from helpers.results import ChapterResult, Verdict

    monkeypatch.setenv("BOOK_METRICS_DIR", str(tmp_path))
    pasted = {}
    monkeypatch.setattr(record, "_paste", lambda name, text: pasted.__setitem__(name, text))
    source = tmp_path / "00_probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "{glue:text}`n_max` {glue:text}`ref` {glue:text}`gap` {glue:text}`holds` {glue:text}`missing`")]), source)
    result = ChapterResult()
    result.frames["curves"] = pd.DataFrame({"n": [32, 64], "rank_over_n": [0.61, np.nan]})
    result.quote("n_max", np.int64(64), "d")
    result.quote("ref", "orthonormal")
    result.quote("gap", math.nan, ".3f")
    result.verdict("holds", Verdict("below", "The barrier holds.", rule="2 s.e. below", evidence={"z": -3.5}))
    with pytest.raises(ValueError, match="twice"):
        result.quote("holds", 1)
    result.done()
    record.publish("00_probe", {"MODE": "quick", "SEED": 0}, result, source=source)
    saved = record.load_metrics("00_probe")
    assert pasted == {"n_max": "64", "ref": "orthonormal", "gap": "n/a", "holds": "The barrier holds.",
                      "missing": record.NOT_RUN}
    assert saved["values"]["curves"] == [{"n": 32, "rank_over_n": 0.61}, {"n": 64, "rank_over_n": None}]
    assert saved["values"]["holds"] == {"outcome": "below", "sentence": "The barrier holds.", "rule": "2 s.e. below",
                                        "evidence": {"z": -3.5}}
    assert saved["values"]["n_max"] == 64 and saved["not_run"] == ["missing"]
    assert saved["wall_time_s"] == pytest.approx(result.seconds, abs=0.5)
