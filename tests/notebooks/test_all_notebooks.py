"""Every source notebook runs in quick mode and records its metrics."""

import re

import nbformat
import pytest

from helpers import book, figure_data

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


FIGURE_LINK = "Plotted data: {{download}}`{name}.csv <_metrics/figures/{name}.csv>`."


def figure_cells(nb):
    return [(c.metadata["mystnb"]["figure"]["name"], c) for c in nb.cells
            if c.metadata.get("mystnb", {}).get("figure", {}).get("name", "").startswith("fig-")]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_figure_links_the_csv_its_cell_writes(notebook):
    """Each figure's cell shows it with `plotting.show(fig, <its own name>)`, which writes the CSV, and its caption
    links that CSV: a renamed figure or a cell that still calls plt.show() is caught here."""
    nb = nbformat.read(book.paths.NBS_DIR / f"{notebook}.ipynb", as_version=4)
    for name, cell in figure_cells(nb):
        last = cell.source.rstrip().splitlines()[-1]   # options such as allow_empty may follow the name
        assert re.fullmatch(rf'plotting\.show\(fig, "{re.escape(name)}"(, [^#]+)?\)(\s+#.*)?', last), \
            f"{name}: show it with plotting.show"
        assert "plt.show()" not in cell.source, f"{name}: plt.show() shows a figure without writing its data"
        assert cell.metadata["mystnb"]["figure"]["caption"].endswith(FIGURE_LINK.format(name=name)), \
            f"{name}: the caption must end with its data link"


@pytest.mark.notebooks
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_figure_of_the_run_has_its_csv(quick_book, notebook):
    quick_book.metrics(notebook)
    nb = nbformat.read(book.paths.NBS_DIR / f"{notebook}.ipynb", as_version=4)
    folder = quick_book.book_dir / "_metrics" / "figures"
    for name, _ in figure_cells(nb):
        frame = figure_data.load(name, folder)
        assert list(frame.columns) == figure_data.COLUMNS
        assert len(frame) > 0 and frame[["x", "y"]].notna().any(axis=None), f"{name}: no plotted points"
