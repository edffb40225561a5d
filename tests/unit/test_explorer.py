"""The explorer's grids: what the page looks up is what the theory computes, and the fragment is self-contained."""

import json
import math
import re

import pandas as pd
import pytest

from helpers import explorer, margin, theory


@pytest.fixture(scope="module")
def grids():
    predictions = pd.DataFrame([{"n": n, "d_head": d, "fraction": theory.predicted_rank_fraction(n, d),
                                 "critical": 7 * n} for n in (16, 64) for d in (1, 2, 3, 4)])
    codes = explorer.random_code_rows([16, 64], 0.1, l_values=(2.0, 9.0, 16.0))
    return explorer.data(predictions, codes, 0.1)


def test_grids_hold_the_theory_at_every_point(grids):
    assert grids["n"] == [16, 64] and grids["d"] == [1, 2, 3, 4] and grids["L"] == [2.0, 9.0, 16.0]
    for i, n in enumerate(grids["n"]):
        # d_h = 1 in closed form: the argmax is the largest or the smallest key, 2 (1 - 2^-n) / n
        assert grids["fraction"][i][0] == pytest.approx(2 * (1 - 0.5**n) / n, rel=1e-12)
        assert grids["plateau"][i] == pytest.approx(1 - (1 - 1 / n) ** n, rel=1e-12)
        assert grids["critical"][i] == 7 * n
        assert grids["least_L"][i] == pytest.approx(math.log((n - 1) * 0.9 / 0.1), rel=1e-12)
        for k, L in enumerate(grids["L"]):
            expected = margin.random_code_dim(n, L, 0.1)
            assert (grids["d_rand"][i][k] is None) == (not math.isfinite(expected))
            assert L > grids["least_L"][i] or grids["d_rand"][i][k] is None   # below the threshold: no dimension


def test_html_is_one_offline_fragment(grids):
    page = explorer.html(grids, element_id="x")
    loads = page.replace('"http://www.w3.org/2000/svg"', "")   # the SVG namespace is a name, not a request
    assert not re.search(r"(src|href)\s*=|https?://", loads), "the fragment loads nothing"
    payload = re.search(r'<script type="application/json" id="x-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(payload) == json.loads(json.dumps(grids))
    assert 'rankExplorer("x")' in page and explorer.SCRIPT.read_text() in page
