"""What every chapter's analyse test checks the same way (README, "Code conventions"): analyse runs against a private
result store, the prose pastes only names that analyse quotes, and no notebook cell defines a function or glues by
hand."""

import re

import nbformat
import pytest

from helpers import parameters, paths


def resolved_params(chapter, **values):
    """Quick-mode parameters with seed 0 and `values`, resolved by the chapter module (its defaults and checks)."""
    P = parameters.validate(MODE=("quick", parameters.mode), SEED=(0, parameters.seed))
    P.update(values)
    return chapter.resolve(P)


def analyse_in_private_store(tmp_path_factory, analyse, P):
    """`analyse(P)` with HELPERS_CACHE_DIR in a fresh temporary folder (the user's cache is left alone)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HELPERS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        return analyse(P)
    finally:
        mp.undo()


def assert_notebook_follows_the_pattern(notebook: str, result) -> None:
    """Every {glue:text} name of the notebook's prose is a quote or verdict of `result`; no cell defines a
    function or calls the recorder."""
    nb = nbformat.read(paths.NBS_DIR / f"{notebook}.ipynb", as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    # "other.ipynb::name:s" pastes another chapter's number: the strict build checks those
    pasted = {name for name in re.findall(r"\{glue:text\}`([^`]+)`", prose) if "::" not in name}
    missing = pasted - set(result.quotes) - set(result.verdicts)
    assert not missing, f"the prose pastes names analyse does not quote: {sorted(missing)}"
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert not any(re.search(r"^\s*def ", c, re.M) for c in code), "no notebook cell defines a function"
    assert not any("rec." in c or "glue(" in c for c in code), "the glue calls live in helpers"
