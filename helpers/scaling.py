"""How a saturation point y(n) (the smallest d_qk that does the job at sequence length n) grows with n.

The book's one table of growth forms, one fit, one bootstrap over models and one growth verdict. Every form is
fitted by least squares in y (one loss for all forms: the mean squared error in units of y):

    "log"     a + b ln n          "sqrt"    c sqrt(n)
    "log2"    a + b (ln n)^2      "linear"  c n
    "power"   c n^alpha  (alpha in [0, POWER_MAX]; fitted for its exponent, see below)

    fits = fit_forms(n, y)                              # {form: FormFit(form, coefficients, loss)}
    reps = resample_models(tables, statistic, B, seed)  # (B, len(n)): the seeds of every n resampled (all models)
    boot = bootstrap_forms(n, y, reps)                  # bootstrap intervals, best form, indistinguishable forms
    growth_outcome(boot)                                # "log", "sqrt", "linear" or "untestable"

A form is *indistinguishable* from the best one when the paired bootstrap difference of their losses has a 95 %
interval that reaches 0 or below (in at least 2.5 % of the replicates it fits as well as the best form).

The power law nests c sqrt(n) and c n and, over a few octaves, imitates ln n with a small exponent, so it always
fits about as well as the best of the others: it is reported for its exponent (with an interval) and takes no part
in choosing the growth class, which is decided between the logarithmic forms, sqrt(n) and n.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .errors import ArgumentError

FORMS = ("log", "log2", "sqrt", "linear", "power")
CLASS_FORMS = ("log", "log2", "sqrt", "linear")   # the forms that decide the growth class
FORM_LABELS = {"log": "a + b ln n", "log2": "a + b (ln n)^2", "sqrt": "c sqrt(n)", "linear": "c n",
               "power": "c n^alpha"}
# the same forms in plain text for glued sentences and tables (no ASCII maths on the page)
FORM_WORDS = {"log": "a + b·ln n", "log2": "a + b·(ln n)²", "sqrt": "c·√n", "linear": "c·n", "power": "c·nᵅ"}
LOG_FORMS = ("log", "log2")
POWER_MAX = 2.0    # the power law's exponent is searched in [0, POWER_MAX]
LOSSES = ("squared", "log")   # mean squared error in y, or of log(y / fit): a relative error, for knees spanning decades
# How chapters 03 and 03b name the forms they fit to knees with the log loss (their recorded metrics use these).
KNEE_LABELS = {"log": "a + b log n", "log2": "a + b (log n)^2", "power": "c n^alpha"}
KNEE_FORMS = tuple(KNEE_LABELS)
KNEE_WORDS = {"log": "a straight line in log n", "log2": "a straight line in the square of log n",
              "power": "a power of n"}
MIN_POINTS = 3  # a two-coefficient form needs a third point before its loss says anything
# A growth verdict chooses between two-coefficient forms: with 3 points each fit keeps one degree of freedom, and
# three values such as 11, 13, 13 "decide" almost by accident, so a verdict needs one more.
VERDICT_MIN_POINTS = 4
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


def _through_origin(x: np.ndarray, y: np.ndarray) -> float:
    """The least-squares c of y = c x."""
    return float(x @ y / (x @ x))


@dataclass(frozen=True)
class FormFit:
    """One fitted form: `coefficients` ({"a", "b"} or {"c"}) and `loss` (mean squared error in y)."""

    form: str
    coefficients: dict
    loss: float

    def predict(self, n) -> np.ndarray:
        """y of the fitted form at `n` (any shape)."""
        if self.form == "power":
            return self.coefficients["c"] * np.asarray(n, dtype=float) ** self.coefficients["alpha"]
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


def fit_form(form: str, n, y, loss: str = "squared") -> FormFit:
    """Least-squares fit of one form to the points (n, y): `loss` "squared" (mean squared error in y, closed form
    but for the power law's exponent) or "log" (mean squared log(y / fit), for positive y)."""
    n, y = _check_points(n, y)
    if loss not in LOSSES:
        raise ArgumentError("loss", loss, f"one of {list(LOSSES)}")
    if loss == "log":
        return _fit_log_loss(form, n, y)
    if form == "power":
        return _fit_power(n, y)
    x = _feature(form, n)
    if form in LOG_FORMS:
        design = np.stack([np.ones_like(x), x], axis=1)
        (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
        coefficients = {"a": float(a), "b": float(b)}
    else:
        coefficients = {"c": _through_origin(x, y)}
    noise = 1e-9 * max(1.0, float(np.abs(y).max()))  # rounding residue of an exactly zero coefficient
    coefficients = {k: (0.0 if abs(v) < noise else v) for k, v in coefficients.items()}
    fit = FormFit(form, coefficients, 0.0)
    loss = float(np.mean((fit.predict(n) - y) ** 2))
    return FormFit(form, coefficients, loss)


def _fit_power(n: np.ndarray, y: np.ndarray) -> FormFit:
    """c n^alpha by least squares in y: c in closed form for each alpha, alpha by a scan then a bounded search."""
    from scipy.optimize import minimize_scalar

    def loss(alpha: float) -> float:
        x = n ** alpha
        return float(np.mean((_through_origin(x, y) * x - y) ** 2))

    # a scan first (the loss in alpha can have two dips, and the bounded search needs the right one), vectorised
    scan = np.linspace(0.0, POWER_MAX, 81)
    x = n[None, :] ** scan[:, None]                                    # (alphas, points)
    c = (x @ y) / np.einsum("ij,ij->i", x, x)
    start = float(scan[int(np.argmin(np.mean((c[:, None] * x - y) ** 2, axis=1)))])
    step = scan[1]
    found = minimize_scalar(loss, bounds=(max(0.0, start - step), min(POWER_MAX, start + step)), method="bounded",
                            options={"xatol": 1e-7})
    alpha = float(found.x) if found.fun <= loss(start) else start
    return FormFit("power", {"c": _through_origin(n ** alpha, y), "alpha": alpha}, loss(alpha))


def _fit_log_loss(form: str, n: np.ndarray, y: np.ndarray) -> FormFit:
    """The form minimising mean(log(y / fit)^2): closed form for c n^alpha (a line in log-log) and for c x (the mean
    log ratio), nonlinear least squares for a + b x started from the squared-loss fit."""
    if not np.all(y > 0):
        raise ArgumentError("y", y.tolist(), 'positive values for loss="log"')
    log_y = np.log(y)
    if form == "power":
        alpha, log_c = np.polyfit(np.log(n), log_y, 1)
        coefficients = {"c": float(math.exp(log_c)), "alpha": float(alpha)}
    elif form in LOG_FORMS:
        (a, b), = _log_loss_lines(_feature(form, n), y[None, :])
        coefficients = {"a": float(a), "b": float(b)}
    else:
        coefficients = {"c": float(np.exp(np.mean(log_y - np.log(_feature(form, n)))))}
    fit = FormFit(form, coefficients, 0.0)
    loss = float(np.mean((np.log(np.maximum(fit.predict(n), 1e-12)) - log_y) ** 2))
    return FormFit(form, coefficients, loss)


def _log_loss_lines(x: np.ndarray, ys: np.ndarray, iterations: int = 100) -> np.ndarray:
    """(a, b) minimising mean(log((a + b x) / y)^2) for every row of `ys` `(B, m)` at once: `(B, 2)`.

    Damped Gauss-Newton (Levenberg-Marquardt), vectorised over rows, started from the least-squares fit of the
    relative error (a + b x - y) / y, which is the same loss to first order; a step that would make a + b x <= 0
    anywhere or raise the loss is refused and the damping raised. Stops when no row moves by 1e-12 relatively.
    """
    ys = np.asarray(ys, dtype=float)
    log_y = np.log(ys)
    w = 1.0 / ys                                                       # relative-error weights for the start
    design = np.stack([w, w * x], axis=-1)                             # (B, m, 2)
    params = np.linalg.solve(np.einsum("bmi,bmj->bij", design, design),
                             np.einsum("bmi,bm->bi", design, w * ys)[..., None])[..., 0]
    bad = np.any(params[:, :1] + params[:, 1:] * x <= 0, axis=1)
    params[bad] = np.stack([ys[bad].min(axis=1), np.full(bad.sum(), 1e-6)], axis=1)

    def loss_of(p):
        fit = p[:, :1] + p[:, 1:] * x
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(np.all(fit > 0, axis=1), np.mean((np.log(np.abs(fit)) - log_y) ** 2, axis=1), np.inf)

    damping = np.full(len(ys), 1e-3)
    loss = loss_of(params)
    for _ in range(iterations):
        fit = params[:, :1] + params[:, 1:] * x
        jac = np.stack([1 / fit, x / fit], axis=-1)                    # d log(fit) / d (a, b): (B, m, 2)
        resid = np.log(fit) - log_y
        jtj = np.einsum("bmi,bmj->bij", jac, jac)
        jtr = np.einsum("bmi,bm->bi", jac, resid)
        scaled = jtj + damping[:, None, None] * np.eye(2) * np.diagonal(jtj, axis1=1, axis2=2)[:, :, None]
        step = np.linalg.solve(scaled, jtr[..., None])[..., 0]
        trial = params - step
        trial_loss = loss_of(trial)
        better = trial_loss <= loss
        moved = np.abs(step) > 1e-12 * (np.abs(params) + 1e-12)
        params = np.where(better[:, None], trial, params)
        loss = np.where(better, trial_loss, loss)
        damping = np.where(better, damping / 3, damping * 10)
        if not np.any(moved & better[:, None]):
            break
    return params


def _fit_rows(n: np.ndarray, ys: np.ndarray, loss: str, forms) -> list[dict[str, FormFit]]:
    """`fit_forms` for every row of `ys` `(B, m)`; the log-loss lines are fitted for all rows at once (the same
    routine `fit_form` uses, so a row gives what `fit_forms` would)."""
    if loss != "log" or not any(f in LOG_FORMS for f in forms):
        return [fit_forms(n, row, loss, forms) for row in ys]
    if not np.all(ys > 0):
        raise ArgumentError("replicates", "non-positive values", 'positive values for loss="log"')
    lines = {f: _log_loss_lines(_feature(f, n), ys) for f in forms if f in LOG_FORMS}
    rows = []
    for i, row in enumerate(ys):
        fits = fit_forms(n, row, loss, tuple(f for f in forms if f not in LOG_FORMS))
        for f, params in lines.items():
            fit = FormFit(f, {"a": float(params[i, 0]), "b": float(params[i, 1])}, 0.0)
            fits[f] = FormFit(f, fit.coefficients, float(np.mean((np.log(fit.predict(n)) - np.log(row)) ** 2)))
        rows.append({f: fits[f] for f in forms})
    return rows


def fit_forms(n, y, loss: str = "squared", forms=FORMS) -> dict[str, FormFit]:
    """Each of `forms` fitted to (n, y) with one `loss` (see `fit_form`)."""
    return {form: fit_form(form, n, y, loss) for form in forms}


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


def bootstrap_forms(n, y, replicates, loss: str = "squared", forms=FORMS, decide=CLASS_FORMS) -> BootstrapForms:
    """Fit every one of `forms` with one `loss` to the point estimates `y` and to each row of `replicates`
    `(B, len(n))`.

    The best form is the one of `decide` with the smallest point loss (ties go to the earlier form, the simpler
    growth first); `indistinguishable` lists the forms of `decide` the data cannot tell from it.
    """
    n, y = _check_points(n, y)
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim != 2 or reps.shape[1] != len(n) or len(reps) < 2:
        raise ArgumentError("replicates", reps.shape, f"a (B, {len(n)}) array with B >= 2")
    if not set(decide) <= set(forms):
        raise ArgumentError("decide", decide, f"a subset of forms {list(forms)}")
    point = fit_forms(n, y, loss, forms)
    boot = _fit_rows(n, reps, loss, forms)
    losses = {form: np.array([b[form].loss for b in boot]) for form in forms}
    coefficient_ci = {form: {name: _interval(np.array([b[form].coefficients[name] for b in boot]))
                             for name in point[form].coefficients} for form in forms}
    loss_ci = {form: _interval(losses[form]) for form in forms}
    # the squared loss is in units of y^2 and the log loss has none: ties and zero are judged on that scale
    scale = max(float(np.mean(y ** 2)), 1e-12) if loss == "squared" else 1.0
    best = min(decide, key=lambda form: (round(point[form].loss / scale, 12), forms.index(form)))
    together = tuple(form for form in decide
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
    forms = set(forms) - {"power"}
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


def resample_models(tables, statistic, replicates: int, seed: int = 0) -> np.ndarray:
    """The bootstrap over models: `(replicates, len(tables))` values of `statistic`, each from one resample.

    tables: one `(widths, seeds)` array per n (NaN where a model is missing), holding every trained model: those
    stopped by their rule and those that ran to the step cap alike, each judged by its own score. In each replicate
    the seeds (columns) of every n are drawn with replacement, jointly for the widths of that n (a seed's models
    stay together), and `statistic(seed_mean_curve)` reads the quantity, e.g. a saturation width.
    """
    if replicates < 2:
        raise ArgumentError("replicates", replicates, "an integer >= 2")
    gen = np.random.default_rng(seed)
    out = np.empty((replicates, len(tables)))
    for j, table in enumerate(tables):
        values = np.asarray(table, dtype=float)
        if values.ndim != 2 or values.shape[1] < 1:
            raise ArgumentError("tables", values.shape, "one (widths, seeds) array per n, with at least one seed")
        picks = gen.integers(0, values.shape[1], size=(replicates, values.shape[1]))
        for b, pick in enumerate(picks):
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)   # a width no drawn seed has: NaN, by design
                out[b, j] = statistic(np.nanmean(values[:, pick], axis=1))
    return out


GROWTH_OUTCOMES = ("log", "sqrt", "linear", "untestable")


def growth_outcome(boot: BootstrapForms) -> str:
    """The growth verdict of a bootstrap fit: "log", "sqrt" or "linear" when every form the data cannot tell from
    the best is of that class, else "untestable" (a logarithm and a power law both fit)."""
    growth = growth_class(boot.indistinguishable)
    return growth if growth in GROWTH_OUTCOMES else "untestable"


def slope_is_flat(boot: BootstrapForms) -> bool:
    """For a logarithmic best form: True when the 95 % interval of its slope b reaches 0 (no growth detected)."""
    if boot.best not in LOG_FORMS:
        return False
    low, high = boot.coefficient_ci[boot.best]["b"]
    return low <= 0 <= high


def knee_fits(n_values, knees) -> list[dict]:
    """Chapters 03 and 03b: the knee forms (KNEE_LABELS) fitted with the log loss to the positive, finite knees,
    one row each: form (its label), points, a and b (for c n^alpha: c and alpha), r2 (on the knee itself) and
    rms_log (the root of the loss); None everywhere with fewer than MIN_POINTS knees."""
    n, y = np.asarray(n_values, dtype=float), np.asarray(knees, dtype=float)
    ok = np.isfinite(y) & (y > 0)
    n, y = n[ok], y[ok]
    if n.size < MIN_POINTS:
        return [{"form": label, "points": int(n.size), "a": None, "b": None, "r2": None, "rms_log": None}
                for label in KNEE_LABELS.values()]
    rows = []
    for form, fit in fit_forms(n, y, loss="log", forms=tuple(KNEE_LABELS)).items():
        c = fit.coefficients
        a, b = (c["c"], c["alpha"]) if form == "power" else (c["a"], c["b"])
        resid = y - fit.predict(n)
        r2 = 1.0 - float(np.sum(resid ** 2) / np.sum((y - y.mean()) ** 2))
        rows.append({"form": KNEE_LABELS[form], "points": int(n.size), "a": a, "b": b, "r2": r2,
                     "rms_log": math.sqrt(fit.loss)})
    return rows


# ------------------------------------------------------------------------------------------------ knees (03, 03b)
KNEE_OUTCOMES = ("log", "faster", "untestable")


def knee_outcome(boot: BootstrapForms) -> str:
    """How knees grow, from a bootstrap fit of the KNEE_FORMS: "log" when a + b ln n is the only form as good as
    the best, "faster" when it is worse than the best in the bootstrap (a faster form fits better), else
    "untestable" (a + b ln n and a faster form both fit)."""
    if boot.indistinguishable == ("log",):
        return "log"
    return "faster" if "log" not in boot.indistinguishable else "untestable"


def _knee_points(n, knees, replicates):
    """The n with a positive, finite knee, their knees and the replicate rows that are finite at every one."""
    n, y = np.asarray(n, dtype=float), np.asarray(knees, dtype=float)
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim != 2 or reps.shape[1] != len(n):
        raise ArgumentError("replicates", reps.shape, f"a (B, {len(n)}) array, one column per n")
    ok = np.isfinite(y) & (y > 0)
    reps = reps[:, ok]
    return n[ok], y[ok], reps[np.all(np.isfinite(reps) & (reps > 0), axis=1)]


def knee_verdict(n, knees, replicates, grid, subject: str = "the knee", points_word: str = "knees") -> "Verdict":
    """The growth verdict of knees (saturation points of random-key curves, chapters 03 and 03b).

    n, knees `(m,)`; replicates `(B, m)`: the knee of every bootstrap resample of the trials at each n; grid: the
    d_h values the knees were read between. The KNEE_FORMS are fitted with the log loss; the outcome is
    `knee_outcome`, recomputed with each knee moved to each of its grid neighbours (`helpers.robust`): a flip makes
    it "untestable at this budget". The Monte Carlo variation of the trials is in the bootstrap itself. Needs
    VERDICT_MIN_POINTS knees. Every sentence starts with `subject` ("the knee grows like log n ..."); `points_word`
    names what was counted ("knees").
    """
    from . import robust
    from .english import join
    from .results import Verdict

    n, y, reps = _knee_points(n, knees, replicates)
    rule = (f"the knee forms {join(list(KNEE_LABELS.values()))} fitted with one loss (RMS log error); a form counts "
            f"as good as the best while the 95 % bootstrap interval of its excess loss reaches 0; order log n when "
            f"only a + b log n is as good as the best, faster when it is worse than the best")
    if len(n) < VERDICT_MIN_POINTS or len(reps) < 2:
        return Verdict("untestable", f"{subject} cannot be judged with {len(n)} {points_word} (a verdict "
                       f"needs {VERDICT_MIN_POINTS})", rule, {"points": int(len(n)), "best_form": None})
    boot = bootstrap_forms(n, y, reps, loss="log", forms=KNEE_FORMS, decide=KNEE_FORMS)
    outcome = knee_outcome(boot)
    perturbed = []
    for label, moved in robust.grid_steps({f"n = {int(k)}": v for k, v in zip(n, y)}, grid, name="knee"):
        shifted = np.array(list(moved.values()))
        boot_moved = bootstrap_forms(n, shifted, reps * (shifted / y), loss="log", forms=KNEE_FORMS,
                                     decide=KNEE_FORMS)
        perturbed.append((label, knee_outcome(boot_moved)))
    span = f"over n from {int(n.min()):,} to {int(n.max()):,} ({len(n)} knees)"
    others = [f for f in boot.indistinguishable if f != boot.best]
    if outcome == "log":
        sentence = (f"{subject} grows like log n {span}: of the three forms fitted with one loss, only "
                    f"{KNEE_WORDS['log']} fits as well as the best in a bootstrap over the trials")
    elif outcome == "faster":
        sentence = (f"{subject} grows faster than linearly in log n {span}: {KNEE_WORDS[boot.best]} fits best and "
                    f"{KNEE_WORDS['log']} fits worse in a bootstrap over the trials, so the data support the paper's "
                    "lower bound of order log n, but not a knee that grows only like log n")
    else:
        sentence = (f"{subject} does not decide between log n and faster growth {span}: {KNEE_WORDS[boot.best]} fits best, but "
                    f"{join([KNEE_WORDS[f] for f in others])} fit{'s' if len(others) == 1 else ''} as well within a "
                    "bootstrap over the trials")
    evidence = {"best_form": KNEE_LABELS[boot.best], "indistinguishable": [KNEE_LABELS[f] for f in
                                                                           boot.indistinguishable],
                "points": int(len(n)), "replicates": int(boot.replicates),
                "rms_log": {KNEE_LABELS[f]: math.sqrt(boot.point[f].loss) for f in KNEE_FORMS}}
    words = {"log": "growth of order log n", "faster": "growth faster than log n"}
    return robust.Robustness.of(outcome, perturbed).apply(Verdict(outcome, sentence, rule, evidence),
                                                          subject=subject, words=words)
