"""Figures: the book's house style, one figure helper, and small helpers that draw into a given `ax`.

Every chapter calls `setup()` once and makes each figure with `figure(...)`, so all figures share one size scale:
they are at most `COLUMN_WIDTH_IN` wide, the width of the book's content column, so the page never shrinks them
and a 9-point font stays 9 points as rendered. Captions, names and alt text live in the cell metadata
(README, "House style"), never in plot titles; panel labels sit above the axes, legends below the panels.
"""

import math

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

from . import english, figure_data
from .errors import ArgumentError

# The text column of the HTML book is 784 CSS px wide at a 1400 px window (measured in Chromium). A figure of
# 7.5 in is 720 px as SVG (96 px per inch), so it is shown at its natural size with room to spare.
COLUMN_WIDTH_IN = 7.5
MAX_PANELS_PER_ROW = 3
FONT_PT = 10        # labels; tick labels and legends one point smaller, never below MIN_FONT_PT
MIN_FONT_PT = 9
PNG_DPI = 200       # only for PNG output (PDF fallbacks): twice the 96 px per inch of the page

MEASURE_LABELS = {
    "numerical": "numerical rank",
    "hardmax": "hardmax rank",
    "effective": "effective rank",
    "stable": "stable rank",
}

STYLE = {
    "font.size": FONT_PT,
    "axes.labelsize": FONT_PT,
    "axes.titlesize": FONT_PT,
    "axes.titlelocation": "left",   # a panel label above its axes, off the data
    "xtick.labelsize": FONT_PT - 1,
    "ytick.labelsize": FONT_PT - 1,
    "legend.fontsize": FONT_PT - 1,
    "legend.title_fontsize": FONT_PT - 1,
    "figure.titlesize": FONT_PT,
    "figure.figsize": (COLUMN_WIDTH_IN, 3.4),
    "figure.dpi": 96,
    "savefig.dpi": PNG_DPI,
    "figure.constrained_layout.use": True,  # room for labels and an outside legend, without tight_layout calls
    "svg.fonttype": "path",          # text as outlines: identical on every machine, no font to ship
    "lines.markersize": 4,
}


def setup() -> None:
    """The book's plotting style; inline figures become SVG (sharp at any zoom, and in the PDF)."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update(STYLE)
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("svg")
    except ImportError:  # no IPython: scripts and tests save files themselves
        pass


def figure(ncols: int = 1, nrows: int = 1, height: float | None = None, width: float | None = None,
           **subplot_kw):
    """A new figure of `nrows x ncols` panels sized for the content column; returns `(fig, axes)` as plt.subplots.

    `height` is the height of one row of panels in inches (default: 0.7 x the panel width, from 2.4 to 3.4, so
    that short panels still have room for their labels);
    `width` defaults to the column width and may only be smaller. More than three panels side by side would
    shrink their text below the house minimum, so that is refused: use more rows.
    """
    if not isinstance(ncols, int) or not 1 <= ncols <= MAX_PANELS_PER_ROW:
        raise ArgumentError("ncols", ncols, f"an integer from 1 to {MAX_PANELS_PER_ROW} (use more rows for more panels)")
    if not isinstance(nrows, int) or not 1 <= nrows <= 6:
        raise ArgumentError("nrows", nrows, "an integer from 1 to 6")
    width = COLUMN_WIDTH_IN if width is None else width
    if not 0 < width <= COLUMN_WIDTH_IN:
        raise ArgumentError("width", width, f"a number of inches in (0, {COLUMN_WIDTH_IN}] (the content column)")
    row_height = min(max(0.7 * width / ncols, 2.4), 3.4) if height is None else height
    if not 0.5 <= row_height <= 6:
        raise ArgumentError("height", height, "a row height in inches from 0.5 to 6")
    return plt.subplots(nrows, ncols, figsize=(width, row_height * nrows), **subplot_kw)


def show(fig, name: str, allow_empty: bool = False) -> None:
    """Show `fig` on the page and write the data it plots to the CSV its caption links (`figure_data.save`;
    `allow_empty` for a figure whose panels say why nothing is plotted)."""
    figure_data.save(fig, name, allow_empty)
    plt.show()


def legend_below(fig, ax=None, ncols: int | None = None, **kwargs):
    """One legend for the whole figure, centred under the panels (off the data), from `ax` (default: the first)."""
    ax = ax if ax is not None else fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    ncols = ncols or min(len(labels), 4)
    return fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False, **kwargs)


def attention_heatmap(ax, matrix, label: str = "", vmax: float | None = None, cbar: bool = False,
                      gamma: float = 1.0):
    """One attention matrix `(n, n)`: rows are queries, columns are keys. `gamma` below 1 colours weight^gamma, so
    weak attention stays visible beside a few columns that take most of the mass (attention sinks)."""
    if not isinstance(gamma, (int, float)) or not 0 < gamma <= 1:
        raise ArgumentError("gamma", gamma, "a number in (0, 1]: 1 colours the weights linearly, 0.5 their square root")
    data = matrix.detach().cpu().numpy() if isinstance(matrix, torch.Tensor) else np.asarray(matrix)
    if gamma == 1:
        scale = {"vmin": 0, "vmax": vmax}
    else:
        from matplotlib.colors import PowerNorm

        scale = {"norm": PowerNorm(gamma, vmin=0, vmax=float(data.max()) if vmax is None else vmax)}
    sns.heatmap(data, ax=ax, cmap="viridis", cbar=cbar, square=True, xticklabels=False, yticklabels=False, **scale)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if label:
        ax.set_title(label)
    return ax


def barrier_line(ax, n_values, fraction: float, label: str = r"$1 - 1/e$"):
    """The 0.63 n reference drawn on an axis whose y is rank / n (fraction) or rank (n given)."""
    ax.axhline(fraction, color="black", linestyle="--", linewidth=1, label=label)
    return ax


def rank_curves(ax, frame, hue: str = "n", x: str = "d_head", y: str = "rank_over_n", err: str | None = "se_over_n",
                style: str | None = None, logx: bool = True, palette: str = "viridis", label_fmt: str = "{hue} = {value}"):
    """Mean curves (one per `hue` value, line style per `style` value) with +-2 standard-error bands.

    `frame` is tidy: one row per (hue, style, x) with columns x, y and optionally err.
    """
    hues = sorted(frame[hue].unique())
    colors = sns.color_palette(palette, len(hues))
    styles = sorted(frame[style].unique()) if style else [None]
    dashes = ["-", "--", ":", "-."]
    for color, value in zip(colors, hues):
        for k, sty in enumerate(styles):
            part = frame[frame[hue] == value] if sty is None else frame[(frame[hue] == value) & (frame[style] == sty)]
            part = part.sort_values(x)
            if part.empty:
                continue
            label = label_fmt.format(hue=hue, value=value) + ("" if sty is None else f", {sty}")
            ax.plot(part[x], part[y], marker="o", markersize=3, color=color, linestyle=dashes[k % 4], label=label)
            if err and err in part and part[err].notna().any():
                ax.fill_between(part[x], part[y] - 2 * part[err], part[y] + 2 * part[err], color=color, alpha=0.2,
                                linewidth=0)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(x)
    return ax


def log2_ticks(ax, values) -> None:
    """A base-2 log x-axis with a tick at each of `values` (the trained widths or lengths), labelled where the label
    stays legible: at the powers of two, and at any other value at least a factor √2 from every labelled one (on the
    grid 1, 2, 3, 4, 6, 8, 12, 16, the 3, 6 and 12 get a tick without a label, so "12" and "16" never touch)."""
    values = sorted({float(v) for v in values})
    if values and values[0] <= 0:
        raise ArgumentError("values", values, "positive numbers (a log axis)")
    labelled = [v for v in values if math.log2(v).is_integer()]
    for v in values:
        if all(abs(math.log2(v / u)) >= 0.5 for u in labelled):
            labelled.append(v)
    ax.set_xscale("log", base=2)
    ax.set_xticks(values, [number_text(v) if v in labelled else "" for v in values], minor=False)
    ax.xaxis.set_minor_locator(plt.NullLocator())   # the log scale's own minor ticks would mark untrained values


def table(frame, digits: int = 3, missing: str = "–"):
    """A DataFrame formatted for the page: integer-valued columns as integers, others to `digits` decimals,
    missing values as `missing` (say in the text what it means), "95 %" and "n = 16" never broken across lines.
    Returns a Styler (rendered as an HTML table)."""
    import pandas as pd

    def fmt(column):
        values = column.dropna()
        is_number = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
        if is_number and len(values) and (values == values.round()).all() and values.abs().max() < 1e15:
            return lambda x: missing if pd.isna(x) else f"{int(x)}"
        if is_number:
            return lambda x: missing if pd.isna(x) or not np.isfinite(x) else f"{x:.{digits}f}"
        return lambda x: missing if x is None or (isinstance(x, float) and np.isnan(x)) else bind(str(x))

    def bind(x):   # "95 %" and "n = 16" kept on one line
        return english.keep_together(x) if isinstance(x, str) else x

    def row_label(x):
        return missing if x is None else (number_text(x) if isinstance(x, float) else bind(x))

    styled = frame.style.format({c: fmt(frame[c]) for c in frame.columns})
    words = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])
             and frame[c].map(lambda v: isinstance(v, str) and len(v) > 40).any()]   # columns of sentences
    styled = styled.format_index(row_label).format_index(bind, axis=1)
    # the theme styles tables of class "dataframe"; the padding keeps neighbouring numbers apart, and at 0.4em (not
    # 0.45em) chapter 5's widest table also fits the column of a 1,366 px window (757 px; it was 3 px too wide)
    styled = styled.set_table_attributes('class="dataframe"').set_table_styles(
        [{"selector": "", "props": "font-size: 0.85em;"},
         {"selector": "td, th", "props": "padding: 0.15em 0.4em; text-align: right; white-space: normal;"}])
    if words:   # sentences read from the left; numbers and short labels stay right-aligned
        styled = styled.set_table_styles({c: [{"selector": "td", "props": "text-align: left;"}] for c in words},
                                         overwrite=False)
    return styled


def number_text(x: float) -> str:
    """A float for a table or label: plain decimals from 0.001 up, a power of ten ("10⁻⁵", "2 × 10⁻⁵") below
    (`english.number` with power=True, three significant digits)."""
    return english.number(x, 3, power=True)


def measure_text(measure: str, powers: bool = False) -> str:
    """A rank measure's name for tables and legends: "numerical@1e-08" -> "numerical, tol 10⁻⁸", "numerical@1e-03" ->
    "numerical, tol 0.001"; with `powers` every power-of-ten tolerance reads as one ("tol 10⁻³", "tol 10⁻¹"), so a
    table or legend that shows several tolerances uses one notation."""
    if "@" in measure:
        name, tol = measure.split("@")
        exponent = round(math.log10(float(tol)))
        power = powers and math.isclose(float(tol), 10.0 ** exponent, rel_tol=1e-9)
        return f"{name}, tol {english.ten_to(exponent) if power else number_text(float(tol))}"
    return MEASURE_LABELS.get(measure, measure)


def latex(expr) -> str:
    """A sympy expression as the book's LaTeX, written as the prose writes it: the natural logarithm as ln; a
    negative constant after the other term of a two-term sum (e - 1, not sympy's -1 + e); a positive constant
    first when every other term is negative (1 - g_1 - g_2, not -g_1 - g_2 + 1)."""
    from sympy.printing.latex import LatexPrinter

    class BookPrinter(LatexPrinter):
        def _print_Add(self, expr, order=None):
            terms = list(expr.as_ordered_terms())
            if (len(terms) == 2 and terms[0].is_Number and terms[0].is_negative
                    and not terms[1].could_extract_minus_sign()):
                return f"{self._print(terms[1])} - {self._print(-terms[0])}"
            rest = terms[:-1]
            if (len(terms) > 1 and terms[-1].is_Number and terms[-1].is_positive
                    and all(t.could_extract_minus_sign() for t in rest)):
                return self._print(terms[-1]) + "".join(f" - {self._print(-t)}" for t in rest)
            return super()._print_Add(expr, order)

    return BookPrinter({"ln_notation": True}).doprint(expr)


def broken_equation(lhs: str, expr, terms_per_line: int = 3, lhs_alone: bool = False) -> str:
    """LaTeX for `lhs = expr` with the terms of a long sympy sum broken over aligned lines, so a display
    equation fits the text column instead of being cut off at its right edge. `lhs_alone`: "lhs =" on a line of
    its own and the terms below it, for a long left-hand side (the lines then have the column's whole width)."""
    import sympy as sp

    terms = [latex(term) for term in sp.Add.make_args(sp.expand(expr))]
    if len(terms) <= terms_per_line:
        return f"{lhs} = {latex(expr)}"
    # as few lines as terms_per_line allows, the terms spread evenly over them (no last line with a lone term)
    count = -(-len(terms) // terms_per_line)
    base, extra = divmod(len(terms), count)
    ends = np.cumsum([0] + [base + 1] * extra + [base] * (count - extra))
    lines = [" + ".join(terms[a:b]) for a, b in zip(ends[:-1], ends[1:])]
    body = r" \\ &\quad + ".join(lines).replace("+ -", "- ")
    if lhs_alone:
        return rf"\begin{{aligned}} & {lhs} = \\ &\quad {body} \end{{aligned}}"
    return rf"\begin{{aligned}} {lhs} &= {body} \end{{aligned}}"


def show_step(lhs: str, expression, relation: str = "=") -> None:
    """Display one derivation step, `lhs relation expression`, as typeset maths in the notebook (sympy to LaTeX)."""
    from IPython.display import Math, display

    display(Math(f"{lhs} {relation} {latex(expression)}"))


def listing(obj) -> None:
    """Display the source of a function or method of `helpers` as a Python code block, read by `inspect` when the
    page runs, so that the page shows the code exactly as the book runs it and cannot drift from it."""
    import inspect
    import textwrap

    from IPython.display import Markdown, display

    if not (inspect.isfunction(obj) and obj.__module__.startswith("helpers")):
        raise ArgumentError("obj", getattr(obj, "__qualname__", repr(obj)), "a function or method of helpers")
    source = textwrap.dedent(inspect.getsource(obj)).rstrip()
    where = f"{obj.__module__}.{obj.__qualname__}"
    display(Markdown(f"`{where}`\n\n```python\n{source}\n```"))
