"""Parameter validation: one clear error naming the parameter, the value and what is allowed."""

import pytest

from helpers import config


def test_valid_values_pass_and_lists_parse_from_strings():
    P = config.validate(
        MODE=("quick", config.mode),
        SEED=(3, config.seed),
        N=(48, config.integer(4, 1024)),
        N_VALUES=("[24, 200, 24]", config.int_list(8, 4096)),
        TEMPS=([0.5, 2], config.number_list(0, 100, low_open=True)),
        TASKS=(None, config.optional(config.choice_list("copy", "sort"))),
    )
    assert P.N == 48 and P["MODE"] == "quick"
    assert P.N_VALUES == [24, 200]
    assert P.TEMPS == [0.5, 2.0]
    assert P.TASKS is None


@pytest.mark.parametrize(
    "name, value, checker, allowed",
    [
        ("N", 0, config.integer(4, 1024), "an integer from 4 to 1024"),
        ("N", "abc", config.integer(4, 1024), "an integer from 4 to 1024"),
        ("N", 4.0, config.integer(4, 1024), "an integer from 4 to 1024"),
        ("N", True, config.integer(4, 1024), "an integer from 4 to 1024"),
        ("MODE", "fast", config.mode, "one of ['quick', 'full']"),
        ("SEED", -1, config.seed, "an integer from 0"),
        ("N_VALUES", "[1, 2", config.int_list(8, 64), "a list of"),
        ("N_VALUES", [8, 1000], config.int_list(8, 64), "each an integer from 8 to 64"),
        ("N_VALUES", [], config.int_list(8, 64), "a list of 1 to"),
        ("T", 0, config.number(0, 10, low_open=True), "a number in (0, 10]"),
        ("FLAG", "yes", config.boolean, "True or False"),
    ],
)
def test_bad_values_name_parameter_value_and_allowed(name, value, checker, allowed):
    with pytest.raises(config.ParameterError) as err:
        config.validate(**{name: (value, checker)})
    message = str(err.value)
    assert message.startswith(f"Parameter {name}: got {value!r}")
    assert allowed in message


def test_require_links_parameters():
    with pytest.raises(config.ParameterError, match="D_MODEL.*divisible"):
        config.require(96 % 5 == 0, "D_MODEL", 96, "a multiple of N_HEADS=5 (divisible)")


def test_by_mode():
    assert config.by_mode("quick", 1, 2) == 1
    assert config.by_mode("full", 1, 2) == 2


@pytest.mark.parametrize("mode, expected", [("quick", [16, 32]), ("full", [32, 64, 128])])
def test_mode_default_fills_in_none_and_remembers_it(mode, expected):
    P = config.validate(MODE=(mode, config.mode), N_VALUES=(None, config.optional(config.int_list(8, 512))),
                        STEPS=(40, config.optional(config.integer(4, 5000))))
    assert P.mode_default("N_VALUES", quick=[16, 32], full=[32, 64, 128]) == expected
    assert P.mode_default("STEPS", quick=10, full=20) == 40  # a given value wins
    assert P.resolved == {"N_VALUES": expected}
    assert P.N_VALUES is None  # the parameter itself keeps what the user gave
