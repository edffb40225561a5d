"""Modes and validation of notebook parameters.

The second cell of every notebook calls `validate` on the literals of its `parameters` cell,
before any computation. A bad value raises one `ParameterError` that names the parameter, the
value given and what is allowed:

    P = parameters.validate(MODE=(MODE, parameters.mode), N=(N, parameters.integer(2, 4096)))
"""

import ast
from collections.abc import Callable

from .errors import ArgumentError

MODES = ("quick", "full")


class ParameterError(ArgumentError):
    """A notebook parameter has a value that is not allowed."""

    kind = "Parameter"


class Params(dict):
    """Validated parameters, readable as `P["N"]` or `P.N`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.resolved: dict = {}  # values that mode_default filled in for parameters left at None

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def default(self, name: str, value):
        """Parameter `name`, or `value` when it is None (remembered in `resolved` for the appendix)."""
        if self[name] is not None:
            return self[name]
        self.resolved[name] = value
        return value

    def mode_default(self, name: str, quick, full):
        """Parameter `name`, or the quick or full default of `MODE` when it is None."""
        return self.default(name, by_mode(self["MODE"], quick, full))

    def fill_mode_defaults(self, defaults: dict[str, tuple], keep_order: tuple[str, ...] = ()) -> "Params":
        """Set each parameter of `defaults` (`{name: (quick, full)}`) left at None to its `MODE` default (remembered
        in `resolved`). Lists of numbers (grids) come out sorted, except those named in `keep_order` (a chapter that
        refuses a grid given out of order); lists of names keep the order given."""
        for name, (quick, full) in defaults.items():
            order = (lambda value: value) if name in keep_order else _grid_sorted
            self[name] = order(self.default(name, order(by_mode(self["MODE"], quick, full))))
        return self


Checker = Callable[[str, object], object]


def validate(**named: tuple[object, Checker]) -> Params:
    """Check every `NAME=(value, checker)` pair; return the cleaned values."""
    return Params({name: checker(name, value) for name, (value, checker) in named.items()})


def require(condition: bool, name: str, value, allowed: str) -> None:
    """Raise a ParameterError for a constraint that links several parameters."""
    if not condition:
        raise ParameterError(name, value, allowed)


def by_mode(mode: str, quick, full):
    """The quick or the full value, for parameters whose default depends on the mode."""
    return quick if mode == "quick" else full


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _grid_sorted(value):
    """A list of numbers sorted (a grid); anything else (a list of names, a scalar) as it is."""
    is_grid = isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    return sorted(value) if is_grid else value


def mode(name: str, value) -> str:
    if value not in MODES:
        raise ParameterError(name, value, f"one of {list(MODES)}")
    return value


def seed(name: str, value) -> int:
    if not _is_int(value) or not 0 <= value < 2**32:
        raise ParameterError(name, value, "an integer from 0 to 2**32 - 1")
    return value


def integer(low: int, high: int) -> Checker:
    def check(name, value):
        if not _is_int(value) or not low <= value <= high:
            raise ParameterError(name, value, f"an integer from {low} to {high}")
        return value

    return check


def number(low: float, high: float, low_open: bool = False) -> Checker:
    def check(name, value):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (low < value if low_open else low <= value) and value <= high
        if not ok:
            bracket = "(" if low_open else "["
            raise ParameterError(name, value, f"a number in {bracket}{low}, {high}]")
        return float(value)

    return check


def choice(*options) -> Checker:
    def check(name, value):
        if value not in options:
            raise ParameterError(name, value, f"one of {list(options)}")
        return value

    return check


def boolean(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(name, value, "True or False")
    return value


def optional(checker: Checker, meaning: str = "the mode's default") -> Checker:
    def check(name, value):
        if value is None:
            return None
        try:
            return checker(name, value)
        except ParameterError as err:
            raise ParameterError(name, value, f"None ({meaning}) or {err.allowed}") from None

    return check


def _as_list(value):
    """Lists may arrive as strings from the papermill command line: "[24, 200]"."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    return list(value) if isinstance(value, (list, tuple)) else None


def list_of(item: Checker, describe: str, min_len: int = 1, max_len: int = 64) -> Checker:
    """A non-empty list whose items all pass `item`; duplicates are removed, order kept."""

    def check(name, value):
        allowed = f"a list of {min_len} to {max_len} items, each {describe}"
        items = _as_list(value)
        if items is None or not min_len <= len(items) <= max_len:
            raise ParameterError(name, value, allowed)
        try:
            cleaned = [item(name, v) for v in items]
        except ParameterError:
            raise ParameterError(name, value, allowed) from None
        return list(dict.fromkeys(cleaned))

    return check


def int_list(low: int, high: int, **length) -> Checker:
    return list_of(integer(low, high), f"an integer from {low} to {high}", **length)


def number_list(low: float, high: float, low_open: bool = False, **length) -> Checker:
    return list_of(number(low, high, low_open), f"a number in {'(' if low_open else '['}{low}, {high}]", **length)


def choice_list(*options, **length) -> Checker:
    return list_of(choice(*options), f"one of {list(options)}", **length)


def scheduler(name: str, value):
    """Where sweeps run: None (in-process), "processes", "local" (a Dask LocalCluster) or "tcp://host:port"."""
    allowed = 'None (in-process), "processes", "local" (a Dask LocalCluster) or a scheduler address like "tcp://host:8786"'
    if value is None or value in ("processes", "local"):
        return value
    if isinstance(value, str) and "://" in value and value.rsplit(":", 1)[-1].isdigit():
        return value
    raise ParameterError(name, value, allowed)
