"""The house style of figures: column width, fonts of at least 9 pt, at most three panels, legends off the data."""

import io
import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers import plotting  # noqa: E402
from helpers.errors import ArgumentError  # noqa: E402


@pytest.fixture(autouse=True)
def style():
    plotting.setup()
    yield
    plt.close("all")


def test_figure_fits_the_column_and_refuses_four_panels():
    fig, axes = plotting.figure(ncols=3)
    assert len(axes) == 3
    svg = io.StringIO()
    fig.savefig(svg, format="svg")
    width_pt = float(re.search(r'width="([\d.]+)pt"', svg.getvalue()).group(1))
    assert width_pt == pytest.approx(72 * plotting.COLUMN_WIDTH_IN, rel=1e-3)  # shown at natural size on the page
    with pytest.raises(ArgumentError, match="ncols"):
        plotting.figure(ncols=4)
    with pytest.raises(ArgumentError, match="width"):
        plotting.figure(width=plotting.COLUMN_WIDTH_IN + 1)


def test_every_text_is_at_least_the_minimum_size():
    fig, (a, b) = plotting.figure(ncols=2)
    a.plot([1, 2], [3, 4], label="one")
    b.plot([1, 2], [4, 3], label="two")
    a.set_xlabel("x")
    a.set_title("panel a")
    plotting.legend_below(fig)
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
    assert sizes and min(sizes) >= plotting.MIN_FONT_PT


def test_legend_below_sits_under_the_panels():
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1], label="a line")
    legend = plotting.legend_below(fig)
    fig.canvas.draw()
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0


def test_broken_equation_keeps_every_term_and_breaks_long_sums():
    import sympy as sp

    g = sp.symbols("g1:8")
    expr = sum((1 - gi) ** 3 for gi in g)                      # 22 terms once expanded
    text = plotting.broken_equation("V", expr, terms_per_line=3)
    terms = [sp.latex(t) for t in sp.Add.make_args(sp.expand(expr))]
    assert text.count(r"\\") == -(-len(terms) // 3) - 1
    sizes = [line.count("+") + line.count("-") for line in text.split(r"\\")]   # 22 terms: 3, 3, 3, 3, 3, 3, 2, 2
    assert max(sizes) - min(sizes) <= 1, sizes
    assert all(term.lstrip("-").strip() in text for term in terms)
    assert plotting.broken_equation("V", g[0] + g[1], 3) == "V = " + sp.latex(g[0] + g[1])
    alone = plotting.broken_equation("V", expr, terms_per_line=3, lhs_alone=True)
    assert alone.startswith(r"\begin{aligned} & V = \\ &\quad ") and alone.count(r"\\") == text.count(r"\\") + 1
    assert all(term.lstrip("-").strip() in alone.split(r"\\", 1)[1] for term in terms)   # every term below "V ="


def test_measure_text_writes_tolerances_in_one_notation_when_asked():
    from helpers import english

    assert plotting.measure_text("numerical@1e-03") == "numerical, tol 0.001"    # the default is unchanged
    assert plotting.measure_text("numerical@1e-08") == "numerical, tol 10⁻⁸"
    assert [plotting.measure_text(f"numerical@{t:.0e}", powers=True) for t in (1e-1, 1e-3, 1e-12)] == \
        ["numerical, tol 10⁻¹", "numerical, tol 10⁻³", "numerical, tol 10⁻¹²"]
    assert plotting.measure_text("numerical@2e-05", powers=True) == "numerical, tol 2 × 10⁻⁵", "not a power of ten"
    assert plotting.measure_text("effective", powers=True) == plotting.measure_text("effective")
    assert english.ten_to(-3) == "10⁻³" and english.number(3.7e-7, 2, power=True) == "3.7 × 10⁻⁷"


def test_columns_of_sentences_are_left_aligned_and_numbers_stay_right():
    import pandas as pd

    html = plotting.table(pd.DataFrame({"count": [1, 2], "verdict": ["a sentence that is long enough to wrap " * 2,
                                                                     "short"], "label": ["x", "y"]})).to_html()
    assert "td.col1 {\n  text-align: left;" in html                 # the sentences
    assert "td.col0" not in html and "td.col2" not in html           # numbers and short labels: the table's right


def test_a_table_keeps_every_percentage_and_setting_on_one_line_in_cells_and_labels():
    import pandas as pd

    frame = pd.DataFrame({"95 % interval": ["3 to 6", "2 of 3 seeds (63 % bound)"], "count": [1, 2]},
                         index=pd.Index(["at 50 %", "mnist, n = 16"]))
    html = plotting.table(frame).to_html()
    nb = "\u00a0"
    assert f">95{nb}% interval<" in html and f">at 50{nb}%<" in html and f"(63{nb}% bound)" in html
    assert f">mnist, n{nb}={nb}16<" in html
    assert "95 %" not in html and "63 %" not in html and "50 %" not in html and "n = 16" not in html
    assert frame.columns[0] == "95 % interval", "the frame itself (and the metrics) keep the plain space"


def test_a_listing_is_the_source_the_book_runs(monkeypatch):
    import inspect

    from helpers import forward
    from helpers.training import loop

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda markdown: shown.append(markdown.data))
    plotting.listing(loop._Run.step)
    text = shown[0]
    assert text.startswith("`helpers.training.loop._Run.step`")
    body = text.split("```python\n", 1)[1].removesuffix("\n```")
    assert body.splitlines()[0] == "def step(self, step: int) -> None:"          # dedented out of the class
    assert [line.strip() for line in body.splitlines()] == [
        line.strip() for line in inspect.getsource(loop._Run.step).rstrip().splitlines()]
    plotting.listing(forward._fused_or_math)
    assert "scaled_dot_product_attention" in shown[1]
    with pytest.raises(ArgumentError, match="a function or method of helpers"):
        plotting.listing(math.sqrt)


def test_heatmap_gamma_colours_the_root_of_the_weights_and_keeps_the_data():
    weights = np.array([[1.0, 0.0], [0.25, 0.75]])
    fig, (linear, root) = plotting.figure(ncols=2)
    plotting.attention_heatmap(linear, weights)
    plotting.attention_heatmap(root, weights, gamma=0.5)
    assert linear.collections[0].norm(0.25) == pytest.approx(0.25, abs=1e-12)
    assert root.collections[0].norm(0.25) == pytest.approx(0.5, abs=1e-12)   # sqrt(0.25 / 1)
    assert np.asarray(root.collections[0].get_array()).ravel().tolist() == weights.ravel().tolist()
    for bad in (0, 1.5, "0.5"):
        with pytest.raises(ArgumentError, match="gamma"):
            plotting.attention_heatmap(root, weights, gamma=bad)


def test_sympy_maths_writes_the_natural_log_as_ln():
    import sympy as sp

    n, L = sp.symbols("n L", positive=True)
    assert plotting.latex(L / sp.log(n)) == r"\frac{L}{\ln{\left(n \right)}}"
    assert r"\log" not in plotting.broken_equation("d", sp.log(n) + L + n ** 2 + 1, terms_per_line=2)


def test_sympy_maths_writes_a_negative_constant_last_as_the_prose_does():
    import sympy as sp

    t, eps, n = sp.symbols("t varepsilon n", positive=True)
    assert plotting.latex(t ** 4 / (4 * eps * (sp.E - 1))) == r"\frac{t^{4}}{4 \varepsilon \left(e - 1\right)}"
    assert plotting.latex((sp.E - 2) / sp.E ** 2) == r"\frac{e - 2}{e^{2}}"
    g1, g2 = sp.symbols("g_1 g_2")
    assert plotting.latex((1 - g1 - g2) ** n) == r"\left(1 - g_{1} - g_{2}\right)^{n}"
    # only two-term sums with a negative constant move; the value is unchanged
    assert plotting.latex(-n / sp.E + n + 1) == sp.latex(-n / sp.E + n + 1)
    assert sp.parse_expr(plotting.latex(sp.E - 1).replace("e", "E")) == sp.E - 1


def test_log2_ticks_label_only_what_stays_legible():
    import matplotlib.pyplot as plt

    def labels(values):
        fig, ax = plt.subplots()
        plotting.log2_ticks(ax, values)
        fig.canvas.draw()
        shown = [t.get_text() for t in ax.get_xticklabels()]
        ticks = list(ax.get_xticks())
        plt.close(fig)
        return ticks, shown

    ticks, shown = labels([16, 1, 2, 3, 4, 6, 8, 12, 2])   # any order, repeats
    assert ticks == [1, 2, 3, 4, 6, 8, 12, 16] and shown == ["1", "2", "", "4", "", "8", "", "16"]
    assert labels([16, 32, 64, 128, 256])[1] == ["16", "32", "64", "128", "256"]
    assert labels([24, 48, 96, 100])[1] == ["24", "48", "96", ""]   # 100 is a factor 1.04 from 96
    assert labels([]) == ([], [])                                    # nothing to mark (an empty panel)
    with pytest.raises(ArgumentError, match="values"):
        labels([0, 1])
