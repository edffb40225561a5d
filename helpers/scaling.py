"""How a saturation point y(n) (the smallest d_qk that does the job at sequence length n) grows with n.

Four forms, each fitted by least squares in y (one loss for all forms: the mean squared error in units of y):

    "log"     a + b ln n          "sqrt"    c sqrt(n)
    "log2"    a + b (ln n)^2      "linear"  c n

    fits = fit_forms(n, y)                              # {form: FormFit(form, coefficients, loss)}
    boot = bootstrap_forms(n, y, replicates)            # replicates: (B, len(n)) resampled y, e.g. over seeds
    boot.best, boot.indistinguishable                   # the best form, and every form the data cannot tell from it

A form is *indistinguishable* from the best one when the paired bootstrap difference of their losses has a 95 %
interval that reaches 0 or below (in at least 2.5 % of the replicates it fits as well as the best form).
"""

import math
from dataclasses import dataclass

import numpy as np

from .errors import ArgumentError

FORMS = ("log", "log2", "sqrt", "linear")
FORM_LABELS = {"log": "a + b ln n", "log2": "a + b (ln n)^2", "sqrt": "c sqrt(n)", "linear": "c n"}
LOG_FORMS = ("log", "log2")
MIN_POINTS = 3  # a two-coefficient form needs a third point before its loss says anything
CI = 0.95


def _feature(form: str, n: np.ndarray) -> np.ndarray:
    if form == "log":
        return np.log(n)
    if form == "log2":
        return np.log(n) ** 2
    if form == "sqrt":
        return np.sqrt(n)
    if form == "linear":
        return n.astype(float)
    raise ArgumentError("form", form, f"one of {list(FORMS)}")


@dataclass(frozen=True)
class FormFit:
    """One fitted form: `coefficients` ({"a", "b"} or {"c"}) and `loss` (mean squared error in y)."""

    form: str
    coefficients: dict
    loss: float

    def predict(self, n) -> np.ndarray:
        """y of the fitted form at `n` (any shape)."""
        x = _feature(self.form, np.asarray(n, dtype=float))
        if self.form in LOG_FORMS:
            return self.coefficients["a"] + self.coefficients["b"] * x
        return self.coefficients["c"] * x


def _check_points(n, y) -> tuple[np.ndarray, np.ndarray]:
    n, y = np.asarray(n, dtype=float), np.asarray(y, dtype=float)
    if n.ndim != 1 or n.shape != y.shape:
        raise ArgumentError("y", y.shape, f"one value per n, shape {n.shape}")
    if len(n) < 2 or not np.all(n > 0) or len(set(n.tolist())) != len(n):
        raise ArgumentError("n", n.tolist(), "at least 2 distinct positive sequence lengths")
    if not np.all(np.isfinite(y)):
        raise ArgumentError("y", y.tolist(), "finite values")
    return n, y


def fit_form(form: str, n, y) -> FormFit:
    """Least-squares fit of one form to the points (n, y), in closed form."""
    n, y = _check_points(n, y)
    x = _feature(form, n)
    if form in LOG_FORMS:
        design = np.stack([np.ones_like(x), x], axis=1)
        (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
        coefficients = {"a": float(a), "b": float(b)}
    else:
        coefficients = {"c": float(x @ y / (x @ x))}
    noise = 1e-9 * max(1.0, float(np.abs(y).max()))  # rounding residue of an exactly zero coefficient
    coefficients = {k: (0.0 if abs(v) < noise else v) for k, v in coefficients.items()}
    fit = FormFit(form, coefficients, 0.0)
    loss = float(np.mean((fit.predict(n) - y) ** 2))
    return FormFit(form, coefficients, loss)


def fit_forms(n, y) -> dict[str, FormFit]:
    """Every form of FORMS fitted to (n, y)."""
    return {form: fit_form(form, n, y) for form in FORMS}


@dataclass(frozen=True)
class BootstrapForms:
    """Point fits, bootstrap intervals of every coefficient and loss, the best form and its indistinguishable set."""

    point: dict
    coefficient_ci: dict      # {form: {name: (low, high)}}
    loss_ci: dict             # {form: (low, high)}
    best: str
    indistinguishable: tuple  # forms (best included) the data cannot tell apart from the best
    replicates: int


def _interval(values: np.ndarray) -> tuple[float, float]:
    tail = (1 - CI) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


def bootstrap_forms(n, y, replicates) -> BootstrapForms:
    """Fit every form to the point estimates `y` and to each row of `replicates` `(B, len(n))`.

    The best form has the smallest point loss (ties go to the earlier form of FORMS, the simpler growth first).
    """
    n, y = _check_points(n, y)
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim != 2 or reps.shape[1] != len(n) or len(reps) < 2:
        raise ArgumentError("replicates", reps.shape, f"a (B, {len(n)}) array with B >= 2")
    point = fit_forms(n, y)
    boot = [fit_forms(n, row) for row in reps]
    losses = {form: np.array([b[form].loss for b in boot]) for form in FORMS}
    coefficient_ci = {form: {name: _interval(np.array([b[form].coefficients[name] for b in boot]))
                             for name in point[form].coefficients} for form in FORMS}
    loss_ci = {form: _interval(losses[form]) for form in FORMS}
    scale = max(float(np.mean(y ** 2)), 1e-12)
    best = min(FORMS, key=lambda form: (round(point[form].loss / scale, 12), FORMS.index(form)))
    together = tuple(form for form in FORMS
                     if form == best or _interval(losses[form] - losses[best])[0] <= 1e-12 * scale)
    return BootstrapForms(point, coefficient_ci, loss_ci, best, together, len(reps))


def describe_forms(forms) -> str:
    """"a + b ln n and c sqrt(n)": the forms in words, in FORMS order."""
    labels = [FORM_LABELS[f] for f in FORMS if f in forms]
    if len(labels) <= 1:
        return "".join(labels)
    return ", ".join(labels[:-1]) + " and " + labels[-1]


def growth_class(forms) -> str:
    """"log" when every form is logarithmic, "linear" when only c n is left, "sqrt" when only c sqrt(n) is,
    otherwise "mixed" (the data do not decide between a log and a power law)."""
    forms = set(forms)
    if forms <= set(LOG_FORMS):
        return "log"
    if forms == {"linear"}:
        return "linear"
    if forms == {"sqrt"}:
        return "sqrt"
    return "mixed"


def log_ratio(n) -> float:
    """ln(max n) / ln(min n): how far apart the n values are in the log-n scale the forms must separate."""
    n = np.asarray(n, dtype=float)
    return math.log(n.max()) / math.log(n.min())
