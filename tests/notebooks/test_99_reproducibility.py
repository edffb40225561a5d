"""The appendix's numbers against the chapters' own metrics."""

import pytest

import figure_checks
from helpers import book

pytestmark = pytest.mark.notebooks


def test_wall_time_figure_shows_each_chapters_recorded_wall_time(quick_book):
    """Figure 1 of the appendix: one bar per chapter, as long as the wall time its metrics record (to 0.1 s)."""
    quick_book.metrics("99_reproducibility")
    frame = figure_checks.load(quick_book, "fig-walltimes")
    bars = frame[frame.kind == "bars"]
    chapters = [nb.stem for nb in book.source_notebooks() if not book.reads_metrics(nb)]
    assert sorted(bars.category) == sorted(chapters)
    for bar in bars.itertuples():
        recorded = round(quick_book.metrics(bar.category)["wall_time_s"], 1)
        assert bar.x_end - bar.x == pytest.approx(recorded, rel=figure_checks.CSV_RTOL, abs=1e-12), bar.category
