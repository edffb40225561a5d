"""`python -m helpers execute` names the notebook and cell that failed, and rejects bad parameters early."""

import subprocess
import sys

import nbformat
import papermill
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from helpers import book, paths


def write_notebook(path, *sources):
    cells = [new_code_cell(s) for s in sources]
    cells[0].metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_failing_notebook_makes_execute_exit_nonzero_and_name_it(tmp_path):
    nb = write_notebook(tmp_path / "99_broken.ipynb", "MODE = 'full'\nSEED = 0", "x = 1", "raise RuntimeError('boom')")
    result = subprocess.run(
        [sys.executable, "-m", "helpers", "execute", "--mode", "quick", str(nb), "--book-dir", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=paths.ROOT,
        env={**__import__("os").environ, "BOOK_METRICS_DIR": str(tmp_path / "m")},
    )
    assert result.returncode != 0
    assert "99_broken" in result.stderr and "cell 2" in result.stderr and "boom" in result.stderr
    assert (tmp_path / "out" / "99_broken.ipynb").exists(), "the failed notebook is kept for its traceback"


def test_unknown_notebook_is_a_usage_error():
    with pytest.raises(ValueError, match="unknown notebook 'nope'"):
        book.source_notebooks(["nope"])
    result = subprocess.run([sys.executable, "-m", "helpers", "execute", "nope"], capture_output=True, text=True)
    assert result.returncode == 2 and "unknown notebook" in result.stderr


def test_help_lists_commands():
    result = subprocess.run([sys.executable, "-m", "helpers", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "execute" in result.stdout and "build" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name, value", [("N", 0), ("N", "abc"), ("MODE", "fast")])
def test_chapter_one_rejects_bad_parameters_before_computing(tmp_path, name, value):
    out = tmp_path / "out.ipynb"
    with pytest.raises(papermill.PapermillExecutionError) as err:
        papermill.execute_notebook(str(paths.NBS_DIR / "01_attention_rank.ipynb"), str(out),
                                   parameters={name: value}, progress_bar=False, cwd=str(paths.NBS_DIR))
    assert err.value.ename == "ParameterError"
    assert f"Parameter {name}: got {value!r}" in err.value.evalue and "allowed" in err.value.evalue
    executed = nbformat.read(out, as_version=4)
    failing = next(i for i, c in enumerate(executed.cells) if c.get("outputs") and c.outputs[0].get("ename"))
    assert "parameters.validate" in executed.cells[failing].source, "the validation cell is the one that fails"
    assert all(c.get("execution_count") is None for c in executed.cells[failing + 1:]), "nothing runs after it"


def record_runs(monkeypatch):
    """Replace the execution of a notebook by a record of (stem, parameters); nothing counts as up to date."""
    runs = []
    monkeypatch.setattr(book, "is_up_to_date", lambda *args: False)
    monkeypatch.setattr(book, "execute_one", lambda notebook, mode, params, book_dir: runs.append(
        (notebook.stem, dict(params))))
    return runs


def test_a_parameter_no_named_notebook_declares_is_refused_before_anything_runs(monkeypatch, tmp_path):
    runs = record_runs(monkeypatch)
    with pytest.raises(ValueError, match="parameter 'STEP' is not a parameter of 05_trained_synthetic; allowed: .*STEPS"):
        book.execute(["05_trained_synthetic"], "quick", {"STEP": 100}, tmp_path)
    assert runs == []
    result = subprocess.run([sys.executable, "-m", "helpers", "execute", "-p", "STEP", "100", "05_trained_synthetic"],
                            capture_output=True, text=True, cwd=paths.ROOT)
    assert result.returncode == 2 and "'STEP' is not a parameter of 05_trained_synthetic" in result.stderr


def test_each_notebook_gets_only_the_parameters_it_declares(monkeypatch, tmp_path):
    """The ledger and the appendix follow a chapter: they get its SEED but not its TASKS (papermill would warn)."""
    runs = record_runs(monkeypatch)
    assert book.execute(["05_trained_synthetic"], "quick", {"TASKS": ["copy"], "SEED": 3}, tmp_path) == []
    assert runs[0] == ("05_trained_synthetic", {"TASKS": ["copy"], "SEED": 3})
    followers = dict(runs[1:])
    assert followers == {"98_claims_ledger": {"SEED": 3}, "99_reproducibility": {"SEED": 3}}
    for stem, params in runs:   # independently: the names in each source notebook's parameters cell
        assert set(params) <= {p.name for p in book.notebook_parameters(paths.NBS_DIR / f"{stem}.ipynb")}


def test_the_scheduler_goes_to_the_notebooks_that_declare_one_and_a_given_one_wins(monkeypatch, tmp_path):
    runs = record_runs(monkeypatch)
    book.execute(["01_attention_rank", "04_random_attention"], "quick", {}, tmp_path, scheduler="local")
    chapters = {stem: params for stem, params in runs if stem[:2] in ("01", "04")}
    assert chapters == {"01_attention_rank": {}, "04_random_attention": {"SCHEDULER": "local"}}
    runs.clear()
    book.execute(["04_random_attention"], "quick", {"SCHEDULER": "processes"}, tmp_path, scheduler="local")
    assert runs[0] == ("04_random_attention", {"SCHEDULER": "processes"})
