"""Every notebook's parameter validation rejects bad values before any computation.

The `parameters` cell and the validation cell (the next code cell) of each source notebook are run
in-process with one parameter replaced by a bad value: a wrong type, out-of-range values, and, where a
notebook declares them below, values inconsistent with another parameter. Each must raise one
ParameterError that names the parameter.
"""

import nbformat
import pytest

from helpers import book
from helpers.parameters import ParameterError

FREE_TEXT: set = set()  # parameters whose every text value is legal (none so far)

# Values that are legal alone but inconsistent with another parameter: {notebook: [(overrides, named parameter)]}.
CROSS_CASES = {
    "03_saturation": [({"LOOSE": 0.95, "TIGHT": 0.9}, "TIGHT")],
    "03b_predicting_rank": [({"N_VALUES": [16, 64], "CALIB_N_VALUES": [64]}, "CALIB_N_VALUES")],
    "04_random_attention": [({"D_MODEL": 16, "D_HEADS": [1, 2, 64]}, "D_MODEL"),
                            ({"D_MODEL": 64, "N_VALUES": [128], "INPUTS": ["orthonormal"], "D_HEADS": [1, 2]}, "D_MODEL")],
    "05_trained_synthetic": [({"TASKS": ["copy"], "D_HEADS": [2, 3]}, "D_HEADS"),
                             ({"TASKS": ["copy"], "ABLATION_D_HEAD": 3}, "ABLATION_D_HEAD")],
    "08_where_it_breaks": [({"N": 64, "D_HEAD": 4}, "D_HEAD")],
}


def bad_values(default) -> list:
    if isinstance(default, bool):
        return ["yes", 2, [True]]
    if isinstance(default, int):
        return ["abc", -10**9, 10**12, 2.5]
    if isinstance(default, float):
        return ["abc", -1e9, 1e9]
    if isinstance(default, str):
        return [123, "no-such-option", ["x"]]
    if isinstance(default, (list, tuple)):
        return ["abc", [], [-10**9], [10**12]]
    return ["abc", [-10**9], 10**12, {"a": 1}]  # None: "the mode's default"; the type is the notebook's to say


def cells(notebook):
    nb = nbformat.read(notebook, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    return code[0], code[1]


def run_validation(notebook, overrides: dict):
    parameters, validation = cells(notebook)
    namespace: dict = {}
    exec(parameters, namespace)
    namespace.update(overrides)
    exec(validation, namespace)
    return namespace


CASES = [
    pytest.param(nb, p.name, bad, id=f"{nb.stem}-{p.name}-{bad!r}")
    for nb in book.source_notebooks()
    for p in book.notebook_parameters(nb)
    if p.name not in FREE_TEXT
    for bad in bad_values(p.default)
]


@pytest.mark.parametrize("notebook", book.source_notebooks(), ids=lambda p: p.stem)
def test_defaults_and_quick_mode_are_valid(notebook):
    run_validation(notebook, {})
    run_validation(notebook, {"MODE": "quick"})


@pytest.mark.parametrize("notebook, name, bad", CASES)
def test_bad_value_fails_in_the_validation_cell(notebook, name, bad):
    with pytest.raises(ParameterError) as err:
        run_validation(notebook, {name: bad})
    assert err.value.name == name, f"the error names {err.value.name}, not {name}"
    assert str(err.value).startswith(f"Parameter {name}: got {bad!r}")


@pytest.mark.parametrize(
    "notebook, overrides, name",
    [(nb, o, n) for nb in book.source_notebooks() for o, n in CROSS_CASES.get(nb.stem, [])],
)
def test_inconsistent_parameters_are_rejected(notebook, overrides, name):
    with pytest.raises(ParameterError) as err:
        run_validation(notebook, overrides)
    assert err.value.name == name


def test_every_parameter_has_a_comment_with_legal_values():
    for notebook in book.source_notebooks():
        for p in book.notebook_parameters(notebook):
            assert p.comment, f"{notebook.stem}: parameter {p.name} has no comment giving its legal values"
