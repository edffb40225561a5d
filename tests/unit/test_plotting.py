"""The house style of figures: column width, fonts of at least 9 pt, at most three panels, legends off the data."""

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
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
