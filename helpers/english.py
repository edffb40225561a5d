"""Numbers and verdicts in plain English, for the sentences a chapter glues into its prose.

    number(0.000123)              "0.000123"     (significant digits, never e-notation)
    number(12.0)                  "12"           (integers as integers)
    number(3.7e-7, 2, power=True) "3.7 × 10⁻⁷"   (tiny or huge values as a power of ten; maths=True: "$3.7 \\times 10^{-7}$")
    number(2e-5, power=True)      "2 × 10⁻⁵";   number(1e-5, power=True) -> "10⁻⁵"   (no trailing zeros, no "1 ×")
    plural(1, "seed")             "1 seed";   plural(3, "seed") -> "3 seeds";   plural(2, "axis", "axes") -> "2 axes"
    count_of(3, 12, "condition")  "3 of 12 conditions"
    join(["a", "b", "c"])         "a, b and c";   join([]) -> "none"
    span(0.41, 0.63)              "from 0.41 to 0.63";   span(2, 2) -> "2"
    signed(-1.5, "standard error", above="above", below="below")   "1.5 standard errors below"
    bind_percent("63 % of seeds")  "63\u00a0% of seeds"   (a no-break space: the number and "%" share a line)
    bind_equals("mnist, n = 16")   "mnist, n\u00a0=\u00a016"   (a symbol, "=" and its value share a line)
    keep_together(text)            both rules: what tables and the prose apply
    on_one_line("soft measure")    "soft\u00a0measure"   (every space a no-break space: a short table cell or label)
"""

import math
import re

from .errors import ArgumentError

NONE = "none"
NOT_AVAILABLE = "n/a"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")
POSITIONAL = (1e-3, 1e6)   # with power=True, non-integers outside this range of magnitudes get a power of ten


def ten_to(exponent: int) -> str:
    """A power of ten as Unicode text: ten_to(-3) -> "10⁻³"."""
    return f"10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def number(value, digits: int = 3, power: bool = False, maths: bool = False) -> str:
    """`value` with `digits` significant digits in positional notation; integers (and whole floats) without decimals.

    Trailing zeros after the decimal point are dropped ("0.5", not "0.500"); NaN or None give "n/a". With `power`,
    a magnitude outside POSITIONAL (except a whole float below 10^6) is a power of ten: Unicode text for
    {glue:text} ("3.7 × 10⁻⁷"), or with `maths` MyST maths ("$3.7 \\times 10^{-7}$") for a MyST page.
    This is the book's one number formatter for prose; never e-notation.
    """
    if digits < 1:
        raise ArgumentError("digits", digits, "an integer >= 1")
    if _missing(value):
        return NOT_AVAILABLE
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool):
        raise ArgumentError("value", value, "a number (not a bool)")
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isinf(value):
        return "infinite" if value > 0 else "minus infinite"
    if value == 0:
        return "0"
    whole = value == int(value) and abs(value) < POSITIONAL[1]
    if power and not whole and not POSITIONAL[0] <= abs(value) < POSITIONAL[1]:
        exponent = math.floor(math.log10(abs(float(f"{value:.{digits - 1}e}"))))   # 9.99e-5 -> 10⁻⁴, not "10.0 × 10⁻⁵"
        mantissa = f"{value / 10 ** exponent:.{digits - 1}f}"
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        tens = f"10^{{{exponent}}}" if maths else ten_to(exponent)
        times = " \\times " if maths else " \u00d7 "
        text = tens if mantissa == "1" else ("-" + tens if mantissa == "-1" else mantissa + times + tens)
        return f"${text}$" if maths else text
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{round(value, decimals):.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def plural(count, noun: str, plural_form: str | None = None, digits: int = 3) -> str:
    """"1 seed", "3 seeds", "0 seeds", "1.5 seeds"; `plural_form` for irregular nouns."""
    form = noun if count == 1 else (plural_form or noun + "s")
    return f"{number(count, digits)} {form}"


def count_of(count: int, total: int, noun: str, plural_form: str | None = None) -> str:
    """"3 of 12 conditions", "1 of 1 condition", "0 of 4 seeds" (the noun agrees with the total)."""
    if not 0 <= count <= total:
        raise ArgumentError("count", count, f"an integer from 0 to total ({total})")
    form = noun if total == 1 else (plural_form or noun + "s")
    return f"{count} of {total} {form}"


def join(items, conjunction: str = "and", empty: str = NONE, separator: str = ", ") -> str:
    """"a", "a and b", "a, b and c"; `empty` (default "none") for no items. Use separator="; " for items with commas."""
    items = [str(item) for item in items]
    if not items:
        return empty
    if len(items) == 1:
        return items[0]
    return f"{separator.join(items[:-1])} {conjunction} {items[-1]}"


def span(low, high, digits: int = 3, unit: str = "") -> str:
    """"from 0.41 to 0.63" (the two ends in order), "0.5" when they agree at this precision, "n/a" when missing."""
    if _missing(low) or _missing(high):
        return NOT_AVAILABLE
    low, high = sorted((low, high))
    suffix = f" {unit}" if unit else ""
    a, b = number(low, digits), number(high, digits)
    return f"{a}{suffix}" if a == b else f"from {a}{suffix} to {b}{suffix}"


def span_short(low, high, digits: int = 3, unit: str = "") -> str:
    """`span` without "from": "4 to 6" for a table cell or inside parentheses, "0.5" when the ends agree."""
    return span(low, high, digits, unit).removeprefix("from ")


def signed(value, unit: str, above: str = "above", below: str = "below", digits: int = 2,
           plural_form: str | None = None) -> str:
    """A signed distance in words, never a negative magnitude: "1.5 standard errors below", "0.2 n above".

    `unit` is a noun ("standard error") made plural as needed, or a symbol ("n") left as it is when it is one
    character long. Zero reads "exactly at".
    """
    if _missing(value):
        return NOT_AVAILABLE
    value = float(value)
    if number(abs(value), digits) == "0":
        return "exactly at"
    side = above if value > 0 else below
    magnitude = abs(value)
    if len(unit) <= 1:
        return f"{number(magnitude, digits)} {unit} {side}".replace("  ", " ")
    return f"{plural(magnitude, unit, plural_form, digits)} {side}"


NO_BREAK = "\u00a0"
_SPACE_BEFORE_PERCENT = re.compile(r"(?<=\d) (?=%)")


def bind_percent(text: str) -> str:
    """`text` with every space between a digit and "%" made a no-break space, so that a line never ends between
    "63" and "%" (the book writes percentages with a space)."""
    return _SPACE_BEFORE_PERCENT.sub(NO_BREAK, text)


_SPACES_AROUND_EQUALS = re.compile(r"\b([A-Za-z]\w{0,3}) = (?=[-−+]?\d)")


def bind_equals(text: str) -> str:
    """`text` with the spaces around "=" made no-break spaces where a short symbol is set to a number ("n = 16",
    "d_qk = 32"), so that a line never ends inside "n = 16"."""
    return _SPACES_AROUND_EQUALS.sub(rf"\1{NO_BREAK}={NO_BREAK}", text)


def keep_together(text: str) -> str:
    """`text` with both rules applied (`bind_percent`, `bind_equals`): the one call tables and the prose make."""
    return bind_percent(bind_equals(text))


def on_one_line(text: str) -> str:
    """`text` with every space a no-break space, for a short table cell or label that must not wrap."""
    return text.replace(" ", NO_BREAK)


def percent(share, digits: int = 2) -> str:
    """A share in [0, 1] as a percentage: 0.953 -> "95 %" (digits significant digits, book style with a space)."""
    if _missing(share):
        return NOT_AVAILABLE
    return f"{number(100 * float(share), digits)} %"
