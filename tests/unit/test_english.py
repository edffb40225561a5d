"""Sentences for verdicts: numbers without e-notation, plurals, lists, ranges, signed distances."""

import math

import pytest

from helpers import english as en
from helpers.errors import ArgumentError


@pytest.mark.parametrize("value, digits, text", [
    (0.000123456, 3, "0.000123"), (12.0, 3, "12"), (12, 3, "12"), (0.5, 3, "0.5"), (3.14159, 2, "3.1"),
    (123456.7, 3, "123457"), (0.63212, 3, "0.632"), (-0.0001, 1, "-0.0001"), (1e-9, 2, "0.000000001"),
    (2.5e12, 2, "2500000000000"), (-0.00001, 2, "-0.00001"), (0.0, 3, "0"), (float("nan"), 3, "n/a"), (None, 3, "n/a"),
    (0.96, 1, "1"), (9.96, 2, "10")])
def test_number_has_significant_digits_and_never_e_notation(value, digits, text):
    assert en.number(value, digits) == text
    assert "e" not in en.number(value, digits).replace("infinite", "")


def test_plural_count_join_and_span():
    assert [en.plural(k, "seed") for k in (0, 1, 2)] == ["0 seeds", "1 seed", "2 seeds"]
    assert en.plural(2, "axis", "axes") == "2 axes"
    assert en.count_of(3, 12, "condition") == "3 of 12 conditions" and en.count_of(1, 1, "seed") == "1 of 1 seed"
    with pytest.raises(ArgumentError, match="count"):
        en.count_of(5, 4, "seed")
    assert [en.join(items) for items in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == ["none", "a", "a and b", "a, b and c"]
    assert en.join(["x, y", "z"], separator="; ", conjunction="or") == "x, y or z"
    assert en.span(0.63, 0.41) == "from 0.41 to 0.63" and en.span(2.0001, 2.0) == "2" and en.span(None, 1) == "n/a"
    assert en.span(1, 3, unit="n") == "from 1 n to 3 n"


def test_signed_never_writes_a_negative_magnitude():
    assert en.signed(-1.5, "standard error") == "1.5 standard errors below"
    assert en.signed(1.0, "standard error") == "1 standard error above"
    assert en.signed(0.2, "n") == "0.2 n above" and en.signed(0.0, "n") == "exactly at"
    assert en.signed(-0.25, "n", above="more", below="less") == "0.25 n less"
    assert en.percent(0.953) == "95 %" and en.percent(math.nan) == "n/a"


def test_bind_percent_joins_a_number_to_its_percent_sign_only():
    nb = "\u00a0"
    assert en.bind_percent("95 % interval; 12.5 % of rows") == f"95{nb}% interval; 12.5{nb}% of rows"
    assert en.bind_percent("the rest % stays, 7 %% too") == f"the rest % stays, 7{nb}%% too"
    assert en.bind_percent(en.percent(0.63)) == f"63{nb}%"


def test_bind_equals_joins_a_symbol_to_its_value_only():
    nb = "\u00a0"
    assert en.bind_equals("mnist, n = 16; d_qk = 32, s = -1") == f"mnist, n{nb}={nb}16; d_qk{nb}={nb}32, s{nb}={nb}-1"
    # a sentence's "=" between words, a long name, or a symbol without a number keeps its spaces
    assert en.bind_equals("rank = width; learning_rate = 3; n = k") == "rank = width; learning_rate = 3; n = k"


@pytest.mark.parametrize("value, digits, text, maths", [
    (3.7e-7, 2, "3.7 × 10⁻⁷", r"$3.7 \times 10^{-7}$"), (1e-5, 1, "10⁻⁵", r"$10^{-5}$"),
    (2e-5, 3, "2 × 10⁻⁵", r"$2 \times 10^{-5}$"), (-1e-9, 2, "-10⁻⁹", r"$-10^{-9}$"),
    (9.99e-5, 2, "10⁻⁴", r"$10^{-4}$"),
    (2.5e12, 2, "2.5 × 10¹²", r"$2.5 \times 10^{12}$"), (-4.2e-4, 2, "-4.2 × 10⁻⁴", r"$-4.2 \times 10^{-4}$"),
    (64.0, 2, "64", "64"), (0.6321, 2, "0.63", "0.63"), (0.001, 2, "0.001", "0.001"), (1234.5, 2, "1234", "1234"),
    (12, 2, "12", "12"), (float("nan"), 2, "n/a", "n/a")])
def test_number_with_powers_of_ten_for_tiny_and_huge_values(value, digits, text, maths):
    assert en.number(value, digits, power=True) == text
    assert en.number(value, digits, power=True, maths=True) == maths
    mantissa = float(text.split(" ")[0]) if "×" in text else (-1.0 if text.startswith("-10") else 1.0)
    if "10" in text and text not in ("1234", "0.001"):         # the power text reads back as the value to `digits` significant digits
        exponent = int(text.split("10")[-1].translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
        assert mantissa * 10 ** exponent == pytest.approx(value, rel=10 ** (1 - digits))
