"""Every source notebook runs in quick mode and records its metrics."""

import re

import nbformat
import pytest

from helpers import book

NOTEBOOKS = [p.stem for p in book.source_notebooks()]


@pytest.mark.notebooks
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_in_quick_mode(quick_book, notebook):
    metrics = quick_book.metrics(notebook)
    assert metrics["mode"] == "quick"
    assert metrics["notebook"] == notebook
    assert metrics["values"], "the notebook recorded no values"
    unresolved = [name for name, value in metrics["params"].items()
                  if value is None and name != "SCHEDULER" and name not in metrics["resolved"]]
    assert not unresolved, f"parameters left at None without a recorded mode default: {unresolved}"
    assert metrics["not_run"] == [], "the prose pastes names this run never glued (a typo, or a dropped glue call)"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_source_notebook_is_clean_and_parametrised(notebook):
    nb = nbformat.read(book.paths.NBS_DIR / f"{notebook}.ipynb", as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code_cells[0].metadata.get("tags", []), "first code cell must be tagged 'parameters'"
    assert "MODE" in code_cells[0].source and "SEED" in code_cells[0].source
    assert "parameters.validate" in code_cells[1].source, "second code cell must validate the parameters"
    for cell in code_cells:
        assert not cell.outputs and cell.execution_count is None, "commit notebooks without outputs"


BARE_VALUE = re.compile(r"^\(?-?[\d.e+\-, ]+\)?$|^None$")


@pytest.mark.notebooks
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_no_cell_prints_a_stray_value(quick_book, notebook):
    """A cell ending in a bookkeeping call must not show its value (a lone number) to the reader."""
    quick_book.metrics(notebook)
    nb = nbformat.read(quick_book.book_dir / f"{notebook}.ipynb", as_version=4)
    stray = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/plain", "") if output.output_type == "execute_result" else ""
            if text and "text/html" not in output.get("data", {}) and BARE_VALUE.match(text.strip()):
                stray.append((index, text[:60]))
    assert not stray, f"cells showing a bare value: {stray}"
