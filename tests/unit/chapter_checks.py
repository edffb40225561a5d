"""Checks shared by the chapters' analyse tests (test_chNN_analyse.py)."""

import re

import nbformat
import pytest

from helpers import paths


def analyse_in_private_store(chapter, P, tmp_path_factory):
    """`chapter.analyse(P)` with a result store of its own (a cold cache, so the test computes every point)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HELPERS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        return chapter.analyse(P)
    finally:
        mp.undo()


def check_notebook_against(notebook: str, result, left_out: tuple[str, ...] = ()) -> None:
    """Every glue name the prose pastes is quoted by analyse, except names starting with a `left_out` prefix (parts a
    parameter left out, which `record.publish` marks "(not run)"); no code cell defines a function, glues, records or
    sets torch threads."""
    nb = nbformat.read(paths.NBS_DIR / f"{notebook}.ipynb", as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    pasted = set(re.findall(r"\{glue:text\}`([^`]+)`", prose))
    missing = {name for name in pasted - set(result.quotes) - set(result.verdicts) if not name.startswith(left_out)}
    assert not missing, f"pasted in the prose but not quoted by analyse: {sorted(missing)}"
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert not any(re.search(r"^\s*def ", c, re.M) for c in code), "no notebook cell defines a function"
    assert not any(re.search(r"\bglue\(|\brec\.record|set_num_threads", c) for c in code), "bookkeeping lives in helpers"
