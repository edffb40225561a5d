"""A warning that a notebook prints (to stderr, which `_config.yml` removes from the rendered page) fails the
quick run's tests, unless it is on the short list of accepted warnings below."""

import json
import re
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.notebooks

ACCEPTED = [
    # tqdm.auto falls back to a text progress bar when ipywidgets is missing (papermill kernels have no widgets)
    re.compile(r"TqdmWarning: IProgress not found"),
]
WARNING = re.compile(r"\b[A-Z]\w*Warning\b")


def unexpected_warnings(path: Path) -> list[str]:
    """Lines of a notebook's stderr outputs that name a warning class not in ACCEPTED, as "cell i: line"."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                found += [f"cell {i}: {line.strip()}" for line in "".join(out["text"]).splitlines()
                          if WARNING.search(line) and not any(a.search(line) for a in ACCEPTED)]
    return found


def test_the_scan_finds_a_warning_and_skips_accepted_ones(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    nb.cells[0].outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="x.py:3: RuntimeWarning: overflow in exp\n"),
        nbformat.v4.new_output("stream", name="stderr", text="auto.py:21: TqdmWarning: IProgress not found.\n"),
        nbformat.v4.new_output("stream", name="stdout", text="UserWarning printed on stdout is not a warning\n"),
        nbformat.v4.new_output("stream", name="stderr", text="\rsweep:  50%|#####     | 1/2\n")]
    path = tmp_path / "00_probe.ipynb"
    nbformat.write(nb, path)
    assert unexpected_warnings(path) == ["cell 0: x.py:3: RuntimeWarning: overflow in exp"]


def test_no_notebook_prints_an_unexpected_warning(quick_book):
    notebooks = sorted(quick_book.book_dir.glob("[0-9][0-9]*_*.ipynb"))
    assert notebooks, "the quick run wrote no executed notebooks"
    problems = {path.stem: found for path in notebooks if (found := unexpected_warnings(path))}
    assert not problems, problems
