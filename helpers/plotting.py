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
