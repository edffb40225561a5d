"""The data a figure shows, read back from what matplotlib drew, as one CSV per figure for the reader to download.

Reading the drawn artists (not the frame a chapter meant to plot) makes the CSV the figure's own data: whatever
a cell computed, transformed or filtered before plotting, the file holds exactly the points on the page.

One row per drawn point, in long form:
    panel     the panel's label (its title) or "panel k"
    series    the legend label of the line, points, bars or band ("" when it has none)
    kind      line | points | bars | band | segment | hline | vline | cells
    x, y      the point in data coordinates (a bar or a cell: its left/bottom corner; hline: y only; vline: x only)
    x_end, y_end   a bar's or cell's right/top corner, or a segment's second end (else empty)
    value     the colour value of a heat-map cell or of a coloured scatter point (else empty)
    category  a bar's tick label on its category axis (else empty)
    x_label, y_label   the panel's axis labels, so the file reads without the figure
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd

from . import paths
from .cache import write_atomic
from .errors import ArgumentError

COLUMNS = ["panel", "series", "kind", "x", "y", "x_end", "y_end", "value", "category", "x_label", "y_label"]
NAME_PATTERN = re.compile(r"^fig-[a-z0-9-]+$")


def data_dir() -> Path:
    """Folder of the figures' CSV files: `figures/` inside the metrics folder, so it moves with it."""
    return paths.metrics_dir() / "figures"


def _label(artist, owners: dict | None = None) -> str:
    """An artist's legend label, or that of the container it belongs to (an error bar's markers and bars);
    matplotlib's automatic labels ("_child3", "_nolegend_") are no label."""
    label = artist.get_label() or ""
    if label.startswith("_"):
        label = (owners or {}).get(id(artist), "")
    return "" if label.startswith("_") else label


def _owners(ax) -> dict:
    """The legend label of each artist's container (errorbar, bar), keyed by the artist's id."""
    return {id(child): container.get_label() or "" for container in ax.containers
            for child in container.get_children()}


def _caps(ax) -> set:
    """The ids of error-bar caps: markers at the ends of the bars, whose data the bars' segments already hold."""
    from matplotlib.container import ErrorbarContainer

    return {id(cap) for c in ax.containers if isinstance(c, ErrorbarContainer) for cap in c.lines[1]}


def _tick_label(axis, position: float) -> str:
    """The tick label at `position` on `axis` (a category's name), or "" when no tick sits there."""
    for tick, text in zip(axis.get_ticklocs(), axis.get_ticklabels()):
        if abs(tick - position) < 1e-9 * max(1.0, abs(position)):
            return text.get_text()
    return ""


def _rows(points: np.ndarray, **fixed) -> list[dict]:
    """Rows of `points` (k x 2 array of x, y) with the `fixed` columns."""
    return [{**fixed, "x": float(x), "y": float(y)} for x, y in np.asarray(points, dtype=float).reshape(-1, 2)]


def _line_rows(ax, line, owners: dict) -> list[dict]:
    """A Line2D: a curve or markers in data coordinates, or a reference line across the axes (axhline/axvline)."""
    x, y = (np.asarray(v, dtype=float) for v in line.get_data())
    series = _label(line, owners)
    transform = line.get_transform()
    if transform == ax.get_yaxis_transform():   # x in axes fractions: a horizontal line at data y
        return [{"series": series, "kind": "hline", "x": np.nan, "y": float(y[0])}]
    if transform == ax.get_xaxis_transform():   # y in axes fractions: a vertical line at data x
        return [{"series": series, "kind": "vline", "x": float(x[0]), "y": np.nan}]
    kind = "points" if line.get_linestyle() in ("None", "none", "", " ") else "line"
    return _rows(np.column_stack([x, y]), series=series, kind=kind)


def _collection_rows(collection, owners: dict) -> list[dict]:
    """Scatter points, line segments (error bars), filled bands and heat-map cells."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection, QuadMesh

    series = _label(collection, owners)
    values = collection.get_array()
    if isinstance(collection, QuadMesh):  # a heat map: one row per cell, its corners and value
        corners = np.asarray(collection.get_coordinates(), dtype=float)   # (rows + 1) x (cols + 1) x 2
        values = np.asarray(values, dtype=float).reshape(corners.shape[0] - 1, corners.shape[1] - 1)
        return [{"series": series, "kind": "cells", "x": corners[i, j, 0], "y": corners[i, j, 1],
                 "x_end": corners[i + 1, j + 1, 0], "y_end": corners[i + 1, j + 1, 1], "value": values[i, j]}
                for i in range(values.shape[0]) for j in range(values.shape[1])]
    if isinstance(collection, LineCollection):
        return [{"series": series, "kind": "segment", "x": s[0, 0], "y": s[0, 1], "x_end": s[-1, 0], "y_end": s[-1, 1]}
                for s in (np.asarray(seg, dtype=float) for seg in collection.get_segments()) if len(s)]
    if isinstance(collection, PolyCollection):  # fill_between: the outline of the band
        return [row for path in collection.get_paths()
                for row in _rows(path.vertices, series=series, kind="band")]
    if isinstance(collection, PathCollection):  # scatter: its offsets, and the colour value when it has one
        rows = _rows(collection.get_offsets(), series=series, kind="points")
        if values is not None and len(values) == len(rows):
            for row, value in zip(rows, np.asarray(values, dtype=float)):
                row["value"] = float(value)
        return rows
    return []


def _image_rows(image) -> list[dict]:
    """An imshow image: one row per pixel cell, its corners from the image's extent, and its value."""
    values = np.asarray(image.get_array(), dtype=float)
    if values.ndim != 2:   # an RGB picture has no data value to offer
        return []
    left, right, bottom, top = image.get_extent()
    xs = np.linspace(left, right, values.shape[1] + 1)
    ys = np.linspace(bottom, top, values.shape[0] + 1) if image.origin == "lower" else np.linspace(top, bottom,
                                                                                                  values.shape[0] + 1)
    return [{"series": _label(image), "kind": "cells", "x": xs[j], "y": ys[i], "x_end": xs[j + 1], "y_end": ys[i + 1],
             "value": values[i, j]} for i in range(values.shape[0]) for j in range(values.shape[1])]


def _bar_rows(ax) -> list[dict]:
    """Bars (vertical or horizontal), each named by the legend label of its bar group and its category tick."""
    rows = []
    for container in ax.containers:
        if not hasattr(container, "patches"):   # error-bar containers hold lines, read with the lines
            continue
        horizontal = getattr(container, "orientation", "vertical") == "horizontal"
        for patch in container.patches:
            x0, y0 = patch.get_xy()
            w, h = patch.get_width(), patch.get_height()
            category = _tick_label(ax.yaxis, y0 + h / 2) if horizontal else _tick_label(ax.xaxis, x0 + w / 2)
            rows.append({"series": _label(container), "kind": "bars", "x": x0, "y": y0,
                         "x_end": x0 + w, "y_end": y0 + h, "category": category})
    return rows


def plotted_data(fig) -> pd.DataFrame:
    """Every point drawn in the data panels of `fig` (colour bars left out), as a long table with `COLUMNS`."""
    rows = []
    panels = [ax for ax in fig.axes if not hasattr(ax, "_colorbar")]
    for k, ax in enumerate(panels, 1):
        owners, caps = _owners(ax), _caps(ax)
        panel_rows = [row for line in ax.lines if id(line) not in caps for row in _line_rows(ax, line, owners)]
        panel_rows += [row for c in ax.collections for row in _collection_rows(c, owners)]
        panel_rows += [row for image in ax.images for row in _image_rows(image)]
        panel_rows += _bar_rows(ax)
        title = ax.get_title("left") or ax.get_title("center") or ax.get_title("right")  # the house puts it left
        fixed = {"panel": title or f"panel {k}", "x_label": ax.get_xlabel(), "y_label": ax.get_ylabel()}
        rows += [{**fixed, **row} for row in panel_rows]
    return pd.DataFrame(rows, columns=COLUMNS)


def save(fig, name: str, allow_empty: bool = False) -> Path:
    """Write `fig`'s plotted data to `data_dir()/<name>.csv` (atomically); `name` is the figure's name on the page.

    A figure with nothing drawn is refused, unless `allow_empty`: a figure whose panels say why there is nothing to
    plot (a comparison a parameter left out), whose CSV then holds the column names only."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ArgumentError("name", name, "the figure's name from its cell metadata, like 'fig-ch5-phase' "
                                          "(lower-case letters, digits and hyphens after 'fig-')")
    frame = plotted_data(fig)
    if frame.empty and not allow_empty:
        raise ValueError(f"figure {name!r} has no plotted data to save (nothing drawn in its panels)")
    return write_atomic(data_dir() / f"{name}.csv", lambda f: frame.to_csv(f, index=False, float_format="%.10g"))


def load(name: str, folder: Path | None = None) -> pd.DataFrame:
    """A figure's CSV as written by `save`."""
    return pd.read_csv(Path(folder or data_dir()) / f"{name}.csv")
