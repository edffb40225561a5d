"""helpers.experiments.ch04_random_attention against independent plain-numpy computations."""

import math

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch

from helpers import attention, book, parameters, rank, seeding, theory
from helpers.parameters import ParameterError
from helpers.cache import ResultStore
from helpers.experiments import ch04_random_attention as ri


def numpy_measures(matrix: np.ndarray, rtols=ri.RTOLS) -> dict:
    """Every rank measure of one matrix, by a plain loop over numpy's SVD."""
    sigma = np.linalg.svd(matrix, compute_uv=False)
    out = {"hardmax": float(len({int(np.argmax(row)) for row in matrix}))}
    for rtol in rtols:
        out[rank.label("numerical", rtol)] = float(sum(1 for s in sigma if s > rtol * sigma[0]))
    p = sigma / sigma.sum()
    p = p[p > 0]
    out["effective"] = float(np.exp(-(p * np.log(p)).sum()))
    out["stable"] = float((sigma**2).sum() / sigma[0] ** 2)
    return out


def one_hot(logits: np.ndarray) -> np.ndarray:
    hard = np.zeros_like(logits)
    for i, row in enumerate(logits):
        hard[i, int(np.argmax(row))] = 1.0
    return hard


def regenerate_logits(n, d_head, d_model, inputs, trials, seed) -> np.ndarray:
    """The unit-scale logits of `rank_point`, drawn again from its documented seed derivation."""
    gen = seeding.torch_generator(seeding.derive_seed(seed, "random_init", n, d_head, d_model, inputs))
    return attention.random_logits(n, d_head, d_model=d_model, inputs=inputs, weight_std=1.0, batch=trials,
                                   generator=gen).numpy()


def test_hardmax_measures_from_counts_match_an_svd_of_the_one_hot_matrix():
    gen = seeding.torch_generator(3)
    logits = torch.randn(5, 9, 9, generator=gen, dtype=torch.float64)
    logits[0, :, 2] += 10.0  # one column wins every row: rank 1
    fast = rank.hardmax_matrix_measures(logits, ri.ORDER, ri.RTOLS)
    for b in range(5):
        expected = numpy_measures(one_hot(logits[b].numpy()))
        for measure, value in expected.items():
            assert float(fast[measure][b]) == pytest.approx(value, rel=1e-12), (b, measure)
    assert float(fast["hardmax"][0]) == 1.0


@pytest.mark.parametrize("inputs", ["gaussian", "orthonormal", "anisotropic"])
def test_rank_point_matches_a_plain_numpy_recomputation(inputs):
    n, d_head, d_model, trials, seed = 7, 2, 9, 3, 11
    rows = ri.rank_point(n, d_head, d_model, inputs, trials, seed)
    logits = regenerate_logits(n, d_head, d_model, inputs, trials, seed)
    for scale in ri.SCALES:
        factor = ri.weight_std(scale, d_model) ** 2 / math.sqrt(d_head)
        per_matrix = []
        for b in range(trials):
            s = logits[b] * factor
            probs = np.exp(s - s.max(axis=1, keepdims=True))
            probs /= probs.sum(axis=1, keepdims=True)
            m = numpy_measures(probs)
            m["hardmax"] = float(len({int(np.argmax(row)) for row in logits[b]}))
            m["logit_sd"] = float(np.std(s, ddof=1))
            m["peak_n"] = n * float(probs.max(axis=1).mean())
            per_matrix.append(m)
        got = {r["measure"]: r for r in rows if r["attention"] == "softmax" and r["scale"] == scale}
        assert set(got) == set(ri.RANK_MEASURES) | set(ri.DIAGNOSTICS)
        for measure in got:
            values = np.array([m[measure] for m in per_matrix])
            assert got[measure]["mean"] == pytest.approx(values.mean(), rel=1e-9, abs=1e-12), (scale, measure)
            assert got[measure]["sd"] == pytest.approx(values.std(ddof=1), rel=1e-7, abs=1e-12), (scale, measure)
            assert got[measure]["trials"] == trials


def test_rank_point_is_seeded_and_hardmax_rows_do_not_depend_on_the_scale():
    a = ri.rank_point(16, 3, 16, "gaussian", 4, seed=0)
    b = ri.rank_point(16, 3, 16, "gaussian", 4, seed=0)
    c = ri.rank_point(16, 3, 16, "gaussian", 4, seed=1)
    assert a == b
    assert a != c
    hard = {r["scale"]: r for r in a if r["attention"] == "hardmax" and r["measure"] == "hardmax"}
    assert len({r["mean"] for r in hard.values()}) == 1 and set(hard) == set(ri.SCALES)
    sd = {r["scale"]: r["mean"] for r in a if r["attention"] == "softmax" and r["measure"] == "logit_sd"}
    assert sd["unit"] / sd["init"] == pytest.approx(16, rel=1e-9)   # logits scale like weight_std^2 = 1/d_model
    assert sd["raw"] / sd["unit"] == pytest.approx(16, rel=1e-9)


def test_rank_point_obeys_exact_limits():
    rows = ri.rank_point(32, 1, 32, "sphere", 8, seed=5)
    by = {(r["attention"], r["scale"], r["measure"]): r["mean"] for r in rows}
    assert by[("hardmax", "unit", "hardmax")] <= 2.0          # d_h = 1: the max or the min key wins
    for scale in ri.SCALES:
        assert by[("softmax", scale, "stable")] <= by[("softmax", scale, rank.label("numerical", 1e-8))] + 1e-9
        assert 1.0 <= by[("softmax", scale, "peak_n")] <= 32.0


def test_saturation_d_head_uses_the_last_point_as_reference_and_reports_the_edges():
    point = ri.saturation_d_head([1, 4, 16], [0.0, 50.0, 100.0])
    assert point.status == "inside" and point.value == pytest.approx(4 ** 1.9)
    assert ri.saturation_d_head([1, 2, 4], [0.0, 9.6, 10.0]).value == pytest.approx(2 ** (9.5 / 9.6))
    flat = ri.saturation_d_head([1, 2, 4], [10.0, 10.0, 10.0])
    assert (flat.status, flat.value) == ("at_first", 1.0), "saturated at the first point (was NaN before the merge)"


def test_layouts_weight_scales_and_trials():
    assert ri.layout_d_model("heads_fixed", 8, 4, 512) == 32
    assert ri.layout_d_model("dmodel_fixed", 8, 4, 512) == 512
    with pytest.raises(ValueError, match="multiple"):
        ri.layout_d_model("dmodel_fixed", 3, 4, 512)
    with pytest.raises(ValueError):
        ri.layout_d_model("other", 8, 4, 512)
    assert ri.weight_std("init", 64) == pytest.approx(1 / 8)
    assert ri.weight_std("raw", 64) == pytest.approx(8)
    with pytest.raises(ValueError):
        ri.weight_std("huge", 64)
    assert seeding.trials_for(64, 48) == 48 and seeding.trials_for(512, 48) == 6 and seeding.trials_for(4096, 48) == 4
    assert [seeding.trials_for(n, 5, reference_n=256, minimum=5) for n in (64, 256, 1024)] == [20, 5, 5]  # chapter 02's rule


def test_sweeps_cache_their_points_and_respond_to_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    before = torch.get_num_threads()
    small = ri.rank_sweep([12], [1, 2, 4], ["gaussian"], 12, 8, [0])
    assert torch.get_num_threads() == before                     # the thread setting is restored
    files = list((tmp_path / "random_init_rank").glob("*.json"))
    assert len(files) == 3
    again = ri.rank_sweep([12], [1, 2, 4], ["gaussian"], 12, 8, [0])
    assert again[small.columns].equals(small)   # the store sorts keys, so only the column order may differ
    bigger = ri.rank_sweep([16], [1, 2, 4], ["gaussian"], 16, 8, [0])
    assert not np.allclose(bigger.rank_over_n.dropna(), small.rank_over_n.dropna())
    hard = ri.select(small, attention="hardmax", scale="unit", measure="hardmax")
    assert (hard.rank_over_n <= 1.0).all()
    layouts = ri.layout_sweep([12], [1, 2, 4], 2, 4, "gaussian", 8, [0])
    assert set(layouts.layout) == set(ri.LAYOUTS)
    assert set(ri.select(layouts, layout="heads_fixed").d_model) == {2, 4, 8}


def test_pooled_averages_seeds():
    frame = ri._tidy(pd.DataFrame([
        dict(n=10, d_head=1, d_model=10, inputs="gaussian", attention="hardmax", scale="unit", measure="hardmax",
             mean=2.0, sd=0.0, trials=4, seed=0),
        dict(n=10, d_head=1, d_model=10, inputs="gaussian", attention="hardmax", scale="unit", measure="hardmax",
             mean=1.0, sd=0.0, trials=4, seed=1),
    ]))
    out = ri.pooled(frame)
    assert len(out) == 1 and out["mean"].iloc[0] == 1.5 and out.trials.iloc[0] == 8
    assert out.rank_over_n.iloc[0] == pytest.approx(0.15)


def _validation_cells():
    nb = nbformat.read(book.paths.NBS_DIR / "04_random_attention.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    return code[0], code[1]


@pytest.mark.parametrize("override, name", [
    ({"N_VALUES": "[4, 64]"}, "N_VALUES"),
    ({"D_HEADS": "[8]"}, "D_HEADS"),
    ({"INPUTS": ["gaussian", "cubes"]}, "INPUTS"),
    ({"D_MODEL": 32}, "D_MODEL"),                       # smaller than the largest d_h and n of full mode
    ({"D_HEADS": [3, 5], "D_MODEL": 512}, "D_HEADS"),   # no two divisors of D_MODEL for the layout comparison
    ({"HEADS": 0}, "HEADS"),
    ({"TRIALS": 1.5}, "TRIALS"),
    ({"LAYOUT_INPUT": "orthonormal"}, "LAYOUT_INPUT"),
])
def test_notebook_parameters_are_validated_before_any_computation(override, name):
    parameters, validation = _validation_cells()
    scope: dict = {}
    exec(parameters, scope)
    scope.update(override)
    with pytest.raises(ParameterError) as err:
        exec(validation, scope)
    assert err.value.name == name


def test_notebook_parameters_accept_papermill_strings_and_resolve_defaults():
    parameters, validation = _validation_cells()
    scope: dict = {}
    exec(parameters, scope)
    scope.update({"MODE": "quick", "N_VALUES": "[48, 24]", "INPUTS": "['sphere']"})
    exec(validation, scope)
    P = scope["P"]
    assert P.N_VALUES == [24, 48] and P.INPUTS == ["sphere"] and P.D_MODEL == 128
    assert theory.expected_hardmax_rank(48) / 48 > 1 - 1 / math.e
