"""Parameter validation: one clear error naming the parameter, the value and what is allowed."""

import pytest

from helpers import parameters


def test_valid_values_pass_and_lists_parse_from_strings():
    P = parameters.validate(
        MODE=("quick", parameters.mode),
        SEED=(3, parameters.seed),
        N=(48, parameters.integer(4, 1024)),
        N_VALUES=("[24, 200, 24]", parameters.int_list(8, 4096)),
        TEMPS=([0.5, 2], parameters.number_list(0, 100, low_open=True)),
        TASKS=(None, parameters.optional(parameters.choice_list("copy", "sort"))),
    )
    assert P.N == 48 and P["MODE"] == "quick"
    assert P.N_VALUES == [24, 200]
    assert P.TEMPS == [0.5, 2.0]
    assert P.TASKS is None


@pytest.mark.parametrize(
    "name, value, checker, allowed",
    [
        ("N", 0, parameters.integer(4, 1024), "an integer from 4 to 1024"),
        ("N", "abc", parameters.integer(4, 1024), "an integer from 4 to 1024"),
        ("N", 4.0, parameters.integer(4, 1024), "an integer from 4 to 1024"),
        ("N", True, parameters.integer(4, 1024), "an integer from 4 to 1024"),
        ("MODE", "fast", parameters.mode, "one of ['quick', 'full']"),
        ("SEED", -1, parameters.seed, "an integer from 0"),
        ("N_VALUES", "[1, 2", parameters.int_list(8, 64), "a list of"),
        ("N_VALUES", [8, 1000], parameters.int_list(8, 64), "each an integer from 8 to 64"),
        ("N_VALUES", [], parameters.int_list(8, 64), "a list of 1 to"),
        ("T", 0, parameters.number(0, 10, low_open=True), "a number in (0, 10]"),
        ("FLAG", "yes", parameters.boolean, "True or False"),
    ],
)
def test_bad_values_name_parameter_value_and_allowed(name, value, checker, allowed):
    with pytest.raises(parameters.ParameterError) as err:
        parameters.validate(**{name: (value, checker)})
    message = str(err.value)
    assert message.startswith(f"Parameter {name}: got {value!r}")
    assert allowed in message


def test_require_links_parameters():
    with pytest.raises(parameters.ParameterError, match="D_MODEL.*divisible"):
        parameters.require(96 % 5 == 0, "D_MODEL", 96, "a multiple of N_HEADS=5 (divisible)")


def test_by_mode():
    assert parameters.by_mode("quick", 1, 2) == 1
    assert parameters.by_mode("full", 1, 2) == 2


@pytest.mark.parametrize("mode, expected", [("quick", [16, 32]), ("full", [32, 64, 128])])
def test_mode_default_fills_in_none_and_remembers_it(mode, expected):
    P = parameters.validate(MODE=(mode, parameters.mode), N_VALUES=(None, parameters.optional(parameters.int_list(8, 512))),
                        STEPS=(40, parameters.optional(parameters.integer(4, 5000))))
    assert P.mode_default("N_VALUES", quick=[16, 32], full=[32, 64, 128]) == expected
    assert P.mode_default("STEPS", quick=10, full=20) == 40  # a given value wins
    assert P.resolved == {"N_VALUES": expected}
    assert P.N_VALUES is None  # the parameter itself keeps what the user gave


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_fill_mode_defaults_fills_only_none_records_it_and_sorts_only_grids(mode):
    defaults = {"N_VALUES": ([16, 8], [64, 32, 128]), "STEPS": (10, 20), "TASKS": (["qsa", "copy"], ["qsa", "copy"]),
                "D_QK": ([1], [1])}
    P = parameters.Params(MODE=mode, N_VALUES=None, STEPS=None, TASKS=["reversal", "copy"], D_QK=[4, 2, 8])
    assert P.fill_mode_defaults(defaults) is P
    quick = mode == "quick"
    assert P.N_VALUES == ([8, 16] if quick else [32, 64, 128]), "the mode's default, sorted"
    assert P.STEPS == (10 if quick else 20)
    assert P.TASKS == ["reversal", "copy"], "a given list of names keeps its order"
    assert P.D_QK == [2, 4, 8], "a given grid is sorted"
    assert P.resolved == {"N_VALUES": P.N_VALUES, "STEPS": P.STEPS}, "exactly the values filled in, as used"
    kept = parameters.Params(MODE=mode, N_VALUES=None, D_QK=[4, 2, 8]).fill_mode_defaults(
        {"N_VALUES": ([16, 8], [16, 8]), "D_QK": ([1], [1])}, keep_order=("D_QK",))
    assert kept.D_QK == [4, 2, 8] and kept.N_VALUES == [8, 16], "keep_order leaves only the grids it names as given"
