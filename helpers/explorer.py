"""The book's interactive explorer: the predicted hardmax rank of a random head and the widths the theory asks for,
at any n, d_h and logit scale L of the build's grid, drawn in the reader's browser by `explorer.js` (no library, no
network request; the script ships in this package and is inlined into the page).

The page gets every number from the build: `data(...)` packs the grids that chapter 03c computed, and `html(data)`
returns the controls, the data as JSON and the script. The browser only looks numbers up; it never interpolates.
"""

import json
import math
from pathlib import Path

import pandas as pd

from . import margin, theory

SCRIPT = Path(__file__).with_name("explorer.js")
L_GRID = tuple(float(L) for L in range(2, 41))   # the logit scales offered by the L slider


def data(predictions: pd.DataFrame, codes: pd.DataFrame, eps: float) -> dict:
    """The explorer's grids as plain lists.

    predictions: rows (n, d_head, fraction, critical), every d_head from 1 to d_max at each n;
    codes: rows (n, L, d_rand), d_rand None where no dimension is enough.
    """
    n_values = sorted(int(n) for n in predictions.n.unique())
    d_values = sorted(int(d) for d in predictions.d_head.unique())
    by_n = {n: part.sort_values("d_head") for n, part in predictions.groupby("n")}
    l_values = sorted(float(L) for L in codes.L.unique())
    return {
        "eps": eps,
        "n": n_values,
        "d": d_values,
        "L": l_values,
        "fraction": [[float(f) for f in by_n[n].fraction] for n in n_values],
        "plateau": [theory.plateau_fraction(n) for n in n_values],
        "critical": [int(by_n[n].critical.iloc[0]) for n in n_values],
        "least_L": [margin.least_logit_scale(n, eps) for n in n_values],
        "d_rand": [[_finite(codes[(codes.n == n) & (codes.L == L)].d_rand.item()) for L in l_values]
                   for n in n_values],
    }


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def random_code_rows(n_values, eps: float, l_values=L_GRID) -> pd.DataFrame:
    """The random-code width d_rand(n, L, eps) on the explorer's grid (closed form: no sweep needed)."""
    return pd.DataFrame([{"n": int(n), "L": float(L), "d_rand": _finite(margin.random_code_dim(int(n), L, eps))}
                         for n in n_values for L in l_values])


def html(grids: dict, element_id: str = "rank-explorer") -> str:
    """The explorer as one HTML fragment: its controls and readouts, the grids as JSON, and the script."""
    payload = json.dumps(grids, separators=(",", ":")).replace("</", "<\\/")
    return (f'<div class="rank-explorer" id="{element_id}"></div>\n'
            f'<script type="application/json" id="{element_id}-data">{payload}</script>\n'
            f'<script>\n{SCRIPT.read_text()}\nrankExplorer("{element_id}");\n</script>\n')
