"""Figures: small seaborn helpers that draw into a given `ax` (captions live in cell metadata)."""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

MEASURE_LABELS = {
    "numerical": "numerical rank",
    "hardmax": "hardmax rank",
    "effective": "effective rank",
    "stable": "stable rank",
}


def setup() -> None:
    """The book's plotting style."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "figure.figsize": (7.0, 4.0)})


def attention_heatmap(ax, matrix, label: str = "", vmax: float | None = None, cbar: bool = False):
    """One attention matrix `(n, n)`: rows are queries, columns are keys."""
    data = matrix.detach().cpu().numpy() if isinstance(matrix, torch.Tensor) else np.asarray(matrix)
    sns.heatmap(data, ax=ax, cmap="viridis", vmin=0, vmax=vmax, cbar=cbar, square=True,
                xticklabels=False, yticklabels=False)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if label:
        ax.set_title(label, fontsize=10)
    return ax


def barrier_line(ax, n_values, fraction: float, label: str = r"$(1-1/e)\,n$"):
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
