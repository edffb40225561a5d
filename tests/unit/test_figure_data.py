"""The CSV of a figure holds exactly what was drawn: each kind of artist the book uses, read back and compared with
the numbers that were passed to matplotlib."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402

from helpers import figure_data, plotting  # noqa: E402
from helpers.errors import ArgumentError  # noqa: E402


@pytest.fixture(autouse=True)
def style(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_METRICS_DIR", str(tmp_path))
    plotting.setup()
    yield
    plt.close("all")


EPS = np.finfo(float).eps


def rows(frame, **where):
    for column, value in where.items():
        frame = frame[frame[column] == value]
    return frame


def test_lines_points_reference_lines_and_error_bars_read_back_exactly():
    x, y = np.array([16.0, 32.0, 64.0]), np.array([0.25, 0.5, 0.625])
    fig, ax = plotting.figure()
    ax.plot(x, y, "o-", label="rank / n")
    ax.axhline(1 - 1 / np.e, label="barrier")
    ax.axvline(32.0)
    ax.errorbar(x, y + 1, yerr=[0.1, 0.2, 0.3], fmt="s", capsize=2, label="with error")   # caps are not data
    ax.set_title("(a) ranks")
    ax.set_xlabel("n")
    frame = figure_data.plotted_data(fig)
    line = rows(frame, series="rank / n", kind="line")
    assert line.x.tolist() == x.tolist() and line.y.tolist() == y.tolist()
    assert rows(frame, kind="hline").y.item() == 1 - 1 / np.e and np.isnan(rows(frame, kind="hline").x.item())
    assert rows(frame, kind="vline").x.item() == 32.0
    markers, bars = rows(frame, series="with error", kind="points"), rows(frame, series="with error", kind="segment")
    assert markers.y.tolist() == (y + 1).tolist()
    # each end y ± e is rounded once (half an ulp: at most eps/2 below 2), their difference once more: 1.5 eps
    np.testing.assert_allclose(bars.y_end - bars.y, 2 * np.array([0.1, 0.2, 0.3]), rtol=0, atol=2 * EPS)
    assert set(frame.panel) == {"(a) ranks"} and set(frame.x_label) == {"n"}


def test_bars_heat_maps_scatter_colours_and_bands():
    fig, axes = plotting.figure(ncols=3)
    axes[0].bar(["copy", "reversal"], [3.0, 8.0], label="d*")
    axes[0].barh(["a", "b"], [1.5, 2.5])
    matrix = np.arange(6.0).reshape(2, 3)
    sns.heatmap(matrix, ax=axes[1], cbar=True)          # the colour bar is not a data panel
    axes[2].scatter([1.0, 2.0], [3.0, 4.0], c=[0.1, 0.9])
    axes[2].fill_between([1.0, 2.0], [0.0, 0.0], [1.0, 2.0], label="band")
    frame = figure_data.plotted_data(fig)
    assert len(fig.axes) == 4 and set(frame.panel) == {"panel 1", "panel 2", "panel 3"}
    vertical = rows(frame, series="d*")
    assert vertical.category.tolist() == ["copy", "reversal"] and (vertical.y_end - vertical.y).tolist() == [3, 8]
    horizontal = rows(frame, kind="bars", series="")
    assert horizontal.category.tolist() == ["a", "b"] and (horizontal.x_end - horizontal.x).tolist() == [1.5, 2.5]
    cells = rows(frame, kind="cells")
    assert sorted(cells.value) == sorted(matrix.ravel())
    corner = cells[(cells.x == 2) & (cells.y == 1)]          # row 1, column 2 of the matrix
    assert corner.value.item() == matrix[1, 2] and (corner.x_end.item(), corner.y_end.item()) == (3, 2)
    assert rows(frame, kind="points", panel="panel 3").value.tolist() == [0.1, 0.9]
    band = rows(frame, kind="band")
    assert band.y.max() == 2.0 and band.y.min() == 0.0


def test_save_writes_the_csv_atomically_and_refuses_a_bad_name(tmp_path):
    fig, ax = plotting.figure()
    ax.plot([1.0, 2.0], [1 / 3, 2 / 3], label="thirds")
    path = figure_data.save(fig, "fig-test-thirds")
    assert path == tmp_path / "figures" / "fig-test-thirds.csv"
    back = figure_data.load("fig-test-thirds")
    # written with 10 significant digits: off by at most half a unit in the tenth, 5e-10 of the value
    np.testing.assert_allclose(back.y, [1 / 3, 2 / 3], rtol=5e-10)
    assert [p.name for p in path.parent.iterdir()] == ["fig-test-thirds.csv"]   # no temporary file left
    for bad in ("Figure 1", "tbl-ch5-cells", "", None):
        with pytest.raises(ArgumentError, match="name"):
            figure_data.save(fig, bad)
    empty, _ = plotting.figure()
    with pytest.raises(ValueError, match="no plotted data"):
        figure_data.save(empty, "fig-test-empty")
    # a figure that says why it has nothing to plot (a comparison left out by a parameter): the column names only
    figure_data.save(empty, "fig-test-empty", allow_empty=True)
    assert figure_data.load("fig-test-empty").empty
    assert list(figure_data.load("fig-test-empty").columns) == list(figure_data.COLUMNS)
