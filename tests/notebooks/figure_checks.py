"""The notebook tests' view of a figure's CSV: its plotted points, to compare with what the chapter recorded."""

import numpy as np

from helpers import figure_data

# The CSV keeps 10 significant digits: a value read back is off by at most half a unit in the tenth digit.
CSV_RTOL = 5e-10


def load(quick_book, name: str):
    """The CSV of figure `name` from the quick run."""
    return figure_data.load(name, quick_book.book_dir / "_metrics" / "figures")


def series(frame, kind: str, **where) -> dict:
    """{series label: (k x 2) array of its (x, y) in drawing order} for the rows of `kind` matching `where`."""
    frame = frame[frame.kind == kind]
    for column, value in where.items():
        frame = frame[frame[column] == value]
    return {label: part[["x", "y"]].to_numpy(float) for label, part in frame.groupby("series", sort=False)}


def assert_points(drawn, recorded, what: str = "") -> None:
    """The drawn points equal the recorded ones to the CSV's precision (NaN where both are NaN)."""
    drawn, recorded = np.asarray(drawn, float), np.asarray(recorded, float)
    assert drawn.shape == recorded.shape, f"{what}: {drawn.shape} points drawn, {recorded.shape} recorded"
    np.testing.assert_allclose(drawn, recorded, rtol=CSV_RTOL, atol=0, err_msg=what)


def cell_grid(frame, **where) -> dict:
    """{(row, column): value} of an imshow panel, its cells indexed by their centres (imshow puts pixel centres
    on the integers)."""
    cells = frame[frame.kind == "cells"]
    for column, value in where.items():
        cells = cells[cells[column] == value]
    return {(round((r.y + r.y_end) / 2), round((r.x + r.x_end) / 2)): r.value for r in cells.itertuples()}
